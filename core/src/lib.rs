//! bootsim-core: NVSHMEM's UID bootstrap (and its variants) as pure, sans-IO state machines.
//!
//! Nothing here performs I/O, reads a clock, spawns a thread, draws a random number or
//! iterates a hash map: time comes in as [`Instant`] values and every effect goes out as an
//! output the driver carries out.

pub mod qp_handle;
pub mod time;

pub use qp_handle::QpHandle;
pub use time::Instant;
