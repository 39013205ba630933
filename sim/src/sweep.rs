//! Sweeps: many seeds of one case on a pool of threads. Results are ordered by seed, so they do
//! not depend on the number of threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::case::Case;
use crate::oracle::Verdict;
use crate::run::run_case;

/// One seed's result, small enough to keep for millions of runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedResult {
    /// The seed.
    pub seed: u64,
    /// Its verdict.
    pub verdict: Verdict,
    /// Simulated bootstrap time.
    pub bootstrap_time: Duration,
    /// The first finding's text, if any.
    pub first_finding: Option<String>,
}

/// Aggregate of a sweep of one case over seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepSummary {
    /// The case (its seed is the first of the range).
    pub case: Case,
    /// Per seed, in seed order.
    pub results: Vec<SeedResult>,
}

impl SweepSummary {
    /// Runs of each verdict.
    pub fn count(&self, v: Verdict) -> usize {
        self.results.iter().filter(|r| r.verdict == v).count()
    }

    /// Runs that failed (not pass or benign).
    pub fn failures(&self) -> usize {
        self.results.iter().filter(|r| !r.verdict.is_ok()).count()
    }

    /// The first failing seed's result.
    pub fn first_failure(&self) -> Option<&SeedResult> {
        self.results.iter().find(|r| !r.verdict.is_ok())
    }

    /// How many seeds ran until (and including) the first failure.
    pub fn seeds_to_first_failure(&self) -> Option<usize> {
        self.results.iter().position(|r| !r.verdict.is_ok()).map(|i| i + 1)
    }

    /// Median simulated bootstrap time over the runs that finished.
    pub fn median_bootstrap(&self) -> Option<Duration> {
        let mut t: Vec<Duration> =
            self.results.iter().filter(|r| r.verdict != Verdict::Hang).map(|r| r.bootstrap_time).collect();
        t.sort();
        t.get(t.len() / 2).copied()
    }
}

/// Runs `seeds` (in the given order) of `case` on `jobs` threads; `progress` is called after
/// each run with (done, failures).
pub fn sweep(case: &Case, seeds: &[u64], jobs: usize, progress: &(dyn Fn(usize, usize) + Sync)) -> SweepSummary {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<SeedResult>>> = Mutex::new(vec![None; seeds.len()]);
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&seed) = seeds.get(i) else { return };
                let report = run_case(&case.with_seed(seed), false);
                let result = SeedResult {
                    seed,
                    verdict: report.verdict,
                    bootstrap_time: report.bootstrap_time,
                    first_finding: report
                        .findings
                        .iter()
                        .find(|f| f.verdict() == report.verdict)
                        .map(|f| f.to_string()),
                };
                if !result.verdict.is_ok() {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                slots.lock().expect("no panics while holding the lock")[i] = Some(result);
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, failed.load(Ordering::Relaxed));
            });
        }
    });
    let results = slots.into_inner().expect("threads joined").into_iter().map(|r| r.expect("every seed ran")).collect();
    SweepSummary { case: case.clone(), results }
}
