//! `Limits::read_ahead`: idle strangers can hold NVSHMEM's sequential root and receives behind
//! them for a header timeout each; read-ahead bounds that to about one header timeout, keeps
//! matching in accept order, and bounds the descriptors they hold.

use std::time::Duration;

use bootsim_core::Instant;
use bootsim_nvshmem::memnet::{MemNet, Node, NvshmemNet};
use bootsim_nvshmem::{Event, Limits, Op, Variant};

const HEADER: Duration = Duration::from_millis(500);
const STRANGERS: usize = 20;

fn limits(read_ahead: Option<usize>) -> Limits {
    Limits { header_timeout: Some(HEADER), read_ahead, ..Limits::default() }
}

/// When every rank's init completed, after `STRANGERS` idle connections reached the root first.
fn init_done_with_idle_strangers_at_root(variant: &str, read_ahead: Option<usize>) -> Instant {
    let mut net = MemNet::with_limits(3, Variant::preset(variant).unwrap(), limits(read_ahead));
    for _ in 0..STRANGERS {
        net.inject_root(Vec::new(), false);
    }
    net.run(Duration::from_secs(600));
    for r in 0..3 {
        assert!(
            net.rank(r).is_ready(),
            "{variant} {read_ahead:?}: rank {r} not ready: {:?}",
            net.rank(r).waiting_for()
        );
    }
    net.events
        .iter()
        .filter(|(_, n, e)| *n != Node::Root && matches!(e, Event::Ready))
        .map(|(t, _, _)| *t)
        .max()
        .expect("ready events")
}

#[test]
fn idle_strangers_hold_nvshmems_sequential_root_but_not_a_read_ahead_one() {
    for variant in ["nvshmem-3.4", "seq"] {
        let sequential = init_done_with_idle_strangers_at_root(variant, None);
        let ahead = init_done_with_idle_strangers_at_root(variant, Some(4));
        // Sequential: each stranger ahead of a check-in costs a header timeout.
        assert!(sequential >= Instant::ZERO + HEADER * 10, "{variant}: sequential root done at {sequential}");
        // Read-ahead: the pool of 4 evicts the idle ones as check-ins arrive.
        assert!(ahead < Instant::ZERO + HEADER, "{variant}: read-ahead root done at {ahead}");
    }
}

/// Runs an alltoall and a barrier after `STRANGERS` idle connections reached every rank's
/// listener; returns how long the operations took and how many strangers were dropped.
fn ops_with_idle_strangers_at_ranks(variant: &str, read_ahead: Option<usize>) -> (Duration, usize) {
    let mut net = MemNet::with_limits(3, Variant::preset(variant).unwrap(), limits(read_ahead));
    net.run(Duration::from_secs(60));
    let start = net.now();
    for to in 0..3 {
        for _ in 0..STRANGERS {
            net.inject(to, Vec::new(), false);
        }
    }
    for r in 0..3 {
        let chunks: Vec<u8> = (0..3).flat_map(|p| vec![(r * 3 + p) as u8; 24]).collect();
        net.queue_ops(r, [Op::Alltoall { chunks }, Op::Barrier { word: [1, 2, 3, 4] }]);
    }
    net.run(Duration::from_secs(600));
    for r in 0..3u32 {
        let res = net.results(r);
        assert_eq!(res.len(), 2, "{variant} {read_ahead:?}: rank {r}: {res:?} waiting {:?}", net.rank(r).waiting_for());
        let expected: Vec<u8> = (0..3u32).flat_map(|p| vec![(p * 3 + r) as u8; 24]).collect();
        assert_eq!(res[0].result, Ok(expected), "{variant} {read_ahead:?}: rank {r}");
    }
    let end = net.completions.iter().map(|(t, _, _)| *t).max().unwrap();
    let dropped = net.events.iter().filter(|(_, _, e)| matches!(e, Event::StalledDropped { .. })).count();
    (end.saturating_since(start), dropped)
}

#[test]
fn idle_strangers_hold_nvshmems_receives_but_not_read_ahead_ones() {
    let (sequential, dropped) = ops_with_idle_strangers_at_ranks("nvshmem-3.4", None);
    assert!(sequential >= HEADER * STRANGERS as u32, "sequential receives took {sequential:?}");
    assert_eq!(dropped, 3 * STRANGERS);
    let (ahead, dropped) = ops_with_idle_strangers_at_ranks("nvshmem-3.4", Some(4));
    assert!(ahead <= HEADER * 2, "read-ahead receives took {ahead:?}");
    assert_eq!(dropped, 3 * STRANGERS, "every stranger evicted or timed out, none left open");
}

#[test]
fn read_ahead_bounds_the_strangers_an_ordered_transport_holds() {
    for variant in ["seq", "persistent"] {
        let (took, dropped) = ops_with_idle_strangers_at_ranks(variant, Some(4));
        assert!(took <= HEADER * 2, "{variant}: took {took:?}");
        assert_eq!(dropped, 3 * STRANGERS, "{variant}");
    }
}

#[test]
fn read_ahead_keeps_matching_in_accept_order() {
    // The report's bug must survive the hardening: a per-message rank still matches by
    // (peer, tag) in accept order, so a run with read-ahead takes the same messages as one
    // without when nothing is in the way.
    for variant in ["nvshmem-3.4", "nvshmem-3.7", "disjoint"] {
        let mut taken = Vec::new();
        for read_ahead in [None, Some(4)] {
            let mut net = MemNet::with_limits(4, Variant::preset(variant).unwrap(), limits(read_ahead));
            for r in 0..4 {
                let chunks: Vec<u8> = (0..4).flat_map(|p| vec![(r * 4 + p) as u8; 16]).collect();
                net.queue_ops(r, [Op::Barrier { word: [9; 4] }, Op::Alltoall { chunks }, Op::Barrier { word: [7; 4] }]);
            }
            net.run(Duration::from_secs(60));
            let results: Vec<_> = (0..4).map(|r| net.results(r).into_iter().cloned().collect::<Vec<_>>()).collect();
            taken.push(results);
        }
        assert_eq!(taken[0], taken[1], "{variant}");
    }
}

#[test]
fn idle_strangers_ahead_in_a_pool_that_is_not_full_do_not_hold_a_receive() {
    // 20 idle strangers in a pool of 64: nothing is evicted, so a receive that took the
    // oldest arrival would wait a header timeout on each; it takes the oldest whose header came.
    for variant in ["nvshmem-3.4", "nvshmem-3.7"] {
        let (took, dropped) = ops_with_idle_strangers_at_ranks(variant, Some(64));
        assert!(took < HEADER, "{variant}: took {took:?}");
        assert_eq!(dropped, 3 * STRANGERS, "{variant}: every stranger timed out, none left open");
    }
}
