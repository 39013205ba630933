//! The library facade for testing any protocol of the seam ([`bootsim_core::seam::Protocol`])
//! from a cargo test: run one case on either engine ([`run`]), sweep seeds ([`sweep`]), judge
//! a record ([`judge`]), and say how to replay a run ([`replay_line`]).
//!
//! A [`Case`] gives the world (engine, ranks, adversary, seed, kernel knobs, deadline); the
//! protocol, its variant and its workload are given beside it (a case string's `variant=` and
//! `workload=` words are NVSHMEM's, and other protocols ignore them).
//!
//! ```
//! use bootsim_nvshmem::Variant;
//! use bootsim_sim::harness::{replay_line, run, sweep};
//! use bootsim_sim::protocol::Nvshmem;
//! use bootsim_nvshmem::workload::Workload;
//! use bootsim_sim::{Case, Verdict};
//!
//! // NVSHMEM 3.4 under the `rss` adversary: a sweep of 50 seeds finds its corruption.
//! let case = Case::parse("engine=fast ranks=2 adversary=rss").unwrap();
//! let (variant, workload) = (Variant::NVSHMEM_3_4, Workload::Deepep { qps: 24 });
//! let s = sweep(&Nvshmem, &variant, &workload, &case, 0..50, 1);
//! let first = s.first_failure().expect("3.4 corrupts within 50 seeds");
//! assert_eq!(first.verdict, Verdict::Corruption);
//! // Its replay: the same verdict and the same trace, byte for byte.
//! let failing = case.with_seed(first.seed);
//! let (a, b) = (run(&Nvshmem, &variant, &workload, &failing, true), run(&Nvshmem, &variant, &workload, &failing, true));
//! assert_eq!((a.verdict, a.trace.unwrap().digest), (b.verdict, b.trace.unwrap().digest));
//! assert!(replay_line("nvshmem", "nvshmem-3.4", "deepep", &failing).ends_with("adversary=rss seed=3"));
//! ```

use std::fmt::Display;
use std::time::Duration;

use bootsim_core::seam::{Judge, Protocol, Setup};
use bootsim_core::{Instant, RunRecord};

use bootsim_driver::TaskNode;

use crate::case::{Case, EngineKind};
use crate::engine::{fast, turmoil, Outcome, Trace};
use crate::oracle::{Finding, Verdict};
use crate::sweep::{sweep_with, SeedResult, SweepSummary};
use crate::words::host_addr;

/// The judge report every world concludes with: a verdict and its findings.
pub type Report = (Verdict, Vec<Finding>);

/// One run of a protocol: its verdict, findings, trace (when asked for) and raw outcome.
#[derive(Debug)]
pub struct Run {
    /// The verdict.
    pub verdict: Verdict,
    /// What the judge found, in its order.
    pub findings: Vec<Finding>,
    /// Simulated time until the last rank finished (or the run stopped).
    pub bootstrap_time: Duration,
    /// The trace and its digest, if asked for.
    pub trace: Option<Trace>,
    /// The raw outcome (the record, kernel counters, strays, drains).
    pub outcome: Outcome,
}

/// The run's setup for `protocol`'s factory: the case's seed and ranks, the root on host 0.
fn setup<'a, P: Protocol>(
    variant: &'a P::Variant,
    workload: &'a P::Workload,
    case: &Case,
) -> Setup<'a, P::Variant, P::Workload> {
    Setup { variant, workload, seed: case.seed(), n: case.ranks(), root_ip: host_addr(0, 0).ip() }
}

/// Runs `case`'s world with `protocol`'s `variant` and `workload` on the case's engine (the
/// fast engine, or `engine=turmoil`: the protocol's nodes through the async driver), judged by
/// the protocol's judge; `trace` keeps every trace line and the digest.
pub fn run<P>(protocol: &P, variant: &P::Variant, workload: &P::Workload, case: &Case, trace: bool) -> Run
where
    P: Protocol<Node: TaskNode>,
    P::Judge: Judge<Report = Report> + 'static,
{
    let mut outcome = match case.engine() {
        EngineKind::Fast => fast::run(protocol, variant, workload, case, trace),
        EngineKind::Turmoil => turmoil::run(protocol, variant, workload, case, trace, None),
    };
    let (verdict, findings) = outcome.verdict_by(protocol.judge(&setup::<P>(variant, workload, case)));
    let finished = outcome.record.ranks.iter().filter_map(|r| r.finished_at).max();
    let bootstrap_time = finished.unwrap_or(outcome.end) - Instant::ZERO;
    Run { verdict, findings, bootstrap_time, trace: outcome.trace.take(), outcome }
}

/// Judges a whole `record` of `case`'s world with `protocol`'s judge.
pub fn judge<P>(protocol: &P, variant: &P::Variant, workload: &P::Workload, case: &Case, record: &RunRecord) -> Report
where
    P: Protocol,
    P::Judge: Judge<Report = Report>,
{
    let mut j = protocol.judge(&setup::<P>(variant, workload, case));
    j.feed(record);
    j.finish(record)
}

/// Runs `case` with each of `seeds` (results in seed order) on `jobs` threads.
pub fn sweep<P>(
    protocol: &P,
    variant: &P::Variant,
    workload: &P::Workload,
    case: &Case,
    seeds: impl IntoIterator<Item = u64>,
    jobs: usize,
) -> SweepSummary
where
    P: Protocol<Node: TaskNode> + Sync,
    P::Variant: Sync,
    P::Workload: Sync,
    P::Judge: Judge<Report = Report> + 'static,
{
    let seeds: Vec<u64> = seeds.into_iter().collect();
    sweep_with(case, &seeds, jobs, &|_, _| {}, &|seed| {
        let r = run(protocol, variant, workload, &case.with_seed(seed), false);
        SeedResult::of(seed, r.verdict, r.bootstrap_time, &r.findings)
    })
}

/// The words that reproduce a run of `case` with a protocol, variant and workload named
/// apart: `protocol=.. variant=.. workload=.. engine=fast ranks=2 adversary=rss seed=3`. The
/// case's world words are its case string without NVSHMEM's variant and workload words (the
/// defaults it parses back to are what other protocols ignore), so `Case::parse` of them gives
/// the same world back.
pub fn replay_line(protocol: &str, variant: impl Display, workload: impl Display, case: &Case) -> String {
    const NOT_WORLD: [&str; 9] =
        ["protocol=", "variant=", "workload=", "drain_ms=", "first_tag=", "qps=", "k=", "len=", "ops="];
    let line = case.to_string();
    let world: Vec<&str> = line.split(' ').filter(|w| !NOT_WORLD.iter().any(|k| w.starts_with(k))).collect();
    format!("protocol={protocol} variant={variant} workload={workload} {}", world.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_lines_world_words_parse_back_to_the_same_world() {
        let case = Case::parse(
            "engine=fast variant=nvshmem-3.4 workload=deepep qps=3 ranks=3 adversary=lossy seed=9 deadline_ms=900",
        )
        .unwrap();
        let line = replay_line("p", "v", "w", &case);
        assert_eq!(line, "protocol=p variant=v workload=w engine=fast ranks=3 adversary=lossy seed=9 deadline_ms=900");
        let back = Case::parse(line.split_once("w ").unwrap().1).unwrap();
        assert_eq!(
            (back.ranks(), back.seed(), back.deadline(), &back.adversary()),
            (case.ranks(), case.seed(), case.deadline(), &case.adversary())
        );
        assert_eq!(back.kernel_config(), case.kernel_config());
    }
}
