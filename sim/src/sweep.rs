//! Sweeps: many seeds of one case on a rayon pool of threads. Results are ordered by seed, so they do
//! not depend on the number of threads.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;
use std::time::Duration;

use crate::case::{Case, CaseError};
use crate::oracle::{Finding, Verdict};
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

    /// Runs that found a violation (not pass or benign, nor stopped by the work guard).
    pub fn failures(&self) -> usize {
        self.results.iter().filter(|r| r.verdict.is_violation()).count()
    }

    /// Runs the engine's work guard stopped before their deadline: no verdict on the protocol.
    pub fn guards(&self) -> usize {
        self.count(Verdict::Guard)
    }

    /// The first seed's result that found a violation.
    pub fn first_failure(&self) -> Option<&SeedResult> {
        self.results.iter().find(|r| r.verdict.is_violation())
    }

    /// The first seed's result the work guard stopped.
    pub fn first_guard(&self) -> Option<&SeedResult> {
        self.results.iter().find(|r| r.verdict == Verdict::Guard)
    }

    /// How many seeds ran until (and including) the first violation.
    pub fn seeds_to_first_failure(&self) -> Option<usize> {
        self.results.iter().position(|r| r.verdict.is_violation()).map(|i| i + 1)
    }

    /// Median simulated bootstrap time over the runs that finished.
    pub fn median_bootstrap(&self) -> Option<Duration> {
        let mut t: Vec<Duration> = self
            .results
            .iter()
            .filter(|r| !matches!(r.verdict, Verdict::Hang | Verdict::Guard))
            .map(|r| r.bootstrap_time)
            .collect();
        t.sort();
        t.get(t.len() / 2).copied()
    }
}

/// Runs `seeds` (in the given order) of `case` on a pool of `jobs` threads of its own (rayon;
/// results in seed order whatever the pool does); `progress` is called after each run with
/// (done, failures: violations, not guard stops). A seed whose `swarm` draw the case's knobs
/// do not fit ([`Case::with_seed`]) is an error naming it, before any seed runs.
pub fn sweep(
    case: &Case,
    seeds: &[u64],
    jobs: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<SweepSummary, CaseError> {
    sweep_with(case, seeds, jobs, progress, &|c| {
        let report = run_case(c, false);
        SeedResult::of(c.seed(), report.verdict, report.bootstrap_time, &report.findings)
    })
}

/// As [`sweep`], each seed's case run by `run_seed` (another protocol's run: `crate::harness`).
pub fn sweep_with(
    case: &Case,
    seeds: &[u64],
    jobs: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
    run_seed: &(dyn Fn(&Case) -> SeedResult + Sync),
) -> Result<SweepSummary, CaseError> {
    // Only a `swarm` draw can misfit: check every seed before running any, so the error names
    // the first such seed and no run is wasted.
    if case.adversary() == "swarm" {
        for &seed in seeds {
            case.with_seed(seed)?;
        }
    }
    let done = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let one = |&seed: &u64| -> Result<SeedResult, CaseError> {
        let result = run_seed(&case.with_seed(seed)?);
        if result.verdict.is_violation() {
            failed.fetch_add(1, Ordering::Relaxed);
        }
        progress(done.fetch_add(1, Ordering::Relaxed) + 1, failed.load(Ordering::Relaxed));
        Ok(result)
    };
    let results = match rayon::ThreadPoolBuilder::new().num_threads(jobs.max(1)).build() {
        Ok(pool) => pool.install(|| seeds.par_iter().map(one).collect::<Result<_, _>>()),
        // No threads to be had: the same results, one after another.
        Err(_) => seeds.iter().map(one).collect::<Result<_, _>>(),
    }?;
    Ok(SweepSummary { case: case.clone(), results })
}

impl SeedResult {
    /// Summarises one seed's run: its verdict, time and first finding of that verdict.
    pub fn of(seed: u64, verdict: Verdict, bootstrap_time: Duration, findings: &[Finding]) -> SeedResult {
        let first_finding = findings.iter().find(|f| f.verdict() == verdict).map(|f| f.to_string());
        SeedResult { seed, verdict, bootstrap_time, first_finding }
    }
}

/// A slice `index/count` of a seed range: seed `s` belongs to shard `s % count`, so the shards
/// of one range are disjoint and together cover it, whatever `--start` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    /// This shard, `0..count`.
    pub index: u64,
    /// How many shards.
    pub count: u64,
}

impl Shard {
    /// Everything in one shard.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Parses `I/N` with `I < N`.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let bad = || format!("shard `{s}`: expected I/N with 0 <= I < N, e.g. 3/64");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (i.parse::<u64>().map_err(|_| bad())?, n.parse::<u64>().map_err(|_| bad())?);
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// The seeds of `start..start + n` in this shard, ascending.
    pub fn seeds(&self, start: u64, n: u64) -> Vec<u64> {
        if n == 0 {
            return Vec::new();
        }
        (start..=start.saturating_add(n - 1)).filter(|s| s % self.count == self.index).collect()
    }
}

/// The layout version of `bootsim sweep --json` lines (docs/sharding.md): 3 since the `guard`
/// verdict (a count, and failure lines of seeds the work guard stopped); 2 since `counts` is an
/// object; lines without `schema` are layout 1 (`counts` as `[name, n]` pairs).
pub const SWEEP_JSON_SCHEMA: u32 = 3;

