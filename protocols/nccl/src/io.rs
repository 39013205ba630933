//! The contract between an NCCL node (rank or root) and whatever world drives it: the seam's
//! inputs in, the seam's outputs out (effects for the world, observations for the judge and the
//! trace), over NCCL's listener keys, completions and events.
//!
//! After every input the driver drains `poll_output` until it returns `None`, carrying out each
//! effect in order. NCCL's bootstrap has no timers of its own (no send, receive or accept
//! timeout): a peer that never comes is a hang, which the world detects.

use std::net::SocketAddr;

use bootsim_core::ConnId;

use crate::bootstrap_op::BootstrapOp;
use crate::program::Call;
use crate::seam::{Completion, Key};

/// The listening sockets of NCCL's bootstrap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Listener {
    /// A rank's ring listener (`listenSock`): the ring predecessor, and before 2.23 every
    /// point-to-point message too.
    Ring,
    /// A rank's point-to-point listener (`peerSocket`, 2.23 on).
    P2p,
    /// A rank's short-lived listener for the root's answer (`listenSockRoot`).
    FromRoot,
    /// The root's listener, at the unique ID's address.
    Root,
}

impl Listener {
    /// The port the simulated worlds give it (the same on every host; the root's host also
    /// runs rank 0, so the root's port differs from every rank listener's).
    pub fn port(self) -> u16 {
        match self {
            Listener::Ring => 20000,
            Listener::P2p => 20001,
            Listener::FromRoot => 20002,
            Listener::Root => 29500,
        }
    }
}

/// What happened in the outside world: the seam's inputs over NCCL's listener keys (NCCL
/// never drains before close, so it ignores the drain inputs).
pub type Input<'a> = bootsim_core::seam::Input<'a, Key>;

/// What a node asks the world to do: the seam's [`bootsim_core::seam::Effect`] over NCCL's
/// listener keys.
pub type Effect = bootsim_core::seam::Effect<Key>;

/// What a node reports for the judge and the trace: the seam's
/// [`bootsim_core::seam::Observation`] of NCCL's completions (a rank's program step, the
/// root's session) and events.
pub type Observation = bootsim_core::seam::Observation<Completion, Event>;

/// One output of a [`crate::Rank`] or the [`crate::Root`]: the seam's
/// [`bootsim_core::seam::Output`], an [`Effect`] or an [`Observation`].
pub type Output = bootsim_core::seam::Output<Key, Completion, Event>;

/// The outputs a node has made and the world has not yet polled.
pub(crate) type Outbox = bootsim_core::seam::Outbox<Key, Completion, Event>;

/// What a node reports besides the end of an operation, for the judge, explanations and
/// traces (the seam's [`Observation::Event`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// A rank started step `step` of its program.
    Started {
        /// The step, an index into the rank's program.
        step: usize,
        /// The NCCL call the step belongs to.
        call: Call,
    },
    /// A point-to-point message was written on `conn` (one connection per message): the `nth`
    /// this rank sends to `to` with the intended tag `logical_tag` (see
    /// [`crate::program::nth_of_kind`]); in the bootstrap operation `op`.
    Sent {
        /// The node's name for the connection.
        conn: ConnId,
        /// The step, an index into the rank's program.
        step: usize,
        /// The receiving rank.
        to: u32,
        /// The tag the message carries.
        tag: i32,
        /// The intended tag (see the variant's doc).
        logical_tag: i32,
        /// Which send to `to` with `logical_tag` it is, from 0 (see [`crate::program::nth_of_kind`]).
        nth: u32,
        /// The bootstrap operation it belongs to.
        op: BootstrapOp,
        /// The payload's size, in bytes.
        size: usize,
    },
    /// A receive took the message on `conn`, whichever message it was; the receive is the `nth`
    /// from its peer with the intended tag `logical_tag`, in the bootstrap operation `op`.
    Taken {
        /// The node's name for the connection.
        conn: ConnId,
        /// The step, an index into the rank's program.
        step: usize,
        /// The sending rank its header names.
        from: i32,
        /// The tag the message carries.
        tag: i32,
        /// The intended tag (see the variant's doc).
        logical_tag: i32,
        /// Which receive from `from` with `logical_tag` it is, from 0.
        nth: u32,
        /// The bootstrap operation it belongs to.
        op: BootstrapOp,
        /// The payload's size, in bytes.
        size: usize,
        /// The receive buffer's size, in bytes.
        expected: usize,
    },
    /// A connection whose header did not match was appended to the unexpected list.
    Queued {
        /// The node's name for the connection.
        conn: ConnId,
        /// The sending rank its header names.
        from: i32,
        /// The tag its header carries.
        tag: i32,
        /// The (peer, tag) the receive waits for (peer `None`: any).
        waiting_for: (Option<u32>, i32),
        /// The unexpected list's length with it.
        list_len: usize,
    },
    /// A connection that is not of this session (bad magic, early close, wrong type where NCCL
    /// discards it) was closed and the next one accepted.
    Discarded {
        /// The node's name for the connection.
        conn: ConnId,
        /// The address it came from.
        from: SocketAddr,
        /// Why it was discarded.
        why: String,
    },
    /// The root took a check-in.
    CheckedIn {
        /// The rank that checked in.
        rank: u32,
        /// Check-ins taken so far, this one included.
        count: u32,
        /// The number of ranks in the world.
        nranks: u32,
    },
    /// The root sent rank `to` its successor's address.
    SuccessorSent {
        /// The rank it answered.
        to: u32,
        /// The rank whose address it sent (`to`'s ring successor).
        successor: u32,
    },
}
