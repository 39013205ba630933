//! Breadth-first search over the explorer's choices, with states identified by fingerprint:
//! every distinct state is expanded once, and the first violation found is a shortest one.
//! The visited set keeps 16 bytes a state, its 128-bit fingerprint ([`World::fingerprint`]:
//! the first 128 bits of a SHA-256), never the state: only the frontier (one BFS level) holds
//! whole worlds. Two distinct states taken for one (and a schedule left unexplored) needs a
//! fingerprint collision: for `S` states that has probability at most S²/2^129 (about 10^-27
//! at a million states), and the per-rank multiset digest inside it adds at most m·2^-128 a
//! pair (see `World::observe`).
//! Partial-order reduction by sleep sets (Godefroid): after exploring choice `a` at a state, a
//! sibling `b` explored later carries `a` in its sleep set while the steps taken stay independent
//! of `a` (disjoint footprints, see [`super::footprint`]): `a` is not taken there, since every
//! schedule it would start is a reordering of one explored from `a`'s branch. Sleep sets prune
//! transitions, never final states: every reachable final state (so every verdict) is still
//! reached, by a schedule with the same choices in another order (so of the same length). With
//! merged states, a state reached again with a sleep set missing some of those it was expanded
//! with is expanded again for just those choices (Godefroid's rule for sleep sets with caching).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use super::footprint::Footprint;
use super::schedule::Schedule;
use super::world::{start, Choice, Explored, Faults, WithWorld, World};
use crate::case::Case;
use crate::oracle::{Finding, Verdict};

/// What to explore and when to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Most distinct states; past it the result is incomplete.
    pub max_states: usize,
    /// Most choices along one schedule; a state deeper with choices left makes it incomplete.
    pub max_depth: usize,
    /// Stop at the first final state judged this verdict or worse (`Hang`: the first violation;
    /// `Corruption`: the worst there is) instead of exploring everything.
    pub stop_at: Option<Verdict>,
    /// Partial-order reduction (sleep sets); off, every order of every choice is taken.
    pub reduce: bool,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds { max_states: 500_000, max_depth: 10_000, stop_at: Some(Verdict::Hang), reduce: true }
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
    /// Choices taken from expanded states (edges of the state graph explored).
    pub transitions: usize,
    /// Choices not taken because they were asleep (independent reorderings), with reduction on.
    pub slept: usize,
    /// True when partial-order reduction was on.
    pub reduced: bool,
    /// Distinct final states.
    pub finals: usize,
    /// Complete schedules the explored transitions stand for (saturating; exact only when
    /// complete): without reduction, what enumerating every schedule without merging states would
    /// run; with it, the schedules left after pruning independent reorderings.
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
/// `case.ranks()` must be at most [`MAX_RANKS`].
pub fn explore(case: &Case, faults: Faults, bounds: Bounds) -> Exploration {
    let base = replay_base(case);
    start(&base, faults, Search { base: &base, bounds })
}

/// The search of one case's world, whatever its protocol.
struct Search<'a> {
    /// The case as its counterexamples replay.
    base: &'a Case,
    bounds: Bounds,
}

impl WithWorld for Search<'_> {
    type Out = Exploration;

    fn run<P: Explored>(self, start: World<P>) -> Exploration {
        search(self.base, start, self.bounds)
    }
}

