//! Connection state and segment handling: the handshake up to the listener's accept queue,
//! per-direction data with cumulative ACKs and RTO retransmission, FIN and RST.
//!
//! Side 0 is the connecting end, side 1 the listener's child. `half[s]` is the byte stream
//! *sent by* side `s`; its receive state lives in the same struct (the receiver reads the
//! sender's buffer, so bytes are never copied in flight).
//!
//! A write into an empty send buffer takes the writer's buffer itself when it is given one
//! (`Kernel::write_owned`), and a read of all of a send buffer into an empty one swaps them
//! (`Kernel::read_append`): a frame that is read whole is then never copied by the kernel.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use bootsim_core::Instant;

use super::agenda::{Net, Pkt, SpareBufs, Work};
use super::events::{Dir, EventKind, Flow, ListenerId, Overflow, ReadOutcome, Seg, SockId, SockToken};

const C: usize = 0;
const S: usize = 1;

/// The most room a buffer may have to move whole between a caller and a send buffer instead of
/// being copied: the spare pools' bound, so neither side's pool keeps a larger one.
const SWAP_MAX: usize = SpareBufs::MAX_BYTES;

/// A listening socket and its FIFO accept queue.
#[derive(Clone, Debug)]
pub(crate) struct Listener {
    pub(crate) host: u32,
    pub(crate) port: u16,
    pub(crate) open: bool,
    pub(crate) queue: VecDeque<SockId>,
}

/// Every listener ever created, and which are bound now.
#[derive(Clone, Debug, Default)]
pub(crate) struct Listeners {
    pub(crate) all: Vec<Listener>,
    pub(crate) bound: BTreeMap<(u32, u16), ListenerId>,
}

impl Listeners {
    pub(crate) fn get_mut(&mut self, l: ListenerId) -> Option<&mut Listener> {
        self.all.get_mut(l.0 as usize)
    }

    fn is_open(&self, l: ListenerId) -> bool {
        self.all.get(l.0 as usize).is_some_and(|x| x.open)
    }
}

/// TCP state of one side, coarsened to what the accept path needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sk {
    /// Server side before any SYN was accepted.
    Idle,
    /// Client side waiting for SYN-ACK.
    SynSent,
    /// Server side: a request socket (SYN-ACK sent) waiting for the completing ACK.
    SynRecv(ListenerId),
    /// Connected (server side: a child in the accept queue or accepted).
    Open,
    /// Reset, refused, timed out or forgotten.
    Dead,
}

/// A lazily-rescheduled retransmission timer: moving the deadline later costs nothing; the
/// agenda entry fires, sees the later deadline and re-queues itself.
#[derive(Clone, Copy, Debug, Default)]
struct TimerSlot {
    deadline: Option<Instant>,
    queued: Option<Instant>,
    gen: u32,
}

/// One direction's byte stream: the sender's buffer and both ends' sequence state.
#[derive(Clone, Debug, Default)]
pub(crate) struct Half {
    /// The bytes written and not yet read by the receiver, in order, from offset `dropped` of
    /// the stream on: once the receiver has read every byte written, they are freed (only a
    /// read needs the bytes; sequence state is kept in offsets).
    buf: Vec<u8>,
    /// Stream bytes freed from the front of `buf`.
    dropped: usize,
    /// Cumulative end offset of each written segment from segment `ends_from` on: the ends
    /// of segments both acknowledged and delivered are forgotten, all but the last of them
    /// (`bytes_before` asks only at `snd_una` and `rcv_nxt`, which never go back), so a
    /// long-lived stream keeps what is in flight, not every segment it ever carried.
    ends: Vec<u32>,
    /// Segments forgotten from the front of `ends`.
    ends_from: u32,
    /// The sender closed: segment `segments()` is a FIN.
    fin: bool,
    /// Next segment to transmit for the first time.
    snd_nxt: u32,
    /// Lowest unacknowledged segment.
    snd_una: u32,
    /// Consecutive timeouts without progress.
    backoff: u8,
    /// Receiver: next segment expected in order.
    rcv_nxt: u32,
    /// Receiver: segments held out of order.
    ooo: Vec<u32>,
    /// Receiver: bytes the application consumed.
    read: usize,
}

impl Half {
    /// Data segments written so far.
    fn segments(&self) -> u32 {
        self.ends_from + self.ends.len() as u32
    }

