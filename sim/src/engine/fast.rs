//! The fast engine: one thread, one event loop ordered by (time, sequence number), driving a
//! protocol's root and N ranks (any [`Protocol`] of the seam, statically dispatched) through
//! the kernel model. No tokio, no wall clock; its cost grows with the number of packets, not
//! with the number of ranks cubed.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};

// Lookup-only maps (never iterated, so no order can leak into a run) hash with a fixed,
// seedless hasher: O(1) where a BTreeMap walked its levels on every packet's event.
use rustc_hash::FxHashMap;
use std::net::SocketAddr;
use std::time::Duration;

use bootsim_core::seam::{
    CloseReason, Completed, Effect, ListenerKey, Node as _, NodeOutput, Nodes, Observation, Observed, Output,
    OwnedInput, Protocol, Setup,
};
use bootsim_core::{ConnId, ConnectFailure, ConnectRetry, DrainPoll, Instant, RetryPolicy, RetryStep};

use super::id_table::IdTable;
use super::outcome::{trace_line, Node, Outcome, TraceSink};
use super::work_guard::WorkGuard;
use crate::case::Case;
use crate::explore::schedule::{CheckInName, ConnName};
use crate::kernel::{EventKind, HostId, Kernel, KernelEvent, ListenerId, ReadOutcome, SockId, SockToken};
use crate::oracle::{Finding, Verdict};
use crate::spare::{emptied, emptied_within};
use crate::words::{host_addr, kernel_line, ConnRef};
use bootsim_core::seed::derive;

/// A protocol's listener key.
type Key<P> = <<P as Protocol>::Node as bootsim_core::seam::Node>::Listener;
use bootsim_core::seam::CompletionOf;

fn addr_host(addr: SocketAddr) -> Option<(u32, u16)> {
    match addr {
        SocketAddr::V4(a) => {
            let [ten, a1, a2, a3] = a.ip().octets();
            let x = u32::from(a1) << 16 | u32::from(a2) << 8 | u32::from(a3);
            (ten == 10 && x > 0).then_some((x - 1, a.port()))
        }
        SocketAddr::V6(_) => None,
    }
}

/// The connection ids each node's window of sockets spans (a rank has a few connections open
/// at a time besides its long-lived ones).
const NODE_CONNS: usize = 16;

/// Received-bytes buffers kept for reuse: more than the reads queued at once in practice.
const SPARE_BUFFERS: usize = 64;

/// Engine-level timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    /// A node's own timeout (stagger, header and op timeouts).
    Node(Node),
    /// Retry a refused connect.
    Retry { node: Node, conn: ConnId },
    /// A drain poll found SIOCOUTQ at zero.
    DrainDone { sock: SockId },
    /// A drain's deadline.
    DrainDeadline { sock: SockId },
    /// The application's accept() on this listener gets the CPU time it needed.
    Accept { l: ListenerId },
    /// The application's read() on this socket (`node`'s `conn`) gets the CPU time it needed.
    Read { sock: SockId, node: Node, conn: ConnId },
}

struct Dialing {
    addr: SocketAddr,
    retry: ConnectRetry,
}

/// What the fast engine does after a dialing connection's kernel event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Redial {
    /// Dial again (a fresh kernel socket) at this time.
    At(Instant),
    /// Fail the connect with this reason (core's [`bootsim_core::GaveUp`] text).
    Fail(String),
}

/// The fast engine's reaction to a kernel connect event under NVSHMEM's retry: an RST is a
/// refusal, unanswered SYNs a timeout; other events are not connect failures (`None`).
pub(crate) fn on_connect_event(retry: &mut ConnectRetry, now: Instant, kind: &EventKind) -> Option<Redial> {
    let failure = match kind {
        EventKind::Refused { .. } => ConnectFailure::Refused,
        EventKind::ConnectTimedOut { .. } => ConnectFailure::TimedOut,
        _ => return None,
    };
    Some(match retry.on_failure(failure) {
        RetryStep::RedialAfter(pause) => Redial::At(now + pause),
        RetryStep::GiveUp(why) => Redial::Fail(why.to_string()),
    })
}

struct Drain {
    node: Node,
    conn: ConnId,
    start: Instant,
    deadline: Instant,
    /// `drain_fail=` names it: it gives up at its deadline whatever was acknowledged.
    forced_fail: bool,
}

