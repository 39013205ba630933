//! The rendezvous protocol in the explorer's world (`explore::World::of`, every accept order of
//! every rank's peer listener, zero latency): every schedule of the round tag passes for 2 to 4
//! ranks, and the reused tag has a schedule that corrupts, which the fast engine replays from
//! its `accept=` schedule to the same verdict.
//!
//! Stopgap: `bootsim_sim::explore::explore` (the search with sleep sets) still builds NVSHMEM's
//! world, so this test walks the generic world itself: depth first over `World::choices`, each
//! state once by `World::fingerprint`. Once `explore` takes a protocol, the walk below is a
//! call to it.

use std::collections::HashSet;

use bootsim_example_rendezvous::{Rendezvous, Variant, Workload};
use bootsim_sim::explore::schedule::ConnName;
use bootsim_sim::explore::search::with_schedule;
use bootsim_sim::explore::{Choice, Faults, World};
use bootsim_sim::harness::{judge, run};
use bootsim_sim::{Case, Finding, Verdict};

/// What a complete walk found.
struct Walked {
    /// Distinct states.
    states: usize,
    /// Distinct final states, and those judged other than pass.
    finals: usize,
    /// The first final state judged other than pass: its verdict, findings and schedule.
    violation: Option<(Verdict, Vec<Finding>, Vec<Choice>)>,
}

/// Every state of the world of `variant` and `workload` over `case`'s ranks, each once; judged
/// at every final state.
fn walk(variant: Variant, workload: Workload, case: &Case) -> Walked {
    let start = World::of(Rendezvous, variant, workload, case, Faults::default());
    let mut seen = HashSet::from([start.fingerprint()]);
    let (mut stack, mut finals, mut violation) = (vec![start], 0, None);
    while let Some(world) = stack.pop() {
        if world.choices().is_empty() {
            finals += 1;
            let (verdict, findings) = judge(&Rendezvous, &variant, &workload, case, &world.outcome().record);
            if !verdict.is_ok() && violation.is_none() {
                violation = Some((verdict, findings, world.path()));
            }
            continue;
        }
        for &choice in world.choices() {
            let next = world.step(choice);
            if seen.insert(next.fingerprint()) {
                stack.push(next);
            }
        }
    }
    Walked { states: seen.len(), finals, violation }
}

fn case(ranks: u32) -> Case {
    Case::parse(&format!("engine=fast ranks={ranks} adversary=fifo seed=5")).expect("a valid case")
}

/// All-to-all rounds up to 3 ranks (4 is some million states without the explorer's sleep
/// sets), ring rounds up to 4.
#[test]
fn every_accept_order_of_the_round_tag_passes() {
    for (workload, ranks) in
        [(Workload::TWO_ROUNDS, 2), (Workload::TWO_ROUNDS, 3), (Workload::RING, 3), (Workload::RING, 4)]
    {
        let w = walk(Variant::RoundTag, workload, &case(ranks));
        println!("round-tag, {workload}, {ranks} ranks: {} states, {} final, all pass", w.states, w.finals);
        assert!(w.finals > 1, "{ranks} ranks: more than one schedule was explored");
        if let Some((verdict, findings, path)) = w.violation {
            panic!("{workload}, {ranks} ranks: {verdict} after {path:?}: {findings:?}");
        }
    }
}

#[test]
fn the_reused_tag_has_a_corrupting_accept_order_the_fast_engine_replays() {
    for (workload, ranks) in [(Workload::TWO_ROUNDS, 2), (Workload::TWO_ROUNDS, 3), (Workload::RING, 4)] {
        let base = case(ranks);
        let w = walk(Variant::ReusedTag, workload, &base);
        let (verdict, findings, path) = w.violation.expect("a schedule that corrupts");
        println!(
            "reused-tag, {workload}, {ranks} ranks: {} states, {} final; {verdict} after {path:?}",
            w.states, w.finals
        );
        assert_eq!(verdict, Verdict::Corruption, "{findings:?}");
        // Its schedule: a rank accepts a sender's round-2 connection before its round-1 one.
        let accepted = |at, conn| path.iter().position(|c| *c == Choice::Accept { at, conn });
        let overtaken = (0..ranks).any(|at| {
            (0..ranks).any(|from| {
                let (k0, k1) = (ConnName { from, to: at, k: 0 }, ConnName { from, to: at, k: 1 });
                matches!((accepted(at, k0), accepted(at, k1)), (Some(a), Some(b)) if b < a)
            })
        });
        assert!(overtaken, "a round-2 connection accepted first: {path:?}");
        let replay = with_schedule(&base, &path).unwrap();
        let fast = run(&Rendezvous, &Variant::ReusedTag, &workload, &replay, false);
        assert_eq!((fast.verdict, &fast.findings), (verdict, &findings), "the fast engine agrees: {replay}");
    }
}
