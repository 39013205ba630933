//! The packet agenda: the path between hosts (link latency (FIFO per connection and direction), loss at the
//! receiving NIC, the RSS-chosen RX queue and its softirq, all ordered by (time, seq)).

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use bootsim_core::Instant;
use rand_chacha::ChaCha8Rng;

use super::config::{KernelConfig, StallAt};
use super::cpus::Cpus;
use super::events::{Dir, EventKind, Flow, HostId, KernelEvent, KernelStats, Seg};
use super::loss::{GilbertElliott, LossParams};
use super::napi::{LoadParams, Loaded, Via};
use super::rng::{self, Purpose};
use super::rss::Rss;
use super::softirq::{nanos, Admitted, RxQueue, StallParams};
use super::wheel::{Timed, Wheel};
use crate::spare::emptied;

/// iperf3's default port, the flood's destination.
const IPERF3_PORT: u16 = 5201;

/// How many of the flood's flows land on each of `host`'s CPUs: flow `i` comes from host
/// address `0xff0000 + i` (outside the cluster) on a seeded source port; RSS puts it on a
/// queue, whose CPU does its work, or with RPS that CPU steers it to a backlog by its hash.
fn flood_flows_per_cpu(cfg: &KernelConfig, rss: &Rss, cpus: &Cpus, seed: u64, host: u32) -> Vec<u32> {
    let mut per = vec![0u32; usize::from(cpus.count())];
    if cfg.load.flood_rate == 0 {
        return per;
    }
    let mut r = rng::stream(seed, Purpose::Flood, host, 0);
    for i in 0..cfg.load.flood_flows {
        let port = EPHEMERAL.0 + rng::below(&mut r, u64::from(EPHEMERAL.1 - EPHEMERAL.0) + 1) as u16;
        let src = 0x00ff_0000 + i;
        let cpu = if cpus.rps {
            cpus.rps_target(rss.hash(src, port, host, IPERF3_PORT))
        } else {
            cpus.of_queue(rss.queue(src, port, host, IPERF3_PORT))
        };
        per[usize::from(cpu)] += 1;
    }
    per
}

/// A packet's softirq costs in nanoseconds, worked out once from the config (a packet converted
/// its `Duration`s on every arrival).
#[derive(Clone, Copy, Debug)]
struct Costs {
    /// `service`: the NIC's part, all of an arrival's with RPS.
    service: u64,
    /// The TCP work of each kind of segment ([`Costs::kind`]) (with RPS, done on the backlog's
    /// CPU).
    tcp: [u64; 3],
    /// `service` plus the TCP work, each kind.
    full: [u64; 3],
}

impl Costs {
    fn new(cfg: &KernelConfig) -> Costs {
        let tcp = [cfg.load.syn_cost, cfg.load.ack_cost, cfg.load.data_cost];
        Costs {
            service: nanos(cfg.service),
            tcp: tcp.map(nanos),
            full: tcp.map(|t| nanos(cfg.service.saturating_add(t))),
        }
    }

    /// The index of `seg`'s kind in [`Costs::tcp`] and [`Costs::full`].
    fn kind(seg: Seg) -> usize {
        match seg {
            Seg::Syn | Seg::SynAck => 0,
            Seg::Ack | Seg::DataAck { .. } | Seg::Rst => 1,
            Seg::Data { .. } | Seg::Fin { .. } => 2,
        }
    }

    /// Softirq time of a packet on its RX queue: with RPS `service` only, else `service` plus
    /// the TCP work of its kind.
    fn arrival(&self, rps: bool, seg: Seg) -> u64 {
        if rps {
            self.service
        } else {
            self.full[Self::kind(seg)]
        }
    }
}

/// First and last Linux ephemeral port (`ip_local_port_range` default).
const EPHEMERAL: (u16, u16) = (32768, 60999);

/// One host's NIC state (its softirq servers are [`Net::servers`]).
#[derive(Clone, Debug)]
pub(crate) struct Host {
    pub(crate) rss: Rss,
    next_port: u16,
    loss: GilbertElliott,
    jitter: ChaCha8Rng,
}

/// A packet in flight: which connection, which way, what, and where it lands: the receiving
/// host and that host's RX queue for the flow (fixed per connection and direction, carried so
/// the NIC path need not look the connection up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pkt {
    pub(crate) conn: u64,
    pub(crate) host: u32,
    pub(crate) queue: u16,
    pub(crate) dir: Dir,
    pub(crate) seg: Seg,
}

/// Something due at a given time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Work {
    /// The packet reaches the receiving host's NIC.
    Arrive(Pkt),
    /// RPS steered the packet to CPU `cpu`'s backlog.
    Backlog { pkt: Pkt, cpu: u16 },
    /// The receiving host's softirq finished with the packet: TCP handles it.
    Deliver(Pkt),
    /// A connection side's retransmission timer (stale if `gen` moved on).
    Timer { conn: u64, side: u8, gen: u32 },
}

/// An agenda entry handed out by [`Net::pop_next`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Due {
    /// [`Work::Deliver`] of a packet: its connection, direction and segment (its host and
    /// queue only for the tests' [`Net::pop_due`]).
    Deliver {
        conn: u64,
        dir: Dir,
        seg: Seg,
        #[cfg_attr(not(test), allow(dead_code))]
        host: u32,
        #[cfg_attr(not(test), allow(dead_code))]
        queue: u16,
    },
    /// Anything else.
    Work(Work),
}

