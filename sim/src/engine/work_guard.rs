//! The engines' work budget: a case whose knobs make it too costly to simulate (huge costs
//! walked stall by stall, a day of simulated retries) ends with an error naming its knobs
//! instead of running on for hours. Counted in the engine's own steps and the kernel model's
//! work, never wall time, so it trips at the same point on every machine; far above what any
//! run of that many ranks needs. One guard for every engine (`fast`, `turmoil`).

use bootsim_core::Instant;

use crate::case::Case;
use crate::kernel::KernelConfig;

/// How often [`WorkGuard::step`] reads the kernel model's work (a sum over every RX queue:
/// reading it on each step cost a quarter of a 64-rank run's instructions).
pub(crate) const CHECK_EVERY: u64 = 64;

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
    /// returns the error once the budget is spent.
    pub(crate) fn step(&mut self, now: Instant, case: &Case, work: impl FnOnce() -> u64) -> Option<String> {
        self.spent += 1;
        if !self.spent.is_multiple_of(CHECK_EVERY) {
            return None;
        }
        self.exhausted(now, case, work())
    }

    /// The error once the budget is spent (the engine's steps and the kernel model's `work`),
    /// naming the case's kernel knobs.
    pub(crate) fn exhausted(&self, now: Instant, case: &Case, work: u64) -> Option<String> {
        if self.spent < self.budget && work < self.periods {
            return None;
        }
        let spent = self.spent.saturating_add(work);
        let text = case.to_string();
        let knobs: Vec<&str> = text
            .split_whitespace()
            .filter(|w| w.split_once('=').is_some_and(|(k, _)| KernelConfig::knobs().iter().any(|(n, _)| *n == k)))
            .collect();
        let knobs = if knobs.is_empty() { "the adversary's".to_string() } else { knobs.join(" ") };
        Some(format!(
            "the simulation gave up after {} events at simulated {now}, before deadline_ms={}: the case is too \
             costly to simulate with these kernel knobs: {knobs} (lower the costs or the deadline)",
            spent,
            case.deadline().as_millis()
        ))
    }
}
