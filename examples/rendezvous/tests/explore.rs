//! The rendezvous protocol in the explorer's world, through the facade's
//! [`explore`](bootsim_sim::harness::explore): every order in which each rank's peer listener
//! may accept its in-flight connections, zero latency, states merged by fingerprint and
//! independent reorderings pruned by sleep sets. The round tag is proved for every world size
//! up to 3 with all-to-all rounds and up to 4 with ring rounds and with both-neighbour rounds
//! (two peers a rank; all-to-all at 4 ranks, three peers a rank, is out of a test's reach, see
//! below); the reused tag has a schedule that corrupts under each of those workloads, at 4 ranks
//! under the proof's own bounds, whose line replays on the fast engine to the same verdict.

use bootsim_example_rendezvous::{Rendezvous, Variant, Workload};
use bootsim_sim::explore::schedule::ConnName;
use bootsim_sim::explore::{Bounds, Choice, Exploration, Faults, World};
use bootsim_sim::harness::{explore, replay_line, run, world_of};
use bootsim_sim::{Case, Verdict};

fn case(ranks: u32) -> Case {
    Case::parse(&format!("engine=fast ranks={ranks} adversary=fifo seed=5")).expect("a valid case")
}

/// Every schedule of `variant` and `workload` at `ranks`, to the end (no stop at a violation).
fn everything(variant: Variant, workload: Workload, ranks: u32) -> Exploration {
    let bounds = Bounds { stop_at: None, ..Bounds::default() };
    explore(&Rendezvous, &variant, &workload, &case(ranks), Faults::default(), bounds).expect("the words name a line")
}

/// The proof for `workload` at `ranks`: every schedule explored, each passes.
fn proves_the_round_tag(workload: Workload, ranks: u32) {
    let ex = everything(Variant::RoundTag, workload, ranks);
    println!(
        "round-tag, {workload}, {ranks} ranks: {} states, {} transitions ({} slept), {} final, {} schedules",
        ex.states, ex.transitions, ex.slept, ex.finals, ex.schedules
    );
    assert!(ex.proves_pass(), "{workload}, {ranks} ranks: {:?} {:?}", ex.incomplete, ex.counterexample());
    if ranks > 1 {
        assert!(ex.finals > 1, "{workload}, {ranks} ranks: more than one final state");
    }
}

/// All-to-all rounds for every world size up to 3 (n=3: about 1 200 states). At 4 ranks the
/// space is out of a test's reach: each rank accepts 6 connections (3 peers, 2 rounds) in any
/// order their connects allow, independently of the others, so states multiply across ranks;
/// measured in a debug build, 300 000 states after 113 s and 1.6 GB, at depth 13 of the 24
/// accepts, with no schedule finished yet (before the explorer forgot the order of a rank's
/// takes, 1.5 million states, 173 s and 12 GB at depth 10). Both-neighbour rounds below are the
/// 4-rank proof with several peers a rank.
#[test]
fn every_accept_order_of_the_round_tag_passes_all_to_all_up_to_three_ranks() {
    for ranks in 1..=3 {
        proves_the_round_tag(Workload::TWO_ROUNDS, ranks);
    }
}

/// Ring rounds (one message per rank and round: the same hazard, a peer's round-2 connection
/// overtaking its round-1 one) for every world size up to 4.
#[test]
fn every_accept_order_of_the_round_tag_passes_in_a_ring_up_to_four_ranks() {
    for ranks in 1..=4 {
        proves_the_round_tag(Workload::RING, ranks);
    }
}

/// Both-neighbour rounds at 4 ranks: each rank receives from two peers a round, so a receive
/// matches by peer and tag among several peers' connections, accepted in any order (4 accepts a
/// rank, 16 in all; about 13 000 states).
#[test]
fn every_accept_order_of_the_round_tag_passes_with_both_neighbours_at_four_ranks() {
    proves_the_round_tag(Workload::NEIGHBOURS, 4);
}

/// What makes the 4-rank proofs small: the explorer keeps what a rank took as a multiset, so a
/// rank's round-1 receives from two peers, accepted in either order, meet again in one state
/// (they are still both explored: two accepts at one listener are dependent).
#[test]
fn receives_from_two_peers_accepted_in_either_order_are_one_state() {
    let w = World::of(Rendezvous, Variant::RoundTag, Workload::TWO_ROUNDS, &case(3), Faults::default());
    let from = |from| Choice::Accept { at: 0, conn: ConnName { from, to: 0, k: 0 } };
    let (a, b) = (from(1), from(2));
    assert!(w.choices().contains(&a) && w.choices().contains(&b), "{:?}", w.choices());
    let (ab, ba) = (w.step(a).step(b), w.step(b).step(a));
    assert_eq!(ab.fingerprint(), ba.fingerprint(), "{:?} vs {:?}", ab.path(), ba.path());
    assert_ne!(ab.fingerprint(), w.step(a).fingerprint());
}

