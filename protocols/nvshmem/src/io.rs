//! The contract between a state machine and its driver: inputs in, outputs out, time as a value.
//!
//! After every input (or [`crate::Rank::push`], or a timeout), the driver drains `poll_output`
//! until it returns `None`, carries out each effect in order, then sleeps until `poll_timeout`.
//! Inputs and outputs are the seam's types (`bootsim_core::seam`) over NVSHMEM's listeners,
//! completions and events.

use std::net::SocketAddr;
use std::time::Duration;

use bootsim_core::codec::WireError;
use bootsim_core::ids::{ConnId, MsgOrigin, OpId};

use crate::error::BootstrapError;
use crate::listener::Listener;
use crate::OpKind;

/// What happened in the outside world: the seam's [`bootsim_core::seam::Input`] over NVSHMEM's listeners.
pub type Input<'a> = bootsim_core::seam::Input<'a, Listener>;

/// An [`Input`] that owns its bytes, for drivers that queue inputs before feeding them.
pub type OwnedInput = bootsim_core::seam::OwnedInput<Listener>;

/// What a node asks the world to do: the seam's [`bootsim_core::seam::Effect`] over NVSHMEM's
/// listeners.
pub type Effect = bootsim_core::seam::Effect<Listener>;

/// What a node reports for the judge and the trace: the seam's
/// [`bootsim_core::seam::Observation`] of NVSHMEM's completions and events.
pub type Observation = bootsim_core::seam::Observation<Completion, Event>;

/// One output of a [`crate::Rank`] or the [`crate::Root`]: the seam's
/// [`bootsim_core::seam::Output`], an [`Effect`] or an [`Observation`].
pub type Output = bootsim_core::seam::Output<Listener, Completion, Event>;

/// The outputs a node has made and the driver has not yet polled: the seam's
/// [`bootsim_core::seam::Outbox`] of NVSHMEM's outputs.
pub(crate) type Outbox = bootsim_core::seam::Outbox<Listener, Completion, Event>;

/// The end of an operation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Completion {
    /// Which operation.
    pub op: OpId,
    /// Its kind.
    pub kind: OpKind,
    /// The received bytes (allgather and alltoall: `nranks` slices; recv: the buffer) or the error.
    pub result: Result<Vec<u8>, BootstrapError>,
}

/// Observable protocol events, for traces, oracles and explanations.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// A point-to-point message was handed to a connection.
    MessageSent {
        /// The rank's name for the connection.
        conn: ConnId,
        /// The receiving rank.
        to: u32,
        /// The tag the message carries.
        tag: i32,
        /// The operation and step that sent it.
        origin: MsgOrigin,
        /// The payload's size, in bytes.
        size: usize,
    },
    /// A receive took the message on `conn` for `origin` (which may not be the message meant for it).
    MessageTaken {
        /// The rank's name for the connection.
        conn: ConnId,
        /// The peer the receive asked for.
        from: u32,
        /// The tag the receive asked for.
        tag: i32,
        /// The operation and step of the receive.
        origin: MsgOrigin,
        /// The payload's size, in bytes.
        size: usize,
        /// The receive buffer's size, in bytes.
        expected_size: usize,
    },
    /// A connection whose (peer, tag) did not match was appended to the unexpected list.
    UnexpectedQueued {
        /// The rank's name for the connection.
        conn: ConnId,
        /// The sending rank its header names (`u32::MAX` if negative).
        from: u32,
        /// The tag its header carries.
        tag: i32,
        /// The (peer, tag) the receive waits for.
        waiting_for: (u32, i32),
        /// The unexpected list's length, this connection included.
        list_len: usize,
    },
    /// A shorter message was accepted into a longer buffer (lenient size), the rest left as it was.
    ShortMessageAccepted {
        /// The rank's name for the connection.
        conn: ConnId,
        /// The peer the receive asked for.
        from: u32,
        /// The tag the receive asked for.
        tag: i32,
        /// The payload's size, in bytes.
        got: usize,
        /// The receive buffer's size, in bytes.
        expected: usize,
    },
    /// The drain gave up after its bound: ordering is no longer guaranteed (fail-open).
    DrainGaveUp {
        /// The rank's name for the connection.
        conn: ConnId,
        /// The receiving rank.
        to: u32,
        /// The tag of the message being drained.
        tag: i32,
        /// How long the drain waited.
        waited: Duration,
        /// Bytes still unacknowledged when it gave up.
        unacked: usize,
    },
    /// The drain completed.
    DrainCompleted {
        /// The rank's name for the connection.
        conn: ConnId,
        /// The receiving rank.
        to: u32,
        /// How long the drain waited.
        waited: Duration,
    },
    /// A connection that is not part of the session was dropped without disturbing it.
    StrayDropped {
        /// The node's name for the connection.
        conn: ConnId,
        /// The address it came from (`0.0.0.0:0` if unknown).
        from: SocketAddr,
        /// What was wrong with its bytes.
        error: WireError,
    },
    /// A connection stalled in the middle of its header and was dropped (at the header timeout,
    /// or, under [`Limits::read_ahead`], evicted after `after` to make room for a newer one).
    StalledDropped {
        /// The node's name for the connection.
        conn: ConnId,
        /// The address it came from (`0.0.0.0:0` if unknown).
        from: SocketAddr,
        /// How long it had been open.
        after: Duration,
    },
    /// Init finished: the rank knows every peer's listener.
    Ready,
    /// The root took a rank's check-in.
    CheckedIn {
        /// The rank that checked in.
        rank: u32,
        /// Check-ins taken so far, this one included.
        count: u32,
        /// The number of ranks in the world.
        nranks: u32,
    },
}

/// Limits and timeouts that protect a state machine from bad peers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Largest frame accepted; a longer length is an error before any allocation.
    pub max_message: usize,
    /// Fail the current operation after this long without progress; `None` blocks forever as
    /// NVSHMEM does (simulators detect the hang themselves).
    pub op_timeout: Option<Duration>,
    /// Drop an accepted connection whose header has not arrived after this long.
    pub header_timeout: Option<Duration>,
    /// Most connections the unexpected list may hold (NVSHMEM has no bound).
    pub max_unexpected: usize,
    /// Most bytes the unexpected list's connections may buffer together.
    pub max_unexpected_bytes: usize,
    /// `None`: NVSHMEM's behaviour — the root and per-message ranks take one connection at a
    /// time and read its header before accepting the next, so an idle stranger holds everyone
    /// behind it for the header timeout. `Some(k)`: hardened — every listener reads up to `k`
    /// headers at once (a rank still matches connections in accept order), and accepting a
    /// connection beyond `k` evicts the oldest whose header is incomplete, so strangers can
    /// neither queue honest peers behind them nor pile up file descriptors.
    pub read_ahead: Option<usize>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message: 64 << 20,
            op_timeout: None,
            header_timeout: None,
            max_unexpected: 1 << 16,
            max_unexpected_bytes: 256 << 20,
            read_ahead: None,
        }
    }
}
