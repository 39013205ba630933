//! bootsim-adapters: the async driver that runs bootsim-core over any sockets,
//! real tokio sockets with the SIOCOUTQ drain, and the ibverbs check.
//!
//! - [`driver`]: the async driver, generic over a socket [`driver::Backend`].
//! - [`tokio_sockets`]: the real-socket backend and its one-rank-per-process session.
//! - [`os`]: what the OS and launcher give a real rank (SIOCOUTQ drain, connect retry over
//!   errno, interface selection, launcher rank/size).
//! - [`wire`], [`wire_run`]: the TUN userspace wire between network namespaces, and N ranks on it.
//! - [`plugin`]: NVSHMEM's shipped UID bootstrap plugin as a rank. [`probe`]: the report's
//!   accept-order reproducer. [`rdma`]: the ibverbs check.
//! - [`skip`]: a test that cannot run its real part here fails under CI and is counted as
//!   skipped elsewhere.

pub mod driver;
pub mod os;
pub mod plugin;
pub mod probe;
pub mod rdma;
pub mod skip;
pub mod tokio_sockets;
pub mod wire;
pub mod wire_run;
