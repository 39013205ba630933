//! Unit tests of the pure decision engine, with synthetic packets (no TUN needed).

use std::time::{Duration, Instant};

use super::flow::{ReleaseReason, WireEvent};
use super::packet::build::tcp;
use super::policy::Policy;
use super::tracker::{Delivery, Tracker};
use super::SUBNET;

const A: [u8; 4] = [10, 213, 0, 1];
const B: [u8; 4] = [10, 213, 0, 2];

struct Harness {
    t: Tracker,
    now: Instant,
    out: Vec<Delivery>,
}

impl Harness {
    fn new(policy: &str) -> Self {
        let now = Instant::now();
        Harness { t: Tracker::new(policy.parse::<Policy>().unwrap(), SUBNET, 2, now), now, out: Vec::new() }
    }

    /// Feeds a client→server packet of the connection from port `port`; returns how many
    /// packets came out.
    fn client(&mut self, port: u16, isn: u32, flags: &str) -> usize {
        self.t.on_packet(self.now, tcp(A, port, B, 7000, isn, flags, &[]), &mut self.out);
        self.out.len()
    }

    /// Drains the output; returns the source ports of the packets, in order.
    fn take(&mut self) -> Vec<u16> {
        self.out
            .drain(..)
            .map(|d| {
                assert_eq!(d.to, 2);
                super::packet::parse(&d.packet).unwrap().tcp.unwrap().src_port
            })
            .collect()
    }

    fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
        self.t.on_timer(self.now, &mut self.out);
    }

    /// A handshake: SYN (forwarded), then the completing ACK.
    fn connect(&mut self, port: u16) {
        self.client(port, u32::from(port), "S");
        self.client(port, u32::from(port), "A");
    }
}

#[test]
fn release_on_next_swaps_pairs() {
    let mut h = Harness::new("release-on-next");
    h.connect(100); // conn 0: held
    h.client(100, 100, "AP");
    assert_eq!(h.take(), vec![100]); // only the SYN
    h.connect(101); // conn 1 completes, releases conn 0 right after its ACK
    assert_eq!(h.take(), vec![101, 101, 100, 100]);
    h.connect(102);
    h.advance(49);
    assert_eq!(h.take(), vec![102]);
    h.advance(1); // fallback
    assert_eq!(h.take(), vec![102]);
    let r = h.t.finish(h.now);
    assert_eq!(r.connections, 3);
    assert!(r.decisions.iter().any(|d| d.flow.conn == 0
        && d.event
            == WireEvent::Released { reason: ReleaseReason::NextCompleted { by_conn: 1 }, packets: 2, held_us: 0 }));
    assert_eq!(r.count(|e| matches!(e, WireEvent::Released { reason: ReleaseReason::Deadline, .. })), 1);
}

#[test]
fn hold_releases_in_order_after_delay() {
    let mut h = Harness::new("hold=20ms,select=nth:0");
    h.connect(100);
    h.client(100, 100, "AP");
    h.client(100, 100, "AF");
    h.connect(101);
    assert_eq!(h.take(), vec![100, 101, 101]);
    h.advance(19);
    assert!(h.take().is_empty());
    h.advance(1);
    assert_eq!(h.take(), vec![100, 100, 100]);
    h.client(100, 100, "A");
    assert_eq!(h.take(), vec![100], "a released flow forwards at once");
}

#[test]
fn syn_retransmit_is_not_a_new_connection_but_port_reuse_is() {
    let mut h = Harness::new("none");
    h.client(100, 5, "S");
    h.client(100, 5, "S");
    h.client(100, 5, "A");
    h.client(100, 9, "S");
    assert_eq!(h.take().len(), 4);
    let r = h.t.finish(h.now);
    assert_eq!(r.connections, 2);
    assert_eq!(r.decisions[1].flow.pair_conn, 0);
    assert_eq!(r.decisions[2].flow.pair_conn, 1);
}

#[test]
fn server_packets_and_strangers_pass_or_drop() {
    let mut h = Harness::new("hold=10ms");
    h.connect(100);
    h.take();
    h.t.on_packet(h.now, tcp(B, 7000, A, 100, 1, "SA", &[]), &mut h.out);
    assert_eq!(h.out.drain(..).map(|d| d.to).collect::<Vec<_>>(), vec![1]);
    h.t.on_packet(h.now, tcp(A, 1, [10, 213, 0, 9], 2, 0, "S", &[]), &mut h.out);
    h.t.on_packet(h.now, tcp(A, 1, [192, 168, 0, 2], 2, 0, "S", &[]), &mut h.out);
    h.t.on_packet(h.now, vec![0x60, 0, 0, 0], &mut h.out);
    h.t.on_packet(h.now, vec![0x45, 1], &mut h.out);
    assert!(h.out.is_empty());
    let r = h.t.finish(h.now);
    assert_eq!(r.counters.dropped_unroutable, 2);
    assert_eq!(r.counters.dropped_not_ipv4, 1);
    assert_eq!(r.counters.dropped_malformed, 1);
    assert_eq!(r.counters.dropped_at_shutdown, 1);
    assert!(matches!(r.decisions.last().unwrap().event, WireEvent::DroppedAtShutdown { packets: 1 }));
}

#[test]
fn model_policy_gets_connections_in_syn_order() {
    let now = Instant::now();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let policy = Policy::model(move |f| {
        seen2.lock().unwrap().push(f.conn);
        Duration::from_millis(if f.conn == 0 { 5 } else { 0 })
    });
    let mut t = Tracker::new(policy, SUBNET, 2, now);
    let mut out = Vec::new();
    for port in [100, 101] {
        t.on_packet(now, tcp(A, port, B, 7000, 1, "S", &[]), &mut out);
        t.on_packet(now, tcp(A, port, B, 7000, 1, "A", &[]), &mut out);
    }
    assert_eq!(out.len(), 3);
    assert_eq!(t.next_deadline(), Some(now + Duration::from_millis(5)));
    assert_eq!(*seen.lock().unwrap(), vec![0, 1]);
}

#[test]
fn capture_reassembles_each_clients_bytes_by_sequence_number() {
    let now = Instant::now();
    let mut t = Tracker::new("none".parse::<Policy>().unwrap(), SUBNET, 2, now).capturing();
    let mut out = Vec::new();
    let isn = 0xffff_fff0u32; // sequence numbers wrap within the stream
    t.on_packet(now, tcp(A, 100, B, 7000, isn, "S", &[]), &mut out);
    t.on_packet(now, tcp(A, 100, B, 7000, isn.wrapping_add(1), "A", &[]), &mut out);
    // Second segment first, then the first, then a retransmission overlapping both.
    t.on_packet(now, tcp(A, 100, B, 7000, isn.wrapping_add(18), "AP", b"world"), &mut out);
    t.on_packet(now, tcp(A, 100, B, 7000, isn.wrapping_add(1), "AP", b"hello, the whole "), &mut out);
    t.on_packet(now, tcp(A, 100, B, 7000, isn.wrapping_add(15), "AP", b"le world"), &mut out);
    // The server's bytes are not the client's.
    t.on_packet(now, tcp(B, 7000, A, 100, 5, "AP", b"reply"), &mut out);
    let report = t.finish(now);
    assert_eq!(report.streams.len(), 1);
    assert_eq!(report.streams[0].bytes, b"hello, the whole world");
    // Without capture, nothing is kept.
    let t = Tracker::new("none".parse::<Policy>().unwrap(), SUBNET, 2, now);
    assert!(t.finish(now).streams.is_empty());
}
