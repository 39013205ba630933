//! What the rendezvous nodes say across the seam: their listeners, the end of an operation,
//! their protocol events and their typed errors, each read through the seam's traits.

use std::fmt;
use std::net::SocketAddr;

use bootsim_core::codec::WireError;
use bootsim_core::seam::{Completed, ListenerKey, Noted, Observed};
use bootsim_core::{ConnId, MsgOrigin, OpId, OpType, OpTypeDef};

/// The root's rendezvous listener in simulated worlds.
pub const ROOT_PORT: u16 = 6000;
/// A rank's peer listener in simulated worlds.
pub const PEER_PORT: u16 = 6001;

/// The protocol's listeners: the seam's opaque [`ListenerKey`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Listener {
    /// The root's, where every rank checks in.
    Rendezvous,
    /// A rank's, where its peers dial it, one connection per message.
    Peer,
}

impl ListenerKey for Listener {
    const ALL: &'static [Listener] = &[Listener::Rendezvous, Listener::Peer];

    fn port(self) -> u16 {
        match self {
            Listener::Rendezvous => ROOT_PORT,
            Listener::Peer => PEER_PORT,
        }
    }

    fn is_peer(self) -> bool {
        self == Listener::Peer
    }

    fn is_root(self) -> bool {
        self == Listener::Rendezvous
    }
}

impl fmt::Display for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Listener::Rendezvous => "rendezvous listener",
            Listener::Peer => "peer listener",
        })
    }
}

/// Why an operation (or the root's session) failed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Error {
    /// A listener could not be opened.
    #[error("cannot open the {listener}: {reason}")]
    Listen {
        /// Which one.
        listener: Listener,
        /// What the world said.
        reason: String,
    },
    /// A connection could not be established (after the world's retries).
    #[error("cannot connect to {whom} at {addr}: {reason}")]
    Connect {
        /// "the root" or "rank N".
        whom: String,
        /// Where it dialed.
        addr: SocketAddr,
        /// What the world said.
        reason: String,
    },
    /// The root closed its connection before the table came.
    #[error("the root closed the connection before sending the address table")]
    RootClosed,
    /// The connection to the root timed out before the table came: this rank's kernel gave up
    /// retransmitting to it (`ETIMEDOUT`); the root did not close it.
    #[error("the connection to the root at {root} timed out before the address table came: this rank's kernel gave up retransmitting to it (ETIMEDOUT), so the root's host, or the path between them, is down")]
    RootTimedOut {
        /// The root's address.
        root: SocketAddr,
    },
    /// The root's table did not decode.
    #[error("bad address table from the root: {0}")]
    Table(WireError),
    /// A message matched by (peer, tag) had the wrong size.
    #[error("message from rank {from} tag {tag:#x} has {got} bytes, expected {expected}")]
    Size {
        /// Its sender.
        from: u32,
        /// Its tag.
        tag: i32,
        /// Its size.
        got: usize,
        /// The size the receive expected.
        expected: usize,
    },
}

/// The end of one operation: init (operation 0, the root's whole session) or an exchange round.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Completion {
    /// 0 for init, then round `k` is operation `k`.
    pub op: u32,
    /// The bytes received (a round: every peer's payload in rank order), or why it failed.
    pub result: Result<Vec<u8>, Error>,
}

impl Completed for Completion {
    type Error = Error;

    fn op(&self) -> u32 {
        self.op
    }

    fn result(&self) -> Result<&[u8], &Error> {
        self.result.as_deref()
    }

    fn into_result(self) -> Result<Vec<u8>, Error> {
        self.result
    }

    fn error_text(rank: u32, op: u32, error: &Error) -> String {
        match op {
            0 => format!("rank {rank} init: {error}"),
            k => format!("rank {rank} exchange #{}: {error}", k - 1),
        }
    }
}

/// A protocol event, for the judge (messages sent and taken) and the trace.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// The root took rank `rank`'s check-in.
    CheckedIn {
        /// The rank.
        rank: u32,
    },
    /// The root sent the table to every rank.
    TableSent,
    /// A rank has the table: init is done.
    Ready,
    /// A message of round `round` was written to `to` on `conn` (its own connection).
    Sent {
        /// The connection.
        conn: ConnId,
        /// The receiving rank.
        to: u32,
        /// Its tag.
        tag: i32,
        /// Its round (from 1).
        round: u32,
        /// Payload bytes.
        size: usize,
    },
    /// A complete message came on `conn`; it waits in the unexpected list until a receive
    /// takes it (at once, if one wants it).
    Arrived {
        /// The connection.
        conn: ConnId,
        /// Its sender.
        from: u32,
        /// Its tag.
        tag: i32,
    },
    /// Round `round`'s receive for (`from`, `tag`) took the message that came on `conn`.
    Taken {
        /// The connection.
        conn: ConnId,
        /// The peer the receive asked for (and the message's sender).
        from: u32,
        /// The tag asked for.
        tag: i32,
        /// The receiving round.
        round: u32,
        /// Bytes taken.
        size: usize,
        /// Bytes expected.
        expected_size: usize,
    },
    /// A connection that is not part of the session was dropped.
    Stray {
        /// The connection.
        conn: ConnId,
        /// Why.
        error: String,
    },
}

/// The protocol's one operation type: an exchange round.
pub const ROUND: OpType = OpType::new(&OpTypeDef { code: 0, name: "exchange", step: "step", bytes_unused: false });

/// A round's messages as the record names them: the round is the operation, one step each.
pub fn origin(round: u32) -> MsgOrigin {
    MsgOrigin { op: OpId(round), kind: ROUND, step: 1 }
}

impl Observed for Event {
    fn conn(&self) -> Option<ConnId> {
        match self {
            Event::Sent { conn, .. }
            | Event::Arrived { conn, .. }
            | Event::Taken { conn, .. }
            | Event::Stray { conn, .. } => Some(*conn),
            Event::CheckedIn { .. } | Event::TableSent | Event::Ready => None,
        }
    }

    fn noted(&self) -> Noted {
        match *self {
            Event::Sent { to, tag, round, size, .. } => Noted::Sent { to, tag, origin: origin(round), size },
            Event::Taken { from, tag, round, size, expected_size, .. } => {
                Noted::Taken { from, tag, origin: origin(round), size, expected_size }
            }
            Event::Stray { ref error, .. } => Noted::Stray { error: error.clone() },
            _ => Noted::Other,
        }
    }
}

impl fmt::Display for Event {
    /// The event in trace words.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::CheckedIn { rank } => write!(f, "check-in of rank {rank}"),
            Event::TableSent => f.write_str("address table sent to every rank"),
            Event::Ready => f.write_str("ready: address table received"),
            Event::Sent { to, tag, round, size, .. } => {
                write!(f, "sent exchange #{} to rank {to} tag {tag:#x} ({size} bytes)", round - 1)
            }
            Event::Arrived { from, tag, .. } => write!(f, "message from rank {from} tag {tag:#x} arrived"),
            Event::Taken { from, tag, round, size, .. } => {
                write!(f, "exchange #{} took message from rank {from} tag {tag:#x} ({size} bytes)", round - 1)
            }
            Event::Stray { error, .. } => write!(f, "dropped stray connection: {error}"),
        }
    }
}
