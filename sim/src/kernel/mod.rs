//! A seeded, sans-IO model of the Linux TCP path between hosts, from `connect()` to `accept()`.
//!
//! Accept-order reordering is not injected: it emerges. Each flow is hashed (RSS) onto one of
//! the receiving host's RX queues; each queue is a FIFO softirq server whose CPU background load
//! steals for heavy-tailed stretches; packets are lost in bursts and retransmitted on Linux's
//! timers; accept queues overflow. A child joins its listener's FIFO accept queue when the
//! server host *processes* the handshake-completing ACK (or the first data segment), so
//! connection N+1 from one sender can be accepted before N, unless the sender waited for
//! N's data to be acknowledged (SIOCOUTQ == 0) before sending N+1's SYN.
//!
//! Shaped like str0m: feed inputs with `now`, then drain [`Kernel::poll_event`], sleep until
//! [`Kernel::poll_timeout`] and call [`Kernel::handle_timeout`]. Same seed and same calls give
//! the same events.

mod agenda;
mod config;
mod conn_table;
#[cfg(test)]
mod cpu_tests;
mod cpus;
mod events;
mod loss;
mod napi;
mod rng;
mod rss;
mod softirq;
mod tcp;
mod wheel;

#[cfg(test)]
mod tests;

use rustc_hash::{FxHashMap, FxHashSet};
use std::time::Duration;

use bootsim_core::Instant;

pub use config::{CpuConfig, KernelConfig, KnobError, LoadConfig, ScriptedStall, StallAt, UnknownProfile, PROFILES};
pub use events::{
    Dir, EventKind, Flow, HostId, KernelEvent, KernelStats, ListenerId, Overflow, ReadOutcome, Seg, SockId, SockToken,
};

use agenda::{Due, Net, Work};
use conn_table::ConnTable;
use tcp::{Conn, Ctx, Listener, Listeners};

/// Socket-call failures.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// Another open listener is bound to this host and port (`EADDRINUSE`).
    #[error("{host}:{port} is already in use")]
    AddrInUse {
        /// Host.
        host: HostId,
        /// Port.
        port: u16,
    },
    /// The host number is outside `0..hosts`.
    #[error("no host {0}")]
    NoSuchHost(HostId),
    /// The socket or listener does not exist (or was already forgotten).
    #[error("unknown socket {0}")]
    UnknownSocket(SockId),
    /// The socket was closed by the application or failed (`EPIPE`).
    #[error("socket {0} can no longer send")]
    Closed(SockId),
}

/// The kernels of `hosts` hosts and the network between them.
#[derive(Debug)]
pub struct Kernel {
    net: Net,
    listeners: Listeners,
    /// Connections by number: numbers are dense from 0, a finished connection's slot is
    /// emptied and a page of slots freed when all its connections are, so a lookup is two
    /// indexes, not a search, and the table follows the open connections.
    conns: ConnTable<Box<Conn>>,
    /// The tokens of sockets the application holds whose connection is forgotten (failed: a
    /// refused, reset or timed-out socket not yet closed), by socket number; looked up only.
    orphan_tokens: FxHashMap<u64, SockToken>,
    /// The sockets of forgotten connections that died by their own kernel's timeout
    /// (`Aborted`) and that the application has not closed, by socket number: their reads say
    /// [`ReadOutcome::TimedOut`], as while the connection lived, until the application closes
    /// them (one entry per such socket it holds, as for `orphan_tokens`); looked up only.
    orphan_timeouts: FxHashSet<u64>,
    now: Instant,
}

/// A kernel's connection and listener tables.
type Tables = (ConnTable<Box<Conn>>, Vec<Listener>);

thread_local! {
    /// The connection and listener tables of this thread's last kernel, emptied, with their
    /// room (the network's containers are kept likewise, `agenda.rs`).
    static SPARE_TABLES: std::cell::Cell<Tables> = const { std::cell::Cell::new((ConnTable::new(), Vec::new())) };
}

