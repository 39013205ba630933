//! bootsim-adapters: the async driver that runs bootsim-core over any sockets,
//! real tokio sockets with the SIOCOUTQ drain, and the ibverbs check.
//!
//! - [`net`]: leaf utilities for the real-socket backend (TX drain, connect
//!   retry, interface selection, launcher rank/size).

pub mod driver;
pub mod os;
pub mod plugin;
pub mod probe;
pub mod rdma;
pub mod tokio_sockets;
pub mod wire;
pub mod wire_run;
