//! NVSHMEM's listening sockets.

use std::fmt;

/// The listening sockets of the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Listener {
    /// A rank's long-lived listener: the ring predecessor and every point-to-point message.
    Peers,
    /// A rank's short-lived listener where the root sends the ring successor's address.
    FromRoot,
    /// The root's rendezvous listener, at the unique ID's address.
    Rendezvous,
}

impl fmt::Display for Listener {
    /// The listener's role in words: `peers listener`, `from-root listener`, `rendezvous listener`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Listener::Peers => "peers listener",
            Listener::FromRoot => "from-root listener",
            Listener::Rendezvous => "rendezvous listener",
        })
    }
}
