//! The kernel gate: turmoil carries the bytes, the seeded kernel model decides when each
//! connection reaches the protocol's `accept()` and when a sender's send queue drains.
//!
//! turmoil completes `connect()` only inside the server's `accept()` (its `TcpListener` hands the
//! SYN to the server and the client's connect returns when the server accepts) and has no
//! send-queue accounting (no `SIOCOUTQ`). So every listener is accepted eagerly (the
//! kernel finishing the handshake), each connection is mirrored into the kernel model (connect,
//! write, close), and the protocol's `accept()` takes connections in the order the model's
//! accept queue releases them. `SIOCOUTQ` is the model's `outq`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use bootsim_core::{ConnId, Instant};

use crate::engine::outcome::TraceSink;
use crate::kernel::{EventKind, Flow, HostId, Kernel, KernelEvent, ListenerId, SockId};
use crate::words::{kernel_conn, kernel_line};

/// The world's time: turmoil's simulated clock as a core instant.
pub fn sim_now() -> Instant {
    let d = turmoil::sim_elapsed().unwrap_or_default();
    Instant::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// What a rank last said it waits for, and its unexpected list (peer, tag), head first.
pub type RankWait = (Option<bootsim_core::Awaited>, Vec<(i32, i32)>);

/// Where a connect's handshake stands in the kernel model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handshake {
    /// Still in progress.
    Pending,
    /// The client end is ESTABLISHED.
    Established,
    /// The server answered RST (no listener).
    Refused,
    /// Every SYN retransmission went unanswered (ETIMEDOUT).
    TimedOut,
}

/// State shared by every host's backend (turmoil runs all hosts on one thread).
pub struct Gate {
    kernel: Kernel,
    /// Turmoil's view of a connection (client addr, server addr) → the model's client socket.
    by_pair: BTreeMap<(SocketAddr, SocketAddr), SockId>,
    /// Streams the eager acceptors took, waiting for the model to release them, by model child.
    arrived: BTreeMap<SockId, (turmoil::net::TcpStream, SocketAddr)>,
    /// Streams accepted before their connector registered the pair.
    unmatched: BTreeMap<(SocketAddr, SocketAddr), turmoil::net::TcpStream>,
    /// Model children released by the model's accept queue, in order, per model listener.
    released: BTreeMap<ListenerId, Vec<SockId>>,
    /// Closes the application made before the model's handshake completed (turmoil connects
    /// sooner): carried out when the model reports the connection established.
    pending_close: BTreeSet<SockId>,
    /// Model client sockets established so far.
    established: BTreeSet<SockId>,
    /// Model client sockets whose handshake failed, and how.
    failed: BTreeMap<SockId, Handshake>,
    /// Which model socket each host's state-machine connection is.
    pub conn_ids: BTreeMap<(u32, ConnId), SockId>,
    /// The model's trace events (kept only when tracing), for explanations.
    pub notes: Vec<(Instant, EventKind)>,
    /// The connection each traced 4-tuple belongs to (names packet events in the trace).
    flows: BTreeMap<Flow, u64>,
    /// The last wait each host's rank reported, with its unexpected list.
    pub waits: BTreeMap<u32, RankWait>,
    /// When a rank's wait last changed.
    last_change: Instant,
    /// The latest time any host showed the gate.
    clock: Instant,
    /// The trace.
    pub sink: TraceSink,
}

/// A shared handle on the gate.
#[derive(Clone)]
pub struct GateHandle(Arc<Mutex<Gate>>);

impl GateHandle {
    /// A gate over `kernel`.
    pub fn new(kernel: Kernel, trace: bool) -> Self {
        GateHandle(Arc::new(Mutex::new(Gate {
            kernel,
            by_pair: BTreeMap::new(),
            arrived: BTreeMap::new(),
            unmatched: BTreeMap::new(),
            released: BTreeMap::new(),
            pending_close: BTreeSet::new(),
            established: BTreeSet::new(),
            failed: BTreeMap::new(),
            conn_ids: BTreeMap::new(),
            notes: Vec::new(),
            flows: BTreeMap::new(),
            waits: BTreeMap::new(),
            last_change: Instant::ZERO,
            clock: Instant::ZERO,
            sink: TraceSink::new(trace),
        })))
    }

