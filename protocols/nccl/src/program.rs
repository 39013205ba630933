//! A rank's bootstrap traffic as NCCL issues it: a sequence of blocking calls. Workloads lower
//! NCCL's composite calls (transport setup, barrier, intra-node allgather) into these steps, each
//! labelled with the call and source line NCCL would report.

use std::fmt;

/// One blocking bootstrap call.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// `bootstrapInit`'s sockets: listeners, check-in with the root, the successor's address, and
    /// the two persistent ring sockets.
    Init,
    /// `bootstrapAllGather` of `size` bytes per rank over the ring sockets. With `addresses`, this
    /// rank's slice starts with its point-to-point listener's address and, once gathered, the
    /// slices tell every later `bootstrapSend` where to connect.
    RingAllgather {
        /// Bytes per rank.
        size: usize,
        /// Whether this rank's slice carries its point-to-point listener's address.
        addresses: bool,
    },
    /// `bootstrapSend(peer, tag, data, size)`: one new connection for one message.
    Send {
        /// The receiving rank.
        peer: u32,
        /// The tag this release puts on the wire.
        tag: i32,
        /// The intended tag: 2.21's, also for releases whose messages carry another or none.
        logical_tag: i32,
        /// The message's size, in bytes.
        size: usize,
    },
    /// `bootstrapRecv(peer, tag, data, size)` (`peer` None: 2.23's wildcard).
    Recv {
        /// The sending rank (`None`: any).
        peer: Option<u32>,
        /// The tag this release matches on.
        tag: i32,
        /// The intended tag: 2.21's, also for releases whose messages carry another or none.
        logical_tag: i32,
        /// The receive buffer's size, in bytes.
        size: usize,
    },
    /// 2.21's `bootstrapIntraNodeAllGather`: connect to the next of `ranks` and accept the
    /// previous, both tagged `tag`, then a ring allgather over those two sockets, then close.
    IntraRingAllgather {
        /// The ranks of the node, in ring order.
        ranks: Vec<u32>,
        /// Bytes per rank.
        size: usize,
        /// The tag of both connections.
        tag: i32,
    },
}

/// A step and the NCCL call it belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Planned {
    /// What the rank does.
    pub step: Step,
    /// Which NCCL call, as NCCL names it, and where.
    pub call: Call,
}

/// The topology graph a transport setup connects (`graph->id`, src/init.cc:917-943 in 2.19.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Graph {
    /// `ringGraph`, id 0.
    Ring,
    /// `treeGraph`, id 1.
    Tree,
    /// `collNetGraph`, id 2.
    CollNet,
    /// `graph == NULL`: point-to-point connections (`ncclSend`/`ncclRecv`).
    Null,
}

impl Graph {
    /// `graph->id`, or None for the NULL graph.
    pub fn id(self) -> Option<u32> {
        match self {
            Graph::Ring => Some(0),
            Graph::Tree => Some(1),
            Graph::CollNet => Some(2),
            Graph::Null => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Graph::Ring => "ring graph",
            Graph::Tree => "tree graph",
            Graph::CollNet => "collNet graph",
            Graph::Null => "NULL graph",
        }
    }
}

/// What a call is, as NCCL's sources name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// `bootstrapInit` (root check-in and ring).
    BootstrapInit,
    /// `bootstrapAllGather` of the named data.
    AllGather(&'static str),
    /// `ncclTransportP2pSetup`'s connectInfo exchange with the peers at distance `i`.
    SetupExchange {
        /// The topology graph being connected.
        graph: Graph,
        /// NCCL's `connIndex`.
        conn_index: u8,
        /// The distance to the peers.
        i: u32,
    },
    /// `ncclTransportP2pSetup`'s sync with the peers at distance `i`.
    SetupSync {
        /// The topology graph being connected.
        graph: Graph,
        /// NCCL's `connIndex`.
        conn_index: u8,
        /// The distance to the peers.
        i: u32,
    },
    /// `bootstrapBarrier` / `bootstrapIntraNodeBarrier` with one tag for every round.
    Barrier {
        /// The tag of every round.
        tag: i32,
    },
    /// `bootstrapIntraNodeAllGather` of the named data.
    IntraNodeAllGather(&'static str),
    /// An application's own `bootstrapSend`/`bootstrapRecv`.
    PointToPoint,
}

/// A call and the source line (file:line of the tag the variant follows) NCCL reports it from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Call {
    /// The call.
    pub kind: CallKind,
    /// `file:line`, e.g. `transport.cc:204`.
    pub site: &'static str,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            CallKind::BootstrapInit => write!(f, "bootstrapInit")?,
            CallKind::AllGather(what) => write!(f, "bootstrapAllGather({what})")?,
            CallKind::SetupExchange { graph, conn_index, i } => write!(
                f,
                "ncclTransportP2pSetup({}, connIndex {conn_index}) connectInfo exchange, peers at distance {i}",
                graph.name()
            )?,
            CallKind::SetupSync { graph, conn_index, i } => write!(
                f,
                "ncclTransportP2pSetup({}, connIndex {conn_index}) sync, peers at distance {i}",
                graph.name()
            )?,
            CallKind::Barrier { tag } => write!(f, "bootstrapIntraNodeBarrier(tag {tag:#x})")?,
            CallKind::IntraNodeAllGather(what) => write!(f, "bootstrapIntraNodeAllGather({what})")?,
            CallKind::PointToPoint => write!(f, "bootstrapSend/Recv")?,
        }
        write!(f, " at {}", self.site)
    }
}

/// The bytes a rank sends in step `step`: a pattern that differs by sender and step, so that a
/// receive handed another message's bytes shows it.
pub fn payload(rank: u32, step: usize, size: usize) -> Vec<u8> {
    let seed = rank.wrapping_mul(131).wrapping_add(step as u32 * 31);
    (0..size).map(|i| seed.wrapping_add(i as u32 * 7) as u8).collect()
}

impl CallKind {
    /// True for the calls whose messages are flags NCCL never reads (the transport setup's
    /// sync, the barrier): one taken for another changes nothing.
    pub fn is_flag(self) -> bool {
        crate::BootstrapOp::of(self).is_flag()
    }
}

/// For each step of `program`, its number among the program's steps of the same direction,
/// peer and intended tag (the k-th send to a peer with a tag pairs with the peer's k-th
/// receive from this rank with that tag); 0 for other steps.
pub fn nth_of_kind(program: &[Planned]) -> Vec<u32> {
    let mut seen: std::collections::BTreeMap<(bool, Option<u32>, i32), u32> = std::collections::BTreeMap::new();
    program
        .iter()
        .map(|p| {
            let key = match p.step {
                Step::Send { peer, logical_tag, .. } => (true, Some(peer), logical_tag),
                Step::Recv { peer, logical_tag, .. } => (false, peer, logical_tag),
                _ => return 0,
            };
            let n = seen.entry(key).or_insert(0);
            *n += 1;
            *n - 1
        })
        .collect()
}
