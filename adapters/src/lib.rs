//! bootsim-adapters: the real worlds of the async driver (bootsim-driver): real tokio sockets
//! with the SIOCOUTQ drain, the TUN wire, NVSHMEM's plugin as ranks, and the ibverbs check.
//!
//! - [`tokio_sockets`]: the real-socket backend and its one-rank-per-process session.
//! - [`os`]: what the OS and launcher give a real rank (SIOCOUTQ drain, connect retry over
//!   errno, interface selection, launcher rank/size).
//! - [`wire`], [`wire_run`]: the TUN userspace wire between network namespaces, and N ranks on it.
//! - [`plugin`]: NVSHMEM's shipped UID bootstrap plugin as a rank. [`probe`]: the report's
//!   accept-order reproducer. [`rdma`]: the ibverbs check.
//! - [`nvshmem`]: NVSHMEM's rank and root built for the protocol-blind driver, and its run types.
//! - [`local_run`]: any protocol's root and ranks as tasks of this process on loopback.
//! - [`skip`]: a test that cannot run its real part here fails under CI and is counted as
//!   skipped elsewhere.

#![warn(missing_docs)]

pub mod local_run;
pub mod nvshmem;
pub mod os;
pub mod plugin;
pub mod probe;
pub mod rdma;
pub mod skip;
pub mod tokio_sockets;
pub mod wire;
pub mod wire_run;