    fn total(&self) -> u32 {
        self.segments() + u32::from(self.fin)
    }

    fn seg(&self, idx: u32) -> Seg {
        if idx < self.segments() {
            Seg::Data { idx }
        } else {
            Seg::Fin { idx }
        }
    }

    /// Stream bytes written so far.
    fn written(&self) -> usize {
        self.dropped + self.buf.len()
    }

    fn bytes_before(&self, seg: u32) -> usize {
        let n = seg.min(self.segments());
        if n == 0 {
            0
        } else {
            self.ends[(n - 1 - self.ends_from) as usize] as usize
        }
    }

    /// Appends a written segment's end offset, first forgetting the ends no one asks
    /// for again once they are at least half the table (amortised: each end moves once).
    fn push_end(&mut self, end: u32) {
        let keep_from = self.snd_una.min(self.rcv_nxt).saturating_sub(1).max(self.ends_from);
        let dead = (keep_from - self.ends_from) as usize;
        if dead > 0 && dead * 2 >= self.ends.len() {
            self.ends.drain(..dead);
            self.ends_from = keep_from;
        }
        self.ends.push(end);
    }

    /// SIOCOUTQ: bytes written and not yet acknowledged.
    pub(crate) fn outq(&self) -> usize {
        self.written() - self.bytes_before(self.snd_una)
    }

    fn outstanding(&self) -> bool {
        self.snd_una < self.snd_nxt
    }

    fn delivered(&self) -> usize {
        self.bytes_before(self.rcv_nxt)
    }

    fn unread(&self) -> usize {
        self.delivered() - self.read
    }

    fn eof(&self) -> bool {
        self.fin && self.rcv_nxt >= self.total()
    }
}

/// One connection, both ends.
#[derive(Clone, Debug)]
pub(crate) struct Conn {
    pub(crate) flow: Flow,
    /// RX queue of this flow at side `i`'s host.
    pub(crate) q: [u16; 2],
    pub(crate) sk: [Sk; 2],
    app_closed: [bool; 2],
    rst: [bool; 2],
    /// Side `i` died because its kernel gave up retransmitting its data (`tcp_retries2`,
    /// `Aborted`): a read says so (`ETIMEDOUT`), not that it was reset.
    timed_out: [bool; 2],
    half: [Half; 2],
    /// Latest arrival of a packet travelling to side `i` (wire FIFO per direction).
    wire: [Instant; 2],
    timer: [TimerSlot; 2],
    /// SYN (client) / SYN-ACK (server) retransmissions so far.
    tries: [u8; 2],
    /// The child sits in its listener's accept queue (the application cannot see it yet).
    pub(crate) in_accept_queue: bool,
    /// The application's token for side `i`'s socket while it holds it (given, not closed).
    pub(crate) token: [Option<SockToken>; 2],
}

/// Everything a handler needs besides the connection itself.
pub(crate) struct Ctx<'a> {
    pub(crate) net: &'a mut Net,
    pub(crate) listeners: &'a mut Listeners,
    pub(crate) id: u64,
    pub(crate) now: Instant,
}

fn sock(id: u64, side: usize) -> SockId {
    if side == C {
        SockId::client(id)
    } else {
        SockId::child(id)
    }
}

fn doubled(base: Duration, times: u8) -> Duration {
    base.saturating_mul(1u32 << times.min(30))
}

impl Conn {
    /// A connection whose client end is in SYN_SENT (the caller sends the SYN).
    pub(crate) fn new(flow: Flow, q: [u16; 2]) -> Conn {
        Conn {
            flow,
            q,
            sk: [Sk::SynSent, Sk::Idle],
            app_closed: [false; 2],
            rst: [false; 2],
            timed_out: [false; 2],
            half: [Half::default(), Half::default()],
            wire: [Instant::ZERO; 2],
            timer: [TimerSlot::default(); 2],
            tries: [0; 2],
            in_accept_queue: false,
            token: [None; 2],
        }
    }

    /// The host side `side` lives on.
    pub(crate) fn host(&self, side: usize) -> u32 {
        if side == C {
            self.flow.client.0
        } else {
            self.flow.server.0
        }
    }

    /// Whether side `side` died by its own kernel's timeout and the application still holds
    /// it (has not closed it): what the kernel keeps of it once the connection is forgotten.
    pub(crate) fn held_timed_out(&self, side: usize) -> bool {
        self.timed_out[side] && !self.app_closed[side]
    }

