//! The rendezvous nodes stepped through the seam in core's in-memory world (`MemNet::of`):
//! both variants bootstrap and exchange the right bytes when handshakes complete in order; one
//! scripted hold (a round-1 connection kept out of the accept queue until the sender's round-2
//! connection is queued) makes the reused tag swap the rounds and leaves the round tag right.

use std::time::Duration;

use bootsim_core::memnet::{Hold, MemNet, Node as Who};
use bootsim_core::seam::{Completed, Node as _};
use bootsim_example_rendezvous::payload::{expected, payload};
use bootsim_example_rendezvous::{Event, Node, Peers, Rendezvous, Variant, Workload};

const SEED: u64 = 11;
const LIMIT: Duration = Duration::from_secs(10);

fn world(variant: Variant, n: u32) -> MemNet<Node> {
    MemNet::of(&Rendezvous, &variant, &Workload::TWO_ROUNDS, SEED, n)
}

/// Rank `r`'s round results, in order.
fn rounds(net: &MemNet<Node>, r: u32) -> Vec<Vec<u8>> {
    net.results(r).into_iter().map(|c| c.result().expect("a round that succeeded").to_vec()).collect()
}

#[test]
fn both_variants_bootstrap_and_exchange_the_right_bytes_in_order() {
    for variant in Variant::ALL {
        for n in 1..=4 {
            let mut net = world(variant, n);
            net.run(LIMIT);
            let root_done = net.completions.iter().any(|(_, who, c)| *who == Who::Root && c.result().is_ok());
            assert!(root_done, "{variant} n={n}: the root sent the table");
            for r in 0..n {
                assert!(
                    net.node(r).is_finished(),
                    "{variant} n={n}: rank {r} waits for {:?}",
                    net.node(r).waiting_for()
                );
                let want: Vec<Vec<u8>> = (1..=2).map(|k| expected(SEED, Peers::All, r, n, k, 32)).collect();
                assert_eq!(rounds(&net, r), want, "{variant} n={n} rank {r}");
                assert!(net.node(r).unexpected().is_empty(), "{variant} n={n} rank {r} leaks");
            }
        }
    }
}

#[test]
fn a_round_one_connection_overtaken_by_round_two_swaps_the_rounds_only_with_the_reused_tag() {
    let held = Hold { from: 1, to: 0, nth: 0, fallback: Duration::from_millis(50) };
    let mut buggy = world(Variant::ReusedTag, 2);
    buggy.hold(held);
    buggy.run(LIMIT);
    let (round1, round2) = (payload(SEED, 1, 0, 1, 32), payload(SEED, 1, 0, 2, 32));
    assert_eq!(rounds(&buggy, 0), [round2, round1], "rank 0 took round 2's message for round 1, then round 1's");
    let taken: Vec<(u32, i32, u32)> = buggy
        .events
        .iter()
        .filter_map(|(_, who, e)| match *e {
            Event::Taken { from, tag, round, .. } if *who == Who::Rank(0) => Some((from, tag, round)),
            _ => None,
        })
        .collect();
    assert_eq!(taken, [(1, 1, 1), (1, 1, 2)], "one (peer, tag) for both rounds");

    let mut fixed = world(Variant::RoundTag, 2);
    fixed.hold(held);
    fixed.run(LIMIT);
    assert_eq!(rounds(&fixed, 0), [expected(SEED, Peers::All, 0, 2, 1, 32), expected(SEED, Peers::All, 0, 2, 2, 32)]);
    assert!(fixed.node(0).is_finished() && fixed.node(1).is_finished());
}

#[test]
fn a_stranger_with_garbage_is_dropped_and_the_run_still_ends_right() {
    for garbage in [vec![0xff; 3], vec![0x10, 0, 0, 0, 1, 2], 9000u32.to_le_bytes().repeat(4)] {
        let mut net = world(Variant::RoundTag, 2);
        net.inject(0, garbage.clone(), true);
        net.run(LIMIT);
        let strays = net.events.iter().filter(|(_, who, e)| *who == Who::Rank(0) && matches!(e, Event::Stray { .. }));
        assert_eq!(strays.count(), 1, "{garbage:?}: one stray dropped");
        assert_eq!(
            rounds(&net, 0),
            [expected(SEED, Peers::All, 0, 2, 1, 32), expected(SEED, Peers::All, 0, 2, 2, 32)],
            "{garbage:?}"
        );
    }
}
