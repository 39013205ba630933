//! A [`Watch`] that keeps what a node did and what it last waited for, readable while the node
//! still runs: a world that gives up on a node that never returns (a deadline, a crashed host)
//! still knows its completions, events and wait.

use std::sync::{Arc, Mutex, MutexGuard};

use bootsim_core::seam::Node;
use bootsim_core::{Awaited, Instant};

use super::{NodeRun, Watch};

/// What a node waits for ([`Node::awaited`]) and its unexpected list (peer, tag), head first.
pub type Wait = (Option<Awaited>, Vec<(i32, i32)>);

/// What a [`Kept`] holds.
pub struct Progress<N: Node> {
    /// Its completions and events so far.
    pub run: NodeRun<N>,
    /// Its wait when it last blocked.
    pub wait: Option<Wait>,
}

impl<N: Node> Default for Progress<N> {
    fn default() -> Self {
        Progress { run: NodeRun::default(), wait: None }
    }
}

/// A shared handle on a node's [`Progress`]; the driver's copy watches, the world's reads.
pub struct Kept<N: Node>(Arc<Mutex<Progress<N>>>);

impl<N: Node> Clone for Kept<N> {
    fn clone(&self) -> Self {
        Kept(self.0.clone())
    }
}

impl<N: Node> Default for Kept<N> {
    fn default() -> Self {
        Kept(Arc::new(Mutex::new(Progress::default())))
    }
}

impl<N: Node> Kept<N> {
    /// The progress, locked.
    pub fn lock(&self) -> MutexGuard<'_, Progress<N>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes what was kept (leaving nothing).
    pub fn take(&self) -> Progress<N> {
        std::mem::take(&mut *self.lock())
    }

    /// Records `wait`; true if it differs from the last one recorded.
    pub fn waited(&self, wait: Wait) -> bool {
        let mut p = self.lock();
        let changed = p.wait.as_ref() != Some(&wait);
        if changed {
            p.wait = Some(wait);
        }
        changed
    }
}

impl<N: Node> Watch<N> for Kept<N>
where
    N::Event: Clone,
    N::Completion: Clone,
{
    fn blocked(&mut self, node: &N) {
        self.waited((node.awaited(), node.unexpected()));
    }

    fn event(&mut self, at: Instant, event: &N::Event) {
        let mut p = self.lock();
        p.run.events.push(event.clone());
        p.run.events_at.push(at);
    }

    fn completion(&mut self, at: Instant, completion: &N::Completion) {
        let mut p = self.lock();
        p.run.completions.push(completion.clone());
        p.run.completed_at.push(at);
    }
}