/// The key of an agenda entry: (time in ns, sequence number) as one integer, high half the
/// time, so ordering by it is ordering by (time, seq), in one comparison.
fn key(at: Instant, seq: u64) -> u128 {
    u128::from(at.as_nanos()) << 64 | u128::from(seq)
}

/// [`Net::next_timer`] when there is no timer: above every timer's key (whose sequence number
/// has 47 bits, [`TimerEntry::new`]).
const NO_TIMER: u128 = u128::MAX;

/// A retransmission timer's agenda entry ([`Work::Timer`] with its key) in 24 bytes (the key and
/// a [`Work`] took 48, a `u128` key and the timer's fields 32): the wheel writes each once when
/// it is filed and reads it once when its bucket comes due, long after, from memory (a fifth of
/// the read misses at 256 ranks), so a chunk of 16 is 392 bytes, not 528. The first two words
/// order it: its time, then its sequence number (below 2^47), side and the connection's high 16
/// bits; the third holds the connection's low 32 bits and the generation.
#[derive(Clone, Copy, Debug)]
struct TimerEntry {
    at: u64,
    seq_side: u64,
    conn_gen: u64,
}

const _: () = assert!(std::mem::size_of::<TimerEntry>() == 24);

impl TimerEntry {
    /// Bits below the sequence number in `seq_side`: the side, the connection's high 16.
    const SEQ_SHIFT: u32 = 17;

    fn new(key: u128, conn: u64, side: u8, gen: u32) -> TimerEntry {
        let seq = key as u64;
        // Out of reach (2^47 entries scheduled is months of simulation at any speed), but a
        // wrapped number would misorder timers silently: stop with the reason instead.
        assert!(seq < 1 << (64 - Self::SEQ_SHIFT), "the agenda's {seq}th entry: a timer keeps its number in 47 bits");
        debug_assert!(conn < 1 << 48 && side < 2);
        TimerEntry {
            at: (key >> 64) as u64,
            seq_side: seq << Self::SEQ_SHIFT | u64::from(side) << 16 | conn >> 32,
            conn_gen: conn << 32 | u64::from(gen),
        }
    }

    /// Its [`key`].
    fn key(&self) -> u128 {
        u128::from(self.at) << 64 | u128::from(self.seq_side >> Self::SEQ_SHIFT)
    }

    /// The timer it stands for.
    fn work(&self) -> Work {
        Work::Timer {
            conn: (self.seq_side & 0xffff) << 32 | self.conn_gen >> 32,
            side: (self.seq_side >> 16 & 1) as u8,
            gen: self.conn_gen as u32,
        }
    }
}

impl Timed for TimerEntry {
    fn at_ns(&self) -> u64 {
        self.at
    }
}

impl PartialEq for TimerEntry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq_side) == (other.at, other.seq_side)
    }
}
impl Eq for TimerEntry {}
impl PartialOrd for TimerEntry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for TimerEntry {
    /// By (time, sequence number), as [`key`]: sequence numbers are unique.
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq_side).cmp(&(other.at, other.seq_side))
    }
}

/// A packet's agenda work (arrival, backlog, delivery) in 16 bytes, so that an entry of the
/// packet heap, with its 16-byte key, is 32 bytes, two to a cache line (a [`Work`] is 32 bytes
/// alone, its entry 48): thousands are in flight at 1024 ranks and every push and pop moves
/// one entry per level of the heap.
#[derive(Clone, Copy, Debug)]
struct PackedPkt {
    /// The connection (low 48 bits) and, for a backlog entry, the CPU (high 16).
    conn_cpu: u64,
    /// The segment's number (`Data`, `Fin`) or acknowledgement (`DataAck`), else 0.
    num: u32,
    /// The receiving host (at most 65 536 hosts: `Case::parse` bounds the ranks).
    host: u16,
    /// Its RX queue (at most 128, `Net::new`).
    queue: u8,
    /// The work's kind (bits 0-1), the direction (bit 2) and the segment's kind (bits 3-5).
    bits: u8,
}

impl PackedPkt {
    const CONN_BITS: u32 = 48;

    /// `work`, which is not a timer, packed (inlined: its kind is mostly known where it is
    /// called, and the match on it folds away).
    #[inline(always)]
    fn pack(work: Work) -> PackedPkt {
        let (kind, pkt, cpu) = match work {
            Work::Arrive(pkt) => (0u8, pkt, 0u16),
            Work::Backlog { pkt, cpu } => (1, pkt, cpu),
            Work::Deliver(pkt) => (2, pkt, 0),
            Work::Timer { .. } => unreachable!("timers wait on the wheel"),
        };
        let (seg, num) = match pkt.seg {
            Seg::Syn => (0u8, 0),
            Seg::SynAck => (1, 0),
            Seg::Ack => (2, 0),
            Seg::Data { idx } => (3, idx),
            Seg::Fin { idx } => (4, idx),
            Seg::DataAck { upto } => (5, upto),
            Seg::Rst => (6, 0),
        };
        debug_assert!(pkt.conn < 1 << Self::CONN_BITS && pkt.host <= u32::from(u16::MAX) && pkt.queue <= 0xff);
        let dir = match pkt.dir {
            Dir::ToServer => 0u8,
            Dir::ToClient => 1,
        };
        PackedPkt {
            conn_cpu: pkt.conn | u64::from(cpu) << Self::CONN_BITS,
            num,
            host: pkt.host as u16,
            queue: pkt.queue as u8,
            bits: kind | dir << 2 | seg << 3,
        }
    }

    /// Whether it is a delivery ([`Work::Deliver`]).
    #[inline(always)]
    fn is_delivery(self) -> bool {
        self.bits & 3 == 2
    }