/// What an explicit schedule (`accept=`, `drain_fail=`) needs: every rank-to-peer-listener
/// connection's name (and every check-in's), and how far each listener's accepts have gone.
#[derive(Default)]
struct Names {
    /// Connections each rank opened to the root's listener so far.
    check_ins: BTreeMap<u32, u32>,
    /// A rank's check-in by its core id.
    check_in_by_conn: BTreeMap<(Node, ConnId), CheckInName>,
    /// Every kernel connection dialed for a named check-in (retries included).
    check_in_by_kconn: BTreeMap<u64, CheckInName>,
    /// Accepts taken so far on the root's listener.
    root_accepts: usize,
    /// Connections each rank opened to each peer listener so far.
    dials: BTreeMap<(u32, u32), u32>,
    /// A rank's dialed connection by its core id.
    by_conn: BTreeMap<(Node, ConnId), ConnName>,
    /// Every kernel connection dialed for a named one (retries included).
    by_kconn: BTreeMap<u64, ConnName>,
    /// Accepts taken so far on each rank's peer listener.
    accepts: BTreeMap<u32, usize>,
    /// Listeners whose scheduled accept waits for a connection not yet queued.
    waiting: BTreeSet<ListenerId>,
}

/// The fast engine's whole world, running protocol `P`.
struct World<'a, P: Protocol> {
    case: &'a Case,
    protocol: &'a P,
    now: Instant,
    kernel: Kernel,
    root: P::Node,
    ranks: Vec<P::Node>,
    /// The ports of the protocol's rank-to-rank listeners (the ones `accept=` orders).
    peer_ports: bootsim_core::seam::PeerPorts,
    /// Each node's sockets by its own connection id, by [`slot`]; the other way, each socket's
    /// kernel token names its node and connection ([`token`]), read back for the events that
    /// need their owner.
    sock_of: Vec<IdTable<SockId, NODE_CONNS>>,
    listeners: FxHashMap<(Node, Key<P>), ListenerId>,
    listener_owner: FxHashMap<ListenerId, (Node, Key<P>)>,
    pending_accept: FxHashMap<ListenerId, ConnId>,
    dialing: FxHashMap<(Node, ConnId), Dialing>,
    drains: FxHashMap<SockId, Drain>,
    timers: BinaryHeap<Reverse<(Instant, u64, Timer)>>,
    timer_seq: u64,
    /// Each node's own timeout as armed, by [`slot`].
    node_timer: Vec<Option<Instant>>,
    work: VecDeque<(Node, OwnedInput<Key<P>>)>,
    /// NVSHMEM's connect retry (every 1 ms on "refused" up to 20 000 times; 3 timeouts).
    retry: RetryPolicy,
    out: Outcome,
    sink: TraceSink,
    /// The write buffer the state machines fill (`poll_output`).
    tx: Vec<u8>,
    /// Buffers of received bytes already handed to their node, reused by `read_owned` so a frame
    /// received costs no allocation.
    spare: Vec<Vec<u8>>,
    remaining: usize,
    names: Names,
    /// When each node's process is next free to run (`app_cpu` model), and the socket calls
    /// it has started but not yet finished.
    app: AppCpu,
}

/// The application's own CPU time (the kernel's `syscall_cost` and `app_work` knobs): each
/// node's process runs its socket calls and its own work one at a time on its core, where
/// softirq preempts it. Off in every profile but `cpu`.
#[derive(Default)]
struct AppCpu {
    /// Whether it is modelled.
    on: bool,
    /// When each node's process has finished what it was given so far.
    free: BTreeMap<Node, Instant>,
    /// Accept and read calls in progress (their timer is set).
    started: BTreeSet<Timer>,
}

/// The most bytes one read takes (a read buffer's size: a frame longer is read in pieces).
const READ_BUF: usize = 64 << 10;

/// The engine's own tables of this thread's last run, emptied, with their room (a 2-rank run
/// grew them from nothing).
#[derive(Default)]
struct Spare {
    pending_accept: FxHashMap<ListenerId, ConnId>,
    dialing: FxHashMap<(Node, ConnId), Dialing>,
    drains: FxHashMap<SockId, Drain>,
    timers: Vec<Reverse<(Instant, u64, Timer)>>,
    tx: Vec<u8>,
    spare: Vec<Vec<u8>>,
}

/// The largest write buffer kept for the next run (a message can be 64 MiB).
const SPARE_TX_BYTES: usize = 1 << 20;

