//! A protocol's sans-IO node (a rank or the root) and what a world reads from its outputs.

use std::fmt;
use std::hash::Hash;
use std::net::SocketAddr;
use std::time::Duration;

use crate::ids::{ConnId, MsgOrigin};
use crate::time::Instant;
use crate::{Awaited, Blocked, Culprit};

use super::io::{Input, Output};

/// A protocol's own key for its listeners; the world only needs a port for each, which one
/// is the rank-to-rank listener an `accept=` schedule names connections of, and whether the
/// root's check-ins are taken in an order that matters.
pub trait ListenerKey: Copy + Eq + Ord + Hash + fmt::Debug + fmt::Display + 'static {
    /// Every listener of the protocol (the world reads which ports are peer listeners' from it).
    const ALL: &'static [Self];
    /// The port this listener gets in simulated worlds (the same on every host).
    fn port(self) -> u16;
    /// True for the listener where ranks dial one another (the one `accept=` schedules order).
    fn is_peer(self) -> bool;
    /// True for the root's listeners (the root shares host 0 with rank 0, so a world tells
    /// their listeners apart by this and the port).
    fn is_root(self) -> bool;
    /// True for a root listener whose check-ins' order can change what the root does (NCCL's
    /// early replies from 2.23): an explorer branches on it and `accept=root:` names them.
    /// Default: false, the root ends the same whatever order it took them in.
    fn check_in_order_matters(self) -> bool {
        false
    }
}

/// The ports whose accept order a world lets an `accept=` schedule (and an explorer) decide: the
/// protocol's rank-to-rank listeners and, where its check-in order matters
/// ([`ListenerKey::check_in_order_matters`]), the root's. Keys of one port can differ in
/// [`ListenerKey::is_peer`] (NCCL's ring listener is the peer one before 2.23 only) and in
/// whether check-in order matters (NCCL's root from 2.23): every port a peer key names at first,
/// then the key a node listens with decides ([`PeerPorts::listened`]; nodes listen before anyone
/// dials).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerPorts {
    peers: Vec<u16>,
    /// The root listener's port, once it listened with a key whose check-in order matters.
    root: Option<u16>,
}

impl PeerPorts {
    /// Every port a peer key of `L` has.
    pub fn of<L: ListenerKey>() -> PeerPorts {
        PeerPorts { peers: L::ALL.iter().filter(|l| l.is_peer()).map(|l| l.port()).collect(), root: None }
    }

    /// A node listened with `listener`: its port is a peer port exactly when the key is a peer's;
    /// the root's is ordered exactly when its check-in order matters.
    pub fn listened<L: ListenerKey>(&mut self, listener: L) {
        let port = listener.port();
        if listener.is_root() {
            self.root = listener.check_in_order_matters().then_some(port);
            return;
        }
        if self.contains(port) == listener.is_peer() {
            return;
        }
        self.peers.retain(|&p| p != port);
        if listener.is_peer() {
            self.peers.push(port);
        }
    }

    /// Whether connections to `port` are to a peer listener.
    pub fn contains(&self, port: u16) -> bool {
        self.peers.contains(&port)
    }

    /// Whether the root's listener at `port` takes its check-ins in an order that matters.
    pub fn root_ordered(&self, port: u16) -> bool {
        self.root == Some(port)
    }
}

/// The output type of node `N`.
pub type NodeOutput<N> = Output<<N as Node>::Listener, <N as Node>::Completion, <N as Node>::Event>;

/// A protocol's sans-IO node: inputs in, outputs out, time as a value, no I/O of its own.
///
/// After every input (or timeout) the world drains [`Node::poll_output`] until it returns
/// `None`, carries out each effect in order, records each observation, then sleeps until
/// [`Node::poll_timeout`].
pub trait Node {
    /// The protocol's listener key.
    type Listener: ListenerKey;
    /// The end of one of its operations.
    type Completion: Completed;
    /// One of its protocol events.
    type Event: Observed;

