//! The protocol as every world sees it: its variants, its workloads, and how a run of it is
//! built ([`Protocol::nodes`]), judged and worded.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

use bootsim_core::seam::{Completed, Nodes, Protocol, Setup};

use crate::judge::{judge, Judge};
use crate::node::Node;
use crate::rank::{Rank, RankConfig};
use crate::root::Root;
use crate::types::{Completion, Event, ROOT_PORT};

/// The rendezvous protocol.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rendezvous;

/// How a rank tags its exchange messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variant {
    /// The bug: every round uses one tag, so (peer, tag) does not name one message.
    ReusedTag,
    /// The fix: the round is the tag.
    RoundTag,
}

impl Variant {
    /// Both, buggy first.
    pub const ALL: [Variant; 2] = [Variant::ReusedTag, Variant::RoundTag];

    /// Its name: `reused-tag` or `round-tag`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::ReusedTag => "reused-tag",
            Variant::RoundTag => "round-tag",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Variant {
    type Err = String;

    /// Parses a name; the error lists the accepted ones.
    fn from_str(s: &str) -> Result<Variant, String> {
        Variant::ALL.into_iter().find(|v| v.name() == s).ok_or_else(|| {
            format!("unknown rendezvous variant `{s}`; accepted: {}", Variant::ALL.map(Variant::name).join(", "))
        })
    }
}

/// Whom each rank exchanges with in a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Peers {
    /// Every other rank (an all-to-all).
    All,
    /// Its ring successor (sends) and predecessor (receives): one message each way.
    Ring,
    /// Both ring neighbours, its predecessor and its successor (sends and receives): two peers
    /// from 4 ranks up, so a receive matches among several peers' messages, as in an all-to-all.
    Neighbours,
}

/// What the ranks do after init: `rounds` exchange rounds of `len`-byte messages with `peers`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Workload {
    /// Exchange rounds (0: init only).
    pub rounds: u32,
    /// Payload bytes per message.
    pub len: usize,
    /// Whom each rank exchanges with.
    pub peers: Peers,
}

impl Workload {
    /// Init only: check in, take the table.
    pub const INIT: Workload = Workload { rounds: 0, len: 0, peers: Peers::All };
    /// Two all-to-all rounds of 32 bytes: the smallest workload where a tag can be reused.
    pub const TWO_ROUNDS: Workload = Workload { rounds: 2, len: 32, peers: Peers::All };
    /// Two ring rounds of 32 bytes: the same hazard with one message per rank and round (small
    /// enough for the explorer at 4 ranks).
    pub const RING: Workload = Workload { rounds: 2, len: 32, peers: Peers::Ring };
    /// Two rounds of 32 bytes with both ring neighbours: the all-to-all's hazard (a peer's
    /// round-2 connection overtaking its round-1 one, among other peers' connections) with two
    /// peers a rank instead of n - 1 (small enough for the explorer at 4 ranks; at 3 ranks it is
    /// the all-to-all).
    pub const NEIGHBOURS: Workload = Workload { rounds: 2, len: 32, peers: Peers::Neighbours };
}

impl fmt::Display for Workload {
    /// `two-rounds`, `ring`, `neighbours`, or `{rounds}x{len}-{all|ring|neighbours}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Workload::TWO_ROUNDS => f.write_str("two-rounds"),
            Workload::RING => f.write_str("ring"),
            Workload::NEIGHBOURS => f.write_str("neighbours"),
            Workload { rounds, len, peers } => {
                let peers = match peers {
                    Peers::All => "all",
                    Peers::Ring => "ring",
                    Peers::Neighbours => "neighbours",
                };
                write!(f, "{rounds}x{len}-{peers}")
            }
        }
    }
}

impl Protocol for Rendezvous {
    type Node = Node;
    type Variant = Variant;
    type Workload = Workload;
    type Judge = Judge;

    fn name(&self) -> &'static str {
        "rendezvous"
    }

    fn nodes(&self, setup: &Setup<'_, Variant, Workload>) -> Nodes<Node> {
        let &Setup { variant, workload, seed, n, root_ip } = setup;
        let root = SocketAddr::new(root_ip, ROOT_PORT);
        let rank = |rank| {
            let cfg = RankConfig { rank, n, root, variant: *variant, workload: *workload, seed };
            Node::Rank(Rank::new(cfg))
        };
        Nodes { root: Node::Root(Root::new(n)), ranks: (0..n).map(rank).collect() }
    }

    fn judge(&self, setup: &Setup<'_, Variant, Workload>) -> Judge {
        judge(*setup.workload, setup.seed, setup.n)
    }

    fn event_words(&self, event: &Event, kconn: Option<u64>) -> String {
        match kconn {
            Some(k) => format!("{event} on conn {k}"),
            None => event.to_string(),
        }
    }

    fn completion_words(&self, c: &Completion) -> String {
        let op = match c.op {
            0 => "init".to_string(),
            k => format!("exchange #{}", k - 1),
        };
        match c.result() {
            Ok(bytes) => format!("{op} completed ({} bytes)", bytes.len()),
            Err(e) => format!("{op} failed: {e}"),
        }
    }
}
