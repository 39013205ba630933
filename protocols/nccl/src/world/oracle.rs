//! The in-memory world's side of the oracle ([`crate::oracle`], written once): which send each
//! link carries, and the receives that took another. It judges as the observations come, so an
//! explorer that drops the log still judges every receive.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

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

    /// The sender and step of the message link `i` carries, once sent.
    pub(super) fn sent_by(&self, i: usize) -> Option<(u32, usize)> {
        self.sent_by.get(&i).copied()
    }

    /// Hashes what decides future verdicts, naming each link by `key` (`None`: a link that can
    /// carry nothing more).
    pub(super) fn hash_with<K: Hash + Ord>(&self, h: &mut impl Hasher, key: impl Fn(usize) -> Option<K>) {
        let sent: BTreeMap<K, (u32, usize)> = self.sent_by.iter().filter_map(|(&l, &s)| Some((key(l)?, s))).collect();
        sent.hash(h);
        self.found.hash(h);
    }
}

impl World {
    /// Every receive that took a message other than the one meant for it (empty when all is well).
    pub fn mismatches(&self) -> Vec<Mismatch> {
        self.judge.found.clone()
    }
}
