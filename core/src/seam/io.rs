//! What crosses the seam: inputs from the world, and a node's outputs in two typed arms,
//! effects for the world and observations for the judge and the trace.

use std::net::SocketAddr;
use std::time::Duration;

use crate::ids::ConnId;
use crate::time::Instant;

/// What happened in the outside world, for a node whose listeners are keyed by `L`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input<'a, L> {
    /// A listener is open at `addr` (the address peers must dial).
    Listening {
        /// The listener's key.
        listener: L,
        /// The address peers must dial.
        addr: SocketAddr,
    },
    /// A listener could not be opened.
    ListenFailed {
        /// The listener's key.
        listener: L,
        /// Why, as the world reports it.
        reason: String,
    },
    /// The connection requested by [`Effect::Accept`] was taken from the accept queue.
    Accepted {
        /// The node's name for the connection.
        conn: ConnId,
        /// The dialling peer's address.
        from: SocketAddr,
    },
    /// The connection requested by [`Effect::Connect`] is established.
    Connected {
        /// The node's name for the connection.
        conn: ConnId,
    },
    /// Connecting failed for good (after the driver's retries on "refused").
    ConnectFailed {
        /// The node's name for the connection.
        conn: ConnId,
        /// Why, as the world reports it.
        reason: String,
    },
    /// Bytes arrived on a connection, in order, in any chunking.
    Received {
        /// The node's name for the connection.
        conn: ConnId,
        /// The bytes, in arrival order.
        bytes: &'a [u8],
    },
    /// The connection ended for reading: the peer closed its side (EOF), it was reset, or it
    /// timed out; every byte that came before was delivered first.
    PeerClosed {
        /// The node's name for the connection.
        conn: ConnId,
        /// Why it ended.
        reason: CloseReason,
    },
    /// The send queue of a connection in [`Effect::Drain`] reached zero unacknowledged bytes.
    Drained {
        /// The node's name for the connection.
        conn: ConnId,
        /// How long the drain waited.
        waited: Duration,
    },
    /// The drain deadline passed with bytes still unacknowledged.
    DrainTimedOut {
        /// The node's name for the connection.
        conn: ConnId,
        /// How long the drain waited.
        waited: Duration,
        /// Bytes still unacknowledged at the deadline.
        unacked: usize,
    },
}

/// Why a connection ended for reading ([`Input::PeerClosed`]), as the world's read saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CloseReason {
    /// The peer closed its side in order: a read returned 0 (end of stream, its FIN).
    Eof,
    /// The connection was reset (`ECONNRESET`): the peer's kernel sent RST, e.g. its
    /// process closed with unread bytes, or died.
    Reset,
    /// This host's kernel gave up on the connection (`ETIMEDOUT`, or the ICMP error it last
    /// had, such as `EHOSTUNREACH`): data went unacknowledged through every retransmission
    /// (Linux's `tcp_retries2`), so the peer's host or the path between them is down; the peer
    /// never closed it.
    TimedOut,
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CloseReason::Eof => "closed by the peer",
            CloseReason::Reset => "reset",
            CloseReason::TimedOut => "timed out",
        })
    }
}

/// An [`Input`] that owns its bytes, for worlds that queue inputs before feeding them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnedInput<L> {
    /// See [`Input::Listening`].
    Listening {
        /// The listener's key.
        listener: L,
        /// The address peers must dial.
        addr: SocketAddr,
    },
    /// See [`Input::ListenFailed`].
    ListenFailed {
        /// The listener's key.
        listener: L,
        /// Why, as the world reports it.
        reason: String,
    },
    /// See [`Input::Accepted`].
    Accepted {
        /// The node's name for the connection.
        conn: ConnId,
        /// The dialling peer's address.
        from: SocketAddr,
    },
    /// See [`Input::Connected`].
    Connected {
        /// The node's name for the connection.
        conn: ConnId,
    },
    /// See [`Input::ConnectFailed`].
    ConnectFailed {
        /// The node's name for the connection.
        conn: ConnId,
        /// Why, as the world reports it.
        reason: String,
    },
    /// See [`Input::Received`].
    Received {
        /// The node's name for the connection.
        conn: ConnId,
        /// The bytes, in arrival order.
        bytes: Vec<u8>,
    },
    /// See [`Input::PeerClosed`].
    PeerClosed {
        /// The node's name for the connection.
        conn: ConnId,
        /// Why it ended.
        reason: CloseReason,
    },
    /// See [`Input::Drained`].
    Drained {
        /// The node's name for the connection.
        conn: ConnId,
        /// How long the drain waited.
        waited: Duration,
    },
    /// See [`Input::DrainTimedOut`].
    DrainTimedOut {
        /// The node's name for the connection.
        conn: ConnId,
        /// How long the drain waited.
        waited: Duration,
        /// Bytes still unacknowledged at the deadline.
        unacked: usize,
    },
}

