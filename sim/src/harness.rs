//! The library facade for testing any protocol of the seam ([`bootsim_core::seam::Protocol`])
//! from a cargo test: run one case on either engine ([`run`]), sweep seeds ([`sweep`]), judge
//! a record ([`judge`]), explore every accept order ([`explore`]), shrink a failing case
//! ([`shrink`]), say how to replay a run ([`replay_line`]) and read such a line back
//! ([`world_of`]).
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
//! let s = sweep(&Nvshmem, &variant, &workload, &case, 0..50, 1)?;
//! let first = s.first_failure().expect("3.4 corrupts within 50 seeds");
//! assert_eq!(first.verdict, Verdict::Corruption);
//! // Its replay: the same verdict and the same trace, byte for byte.
//! let failing = case.with_seed(first.seed)?;
//! let (a, b) = (run(&Nvshmem, &variant, &workload, &failing, true), run(&Nvshmem, &variant, &workload, &failing, true));
//! assert_eq!((a.verdict, a.trace.unwrap().digest), (b.verdict, b.trace.unwrap().digest));
//! assert!(replay_line("nvshmem", "nvshmem-3.4", "deepep", &failing).ends_with("adversary=rss seed=3"));
//! # Ok::<(), bootsim_sim::CaseError>(())
//! ```

use std::fmt::Display;
use std::time::Duration;

use bootsim_core::seam::{Judge, Protocol, Setup};
use bootsim_core::{Instant, RunRecord};

use bootsim_driver::TaskNode;

use crate::case::{Case, CaseError, EngineKind};
use crate::engine::{fast, turmoil, Outcome, Trace};
use crate::explore::search::{replay_base, search};
use crate::explore::{Bounds, Exploration, Explored, Faults, World};
use crate::oracle::{Finding, Verdict};
use crate::shrink::{shrink_by, ShrinkError, Shrunk};
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
    let (verdict, findings) = outcome.verdict_with(|| protocol.judge(&setup::<P>(variant, workload, case)));
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

/// Runs `case` with each of `seeds` (results in seed order) on `jobs` threads; the summary's
/// case is `case` [`Case::named`] with the protocol's variant and workload, so its line (and
/// each seed's, [`Case::with_seed`]) reproduces their runs. An error, before any seed runs,
/// names a seed whose `swarm` draw the case's knobs do not fit, or says why the words make no
/// line.
pub fn sweep<P>(
    protocol: &P,
    variant: &P::Variant,
    workload: &P::Workload,
    case: &Case,
    seeds: impl IntoIterator<Item = u64>,
    jobs: usize,
) -> Result<SweepSummary, CaseError>
where
    P: Protocol<Node: TaskNode> + Sync,
    P::Variant: Sync + Display,
    P::Workload: Sync + Display,
    P::Judge: Judge<Report = Report> + 'static,
{
    let seeds: Vec<u64> = seeds.into_iter().collect();
    let case = case.named(protocol.name(), variant, workload)?;
    sweep_with(&case, &seeds, jobs, &|_, _| {}, &|c| {
        let r = run(protocol, variant, workload, c, false);
        SeedResult::of(c.seed(), r.verdict, r.bootstrap_time, &r.findings)
    })
}

