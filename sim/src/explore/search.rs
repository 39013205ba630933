//! Breadth-first search over the explorer's choices, with states identified by fingerprint:
//! every distinct state is expanded once, and the first violation found is a shortest one.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::schedule::Schedule;
use super::world::{Choice, Faults, World};
use crate::case::{Case, EngineKind};
use crate::oracle::{judge, Finding, Verdict};

/// What to explore and when to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Most distinct states; past it the result is incomplete.
    pub max_states: usize,
    /// Most choices along one schedule; a state deeper with choices left makes it incomplete.
    pub max_depth: usize,
    /// Stop at the first violation (corruption, error, hang) instead of exploring everything.
    pub stop_at_violation: bool,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds { max_states: 500_000, max_depth: 10_000, stop_at_violation: true }
    }
}

/// A schedule that ends in a given verdict, as a case the fast engine replays.
#[derive(Clone, Debug)]
pub struct Counterexample {
    /// The verdict at its end.
    pub verdict: Verdict,
    /// The case with its schedule explicit (`accept=`, `drain_fail=`).
    pub case: Case,
    /// What the oracle found.
    pub findings: Vec<Finding>,
    /// Its number of choices.
    pub depth: usize,
}

/// What an exploration found.
#[derive(Clone, Debug)]
pub struct Exploration {
    /// The case explored (its variant, workload, ranks and seed).
    pub case: Case,
    /// Distinct states reached.
    pub states: usize,
    /// Choices taken from expanded states (edges of the state graph).
    pub transitions: usize,
    /// Distinct final states.
    pub finals: usize,
    /// Complete schedules those final states stand for: what enumerating every schedule without
    /// merging states would run (saturating; exact only when complete).
    pub schedules: u128,
    /// False when a state was reached again at another depth (then `schedules` is a lower bound).
    pub schedules_exact: bool,
    /// The longest schedule seen, in choices.
    pub depth: usize,
    /// `None` when every schedule was explored; else which bound stopped it.
    pub incomplete: Option<String>,
    /// Per verdict: distinct final states and the schedules they stand for.
    pub verdicts: BTreeMap<Verdict, (usize, u128)>,
    /// The shortest schedule found for each verdict other than pass.
    pub examples: BTreeMap<Verdict, Counterexample>,
}

impl Exploration {
    /// The worst verdict reached.
    pub fn worst(&self) -> Verdict {
        self.verdicts.keys().copied().max().unwrap_or(Verdict::Pass)
    }

    /// The shortest counterexample of the worst violation (corruption, error or hang), if any.
    pub fn counterexample(&self) -> Option<&Counterexample> {
        self.examples.iter().rev().find(|(v, _)| !v.is_ok()).map(|(_, c)| c)
    }

    /// True when every schedule was explored and none ends in a violation or a swap.
    pub fn proves_pass(&self) -> bool {
        self.incomplete.is_none() && self.worst() == Verdict::Pass
    }
}

/// The largest world explored: above it NVSHMEM staggers check-ins on a timer, and the
/// explorer's world has no time.
pub const MAX_RANKS: u32 = 128;

/// Explores every schedule of `case`'s accept order (and the `faults` chosen) within `bounds`;
/// `case.ranks` must be at most [`MAX_RANKS`].
pub fn explore(case: &Case, faults: Faults, bounds: Bounds) -> Exploration {
    // The counterexample replays on the fast engine, whatever engine the case named.
    let base = Case { schedule: Schedule::default(), engine: EngineKind::Fast, ..case.clone() };
    let mut ex = Exploration {
        case: base.clone(),
        states: 1,
        transitions: 0,
        finals: 0,
        schedules: 0,
        schedules_exact: true,
        depth: 0,
        incomplete: None,
        verdicts: BTreeMap::new(),
        examples: BTreeMap::new(),
    };
    let start = World::new(&base, faults);
    let mut seen: HashSet<u128> = HashSet::from([start.fingerprint()]);
    let mut level: Vec<(World, u128)> = vec![(start, 1)];
    let mut depth = 0;
    let mut late_merge = false;
    'search: while !level.is_empty() {
        ex.depth = depth;
        let mut next: Vec<(World, u128)> = Vec::new();
        let mut index: HashMap<u128, usize> = HashMap::new();
        for (world, count) in level {
            if world.choices().is_empty() {
                let (verdict, findings) =
                    judge(&base.workload.ops(base.seed), base.seed, base.ranks, &world.outcome().record);
                ex.finals += 1;
                ex.schedules = ex.schedules.saturating_add(count);
                let entry = ex.verdicts.entry(verdict).or_insert((0, 0));
                entry.0 += 1;
                entry.1 = entry.1.saturating_add(count);
                if verdict != Verdict::Pass && !ex.examples.contains_key(&verdict) {
                    let case = with_schedule(&base, &world.path());
                    ex.examples.insert(verdict, Counterexample { verdict, case, findings, depth });
                }
                if bounds.stop_at_violation && !verdict.is_ok() {
                    ex.incomplete = Some("stopped at the first violation".into());
                    break 'search;
                }
                continue;
            }
            if depth >= bounds.max_depth {
                ex.incomplete = Some(format!("--max-depth {} reached", bounds.max_depth));
                continue;
            }
            for &choice in world.choices() {
                ex.transitions += 1;
                let child = world.step(choice);
                let fp = child.fingerprint();
                if let Some(&i) = index.get(&fp) {
                    next[i].1 = next[i].1.saturating_add(count);
                    continue;
                }
                if !seen.insert(fp) {
                    // Reached before at another depth: its schedules were counted from there.
                    late_merge = true;
                    continue;
                }
                if seen.len() > bounds.max_states {
                    ex.incomplete = Some(format!("--max-states {} reached", bounds.max_states));
                    break 'search;
                }
                index.insert(fp, next.len());
                next.push((child, count));
            }
        }
        level = next;
        depth += 1;
    }
    ex.states = seen.len();
    ex.schedules_exact = !late_merge && ex.incomplete.is_none();
    ex
}

/// `base` with the explicit schedule of `path`: each rank's accepts in order, and the drains
/// that gave up.
pub fn with_schedule(base: &Case, path: &[Choice]) -> Case {
    let mut schedule = Schedule::default();
    for choice in path {
        match *choice {
            Choice::Accept { at, conn } => schedule.accept.entry(at).or_default().push(conn),
            Choice::Drain { conn, gives_up: true } => {
                schedule.drain_fail.insert(conn);
            }
            Choice::Drain { gives_up: false, .. } => {}
        }
    }
    Case { schedule, ..base.clone() }
}
