//! Shrinking a failing case to a minimal one with the same verdict: fewer ranks, fewer and
//! smaller operations (NVSHMEM's, as `workload=custom ops=...`), and the random RX-queue stalls
//! replaced by the few forced ones (`stall_gap=off stalls=...`) that matter. Deterministic: the
//! same case always shrinks to the same result. The shrinker runs cases through a function it is
//! given, so any protocol of the seam shrinks with it (`harness::shrink`).

mod ddmin;
mod entry;
mod stalls;

pub use ddmin::ddmin;
pub use entry::{seed_entry, SeedEntry};
pub use stalls::stalls_of;

use crate::case::Case;
use crate::engine::Outcome;
use crate::kernel::{ScriptedStall, StallAt};
use crate::oracle::{Finding, Verdict};
use crate::run::run_case;
use bootsim_nvshmem::workload::{OpSpec, Workload};

/// Other seeds tried (`0..SEED_TRIES`) when a smaller structure loses the verdict under the
/// case's own seed, while the adversary is still random.
const SEED_TRIES: u64 = 32;
/// Most runs one shrink makes; past it, the best case so far is the result.
const RUN_BUDGET: usize = 20_000;

/// A shrunk case and how it was found.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The case given.
    pub original: Case,
    /// The minimal case found; it has `verdict`.
    pub case: Case,
    /// The verdict kept.
    pub verdict: Verdict,
    /// The minimal case's first finding of that verdict.
    pub first_finding: Option<String>,
    /// Runs made.
    pub runs: usize,
    /// Stalls the traced failing run suffered (merged), before delta debugging; 0 if the
    /// adversary could not be made explicit.
    pub stalls_seen: usize,
    /// Each reduction adopted, in order.
    pub log: Vec<String>,
}

/// Why a case cannot be shrunk.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShrinkError {
    /// The case passes (or is benign): there is no failure to keep.
    #[error("the case does not fail (verdict {0}); shrink needs a failing case (corruption, error or hang)")]
    DoesNotFail(Verdict),
    /// The engine's work guard stopped the case: it is too costly to simulate, not a failure of
    /// the protocol, and each shrink candidate could run to the guard's budget again.
    #[error("the case was stopped by the work guard (verdict guard): it is too costly to simulate, not a failure to keep; lower its kernel costs or deadline first")]
    Guarded,
    /// The protocol's variant and workload make no case line with the case's world
    /// ([`Case::named`]): a shrunk case could not be printed to reproduce its run.
    #[error("{0}")]
    Unnamed(crate::case::CaseError),
}

/// Shrinks a failing `case` (NVSHMEM's or NCCL's, as the case names it), keeping its verdict.
pub fn shrink(case: &Case) -> Result<Shrunk, ShrinkError> {
    shrink_by(case, true, &|c, trace| {
        let r = run_case(c, trace);
        (r.verdict, r.findings, r.outcome)
    })
}

/// One run as a shrink judges it: its verdict, findings and outcome (its stalls, when traced).
pub(crate) type Judged = (Verdict, Vec<Finding>, Outcome);

/// Shrinks a failing `case`, keeping its verdict, with `run` running a case (traced or not):
/// fewer ranks, another seed while the adversary is random, the few stalls that matter, and
/// with `ops` the case's NVSHMEM workload as fewer and smaller operations.
pub(crate) fn shrink_by(case: &Case, ops: bool, run: &dyn Fn(&Case, bool) -> Judged) -> Result<Shrunk, ShrinkError> {
    let verdict = run(case, false).0;
    if verdict == Verdict::Guard {
        return Err(ShrinkError::Guarded);
    }
    if !verdict.is_violation() {
        return Err(ShrinkError::DoesNotFail(verdict));
    }
    let mut s = Shrinker { verdict, runs: 1, log: Vec::new(), run };
    let mut cur = case.clone();
    let custom = cur.to_builder().workload(Workload::Custom(cur.workload().ops(cur.seed()))).build();
    if let (true, Ok(custom)) = (ops, custom) {
        if custom != cur && s.keeps(&custom) {
            cur = custom;
        }
    }
    cur = s.structure(cur);
    let mut stalls_seen = 0;
    if cur.kernel_config().stall_gap.is_some() {
        if let Some((explicit, n)) = s.make_stalls_explicit(&cur) {
            stalls_seen = n;
            cur = s.minimise_stalls(explicit);
            let smaller = s.structure(cur.clone());
            if smaller != cur {
                cur = s.minimise_stalls(smaller);
            }
        }
    }
    let (last, findings, _) = run(&cur, false);
    debug_assert_eq!(last, verdict);
    let first_finding = findings.iter().find(|f| f.verdict() == verdict).map(|f| f.to_string());
    Ok(Shrunk { original: case.clone(), case: cur, verdict, first_finding, runs: s.runs + 1, stalls_seen, log: s.log })
}

