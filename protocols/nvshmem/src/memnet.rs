//! NVSHMEM's conveniences on core's in-memory test world ([`bootsim_core::memnet`]): a root and
//! N ranks of one variant, operations queued on a rank, and its state machine read back.

use bootsim_core::memnet::listener_addr;
pub use bootsim_core::memnet::{Hold, Node};
use bootsim_core::seam::Nodes;
use bootsim_core::time::Instant;

use crate::io::Limits;
use crate::listener::Listener;
use crate::rank::{Chunked, Op, Rank, RankConfig};
use crate::root::{Root, RootConfig};
use crate::seam::NvshmemNode;
use crate::uid::UniqueId;
use crate::variant::Variant;

/// The in-memory world running NVSHMEM's nodes.
pub type MemNet = bootsim_core::memnet::MemNet<NvshmemNode>;

/// What a test does with an NVSHMEM [`MemNet`].
pub trait NvshmemNet {
    /// A root and `nranks` ranks of one variant, all starting init at time zero.
    fn new(nranks: u32, variant: Variant) -> Self;
    /// As [`NvshmemNet::new`] with explicit limits for every rank and the root.
    fn with_limits(nranks: u32, variant: Variant, limits: Limits) -> Self;
    /// Queues operations for rank `r`, started one after another once init is done.
    fn queue_ops(&mut self, r: u32, ops: impl IntoIterator<Item = Op>);
    /// [`NvshmemNet::queue_ops`] of one chunked operation ([`Rank::push_chunked`]).
    fn queue_chunked(&mut self, r: u32, op: Chunked);
    /// Rank `r`'s state machine.
    fn rank(&self, r: u32) -> &Rank;
}

impl NvshmemNet for MemNet {
    fn new(nranks: u32, variant: Variant) -> Self {
        Self::with_limits(nranks, variant, Limits::default())
    }

    fn with_limits(nranks: u32, variant: Variant, limits: Limits) -> Self {
        let uid = UniqueId {
            version: variant.uid_version(),
            root: listener_addr(Node::Root, Listener::Rendezvous),
            magic: 0x5eed_0000_b007_51a1,
        };
        let now = Instant::ZERO;
        let root = NvshmemNode::Root(Root::new(RootConfig { uid, nranks: None, limits }, now));
        let ranks = (0..nranks)
            .map(|rank| NvshmemNode::Rank(Rank::new(RankConfig { rank, nranks, uid, variant, limits }, now)))
            .collect();
        MemNet::from_nodes(Nodes { root, ranks })
    }

    fn queue_ops(&mut self, r: u32, ops: impl IntoIterator<Item = Op>) {
        self.with_rank(r, |node, now| {
            let rank = node.rank_mut().expect("a rank");
            for op in ops {
                rank.push(now, op);
            }
        });
    }

    fn queue_chunked(&mut self, r: u32, op: Chunked) {
        self.with_rank(r, |node, now| node.rank_mut().expect("a rank").push_chunked(now, op));
    }

    fn rank(&self, r: u32) -> &Rank {
        self.node(r).rank().expect("a rank")
    }
}
