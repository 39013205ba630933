//! The wire's pure decision engine: numbers connections, applies the [`Policy`] and says
//! which packet goes to which host when. No I/O; time comes in as `Instant`s.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use super::flow::{CapturedStream, FlowInfo, ReleaseReason, WireDecision, WireEvent, WireReport};
use super::packet::{parse, ParseError};
use super::policy::{HoldPlan, Policy, MAX_DELAY};

/// A packet to write to host `to`'s TUN device.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Delivery {
    pub to: u8,
    pub packet: Vec<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// SYN seen, no client packet after it yet.
    Opening,
    /// Completing packet and everything after it held.
    Held,
    /// Forwarding freely.
    Open,
}

struct Conn {
    info: FlowInfo,
    plan: HoldPlan,
    state: State,
    held: Vec<Vec<u8>>,
    held_since: Option<Instant>,
    /// Captured client payload by offset from the first data byte (capture on).
    segments: BTreeMap<u32, Vec<u8>>,
}

/// Client→server direction of a flow.
type FlowKey = (SocketAddrV4, SocketAddrV4);

pub(crate) struct Tracker {
    policy: Policy,
    subnet: [u8; 3],
    hosts: u8,
    start: Instant,
    flows: HashMap<FlowKey, usize>,
    conns: Vec<Conn>,
    pair_counts: BTreeMap<(u8, u8), u32>,
    waiting_next: BTreeMap<(u8, u8, u32), usize>,
    deadlines: BinaryHeap<Reverse<(Instant, usize)>>,
    report: WireReport,
    capture: bool,
}

impl Tracker {
    /// A tracker for hosts `subnet.1 ..= subnet.hosts`.
    pub fn new(policy: Policy, subnet: [u8; 3], hosts: u8, start: Instant) -> Self {
        Tracker {
            policy,
            subnet,
            hosts,
            start,
            flows: HashMap::new(),
            conns: Vec::new(),
            pair_counts: BTreeMap::new(),
            waiting_next: BTreeMap::new(),
            deadlines: BinaryHeap::new(),
            report: WireReport::default(),
            capture: false,
        }
    }

    /// Also records every connection's client-to-server bytes (conformance checks).
    pub fn capturing(mut self) -> Self {
        self.capture = true;
        self
    }

    fn host_of(&self, addr: Ipv4Addr) -> Option<u8> {
        let [a, b, c, d] = addr.octets();
        ([a, b, c] == self.subnet && (1..=self.hosts).contains(&d)).then_some(d)
    }