    /// Locks the gate and brings the kernel model up to turmoil's clock.
    pub fn lock(&self) -> MutexGuard<'_, Gate> {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        g.pump();
        g
    }

    /// Brings the kernel model up to turmoil's clock (as every call of a host does).
    pub fn advance(&self) {
        drop(self.lock());
    }

    /// Locks the gate without advancing the model (for the engine's loop, outside any host).
    pub fn peek(&self) -> MutexGuard<'_, Gate> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the gate back after the simulation.
    pub fn into_inner(self) -> Option<Gate> {
        Arc::try_unwrap(self.0).ok().map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Gate {
    /// turmoil's clock, never going backwards: hosts tick one after another within a step
    /// (and a crash drops a host's sockets outside its tick), so two hosts can see times a tick
    /// apart; the model must only move forward.
    fn clock(&mut self) -> Instant {
        self.clock = self.clock.max(sim_now());
        self.clock
    }

    /// Advances the model to now and forgets its events (the gate asks it questions instead).
    fn pump(&mut self) {
        let now = self.clock();
        self.kernel.handle_timeout(now);
        while let Some(e) = self.kernel.poll_event() {
            self.trace(e);
            match e.kind {
                EventKind::Connected { sock } => {
                    self.established.insert(sock);
                    if self.pending_close.remove(&sock) {
                        self.kernel.close(now, sock);
                    }
                }
                EventKind::Refused { sock } => {
                    self.failed.insert(sock, Handshake::Refused);
                }
                EventKind::ConnectTimedOut { sock } => {
                    self.failed.insert(sock, Handshake::TimedOut);
                }
                _ => {}
            }
        }
    }

    /// Traces a model event (when tracing) and keeps a trace-only one for explanations.
    fn trace(&mut self, e: KernelEvent) {
        if self.sink.enabled() {
            let conn = kernel_conn(&e.kind, &mut self.flows);
            self.sink.line(e.at, "kernel", format_args!("{}", kernel_line(&e.kind, conn)));
            if !e.kind.is_app() {
                self.notes.push((e.at, e.kind));
            }
        }
    }

    /// Traces what the model recorded since the last pump, as a pump would: the records the
    /// calls that ended the run made (a packet's loss or RX stall, decided when it is sent; an
    /// accept; a connect's SYN), which its counters count.
    pub fn trace_left(&mut self) {
        while let Some(e) = self.kernel.poll_event() {
            self.trace(e);
        }
    }

    /// The kernel counters.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Opens the model's listener for `host:port`.
    pub fn listen(&mut self, host: u32, port: u16) -> std::io::Result<ListenerId> {
        let now = self.clock();
        self.kernel.listen(now, HostId(host), port).map_err(|e| std::io::Error::other(e.to_string()))
    }

    /// Closes the model's listener.
    pub fn close_listener(&mut self, l: ListenerId) {
        let now = self.clock();
        self.kernel.close_listener(now, l);
    }

    /// Mirrors a turmoil connect into the model; matches a stream the acceptor already took.
    pub fn connected(&mut self, from: u32, to: u32, port: u16, local: SocketAddr, remote: SocketAddr) -> SockId {
        let now = self.clock();
        let sock = self.kernel.connect(now, HostId(from), HostId(to), port);
        self.sink.line(
            now,
            format_args!("h{from}"),
            format_args!("connect {local} -> {remote} is connection {}", sock.conn()),
        );
        self.by_pair.insert((local, remote), sock);
        if let Some(stream) = self.unmatched.remove(&(local, remote)) {
            self.arrived.insert(sock.peer(), (stream, local));
        }
        sock
    }

    /// An eager acceptor took `stream` from `client` on `server`.
    pub fn arrived(&mut self, stream: turmoil::net::TcpStream, client: SocketAddr, server: SocketAddr) {
        let now = self.clock();
        self.sink.line(now, server, format_args!("handshake from {client} (turmoil)"));
        match self.by_pair.get(&(client, server)) {
            Some(sock) => {
                self.arrived.insert(sock.peer(), (stream, client));
            }
            None => {
                self.unmatched.insert((client, server), stream);
            }
        }
    }

    /// The next connection the model's accept queue releases on `l`, once turmoil has it too.
    pub fn try_accept(&mut self, l: ListenerId) -> Option<(turmoil::net::TcpStream, SocketAddr, SockId)> {
        let now = self.clock();
        while let Some((child, _)) = self.kernel.accept(now, l) {
            self.released.entry(l).or_default().push(child);
        }
        let queue = self.released.get_mut(&l)?;
        let first = *queue.first()?;
        let (stream, from) = self.arrived.remove(&first)?;
        queue.remove(0);
        self.sink.line(now, from, format_args!("accepted as connection {}", first.conn()));
        Some((stream, from, first))
    }

    /// Where the model's handshake of a client socket stands.
    pub fn handshake(&self, sock: SockId) -> Handshake {
        if self.established.contains(&sock) {
            Handshake::Established
        } else {
            self.failed.get(&sock).copied().unwrap_or(Handshake::Pending)
        }
    }

    /// Records what a rank's state machine waits for (shown when the run ends unfinished).
    pub fn report_wait(&mut self, host: u32, waiting: Option<bootsim_core::Awaited>, unexpected: Vec<(i32, i32)>) {
        let new = (waiting, unexpected);
        if self.waits.get(&host) != Some(&new) {
            self.last_change = self.clock();
            self.waits.insert(host, new);
        }
    }

    /// True when no rank's wait has changed for `quiet` and the kernel model has nothing left
    /// to do: nothing can happen any more (the fast engine stops there too).
    pub fn quiescent(&self, now: Instant, quiet: std::time::Duration) -> bool {
        now.saturating_since(self.last_change) >= quiet && self.kernel.poll_timeout().is_none()
    }

    /// Records that `conn` of the state machine on `host` is model socket `sock`.
    pub fn identify(&mut self, host: u32, conn: ConnId, sock: SockId) {
        self.conn_ids.insert((host, conn), sock);
    }

    /// Mirrors a write.
    pub fn write(&mut self, sock: SockId, len: usize) {
        // The model needs sizes, not contents.
        let now = self.clock();
        let _ = self.kernel.write(now, sock, &vec![0u8; len]);
    }

    /// Mirrors a close; one made while the model still handshakes waits for it (a close in
    /// SYN_SENT would abort the connection the application already saw established).
    pub fn close(&mut self, sock: SockId) {
        if self.established.contains(&sock) {
            let now = self.clock();
            self.kernel.close(now, sock);
        } else {
            self.pending_close.insert(sock);
        }
    }

    /// SIOCOUTQ in the model.
    pub fn outq(&self, sock: SockId) -> usize {
        self.kernel.outq(sock)
    }
}