struct Shrinker<'r> {
    verdict: Verdict,
    runs: usize,
    log: Vec<String>,
    /// Runs a case (traced or not).
    run: &'r dyn Fn(&Case, bool) -> Judged,
}

impl Shrinker<'_> {
    /// One run: does `c` keep the verdict?
    fn keeps(&mut self, c: &Case) -> bool {
        if self.runs >= RUN_BUDGET {
            return false;
        }
        self.runs += 1;
        (self.run)(c, false).0 == self.verdict
    }

    /// `c`, or while stalls are random `c` under another seed, keeping the verdict.
    fn find(&mut self, c: Case) -> Option<Case> {
        if self.keeps(&c) {
            return Some(c);
        }
        if !stalls(&c).is_empty() {
            return None;
        }
        (0..SEED_TRIES).filter(|s| *s != c.seed()).filter_map(|s| c.with_seed(s).ok()).find(|t| self.keeps(t))
    }

    /// Fewer ranks, fewer ops, smaller ops, until none of them helps.
    fn structure(&mut self, mut cur: Case) -> Case {
        loop {
            let before = cur.clone();
            for r in rank_candidates(cur.ranks()) {
                let mut t = cur.to_builder().ranks(r);
                let kept: Vec<ScriptedStall> = stalls(&cur).into_iter().filter(|s| s.host < r).collect();
                if !stalls(&cur).is_empty() {
                    t = t.knob("stalls", &ScriptedStall::format_list(&kept));
                }
                // A smaller world the case cannot say (an accept order naming a rank it drops)
                // is no candidate.
                let Ok(t) = t.build() else { continue };
                if let Some(t) = self.find(t) {
                    self.log.push(format!("ranks {} -> {r}", cur.ranks()));
                    cur = t;
                    break;
                }
            }
            if let Workload::Custom(ops) = &cur.workload() {
                let n = ops.len();
                let mut last: Option<Case> = None;
                let base = cur.clone();
                let kept = ddmin(ops.clone(), &mut |sub: &[OpSpec]| {
                    if sub.is_empty() {
                        return false;
                    }
                    let Ok(t) = base.to_builder().workload(Workload::Custom(sub.to_vec())).build() else {
                        return false;
                    };
                    let found = self.find(t);
                    let ok = found.is_some();
                    last = found.or(last.take());
                    ok
                });
                if kept.len() < n {
                    cur = last.expect("ddmin adopted a kept sublist");
                    self.log.push(format!("ops {n} -> {}", kept.len()));
                }
                cur = self.smaller_sizes(cur);
            }
            if cur == before {
                return cur;
            }
        }
    }

    /// Each sized op made as small as it can be.
    fn smaller_sizes(&mut self, mut cur: Case) -> Case {
        let Workload::Custom(ops) = cur.workload().clone() else { return cur };
        for i in 0..ops.len() {
            let Workload::Custom(now) = &cur.workload() else { return cur };
            let (old, cands) = match now[i] {
                OpSpec::Allgather(l) => (l, size_candidates(l, 1)),
                OpSpec::Alltoall(l) if l % 24 == 0 => (l, size_candidates(l, 24)),
                OpSpec::Alltoall(l) => (l, size_candidates(l, 1)),
                OpSpec::Barrier => continue,
            };
            for len in cands {
                let mut t_ops = now.clone();
                t_ops[i] = match t_ops[i] {
                    OpSpec::Allgather(_) => OpSpec::Allgather(len),
                    _ => OpSpec::Alltoall(len),
                };
                let Ok(t) = cur.to_builder().workload(Workload::Custom(t_ops)).build() else { continue };
                if let Some(t) = self.find(t) {
                    self.log.push(format!("op #{i} size {old} -> {len}"));
                    cur = t;
                    break;
                }
            }
        }
        cur
    }

    /// The stalls a traced run of `cur` suffered, forced, with random stalls off; `None` when
    /// that does not keep the verdict (e.g. random loss shifts with timing).
    fn make_stalls_explicit(&mut self, cur: &Case) -> Option<(Case, usize)> {
        if let Err(e) = cur.check_kept_results(true) {
            // A traced run this size would not fit: the stalls stay random (seeded), still a
            // reproducing case, only not minimised.
            self.log.push(format!("stalls left random: {e}"));
            return None;
        }
        let (_, _, outcome) = (self.run)(cur, true);
        self.runs += 1;
        let list = stalls_of(&outcome);
        let t = with_stalls(&with_knob(cur, "stall_gap", "off")?, &list)?;
        self.keeps(&t).then(|| {
            self.log.push(format!("random stalls -> {} explicit", list.len()));
            (t, list.len())
        })
    }

    /// Delta-debugs the explicit stall list, then rounds each kept stall to whole microseconds.
    fn minimise_stalls(&mut self, cur: Case) -> Case {
        let list = stalls(&cur);
        let n = list.len();
        let kept = ddmin(list, &mut |sub: &[ScriptedStall]| with_stalls(&cur, sub).is_some_and(|t| self.keeps(&t)));
        if kept.len() < n {
            self.log.push(format!("stalls {n} -> {}", kept.len()));
        }
        let mut kept = kept;
        for i in 0..kept.len() {
            let s = kept[i];
            let round = match s.at {
                StallAt::Time(t) => {
                    let start = t / 1000 * 1000;
                    ScriptedStall { at: StallAt::Time(start), dur: (t + s.dur).div_ceil(1000) * 1000 - start, ..s }
                }
                StallAt::Packet(_) => ScriptedStall { dur: s.dur.div_ceil(1000) * 1000, ..s },
            };
            let mut t = kept.clone();
            t[i] = round;
            if round != s && with_stalls(&cur, &t).is_some_and(|c| self.keeps(&c)) {
                kept = t;
            }
        }
        with_stalls(&cur, &kept).unwrap_or(cur)
    }
}