    /// Whether neither end can ever act again, so the connection can be forgotten.
    pub(crate) fn finished(&self) -> bool {
        !self.in_accept_queue
            && (0..2).all(|side| match self.sk[side] {
                Sk::Idle | Sk::Dead => true,
                Sk::SynSent | Sk::SynRecv(_) => false,
                Sk::Open => {
                    let h = &self.half[side];
                    self.app_closed[side] && h.fin && h.snd_una == h.total()
                }
            })
    }

    // Never inlined: `bootsim bench`'s profile reads this function's inclusive count, which
    // must hold every call in any build.
    #[inline(never)]
    fn send(&mut self, cx: &mut Ctx<'_>, to: usize, seg: Seg) {
        let pkt = Pkt { conn: cx.id, host: self.host(to), queue: self.q[to], dir: Dir::towards(to), seg };
        let from = self.host(1 - to);
        cx.net.transmit(cx.now, from, &mut self.wire[to], pkt, self.flow);
    }

    fn arm(&mut self, cx: &mut Ctx<'_>, side: usize, deadline: Instant) {
        let t = &mut self.timer[side];
        t.deadline = Some(deadline);
        if t.queued.is_some_and(|q| q <= deadline) {
            return;
        }
        t.gen = t.gen.wrapping_add(1);
        t.queued = Some(deadline);
        let work = Work::Timer { conn: cx.id, side: side as u8, gen: t.gen };
        cx.net.schedule(deadline, work);
    }

    fn disarm(&mut self, side: usize) {
        self.timer[side].deadline = None;
    }

    fn rto(&self, cx: &Ctx<'_>, side: usize) -> Duration {
        doubled(cx.net.cfg.rto_min, self.half[side].backoff).min(cx.net.cfg.rto_max)
    }

    /// Transmit every segment written but not yet sent, and make sure the RTO runs.
    fn flush(&mut self, cx: &mut Ctx<'_>, side: usize) {
        while self.half[side].snd_nxt < self.half[side].total() {
            let seg = self.half[side].seg(self.half[side].snd_nxt);
            self.half[side].snd_nxt += 1;
            self.send(cx, 1 - side, seg);
        }
        if self.half[side].outstanding() && self.timer[side].deadline.is_none() {
            let deadline = cx.now + self.rto(cx, side);
            self.arm(cx, side, deadline);
        }
    }

    fn die(&mut self, side: usize) {
        self.sk[side] = Sk::Dead;
        self.disarm(side);
    }

    // ---- application calls -------------------------------------------------------------

    /// Send the first SYN.
    pub(crate) fn start(&mut self, cx: &mut Ctx<'_>) {
        self.send(cx, S, Seg::Syn);
        let deadline = cx.now + cx.net.cfg.syn_rto;
        self.arm(cx, C, deadline);
    }

    /// Append one segment; it leaves at once if connected, else when the handshake completes.
    /// Returns false if the socket can no longer send.
    pub(crate) fn write(&mut self, cx: &mut Ctx<'_>, side: usize, bytes: &[u8]) -> bool {
        self.write_with(cx, side, bytes.len(), |buf, spare| {
            if buf.capacity() == 0 {
                *buf = spare.take();
            }
            buf.extend_from_slice(bytes);
        })
    }

    /// [`Conn::write`] of the bytes in `bytes`, which is left empty: into an empty send buffer
    /// the caller's buffer (up to [`SWAP_MAX`] of room) is moved, not copied (the caller gets a
    /// spare one back).
    pub(crate) fn write_owned(&mut self, cx: &mut Ctx<'_>, side: usize, bytes: &mut Vec<u8>) -> bool {
        let len = bytes.len();
        self.write_with(cx, side, len, |buf, spare| {
            if buf.is_empty() && bytes.capacity() <= SWAP_MAX {
                let old = std::mem::replace(buf, std::mem::take(bytes));
                *bytes = if old.capacity() > 0 { old } else { spare.take() };
            } else {
                buf.extend_from_slice(bytes);
                bytes.clear();
            }
        })
    }

