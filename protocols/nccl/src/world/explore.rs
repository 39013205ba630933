//! Exhaustive exploration of the in-memory world: every accept order its listeners can see.
//!
//! The world is zero-latency and otherwise deterministic; the one thing left to chance is which
//! queued connection a pending accept takes (the kernel completes handshakes in any order, and a
//! connection can stay out of the queue while others arrive). So the explorer runs everything
//! else to quiescence and branches over the accepts that can happen; taking another listener's
//! accept first is how a connection waits. The search is depth first, stops at the first
//! violation (judged on every transition by the world's oracle, failed steps, the root's result,
//! and at the end every rank done) and gives it back as a schedule [`replay`] runs again.
//!
//! States are deduplicated by a 64-bit hash of what decides the world's future (see
//! `World::fingerprint`); a bound on distinct states ends the search as incomplete.
//!
//! Two reductions (`Bounds::reduce`, on by default; the tests check that they keep every
//! verdict against the unreduced search):
//! - Wanted first. A receive's accept loop (`bootstrapRecv`) only moves a connection it does not
//!   match to the tail of the unexpected list, with nothing else seen. Taking such a connection
//!   later gives the same outcomes, and more (later ones of its own peer and tag may overtake it).
//!   So a receive's listener takes only connections it would keep, and one with none such queued
//!   waits for more. The ring's and the root's accepts take any.
//! - One listener at a time. Only the first listener (in address order) that can usefully accept
//!   and is not waiting moves: it takes one of those connections or, if another listener can
//!   move, waits until another connection is queued to it ([`Choice::Wait`]). Accepts on
//!   different listeners commute (checked: each node has at most one accept pending, else every
//!   accept is a move), so whatever the others do first, its next accept takes a connection
//!   queued now (taken first here, to the same state) or one queued later (its wait).
//!
//! Shared with sim's NVSHMEM explorer (sim/src/explore): the choice (an accept), the schedule as
//! a list of choices, fingerprint deduplication, a state bound, depth first to the first
//! counterexample. Not shared: sim's sleep sets over footprints (here the two reductions above
//! instead, which know NCCL's matching rule), and the world itself. The protocol seam is where
//! the two should become one explorer over an opaque world.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;

use super::{listener_addr, message_identity, Link, Mismatch, Node, World};
use crate::error::{NcclError, RootError};
use crate::io::Listener;
use crate::program::Planned;
use crate::variant::Variant;

/// One nondeterministic step of a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Choice {
    /// The listener at `listener`, which has an accept pending, takes the queued connection
    /// numbered `link` (links are numbered in connect order, the same on replay).
    Accept {
        /// The accepting listener's address.
        listener: SocketAddr,
        /// The connection it takes.
        link: usize,
    },
    /// The listener lets every connection queued now wait: its next accept takes one queued
    /// later, or waits until one is.
    Wait {
        /// The waiting listener's address.
        listener: SocketAddr,
    },
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

