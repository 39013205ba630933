//! Random walks through the explorer's world: where a bounded search cannot reach deep
//! schedules (a breadth-first search out of states stops at shallow levels), walks take
//! complete schedules, each choice drawn uniformly from a ChaCha stream of the case seed. A
//! violation a walk reaches is real and replays; a walk proves nothing.

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use super::search::{replay_base, with_schedule, Counterexample};
use super::world::{start, Explored, Faults, WithWorld, World};
use crate::case::Case;
use crate::oracle::Verdict;
use bootsim_core::seed::derive;

/// Takes `walks` random complete schedules of `case`; returns the worst violation reached (the
/// first walk that reached it), stopping early at a corruption.
pub fn walk(case: &Case, faults: Faults, walks: u32) -> Option<Counterexample> {
    let base = replay_base(case);
    start(&base, faults, Walks { base: &base, walks })
}

/// `walks` random walks of one case's world, whatever its protocol.
struct Walks<'a> {
    /// The case as its counterexamples replay (its seed draws the walks).
    base: &'a Case,
    walks: u32,
}

impl WithWorld for Walks<'_> {
    type Out = Option<Counterexample>;

    fn run<P: Explored>(self, start: World<P>) -> Option<Counterexample> {
        let base = self.base;
        let mut worst: Option<Counterexample> = None;
        for i in 0..self.walks {
            let mut rng = ChaCha8Rng::seed_from_u64(derive(base.seed(), "walk", u64::from(i)));
            let mut world = start.clone();
            while !world.choices().is_empty() {
                let choices = world.choices();
                let pick = choices[(rng.next_u64() % choices.len() as u64) as usize];
                world = world.step(pick);
            }
            let (verdict, findings) = world.judge();
            if verdict.is_ok() || worst.as_ref().is_some_and(|w| w.verdict >= verdict) {
                continue;
            }
            let path = world.path();
            let case = with_schedule(base, &path).expect("the explorer's path is of its own world");
            worst = Some(Counterexample { verdict, case, findings, depth: path.len() });
            if verdict == Verdict::Corruption {
                break;
            }
        }
        worst
    }
}