    /// Appends a segment of `len` bytes that `append` adds to the send buffer (given the
    /// kernel's spare buffers), if the socket can still send.
    #[inline(always)]
    fn write_with(
        &mut self,
        cx: &mut Ctx<'_>,
        side: usize,
        len: usize,
        append: impl FnOnce(&mut Vec<u8>, &mut SpareBufs),
    ) -> bool {
        if self.app_closed[side] || matches!(self.sk[side], Sk::Dead | Sk::Idle) {
            return false;
        }
        if len == 0 {
            return true;
        }
        let h = &mut self.half[side];
        append(&mut h.buf, &mut cx.net.spare_bufs);
        let end = h.written() as u32;
        h.push_end(end);
        cx.net.stats.writes += 1;
        if self.sk[side] == Sk::Open {
            self.flush(cx, side);
        }
        true
    }

    /// The application closes its end: FIN after the data (the kernel keeps retransmitting),
    /// or RST if received bytes were left unread. Closing before the handshake completes
    /// abandons the connection, as Linux does in SYN_SENT.
    pub(crate) fn close(&mut self, cx: &mut Ctx<'_>, side: usize) {
        if self.app_closed[side] {
            return;
        }
        self.app_closed[side] = true;
        match self.sk[side] {
            Sk::SynSent => self.die(side),
            Sk::Open if self.half[1 - side].unread() > 0 => {
                self.send(cx, 1 - side, Seg::Rst);
                self.die(side);
            }
            Sk::Open => {
                self.half[side].fin = true;
                self.flush(cx, side);
            }
            _ => {}
        }
    }

    /// The listener went away while this child waited in its accept queue.
    pub(crate) fn orphan_child(&mut self, cx: &mut Ctx<'_>) {
        self.in_accept_queue = false;
        self.app_closed[S] = true;
        if self.sk[S] != Sk::Dead {
            self.send(cx, C, Seg::Rst);
            self.die(S);
        }
    }

    /// Copy readable bytes of `side` into `buf` (a drained stream's buffer goes to `spare`).
    pub(crate) fn read(&mut self, side: usize, buf: &mut [u8], spare: &mut SpareBufs) -> ReadOutcome {
        let n = self.take_readable(side, buf.len(), spare, |b| buf[..b.len()].copy_from_slice(b));
        if n > 0 {
            return ReadOutcome::Data(n);
        }
        match self.next_read(side) {
            ReadOutcome::Data(_) => ReadOutcome::Data(0),
            then => then,
        }
    }

    /// Appends up to `max` readable bytes of side `side` to `out`; returns how many, and what
    /// a read would find next ([`Conn::next_read`]). An empty `out` that would take the whole
    /// send buffer is swapped with it instead (its room goes to `spare`): no copy.
    pub(crate) fn read_append(
        &mut self,
        side: usize,
        out: &mut Vec<u8>,
        max: usize,
        spare: &mut SpareBufs,
    ) -> (usize, ReadOutcome) {
        let h = &mut self.half[1 - side];
        let delivered = h.delivered();
        let n = (delivered - h.read).min(max);
        if n > 0 {
            let at = h.read - h.dropped;
            h.read += n;
            if h.read == h.written() {
                h.dropped = h.read;
                if at == 0 && out.is_empty() && h.buf.capacity() <= SWAP_MAX {
                    std::mem::swap(out, &mut h.buf);
                } else {
                    out.extend_from_slice(&h.buf[at..at + n]);
                }
                spare.give(std::mem::take(&mut h.buf));
            } else {
                out.extend_from_slice(&h.buf[at..at + n]);
            }
        }
        let left = delivered - h.read;
        let next = if left > 0 { ReadOutcome::Data(left) } else { self.no_data(side) };
        (n, next)
    }

    /// Hands up to `max` readable bytes of side `side` to `into` and marks them read (the
    /// sender's buffer goes back to `spare` once all is read); returns how many.
    #[inline(always)]
    fn take_readable(&mut self, side: usize, max: usize, spare: &mut SpareBufs, into: impl FnOnce(&[u8])) -> usize {
        let h = &mut self.half[1 - side];
        let n = h.unread().min(max);
        if n > 0 {
            let at = h.read - h.dropped;
            into(&h.buf[at..at + n]);
            h.read += n;
            if h.read == h.written() {
                h.dropped = h.read;
                spare.give(std::mem::take(&mut h.buf));
            }
        }
        n
    }

    /// What a read on side `side` finds now: `Data` with the bytes readable, or why none are.
    fn next_read(&self, side: usize) -> ReadOutcome {
        match self.half[1 - side].unread() {
            0 => self.no_data(side),
            n => ReadOutcome::Data(n),
        }
    }