/// How far to search and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Stop (incomplete) after this many distinct states.
    pub max_states: usize,
    /// Use the reductions (wanted first, one listener at a time; see the module doc);
    /// without them every accept is a move (for cross-checking them).
    pub reduce: bool,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds { max_states: 1_000_000, reduce: true }
    }
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
                out.push(Choice::Accept { listener: *addr, link });
            }
        }
        out
    }

    /// The moves the search tries under the reductions (module doc): `Some(empty)` at the end,
    /// `None` where every listener that could usefully accept waits (a path another covers).
    fn moves(&self) -> Option<Vec<Choice>> {
        let all = self.choices();
        if all.is_empty() {
            return Some(all);
        }
        let mut owners = BTreeSet::new();
        if !self.pending_accept.keys().all(|a| owners.insert(self.listeners[a])) {
            return Some(all);
        }
        let useful: Vec<(SocketAddr, Vec<usize>)> =
            self.pending_accept.keys().map(|&a| (a, self.useful(a))).filter(|(_, links)| !links.is_empty()).collect();
        let ready: Vec<&(SocketAddr, Vec<usize>)> = useful.iter().filter(|(a, _)| !self.waiting.contains(a)).collect();
        let Some(&(first, links)) = ready.first() else {
            // Nothing can move: the end if no listener waits with a useful connection queued.
            return if useful.is_empty() { Some(Vec::new()) } else { None };
        };
        let mut out: Vec<Choice> = links.iter().map(|&link| Choice::Accept { listener: *first, link }).collect();
        if ready.len() > 1 {
            out.push(Choice::Wait { listener: *first });
        }
        Some(out)
    }

    /// The connections queued to `addr` its pending accept would keep (all of them unless that
    /// accept is a receive's, or where a connection's header is not there yet).
    fn useful(&self, addr: SocketAddr) -> Vec<usize> {
        let queued = self.accept_queue.get(&addr).into_iter().flatten().copied();
        let Node::Rank(r) = self.listeners[&addr] else { return queued.collect() };
        let rank = &self.ranks[r as usize];
        queued
            .filter(|&i| {
                message_identity(self.variant, &self.links[i].early).and_then(|h| rank.would_match(h)).unwrap_or(true)
            })
            .collect()
    }

    /// Takes one choice and runs to quiescence (a world from [`replay`]).
    pub fn choose(&mut self, c: Choice) {
        match c {
            Choice::Accept { listener, link } => {
                self.accept_link(listener, link);
                self.run();
            }
            Choice::Wait { listener } => {
                self.waiting.insert(listener);
            }
        }
    }

    /// A hash of everything that decides the world's future, and nothing else: not the log nor
    /// hold bookkeeping, not the root once it is done (it ignores everything then), not links
    /// closed at both ends. A link is named by its client end (node and connection number),
    /// which does not depend on the order of connects across nodes, and the connections queued
    /// on one listener are hashed as a set: the explorer picks among them in any order.
    fn fingerprint(&self) -> u64 {
        let key = |i: usize| self.links[i].ends[0];
        let live = |i: usize| !(self.links[i].closed[0] && self.links[i].closed[1]);
        let mut h = DefaultHasher::new();
        if self.root_done.is_none() {
            self.root.hash(&mut h);
        }
        for rank in &self.ranks {
            rank.hash_state(&mut h);
        }
        self.listeners.hash(&mut h);
        for (addr, q) in &self.accept_queue {
            let q: BTreeSet<_> = q.iter().map(|&i| key(i)).collect();
            (addr, q).hash(&mut h);
        }
        self.pending_accept.hash(&mut h);
        self.waiting_connects.hash(&mut h);
        self.injections.hash(&mut h);
        let links: BTreeMap<_, &Link> =
            (0..self.links.len()).filter(|&i| live(i)).map(|i| (key(i), &self.links[i])).collect();
        links.hash(&mut h);
        for (end, &(i, side)) in &self.link_of {
            if live(i) {
                (end, key(i), side).hash(&mut h);
            }
        }
        // States are taken at quiescence, where no input is queued (hashed as the empty
        // queue's length, as hashing the queue itself would).
        debug_assert!(self.work.is_empty(), "a state is fingerprinted at quiescence");
        self.work.len().hash(&mut h);
        self.judge.hash_with(&mut h, |i| live(i).then(|| key(i)));
        self.failures.hash(&mut h);
        self.root_done.hash(&mut h);
        self.waiting.hash(&mut h);
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
    fn describe(&self, listener: SocketAddr, link: usize) -> String {
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
        let (node, kind) = match self.listeners[&listener] {
            Node::Rank(r) => {
                let kind = [Listener::Ring, Listener::P2p, Listener::FromRoot]
                    .into_iter()
                    .find(|&l| listener_addr(Node::Rank(r), l) == listener)
                    .unwrap_or(Listener::Ring);
                (format!("rank {r}"), kind)
            }
            other => (format!("{other:?}").to_lowercase(), Listener::Root),
        };
        let others: Vec<String> =
            self.accept_queue[&listener].iter().filter(|&&i| i != link).map(|&i| who(i)).collect();
        format!("{node} accepts on its {kind:?} listener {} before {}", who(link), others.join(", "))
    }
}

