//! The judge of the in-memory world: every receive must take the message its sender meant for it,
//! the k-th send of (sender, receiver, intended tag) for the k-th such receive (MPI's
//! non-overtaking order). Written once here; it belongs in the seam's judge. It judges as the
//! observations come, so an explorer that drops the log still judges every receive.

use std::collections::{BTreeMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use bootsim_core::ConnId;

use super::{Node, World};
use crate::io::Observation;
use crate::program::{Call, Planned, Step};

/// A receive that took another message than the one meant for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Mismatch {
    /// The receiving rank, its step and call.
    pub rank: u32,
    /// The receiving step.
    pub step: usize,
    /// The receiving call.
    pub call: Call,
    /// The message meant for it: sender, sender's step, intended tag.
    pub expected: (u32, usize, i32),
    /// The message it took: sender, sender's step, intended tag.
    pub got: (u32, usize, i32),
}

/// The oracle's state: which send each receive must take (fixed by the programs), which send
/// each connection carries, and the receives that took another.
#[derive(Clone, Debug)]
pub(super) struct Judge {
    /// (receiver, its step) → (sender, its step).
    expected: Arc<BTreeMap<(u32, usize), (u32, usize)>>,
    /// Link → (sender, its step).
    sent_by: BTreeMap<usize, (u32, usize)>,
    found: Vec<Mismatch>,
}

fn logical(programs: &[Vec<Planned>], r: u32, s: usize) -> i32 {
    match programs[r as usize][s].step {
        Step::Send { logical_tag, .. } | Step::Recv { logical_tag, .. } => logical_tag,
        _ => 0,
    }
}

impl Judge {
    pub(super) fn new(programs: &[Vec<Planned>]) -> Judge {
        // The k-th send and the k-th receive of (from, to, intended tag) belong together.
        let mut sends: BTreeMap<(u32, u32, i32), VecDeque<usize>> = BTreeMap::new();
        let mut expected = BTreeMap::new();
        for (r, prog) in programs.iter().enumerate() {
            for (s, p) in prog.iter().enumerate() {
                if let Step::Send { peer, logical_tag, .. } = p.step {
                    sends.entry((r as u32, peer, logical_tag)).or_default().push_back(s);
                }
            }
        }
        for (r, prog) in programs.iter().enumerate() {
            for (s, p) in prog.iter().enumerate() {
                if let Step::Recv { peer: Some(from), logical_tag, .. } = p.step {
                    if let Some(send) = sends.get_mut(&(from, r as u32, logical_tag)).and_then(VecDeque::pop_front) {
                        expected.insert((r as u32, s), (from, send));
                    }
                }
            }
        }
        Judge { expected: Arc::new(expected), sent_by: BTreeMap::new(), found: Vec::new() }
    }

    /// Judges one observation of `node`; `link` is the link of the connection it names.
    pub(super) fn observe(
        &mut self,
        programs: &[Vec<Planned>],
        node: Node,
        o: &Observation,
        link: impl Fn(ConnId) -> Option<usize>,
    ) {
        match (node, o) {
            (Node::Rank(r), Observation::Sent { conn, step, .. }) => {
                if let Some(l) = link(*conn) {
                    self.sent_by.insert(l, (r, *step));
                }
            }
            (Node::Rank(r), Observation::Taken { conn, step, .. }) => {
                let Some(l) = link(*conn) else { return };
                let (Some(&got), Some(&want)) = (self.sent_by.get(&l), self.expected.get(&(r, *step))) else { return };
                if got != want {
                    self.found.push(Mismatch {
                        rank: r,
                        step: *step,
                        call: programs[r as usize][*step].call,
                        expected: (want.0, want.1, logical(programs, want.0, want.1)),
                        got: (got.0, got.1, logical(programs, got.0, got.1)),
                    });
                }
            }
            _ => {}
        }
    }
}

impl Judge {
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