/// The case's explicit stall list (empty if none).
fn stalls(c: &Case) -> Vec<ScriptedStall> {
    c.knobs()
        .iter()
        .find(|(k, _)| k == "stalls")
        .and_then(|(_, v)| ScriptedStall::parse_list(v).ok())
        .unwrap_or_default()
}

/// `c` with explicit stalls `list`, None if the case cannot hold them.
fn with_stalls(c: &Case, list: &[ScriptedStall]) -> Option<Case> {
    with_knob(c, "stalls", &ScriptedStall::format_list(list))
}

/// `c` with kernel knob `key` set to `value` (replacing a previous setting), None if the case
/// cannot hold it.
fn with_knob(c: &Case, key: &str, value: &str) -> Option<Case> {
    c.to_builder().knob(key, value).build().ok()
}

/// Smaller world sizes to try, smallest first.
fn rank_candidates(n: u32) -> Vec<u32> {
    let mut v: Vec<u32> =
        [1, 2, 3, 4, n / 8, n / 4, n / 2, n.saturating_sub(1)].into_iter().filter(|&r| r >= 1 && r < n).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Smaller sizes in steps of `unit`, smallest first: one unit, a quarter, a half.
fn size_candidates(len: usize, unit: usize) -> Vec<usize> {
    let units = len / unit;
    let mut v: Vec<usize> =
        [1, units / 4, units / 2].into_iter().filter(|&u| u >= 1).map(|u| u * unit).filter(|&l| l < len).collect();
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_smaller_and_ascending() {
        assert_eq!(rank_candidates(2), vec![1]);
        assert_eq!(rank_candidates(64), vec![1, 2, 3, 4, 8, 16, 32, 63]);
        assert_eq!(size_candidates(576, 24), vec![24, 144, 288]);
        assert_eq!(size_candidates(28, 1), vec![1, 7, 14]);
        assert!(size_candidates(1, 1).is_empty());
    }

    #[test]
    fn stalls_stay_random_when_a_traced_run_would_not_fit() {
        let line = "engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3";
        let probe = Case::parse(line).unwrap();
        let tight = Case::parse_within(line, probe.payload_bytes() + probe.kept_results_bytes()).unwrap();
        let s = shrink(&tight).unwrap();
        assert_eq!(s.stalls_seen, 0, "{:?}", s.log);
        assert!(s.log.iter().any(|l| l.starts_with("stalls left random:") && l.contains("MiB")), "{:?}", s.log);
        assert_eq!(run_case(&s.case, false).verdict, s.verdict);
        // Within the default budget the same case's stalls are made explicit.
        assert!(shrink(&probe).unwrap().stalls_seen > 0);
    }

    #[test]
    fn a_passing_case_is_refused() {
        let c = Case::parse("engine=fast variant=seq seed=3").unwrap();
        assert_eq!(shrink(&c).unwrap_err(), ShrinkError::DoesNotFail(Verdict::Pass));
    }
}
