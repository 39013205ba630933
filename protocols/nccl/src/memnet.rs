//! NCCL's conveniences on core's in-memory test world ([`bootsim_core::memnet`]): a root and a
//! rank per program, a send's connection held back by its program step, strangers on a rank's
//! point-to-point listener, how each rank ended, and the non-overtaking judge ([`Judge`]) over
//! the world's message log. The world knows NCCL only through the seam.

use std::net::SocketAddr;
use std::time::Duration;

use bootsim_core::memnet::listener_addr;
pub use bootsim_core::memnet::{Hold, Node};
use bootsim_core::seam::{Judge as _, Node as _, Nodes};
use bootsim_core::RunRecord;

use crate::error::{NcclError, RootError};
use crate::io::{Event, Listener};
use crate::oracle::Mismatch;
use crate::program::Planned;
use crate::rank::Rank;
use crate::seam::{nodes, Failure, Judge, Key, NcclNode};
use crate::variant::Variant;

/// The in-memory world running NCCL's nodes.
pub type MemNet = bootsim_core::memnet::MemNet<NcclNode>;

/// The magic of the world's unique ID.
pub const MAGIC: u64 = 0x5eed_0000_1176_0219;

/// How long a [`Hold`] keeps its connection when the sender dials that listener no more: NCCL
/// sets no timer, so this passes only once nothing else can happen.
pub const UNTIL_IDLE: Duration = Duration::from_secs(1);

/// How a rank ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every step completed.
    Done,
    /// A step failed.
    Failed(NcclError),
    /// Blocked for good on what is named.
    Hung(String),
}

/// A root and one rank per program on a [`MemNet`], with the programs the judge reads.
pub struct NcclNet {
    /// The world.
    pub net: MemNet,
    variant: Variant,
    programs: Vec<Vec<Planned>>,
}

impl NcclNet {
    /// A root and one rank per program, all starting at once.
    pub fn new(variant: Variant, programs: Vec<Vec<Planned>>) -> NcclNet {
        let (root, ranks) = nodes(variant, programs.clone(), MAGIC, root_addr(variant));
        NcclNet { net: MemNet::from_nodes(Nodes { root, ranks }), variant, programs }
    }

    /// Runs until nothing can happen any more; a held connection is let go only then.
    pub fn run(&mut self) {
        self.net.run(UNTIL_IDLE * 3600);
    }

    /// Holds the connection rank `from` sends its step `step` on (a send) until `from`'s next
    /// connection to that listener is queued: the same message whatever the variant's tags.
    pub fn hold_step(&mut self, from: u32, step: usize) {
        let mut honest = NcclNet::new(self.variant, self.programs.clone());
        honest.run();
        let conn = honest.net.events.iter().find_map(|(_, node, o)| match *o {
            Event::Sent { conn, step: s, .. } if *node == Node::Rank(from) && s == step => Some(conn),
            _ => None,
        });
        let conn = conn.unwrap_or_else(|| panic!("step {step} of rank {from} sends no message"));
        let dials = honest.net.peer_dials(UNTIL_IDLE);
        let (_, hold) = dials.into_iter().find(|&(c, h)| h.from == from && c == conn).expect("a dial to a peer");
        self.net.hold(hold);
    }

    /// Every rank-to-rank connection so far, in dial order, as the [`Hold`] that would hold it.
    pub fn peer_dials(&self) -> Vec<Hold> {
        self.net.peer_dials(UNTIL_IDLE).into_iter().map(|(_, h)| h).collect()
    }

    /// Connects a stranger to rank `to`'s point-to-point listener (the ring listener before
    /// 2.23) ahead of everyone, sends `bytes` and closes.
    pub fn inject(&mut self, to: u32, bytes: Vec<u8>) {
        self.net.inject_to(to, self.p2p_key(), bytes, true);
    }

    /// As [`NcclNet::inject`], but the stranger sends nothing and never closes (an idle client:
    /// NVIDIA/nccl#1871, #1808).
    pub fn inject_idle(&mut self, to: u32) {
        self.net.inject_to(to, self.p2p_key(), Vec::new(), false);
    }

    fn p2p_key(&self) -> Key {
        let p2p = if self.variant.separate_p2p_listener() { Listener::P2p } else { Listener::Ring };
        Key::of(self.variant, p2p)
    }

    /// Rank `r`'s state machine.
    pub fn rank(&self, r: u32) -> &Rank {
        self.net.node(r).rank().expect("a rank")
    }

    /// How rank `r` ended.
    pub fn outcome(&self, r: u32) -> Outcome {
        if self.rank(r).is_done() {
            return Outcome::Done;
        }
        let failed = self.net.completions.iter().find_map(|(_, node, c)| match &c.result {
            Err(Failure::Rank(e)) if *node == Node::Rank(r) => Some(e.clone()),
            _ => None,
        });
        match failed {
            Some(e) => Outcome::Failed(e),
            None => Outcome::Hung(self.net.node(r).waiting_for().unwrap_or_else(|| "nothing".into())),
        }
    }

    /// How the root ended, if it did.
    pub fn root_result(&self) -> Option<Result<(), RootError>> {
        self.net.completions.iter().find_map(|(_, node, c)| match (&c.result, *node == Node::Root) {
            (Ok(_), true) => Some(Ok(())),
            (Err(Failure::Root(e)), true) => Some(Err(e.clone())),
            _ => None,
        })
    }

    /// The bytes rank `r`'s step `step` completed with.
    pub fn result(&self, r: u32, step: usize) -> Option<&Result<Vec<u8>, Failure>> {
        let rank = Node::Rank(r);
        self.net.completions.iter().find(|(_, node, c)| *node == rank && c.step == step).map(|(_, _, c)| &c.result)
    }

    /// Every receive that took a message other than the one meant for it, in take order (empty
    /// when all is well).
    pub fn mismatches(&self) -> Vec<Mismatch> {
        let mut judge = Judge::new(&self.programs);
        let log = &self.net.messages;
        for taken in &log.taken {
            judge.taken(taken, log.source(taken));
        }
        judge.finish(&RunRecord::default())
    }
}

/// The address of the root's listener in the world.
fn root_addr(variant: Variant) -> SocketAddr {
    listener_addr(Node::Root, Key::of(variant, Listener::Root))
}