/// Explores every schedule of `protocol`'s world over `case`'s ranks and seed within `bounds`:
/// each order in which a rank's peer listener may accept its in-flight connections (and, with
/// `faults`, whether a drain gives up), in a zero-latency world where nothing else is left to
/// chance, with sim's search (states merged by fingerprint, sleep sets over step footprints).
/// Every final state is judged by the protocol's judge. The case's engine and adversary do not
/// apply.
///
/// [`Exploration::proves_pass`] is the proof: every schedule explored and none fails. Otherwise
/// [`Exploration::counterexample`] is the worst violation's shortest schedule, a case with an
/// explicit `accept=` order the fast engine replays ([`run`]), [`Case::named`] with the
/// protocol's variant and workload: its line is the one to keep. An error only when those
/// words make no line ([`Case::named`]).
///
/// ```
/// use bootsim_nvshmem::Variant;
/// use bootsim_sim::explore::{Bounds, Faults};
/// use bootsim_sim::harness::{explore, run};
/// use bootsim_sim::protocol::Nvshmem;
/// use bootsim_sim::{Case, Verdict};
///
/// let case = Case::parse("workload=deepep ranks=2").unwrap();
/// // The sequence-tagged fix: no accept order takes a message meant for another operation.
/// let fixed = explore(&Nvshmem, &Variant::preset("seq").unwrap(), case.workload(), &case, Faults::default(), Bounds::default())?;
/// assert!(fixed.proves_pass(), "{:?}", fixed.verdicts);
/// // NVSHMEM 3.4: an accept order that corrupts, which the fast engine replays.
/// let broken = explore(&Nvshmem, &Variant::NVSHMEM_3_4, case.workload(), &case, Faults::default(), Bounds::default())?;
/// let cx = broken.counterexample().expect("a failing schedule");
/// assert_eq!(cx.verdict, Verdict::Corruption);
/// // Its case names the variant explored: the CLI replays its line.
/// let line = cx.case.case_string()?;
/// assert!(line.starts_with("engine=fast variant=nvshmem-3.4 workload=deepep"), "{line}");
/// assert!(line.ends_with("accept=0:1.0,1.1,1.2/1:0.0,0.2,0.1"), "{line}");
/// assert_eq!(run(&Nvshmem, &Variant::NVSHMEM_3_4, case.workload(), &Case::parse(&line)?, false).verdict, Verdict::Corruption);
/// # Ok::<(), bootsim_sim::CaseError>(())
/// ```
pub fn explore<P>(
    protocol: &P,
    variant: &P::Variant,
    workload: &P::Workload,
    case: &Case,
    faults: Faults,
    bounds: Bounds,
) -> Result<Exploration, CaseError>
where
    P: Explored,
    P::Variant: Clone + Display,
    P::Workload: Clone + Display,
{
    let base = replay_base(&case.named(protocol.name(), variant, workload)?);
    let start = World::of(protocol.clone(), variant.clone(), workload.clone(), &base, faults);
    Ok(search(&base, start, bounds))
}

/// Shrinks a failing `case` of `protocol` to a minimal one with the same verdict, with sim's
/// shrinker: fewer ranks, another seed while the adversary is random, and the random RX-queue
/// stalls replaced by the few forced ones (`stall_gap=off stalls=...`) that matter. The
/// protocol's workload is kept as given. Deterministic: the same case always shrinks to the
/// same one. [`Shrunk::case`] is [`Case::named`] with the protocol's variant and workload: its
/// line is the one to keep. A case that does not fail is refused ([`ShrinkError::DoesNotFail`]),
/// and so is one the work guard stopped ([`ShrinkError::Guarded`]) or one whose words make no
/// line ([`ShrinkError::Unnamed`]).
///
/// ```
/// use bootsim_nvshmem::Variant;
/// use bootsim_nvshmem::workload::Workload;
/// use bootsim_sim::harness::{replay_line, run, shrink};
/// use bootsim_sim::protocol::Nvshmem;
/// use bootsim_sim::{Case, Verdict};
///
/// // NVSHMEM 3.4's corruption under `rss` (seed 3): 59 random RX stalls, of which one matters.
/// let (variant, workload) = (Variant::NVSHMEM_3_4, Workload::Deepep { qps: 24 });
/// let case = Case::parse("engine=fast ranks=2 adversary=rss seed=3").unwrap();
/// let s = shrink(&Nvshmem, &variant, &workload, &case).unwrap();
/// assert_eq!(s.verdict, Verdict::Corruption);
/// assert_eq!(s.case.kernel_config().stalls.len(), 1, "{}", s.case);
/// // The shrunk case names the variant shrunk: the CLI replays its line.
/// let line = s.case.to_string();
/// assert_eq!(line, "engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3 stall_gap=off stalls=0:1:p8:4246");
/// assert_eq!(run(&Nvshmem, &variant, &workload, &Case::parse(&line).unwrap(), false).verdict, Verdict::Corruption);
/// assert!(replay_line("nvshmem", "nvshmem-3.4", "deepep", &s.case).ends_with("seed=3 stall_gap=off stalls=0:1:p8:4246"));
/// ```
pub fn shrink<P>(protocol: &P, variant: &P::Variant, workload: &P::Workload, case: &Case) -> Result<Shrunk, ShrinkError>
where
    P: Protocol<Node: TaskNode>,
    P::Variant: Display,
    P::Workload: Display,
    P::Judge: Judge<Report = Report> + 'static,
{
    let case = case.named(protocol.name(), variant, workload).map_err(ShrinkError::Unnamed)?;
    shrink_by(&case, false, &|c, trace| {
        let r = run(protocol, variant, workload, c, trace);
        (r.verdict, r.findings, r.outcome)
    })
}