/// The breadth-first search from `start` (the world of `base`), each final state judged by its
/// protocol's judge.
pub(crate) fn search<P: Explored>(base: &Case, start: World<P>, bounds: Bounds) -> Exploration {
    let start = if bounds.reduce { start } else { start.reducing(false) };
    let mut ex = Exploration {
        case: base.clone(),
        states: 1,
        transitions: 0,
        slept: 0,
        reduced: bounds.reduce,
        finals: 0,
        schedules: 0,
        schedules_exact: true,
        depth: 0,
        incomplete: None,
        verdicts: BTreeMap::new(),
        examples: BTreeMap::new(),
    };
    let mut seen: HashSet<u128> = HashSet::from([start.fingerprint()]);
    // What each state queued with a sleep set was (or will be) expanded without.
    let mut asleep: HashMap<u128, Vec<Choice>> = HashMap::new();
    let mut level: Vec<Queued<P>> = vec![Queued { world: start, count: 1, sleep: Vec::new(), only: None }];
    let mut depth = 0;
    let mut late_merge = false;
    'search: while !level.is_empty() {
        ex.depth = depth;
        let mut next: Vec<Queued<P>> = Vec::new();
        let mut index: HashMap<u128, usize> = HashMap::new();
        for Queued { world, count, sleep, only } in level {
            if world.choices().is_empty() {
                if only.is_some() {
                    continue; // judged when first reached
                }
                let (verdict, findings) = world.judge();
                ex.finals += 1;
                ex.schedules = ex.schedules.saturating_add(count);
                let entry = ex.verdicts.entry(verdict).or_insert((0, 0));
                entry.0 += 1;
                entry.1 = entry.1.saturating_add(count);
                if verdict != Verdict::Pass && !ex.examples.contains_key(&verdict) {
                    let case = with_schedule(base, &world.path()).expect("the explorer's path is of its own world");
                    ex.examples.insert(verdict, Counterexample { verdict, case, findings, depth });
                }
                if bounds.stop_at.is_some_and(|worst| verdict >= worst) {
                    ex.incomplete = Some(format!("stopped at the first {verdict}"));
                    break 'search;
                }
                continue;
            }
            if depth >= bounds.max_depth {
                ex.incomplete = Some(format!("--max-depth {} reached", bounds.max_depth));
                continue;
            }
            // Choices explored here so far, with their footprints: asleep in later siblings.
            let mut done: Sleep = Vec::new();
            for &choice in world.choices() {
                if sleep.iter().any(|(c, _)| *c == choice) {
                    ex.slept += 1;
                    continue;
                }
                if only.as_ref().is_some_and(|o| !o.contains(&choice)) {
                    continue; // taken when this state was first expanded
                }
                ex.transitions += 1;
                let (child, footprint) = world.step_traced(choice);
                let child_sleep: Sleep = if bounds.reduce {
                    let footprint = Rc::new(footprint);
                    let kept = sleep.iter().chain(&done).filter(|(_, f)| f.independent(&footprint)).cloned().collect();
                    done.push((choice, footprint));
                    kept
                } else {
                    Vec::new()
                };
                let fp = child.fingerprint();
                if let Some(&i) = index.get(&fp) {
                    // Two ways to one unexpanded state: asleep only what is asleep on both.
                    let q = &mut next[i];
                    q.count = q.count.saturating_add(count);
                    q.sleep.retain(|(c, _)| child_sleep.iter().any(|(d, _)| d == c));
                    if let Some(a) = asleep.get_mut(&fp) {
                        a.retain(|c| child_sleep.iter().any(|(d, _)| d == c));
                    }
                    continue;
                }
                if !seen.insert(fp) {
                    // Reached before at another depth: its schedules were counted from there; the
                    // choices it was expanded without that are awake now are taken from here.
                    late_merge = true;
                    if let Some(a) = asleep.get_mut(&fp) {
                        let (still, woken): (Vec<Choice>, Vec<Choice>) =
                            a.iter().partition(|c| child_sleep.iter().any(|(d, _)| d == *c));
                        *a = still;
                        if !woken.is_empty() {
                            next.push(Queued { world: child, count: 0, sleep: child_sleep, only: Some(woken) });
                        }
                    }
                    continue;
                }
                if seen.len() > bounds.max_states {
                    ex.incomplete = Some(format!("--max-states {} reached", bounds.max_states));
                    break 'search;
                }
                if !child_sleep.is_empty() {
                    asleep.insert(fp, child_sleep.iter().map(|(c, _)| *c).collect());
                }
                index.insert(fp, next.len());
                next.push(Queued { world: child, count, sleep: child_sleep, only: None });
            }
        }
        level = next;
        depth += 1;
    }
    ex.states = seen.len();
    ex.schedules_exact = !late_merge && ex.incomplete.is_none();
    ex
}

/// Choices asleep at a state, each with its footprint where it was explored.
type Sleep = Vec<(Choice, Rc<Footprint>)>;

/// A state awaiting expansion.
struct Queued<P: Explored> {
    world: World<P>,
    /// Schedules reaching it at this depth.
    count: u128,
    sleep: Sleep,
    /// Only these choices (a state expanded before, reached again with them awake).
    only: Option<Vec<Choice>>,
}

/// `case` as its counterexamples replay: on the fast engine, whatever engine the case named,
/// with only the explorer's schedule.
pub(crate) fn replay_base(case: &Case) -> Case {
    case.on_fast_engine_unscheduled()
}

/// `base` with the explicit schedule of `path` ([`Schedule::of_path`]). An error only for a path
/// that is not of `base`'s world (a rank it does not have, a drain its variant has not).
pub fn with_schedule(base: &Case, path: &[Choice]) -> Result<Case, crate::CaseError> {
    base.with_schedule(Schedule::of_path(path))
}
