//! The host's CPUs: queues sharing a CPU, RPS's per-CPU backlog, and the application's CPU
//! time behind softirq. Each test drives the packet path (`Net`) or the kernel directly and
//! would fail if its mechanism broke.

use std::time::Duration;

use bootsim_core::Instant;

use super::agenda::{Net, Pkt, Work};
use super::config::KernelConfig;
use super::events::{Dir, EventKind, Flow, HostId, Seg};
use super::Kernel;

const US: u64 = 1_000;

/// A flow from host 1 to host 0 with its own source port.
fn flow(port: u16) -> Flow {
    Flow { client: HostId(1), client_port: port, server: HostId(0), server_port: 5000 }
}

/// `load` without random stalls or flood, plus `words`.
fn cfg(words: &str) -> KernelConfig {
    let mut c = KernelConfig::profile("load").unwrap();
    c.apply_words(&format!("stall_gap=off flood_rate=0 {words}")).unwrap();
    c
}

/// Offers `n` SYNs at time zero to host 0, alternating over RX queues 0 and 1, and runs the
/// packet path (RPS backlogs included) to the end; returns the delivery times and the net.
fn syn_burst(c: KernelConfig, n: u64) -> (Vec<u64>, Net) {
    let mut net = Net::new(c, 1, 2);
    for i in 0..n {
        let pkt = Pkt { conn: i, host: 0, queue: (i % 2) as u16, dir: Dir::ToServer, seg: Seg::Syn };
        net.arrive(Instant::ZERO, pkt, || flow(40_000 + i as u16));
    }
    let mut done = Vec::new();
    while let Some((at, work)) = net.pop_due(Instant::from_nanos(u64::MAX)) {
        match work {
            Work::Backlog { pkt, cpu } => net.backlog(at, pkt, cpu, || flow(40_000 + pkt.conn as u16)),
            Work::Deliver(_) => done.push(at.as_nanos()),
            Work::Arrive(_) | Work::Timer { .. } => unreachable!("only the burst is on the agenda"),
        }
    }
    (done, net)
}

#[test]
fn two_queues_on_one_cpu_take_twice_as_long_as_on_two() {
    // A SYN costs 5 us (service 1 + syn 4); 40 of them, 20 per queue.
    let (two, _) = syn_burst(cfg("rx_queues=2 cpus=2"), 40);
    let (one, _) = syn_burst(cfg("rx_queues=2 cpus=1"), 40);
    assert_eq!(two.iter().max(), Some(&(20 * 5 * US)));
    assert_eq!(one.iter().max(), Some(&(40 * 5 * US)));
    // One CPU per queue (cpus=0) is the same as cpus=2 here.
    let (own, _) = syn_burst(cfg("rx_queues=2 cpus=0 rx_ring=1024"), 40);
    assert_eq!(own, two);
}

#[test]
fn two_queues_on_one_cpu_share_its_napi_budget() {
    // The budget is counted in time: 300 x service = 300 us per poll. 100 SYNs (5 us each),
    // 50 per queue: each of two CPUs polls 250 us and stays within it; one CPU serving both
    // queues exhausts it after 60 packets and the other 40 wait 1 ms for ksoftirqd.
    let (two, _) = syn_burst(cfg("rx_queues=2 cpus=2 napi_budget_time=off"), 100);
    let (one, _) = syn_burst(cfg("rx_queues=2 cpus=1 napi_budget_time=off"), 100);
    assert_eq!(two.iter().max(), Some(&(250 * US)));
    assert_eq!(one.iter().max(), Some(&(500 * US + 1_000 * US)));
}

#[test]
fn a_full_backlog_drops_exactly_the_excess() {
    // One CPU, RPS on, max_backlog 10. Queue 0's CPU is stalled for 1 ms, so the 15 SYNs
    // wait in the ring; after the stall each takes 1 us to steer, and its TCP work (4 us)
    // waits behind the steering of the rest. Linux enqueues while `qlen <= max_backlog`, so
    // the backlog holds 11 and the other 4 are dropped.
    let words = "rx_queues=2 cpus=1 rps=on stalls=0:0:0:1000";
    let (done, net) = syn_burst(cfg(&format!("{words} max_backlog=10")), 15);
    assert_eq!(net.stats().cpu_backlog_drops, 4);
    assert_eq!(done.len(), 11);
    let traced = net.events.iter().filter(|e| matches!(e.kind, EventKind::CpuBacklogDrop { cpu: 0, .. })).count();
    assert_eq!(traced, 4);
    // A backlog of 14 holds them all; RPS off keeps the backlog off the path altogether.
    let (done, net) = syn_burst(cfg(&format!("{words} max_backlog=14")), 15);
    assert_eq!((done.len(), net.stats().cpu_backlog_drops), (15, 0));
    let (done, net) = syn_burst(cfg(&format!("{words} max_backlog=10 rps=off")), 15);
    assert_eq!((done.len(), net.stats().cpu_backlog_drops), (15, 0));
}

