//! Exhaustive exploration of the in-memory world: every accept order its listeners can see.
//!
//! The world is zero-latency and otherwise deterministic; the one thing left to chance is which
//! queued connection a pending accept takes (the kernel completes handshakes in any order, and a
//! connection can stay out of the queue while others arrive). So the explorer runs everything
//! else to quiescence and branches over every (listener with an accept pending, connection in its
//! queue); choosing another listener's accept first is how a connection waits. States are
//! deduplicated by a hash of the whole world (the log excepted: the oracle judges as it goes),
//! the search is depth-first and stops at the first violation, which comes back as a schedule
//! [`replay`] runs again.
//!
//! Shared with sim's NVSHMEM explorer (sim/src/explore): the choice (an accept), the schedule as
//! a list of choices, fingerprint deduplication and a state bound. Not shared (yet): sim's sleep
//! sets over footprints; the protocol seam is where the two should become one.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;

use super::{listener_addr, Link, Mismatch, Node, World};
use crate::error::{NcclError, RootError};
use crate::io::Listener;
use crate::program::Planned;
use crate::variant::Variant;

/// One nondeterministic step: the listener at `listener`, which has an accept pending, takes the
/// queued connection numbered `link` (links are numbered in connect order, the same on replay).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Choice {
    /// The accepting listener's address.
    pub listener: SocketAddr,
    /// The connection it takes.
    pub link: usize,
}

/// What went wrong in a counterexample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A receive took another message than the one meant for it.
    Mismatch(Mismatch),
    /// A rank's step failed with NCCL's error.
    Failed {
        /// The rank.
        rank: u32,
        /// Its error.
        error: NcclError,
    },
    /// The root failed.
    RootFailed(RootError),
    /// Nothing more can happen and this rank is not done.
    Hung {
        /// The rank.
        rank: u32,
        /// What it waits for.
        waiting: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Mismatch(m) => write!(
                f,
                "rank {} {} took rank {}'s step {} (intended tag {:#x}) instead of rank {}'s step {} (tag {:#x})",
                m.rank, m.call, m.got.0, m.got.1, m.got.2, m.expected.0, m.expected.1, m.expected.2
            ),
            Violation::Failed { rank, error } => write!(f, "rank {rank} failed: {error}"),
            Violation::RootFailed(e) => write!(f, "the root failed: {e}"),
            Violation::Hung { rank, waiting } => write!(f, "rank {rank} hangs waiting for {waiting}"),
        }
    }
}

/// The first violation found, and how to get there.
#[derive(Clone, Debug)]
pub struct Counterexample {
    /// Every accept from the start, forced ones included: [`replay`] takes it.
    pub schedule: Vec<Choice>,
    /// Every violation in the state reached (the first is what stopped the search).
    pub violations: Vec<Violation>,
    /// The schedule's real choices (where more than one connection could be accepted), in words.
    pub story: Vec<String>,
}

/// What an exploration found.
#[derive(Clone, Debug)]
pub struct Exploration {
    /// Distinct states reached (quiescent worlds).
    pub states: usize,
    /// Distinct terminal states (nothing more can happen), each judged.
    pub terminals: usize,
    /// The longest schedule seen.
    pub max_depth: usize,
    /// False if the state bound was hit first: then nothing is proved.
    pub complete: bool,
    /// The first violation, if any.
    pub counterexample: Option<Counterexample>,
}

impl World {
    /// A world for the explorer: accepts wait for [`World::choose`], observations are judged and
    /// not kept (unless `keep_log`). Runs to quiescence.
    fn explored(variant: Variant, programs: Vec<Vec<Planned>>, keep_log: bool) -> World {
        let mut w = World::build(variant, programs, true, keep_log);
        w.run();
        w
    }

    /// Every accept that can happen now.
    pub fn choices(&self) -> Vec<Choice> {
        let mut out = Vec::new();
        for addr in self.pending_accept.keys() {
            for &link in self.accept_queue.get(addr).into_iter().flatten() {
                out.push(Choice { listener: *addr, link });
            }
        }
        out
    }

    /// Takes one accept and runs to quiescence.
    fn choose(&mut self, c: Choice) {
        self.accept_link(c.listener, c.link);
        self.run();
    }

    /// A hash of everything that decides the world's future (the log and hold bookkeeping
    /// excepted). A link is named by its client end (node and connection number), which does not
    /// depend on the order of connects across nodes, and the connections queued on one listener
    /// are hashed as a set: the explorer picks among them in any order.
    fn fingerprint(&self) -> u64 {
        let key = |i: usize| self.links[i].ends[0];
        let mut h = DefaultHasher::new();
        self.root.hash(&mut h);
        self.ranks.hash(&mut h);
        self.listeners.hash(&mut h);
        for (addr, q) in &self.accept_queue {
            let q: BTreeSet<_> = q.iter().map(|&i| key(i)).collect();
            (addr, q).hash(&mut h);
        }
        self.pending_accept.hash(&mut h);
        self.waiting_connects.hash(&mut h);
        self.injections.hash(&mut h);
        let links: BTreeMap<_, &Link> = self.links.iter().map(|l| (l.ends[0], l)).collect();
        links.hash(&mut h);
        for (end, &(i, side)) in &self.link_of {
            (end, key(i), side).hash(&mut h);
        }
        self.work.hash(&mut h);
        self.judge.hash_with(&mut h, key);
        self.failures.hash(&mut h);
        self.root_done.hash(&mut h);
        h.finish()
    }