    /// The connection.
    #[inline(always)]
    fn conn(self) -> u64 {
        self.conn_cpu & ((1 << Self::CONN_BITS) - 1)
    }

    /// The direction.
    #[inline(always)]
    fn dir(self) -> Dir {
        if self.bits & 4 == 0 {
            Dir::ToServer
        } else {
            Dir::ToClient
        }
    }

    /// The segment.
    #[inline(always)]
    fn seg(self) -> Seg {
        let num = self.num;
        match self.bits >> 3 {
            0 => Seg::Syn,
            1 => Seg::SynAck,
            2 => Seg::Ack,
            3 => Seg::Data { idx: num },
            4 => Seg::Fin { idx: num },
            5 => Seg::DataAck { upto: num },
            _ => Seg::Rst,
        }
    }

    /// The work packed.
    #[inline(always)]
    fn unpack(self) -> Work {
        let pkt = Pkt {
            conn: self.conn(),
            host: u32::from(self.host),
            queue: u16::from(self.queue),
            dir: self.dir(),
            seg: self.seg(),
        };
        match self.bits & 3 {
            0 => Work::Arrive(pkt),
            1 => Work::Backlog { pkt, cpu: (self.conn_cpu >> Self::CONN_BITS) as u16 },
            _ => Work::Deliver(pkt),
        }
    }
}

// Two entries to a cache line.
const _: () = assert!(std::mem::size_of::<PktEntry>() == 32);

/// An entry of the packet heap: its [`key`], its work packed.
#[derive(Clone, Copy, Debug)]
struct PktEntry {
    key: u128,
    pkt: PackedPkt,
}

impl PartialEq for PktEntry {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl Eq for PktEntry {}
impl PartialOrd for PktEntry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for PktEntry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key)
    }
}

/// One of the agenda's two heaps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lane {
    Packets,
    Timers,
}

/// Everything but the sockets: hosts, the agenda, the event outbox and counters.
#[derive(Debug)]
pub(crate) struct Net {
    pub(crate) cfg: KernelConfig,
    stall: StallParams,
    loss: LossParams,
    latency_ns: u64,
    jitter_ns: u64,
    /// A packet's RX-queue admission is decided when it is sent (one agenda entry a packet,
    /// its delivery), not when it reaches the NIC: every config but those with RPS or the
    /// load-dependent queue (see [`Net::transmit`]); scripted stalls' `pN` count packets in
    /// that order too, as the traced runs the shrinker reads them from do.
    admit_on_transmit: bool,
    costs: Costs,
    /// Packets in flight (short-lived, dense).
    agenda: BinaryHeap<Reverse<PktEntry>>,
    /// Retransmission timers (long, mostly stale by the time they fire); kept apart so the
    /// packet heap stays small. Both heaps share one sequence counter.
    timers: Wheel<TimerEntry>,
    /// The key of the wheel's earliest timer, [`NO_TIMER`] if it holds none: asked for every
    /// entry handed out, so kept as the wheel changes rather than read from its top each time.
    next_timer: u128,
    seq: u64,
    /// The heap whose top entry [`Net::pop_next`] handed out and has not yet removed.
    taken: Option<Lane>,
    /// When that entry was due: nothing may be scheduled before it while it is handled, or
    /// the entry removed after would not be the one handed out.
    taken_at: Instant,
    /// Steps the loaded model's walks took so far on all RX queues (kept as they are made, not
    /// summed over every queue when asked: the engine asks often; the busy periods count
    /// themselves in `stall`).
    walked: u64,
    pub(crate) hosts: Vec<Host>,
    /// Which CPU polls which RX queue, and RPS: the same layout on every host.
    cpus: Cpus,
    /// One softirq server per CPU of each host, shared by the RX queues it polls and its
    /// backlog: host `h`'s CPU `c` at `h * cpus.count() + c`, one dense table (a packet's
    /// path touches its server, not its host's record first).
    servers: Vec<RxQueue>,
    pub(crate) events: VecDeque<KernelEvent>,
    /// Send buffers of drained streams, kept for the next stream's first write (a connection
    /// per message otherwise grew a fresh buffer from nothing, frame by frame).
    pub(crate) spare_bufs: SpareBufs,
    /// Something a driver could act on happened since it was last cleared: an application
    /// event, or a child joined an accept queue (a scheduled accept may be waiting for it).
    pub(crate) observable: bool,
    pub(crate) stats: KernelStats,
}

/// Drained send buffers for reuse: at most [`SpareBufs::KEEP`], each of at most
/// [`SpareBufs::MAX_BYTES`] capacity, so the pool holds 4 MiB at worst.
#[derive(Debug, Default)]
pub(crate) struct SpareBufs(Vec<Vec<u8>>);

impl SpareBufs {
    const KEEP: usize = 64;
    pub(crate) const MAX_BYTES: usize = 64 << 10;

    /// An empty buffer, with room if one was kept.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        self.0.pop().unwrap_or_default()
    }

    /// Keep `buf`'s room for a later [`SpareBufs::take`] (or free it).
    pub(crate) fn give(&mut self, mut buf: Vec<u8>) {
        if self.0.len() < Self::KEEP && (1..=Self::MAX_BYTES).contains(&buf.capacity()) {
            buf.clear();
            self.0.push(buf);
        }
    }
}

/// What a kernel's network leaves to the next one made on this thread: its containers,
/// emptied, with their room (a 2-rank run grew them from nothing, and made and dropped the
/// timer wheel's 4 096 slots, an eighth of its instructions).
#[derive(Default)]
struct Spare {
    wheel: Option<Wheel<TimerEntry>>,
    agenda: Vec<Reverse<PktEntry>>,
    hosts: Vec<Host>,
    servers: Vec<RxQueue>,
    events: VecDeque<KernelEvent>,
    bufs: SpareBufs,
}

