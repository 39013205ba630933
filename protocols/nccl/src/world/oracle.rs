//! The in-memory world's side of the oracle ([`crate::oracle`], written once): which send each
//! link carries, and the receives that took another. It judges as the observations come, so an
//! explorer that drops the log still judges every receive.

use std::collections::BTreeMap;

use bootsim_core::ConnId;

use super::{Node, World};
use crate::io::Observation;
use crate::oracle::{Mismatch, Oracle};
use crate::program::Planned;

/// The oracle's state in the world: which send each connection carries, and the receives
/// that took another.
#[derive(Clone, Debug)]
pub(super) struct Judge {
    oracle: Oracle,
    /// Link → (sender, its step).
    sent_by: BTreeMap<usize, (u32, usize)>,
    found: Vec<Mismatch>,
}

impl Judge {
    pub(super) fn new(programs: &[Vec<Planned>]) -> Judge {
        Judge { oracle: Oracle::new(programs), sent_by: BTreeMap::new(), found: Vec::new() }
    }

    /// Judges one observation of `node`; `link` is the link of the connection it names.
    pub(super) fn observe(&mut self, node: Node, o: &Observation, link: impl Fn(ConnId) -> Option<usize>) {
        match (node, o) {
            (Node::Rank(r), Observation::Sent { conn, step, .. }) => {
                if let Some(l) = link(*conn) {
                    self.sent_by.insert(l, (r, *step));
                }
            }
            (Node::Rank(r), Observation::Taken { conn, step, .. }) => {
                let Some(&got) = link(*conn).and_then(|l| self.sent_by.get(&l)) else { return };
                self.found.extend(self.oracle.check(r, *step, got));
            }
            _ => {}
        }
    }
}

impl World {
    /// Every receive that took a message other than the one meant for it (empty when all is well).
    pub fn mismatches(&self) -> Vec<Mismatch> {
        self.judge.found.clone()
    }
}