    /// Feeds one input at `now`.
    fn handle(&mut self, now: Instant, input: Input<'_, Self::Listener>);
    /// The next output; a [`super::Effect::Write`]'s bytes are put in `tx` (cleared first).
    fn poll_output(&mut self, tx: &mut Vec<u8>) -> Option<NodeOutput<Self>>;
    /// When the node next wants [`Node::handle_timeout`], if ever.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Lets the node act on its timers at `now`.
    fn handle_timeout(&mut self, now: Instant);
    /// What the node is blocked on, in one line, if anything (read when a run stops).
    fn waiting_for(&self) -> Option<String>;
    /// The rank that could unblock it, where the node knows one (for a wait-for graph).
    fn culprit(&self) -> Option<u32> {
        None
    }
    /// What the node is blocked on, typed, as the run record keeps it (read when a run stops).
    /// Default: [`Node::waiting_for`]'s words and [`Node::culprit`]'s rank.
    fn awaited(&self) -> Option<Awaited> {
        self.waiting_for().map(|text| Awaited::told(text, self.culprit().map(Culprit::Rank)))
    }
    /// Its unexpected list, head first, as (peer, tag) (read when a run stops).
    fn unexpected(&self) -> Vec<(i32, i32)> {
        Vec::new()
    }
    /// Whether the accept pending on `listener` would keep a connection whose bytes so far are
    /// `early` (all of them, in a zero-latency world), rather than only set it aside (as NCCL's
    /// receive puts a message it does not match on its unexpected list, where taking it later
    /// changes nothing). An explorer lets a listener take only connections it would keep, and
    /// none while it has none of those. Default: every connection.
    fn would_keep(&self, listener: Self::Listener, early: &[u8]) -> bool {
        let _ = (listener, early);
        true
    }
    /// True once nothing more will happen without a new operation (every operation done, or
    /// one failed).
    fn is_finished(&self) -> bool;
    /// The world is done with the node: it closes its connections and listeners (the effects
    /// follow from [`Node::poll_output`]). Default: nothing to close.
    fn close(&mut self, now: Instant) {
        let _ = now;
    }
}

/// How a world reads an operation's end.
pub trait Completed {
    /// The protocol's typed error.
    type Error: fmt::Display;
    /// The operation's number on its node: 0 is init (the root: its session), then the
    /// workload's operations from 1.
    fn op(&self) -> u32;
    /// Its bytes or its error.
    fn result(&self) -> Result<&[u8], &Self::Error>;
    /// Its bytes or its error, taken.
    fn into_result(self) -> Result<Vec<u8>, Self::Error>;
    /// The error as the run record states it for `rank`'s operation `op` (default: its
    /// `Display`).
    fn error_text(rank: u32, op: u32, error: &Self::Error) -> String {
        let _ = (rank, op);
        error.to_string()
    }
    /// True when the error is the node giving up waiting (an operation timeout a real world
    /// sets): a hang to the judge, not an end (default: none is).
    fn is_hang(error: &Self::Error) -> bool {
        let _ = error;
        false
    }
    /// The peer whose loss made `rank` fail with this error, when another's did (default:
    /// unknown).
    fn culprit(rank: u32, error: &Self::Error) -> Option<Culprit> {
        let _ = (rank, error);
        None
    }
    /// How a hang error's operation was blocked on that peer (default: otherwise).
    fn blocked(error: &Self::Error) -> Blocked {
        let _ = error;
        Blocked::Other
    }
}

/// How a world reads a protocol event: its connection and what the record keeps of it.
pub trait Observed {
    /// The node's connection it is about, if any.
    fn conn(&self) -> Option<ConnId>;
    /// What the judge and the record learn from it.
    fn noted(&self) -> Noted;
    /// A connection dropped as a stranger's (not of the session: a wrong secret, garbage, a
    /// header that stalled): where it came from and why, for the worlds that count and show
    /// them (default: the event is none).
    fn stranger(&self) -> Option<(SocketAddr, String)> {
        None
    }
}

/// What the record and the judge keep of a protocol event, in the protocol's own identities.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Noted {
    /// A point-to-point message was handed to the event's connection.
    Sent {
        /// The receiving rank.
        to: u32,
        /// The message's tag.
        tag: i32,
        /// The operation (and step) the message belongs to.
        origin: MsgOrigin,
        /// The message's payload size, in bytes.
        size: usize,
    },
    /// A receive took the message on the event's connection (perhaps not the one meant).
    Taken {
        /// The sending rank.
        from: u32,
        /// The message's tag.
        tag: i32,
        /// The receiving operation (and step) that took it.
        origin: MsgOrigin,
        /// The payload size taken, in bytes.
        size: usize,
        /// The payload size the receive expected, in bytes.
        expected_size: usize,
    },
    /// A drain before close gave up at its bound (fail-open).
    DrainGaveUp {
        /// The peer the drained connection leads to.
        to: u32,
        /// The tag of the message sent on it.
        tag: i32,
        /// How long the drain waited.
        waited: Duration,
        /// Bytes still unacknowledged when it gave up.
        unacked: usize,
    },
    /// A drain before close completed after `waited`.
    DrainCompleted {
        /// The peer the drained connection leads to.
        to: u32,
        /// How long the drain waited.
        waited: Duration,
    },
    /// A connection that is not part of the session was dropped, for this reason.
    Stray {
        /// Why it was dropped.
        error: String,
    },
    /// Nothing the record keeps (a trace line only).
    Other,
}