/// What a newly reached state asks of the search.
enum Visit {
    /// Stop: something is wrong.
    Broken(Vec<Violation>),
    /// Nothing more can happen, and all is well.
    End,
    /// A path another one covers (every listener that could move waits).
    Covered,
    /// Try these.
    Branch(Vec<Choice>),
}

/// Every accept order of `programs` under `variant`, depth first, within `bounds`; stops at the
/// first violation.
pub fn explore(variant: Variant, programs: Vec<Vec<Planned>>, bounds: Bounds) -> Exploration {
    let visit = |w: &World| {
        let broken = w.violations();
        if !broken.is_empty() {
            return Visit::Broken(broken);
        }
        match if bounds.reduce { w.moves() } else { Some(w.choices()) } {
            None => Visit::Covered,
            Some(cs) if !cs.is_empty() => Visit::Branch(cs),
            Some(_) => match w.terminal_violations() {
                v if v.is_empty() => Visit::End,
                v => Visit::Broken(v),
            },
        }
    };
    let start = World::explored(variant, programs.clone(), false);
    let mut ex = Exploration { states: 1, terminals: 0, max_depth: 0, complete: true, counterexample: None };
    let mut visited: HashSet<u64> = HashSet::new();
    visited.insert(start.fingerprint());
    // Frames: a world (taken for its last choice), its choices and the next to try; `path`
    // holds the choice that led to each frame but the first.
    let mut stack: Vec<(Option<World>, Vec<Choice>, usize)> = Vec::new();
    let mut path: Vec<Choice> = Vec::new();
    let mut reached = Some(start);
    loop {
        if let Some(w) = reached.take() {
            match visit(&w) {
                Visit::Broken(violations) => {
                    let story = story(variant, &programs, &path);
                    ex.counterexample = Some(Counterexample { schedule: path, violations, story });
                    return ex;
                }
                Visit::End => ex.terminals += 1,
                Visit::Covered => {}
                Visit::Branch(cs) => {
                    stack.push((Some(w), cs, 0));
                    continue;
                }
            }
            path.truncate(stack.len().saturating_sub(1));
        }
        let Some((world, choices, next)) = stack.last_mut() else { return ex };
        if *next == choices.len() {
            stack.pop();
            path.truncate(stack.len().saturating_sub(1));
            continue;
        }
        let c = choices[*next];
        *next += 1;
        let last = *next == choices.len();
        let mut w =
            if last { world.take() } else { world.clone() }.expect("a frame keeps its world until its last choice");
        w.choose(c);
        path.push(c);
        ex.max_depth = ex.max_depth.max(path.len());
        // A violation is judged on every path to a state, before deduplication: the oracle's
        // verdicts come from the transition, not only from the state.
        let broken = !w.violations().is_empty();
        if !broken && !visited.insert(w.fingerprint()) {
            path.pop();
            continue;
        }
        if !broken {
            ex.states += 1;
            if ex.states >= bounds.max_states {
                ex.complete = false;
                return ex;
            }
        }
        reached = Some(w);
    }
}

/// Runs `schedule` (from [`Counterexample::schedule`]) again, with the log kept: the world at the
/// counterexample's state. Errors name the first choice that cannot be taken.
pub fn replay(variant: Variant, programs: Vec<Vec<Planned>>, schedule: &[Choice]) -> Result<World, String> {
    let mut w = World::explored(variant, programs, true);
    for (k, &c) in schedule.iter().enumerate() {
        let cs = w.choices();
        if matches!(c, Choice::Accept { .. }) && !cs.contains(&c) {
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
        if let Choice::Accept { listener, link } = c {
            if w.accept_queue[&listener].len() > 1 {
                out.push(format!("{k}: {}", w.describe(listener, link)));
            }
        }
        w.choose(c);
    }
    out
}
