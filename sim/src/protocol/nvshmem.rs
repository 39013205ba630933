//! NVSHMEM's UID bootstrap as the engines run it: the root and a rank per host with the case's
//! workload queued, judged by [`oracle::Judge`] against the workload's payloads, worded by
//! [`crate::words`].

use std::net::SocketAddr;

use bootsim_core::seam::{self, Nodes, Protocol, Setup};
use bootsim_core::{Instant, RunRecord, SentMsg, TakenMsg};
use bootsim_nvshmem::ports::ROOT_PORT;
use bootsim_nvshmem::seam::NvshmemNode;
use bootsim_nvshmem::{Completion, Event, Limits, Rank, RankConfig, Root, RootConfig};
use bootsim_nvshmem::{UniqueId, Variant};

use crate::oracle::{self, Finding, Verdict};
use crate::words::{completion_line, event_line};
use bootsim_core::seed::derive;
use bootsim_nvshmem::workload::{build_op, queue_op, Workload};

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
        for (rank, node) in nodes.ranks.iter_mut().enumerate() {
            let r = node.rank_mut().expect("a rank");
            for (i, s) in spec.iter().enumerate() {
                queue_op(r, Instant::ZERO, *s, setup.seed, i as u32, rank as u32, setup.n);
            }
        }
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
        oracle::Judge::new(&setup.workload.ops(setup.seed), setup.seed, setup.n)
    }

    fn event_words(&self, event: &Event, kconn: Option<u64>) -> String {
        event_line(event, kconn)
    }

    fn completion_words(&self, completion: &Completion) -> String {
        completion_line(completion)
    }
}

impl seam::Judge for oracle::Judge {
    type Report = (Verdict, Vec<Finding>);

    fn taken(&mut self, taken: &TakenMsg, source: Option<&SentMsg>) {
        oracle::Judge::taken(self, taken, source);
    }

    fn completed(&mut self, rank: u32, index: usize, result: &Result<Vec<u8>, bootsim_core::RecordedError>) {
        oracle::Judge::completed(self, rank, index, result);
    }

    fn init_ended(&mut self, rank: u32) {
        oracle::Judge::init_ended(self, rank);
    }

    fn finish(&mut self, record: &RunRecord) -> (Verdict, Vec<Finding>) {
        std::mem::replace(self, oracle::Judge::new(&[], 0, 0)).finish(record)
    }
}
