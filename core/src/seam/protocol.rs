//! A protocol as a factory: its nodes for a world of n ranks, its judge, its trace words.

use std::net::IpAddr;

use crate::ending::RecordedError;
use crate::record::{RunRecord, SentMsg, TakenMsg};

use super::node::Node;

/// What a world tells a protocol to build a run: the case's variant, workload, seed, rank
/// count, and where the root's host is.
#[derive(Clone, Copy, Debug)]
pub struct Setup<'a, V, W> {
    /// The protocol's variant.
    pub variant: &'a V,
    /// The protocol's workload.
    pub workload: &'a W,
    /// The case's seed (payloads, session secrets).
    pub seed: u64,
    /// Ranks in the world.
    pub n: u32,
    /// The root's host address in this world (the root listens on its listener's port there).
    pub root_ip: IpAddr,
}

/// The nodes of one run: the root (on host 0) and ranks 0..n (rank r on host r).
#[derive(Clone, Debug)]
pub struct Nodes<N> {
    /// The root.
    pub root: N,
    /// The ranks, in rank order.
    pub ranks: Vec<N>,
}

/// The completion type of protocol `P`'s nodes (what a world reads an operation's end from).
pub type CompletionOf<P> = <<P as Protocol>::Node as Node>::Completion;

/// A bootstrap protocol as every world sees it.
pub trait Protocol {
    /// Its nodes (root and ranks: one type, an enum where they differ).
    type Node: Node;
    /// Its variants (versions, fixes).
    type Variant;
    /// Its workloads (what the ranks do after init).
    type Workload;
    /// Its streaming judge.
    type Judge: Judge;

    /// Its name, as a case string would give it.
    fn name(&self) -> &'static str;
    /// The root and `setup.n` ranks at time zero, each with its workload queued.
    fn nodes(&self, setup: &Setup<'_, Self::Variant, Self::Workload>) -> Nodes<Self::Node>;
    /// The root and ranks with no operation queued, for a world that queues them one at a time
    /// with [`Protocol::queue`] (explore: states then do not carry the rest of the workload).
    /// By default [`Protocol::nodes`], every operation queued (and `queue` adds none).
    fn unqueued(&self, setup: &Setup<'_, Self::Variant, Self::Workload>) -> Nodes<Self::Node> {
        self.nodes(setup)
    }
    /// Queues `rank`'s workload operation `index` (from 0) on its node; false past the last.
    fn queue(
        &self,
        setup: &Setup<'_, Self::Variant, Self::Workload>,
        node: &mut Self::Node,
        rank: u32,
        index: u32,
    ) -> bool {
        let _ = (setup, node, rank, index);
        false
    }
    /// A judge of this run, fed as it goes (or with a whole record).
    fn judge(&self, setup: &Setup<'_, Self::Variant, Self::Workload>) -> Self::Judge;
    /// An event's trace words; `kconn` is the world's number of its connection, if any.
    fn event_words(&self, event: &<Self::Node as Node>::Event, kconn: Option<u64>) -> String;
    /// An operation's end in trace words.
    fn completion_words(&self, completion: &<Self::Node as Node>::Completion) -> String;
}

/// A judge fed as a run goes: every take and every operation's end, then the record.
pub trait Judge {
    /// What it concludes (a verdict and findings).
    type Report;
    /// A receive took `taken`, which is `source` when the world knows the message sent.
    fn taken(&mut self, taken: &TakenMsg, source: Option<&SentMsg>);
    /// `rank`'s operation `index` (from 0, init apart) ended with `result`.
    fn completed(&mut self, rank: u32, index: usize, result: &Result<Vec<u8>, RecordedError>);
    /// `rank`'s init ended (its takes are judged by nothing else).
    fn init_ended(&mut self, rank: u32);
    /// The conclusion; `record` gives what was not fed (ends, waits, the root, drains).
    fn finish(&mut self, record: &RunRecord) -> Self::Report;
    /// Feeds a whole record: every take in order, then each rank's operations.
    fn feed(&mut self, record: &RunRecord) {
        for t in &record.messages.taken {
            self.taken(t, record.messages.source(t));
        }
        for rank in &record.ranks {
            for (index, result) in rank.ops.iter().enumerate() {
                self.completed(rank.rank, index, result);
            }
        }
    }
}