    /// Handles one packet read from a host; pushes what to write, in order, onto `out`.
    pub fn on_packet(&mut self, now: Instant, packet: Vec<u8>, out: &mut Vec<Delivery>) {
        self.report.counters.packets_in += 1;
        let meta = match parse(&packet) {
            Ok(meta) => meta,
            Err(ParseError::NotIpv4(_)) => {
                self.report.counters.dropped_not_ipv4 += 1;
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e, "wire: dropping packet");
                self.report.counters.dropped_malformed += 1;
                return;
            }
        };
        let Some(to) = self.host_of(meta.dst) else {
            tracing::trace!(dst = %meta.dst, "wire: dropping unroutable packet");
            self.report.counters.dropped_unroutable += 1;
            return;
        };
        let Some(tcp) = meta.tcp else {
            return self.forward(to, packet, out);
        };
        let key = (SocketAddrV4::new(meta.src, tcp.src_port), SocketAddrV4::new(meta.dst, tcp.dst_port));
        let known = self.flows.get(&key).copied();
        if tcp.syn && !tcp.ack {
            if known.is_none_or(|c| self.conns[c].info.isn != tcp.seq) {
                let src_host = self.host_of(meta.src).unwrap_or(0);
                self.open(now, key, src_host, to, tcp.seq);
            }
            return self.forward(to, packet, out);
        }
        let Some(c) = known else {
            return self.forward(to, packet, out);
        };
        if self.capture && tcp.payload_len > 0 {
            let conn = &mut self.conns[c];
            let at = tcp.seq.wrapping_sub(conn.info.isn.wrapping_add(1));
            let end = (tcp.payload_offset + tcp.payload_len).min(packet.len());
            if let Some(bytes) = packet.get(tcp.payload_offset..end) {
                conn.segments.entry(at).or_insert_with(|| bytes.to_vec());
            }
        }
        match self.conns[c].state {
            State::Open => self.forward(to, packet, out),
            State::Held => {
                self.report.counters.held += 1;
                self.conns[c].held.push(packet);
            }
            State::Opening if tcp.syn => self.forward(to, packet, out),
            State::Opening => self.complete(now, c, packet, out),
        }
    }

    /// Releases connections whose hold has run out.
    pub fn on_timer(&mut self, now: Instant, out: &mut Vec<Delivery>) {
        while let Some(&Reverse((at, c))) = self.deadlines.peek() {
            if at > now {
                break;
            }
            self.deadlines.pop();
            if self.conns[c].state == State::Held {
                self.release(now, c, ReleaseReason::Deadline, out);
            }
        }
    }

    /// The earliest pending release time, if any connection is held.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.peek().map(|Reverse((at, _))| *at)
    }

    /// Drops whatever is still held and returns the run's record.
    pub fn finish(mut self, now: Instant) -> WireReport {
        for c in 0..self.conns.len() {
            if self.conns[c].state == State::Held {
                let packets = std::mem::take(&mut self.conns[c].held).len();
                self.report.counters.dropped_at_shutdown += packets as u64;
                self.record(now, c, WireEvent::DroppedAtShutdown { packets: packets as u32 });
            }
        }
        self.report.connections = self.conns.len() as u32;
        if self.capture {
            self.report.streams =
                self.conns.iter().map(|c| CapturedStream { flow: c.info, bytes: reassemble(&c.segments) }).collect();
        }
        self.report
    }

    /// Adds counters the I/O side keeps.
    pub fn count_write_error(&mut self) {
        self.report.counters.write_errors += 1;
    }

    fn forward(&mut self, to: u8, packet: Vec<u8>, out: &mut Vec<Delivery>) {
        self.report.counters.forwarded += 1;
        out.push(Delivery { to, packet });
    }

    fn open(&mut self, now: Instant, key: FlowKey, src_host: u8, dst_host: u8, isn: u32) {
        let counter = self.pair_counts.entry((src_host, dst_host)).or_default();
        let info = FlowInfo {
            conn: self.conns.len() as u32,
            pair_conn: *counter,
            src_host,
            dst_host,
            src: key.0,
            dst: key.1,
            isn,
        };
        *counter += 1;
        let plan = self.policy.plan(&info);
        self.flows.insert(key, self.conns.len());
        self.conns.push(Conn {
            info,
            plan,
            state: State::Opening,
            held: Vec::new(),
            held_since: None,
            segments: BTreeMap::new(),
        });
        self.record(now, self.conns.len() - 1, WireEvent::Opened);
    }

    fn complete(&mut self, now: Instant, c: usize, packet: Vec<u8>, out: &mut Vec<Delivery>) {
        let (delay, until_next) = match self.conns[c].plan {
            HoldPlan::Pass => {
                self.conns[c].state = State::Open;
                self.forward(self.conns[c].info.dst_host, packet, out);
                self.record(now, c, WireEvent::Passed);
                return self.completed(now, c, out);
            }
            HoldPlan::For(d) => (d, false),
            HoldPlan::UntilNext(d) => (d, true),
        };
        let delay = delay.min(MAX_DELAY);
        let conn = &mut self.conns[c];
        conn.state = State::Held;
        conn.held.push(packet);
        conn.held_since = Some(now);
        if until_next {
            let i = conn.info;
            self.waiting_next.insert((i.src_host, i.dst_host, i.pair_conn), c);
        }
        let at = now.checked_add(delay).unwrap_or(now + Duration::from_secs(1));
        self.deadlines.push(Reverse((at, c)));
        self.report.counters.held += 1;
        self.record(now, c, WireEvent::Held { delay_us: delay.as_micros() as u64, until_next });
    }

    /// Connection `c`'s completing packet has just been forwarded: release the
    /// release-on-next connections before it on its pair, oldest first.
    fn completed(&mut self, now: Instant, c: usize, out: &mut Vec<Delivery>) {
        let i = self.conns[c].info;
        let earlier: Vec<usize> = self
            .waiting_next
            .range((i.src_host, i.dst_host, 0)..(i.src_host, i.dst_host, i.pair_conn))
            .map(|(_, &e)| e)
            .collect();
        for e in earlier {
            if self.conns[e].state == State::Held {
                self.release(now, e, ReleaseReason::NextCompleted { by_conn: i.conn }, out);
            }
        }
    }

    fn release(&mut self, now: Instant, c: usize, reason: ReleaseReason, out: &mut Vec<Delivery>) {
        let conn = &mut self.conns[c];
        conn.state = State::Open;
        let packets = std::mem::take(&mut conn.held);
        let held_us = conn.held_since.map_or(0, |t| now.saturating_duration_since(t).as_micros() as u64);
        let (i, to) = (conn.info, conn.info.dst_host);
        self.waiting_next.remove(&(i.src_host, i.dst_host, i.pair_conn));
        let n = packets.len() as u32;
        for p in packets {
            self.forward(to, p, out);
        }
        self.record(now, c, WireEvent::Released { reason, packets: n, held_us });
        self.completed(now, c, out);
    }

    fn record(&mut self, now: Instant, c: usize, event: WireEvent) {
        let flow = self.conns[c].info;
        tracing::debug!(
            conn = flow.conn,
            pair_conn = flow.pair_conn,
            src = %flow.src,
            dst = %flow.dst,
            ?event,
            "wire decision"
        );
        self.report.decisions.push(WireDecision {
            at_us: now.saturating_duration_since(self.start).as_micros() as u64,
            flow,
            event,
        });
    }
}

/// Joins captured segments in sequence order; a retransmission adds only what is new, and a
/// gap ends the stream (nothing after it can be placed).
fn reassemble(segments: &BTreeMap<u32, Vec<u8>>) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::new();
    for (&at, bytes) in segments {
        let at = at as usize;
        if at > out.len() {
            break;
        }
        let end = at + bytes.len();
        if end > out.len() {
            out.extend_from_slice(&bytes[out.len() - at..]);
        }
    }
    out
}
