//! The wire's error type.

use std::io;
use std::net::Ipv4Addr;

/// What can go wrong setting up or running a wire.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// A step of a host namespace's setup failed.
    #[error("setting up the namespace of {addr}: {step}: {source}")]
    Setup {
        /// The host's address.
        addr: Ipv4Addr,
        /// The step that failed.
        step: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Some other system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The wire was asked for something it cannot be.
    #[error("invalid wire configuration: {0}")]
    Config(String),
    /// A thread of the wire panicked (or went away before answering).
    #[error("{0} panicked or exited early")]
    Panicked(String),
    /// There is no such host number.
    #[error("no host {0} on this wire")]
    NoSuchHost(u8),
}

impl WireError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        WireError::Io { what: what.into(), source }
    }
}
