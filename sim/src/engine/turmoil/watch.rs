//! What the engine keeps of each rank while its host runs: what it did (a rank unfinished at
//! the deadline never returns its run) and what it waits for, told to the gate when it changes.

use std::sync::{Arc, Mutex};

use bootsim_core::seam::Node;
use bootsim_core::Instant;
use bootsim_driver::{NodeRun, Watch};

use super::gate::{GateHandle, RankWait};

/// A rank's events and completions so far, shared with the engine.
pub(super) type Progress<N> = Arc<Mutex<NodeRun<N>>>;

/// The driver's [`Watch`] of rank `host`'s node.
pub(super) struct RankWatch<N: Node> {
    host: u32,
    gate: GateHandle,
    progress: Progress<N>,
    /// The wait last told to the gate.
    told: Option<RankWait>,
}

impl<N: Node> RankWatch<N> {
    /// Watches rank `host`, keeping what it does in `progress`.
    pub(super) fn new(host: u32, gate: GateHandle, progress: Progress<N>) -> Self {
        RankWatch { host, gate, progress, told: None }
    }
}

impl<N: Node> Watch<N> for RankWatch<N>
where
    N::Event: Clone,
    N::Completion: Clone,
{
    fn blocked(&mut self, node: &N) {
        let now = (node.waiting_for(), node.unexpected());
        if self.told.as_ref() != Some(&now) {
            self.gate.lock().report_wait(self.host, now.0.clone(), now.1.clone());
            self.told = Some(now);
        }
    }

    fn event(&mut self, at: Instant, event: &N::Event) {
        // As every call of a host, it brings the kernel model up to turmoil's clock.
        self.gate.advance();
        let mut run = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        run.events.push(event.clone());
        run.events_at.push(at);
    }

    fn completion(&mut self, at: Instant, completion: &N::Completion) {
        self.gate.advance();
        let mut run = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        run.completions.push(completion.clone());
        run.completed_at.push(at);
    }
}
