//! NVSHMEM's UID bootstrap as the engines run it: the root and a rank per host with the case's
//! workload queued, judged by [`oracle::Judge`] against the workload's payloads
//! (`payloads.rs`, with `verbs.rs`' account of a wrong QP handle), worded by [`crate::words`].

use std::net::SocketAddr;

use bootsim_core::seam::{Nodes, Protocol, Setup};
use bootsim_core::{Instant, RunRecord};
use bootsim_nvshmem::ports::ROOT_PORT;
use bootsim_nvshmem::seam::NvshmemNode;
use bootsim_nvshmem::{Completion, Event, Limits, Rank, RankConfig, Root, RootConfig};
use bootsim_nvshmem::{UniqueId, Variant};

use crate::oracle::{self, Finding, Verdict};
use crate::words::{completion_line, event_line};
use bootsim_core::seed::derive;
use bootsim_nvshmem::workload::{build_op, queue_ops, OpSpec, Workload};

mod payloads;
mod verbs;

#[cfg(test)]
mod tests;

pub use payloads::NvshmemPayloads;

/// NVSHMEM's UID bootstrap (every preset variant).
#[derive(Clone, Copy, Debug, Default)]
pub struct Nvshmem;

impl Protocol for Nvshmem {
    type Node = NvshmemNode;
    type Variant = Variant;
    type Workload = Workload;
    type Judge = oracle::Judge;

    fn name(&self) -> &'static str {
        "nvshmem"
    }

    fn nodes(&self, setup: &Setup<'_, Variant, Workload>) -> Nodes<NvshmemNode> {
        let mut nodes = self.unqueued(setup);
        let spec = setup.workload.ops(setup.seed);
        let ranks = nodes.ranks.iter_mut().map(|node| node.rank_mut().expect("a rank"));
        queue_ops(ranks, Instant::ZERO, &spec, setup.seed, setup.n);
        nodes
    }

    fn unqueued(&self, setup: &Setup<'_, Variant, Workload>) -> Nodes<NvshmemNode> {
        let &Setup { variant, seed, n, root_ip, .. } = setup;
        let uid = UniqueId {
            version: variant.uid_version(),
            root: SocketAddr::new(root_ip, ROOT_PORT),
            magic: derive(seed, "magic", 0),
        };
        let limits = Limits::default();
        let now = Instant::ZERO;
        let root = NvshmemNode::Root(Root::new(RootConfig { uid, nranks: None, limits }, now));
        let ranks = (0..n)
            .map(|rank| {
                NvshmemNode::Rank(Rank::new(RankConfig { rank, nranks: n, uid, variant: *variant, limits }, now))
            })
            .collect();
        Nodes { root, ranks }
    }

    fn queue(&self, setup: &Setup<'_, Variant, Workload>, node: &mut NvshmemNode, rank: u32, index: u32) -> bool {
        let Some(&spec) = setup.workload.ops(setup.seed).get(index as usize) else { return false };
        let Some(r) = node.rank_mut() else { return false };
        r.push(Instant::ZERO, build_op(spec, setup.seed, index, rank, setup.n));
        true
    }

    fn judge(&self, setup: &Setup<'_, Variant, Workload>) -> oracle::Judge {
        judge_of(&setup.workload.ops(setup.seed), setup.seed, setup.n)
    }

    fn event_words(&self, event: &Event, kconn: Option<u64>) -> String {
        event_line(event, kconn)
    }

    fn completion_words(&self, completion: &Completion) -> String {
        completion_line(completion)
    }
}

/// A judge of a run of `specs` over `n` ranks with payload seed `seed`, fed as it goes.
pub fn judge_of(specs: &[OpSpec], seed: u64, n: u32) -> oracle::Judge {
    oracle::Judge::new(NvshmemPayloads::new(specs, seed, n), n)
}

/// Judges the record of one run of `specs` over `n` ranks with payload seed `seed` (see
/// [`oracle::judge`]): every NVSHMEM world's record, simulated or real, goes through it.
pub fn judge(specs: &[OpSpec], seed: u64, n: u32, record: &RunRecord) -> (Verdict, Vec<Finding>) {
    oracle::judge(NvshmemPayloads::new(specs, seed, n), n, record)
}
