//! Unit tests of the loaded RX queue (napi.rs): budget deferral, the flood fluid, ring drops.

use std::time::Duration;

use bootsim_core::Instant;

use super::*;
use crate::kernel::rng::Streams;
use crate::kernel::softirq::{Admitted, StallParams};

const US: u64 = 1_000;

/// A queue without random stalls, forced busy during `script`, carrying `flows` flood flows.
fn queue(words: &str, flows: u32, script: Vec<(u64, u64)>) -> (RxQueue, StallParams) {
    let mut cfg = KernelConfig::default();
    cfg.apply_words(words).unwrap();
    let sp = StallParams::new(&cfg, &Streams::new(1));
    let mut q = RxQueue::new(&sp, 0, 0).with_script(script, Vec::new());
    q.set_loaded(Loaded::new(LoadParams::new(&cfg, flows, 1)));
    (q, sp)
}

fn offer(q: &mut RxQueue, sp: &StallParams, at: u64, cost_us: u64) -> Option<Admitted> {
    q.offer(Instant::from_nanos(at), Duration::from_micros(cost_us), sp, Via::Ring)
}

#[test]
fn budget_deferral_delays_the_301st_packet_of_a_burst() {
    let words = "service=2us napi_budget=300 ksoftirqd_delay=1ms";
    let (mut q, sp) = queue(words, 0, Vec::new());
    let done: Vec<_> = (0..302).map(|_| offer(&mut q, &sp, 0, 2).unwrap()).collect();
    for (i, a) in done.iter().take(300).enumerate() {
        assert_eq!(a.done.as_nanos(), (i as u64 + 1) * 2 * US, "packet {i}");
        assert!(a.stall.is_none(), "packet {i}");
    }
    // The poll stops after 300 packets (600 us); ksoftirqd picks the rest up 1 ms later.
    assert_eq!(done[300].done.as_nanos(), 600 * US + 1_000 * US + 2 * US);
    assert_eq!(done[300].stall, Some((Instant::from_nanos(600 * US), Instant::from_nanos(1_600 * US))));
    assert_eq!(done[301].done.as_nanos(), 1_604 * US);
    assert_eq!(q.deferrals(), 0, "the looked-ahead deferral is counted when the clock passes it");
    offer(&mut q, &sp, 5_000 * US, 2).unwrap();
    assert_eq!(q.deferrals(), 1);

    // Without a budget the 301st packet follows at once; a time budget works the same way.
    let (mut q, sp) = queue("service=2us", 0, Vec::new());
    q.set_loaded(Loaded::new(LoadParams::new(&KernelConfig { rx_queues: 1, ..KernelConfig::default() }, 0, 1)));
    let last = (0..301).map(|_| offer(&mut q, &sp, 0, 2).unwrap()).last().unwrap();
    assert_eq!(last.done.as_nanos(), 602 * US);
    let (mut q, sp) = queue("service=2us napi_budget_time=100us ksoftirqd_delay=1ms", 0, Vec::new());
    let d: Vec<_> = (0..51).map(|_| offer(&mut q, &sp, 0, 2).unwrap().done.as_nanos()).collect();
    assert_eq!((d[49], d[50]), (100 * US, 1_102 * US));
}

#[test]
fn flood_work_piles_up_during_a_stall_and_delays_the_next_packet() {
    // 200k packets/s of 1 us: 20% of the CPU. A 1 ms stall leaves 200 us of flood queued.
    let words = "flood_rate=200000 flood_flows=1 flood_cost=1us";
    let (mut q, sp) = queue(words, 1, vec![(0, 1_000 * US)]);
    let a = offer(&mut q, &sp, 1_000 * US, 2).unwrap();
    assert_eq!(a.done.as_nanos(), 1_000 * US + 200 * US + 2 * US);
    // With no flood on this queue (its flows hashed elsewhere) only the stall delays.
    let (mut q, sp) = queue(words, 0, vec![(0, 1_000 * US)]);
    let a = offer(&mut q, &sp, 500 * US, 2).unwrap();
    assert_eq!(a.done.as_nanos(), 1_002 * US);
    assert_eq!(a.stall, Some((Instant::from_nanos(500 * US), Instant::from_nanos(1_000 * US))));
}

#[test]
fn ring_drops_only_when_the_ring_is_short_and_the_flood_heavy() {
    let stall = vec![(0, 2_000 * US)];
    let drops = |words: &str, flows: u32| {
        let (mut q, sp) = queue(words, flows, stall.clone());
        (0..20).filter(|i| offer(&mut q, &sp, 1_000 * US + i * 20 * US, 2).is_none()).count()
    };
    // 400 flood packets pile up in the 2 ms stall: a 64-slot ring is full from 320 us on.
    assert_eq!(drops("rx_ring=64 flood_rate=200000 flood_cost=1us", 1), 20);
    assert_eq!(drops("rx_ring=1024 flood_rate=200000 flood_cost=1us", 1), 0);
    assert_eq!(drops("rx_ring=64 flood_rate=200000 flood_cost=1us", 0), 0);
    assert_eq!(drops("rx_ring=64 flood_rate=10000 flood_cost=1us", 1), 0);
    // Real packets alone fill a short ring too: 8 slots, the 9th packet of a stalled burst drops.
    let (mut q, sp) = queue("rx_ring=8", 0, stall.clone());
    let fates: Vec<bool> = (0..10).map(|_| offer(&mut q, &sp, 100 * US, 2).is_some()).collect();
    assert_eq!(fates, [true, true, true, true, true, true, true, true, false, false]);
}

#[test]
fn the_same_offers_give_the_same_completions_with_random_stalls() {
    let run = || {
        let mut cfg = KernelConfig::profile("load").unwrap();
        cfg.set("stall_gap", "50us").unwrap();
        let sp = StallParams::new(&cfg, &Streams::new(7));
        let mut q = RxQueue::new(&sp, 0, 3);
        q.set_loaded(Loaded::new(LoadParams::new(&cfg, 2, 1)));
        (0..3000u64)
            .map(|i| {
                q.offer(Instant::from_nanos(i * i % 7919 * 300 + i * 1000), Duration::from_micros(3), &sp, Via::Ring)
            })
            .collect::<Vec<_>>()
    };
    let a = run();
    assert_eq!(a, run());
    let done: Vec<u64> = a.iter().flatten().map(|x| x.done.as_nanos()).collect();
    assert!(done.windows(2).all(|w| w[0] <= w[1]), "completions are FIFO");
    assert!(a.iter().flatten().any(|x| x.stall.is_some()));
}