#[test]
fn rps_moves_tcp_work_to_the_backlog_cpu() {
    // Queues 0 and 1 on CPUs 0 and 1 of four: without RPS each does its 20 SYNs (20 x 5 us);
    // with RPS they only steer (1 us each) and the hash spreads the TCP work (4 us) over all
    // four CPUs, so the burst is done sooner, but not before the steering is.
    let (off, _) = syn_burst(cfg("rx_queues=2 cpus=4"), 40);
    let (on, _) = syn_burst(cfg("rx_queues=2 cpus=4 rps=on max_backlog=1000"), 40);
    assert_eq!(off.iter().max(), Some(&(20 * 5 * US)));
    let last = *on.iter().max().unwrap();
    assert!(last < 20 * 5 * US && last > 20 * US, "{last}");
}

/// Host 0 listens with RX queue 0 only on CPU 0 (rx_queues=1, two CPUs); `senders` hosts
/// connect at once. Returns how long after the first child is ready the application's
/// accept() (2 us of CPU) completes on `app_cpu`.
fn accept_delay(app_cpu: u16, senders: u32) -> Duration {
    let c = cfg(&format!("rx_queues=1 cpus=2 app_cpu={app_cpu} syscall_cost=2us napi_budget=0"));
    c.validate(senders + 1).unwrap();
    let mut k = Kernel::new(c, 3, senders + 1);
    let l = k.listen(Instant::ZERO, HostId(0), 5000).unwrap();
    for s in 1..=senders {
        k.connect(Instant::ZERO, HostId(s), HostId(0), 5000);
    }
    while let Some(t) = k.poll_timeout() {
        k.handle_timeout(t);
        while let Some(ev) = k.poll_event() {
            if let EventKind::Acceptable { listener } = ev.kind {
                assert_eq!(listener, l);
                return k.app_run(t, HostId(0), t, Duration::from_micros(2)) - t;
            }
        }
    }
    panic!("no connection became acceptable");
}

#[test]
fn an_application_on_the_busy_core_accepts_later() {
    // 300 handshakes land on CPU 0 within microseconds: the first child is ready while the
    // rest of the SYNs and ACKs still wait for CPU 0's softirq, which preempts the
    // application there. On the idle CPU 1 the accept takes its own 2 us.
    let idle = accept_delay(1, 300);
    let busy = accept_delay(0, 300);
    assert_eq!(idle, Duration::from_micros(2));
    assert!(busy > Duration::from_micros(200), "{busy:?}");
    // With a handful of connections there is little to wait for.
    assert!(accept_delay(0, 2) < Duration::from_micros(20));
}

#[test]
fn the_application_runs_while_a_poll_waits_for_ksoftirqd() {
    // 400 SYNs (5 us each) on one CPU, budget 300 us per poll: the first poll stops at 300 us
    // and ksoftirqd resumes at 1.3 ms; the second poll stops at 1.6 ms. An application gets
    // the CPU only while a poll waits.
    let mut net = Net::new(cfg("rx_queues=1 cpus=1 napi_budget_time=off syscall_cost=2us"), 1, 2);
    for i in 0..400 {
        let pkt = Pkt { conn: i, host: 0, queue: 0, dir: Dir::ToServer, seg: Seg::Syn };
        net.arrive(Instant::ZERO, pkt, || flow(40_000 + i as u16));
    }
    let app = |net: &mut Net, from_us: u64| {
        net.app_done(Instant::ZERO, 0, Instant::from_nanos(from_us * US), Duration::from_micros(2)).as_nanos()
    };
    assert_eq!(app(&mut net, 0), 302 * US, "waits for the first poll");
    assert_eq!(app(&mut net, 400), 402 * US, "runs during the wait for ksoftirqd");
    assert_eq!(app(&mut net, 1_350), 1_602 * US, "waits for the second poll");
}