    /// Why a read on side `side`, with nothing readable, finds no data: a side that died
    /// reads why (its own kernel's timeout, else a reset), whether or not the application has
    /// seen the event that said so yet.
    fn no_data(&self, side: usize) -> ReadOutcome {
        if self.timed_out[side] {
            ReadOutcome::TimedOut
        } else if self.rst[side] || self.sk[side] == Sk::Dead {
            ReadOutcome::Reset
        } else if self.half[1 - side].eof() {
            ReadOutcome::Eof
        } else {
            ReadOutcome::WouldBlock
        }
    }

    /// Bytes readable now on `side`.
    pub(crate) fn readable(&self, side: usize) -> usize {
        self.half[1 - side].unread()
    }

    /// SIOCOUTQ of `side`.
    pub(crate) fn outq(&self, side: usize) -> usize {
        self.half[side].outq()
    }

    // ---- packets -----------------------------------------------------------------------

    /// The receiving host's softirq hands `seg` to TCP.
    #[inline]
    pub(crate) fn on_segment(&mut self, cx: &mut Ctx<'_>, dir: Dir, seg: Seg) {
        match dir {
            Dir::ToServer => self.server_rx(cx, seg),
            Dir::ToClient => self.client_rx(cx, seg),
        }
    }

    fn server_rx(&mut self, cx: &mut Ctx<'_>, seg: Seg) {
        match self.sk[S] {
            Sk::Idle => match seg {
                Seg::Syn => {
                    let key = (self.flow.server.0, self.flow.server_port);
                    let Some(&l) = cx.listeners.bound.get(&key) else {
                        // No listener: RST, and no state (a retransmitted SYN may find one).
                        self.send(cx, C, Seg::Rst);
                        return;
                    };
                    if self.accept_queue_full(cx, l) {
                        self.backlog_drop(cx, l, Overflow::Syn);
                        return;
                    }
                    self.sk[S] = Sk::SynRecv(l);
                    self.send(cx, C, Seg::SynAck);
                    let deadline = cx.now + cx.net.cfg.syn_rto;
                    self.arm(cx, S, deadline);
                }
                Seg::Rst => {}
                _ => self.send(cx, C, Seg::Rst),
            },
            Sk::SynRecv(l) => {
                if !cx.listeners.is_open(l) {
                    if seg != Seg::Rst {
                        self.send(cx, C, Seg::Rst);
                    }
                    self.die(S);
                    return;
                }
                match seg {
                    Seg::Syn => self.send(cx, C, Seg::SynAck),
                    Seg::SynAck => {}
                    Seg::Rst => self.die(S),
                    Seg::Ack | Seg::Data { .. } | Seg::Fin { .. } | Seg::DataAck { .. } => {
                        if self.accept_queue_full(cx, l) {
                            self.backlog_drop(cx, l, Overflow::Ack);
                            return;
                        }
                        self.enqueue_child(cx, l);
                        if let Seg::Data { idx } | Seg::Fin { idx } = seg {
                            self.receive(cx, S, idx);
                        }
                    }
                }
            }
            Sk::Open => self.established_rx(cx, S, seg),
            Sk::Dead => {
                if seg != Seg::Rst {
                    self.send(cx, C, Seg::Rst);
                }
            }
            Sk::SynSent => {}
        }
    }

    /// Linux's `sk_acceptq_is_full`: `sk_ack_backlog > sk_max_ack_backlog`, so a listen
    /// backlog of B holds B + 1 established connections before SYNs and ACKs are dropped.
    fn accept_queue_full(&self, cx: &Ctx<'_>, l: ListenerId) -> bool {
        cx.listeners.all[l.0 as usize].queue.len() > cx.net.cfg.backlog as usize
    }

    fn backlog_drop(&self, cx: &mut Ctx<'_>, l: ListenerId, what: Overflow) {
        cx.net.stats.backlog_drops += 1;
        let ev = EventKind::BacklogDrop { listener: l, flow: self.flow, queue: self.q[S], what };
        cx.net.trace(cx.now, ev);
    }

