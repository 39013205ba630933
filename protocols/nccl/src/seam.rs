//! NCCL's bootstrap on bootsim's protocol seam ([`bootsim_core::seam`]): the root and the ranks
//! as one [`Node`](seam::Node) type, delegating to [`Rank`] and [`Root`] (which emit the seam's
//! outputs themselves), their listeners as a
//! [`ListenerKey`](seam::ListenerKey) that knows which one peers dial in each version, and the non-overtaking
//! [`Oracle`] as the seam's streaming [`Judge`].

use std::fmt;
use std::net::SocketAddr;

use bootsim_core::seam::{self, Completed, NodeOutput, Noted, Observed};
use bootsim_core::{ConnId, Instant, MsgOrigin, OpId, RunRecord, SentMsg, TakenMsg};

use crate::bootstrap_op::BootstrapOp;

use crate::codec::message_identity;
use crate::error::{NcclError, RootError};
use crate::io::{Event, Input, Listener};
use crate::oracle::{Mismatch, Oracle};
use crate::program::{Call, Planned};
use crate::rank::{Rank, RankConfig};
use crate::root::{Root, RootConfig};
use crate::variant::Variant;

/// One of NCCL's listeners as the seam sees it: which socket, and whether the order its accepts
/// take connections in can change what its node does: the listener ranks dial for
/// point-to-point messages (the ring's before 2.23, the P2P one from 2.23), and the root's from
/// 2.23, whose early replies depend on which ranks have checked in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// The socket.
    pub listener: Listener,
    /// True where accept order matters: `bootstrapSend` connects to it, or it is the root's
    /// listener of a root that answers early.
    pub ordered: bool,
}

impl Key {
    /// `listener`'s key under `variant`.
    pub fn of(variant: Variant, listener: Listener) -> Key {
        let p2p = if variant.separate_p2p_listener() { Listener::P2p } else { Listener::Ring };
        let ordered = listener == p2p || (listener == Listener::Root && variant.root_early_replies());
        Key { listener, ordered }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.listener {
            Listener::Ring => "ring listener",
            Listener::P2p => "p2p listener",
            Listener::FromRoot => "root-answer listener",
            Listener::Root => "root listener",
        })
    }
}

impl seam::ListenerKey for Key {
    const ALL: &'static [Key] = &[
        Key { listener: Listener::Ring, ordered: true },
        Key { listener: Listener::Ring, ordered: false },
        Key { listener: Listener::P2p, ordered: true },
        Key { listener: Listener::FromRoot, ordered: false },
        Key { listener: Listener::Root, ordered: false },
        Key { listener: Listener::Root, ordered: true },
    ];

    fn port(self) -> u16 {
        self.listener.port()
    }

    fn is_peer(self) -> bool {
        self.ordered && self.listener != Listener::Root
    }

    fn is_root(self) -> bool {
        self.listener == Listener::Root
    }

    /// From 2.23 the root answers a rank as soon as it and its successor have checked in
    /// (src/bootstrap.cc:351-369 in 2.30.7), so which ranks are answered while others have not
    /// checked in yet depends on the order it took them.
    fn check_in_order_matters(self) -> bool {
        self.ordered && self.listener == Listener::Root
    }
}

/// Why a node failed: a rank's call or the root thread.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Failure {
    /// A rank's bootstrap call failed.
    #[error(transparent)]
    Rank(#[from] NcclError),
    /// The root thread gave up.
    #[error(transparent)]
    Root(#[from] RootError),
}

/// The end of a node's operation: a rank's program step (step 0 is `bootstrapInit`), or the
/// root's session (`call` None).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Completion {
    /// The step of the rank's program (0 for the root).
    pub step: usize,
    /// The call, as NCCL names it (None for the root).
    pub call: Option<Call>,
    /// The bytes it produced, or why it failed.
    pub result: Result<Vec<u8>, Failure>,
}

impl Completed for Completion {
    type Error = Failure;

    fn op(&self) -> u32 {
        self.step as u32
    }

    fn result(&self) -> Result<&[u8], &Failure> {
        self.result.as_deref()
    }

    fn into_result(self) -> Result<Vec<u8>, Failure> {
        self.result
    }

    /// The error without the rank its text starts with (the record names the rank).
    fn error_text(rank: u32, _op: u32, error: &Failure) -> String {
        let text = error.to_string();
        text.strip_prefix(&format!("rank {rank}: ")).map_or(text.clone(), str::to_string)
    }
}

/// A message's origin in the run record, the same for a send and the receive it is meant
/// for: the `nth` message (from 0) from one rank to another with one intended tag (the
/// record's operation number, `OpId(nth + 1)`, which shows as `#nth` as workloads number
/// theirs), that tag (its step number), and the bootstrap operation it is part of (flags NCCL
/// never reads are of operations whose bytes are unused). The judge and explanations find the
/// calls through the programs ([`origin_nth`]).
pub fn origin(nth: u32, logical_tag: i32, op: BootstrapOp) -> MsgOrigin {
    MsgOrigin { op: OpId(nth + 1), kind: op.op_type(), step: logical_tag as u32 }
}

/// The `nth` an [`origin`] was made with.
pub fn origin_nth(origin: &MsgOrigin) -> u32 {
    origin.op.workload_index().unwrap_or(0)
}

/// The program step a record's message was sent or taken in: `rank`'s, to or from `peer`.
pub fn origin_step(oracle: &Oracle, rank: u32, peer: u32, origin: &MsgOrigin, sent: bool) -> Option<usize> {
    let (tag, nth) = (origin.step as i32, origin_nth(origin));
    if sent {
        oracle.send_step(rank, peer, tag, nth)
    } else {
        oracle.recv_step(rank, peer, tag, nth)
    }
}