/// The shortest corrupting schedule of the reused tag, checked: a round-2 connection overtakes,
/// and its line replays on the fast engine to the same verdict and findings.
fn corrupts_and_replays(ex: &Exploration, workload: Workload, ranks: u32) {
    let cx = ex.counterexample().expect("a schedule that corrupts");
    // The counterexample's case prints the line that replays it, the one replay_line makes.
    let line = cx.case.to_string();
    assert_eq!(line, replay_line("rendezvous", Variant::ReusedTag, workload, &cx.case));
    assert!(line.starts_with(&format!("protocol=rendezvous variant=reused-tag workload={workload} ")), "{line}");
    assert_eq!(world_of(&line).expect("the line parses"), cx.case, "the line reads back as the case");
    println!(
        "reused-tag, {workload}, {ranks} ranks: {} states; {} after {} choices: {line}",
        ex.states, cx.verdict, cx.depth
    );
    assert_eq!(cx.verdict, Verdict::Corruption, "{:?}", cx.findings);
    // Its schedule: a rank accepts a sender's round-2 connection before its round-1 one.
    let order = &cx.case.schedule().accept;
    let overtaken = order.iter().any(|(&at, conns)| {
        let pos = |from, k| conns.iter().position(|c| *c == ConnName { from, to: at, k });
        (0..ranks).any(|from| matches!((pos(from, 0), pos(from, 1)), (Some(a), Some(b)) if b < a))
    });
    assert!(overtaken, "a round-2 connection accepted first: {line}");
    // The line is all a replay needs: the fast engine reaches the same verdict and findings.
    let fast = run(&Rendezvous, &Variant::ReusedTag, &workload, &world_of(&line).expect("the line parses"), false);
    assert_eq!((fast.verdict, &fast.findings), (cx.verdict, &cx.findings), "the fast engine agrees: {line}");
    // Without its accept order, the FIFO kernel never overtakes: the schedule is the bug.
    let plain = run(&Rendezvous, &Variant::ReusedTag, &workload, &case(ranks), false);
    assert_eq!(plain.verdict, Verdict::Pass);
}

#[test]
fn the_reused_tag_has_a_corrupting_accept_order_whose_line_replays() {
    for (workload, ranks) in [(Workload::TWO_ROUNDS, 2), (Workload::TWO_ROUNDS, 3), (Workload::RING, 4)] {
        let ex =
            explore(&Rendezvous, &Variant::ReusedTag, &workload, &case(ranks), Faults::default(), Bounds::default())
                .expect("the words name a line");
        corrupts_and_replays(&ex, workload, ranks);
    }
}

/// The 4-rank proof can fail: under the same workload, world and bounds (every schedule, no
/// stop), the reused tag reaches corrupting final states beside passing ones.
#[test]
fn the_reused_tag_corrupts_with_both_neighbours_at_four_ranks_under_the_proofs_bounds() {
    let ex = everything(Variant::ReusedTag, Workload::NEIGHBOURS, 4);
    println!(
        "reused-tag, neighbours, 4 ranks, every schedule: {} states, {} final: {:?}",
        ex.states, ex.finals, ex.verdicts
    );
    assert_eq!(ex.incomplete, None);
    assert!(
        ex.verdicts.contains_key(&Verdict::Corruption) && ex.verdicts.contains_key(&Verdict::Pass),
        "{:?}",
        ex.verdicts
    );
    assert!(!ex.proves_pass());
    corrupts_and_replays(&ex, Workload::NEIGHBOURS, 4);
}

/// Sleep sets prune only reorderings: without them the search takes more transitions and
/// reaches the same final states with the same verdicts.
#[test]
fn the_reduction_keeps_every_final_state() {
    let reduced = everything(Variant::ReusedTag, Workload::RING, 4);
    let bounds = Bounds { stop_at: None, reduce: false, ..Bounds::default() };
    let full = explore(&Rendezvous, &Variant::ReusedTag, &Workload::RING, &case(4), Faults::default(), bounds)
        .expect("the words name a line");
    println!(
        "reused-tag, ring, 4 ranks: {} transitions reduced, {} without; {} final states: {:?}",
        reduced.transitions, full.transitions, full.finals, full.verdicts
    );
    assert_eq!((reduced.incomplete.as_deref(), full.incomplete.as_deref()), (None, None));
    assert!(reduced.transitions < full.transitions, "{} vs {}", reduced.transitions, full.transitions);
    assert_eq!(reduced.finals, full.finals);
    let counts = |ex: &Exploration| ex.verdicts.iter().map(|(v, (finals, _))| (*v, *finals)).collect::<Vec<_>>();
    assert_eq!(counts(&reduced), counts(&full));
    assert!(reduced.verdicts.contains_key(&Verdict::Corruption), "{:?}", reduced.verdicts);
}
