//! NVSHMEM's own UID bootstrap plugin (`nvshmem_bootstrap_uid.so.3` from the
//! `nvidia-nvshmem-cu12` wheels, fetched by `scripts/fetch-nvshmem.sh`) as a rank.
//!
//! - [`abi`]: the C structs the plugin reads. [`library`]: `dlopen` and the calls.
//! - [`rank`]: the body of a rank process: init, then the workload's collectives, one
//!   [`RankLine`] per line on stdout as each call begins and ends.
//! - [`supervise`]: the parent's side: reads those records, captures the plugin's stderr, turns
//!   its messages into typed [`PluginError`]s, and kills a rank that makes no progress within
//!   the operation timeout (NVSHMEM has none: a lost message blocks it forever).
//! - [`locate`]: a version in the cache or a path to a user's build.

pub mod abi;
pub mod conformance;
mod held;
pub mod library;
mod locate;
pub mod rank;
mod supervise;

pub use locate::{cache_dir, detect_family, locate, PluginFamily, PluginSpec};
pub use rank::{run_rank, PluginRankConfig, RankLine, UidSource};
pub use supervise::{classify_stderr, supervise, supervise_with, Held, PluginRankRun, AFTER_PEER_FAILED, ROOT_FIRST};

/// What went wrong in or around a plugin rank.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// The shared object could not be opened or lacks a symbol.
    #[error("cannot load the plugin {path}: {reason}")]
    Load {
        /// The shared object's path.
        path: String,
        /// The loader's error.
        reason: String,
    },
    /// The handle lacks a function the workload needs.
    #[error("the plugin's handle has no {0}")]
    Missing(&'static str),
    /// A call returned non-zero and printed nothing we recognise.
    #[error("{call} returned {rc}")]
    Call {
        /// The plugin function called.
        call: &'static str,
        /// Its return code.
        rc: i32,
    },
    /// 3.7 and later: the message's size differs from the receive buffer's.
    #[error("message size mismatch: received {got} bytes, expected {expected} bytes (the plugin's words)")]
    SizeMismatch {
        /// The message's size, in bytes.
        got: usize,
        /// The receive buffer's size, in bytes.
        expected: usize,
    },
    /// 3.4/3.5: the message is longer than the receive buffer.
    #[error("message truncated: received {got} bytes instead of {expected} (the plugin's words)")]
    Truncated {
        /// The message's size, in bytes.
        got: usize,
        /// The receive buffer's size, in bytes.
        expected: usize,
    },
    /// A connection with a peer failed under the plugin (reset or closed): that peer stopped,
    /// died or was stopped, and this rank gave up because of it.
    #[error("its connection with {} failed: {reason} (the plugin's words): that peer stopped or died", show_addr(.addr))]
    PeerLost {
        /// The peer's address, when the plugin printed one that parses.
        addr: Option<std::net::SocketAddr>,
        /// The plugin's words for the failure.
        reason: String,
    },
    /// 3.8: the per-call tag counter passed 2^31 - 1.
    #[error("UID bootstrap message tag space exhausted (the plugin's words)")]
    TagSpaceExhausted,
    /// The rank process exited on its own in the middle of the run (NVSHMEM calls `exit(-1)` on
    /// a unique-ID version mismatch).
    #[error("the rank process exited with status {code}{}", last_words(.stderr))]
    Exited {
        /// The process's exit status.
        code: i32,
        /// The last line the process wrote to stderr, if any.
        stderr: Option<String>,
    },
    /// The rank process died of a signal.
    #[error("the rank process was killed by signal {signal}{}", last_words(.stderr))]
    Crashed {
        /// The signal number.
        signal: i32,
        /// The last line the process wrote to stderr, if any.
        stderr: Option<String>,
    },
    /// Bad arguments to the plugin driver.
    #[error("{0}")]
    Usage(String),
}

fn show_addr(a: &Option<std::net::SocketAddr>) -> String {
    a.map_or("a peer".to_string(), |a| a.to_string())
}

fn last_words(stderr: &Option<String>) -> String {
    stderr.as_ref().map_or(String::new(), |l| format!("; its last stderr line: {l}"))
}