/// The words a replay line names apart from its world: the protocol's own types.
const NAMED_APART: [&str; 3] = ["protocol=", "variant=", "workload="];

/// The words that reproduce a run of `case`'s world with a protocol, variant and workload
/// named apart: `protocol=.. variant=.. workload=.. engine=fast ranks=2 adversary=rss seed=3`
/// (the world's words only: a case's own variant and workload words are left out), so
/// [`world_of`] the line gives the same world back. For a case the harness handed back, its
/// own line ([`Case::named`]) says the same.
pub fn replay_line(protocol: &str, variant: impl Display, workload: impl Display, case: &Case) -> String {
    crate::case::replay_words(protocol, &variant, &workload, case)
}

/// The world of a replay line ([`replay_line`]'s words), to run with the protocol, variant and
/// workload its `protocol=`, `variant=` and `workload=` words name, whose types are the
/// caller's: for a protocol of the user's own, the case named with those words
/// ([`Case::named`], printing the line again); otherwise the case the world's words give.
/// `run(&MyProtocol, &variant, &workload, &world_of(line)?, true)` in the caller's own cargo
/// test replays the line (the `bootsim` CLI knows only its built-in protocols).
///
/// ```
/// use bootsim_sim::harness::world_of;
///
/// let case = world_of("protocol=rendezvous variant=reused-tag workload=two-rounds engine=fast ranks=3 adversary=rss seed=9").unwrap();
/// assert_eq!((case.ranks(), case.adversary(), case.seed()), (3, "rss", 9));
/// ```
pub fn world_of(line: &str) -> Result<Case, CaseError> {
    let foreign = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("protocol="))
        .is_some_and(|p| !crate::case::PROTOCOLS.contains(&p));
    if foreign {
        return Case::parse_foreign(line, crate::case::PAYLOAD_BUDGET);
    }
    let world: Vec<&str> = line.split_whitespace().filter(|w| !NAMED_APART.iter().any(|k| w.starts_with(k))).collect();
    Case::parse(&world.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Nvshmem;

    #[test]
    fn a_harness_sweep_over_a_seed_whose_draw_its_knobs_do_not_fit_is_an_error_naming_it() {
        let line = |seed: u64| format!("ranks=2 adversary=swarm seed={seed} stall_gap=off stalls=0:7:p1:5");
        let case = (0..512).find_map(|s| Case::parse(&line(s)).ok()).expect("a draw with 8 queues");
        let misfit = (0..200).find(|&s| case.with_seed(s).is_err()).expect("a draw with fewer queues");
        let e = sweep(&Nvshmem, &case.variant(), case.workload(), &case, 0..200, 1).unwrap_err();
        assert!(e.to_string().contains(&format!("seed {misfit}: the knobs do not fit")), "{e}");
        assert!(e.to_string().contains("queue 7 does not exist"), "{e}");
    }

    #[test]
    fn a_replay_lines_world_words_parse_back_to_the_same_world() {
        let case = Case::parse(
            "engine=fast variant=nvshmem-3.4 workload=deepep qps=3 ranks=3 adversary=lossy seed=9 deadline_ms=900",
        )
        .unwrap();
        let line = replay_line("p", "v", "w", &case);
        assert_eq!(line, "protocol=p variant=v workload=w engine=fast ranks=3 adversary=lossy seed=9 deadline_ms=900");
        let back = world_of(&line).unwrap();
        assert_eq!(
            (back.ranks(), back.seed(), back.deadline(), &back.adversary()),
            (case.ranks(), case.seed(), case.deadline(), &case.adversary())
        );
        assert_eq!(back.kernel_config(), case.kernel_config());
    }
}