thread_local! {
    /// What this thread's last run left ([`Spare`]).
    static SPARE: std::cell::Cell<Option<Spare>> = const { std::cell::Cell::new(None) };
}

/// Runs a case of `protocol` (its `variant` and `workload`) on the fast engine; `trace` keeps
/// the full trace (otherwise only counters, the run judged as it goes).
pub fn run<P>(protocol: &P, variant: &P::Variant, workload: &P::Workload, case: &Case, trace: bool) -> Outcome
where
    P: Protocol,
    P::Judge: bootsim_core::seam::Judge<Report = (Verdict, Vec<Finding>)> + 'static,
{
    let n = case.ranks();
    let mut cfg = case.kernel_config().clone();
    // The kernel's trace-only records (stalls, enqueues, retransmissions) serve the trace
    // alone: an untraced run drops them unread, so the kernel need not make them.
    cfg.trace &= trace;
    let kernel = Kernel::new(cfg, derive(case.seed(), "kernel", 0), n);
    let now = Instant::ZERO;
    let setup = Setup { variant, workload, seed: case.seed(), n, root_ip: host_addr(0, 0).ip() };
    let Nodes { root, ranks } = protocol.nodes(&setup);
    let spare = SPARE.take().unwrap_or_default();
    let mut w = World {
        case,
        protocol,
        now,
        kernel,
        root,
        ranks,
        peer_ports: bootsim_core::seam::PeerPorts::of::<Key<P>>(),
        sock_of: (0..=n).map(|_| IdTable::default()).collect(),
        listeners: FxHashMap::default(),
        listener_owner: FxHashMap::default(),
        pending_accept: spare.pending_accept,
        dialing: spare.dialing,
        drains: spare.drains,
        timers: BinaryHeap::from(spare.timers),
        timer_seq: 0,
        node_timer: vec![None; n as usize + 1],
        work: VecDeque::new(),
        retry: RetryPolicy::default(),
        // A traced run keeps everything for explain, the timeline and shrink; any other run
        // is judged as it goes and keeps only what is in flight.
        out: if trace {
            Outcome::new(n as usize)
        } else {
            Outcome::streaming(n as usize, Box::new(protocol.judge(&setup)))
        },
        sink: TraceSink::new(trace),
        tx: spare.tx,
        spare: spare.spare,
        remaining: n as usize + 1,
        names: Names::default(),
        app: AppCpu { on: case.kernel_config().load.cpu.app_on(), ..AppCpu::default() },
    };
    trace_line!(w.sink, now, "world", "case {case}");
    trace_line!(w.sink, now, "world", "kernel {}", w.kernel.config());
    w.collect(Node::Root);
    for r in 0..n {
        w.collect(Node::Rank(r));
    }
    w.run_loop();
    w.finish()
}

