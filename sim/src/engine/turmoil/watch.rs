//! What the engine keeps of each rank while its host runs: what it did (a rank unfinished at
//! the deadline never returns its run), kept by the driver's [`Kept`], and what it waits for,
//! told to the gate when it changes.

use bootsim_core::seam::Node;
use bootsim_core::Instant;
use bootsim_driver::{Kept, Watch};

use super::gate::GateHandle;

/// The driver's [`Watch`] of rank `host`'s node.
pub(super) struct RankWatch<N: Node> {
    host: u32,
    gate: GateHandle,
    kept: Kept<N>,
}

impl<N: Node> RankWatch<N> {
    /// Watches rank `host`, keeping what it does in `kept`.
    pub(super) fn new(host: u32, gate: GateHandle, kept: Kept<N>) -> Self {
        RankWatch { host, gate, kept }
    }
}

impl<N: Node> Watch<N> for RankWatch<N>
where
    N::Event: Clone,
    N::Completion: Clone,
{
    fn blocked(&mut self, node: &N) {
        let wait = (node.awaited(), node.unexpected());
        if self.kept.waited(wait.clone()) {
            self.gate.lock().report_wait(self.host, wait.0, wait.1);
        }
    }

    fn event(&mut self, at: Instant, event: &N::Event) {
        // As every call of a host, it brings the kernel model up to turmoil's clock.
        self.gate.advance();
        self.kept.event(at, event);
    }

    fn completion(&mut self, at: Instant, completion: &N::Completion) {
        self.gate.advance();
        self.kept.completion(at, completion);
    }
}