thread_local! {
    /// The containers of this thread's last kernel, emptied.
    static SPARE: std::cell::Cell<Option<Spare>> = const { std::cell::Cell::new(None) };
}

impl Drop for Net {
    /// Hands the containers, emptied, to the next kernel on this thread.
    fn drop(&mut self) {
        let mut wheel = std::mem::replace(&mut self.timers, Wheel::placeholder());
        wheel.clear();
        let spare = Spare {
            wheel: Some(wheel),
            agenda: emptied(std::mem::take(&mut self.agenda).into_vec()),
            hosts: emptied(std::mem::take(&mut self.hosts)),
            servers: emptied(std::mem::take(&mut self.servers)),
            events: emptied(std::mem::take(&mut self.events)),
            bufs: std::mem::take(&mut self.spare_bufs),
        };
        // At thread exit the slot may be gone already: the containers are then simply dropped.
        let _ = SPARE.try_with(|s| s.set(Some(spare)));
    }
}

impl Net {
    pub(crate) fn new(cfg: KernelConfig, seed: u64, hosts: u32) -> Net {
        // A packet's host and queue are packed into 16 and 8 bits (`PackedPkt`); the case's
        // bounds (ranks ≤ 65 536, rx_queues ≤ 128) keep them there, checked once here.
        assert!(hosts <= 1 << 16, "{hosts} hosts: a packet names its host in 16 bits");
        let streams = rng::Streams::new(seed);
        let stall = StallParams::new(&cfg, &streams);
        let loss = LossParams::new(&cfg);
        let queues = cfg.rx_queues.clamp(1, 128);
        let cpus = Cpus::new(&cfg, queues);
        let Spare { wheel, agenda, hosts: mut all, mut servers, events, bufs } = SPARE.take().unwrap_or_default();
        servers.reserve(hosts as usize * usize::from(cpus.count()));
        all.extend((0..hosts).map(|h| {
            let mut setup = streams.get(Purpose::Setup, h, 0);
            let rss = Rss::new(&mut setup, queues);
            let span = u64::from(EPHEMERAL.1 - EPHEMERAL.0) + 1;
            let next_port = EPHEMERAL.0 + rng::below(&mut setup, span) as u16;
            let flood =
                if cfg.load.queue_model_on() { flood_flows_per_cpu(&cfg, &rss, &cpus, seed, h) } else { Vec::new() };
            for q in 0..cpus.count() {
                servers.push(RxQueue::new(&stall, h, q));
                let rx = servers.last_mut().expect("a server was just pushed");
                // A scripted stall of a queue takes its CPU.
                let (mut script, mut kicks) = (Vec::new(), Vec::new());
                for s in cfg.stalls.iter().filter(|s| s.host == h && cpus.of_queue(s.queue) == q) {
                    match s.at {
                        StallAt::Time(t) => script.push((t, t.saturating_add(s.dur))),
                        StallAt::Packet(n) => kicks.push((n, s.dur)),
                    }
                }
                rx.set_script(script, kicks);
                if cfg.load.queue_model_on() {
                    let flows = flood[usize::from(q)];
                    rx.set_loaded(Loaded::new(LoadParams::new(&cfg, flows, cpus.rings_of(q))));
                }
            }
            Host {
                rss,
                next_port,
                loss: GilbertElliott::new(streams.get(Purpose::Loss, h, 0)),
                jitter: streams.get(Purpose::Jitter, h, 0),
            }
        }));
        let admit_on_transmit = !cfg.load.queue_model_on() && !cpus.rps;
        Net {
            admit_on_transmit,
            latency_ns: nanos(cfg.latency),
            jitter_ns: nanos(cfg.jitter),
            costs: Costs::new(&cfg),
            cfg,
            stall,
            loss,
            agenda: BinaryHeap::from(agenda),
            timers: wheel.filter(Wheel::has_ring).unwrap_or_default(),
            next_timer: NO_TIMER,
            seq: 0,
            taken: None,
            taken_at: Instant::ZERO,
            walked: servers.iter().filter_map(RxQueue::walk_steps).sum(),
            hosts: all,
            cpus,
            servers,
            events,
            spare_bufs: bufs,
            observable: false,
            stats: KernelStats::default(),
        }
    }

    /// Put `work` on the agenda at `at` (ties run in scheduling order).
    #[inline]
    pub(crate) fn schedule(&mut self, at: Instant, work: Work) {
        let key = self.next_key(at);
        if let Work::Timer { conn, side, gen } = work {
            self.timers.push(TimerEntry::new(key, conn, side, gen));
            self.next_timer = self.timers.peek().map_or(NO_TIMER, TimerEntry::key);
            return;
        }
        self.push_packet(key, PackedPkt::pack(work));
    }

    /// Put a packet's work, packed, on the agenda at `at` (as [`Net::schedule`]; the packet path
    /// packs its work where its kind is known, not through a [`Work`]).
    fn schedule_packet(&mut self, at: Instant, pkt: PackedPkt) {
        let key = self.next_key(at);
        self.push_packet(key, pkt);
    }

    /// The key of the next entry scheduled at `at`: both heaps share one sequence counter, so
    /// ties at one instant run in scheduling order.
    #[inline(always)]
    fn next_key(&mut self, at: Instant) -> u128 {
        debug_assert!(self.taken.is_none() || at >= self.taken_at, "scheduled at {at}, before the entry handled");
        self.seq += 1;
        key(at, self.seq)
    }