impl<P: Protocol> World<'_, P> {
    /// The node's state machine.
    fn node(&mut self, node: Node) -> &mut P::Node {
        match node {
            Node::Root => &mut self.root,
            Node::Rank(r) => &mut self.ranks[r as usize],
        }
    }

    fn run_loop(&mut self) {
        let deadline = Instant::ZERO + self.case.deadline();
        let mut guard = WorkGuard::new(self.case.ranks());
        loop {
            while let Some((node, d)) = self.work.pop_front() {
                self.deliver(node, d);
                if let Some(why) = guard.step(self.now, self.case, || self.kernel.work()) {
                    self.out.gave_up = Some(why);
                    return;
                }
            }
            // Rewinds the empty ring (`pop_front` leaves it where it was): each round then
            // writes the same few warm lines, not the next ones of its largest capacity.
            self.work.clear();
            if self.remaining == 0 {
                return;
            }
            if let Some(why) = guard.step(self.now, self.case, || self.kernel.work()) {
                self.out.gave_up = Some(why);
                return;
            }
            let next_kernel = self.kernel.poll_timeout();
            let next_timer = self.timers.peek().map(|Reverse((t, _, _))| *t);
            let next = match (next_kernel, next_timer) {
                (Some(k), Some(t)) => k.min(t),
                (Some(at), None) | (None, Some(at)) => at,
                (None, None) => return,
            };
            if next > deadline {
                self.now = deadline;
                return;
            }
            self.now = self.now.max(next);
            // The kernel runs on through instants where nothing the ranks or this loop could
            // react to happens, up to this loop's own next timer: same order, fewer wake-ups.
            let limit = next_timer.map_or(deadline, |t| t.min(deadline));
            self.now = self.kernel.handle_timeout_until(self.now, limit);
            self.kernel_events();
            // Only an explicit schedule makes listeners wait (and a clone per wake-up cost more
            // than the rest of this loop's bookkeeping).
            if !self.names.waiting.is_empty() {
                for l in self.names.waiting.clone() {
                    self.try_accept(l);
                }
            }
            while let Some(Reverse((t, _, timer))) = self.timers.peek().copied() {
                if t > self.now {
                    break;
                }
                self.timers.pop();
                self.fire(timer);
            }
        }
    }

    fn finish(mut self) -> Outcome {
        // Every record the calls that ended the run made is traced, as the counters count
        // them: the trace has all the kernel did. They are trace-only (a packet's loss or RX
        // stall, decided when it is sent; an accept; a connect's SYN): only the kernel's timers
        // and packets make an application event, and `kernel_events` took those. Were one
        // left, it is traced too, as turmoil's `Gate::trace_left` does, so the engines agree.
        while let Some(KernelEvent { at, kind }) = self.kernel.poll_event() {
            if self.sink.enabled() {
                self.trace_kernel(at, kind);
            }
        }
        self.out.end = self.now;
        self.out.kernel = self.kernel.stats();
        for (r, rank) in self.ranks.iter().enumerate() {
            self.out.rank_stopped(r as u32, rank.awaited(), rank.unexpected());
        }
        self.out.root_stopped(self.root.awaited());
        self.out.trace = self.sink.finish();
        SPARE.set(Some(Spare {
            pending_accept: emptied(std::mem::take(&mut self.pending_accept)),
            dialing: emptied(std::mem::take(&mut self.dialing)),
            drains: emptied(std::mem::take(&mut self.drains)),
            timers: emptied(std::mem::take(&mut self.timers).into_vec()),
            tx: emptied_within(std::mem::take(&mut self.tx), SPARE_TX_BYTES),
            spare: std::mem::take(&mut self.spare),
        }));
        self.out
    }

    fn schedule(&mut self, at: Instant, timer: Timer) {
        self.timer_seq += 1;
        self.timers.push(Reverse((at, self.timer_seq, timer)));
    }

    fn fire(&mut self, timer: Timer) {
        match timer {
            Timer::Node(node) => {
                let armed = &mut self.node_timer[slot(node)];
                if *armed == Some(self.now) {
                    *armed = None;
                }
                let now = self.now;
                self.node(node).handle_timeout(now);
                self.collect(node);
            }
            Timer::Retry { node, conn } => {
                if let Some(d) = self.dialing.get(&(node, conn)) {
                    let addr = d.addr;
                    self.dial(node, conn, addr);
                }
            }
            Timer::DrainDone { sock } => {
                if let Some(d) = self.drains.remove(&sock) {
                    // The rank's DrainCompleted event writes the trace line.
                    let waited = self.now - d.start;
                    self.work.push_back((d.node, OwnedInput::Drained { conn: d.conn, waited }));
                }
            }
            Timer::Accept { l } => {
                self.app.started.remove(&timer);
                self.try_accept(l);
            }
            Timer::Read { sock, node, conn } => {
                self.app.started.remove(&timer);
                if self.kernel.token(sock) == Some(token(node, conn)) {
                    self.read_owned(sock, node, conn);
                }
            }
            Timer::DrainDeadline { sock } => {
                if let Some(d) = self.drains.remove(&sock) {
                    let waited = self.now - d.start;
                    // The rank's DrainGaveUp event writes the trace line.
                    let unacked = self.kernel.outq(sock);
                    self.work.push_back((d.node, OwnedInput::DrainTimedOut { conn: d.conn, waited, unacked }));
                }
            }
        }
    }

    fn host(node: Node) -> u32 {
        match node {
            Node::Root => 0,
            Node::Rank(r) => r,
        }
    }

    /// Charges `node`'s process `cost` of CPU after what it already has to do; returns when it
    /// is done (now when the application's CPU time is not modelled).
    fn app_cpu(&mut self, node: Node, cost: Duration) -> Instant {
        if !self.app.on {
            return self.now;
        }
        let start = self.app.free.get(&node).copied().unwrap_or(self.now).max(self.now);
        let done = self.kernel.app_run(self.now, HostId(Self::host(node)), start, cost);
        self.app.free.insert(node, done);
        done
    }

    /// A socket call of `node`'s process (accept, read) that takes effect once it has had its
    /// CPU time: now when that is not modelled, else by `timer`, once per call in progress.
    #[inline(always)]
    fn syscall(&mut self, node: Node, timer: Timer) -> bool {
        !self.app.on || self.start_syscall(node, timer)
    }

    /// [`World::syscall`] where the application's CPU time is modelled (the `cpu` profile
    /// only: kept out of line, off every other run's packet path): starts the call once.
    #[inline(never)]
    fn start_syscall(&mut self, node: Node, timer: Timer) -> bool {
        if self.app.started.insert(timer) {
            let cost = self.kernel.config().load.cpu.syscall_cost;
            let done = self.app_cpu(node, cost);
            self.schedule(done, timer);
        }
        false
    }

    /// Charges a socket call that takes effect at once (connect, write, close) to `node`.
    fn charge_syscall(&mut self, node: Node) {
        if self.app.on {
            let cost = self.kernel.config().load.cpu.syscall_cost;
            self.app_cpu(node, cost);
        }
    }

    fn deliver(&mut self, node: Node, d: OwnedInput<Key<P>>) {
        if self.app.on {
            let work = self.kernel.config().load.cpu.app_work;
            self.app_cpu(node, work);
        }
        let now = self.now;
        self.node(node).handle(now, d.as_input());
        if let OwnedInput::Received { mut bytes, .. } = d {
            if self.spare.len() < SPARE_BUFFERS {
                bytes.clear();
                self.spare.push(bytes);
            }
        }
        self.collect(node);
    }

    /// Drains a node's outputs, carries them out, and re-arms its timer.
    // Never inlined: `bootsim bench`'s profile reads this function's inclusive count, which
    // must hold every call in any build.
    #[inline(never)]
    fn collect(&mut self, node: Node) {
        let mut tx = std::mem::take(&mut self.tx);
        loop {
            let Some(out) = self.node(node).poll_output(&mut tx) else { break };
            // Writes, most outputs, are carried out here; the rest out of line (inlined, their
            // arms made every call of this one set up what they would need: 80 instructions).
            match out {
                Output::Effect(Effect::Write { conn, len }) => self.write(node, conn, len, &mut tx),
                out => self.execute(node, out),
            }
        }
        self.tx = tx;
        let next = self.node(node).poll_timeout();
        if let Some(t) = next {
            let armed = &mut self.node_timer[slot(node)];
            if *armed != Some(t) {
                *armed = Some(t);
                self.schedule(t.max(self.now), Timer::Node(node));
            }
        }
    }

    /// Writes `tx`, `len` bytes, on `node`'s connection `conn`: the kernel takes them, with
    /// the buffer itself when its send buffer is empty (`tx` may come back another buffer).
    #[inline]
    fn write(&mut self, node: Node, conn: ConnId, len: usize, tx: &mut Vec<u8>) {
        if let Some(sock) = self.sock_of[slot(node)].get(conn.0) {
            self.charge_syscall(node);
            let now = self.now;
            trace_line!(self.sink, now, node_name(node), "write {len} bytes on {}", local(conn, sock));
            if let Err(e) = self.kernel.write_owned(now, sock, tx) {
                trace_line!(self.sink, now, node_name(node), "write on {} failed: {e}", local(conn, sock));
            }
        }
    }

    /// Carries out one output other than a write: it has no write buffer, as `collect` carries
    /// out writes, most outputs, itself ([`World::write`]). Out of line.
    #[inline(never)]
    fn execute(&mut self, node: Node, out: NodeOutput<P::Node>) {
        let effect = match out {
            Output::Effect(e) => e,
            Output::Observe(Observation::Completed(c)) => return self.completed(node, c),
            Output::Observe(Observation::Event(e)) => return self.observed(node, e),
        };
        let now = self.now;
        let host = Self::host(node);
        let name = node_name(node);
        match effect {
            Effect::Listen { listener } => {
                let port = listener.port();
                self.peer_ports.listened(listener);
                match self.kernel.listen(now, HostId(host), port) {
                    Ok(l) => {
                        self.listeners.insert((node, listener), l);
                        self.listener_owner.insert(l, (node, listener));
                        let addr = host_addr(host, port);
                        trace_line!(self.sink, now, name, "listen: {listener} at {addr}");
                        self.work.push_back((node, OwnedInput::Listening { listener, addr }));
                    }
                    Err(e) => trace_line!(self.sink, now, name, "listen: {listener} failed: {e}"),
                }
            }
            Effect::Accept { listener, conn } => {
                let Some(&l) = self.listeners.get(&(node, listener)) else { return };
                self.pending_accept.insert(l, conn);
                if self.syscall(node, Timer::Accept { l }) {
                    self.try_accept(l);
                }
            }
            Effect::CloseListener { listener } => {
                if let Some(l) = self.listeners.remove(&(node, listener)) {
                    self.pending_accept.remove(&l);
                    self.kernel.close_listener(now, l);
                }
            }
            Effect::Connect { conn, addr } => {
                // Names serve only an explicit schedule; without one, keeping a name for every
                // connection of the run was memory for nothing (1.1 M entries at 1024 ranks).
                let named = !self.case.schedule().is_empty();
                if let (true, Node::Rank(from), Some((to, port))) = (named, node, addr_host(addr)) {
                    if self.peer_ports.contains(port) && to < self.case.ranks() {
                        let k = self.names.dials.entry((from, to)).or_insert(0);
                        self.names.by_conn.insert((node, conn), ConnName { from, to, k: *k });
                        *k += 1;
                    } else if to == 0 && Key::<P>::ALL.iter().any(|l| l.is_root() && l.port() == port) {
                        let k = self.names.check_ins.entry(from).or_insert(0);
                        self.names.check_in_by_conn.insert((node, conn), CheckInName { from, k: *k });
                        *k += 1;
                    }
                }
                self.dialing.insert((node, conn), Dialing { addr, retry: ConnectRetry::new(self.retry.clone()) });
                self.charge_syscall(node);
                self.dial(node, conn, addr);
            }
            Effect::Write { .. } => unreachable!("collect carries out every write"),
            Effect::Drain { conn, deadline } => {
                let Some(sock) = self.sock_of[slot(node)].get(conn.0) else { return };
                let forced_fail =
                    self.names.by_conn.get(&(node, conn)).is_some_and(|n| self.case.schedule().drain_fail.contains(n));
                if self.kernel.outq(sock) == 0 && !forced_fail {
                    self.work.push_back((node, OwnedInput::Drained { conn, waited: Duration::ZERO }));
                } else {
                    self.drains.insert(sock, Drain { node, conn, start: now, deadline, forced_fail });
                    self.schedule(deadline, Timer::DrainDeadline { sock });
                }
            }
            Effect::Close { conn } => {
                if let Some(sock) = self.sock_of[slot(node)].remove(conn.0) {
                    self.charge_syscall(node);
                    self.kernel.close(now, sock);
                    trace_line!(self.sink, now, name, "close {}", local(conn, sock));
                }
                self.dialing.remove(&(node, conn));
            }
        }
    }

    /// Records a protocol event (the message log, drains, strays) and its trace line.
    fn observed(&mut self, node: Node, e: <P::Node as bootsim_core::seam::Node>::Event) {
        let now = self.now;
        let sock = e.conn().and_then(|c| self.sock_of[slot(node)].get(c.0));
        let kconn = sock.map(SockId::conn);
        if self.sink.enabled() {
            let words = self.protocol.event_words(&e, kconn);
            self.sink.line(now, node_name(node), format_args!("{words}"));
        }
        self.out.record_event(now, node, e, kconn);
    }

    fn completed(&mut self, node: Node, c: <P::Node as bootsim_core::seam::Node>::Completion) {
        let now = self.now;
        let name = node_name(node);
        if self.sink.enabled() {
            let words = self.protocol.completion_words(&c);
            self.sink.line(now, name, format_args!("{words}"));
        }
        match node {
            Node::Root => {
                self.remaining -= 1;
                self.out.root_finished(
                    c.into_result().err().map(|e| bootsim_core::RecordedError::of_root::<CompletionOf<P>>(&e)),
                );
            }
            Node::Rank(r) => {
                // The rank starts its next operation itself; it is done once none is left.
                self.out.completed(r, now, c);
                if self.ranks[r as usize].is_finished() {
                    self.rank_done(r);
                }
            }
        }
    }

    fn rank_done(&mut self, r: u32) {
        if self.out.rank_ended(r, self.now) {
            self.remaining -= 1;
        }
    }

    /// NVSHMEM's connect retry (one state machine in core for every driver): redial after
    /// its pause, or report the connect failed.
    fn connect_failed(&mut self, node: Node, conn: ConnId, kind: &EventKind) {
        let Some(d) = self.dialing.get_mut(&(node, conn)) else { return };
        match on_connect_event(&mut d.retry, self.now, kind) {
            Some(Redial::At(at)) => self.schedule(at, Timer::Retry { node, conn }),
            Some(Redial::Fail(reason)) => self.work.push_back((node, OwnedInput::ConnectFailed { conn, reason })),
            None => {}
        }
    }

    fn dial(&mut self, node: Node, conn: ConnId, addr: SocketAddr) {
        let now = self.now;
        let Some((to, port)) = addr_host(addr).filter(|(h, _)| *h < self.case.ranks()) else {
            self.work.push_back((node, OwnedInput::ConnectFailed { conn, reason: format!("no route to {addr}") }));
            return;
        };
        // The old socket's later events (a stale refusal or timeout) are no longer this conn's.
        if let Some(old) = self.sock_of[slot(node)].remove(conn.0) {
            self.kernel.set_token(old, None);
        }
        let sock = self.kernel.connect_with(now, HostId(Self::host(node)), HostId(to), port, Some(token(node, conn)));
        trace_line!(self.sink, now, node_name(node), "connect {} to {addr}", local(conn, sock));
        self.sock_of[slot(node)].insert(conn.0, sock);
        if let Some(&name) = self.names.by_conn.get(&(node, conn)) {
            self.names.by_kconn.insert(sock.conn(), name);
        }
        if let Some(&name) = self.names.check_in_by_conn.get(&(node, conn)) {
            self.names.check_in_by_kconn.insert(sock.conn(), name);
        }
    }

    /// Takes the next connection for `l`'s outstanding accept: the one `accept=` names for a
    /// rank's peer listener or the root's (waiting until it is queued), else the kernel queue's
    /// oldest.
    fn try_accept(&mut self, l: ListenerId) {
        let Some(&conn) = self.pending_accept.get(&l) else {
            self.names.waiting.remove(&l);
            return;
        };
        let (node, listener) = self.listener_owner[&l];
        let peer_rank = match (node, listener) {
            (Node::Rank(r), l) if l.is_peer() => Some(r),
            _ => None,
        };
        let root = node == Node::Root && listener.is_root();
        let nth = match peer_rank {
            Some(r) => self.names.accepts.get(&r).copied().unwrap_or(0),
            None => self.names.root_accepts,
        };
        let schedule = self.case.schedule();
        let want_peer = peer_rank.and_then(|r| schedule.accept_at(r, nth));
        let want_check_in = if root { schedule.check_in_at(nth) } else { None };
        let taken = if want_peer.is_some() || want_check_in.is_some() {
            let names = &self.names;
            let got = self.kernel.accept_where(self.now, l, |child| {
                let k = child.conn();
                want_peer.is_some_and(|w| names.by_kconn.get(&k) == Some(&w))
                    || want_check_in.is_some_and(|w| names.check_in_by_kconn.get(&k) == Some(&w))
            });
            if got.is_none() {
                self.names.waiting.insert(l);
            }
            got
        } else {
            self.kernel.accept(self.now, l)
        };
        let Some((sock, flow)) = taken else { return };
        self.names.waiting.remove(&l);
        if let Some(r) = peer_rank {
            self.names.accepts.insert(r, nth + 1);
        } else if root {
            self.names.root_accepts = nth + 1;
        }
        self.pending_accept.remove(&l);
        self.sock_of[slot(node)].insert(conn.0, sock);
        self.kernel.set_token(sock, Some(token(node, conn)));
        let from = host_addr(flow.client.0, flow.client_port);
        trace_line!(self.sink, self.now, node_name(node), "accept {} from {from}", local(conn, sock));
        self.work.push_back((node, OwnedInput::Accepted { conn, from }));
        self.read_owned(sock, node, conn);
    }

    /// The node and connection `sock` is, from its kernel token (looked up only for the
    /// events that need it: a drain's `AllAcked` does not).
    fn owner(&self, sock: SockId) -> Option<(Node, ConnId)> {
        self.kernel.token(sock).map(owner_of)
    }

    /// Reads everything readable on `node`'s socket `sock` (its `conn`) and queues it for it.
    fn read_owned(&mut self, sock: SockId, node: Node, conn: ConnId) {
        loop {
            // The kernel appends to the buffer handed on, and says what is left: no copy out of
            // a read buffer, no last read only to learn it would block.
            let mut bytes = self.spare.pop().unwrap_or_default();
            let (n, next) = self.kernel.read_append(sock, &mut bytes, READ_BUF);
            if n > 0 {
                self.work.push_back((node, OwnedInput::Received { conn, bytes }));
            } else if bytes.capacity() > 0 {
                self.spare.push(bytes);
            }
            let reason = match next {
                ReadOutcome::Data(_) => continue,
                ReadOutcome::WouldBlock => return,
                ReadOutcome::Eof => CloseReason::Eof,
                ReadOutcome::Reset => CloseReason::Reset,
                // The kernel's own give-up (`tcp_retries2`): Linux's read says ETIMEDOUT.
                ReadOutcome::TimedOut => CloseReason::TimedOut,
            };
            self.work.push_back((node, OwnedInput::PeerClosed { conn, reason }));
            return;
        }
    }

    /// A trace-only kernel record, kept under its connection and traced.
    fn trace_kernel(&mut self, at: Instant, kind: EventKind) {
        let conn = self.out.record_kernel(at, kind);
        self.sink.line(at, "kernel", format_args!("{}", kernel_line(&kind, conn)));
    }

    fn kernel_events(&mut self) {
        while let Some(KernelEvent { at, kind }) = self.kernel.poll_event() {
            if !kind.is_app() {
                // Trace-only records: sweeps run untraced, and explanations re-run traced.
                if self.sink.enabled() {
                    self.trace_kernel(at, kind);
                }
                continue;
            }
            match kind {
                EventKind::Connected { sock } => {
                    if let Some((node, conn)) = self.owner(sock) {
                        self.dialing.remove(&(node, conn));
                        trace_line!(self.sink, at, node_name(node), "connected {}", local(conn, sock));
                        self.work.push_back((node, OwnedInput::Connected { conn }));
                    }
                }
                EventKind::Refused { sock } | EventKind::ConnectTimedOut { sock } => {
                    if let Some((node, conn)) = self.owner(sock) {
                        self.connect_failed(node, conn, &kind);
                    }
                }
                EventKind::Acceptable { listener } => {
                    let waiting = self.pending_accept.contains_key(&listener);
                    match self.listener_owner.get(&listener).copied() {
                        Some((node, _)) if waiting && !self.syscall(node, Timer::Accept { l: listener }) => {}
                        _ => self.try_accept(listener),
                    }
                }
                EventKind::Readable { sock, .. }
                | EventKind::Eof { sock }
                | EventKind::Reset { sock }
                | EventKind::Aborted { sock } => {
                    if let Some((node, conn)) = self.owner(sock) {
                        if self.syscall(node, Timer::Read { sock, node, conn }) {
                            self.read_owned(sock, node, conn);
                        }
                    }
                }
                EventKind::AllAcked { sock } => {
                    if let Some(d) = self.drains.get(&sock).filter(|d| !d.forced_fail) {
                        // The drain polls on whole intervals from its start: it sees zero at the next.
                        let seen = d.start + DrainPoll::new(d.deadline - d.start).reading_at_or_after(at - d.start);
                        if seen < d.deadline {
                            self.schedule(seen, Timer::DrainDone { sock });
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// A node's index in the engine's per-node tables: the root first, then the ranks.
fn slot(node: Node) -> usize {
    match node {
        Node::Root => 0,
        Node::Rank(r) => r as usize + 1,
    }
}

/// The kernel token of `node`'s connection `conn`'s socket: its [`slot`] and the connection.
fn token(node: Node, conn: ConnId) -> SockToken {
    SockToken((slot(node) as u128) << 64 | u128::from(conn.0))
}

/// The node and connection a [`token`] names.
fn owner_of(t: SockToken) -> (Node, ConnId) {
    let node = match (t.0 >> 64) as u32 {
        0 => Node::Root,
        s => Node::Rank(s - 1),
    };
    (node, ConnId(t.0 as u64))
}

fn node_name(node: Node) -> Node {
    node
}

/// A node's connection in the trace's words: the kernel's number, the node's own id after.
fn local(conn: ConnId, sock: SockId) -> ConnRef {
    ConnRef { local: conn, kconn: Some(sock.conn()) }
}