    /// The handshake completed on the server host: the child joins the accept queue.
    fn enqueue_child(&mut self, cx: &mut Ctx<'_>, l: ListenerId) {
        self.sk[S] = Sk::Open;
        self.in_accept_queue = true;
        self.disarm(S);
        let child = SockId::child(cx.id);
        let lis = &mut cx.listeners.all[l.0 as usize];
        lis.queue.push_back(child);
        let depth = lis.queue.len() as u32;
        cx.net.stats.enqueued += 1;
        cx.net.observable = true;
        let ev = EventKind::ChildEnqueued { listener: l, sock: child, flow: self.flow, queue: self.q[S], depth };
        cx.net.trace(cx.now, ev);
        if depth == 1 {
            cx.net.emit(cx.now, EventKind::Acceptable { listener: l });
        }
    }

    fn client_rx(&mut self, cx: &mut Ctx<'_>, seg: Seg) {
        match self.sk[C] {
            Sk::SynSent => match seg {
                Seg::SynAck => {
                    self.sk[C] = Sk::Open;
                    self.disarm(C);
                    cx.net.emit(cx.now, EventKind::Connected { sock: sock(cx.id, C) });
                    self.send(cx, S, Seg::Ack);
                    self.flush(cx, C);
                }
                Seg::Rst => {
                    self.die(C);
                    self.rst[C] = true;
                    cx.net.emit(cx.now, EventKind::Refused { sock: sock(cx.id, C) });
                }
                _ => {}
            },
            // A retransmitted SYN-ACK: our ACK was lost or dropped; ACK again.
            Sk::Open if seg == Seg::SynAck => self.send(cx, S, Seg::Ack),
            Sk::Open => self.established_rx(cx, C, seg),
            Sk::Dead => {
                if seg != Seg::Rst {
                    self.send(cx, S, Seg::Rst);
                }
            }
            Sk::Idle | Sk::SynRecv(_) => {}
        }
    }

    fn established_rx(&mut self, cx: &mut Ctx<'_>, me: usize, seg: Seg) {
        match seg {
            Seg::Data { idx } | Seg::Fin { idx } => self.receive(cx, me, idx),
            Seg::DataAck { upto } => self.on_ack(cx, me, upto),
            Seg::Rst => {
                self.die(me);
                self.rst[me] = true;
                if !self.app_closed[me] || me == C {
                    cx.net.emit(cx.now, EventKind::Reset { sock: sock(cx.id, me) });
                }
            }
            Seg::Syn | Seg::SynAck | Seg::Ack => {}
        }
    }

    /// Segment `idx` of the peer's stream reached side `me`.
    fn receive(&mut self, cx: &mut Ctx<'_>, me: usize, idx: u32) {
        let from = 1 - me;
        let h = &self.half[from];
        if idx < h.rcv_nxt {
            let upto = h.rcv_nxt;
            self.send(cx, from, Seg::DataAck { upto });
            return;
        }
        if self.app_closed[me] && idx < h.segments() {
            // New data for a socket the application closed: reset.
            self.send(cx, from, Seg::Rst);
            self.die(me);
            return;
        }
        let (before, was_eof) = (h.delivered(), h.eof());
        let h = &mut self.half[from];
        if idx == h.rcv_nxt {
            h.rcv_nxt += 1;
            while let Some(i) = h.ooo.iter().position(|&x| x == h.rcv_nxt) {
                h.ooo.swap_remove(i);
                h.rcv_nxt += 1;
            }
        } else if !h.ooo.contains(&idx) {
            h.ooo.push(idx);
        }
        let (upto, unread, after, eof) = (h.rcv_nxt, h.unread(), h.delivered(), h.eof());
        self.send(cx, from, Seg::DataAck { upto });
        if self.app_closed[me] {
            return;
        }
        if after > before {
            let sock = sock(cx.id, me);
            cx.net.emit(cx.now, EventKind::Readable { sock, unread });
        }
        if eof && !was_eof {
            cx.net.emit(cx.now, EventKind::Eof { sock: sock(cx.id, me) });
        }
    }

    /// A cumulative ACK for side `me`'s stream.
    fn on_ack(&mut self, cx: &mut Ctx<'_>, me: usize, upto: u32) {
        let h = &mut self.half[me];
        if upto <= h.snd_una || upto > h.snd_nxt {
            return;
        }
        let before = h.outq();
        h.snd_una = upto;
        h.backoff = 0;
        let (outstanding, after) = (h.outstanding(), h.outq());
        if outstanding {
            let deadline = cx.now + self.rto(cx, me);
            self.arm(cx, me, deadline);
        } else {
            self.disarm(me);
        }
        if before > 0 && after == 0 {
            cx.net.emit(cx.now, EventKind::AllAcked { sock: sock(cx.id, me) });
        }
    }