impl<L: Copy> OwnedInput<L> {
    /// The borrowed [`Input`] a node's `handle` takes.
    #[inline]
    pub fn as_input(&self) -> Input<'_, L> {
        match self {
            OwnedInput::Listening { listener, addr } => Input::Listening { listener: *listener, addr: *addr },
            OwnedInput::ListenFailed { listener, reason } => {
                Input::ListenFailed { listener: *listener, reason: reason.clone() }
            }
            OwnedInput::Accepted { conn, from } => Input::Accepted { conn: *conn, from: *from },
            OwnedInput::Connected { conn } => Input::Connected { conn: *conn },
            OwnedInput::ConnectFailed { conn, reason } => Input::ConnectFailed { conn: *conn, reason: reason.clone() },
            OwnedInput::Received { conn, bytes } => Input::Received { conn: *conn, bytes },
            OwnedInput::PeerClosed { conn, reason } => Input::PeerClosed { conn: *conn, reason: *reason },
            OwnedInput::Drained { conn, waited } => Input::Drained { conn: *conn, waited: *waited },
            OwnedInput::DrainTimedOut { conn, waited, unacked } => {
                Input::DrainTimedOut { conn: *conn, waited: *waited, unacked: *unacked }
            }
        }
    }
}

/// What a node asks the world to do.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Effect<L> {
    /// Open a listener; answer with [`Input::Listening`] (or [`Input::ListenFailed`]).
    Listen {
        /// The listener's key.
        listener: L,
    },
    /// Take the next connection from the listener's accept queue, name it `conn`, answer with
    /// [`Input::Accepted`]. At most one is outstanding per listener.
    Accept {
        /// The listener's key.
        listener: L,
        /// The name the node gives the accepted connection.
        conn: ConnId,
    },
    /// Close a listener (connections still queued are reset).
    CloseListener {
        /// The listener's key.
        listener: L,
    },
    /// Connect (the world retries "refused" with core's `ConnectRetry`); answer with
    /// [`Input::Connected`] or [`Input::ConnectFailed`].
    Connect {
        /// The name the node gives the new connection.
        conn: ConnId,
        /// The address to dial.
        addr: SocketAddr,
    },
    /// Queue `len` bytes for sending after any queued before on this connection; the bytes
    /// are in the buffer the world passed to [`crate::seam::Node::poll_output`].
    Write {
        /// The node's name for the connection.
        conn: ConnId,
        /// How many bytes (all of `tx`, the buffer `poll_output` filled).
        len: usize,
    },
    /// Wait until every byte written on `conn` is acknowledged (SIOCOUTQ reads 0) or until
    /// `deadline`; answer with [`Input::Drained`] or [`Input::DrainTimedOut`].
    Drain {
        /// The node's name for the connection.
        conn: ConnId,
        /// When to give up waiting.
        deadline: Instant,
    },
    /// Shut down and close the connection after the bytes already queued.
    Close {
        /// The node's name for the connection.
        conn: ConnId,
    },
}

/// What a node reports for the judge and the trace; the world only records and renders it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Observation<C, E> {
    /// An operation ended (init is operation 0; the root's session is its only one), read
    /// through [`crate::seam::Completed`].
    Completed(C),
    /// A protocol event (messages sent and taken, drains, strays, anything worth a trace
    /// line), read through [`crate::seam::Observed`].
    Event(E),
}

/// One output of a node: an effect the world carries out, or an observation it records.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Output<L, C, E> {
    /// For the world.
    Effect(Effect<L>),
    /// For the judge and the trace.
    Observe(Observation<C, E>),
}