impl Observed for Event {
    fn conn(&self) -> Option<ConnId> {
        match self {
            Event::Sent { conn, .. }
            | Event::Taken { conn, .. }
            | Event::Queued { conn, .. }
            | Event::Discarded { conn, .. } => Some(*conn),
            _ => None,
        }
    }

    fn noted(&self) -> Noted {
        match self {
            &Event::Sent { to, tag, logical_tag, nth, op, size, .. } => {
                Noted::Sent { to, tag, origin: origin(nth, logical_tag, op), size }
            }
            &Event::Taken { from, tag, logical_tag, nth, op, size, expected, .. } => Noted::Taken {
                from: u32::try_from(from).unwrap_or(u32::MAX),
                tag,
                origin: origin(nth, logical_tag, op),
                size,
                expected_size: expected,
            },
            Event::Discarded { from, why, .. } => Noted::Stray { error: format!("{why} (from {from})") },
            _ => Noted::Other,
        }
    }
}

/// One of NCCL's nodes: the root or a rank.
#[allow(clippy::large_enum_variant)] // as NVSHMEM's: n ranks and one root, no boxing in the hot loop
#[derive(Clone, Debug, Hash)]
pub enum NcclNode {
    /// The root (`bootstrapRoot`'s thread).
    Root(Root),
    /// A rank.
    Rank(Rank),
}

/// The root and `programs.len()` ranks of one communicator: the unique ID's `magic`, the root
/// listening at `root` (whose port must be [`Listener::Root`]'s in the world that runs them).
pub fn nodes(variant: Variant, programs: Vec<Vec<Planned>>, magic: u64, root: SocketAddr) -> (NcclNode, Vec<NcclNode>) {
    let nranks = programs.len() as u32;
    let ranks = programs
        .into_iter()
        .enumerate()
        .map(|(r, program)| {
            NcclNode::Rank(Rank::new(RankConfig { rank: r as u32, nranks, variant, magic, root, program }))
        })
        .collect();
    (NcclNode::Root(Root::new(RootConfig { variant, magic })), ranks)
}

impl NcclNode {
    /// The rank, if this is one.
    pub fn rank(&self) -> Option<&Rank> {
        match self {
            NcclNode::Rank(r) => Some(r),
            NcclNode::Root(_) => None,
        }
    }
}

impl seam::Node for NcclNode {
    type Listener = Key;
    type Completion = Completion;
    type Event = Event;

    fn handle(&mut self, _now: Instant, input: Input<'_>) {
        match self {
            NcclNode::Root(n) => n.handle(input),
            NcclNode::Rank(n) => n.handle(input),
        }
    }

    /// A receive's accept keeps only a message it matches (NCCL's rule, [`Rank::would_match`]);
    /// the ring's and the root's accepts, and a connection whose header is not there, any.
    fn would_keep(&self, _listener: Key, early: &[u8]) -> bool {
        let NcclNode::Rank(rank) = self else { return true };
        message_identity(rank.variant(), early).and_then(|h| rank.would_match(h)).unwrap_or(true)
    }

    fn poll_output(&mut self, tx: &mut Vec<u8>) -> Option<NodeOutput<Self>> {
        match self {
            NcclNode::Root(n) => n.poll_output(tx),
            NcclNode::Rank(n) => n.poll_output(tx),
        }
    }

    /// NCCL's bootstrap sets no timer.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn waiting_for(&self) -> Option<String> {
        match self {
            NcclNode::Root(n) => n.waiting_for(),
            NcclNode::Rank(n) => n.waiting_for().map(|(what, _)| what),
        }
    }

    fn culprit(&self) -> Option<u32> {
        match self {
            NcclNode::Root(_) => None,
            NcclNode::Rank(n) => n.waiting_for().and_then(|(_, who)| who),
        }
    }

    fn unexpected(&self) -> Vec<(i32, i32)> {
        match self {
            NcclNode::Root(_) => Vec::new(),
            NcclNode::Rank(n) => n.unexpected(),
        }
    }

    fn is_finished(&self) -> bool {
        match self {
            NcclNode::Root(n) => n.is_done(),
            NcclNode::Rank(n) => n.is_done() || n.has_failed(),
        }
    }
}

/// The [`Oracle`] fed through the seam: each take is judged against the message the world's
/// log says it was. It concludes with the receives that took another message, in take order;
/// a world's report machinery words them (and reads the rest of the record: errors, hangs).
#[derive(Clone, Debug)]
pub struct Judge {
    oracle: Oracle,
    found: Vec<Mismatch>,
}

impl Judge {
    /// A judge of these programs.
    pub fn new(programs: &[Vec<Planned>]) -> Judge {
        Judge { oracle: Oracle::new(programs), found: Vec::new() }
    }

    /// The oracle it judges with.
    pub fn oracle(&self) -> &Oracle {
        &self.oracle
    }
}

impl seam::Judge for Judge {
    type Report = Vec<Mismatch>;

    fn taken(&mut self, taken: &TakenMsg, source: Option<&SentMsg>) {
        let Some(sent) = source else { return };
        let step = origin_step(&self.oracle, taken.rank, taken.from, &taken.origin, false);
        let send = origin_step(&self.oracle, sent.from, sent.to, &sent.origin, true);
        if let (Some(step), Some(send)) = (step, send) {
            self.found.extend(self.oracle.check(taken.rank, step, (sent.from, send)));
        }
    }

    fn completed(&mut self, _rank: u32, _index: usize, _result: &Result<Vec<u8>, bootsim_core::RecordedError>) {}

    fn init_ended(&mut self, _rank: u32) {}

    fn finish(&mut self, _record: &RunRecord) -> Vec<Mismatch> {
        std::mem::take(&mut self.found)
    }
}
