//! The non-overtaking oracle, written once for every world that runs NCCL's ranks (core's
//! in-memory test world, bootsim's engines and explorer, all through the seam's judge): every receive
//! must take the message its sender meant for it, the k-th send of (sender, receiver, intended
//! tag) for the k-th such receive (MPI's non-overtaking order). The intended tag is the
//! program's `logical_tag` (2.21's tags, also for 2.8, whose messages carry none).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::program::{Call, CallKind, Planned, Step};

/// A receive that took another message than the one meant for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Mismatch {
    /// The receiving rank.
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

impl Mismatch {
    /// True when neither message's bytes are used: a sync or barrier flag taken for another
    /// (NCCL never reads them).
    pub fn flags_only(&self, oracle: &Oracle) -> bool {
        let unused = |r: u32, s: usize| {
            oracle
                .programs
                .get(r as usize)
                .and_then(|p| p.get(s))
                .is_some_and(|p| matches!(p.call.kind, CallKind::SetupSync { .. } | CallKind::Barrier { .. }))
        };
        unused(self.rank, self.step) && unused(self.got.0, self.got.1)
    }
}

/// (is a send, rank, peer, intended tag, nth of those).
type StepKey = (bool, u32, u32, i32, u32);

/// Which send each receive must take, fixed by the ranks' programs.
#[derive(Clone, Debug)]
pub struct Oracle {
    programs: Arc<Vec<Vec<Planned>>>,
    /// (receiver, its step) → (sender, its step).
    expected: Arc<BTreeMap<(u32, usize), (u32, usize)>>,
    /// (is a send, rank, peer, intended tag, nth of those) → the step (see
    /// [`crate::program::nth_of_kind`]).
    steps: Arc<BTreeMap<StepKey, usize>>,
}

impl Oracle {
    /// The oracle of these programs (rank r runs `programs[r]`).
    pub fn new(programs: &[Vec<Planned>]) -> Oracle {
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
        let mut steps = BTreeMap::new();
        for (r, prog) in programs.iter().enumerate() {
            for (s, (p, nth)) in prog.iter().zip(crate::program::nth_of_kind(prog)).enumerate() {
                let key = match p.step {
                    Step::Send { peer, logical_tag, .. } => (true, peer, logical_tag),
                    Step::Recv { peer: Some(peer), logical_tag, .. } => (false, peer, logical_tag),
                    _ => continue,
                };
                steps.insert((key.0, r as u32, key.1, key.2, nth), s);
            }
        }
        Oracle { programs: Arc::new(programs.to_vec()), expected: Arc::new(expected), steps: Arc::new(steps) }
    }

    /// The programs it judges.
    pub fn programs(&self) -> &[Vec<Planned>] {
        &self.programs
    }

    /// The step `step` of rank `rank`, if there is one.
    pub fn planned(&self, rank: u32, step: usize) -> Option<&Planned> {
        self.programs.get(rank as usize).and_then(|p| p.get(step))
    }

    /// The step of `rank`'s `nth` send to `to` with intended tag `logical_tag`.
    pub fn send_step(&self, rank: u32, to: u32, logical_tag: i32, nth: u32) -> Option<usize> {
        self.steps.get(&(true, rank, to, logical_tag, nth)).copied()
    }

    /// The step of `rank`'s `nth` receive from `from` with intended tag `logical_tag`.
    pub fn recv_step(&self, rank: u32, from: u32, logical_tag: i32, nth: u32) -> Option<usize> {
        self.steps.get(&(false, rank, from, logical_tag, nth)).copied()
    }

    /// The send (sender, its step) rank `rank`'s receive in step `step` must take, if known.
    pub fn expected(&self, rank: u32, step: usize) -> Option<(u32, usize)> {
        self.expected.get(&(rank, step)).copied()
    }

    /// Judges a take: rank `rank`'s receive in step `step` took the message sender `got.0`
    /// sent in its step `got.1`. None when it is the one meant for it (or none was).
    pub fn check(&self, rank: u32, step: usize, got: (u32, usize)) -> Option<Mismatch> {
        let want = self.expected(rank, step)?;
        (got != want).then(|| Mismatch {
            rank,
            step,
            call: self.programs[rank as usize][step].call,
            expected: (want.0, want.1, self.logical(want.0, want.1)),
            got: (got.0, got.1, self.logical(got.0, got.1)),
        })
    }

    /// The intended tag of a send or receive step (0 for other steps).
    fn logical(&self, r: u32, s: usize) -> i32 {
        match self.planned(r, s).map(|p| &p.step) {
            Some(Step::Send { logical_tag, .. } | Step::Recv { logical_tag, .. }) => *logical_tag,
            _ => 0,
        }
    }
}