    /// File a packet's entry of key `key` in the packet heap.
    #[inline(always)]
    fn push_packet(&mut self, key: u128, pkt: PackedPkt) {
        let entry = PktEntry { key, pkt };
        if self.taken == Some(Lane::Packets) {
            // The packet being handled is still at the top of its heap: the new one takes its
            // place, one sift down from the top (usually short: new entries are due soon)
            // instead of a pop to the bottom and a push back up.
            self.taken = None;
            if let Some(mut top) = self.agenda.peek_mut() {
                *top = Reverse(entry);
                return;
            }
        }
        self.agenda.push(Reverse(entry));
    }

    /// Remove the entry handed out by [`Net::pop_next`] if nothing took its place.
    fn settle(&mut self) {
        match self.taken.take() {
            Some(Lane::Packets) => drop(self.agenda.pop()),
            Some(Lane::Timers) => {
                self.timers.pop();
                self.next_timer = self.timers.peek().map_or(NO_TIMER, TimerEntry::key);
            }
            None => {}
        }
    }

    /// The earliest entry overall, by (time, seq): its key and where it is.
    fn earliest(&self) -> Option<(u128, Lane)> {
        let t = self.next_timer;
        match self.agenda.peek() {
            Some(Reverse(a)) if a.key <= t => Some((a.key, Lane::Packets)),
            _ => (t != NO_TIMER).then_some((t, Lane::Timers)),
        }
    }

