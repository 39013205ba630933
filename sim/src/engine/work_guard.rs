//! The engines' work budget: a case whose knobs make it too costly to simulate (huge costs
//! walked stall by stall, a day of simulated retries) ends with a [`GuardTrip`] naming its knobs
//! instead of running on for hours: its own verdict (`Verdict::Guard`), no verdict on the protocol. Counted in the engine's own steps and the kernel model's
//! work, never wall time, so it trips at the same point on every machine; far above what any
//! run of that many ranks needs. One guard for every engine (`fast`, `turmoil`).

use std::time::Duration;

use bootsim_core::{Instant, RunRecord};

use crate::case::Case;
use crate::oracle::Finding;

/// Unfinished ranks the guard's finding names by their last progress (then how many more).
const PROGRESS_NAMED: usize = 4;

/// How often [`WorkGuard::step`] reads the kernel model's work (a sum over every RX queue:
/// reading it on each step cost a quarter of a 64-rank run's instructions).
pub(crate) const CHECK_EVERY: u64 = 64;

/// Where the guard stopped a run: its steps, the simulated time, the case's deadline and the
/// kernel knobs that made it costly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuardTrip {
    /// The engine's steps plus the kernel model's work when it tripped.
    pub steps: u64,
    /// Simulated time when it tripped.
    pub at: Instant,
    /// The case's deadline, not reached.
    pub deadline: Duration,
    /// The case's kernel knobs (`service=1ms ...`), or "the adversary's" when it sets none.
    pub knobs: String,
}

impl GuardTrip {
    /// The finding, naming the unfinished ranks of `record` by their last progress (latest
    /// first): when init or an operation last ended, and how many had.
    pub fn finding(&self, record: &RunRecord) -> Finding {
        let mut unfinished: Vec<(Option<Instant>, u32, usize)> = record
            .ranks
            .iter()
            .enumerate()
            .filter(|(_, r)| r.finished_at.is_none())
            .map(|(i, r)| (r.ended_at.last().copied(), i as u32, r.ended_at.len()))
            .collect();
        unfinished.sort_by_key(|&(at, rank, _)| (std::cmp::Reverse(at), rank));
        let mut named: Vec<String> = unfinished
            .iter()
            .take(PROGRESS_NAMED)
            .map(|&(at, rank, done)| match (at, done) {
                (Some(at), 1) => format!("rank {rank} at {at} (init done)"),
                (Some(at), d) => format!("rank {rank} at {at} (init and {} operation(s) done)", d - 1),
                (None, _) => format!("rank {rank} nothing yet (init not done)"),
            })
            .collect();
        if unfinished.len() > PROGRESS_NAMED {
            named.push(format!("{} more", unfinished.len() - PROGRESS_NAMED));
        }
        let progress = if named.is_empty() { "no unfinished rank".to_string() } else { named.join(", ") };
        Finding::Guard {
            steps: self.steps,
            at: self.at.to_string(),
            deadline_ms: u64::try_from(self.deadline.as_millis()).unwrap_or(u64::MAX),
            progress,
            knobs: self.knobs.clone(),
        }
    }
}

/// A run's budget and what it has spent.
pub(crate) struct WorkGuard {
    /// The engine's steps so far (events delivered, wake-ups, turmoil ticks).
    pub(crate) spent: u64,
    budget: u64,
    periods: u64,
}

impl WorkGuard {
    /// Steps a run may take: 20 million, and 200 000 more per pair of ranks; and RX-queue
    /// busy periods: 2 million and 1 000 per pair (a 128-rank `rss` run makes 222 000).
    pub(crate) fn new(ranks: u32) -> WorkGuard {
        let pairs = u64::from(ranks) * u64::from(ranks);
        WorkGuard {
            spent: 0,
            budget: 20_000_000u64.saturating_add(pairs.saturating_mul(200_000)),
            periods: 2_000_000u64.saturating_add(pairs.saturating_mul(1_000)),
        }
    }

    /// Counts one step; every [`CHECK_EVERY`] steps, reads the kernel model's `work` and
    /// returns the trip once the budget is spent.
    pub(crate) fn step(&mut self, now: Instant, case: &Case, work: impl FnOnce() -> u64) -> Option<GuardTrip> {
        self.spent += 1;
        if !self.spent.is_multiple_of(CHECK_EVERY) {
            return None;
        }
        self.exhausted(now, case, work())
    }

    /// The trip once the budget is spent (the engine's steps and the kernel model's `work`),
    /// naming the case's kernel knobs.
    pub(crate) fn exhausted(&self, now: Instant, case: &Case, work: u64) -> Option<GuardTrip> {
        if self.spent < self.budget && work < self.periods {
            return None;
        }
        let spent = self.spent.saturating_add(work);
        let knobs: Vec<String> = case.knobs().iter().map(|(k, v)| format!("{k}={v}")).collect();
        let knobs = if knobs.is_empty() { "the adversary's".to_string() } else { knobs.join(" ") };
        Some(GuardTrip { steps: spent, at: now, deadline: case.deadline(), knobs })
    }
}
