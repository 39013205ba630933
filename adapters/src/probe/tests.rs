//! The probe over the real kernel: each test returns early, saying why, when the process
//! cannot run a wire (no CAP_NET_ADMIN or no /dev/net/tun).

use std::time::{Duration, Instant};

use super::*;
use crate::os::DEFAULT_DRAIN_TIMEOUT;
use crate::wire::Wire;

fn available() -> bool {
    crate::skip::wire_can_run()
}

fn run(k: u32, drain_ms: Option<u64>, policy: &str) -> ProbeReport {
    let started = Instant::now();
    let report = run_local(k, drain_ms.map(Duration::from_millis), policy.parse().unwrap()).unwrap();
    eprintln!("{report} [{:?}]", started.elapsed());
    assert_eq!(report.order.len(), k as usize);
    report
}

#[test]
fn k2_release_on_next_swaps_without_drain() {
    if !available() {
        return;
    }
    let r = run(2, None, "release-on-next,select=nth:0");
    assert_eq!(r.order, vec![1, 0]);
    assert!(r.stats.only_pair_swaps);
    let w = r.wire.unwrap();
    assert_eq!((w.connections, w.held, w.released_on_next), (2, 1, 1));
}

#[test]
fn k2_release_on_next_in_order_with_drain() {
    if !available() {
        return;
    }
    let r = run(2, Some(1000), "release-on-next,select=nth:0");
    assert_eq!(r.order, vec![0, 1]);
    let d = r.drain.unwrap();
    assert_eq!(d.timeouts, 0);
    assert!(d.max_us >= 40_000, "the held connection's drain waits for the 50 ms fallback: {r}");
}

#[test]
fn k10_release_on_next_exact_pair_swaps_without_drain() {
    if !available() {
        return;
    }
    let r = run(10, None, "release-on-next");
    assert_eq!(r.order, vec![1, 0, 3, 2, 5, 4, 7, 6, 9, 8]);
    assert_eq!((r.stats.pair_swaps, r.stats.inversions), (5, 5));
    assert!(r.stats.only_pair_swaps);
}

#[test]
fn k10_release_on_next_in_order_with_drain() {
    if !available() {
        return;
    }
    let r = run(10, Some(1000), "release-on-next");
    assert!(r.stats.in_order(), "{r}");
    let d = r.drain.unwrap();
    assert_eq!(d.timeouts, 0);
    assert_eq!(r.wire.unwrap().released_on_deadline, 5, "each even connection waits out the fallback");
}

#[test]
fn hold_beyond_drain_bound_times_out_and_reorders() {
    if !available() {
        return;
    }
    let r = run(2, Some(100), "hold=300ms,select=nth:0");
    assert_eq!(r.order, vec![1, 0]);
    assert_eq!(r.drain.unwrap().timeouts, 1);
}

#[test]
fn no_policy_keeps_order() {
    if !available() {
        return;
    }
    for drain in [None, Some(1000)] {
        let r = run(50, drain, "none");
        assert!(r.stats.in_order(), "{r}");
        assert_eq!(r.wire.unwrap().held, 0);
    }
}

#[test]
fn model_policy_plugs_in() {
    if !available() {
        return;
    }
    let policy = Policy::model(|f| Duration::from_millis(if f.pair_conn == 1 { 30 } else { 0 }));
    let r = run_local(3, None, policy).unwrap();
    assert_eq!(r.order, vec![0, 2, 1], "{r}");
    assert_eq!(r.policy, "model");
}

#[test]
fn zero_connections_is_an_empty_report() {
    if !available() {
        return;
    }
    let r = run(0, Some(1000), "none");
    assert!(r.order.is_empty() && r.stats.in_order());
}

#[test]
fn listen_and_connect_halves_across_hosts() {
    if !available() {
        return;
    }
    let wire = Wire::start(3, Policy::NONE).unwrap();
    let addr = SocketAddr::V4(SocketAddrV4::new(host_addr(3), 7001));
    // The connecting half starts first and retries while refused.
    let sent = wire.spawn(1, move || connect(addr, 4, Some(DEFAULT_DRAIN_TIMEOUT))).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let heard = wire.spawn(3, move || listen(addr, 4)).unwrap();
    let sent = sent.join().unwrap().unwrap();
    let heard = heard.join().unwrap().unwrap();
    let log = wire.shutdown().unwrap();
    assert_eq!(heard.order, vec![0, 1, 2, 3], "{heard}");
    assert_eq!(sent.drain.unwrap().drains, 4);
    assert!(log.connections > 4, "refused attempts are numbered too: {}", log.connections);
    let r = ProbeReport::from_halves("none".into(), heard, sent, None, Duration::ZERO);
    assert_eq!(r.k, 4);
    assert!(r.to_string().starts_with("accept-order k=4 policy=none drain=1000ms: order [0,1,2,3]"), "{r}");
}
