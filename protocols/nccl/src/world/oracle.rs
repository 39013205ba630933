//! The judge of the in-memory world: every receive must take the message its sender meant for it,
//! the k-th send of (sender, receiver, intended tag) for the k-th such receive (MPI's
//! non-overtaking order). Written once here; it belongs in the seam's judge.

use std::collections::{BTreeMap, VecDeque};

use super::{Node, World};
use crate::io::Observation;
use crate::program::{Call, Step};

/// A receive that took another message than the one meant for it.
#[derive(Clone, Debug, PartialEq, Eq)]
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

impl World {
    /// Every receive that took a message other than the one meant for it (empty when all is well).
    pub fn mismatches(&self) -> Vec<Mismatch> {
        let logical = |r: u32, s: usize| match self.programs[r as usize][s].step {
            Step::Send { logical_tag, .. } | Step::Recv { logical_tag, .. } => logical_tag,
            _ => 0,
        };
        // The k-th send and the k-th receive of (from, to, intended tag) belong together.
        let mut sends: BTreeMap<(u32, u32, i32), VecDeque<usize>> = BTreeMap::new();
        let mut expected: BTreeMap<(u32, usize), (u32, usize)> = BTreeMap::new();
        for (r, prog) in self.programs.iter().enumerate() {
            for (s, p) in prog.iter().enumerate() {
                if let Step::Send { peer, logical_tag, .. } = p.step {
                    sends.entry((r as u32, peer, logical_tag)).or_default().push_back(s);
                }
            }
        }
        for (r, prog) in self.programs.iter().enumerate() {
            for (s, p) in prog.iter().enumerate() {
                if let Step::Recv { peer: Some(from), logical_tag, .. } = p.step {
                    if let Some(send) = sends.get_mut(&(from, r as u32, logical_tag)).and_then(VecDeque::pop_front) {
                        expected.insert((r as u32, s), (from, send));
                    }
                }
            }
        }
        let mut sent_by: BTreeMap<usize, (u32, usize)> = BTreeMap::new();
        for (n, o) in &self.log {
            if let (Node::Rank(r), Observation::Sent { conn, step, .. }) = (n, o) {
                if let Some(&(link, _)) = self.link_of.get(&(*n, *conn)) {
                    sent_by.insert(link, (*r, *step));
                }
            }
        }
        let mut out = Vec::new();
        for (n, o) in &self.log {
            let (Node::Rank(r), Observation::Taken { conn, step, .. }) = (n, o) else { continue };
            let Some(&(link, _)) = self.link_of.get(&(*n, *conn)) else { continue };
            let (Some(&got), Some(&want)) = (sent_by.get(&link), expected.get(&(*r, *step))) else { continue };
            if got != want {
                out.push(Mismatch {
                    rank: *r,
                    step: *step,
                    call: self.programs[*r as usize][*step].call,
                    expected: (want.0, want.1, logical(want.0, want.1)),
                    got: (got.0, got.1, logical(got.0, got.1)),
                });
            }
        }
        out
    }
}