    /// What is wrong already: wrong messages taken, failed steps.
    fn violations(&self) -> Vec<Violation> {
        let mut out: Vec<Violation> = self.mismatches().into_iter().map(Violation::Mismatch).collect();
        out.extend(self.failures.iter().map(|(&rank, e)| Violation::Failed { rank, error: e.clone() }));
        if let Some(Err(e)) = &self.root_done {
            out.push(Violation::RootFailed(e.clone()));
        }
        out
    }

    /// At a terminal state: also every rank not done.
    fn terminal_violations(&self) -> Vec<Violation> {
        let mut out = self.violations();
        for (r, rank) in self.ranks.iter().enumerate() {
            if !rank.is_done() && !rank.has_failed() {
                let waiting = rank.waiting_for().map_or("nothing".into(), |w| w.0);
                out.push(Violation::Hung { rank: r as u32, waiting });
            }
        }
        out
    }

    /// `c` in words: who accepts what, and what else was queued there.
    fn describe(&self, c: Choice) -> String {
        let who = |i: usize| {
            let client = self.links[i].ends[0].0;
            match self.judge.sent_by(i) {
                Some((r, s)) => format!("rank {r}'s step {s} ({})", self.programs[r as usize][s].call),
                None => match client {
                    Node::Rank(r) => format!("rank {r}'s connection #{i}"),
                    other => format!("{other:?}'s connection #{i}"),
                },
            }
        };
        let node = self.listeners[&c.listener];
        let kind = [Listener::Ring, Listener::P2p, Listener::FromRoot, Listener::Root]
            .into_iter()
            .find(|&l| listener_addr(node, l) == c.listener);
        let others: Vec<String> =
            self.accept_queue[&c.listener].iter().filter(|&&i| i != c.link).map(|&i| who(i)).collect();
        format!("{node:?} accepts on its {kind:?} listener {} before {}", who(c.link), others.join(", "))
    }
}

/// Every accept order of `programs` under `variant`, depth first, up to `max_states` distinct
/// states; stops at the first violation.
pub fn explore(variant: Variant, programs: Vec<Vec<Planned>>, max_states: usize) -> Exploration {
    let start = World::explored(variant, programs.clone(), false);
    let mut ex = Exploration { states: 1, terminals: 0, max_depth: 0, complete: true, counterexample: None };
    let mut visited: HashSet<u64> = HashSet::new();
    visited.insert(start.fingerprint());
    let mut path: Vec<Choice> = Vec::new();
    let found = |path: &[Choice], violations: Vec<Violation>| Counterexample {
        schedule: path.to_vec(),
        violations,
        story: story(variant, &programs, path),
    };
    let first = start.violations();
    if !first.is_empty() {
        ex.counterexample = Some(found(&path, first));
        return ex;
    }
    let choices = start.choices();
    if choices.is_empty() {
        ex.terminals = 1;
        let v = start.terminal_violations();
        if !v.is_empty() {
            ex.counterexample = Some(found(&path, v));
        }
        return ex;
    }
    // Frames: a world, its choices and the next to try; `path` holds the choice that led to
    // each frame but the first.
    let mut stack: Vec<(Option<World>, Vec<Choice>, usize)> = vec![(Some(start), choices, 0)];
    while let Some((world, choices, next)) = stack.last_mut() {
        if *next == choices.len() {
            stack.pop();
            path.truncate(stack.len().saturating_sub(1));
            continue;
        }
        let c = choices[*next];
        *next += 1;
        let mut w = if *next == choices.len() { world.take().expect("a frame keeps its world until its last choice") } else { world.clone().expect("a frame keeps its world until its last choice") };
        w.choose(c);
        path.push(c);
        ex.max_depth = ex.max_depth.max(path.len());
        let v = w.violations();
        if !v.is_empty() {
            ex.counterexample = Some(found(&path, v));
            return ex;
        }
        if !visited.insert(w.fingerprint()) {
            path.pop();
            continue;
        }
        ex.states += 1;
        if ex.states >= max_states {
            ex.complete = false;
            return ex;
        }
        let cs = w.choices();
        if cs.is_empty() {
            ex.terminals += 1;
            let v = w.terminal_violations();
            if !v.is_empty() {
                ex.counterexample = Some(found(&path, v));
                return ex;
            }
            path.pop();
            continue;
        }
        stack.push((Some(w), cs, 0));
    }
    ex
}

/// Runs `schedule` (from [`Counterexample::schedule`]) again, with the log kept: the world at the
/// counterexample's state. Errors name the first choice that cannot be taken.
pub fn replay(variant: Variant, programs: Vec<Vec<Planned>>, schedule: &[Choice]) -> Result<World, String> {
    let mut w = World::explored(variant, programs, true);
    for (k, &c) in schedule.iter().enumerate() {
        let cs = w.choices();
        if !cs.contains(&c) {
            return Err(format!("choice {k} ({c:?}) cannot be taken; the choices are {cs:?}"));
        }
        w.choose(c);
    }
    Ok(w)
}

/// The real choices of `schedule`, in words.
fn story(variant: Variant, programs: &[Vec<Planned>], schedule: &[Choice]) -> Vec<String> {
    let mut w = World::explored(variant, programs.to_vec(), false);
    let mut out = Vec::new();
    for (k, &c) in schedule.iter().enumerate() {
        if w.choices().len() > 1 && w.accept_queue[&c.listener].len() > 1 {
            out.push(format!("{k}: {}", w.describe(c)));
        }
        w.choose(c);
    }
    out
}