    /// Time of the earliest agenda entry.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        debug_assert!(self.taken.is_none(), "asked for the next entry while one is being handled");
        self.earliest().map(|(key, _)| Instant::from_nanos((key >> 64) as u64))
    }

    /// Take the earliest agenda entry if it is due at or before `now`. It stays in its queue
    /// while it is handled (the next packet scheduled replaces a packet); the next call
    /// removes it if nothing did, so call this until it returns `None`.
    #[cfg(test)]
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, Work)> {
        self.pop_next(now).map(|(at, due)| match due {
            Due::Deliver { conn, dir, seg, host, queue } => (at, Work::Deliver(Pkt { conn, host, queue, dir, seg })),
            Due::Work(work) => (at, work),
        })
    }

    /// [`Net::pop_due`], a delivery (the packet path's entry, most of them) as only what TCP
    /// reads of it, never made into a [`Work`] and matched again.
    #[inline]
    pub(crate) fn pop_next(&mut self, now: Instant) -> Option<(Instant, Due)> {
        self.settle();
        let (key, lane) = self.earliest()?;
        let at = Instant::from_nanos((key >> 64) as u64);
        if at > now {
            return None;
        }
        let due = match lane {
            Lane::Packets => {
                let Reverse(e) = self.agenda.peek()?;
                let p = e.pkt;
                if p.is_delivery() {
                    let (host, queue) = (u32::from(p.host), u16::from(p.queue));
                    Due::Deliver { conn: p.conn(), dir: p.dir(), seg: p.seg(), host, queue }
                } else {
                    Due::Work(p.unpack())
                }
            }
            Lane::Timers => Due::Work(self.timers.peek()?.work()),
        };
        self.taken = Some(lane);
        self.taken_at = at;
        Some((at, due))
    }

    /// Busy periods the RX queues' stall model generated, and the steps its walks took, so far
    /// (its work).
    pub(crate) fn stall_periods(&self) -> u64 {
        self.stall.periods() + self.walked
    }

    /// Counters so far, with the queues' deferred polls.
    pub(crate) fn stats(&self) -> KernelStats {
        let napi_deferrals = self.servers.iter().map(RxQueue::deferrals).sum();
        KernelStats { napi_deferrals, ..self.stats }
    }

    /// Report an application event.
    pub(crate) fn emit(&mut self, at: Instant, kind: EventKind) {
        self.observable = true;
        self.events.push_back(KernelEvent { at, kind });
    }

    /// Report a trace event, if tracing is on.
    pub(crate) fn trace(&mut self, at: Instant, kind: EventKind) {
        self.trace_with(at, || kind);
    }

    /// Report the trace event `kind` makes, if tracing is on (made only then).
    fn trace_with(&mut self, at: Instant, kind: impl FnOnce() -> EventKind) {
        if self.cfg.trace {
            self.events.push_back(KernelEvent { at, kind: kind() });
        }
    }

    /// The next ephemeral port of `host` (sequential from a seeded start, wrapping).
    pub(crate) fn ephemeral_port(&mut self, host: u32) -> u16 {
        let h = &mut self.hosts[host as usize];
        let port = h.next_port;
        h.next_port = if port >= EPHEMERAL.1 { EPHEMERAL.0 } else { port + 1 };
        port
    }

    /// Put a packet on the wire at `now` from `from_host`. `last_arrival` is the connection's
    /// latest arrival in this direction: the packet cannot overtake it.
    ///
    /// Its NIC's part ([`Net::arrive`]: loss, RX-queue admission, the stall it waits behind) is
    /// decided here, for the time it will arrive, so a packet is one agenda entry, its delivery
    /// (issue #28 item 4; until 27b7073 an arrival entry decided it when due). What that changes:
    /// an RX queue serves its packets in the order they were sent, not the order they arrive, so
    /// a packet that overtakes another by at most the jitter (2 µs under `rss`) waits behind
    /// the one it overtook; the loss chain and a queue's stall draws are asked in that order (each at
    /// the packet's arrival time, a chain or queue already past it answering from its present
    /// state); a packet of a connection forgotten while it flies still takes its queue's time;
    /// ties at one instant run in sending order. The queue is still a FIFO server with the same
    /// service and stall law, so the verdict rates hold (`sim/tests/verdict_equivalence.rs`).
    /// Its loss or stall is counted and traced now, stamped `now` (the trace stays in time
    /// order; the record's fields say when it waits): a packet still flying when the run ends
    /// is counted too, and the engines trace every record the run's last calls made (the fast
    /// engine's `finish`, turmoil's `Gate::trace_left`). RPS and the load-dependent queue keep the arrival entry
    /// (NAPI's budget, the ring and the application's CPU share a clock that must not run
    /// ahead), and with it their traces and counters.
    pub(crate) fn transmit(&mut self, now: Instant, from_host: u32, last_arrival: &mut Instant, pkt: Pkt, flow: Flow) {
        self.stats.packets += 1;
        let mut lat = self.latency_ns;
        if self.jitter_ns > 0 {
            let j = &mut self.hosts[from_host as usize].jitter;
            lat += rng::below(j, self.jitter_ns + 1);
        }
        // `now + Duration::from_nanos(lat)` without the round trip through seconds.
        let at = (*last_arrival).max(Instant::from_nanos(now.as_nanos().saturating_add(lat)));
        *last_arrival = at;
        if self.admit_on_transmit {
            self.arrive_stamped(at, now, pkt, || flow);
        } else {
            self.schedule_packet(at, PackedPkt::pack(Work::Arrive(pkt)));
        }
    }

    /// The packet reaches its host's NIC at `at`: it is lost, or waits for its RX queue's
    /// softirq and is delivered to TCP when processed (with RPS: steered to a CPU's backlog).
    /// `flow` is the packet's connection's, asked for only by a trace record or RPS's hash.
    pub(crate) fn arrive(&mut self, at: Instant, pkt: Pkt, flow: impl Fn() -> Flow) {
        self.arrive_stamped(at, at, pkt, flow);
    }

    /// [`Net::arrive`], its trace records stamped `stamp` (when it is decided: the trace stays
    /// in time order when that is at the packet's sending; their fields say when it arrives and
    /// waits).
    fn arrive_stamped(&mut self, at: Instant, stamp: Instant, pkt: Pkt, flow: impl Fn() -> Flow) {
        let (host, queue) = (pkt.host, pkt.queue);
        // Lossless (most profiles): the host's chain is not asked, nor its record touched.
        if !self.loss.is_lossless() && self.hosts[host as usize].loss.lose(&self.loss, at) {
            self.stats.lost += 1;
            let (dir, seg) = (pkt.dir, pkt.seg);
            self.trace_with(stamp, || EventKind::PacketLost { host: HostId(host), queue, flow: flow(), dir, seg });
            return;
        }
        let cpu = self.cpus.of_queue(queue);
        let rps = self.cpus.rps;
        let cost = self.costs.arrival(rps, pkt.seg);
        let Some(admitted) = self.on_server(host, cpu, |q, p| q.offer_ns(at, cost, p, Via::Ring)) else {
            self.stats.ring_drops += 1;
            let (dir, seg) = (pkt.dir, pkt.seg);
            self.trace_with(stamp, || EventKind::RingDrop { host: HostId(host), queue, flow: flow(), dir, seg });
            return;
        };
        let next = if rps {
            let (h, flow) = (&self.hosts[host as usize], flow());
            let hash = match pkt.dir {
                Dir::ToServer => h.rss.hash(flow.client.0, flow.client_port, flow.server.0, flow.server_port),
                Dir::ToClient => h.rss.hash(flow.server.0, flow.server_port, flow.client.0, flow.client_port),
            };
            PackedPkt::pack(Work::Backlog { pkt, cpu: self.cpus.rps_target(hash) })
        } else {
            PackedPkt::pack(Work::Deliver(pkt))
        };
        self.processed(at, stamp, pkt, flow, admitted, next);
    }

    /// RPS put the packet on CPU `cpu`'s backlog at `at`: dropped if the backlog is full
    /// (`netdev_max_backlog`), else delivered to TCP once that CPU's softirq has done its TCP
    /// work.
    pub(crate) fn backlog(&mut self, at: Instant, pkt: Pkt, cpu: u16, flow: impl Fn() -> Flow) {
        let cost = self.costs.tcp[Costs::kind(pkt.seg)];
        let Some(admitted) = self.on_server(pkt.host, cpu, |q, p| q.offer_ns(at, cost, p, Via::Backlog)) else {
            self.stats.cpu_backlog_drops += 1;
            let (host, dir, seg) = (HostId(pkt.host), pkt.dir, pkt.seg);
            self.trace_with(at, || EventKind::CpuBacklogDrop { host, cpu, flow: flow(), dir, seg });
            return;
        };
        self.processed(at, at, pkt, flow, admitted, PackedPkt::pack(Work::Deliver(pkt)));
    }

    /// When the application thread of `host`, runnable from `start`, has had `cost` of CPU on
    /// its core (`app_cpu`) at `now`, softirq taking precedence.
    pub(crate) fn app_done(&mut self, now: Instant, host: u32, start: Instant, cost: Duration) -> Instant {
        let cpu = self.cfg.load.cpu.app_cpu.min(self.cpus.count() - 1);
        self.on_server(host, cpu, |q, p| q.app_done(now, start, cost, p))
    }

    /// Run `f` on CPU `cpu`'s softirq server of `host`, counting the walk steps it takes (only
    /// a queue with something rare walks).
    #[inline]
    fn on_server<R>(&mut self, host: u32, cpu: u16, f: impl FnOnce(&mut RxQueue, &StallParams) -> R) -> R {
        let q = &mut self.servers[host as usize * usize::from(self.cpus.count()) + usize::from(cpu)];
        let Some(before) = q.walk_steps() else {
            // Nothing rare yet: a wrap of its arrival count may make it so, with no steps.
            return f(q, &self.stall);
        };
        let r = f(q, &self.stall);
        self.walked += q.walk_steps().unwrap_or(before) - before;
        r
    }

    /// A softirq server took the packet that arrived at `at`: count its wait, trace its
    /// stall (stamped `stamp`), and schedule what comes next when it is done.
    fn processed(
        &mut self,
        at: Instant,
        stamp: Instant,
        pkt: Pkt,
        flow: impl Fn() -> Flow,
        admitted: Admitted,
        next: PackedPkt,
    ) {
        self.stats.rx_wait_ns =
            self.stats.rx_wait_ns.saturating_add(admitted.done.saturating_since(at).as_nanos() as u64);
        if let Some((from, until)) = admitted.stall {
            self.stats.stalled += 1;
            self.trace_with(stamp, || EventKind::RxStall {
                host: HostId(pkt.host),
                queue: pkt.queue,
                flow: flow(),
                dir: pkt.dir,
                seg: pkt.seg,
                from,
                until,
                nth: admitted.nth,
            });
        }
        self.schedule_packet(admitted.done, next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_models_work_is_every_queues_work() {
        use rand_core::{Rng, SeedableRng};
        // Busy periods count themselves as they are made, walk steps per offer to a rare queue:
        // together every queue's work, under plain stalls and the load-dependent model.
        for name in ["rss", "load", "cpu"] {
            let mut net = Net::new(KernelConfig::profile(name).unwrap(), 1, 3);
            let flow = || Flow { client: HostId(0), client_port: 40_000, server: HostId(1), server_port: 5201 };
            let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(9);
            let mut at = 0;
            for i in 0..20_000u64 {
                at += r.next_u64() % 30_000;
                let seg = [Seg::Syn, Seg::Ack, Seg::Data { idx: 1 }][(i % 3) as usize];
                let (host, queue) = ((r.next_u64() % 3) as u32, (r.next_u64() % 8) as u16);
                net.arrive(Instant::from_nanos(at), Pkt { conn: i % 7, host, queue, dir: Dir::ToServer, seg }, flow);
                if i % 5 == 0 {
                    net.app_done(Instant::from_nanos(at), host, Instant::from_nanos(at), Duration::from_micros(30));
                }
            }
            let work: u64 = net.servers.iter().map(RxQueue::work).sum();
            assert_eq!(net.stall_periods(), work, "{name}");
            assert!(net.stall.periods() > 0, "{name}");
            assert_eq!(net.walked > 0, name != "rss", "{name}");
        }
    }

    #[test]
    fn a_packets_costs_in_nanoseconds_are_its_durations() {
        let mut cfg = KernelConfig::profile("load").unwrap();
        cfg.set("service", "1300ns").unwrap();
        let costs = Costs::new(&cfg);
        let segs = [
            Seg::Syn,
            Seg::SynAck,
            Seg::Ack,
            Seg::Data { idx: 3 },
            Seg::Fin { idx: 4 },
            Seg::DataAck { upto: 2 },
            Seg::Rst,
        ];
        for seg in segs {
            let tcp = match seg {
                Seg::Syn | Seg::SynAck => cfg.load.syn_cost,
                Seg::Ack | Seg::DataAck { .. } | Seg::Rst => cfg.load.ack_cost,
                Seg::Data { .. } | Seg::Fin { .. } => cfg.load.data_cost,
            };
            assert_eq!(costs.tcp[Costs::kind(seg)], tcp.as_nanos() as u64, "{seg:?}");
            assert_eq!(costs.arrival(false, seg), (cfg.service + tcp).as_nanos() as u64, "{seg:?}");
            assert_eq!(costs.arrival(true, seg), 1_300, "{seg:?}");
        }
        // Past u64 nanoseconds: saturated, as the queue's clock saturates.
        cfg.service = Duration::MAX;
        assert_eq!(Costs::new(&cfg).arrival(false, Seg::Syn), u64::MAX);
    }

    #[test]
    fn flood_flows_land_on_queues_by_the_hosts_rss_key() {
        let mut cfg = KernelConfig::profile("load").unwrap();
        cfg.set("flood_flows", "64").unwrap();
        let rss = Rss::new(&mut rng::stream(3, Purpose::Setup, 0, 0), 8);
        let per_cpu = |cfg: &KernelConfig| flood_flows_per_cpu(cfg, &rss, &Cpus::new(cfg, 8), 3, 0);
        let per = per_cpu(&cfg);
        assert_eq!(per.iter().sum::<u32>(), 64);
        assert!(per.iter().filter(|&&k| k > 0).count() >= 6, "{per:?}");
        assert_eq!(per, per_cpu(&cfg), "a function of the seed");
        // Two CPUs for eight queues: each carries the flows of its four queues.
        cfg.set("cpus", "2").unwrap();
        let two = per_cpu(&cfg);
        assert_eq!(two, vec![per.iter().step_by(2).sum::<u32>(), per.iter().skip(1).step_by(2).sum::<u32>()]);
        cfg.set("cpus", "0").unwrap();
        // Few flows spread unevenly: some queues carry none, so the load differs by queue.
        cfg.set("flood_flows", "4").unwrap();
        let per = per_cpu(&cfg);
        assert_eq!(per.iter().sum::<u32>(), 4);
        assert!(per.contains(&0), "{per:?}");
        cfg.set("flood_rate", "0").unwrap();
        assert_eq!(per_cpu(&cfg), vec![0; 8]);
    }

    #[test]
    fn packed_packet_work_unpacks_to_itself() {
        let segs = [
            Seg::Syn,
            Seg::SynAck,
            Seg::Ack,
            Seg::Data { idx: u32::MAX },
            Seg::Fin { idx: 7 },
            Seg::DataAck { upto: 1 << 31 },
            Seg::Rst,
        ];
        for seg in segs {
            for dir in [Dir::ToServer, Dir::ToClient] {
                let pkt = Pkt { conn: (1 << 48) - 1, host: 65_535, queue: 127, dir, seg };
                for work in [Work::Arrive(pkt), Work::Backlog { pkt, cpu: 1024 }, Work::Deliver(pkt)] {
                    assert_eq!(PackedPkt::pack(work).unpack(), work);
                }
                let small = Pkt { conn: 3, host: 0, queue: 0, ..pkt };
                assert_eq!(
                    PackedPkt::pack(Work::Backlog { pkt: small, cpu: 0 }).unpack(),
                    Work::Backlog { pkt: small, cpu: 0 }
                );
            }
        }
    }

    #[test]
    fn the_agenda_hands_out_packets_and_timers_in_time_then_scheduling_order() {
        use rand_core::{Rng, SeedableRng};
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        // The agenda against one binary heap of (time, scheduling order): packets soon and at
        // once (ties), timers far, entries scheduled while others are handled (the first packet
        // scheduled takes the handled one's place in its heap), and `now` sometimes short of
        // the next entry.
        let mut net = Net::new(KernelConfig::profile("rss").unwrap(), 1, 2);
        let mut model = BinaryHeap::new();
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let (mut at, mut n) = (0u64, 0u64);
        for _ in 0..100_000 {
            if r.next_u64() % 2 == 0 {
                let pkt = Pkt { conn: r.next_u64() % 1000, host: 1, queue: 3, dir: Dir::ToClient, seg: Seg::Ack };
                let (ahead, work) = match r.next_u64() % 5 {
                    0 => (0, Work::Deliver(pkt)),
                    1 | 2 => (10_000 + r.next_u64() % 2_000, Work::Arrive(pkt)),
                    3 => (r.next_u64() % 3_000, Work::Backlog { pkt, cpu: 2 }),
                    _ => (r.next_u64() % (1 << 33), Work::Timer { conn: pkt.conn, side: 1, gen: n as u32 }),
                };
                n += 1;
                net.schedule(Instant::from_nanos(at + ahead), work);
                model.push(Reverse((at + ahead, n, work_key(work))));
            } else {
                let now = at + r.next_u64() % 5_000;
                let due = model.peek().is_some_and(|Reverse((t, ..))| *t <= now);
                let want = if due { model.pop().map(|Reverse(e)| e) } else { None };
                let got = net.pop_due(Instant::from_nanos(now));
                assert_eq!(got.map(|(t, w)| (t.as_nanos(), work_key(w))), want.map(|(t, _, w)| (t, w)));
                match got {
                    Some((t, _)) => at = t.as_nanos(),
                    // Asked only between entries handled.
                    None => assert_eq!(net.next_due().map(|t| t.as_nanos()), model.peek().map(|Reverse((t, ..))| *t)),
                }
            }
        }
    }

    /// `work` as something a heap can order (only equality matters).
    fn work_key(work: Work) -> String {
        format!("{work:?}")
    }

    #[test]
    fn timer_entries_keep_their_timer_and_order_by_key() {
        let (seq, at) = ((1u64 << 47) - 1, u64::MAX);
        let mut entries = Vec::new();
        for (key, conn, side, gen) in [
            (key(Instant::from_nanos(at), seq), (1 << 48) - 1, 1, u32::MAX),
            (key(Instant::from_nanos(at), seq - 1), 0, 0, 0),
            (key(Instant::from_nanos(5), 1), 0xabcd_1234_5678, 1, 7),
            (key(Instant::from_nanos(5), 2), 1, 0, 1 << 31),
            (key(Instant::ZERO, 1 << 40), 1 << 47, 1, 3),
        ] {
            let e = TimerEntry::new(key, conn, side, gen);
            assert_eq!((e.key(), e.at_ns(), e.work()), (key, (key >> 64) as u64, Work::Timer { conn, side, gen }));
            entries.push(e);
        }
        for a in &entries {
            for b in &entries {
                assert_eq!(a.cmp(b), a.key().cmp(&b.key()), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn each_packet_kind_costs_its_own_softirq_time() {
        let cfg = KernelConfig::profile("load").unwrap();
        let cost = |cfg: &KernelConfig, seg| Costs::new(cfg).arrival(false, seg);
        let us = |x: u64| x * 1_000;
        assert_eq!(cost(&cfg, Seg::Syn), us(5));
        assert_eq!(cost(&cfg, Seg::SynAck), us(5));
        assert_eq!(cost(&cfg, Seg::Ack), us(2));
        assert_eq!(cost(&cfg, Seg::DataAck { upto: 1 }), us(2));
        assert_eq!(cost(&cfg, Seg::Data { idx: 0 }), us(3));
        let old = KernelConfig::profile("rss").unwrap();
        assert_eq!(cost(&old, Seg::Syn), nanos(old.service));
        assert_eq!(cost(&old, Seg::Data { idx: 0 }), nanos(old.service));
    }
}