impl Drop for Kernel {
    /// Hands the connection and listener tables, emptied, to the next kernel on this thread.
    fn drop(&mut self) {
        let conns = std::mem::take(&mut self.conns).emptied(crate::spare::ROOM);
        let all = crate::spare::emptied(std::mem::take(&mut self.listeners.all));
        // At thread exit the slot may be gone already: the tables are then simply dropped.
        let _ = SPARE_TABLES.try_with(|s| s.set((conns, all)));
    }
}

impl Kernel {
    /// Hosts `0..hosts` configured by `cfg`; every random draw derives from `seed`.
    pub fn new(cfg: KernelConfig, seed: u64, hosts: u32) -> Kernel {
        let (conns, all) = SPARE_TABLES.take();
        Kernel {
            net: Net::new(cfg, seed, hosts),
            listeners: Listeners { all, bound: Default::default() },
            conns,
            orphan_tokens: FxHashMap::default(),
            orphan_timeouts: FxHashSet::default(),
            now: Instant::ZERO,
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &KernelConfig {
        &self.net.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> KernelStats {
        self.net.stats()
    }

    /// The model's work so far: RX-queue busy periods generated and the steps of its walks over
    /// them (a walk over a long CPU cost under frequent stalls makes millions), for an
    /// engine's work guard.
    pub fn work(&self) -> u64 {
        self.net.stall_periods()
    }

    fn at(&mut self, now: Instant) -> Instant {
        debug_assert!(now >= self.now, "time went backwards: {now} < {}", self.now);
        self.now = self.now.max(now);
        self.now
    }

    fn check_host(&self, host: HostId) -> Result<(), KernelError> {
        if (host.0 as usize) < self.net.hosts.len() {
            Ok(())
        } else {
            Err(KernelError::NoSuchHost(host))
        }
    }

    /// Bind and listen on `host:port` with the configured backlog.
    pub fn listen(&mut self, now: Instant, host: HostId, port: u16) -> Result<ListenerId, KernelError> {
        self.at(now);
        self.check_host(host)?;
        if self.listeners.bound.contains_key(&(host.0, port)) {
            return Err(KernelError::AddrInUse { host, port });
        }
        let id = ListenerId(self.listeners.all.len() as u32);
        self.listeners.all.push(Listener { host: host.0, port, open: true, queue: Default::default() });
        self.listeners.bound.insert((host.0, port), id);
        Ok(id)
    }

    /// Close a listener: children still in its accept queue are reset, half-open connections
    /// are reset when they next speak, and the port is free again.
    pub fn close_listener(&mut self, now: Instant, l: ListenerId) {
        let now = self.at(now);
        let Some(lis) = self.listeners.get_mut(l) else {
            return;
        };
        if !lis.open {
            return;
        }
        lis.open = false;
        let key = (lis.host, lis.port);
        let pending = std::mem::take(&mut lis.queue);
        self.listeners.bound.remove(&key);
        for child in pending {
            self.with_conn(now, child.conn(), |c, cx| c.orphan_child(cx));
        }
    }

    /// Start connecting from `from` to `to:port` (non-blocking): the SYN leaves now. Expect
    /// `Connected`, `Refused` or `ConnectTimedOut` for the returned client socket.
    ///
    /// # Panics
    /// If either host is outside `0..hosts`.
    pub fn connect(&mut self, now: Instant, from: HostId, to: HostId, port: u16) -> SockId {
        self.connect_with(now, from, to, port, None)
    }

    /// [`Kernel::connect`], the client socket's events carrying `token`
    /// ([`Kernel::poll_event_token`]).
    ///
    /// # Panics
    /// If either host is outside `0..hosts`.
    pub fn connect_with(
        &mut self,
        now: Instant,
        from: HostId,
        to: HostId,
        port: u16,
        token: Option<SockToken>,
    ) -> SockId {
        let now = self.at(now);
        for h in [from, to] {
            if let Err(e) = self.check_host(h) {
                panic!("connect({from}, {to}:{port}): {e}");
            }
        }
        let id = self.conns.next_id();
        let client_port = self.net.ephemeral_port(from.0);
        let flow = Flow { client: from, client_port, server: to, server_port: port };
        let q = [
            self.net.hosts[from.0 as usize].rss.queue(to.0, port, from.0, client_port),
            self.net.hosts[to.0 as usize].rss.queue(from.0, client_port, to.0, port),
        ];
        let sock = SockId::client(id);
        self.net.trace(now, EventKind::SynSent { sock, flow, server_queue: q[1], client_queue: q[0] });
        let mut conn = Box::new(Conn::new(flow, q));
        conn.token[0] = token;
        self.conns.push(conn);
        self.with_conn(now, id, |c, cx| c.start(cx));
        sock
    }

    /// Take the oldest child from `l`'s accept queue, with its 4-tuple.
    pub fn accept(&mut self, now: Instant, l: ListenerId) -> Option<(SockId, Flow)> {
        self.accept_where(now, l, |_| true)
    }

    /// Takes the first child of `l`'s accept queue that `pick` chooses (an explicit accept
    /// order reorders the queue as the wire does a real kernel's), if there is one.
    pub fn accept_where(
        &mut self,
        now: Instant,
        l: ListenerId,
        pick: impl Fn(SockId) -> bool,
    ) -> Option<(SockId, Flow)> {
        let now = self.at(now);
        let queue = &mut self.listeners.get_mut(l)?.queue;
        let i = queue.iter().position(|&c| pick(c))?;
        let child = queue.remove(i)?;
        let c = self.conn_mut(child.conn())?;
        c.in_accept_queue = false;
        let flow = c.flow;
        self.net.trace(now, EventKind::Accepted { listener: l, sock: child, flow });
        Some((child, flow))
    }

    /// Gives socket `s` the token its events carry from now on (an accepted child's: before,
    /// they carry none), or takes it away (`None`); `close` takes it away too. False if `s` is
    /// unknown and a token was to be given.
    pub fn set_token(&mut self, s: SockId, token: Option<SockToken>) -> bool {
        match self.conns.get_mut(s.conn()) {
            Some(c) => c.token[s.side()] = token,
            None if token.is_none() => _ = self.orphan_tokens.remove(&s.0),
            None => return false,
        }
        true
    }

    /// The token socket `s` holds ([`Kernel::set_token`]), if any: its connection's, or, once
    /// that is forgotten, kept until the application closes `s`.
    pub fn token(&self, s: SockId) -> Option<SockToken> {
        match self.conns.get(s.conn()) {
            Some(c) => c.token[s.side()],
            None => self.orphan_tokens.get(&s.0).copied(),
        }
    }

    /// At `now`: when the application thread of `host`, runnable from `start` (at or after
    /// `now`), has had `cost` of CPU on its core, where softirq preempts it (`app_cpu`,
    /// `syscall_cost`, `app_work`). Packets arriving after `now` are not foreseen.
    pub fn app_run(&mut self, now: Instant, host: HostId, start: Instant, cost: Duration) -> Instant {
        let now = self.at(now);
        if self.check_host(host).is_err() {
            return start.max(now) + cost;
        }
        self.net.app_done(now, host.0, start, cost)
    }

    /// Number of children waiting in `l`'s accept queue.
    pub fn accept_queue_len(&self, l: ListenerId) -> usize {
        self.listeners.all.get(l.0 as usize).map_or(0, |x| x.queue.len())
    }

    /// Write `bytes` as one segment. Before the handshake completes it is held and sent on
    /// `Connected`.
    pub fn write(&mut self, now: Instant, s: SockId, bytes: &[u8]) -> Result<(), KernelError> {
        let now = self.at(now);
        let ok =
            self.with_conn(now, s.conn(), |c, cx| c.write(cx, s.side(), bytes)).ok_or(KernelError::UnknownSocket(s))?;
        if ok {
            Ok(())
        } else {
            Err(KernelError::Closed(s))
        }
    }

    /// [`Kernel::write`] of the bytes in `bytes`, taking them: a send buffer with nothing in it
    /// takes the buffer itself (if its room is at most 64 KiB), not a copy, and `bytes` is left
    /// empty (with another buffer's room, so a caller that refills it need not allocate).
    /// Whether or not it succeeds.
    pub fn write_owned(&mut self, now: Instant, s: SockId, bytes: &mut Vec<u8>) -> Result<(), KernelError> {
        let now = self.at(now);
        let written = self.with_conn(now, s.conn(), |c, cx| c.write_owned(cx, s.side(), bytes));
        match written {
            Some(true) => Ok(()),
            Some(false) => {
                bytes.clear();
                Err(KernelError::Closed(s))
            }
            None => {
                bytes.clear();
                Err(KernelError::UnknownSocket(s))
            }
        }
    }

    /// Close the application's end: FIN after any data (the kernel keeps the connection and
    /// retransmits until acknowledged), RST instead if received bytes are unread.
    pub fn close(&mut self, now: Instant, s: SockId) {
        let now = self.at(now);
        self.set_token(s, None);
        if !self.orphan_timeouts.is_empty() {
            self.orphan_timeouts.remove(&s.0);
        }
        self.with_conn(now, s.conn(), |c, cx| c.close(cx, s.side()));
    }

    /// Copy readable bytes into `buf`.
    pub fn read(&mut self, s: SockId, buf: &mut [u8]) -> ReadOutcome {
        match self.conns.get_mut(s.conn()) {
            Some(c) => c.read(s.side(), buf, &mut self.net.spare_bufs),
            None => self.forgotten_read(s),
        }
    }

    /// What a read of `s` finds once its connection is forgotten: a timeout the application
    /// has not closed yet, else a reset (the socket failed or never existed).
    #[cold]
    fn forgotten_read(&self, s: SockId) -> ReadOutcome {
        if self.orphan_timeouts.contains(&s.0) {
            ReadOutcome::TimedOut
        } else {
            ReadOutcome::Reset
        }
    }

    /// Appends up to `max` readable bytes of `s` to `out` (no buffer of the caller's to copy
    /// from again); returns how many, and what the next read would find: `Data` with the bytes
    /// still readable, else `WouldBlock`, `Eof`, `Reset` or `TimedOut`, so a caller reading until one of
    /// those need not call again to learn it. `max` 0 reads nothing and says `Data` while bytes
    /// wait: a caller looping on `Data` passes more. An empty `out` may come back another
    /// allocation: a read of a whole send buffer (of at most 64 KiB of room) takes it, uncopied.
    pub fn read_append(&mut self, s: SockId, out: &mut Vec<u8>, max: usize) -> (usize, ReadOutcome) {
        match self.conns.get_mut(s.conn()) {
            Some(c) => c.read_append(s.side(), out, max, &mut self.net.spare_bufs),
            None => (0, self.forgotten_read(s)),
        }
    }

    /// Bytes readable now on `s`.
    pub fn readable(&self, s: SockId) -> usize {
        self.conn(s.conn()).map_or(0, |c| c.readable(s.side()))
    }

    /// SIOCOUTQ: bytes written on `s` and not yet acknowledged by the peer's kernel.
    pub fn outq(&self, s: SockId) -> usize {
        self.conn(s.conn()).map_or(0, |c| c.outq(s.side()))
    }

    /// When `handle_timeout` next has work (packets in flight, timers).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.net.next_due()
    }

    /// Process everything due at or before `now`, in (time, scheduling order).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.handle_timeout_until(now, now);
    }

    /// [`Kernel::handle_timeout`] at `now`, then on through each later instant up to `limit`
    /// while nothing a driver could observe happens (no application event, no child joining an
    /// accept queue): the instants in between are ones a driver would wake for and find
    /// nothing to do. Returns the last instant processed (`now` if no later one), where the
    /// driver is now.
    // Never inlined: `bootsim bench`'s profile reads this function's inclusive count, which
    // must hold every call in any build.
    #[inline(never)]
    pub fn handle_timeout_until(&mut self, now: Instant, limit: Instant) -> Instant {
        let mut at = self.at(now);
        if self.net.next_due().is_some_and(|t| t <= at) {
            self.net.stats.wakeups += 1;
        }
        self.net.observable = false;
        loop {
            self.run_due(at);
            if self.net.observable {
                return at;
            }
            match self.net.next_due() {
                Some(t) if t <= limit => at = self.at(t),
                _ => return at,
            }
        }
    }

    /// TCP handles a delivered segment; one for a connection already forgotten is an orphan.
    #[inline(always)]
    fn deliver(&mut self, at: Instant, conn: u64, dir: Dir, seg: Seg) {
        if self.with_conn(at, conn, |c, cx| c.on_segment(cx, dir, seg)).is_none() {
            self.net.stats.orphans += 1;
        }
    }

    /// Every agenda entry due at or before `now`, in (time, scheduling order).
    fn run_due(&mut self, now: Instant) {
        while let Some((at, due)) = self.net.pop_next(now) {
            self.net.stats.agenda_events += 1;
            let work = match due {
                Due::Deliver { conn, dir, seg, .. } => {
                    self.deliver(at, conn, dir, seg);
                    continue;
                }
                Due::Work(work) => work,
            };
            match work {
                Work::Arrive(pkt) => {
                    if !self.alive(pkt.conn) {
                        self.net.stats.orphans += 1;
                        continue;
                    }
                    let conns = &self.conns;
                    self.net.arrive(at, pkt, || Self::flow_of(conns, pkt.conn));
                }
                Work::Backlog { pkt, cpu } => {
                    if !self.alive(pkt.conn) {
                        self.net.stats.orphans += 1;
                        continue;
                    }
                    let conns = &self.conns;
                    self.net.backlog(at, pkt, cpu, || Self::flow_of(conns, pkt.conn));
                }
                Work::Deliver(_) => unreachable!("Net::pop_next hands a delivery out as Due::Deliver"),
                Work::Timer { conn, side, gen } => {
                    let fired = self.with_conn(at, conn, |c, cx| c.on_timer(cx, usize::from(side), gen));
                    if fired != Some(true) {
                        self.net.stats.stale_timers += 1;
                    }
                }
            }
        }
    }

    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<KernelEvent> {
        self.net.events.pop_front()
    }

    /// [`Kernel::poll_event`], with the token its socket holds now, if any (epoll's `data`).
    pub fn poll_event_token(&mut self) -> Option<(KernelEvent, Option<SockToken>)> {
        let e = self.net.events.pop_front()?;
        Some((e, e.kind.app_sock().and_then(|s| self.token(s))))
    }

    /// Run `f` on connection `id` (if it still exists), then forget it if it is finished.
    fn with_conn<R>(&mut self, now: Instant, id: u64, f: impl FnOnce(&mut Conn, &mut Ctx<'_>) -> R) -> Option<R> {
        let c = self.conns.get_mut(id)?;
        let mut cx = Ctx { net: &mut self.net, listeners: &mut self.listeners, id, now };
        let r = f(c, &mut cx);
        if c.finished() {
            self.forget(id);
        }
        Some(r)
    }

    /// Forgets finished connection `id`. A socket the application still holds (a failed one)
    /// keeps its token, and why it died if its own kernel gave up on it. Out of line: the
    /// packet path calls `with_conn` for every packet, and few finish a connection.
    #[cold]
    #[inline(never)]
    fn forget(&mut self, id: u64) {
        let Some(c) = self.conns.get(id) else { return };
        let [client, child] = c.token;
        let timed_out = [c.held_timed_out(0), c.held_timed_out(1)];
        for (side, s, t) in [(0, SockId::client(id), client), (1, SockId::child(id), child)] {
            if let Some(t) = t {
                self.orphan_tokens.insert(s.0, t);
            }
            if timed_out[side] {
                self.orphan_timeouts.insert(s.0);
            }
        }
        self.conns.remove(id);
    }

    /// Whether connection `id` exists and is not finished (its slot only, not the connection:
    /// the packet path asks this for every packet).
    fn alive(&self, id: u64) -> bool {
        self.conns.contains(id)
    }

    /// The 4-tuple of live connection `id` in `conns`.
    fn flow_of(conns: &ConnTable<Box<Conn>>, id: u64) -> Flow {
        conns.get(id).expect("a live connection").flow
    }

    /// Connection `id`, unless it never existed or is finished.
    fn conn(&self, id: u64) -> Option<&Conn> {
        self.conns.get(id).map(|c| &**c)
    }

    /// Connection `id`, mutably.
    fn conn_mut(&mut self, id: u64) -> Option<&mut Conn> {
        self.conns.get_mut(id).map(|c| &mut **c)
    }
}