    // ---- timers ------------------------------------------------------------------------

    /// A timer agenda entry for `side` came due; false if it found nothing to do (superseded,
    /// disarmed, or early and re-queued).
    pub(crate) fn on_timer(&mut self, cx: &mut Ctx<'_>, side: usize, gen: u32) -> bool {
        let t = &mut self.timer[side];
        if gen != t.gen {
            return false;
        }
        t.queued = None;
        match t.deadline {
            None => return false,
            Some(d) if d > cx.now => {
                t.queued = Some(d);
                let work = Work::Timer { conn: cx.id, side: side as u8, gen };
                cx.net.schedule(d, work);
                return false;
            }
            Some(_) => t.deadline = None,
        }
        match self.sk[side] {
            Sk::SynSent => {
                self.tries[C] += 1;
                if self.tries[C] > cx.net.cfg.syn_retries {
                    self.die(C);
                    let ev = EventKind::ConnectTimedOut { sock: sock(cx.id, C) };
                    cx.net.emit(cx.now, ev);
                } else {
                    self.retransmit(cx, S, Seg::Syn, self.tries[C]);
                    let deadline = cx.now + doubled(cx.net.cfg.syn_rto, self.tries[C]);
                    self.arm(cx, C, deadline);
                }
            }
            Sk::SynRecv(l) => {
                self.tries[S] += 1;
                if !cx.listeners.is_open(l) {
                    self.die(S);
                } else if self.tries[S] > cx.net.cfg.synack_retries {
                    self.die(S);
                    cx.net.trace(cx.now, EventKind::SynAckExpired { flow: self.flow });
                } else {
                    self.retransmit(cx, C, Seg::SynAck, self.tries[S]);
                    let deadline = cx.now + doubled(cx.net.cfg.syn_rto, self.tries[S]);
                    self.arm(cx, S, deadline);
                }
            }
            Sk::Open if self.half[side].outstanding() => {
                let h = &mut self.half[side];
                h.backoff = h.backoff.saturating_add(1);
                let attempt = h.backoff;
                if attempt > cx.net.cfg.data_retries {
                    self.die(side);
                    self.timed_out[side] = true;
                    cx.net.emit(cx.now, EventKind::Aborted { sock: sock(cx.id, side) });
                    return true;
                }
                // Go-back-N: everything outstanding goes again (messages are a few segments).
                let (una, nxt) = (h.snd_una, h.snd_nxt);
                for i in una..nxt {
                    let seg = self.half[side].seg(i);
                    self.retransmit(cx, 1 - side, seg, attempt);
                }
                let deadline = cx.now + self.rto(cx, side);
                self.arm(cx, side, deadline);
            }
            Sk::Open | Sk::Idle | Sk::Dead => return false,
        }
        true
    }

    fn retransmit(&mut self, cx: &mut Ctx<'_>, to: usize, seg: Seg, attempt: u8) {
        cx.net.stats.retransmits += 1;
        let ev = EventKind::Retransmit { flow: self.flow, dir: Dir::towards(to), seg, attempt };
        cx.net.trace(cx.now, ev);
        self.send(cx, to, seg);
    }
}

#[cfg(test)]
mod half_tests {
    use super::Half;

    #[test]
    fn a_long_lived_stream_keeps_the_ends_of_segments_in_flight_only_and_counts_bytes_right() {
        let mut h = Half::default();
        let mut written = 0usize;
        for i in 1..=10_000u32 {
            let len = 1 + (i % 7) as usize;
            h.buf.extend_from_slice(&vec![0; len]);
            written += len;
            h.push_end(h.written() as u32);
            // Segment i-1 is delivered and acknowledged; the receiver lags one segment behind.
            h.snd_una = i;
            h.rcv_nxt = i - 1;
            assert_eq!(h.outq(), 0, "segment {i}");
            let last = 1 + (i % 7) as usize;
            assert_eq!(h.delivered(), written - last, "segment {i}");
        }
        assert_eq!(h.segments(), 10_000);
        assert!(h.ends.len() <= 8, "ends of {} segments kept", h.ends.len());
        // Nothing acknowledged: every end is kept.
        let mut slow = Half::default();
        for _ in 0..100 {
            slow.buf.push(1);
            slow.push_end(slow.written() as u32);
        }
        assert_eq!((slow.ends.len(), slow.outq()), (100, 100));
    }
}
