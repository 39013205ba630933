//! The contract between an NCCL node (rank or root) and whatever world drives it: inputs in,
//! effects out for the world, observations out for the judge and the trace. This is the shape the
//! protocol seam (issue #25) is expected to take; until it exists, the names live here.
//!
//! After every input the driver drains `poll_effect` and `poll_observation` until both return
//! `None`, carrying out each effect in order. NCCL's bootstrap has no timers of its own (no
//! send, receive or accept timeout): a peer that never comes is a hang, which the world detects.

use std::collections::VecDeque;
use std::net::SocketAddr;

use bootsim_core::ConnId;

use crate::bootstrap_op::BootstrapOp;
use crate::error::{NcclError, RootError};
use crate::program::Call;

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

/// What happened in the outside world: the seam's inputs over NCCL's listeners (NCCL never
/// drains before close, so it ignores the drain inputs).
pub type Input<'a> = bootsim_core::seam::Input<'a, Listener>;

/// What a node asks the world to do.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Open a listener; answer with [`Input::Listening`].
    Listen {
        /// The listener's key.
        listener: Listener,
    },
    /// Take the next connection from the accept queue and name it `conn`; answer with
    /// [`Input::Accepted`]. At most one is outstanding per listener.
    Accept {
        /// The listener's key.
        listener: Listener,
        /// The name the node gives the accepted connection.
        conn: ConnId,
    },
    /// Close a listener (connections still queued are reset).
    CloseListener {
        /// The listener's key.
        listener: Listener,
    },
    /// Connect, retrying "refused" as NCCL does; answer with [`Input::Connected`].
    Connect {
        /// The name the node gives the new connection.
        conn: ConnId,
        /// The address to dial.
        addr: SocketAddr,
    },
    /// Queue bytes for sending after any queued before on this connection.
    Write {
        /// The node's name for the connection.
        conn: ConnId,
        /// The bytes to send.
        bytes: Vec<u8>,
    },
    /// Close the connection after the bytes already queued.
    Close {
        /// The node's name for the connection.
        conn: ConnId,
    },
}

/// What a node reports, for the judge, explanations and traces.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Observation {
    /// A rank started step `step` of its program.
    Started {
        /// The step, an index into the rank's program.
        step: usize,
        /// The NCCL call the step belongs to.
        call: Call,
    },
    /// A step ended: the bytes it produced (a receive's message, an allgather's whole buffer) or
    /// the error that ended the rank's bootstrap.
    Completed {
        /// The step, an index into the rank's program.
        step: usize,
        /// The NCCL call the step belongs to.
        call: Call,
        /// The bytes produced, or the error.
        result: Result<Vec<u8>, NcclError>,
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
    /// The root finished (every rank answered) or gave up.
    RootDone {
        /// Whether every rank was answered, or why the root gave up.
        result: Result<(), RootError>,
    },
}

/// One output of a node, effects and observations in the order the node made them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Output {
    /// For the world.
    Effect(Effect),
    /// For the judge and the trace.
    Observe(Observation),
}

/// A node's outputs: effects and observations queued apart (a driver may take either kind
/// alone) but numbered as made, so [`Outbox::poll`] gives them back merged in that order.
/// The numbering starts again whenever both queues are empty, so a quiet node's state does
/// not depend on how much it said before (explorers hash it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Outbox {
    effects: VecDeque<(u64, Effect)>,
    observations: VecDeque<(u64, Observation)>,
    next: u64,
}

impl Outbox {
    /// An outbox holding `effects`, in order.
    pub fn with(effects: impl IntoIterator<Item = Effect>) -> Outbox {
        let mut out = Outbox::default();
        for e in effects {
            out.effect(e);
        }
        out
    }

    /// Queues an effect.
    pub fn effect(&mut self, e: Effect) {
        self.effects.push_back((self.next, e));
        self.next += 1;
    }

    /// Queues an observation.
    pub fn observe(&mut self, o: Observation) {
        self.observations.push_back((self.next, o));
        self.next += 1;
    }

    /// The next effect, whatever observations came before it.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        let e = self.effects.pop_front().map(|(_, e)| e);
        self.settle();
        e
    }

    /// The next observation, whatever effects came before it.
    pub fn poll_observation(&mut self) -> Option<Observation> {
        let o = self.observations.pop_front().map(|(_, o)| o);
        self.settle();
        o
    }

    /// The next output of either kind, in the order made.
    pub fn poll(&mut self) -> Option<Output> {
        let effect_first = match (self.effects.front(), self.observations.front()) {
            (None, None) => return None,
            (Some((e, _)), Some((o, _))) => e < o,
            (e, _) => e.is_some(),
        };
        let out = if effect_first {
            self.effects.pop_front().map(|(_, e)| Output::Effect(e))
        } else {
            self.observations.pop_front().map(|(_, o)| Output::Observe(o))
        };
        self.settle();
        out
    }

    fn settle(&mut self) {
        if self.effects.is_empty() && self.observations.is_empty() {
            self.next = 0;
        }
    }
}