/// Runs per verdict name, every verdict present (0 when none): a JSON object.
pub fn verdict_counts(count: impl Fn(Verdict) -> usize) -> BTreeMap<String, usize> {
    Verdict::ALL.iter().map(|v| (v.name().to_string(), count(*v))).collect()
}

/// One line of `bootsim sweep --json`: a failing seed, or a variant's summary (last).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum JsonLine {
    /// A seed that failed: a violation, or a run the work guard stopped (verdict `guard`).
    Failure {
        /// [`SWEEP_JSON_SCHEMA`] of the writer (0: a line from before the field existed).
        #[serde(default)]
        schema: u32,
        /// The variant preset.
        variant: String,
        /// The full case string (replayable).
        case: String,
        /// Its seed.
        seed: u64,
        /// Its verdict name.
        verdict: String,
        /// The first finding of that verdict.
        first_finding: Option<String>,
    },
    /// A variant's totals over this shard.
    Summary {
        /// [`SWEEP_JSON_SCHEMA`] of the writer (0: a line from before the field existed).
        #[serde(default)]
        schema: u32,
        /// The variant preset.
        variant: String,
        /// The sweep's case with the range's first seed (identifies the sweep across shards).
        case: String,
        /// First seed of the whole range.
        start: u64,
        /// Seeds in the whole range.
        seeds: u64,
        /// Which shard this is.
        shard: Shard,
        /// Runs in this shard.
        runs: usize,
        /// Runs per verdict name (every verdict, 0 when none).
        counts: BTreeMap<String, usize>,
        /// The lowest seed of this shard with a violation.
        first_failure_seed: Option<u64>,
    },
}

impl JsonLine {
    /// The failure lines (in seed order) and the summary line of one variant's sweep; an error
    /// when `start` is a seed the sweep's knobs do not fit ([`Case::with_seed`]).
    pub fn from_summary(s: &SweepSummary, start: u64, seeds: u64, shard: Shard) -> Result<Vec<JsonLine>, CaseError> {
        let variant = s.case.variant_label().to_string();
        let mut lines: Vec<JsonLine> = s
            .results
            .iter()
            .filter(|r| !r.verdict.is_ok())
            .map(|r| {
                Ok(JsonLine::Failure {
                    schema: SWEEP_JSON_SCHEMA,
                    variant: variant.clone(),
                    case: s.case.with_seed(r.seed)?.to_string(),
                    seed: r.seed,
                    verdict: r.verdict.name().to_string(),
                    first_finding: r.first_finding.clone(),
                })
            })
            .collect::<Result<_, CaseError>>()?;
        lines.push(JsonLine::Summary {
            schema: SWEEP_JSON_SCHEMA,
            variant,
            case: s.case.with_seed(start)?.to_string(),
            start,
            seeds,
            shard,
            runs: s.results.len(),
            counts: verdict_counts(|v| s.count(v)),
            first_failure_seed: s.first_failure().map(|r| r.seed),
        });
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A swarm case whose `stalls=` names RX queue 7, at a seed whose draw has it.
    fn stall_on_queue_7() -> Case {
        let line =
            |seed: u64| format!("workload=deepep ranks=2 adversary=swarm seed={seed} stall_gap=off stalls=0:7:p1:5");
        (0..512).find_map(|s| Case::parse(&line(s)).ok()).expect("a draw with 8 queues")
    }

    #[test]
    fn a_sweep_over_a_seed_whose_draw_its_knobs_do_not_fit_is_refused_before_any_run() {
        let c = stall_on_queue_7();
        let misfit = (0..200).find(|&s| c.with_seed(s).is_err()).expect("a draw with fewer queues");
        let ran = AtomicUsize::new(0);
        let seeds: Vec<u64> = (0..200).collect();
        let e = sweep(&c, &seeds, 2, &|_, _| {
            ran.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains(&format!("seed {misfit}: the knobs do not fit the kernel adversary=swarm")), "{e}");
        assert!(e.contains("queue 7 does not exist"), "{e}");
        assert_eq!(ran.load(Ordering::Relaxed), 0, "no seed ran");
        // The seeds that fit sweep as before.
        let fitting: Vec<u64> = seeds.into_iter().filter(|&s| c.with_seed(s).is_ok()).take(3).collect();
        assert_eq!(sweep(&c, &fitting, 1, &|_, _| {}).unwrap().results.len(), 3);
    }

    #[test]
    fn shards_partition_the_range() {
        let n = 5;
        let mut all: Vec<u64> = (0..n).flat_map(|i| Shard { index: i, count: n }.seeds(7, 23)).collect();
        all.sort_unstable();
        assert_eq!(all, (7..30).collect::<Vec<_>>());
        assert_eq!(Shard::WHOLE.seeds(3, 4), vec![3, 4, 5, 6]);
        for bad in ["", "3", "4/4", "1/0", "a/2", "-1/2"] {
            assert!(Shard::parse(bad).unwrap_err().contains("expected I/N"), "{bad}");
        }
        assert_eq!(Shard::parse("3/64"), Ok(Shard { index: 3, count: 64 }));
    }
}
