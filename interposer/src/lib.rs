//! The accept() interposer's pure logic, shared by the preloaded library
//! (`interposer/preload`, `libbootsim_preload.so`) and the CLI that reads its log.
//!
//! - [`policy`]: the interposer's policy string: the wire's grammar
//!   ([`bootsim_core::accept_policy`]) plus `permute=SEED[:WINDOW[:WAIT]]` and `peek=DUR`.
//! - [`schedule`]: numbers arrivals, plans holds, releases and permutes them, and says which
//!   connection the program gets next. No sockets, no clock: time comes in as a [`Duration`]
//!   since start, so the same arrivals give the same order.
//! - [`peek`]: reads NVSHMEM's message header from a connection's first bytes.
//! - [`log`]: the decision log's lines, written by the library and read back by the parent.
//!
//! [`Duration`]: std::time::Duration

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod log;
pub mod peek;
pub mod policy;
pub mod schedule;

pub use log::{Decision, Event, LogSummary};
pub use policy::InterposerPolicy;
pub use schedule::Schedule;

/// The environment variable holding the policy string.
pub const POLICY_ENV: &str = "BOOTSIM_ACCEPT_POLICY";
/// The environment variable naming the decision log (appended to; one line per decision).
pub const LOG_ENV: &str = "BOOTSIM_ACCEPT_LOG";
/// The environment variable giving this process's host number (the `D` of `pair:S>D`); it also
/// makes the library bind outgoing loopback connections to 127.0.0.HOST, so a peer's host is
/// its address's last octet as on the wire.
pub const HOST_ENV: &str = "BOOTSIM_HOST";
/// The environment variable that points the CLI at the library (else it looks beside itself).
pub const LIBRARY_ENV: &str = "BOOTSIM_PRELOAD";
/// The library's file name.
pub const LIBRARY_FILE: &str = "libbootsim_preload.so";
