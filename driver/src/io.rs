//! The effects side of a driver: carries out outputs and turns task reports into inputs.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bootsim_core::seam::{Effect, ListenerKey, OwnedInput};
use bootsim_core::{ConnId, Instant};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::task::{AbortHandle, JoinSet};

use super::conn::{accept_task, reader_task, writer_task, Cmd, Report, Start};
use super::{Backend, FLUSH_BOUND};

/// An open connection: its writer's command queue and its reader, once started.
struct Conn {
    cmds: UnboundedSender<Cmd>,
    reader: Option<AbortHandle>,
}

/// Sockets, tasks and the clock of one state machine, whose listeners are keyed by `L`.
pub(super) struct Io<B: Backend, L> {
    backend: B,
    who: String,
    epoch: tokio::time::Instant,
    tx: UnboundedSender<Report<B, L>>,
    rx: UnboundedReceiver<Report<B, L>>,
    listeners: BTreeMap<L, Arc<B::Listener>>,
    accepts: BTreeMap<L, AbortHandle>,
    conns: BTreeMap<ConnId, Conn>,
    /// Accept and reader tasks: aborted at the end.
    tasks: JoinSet<()>,
    /// Writer tasks: awaited at the end so queued bytes are not lost.
    writers: JoinSet<()>,
    /// Each writer and whether its bytes can still reach a live peer: connected, and the peer
    /// has not closed. The others are not waited for at the end (a writer still dialling, or
    /// writing to a peer known dead, would only cost the flush bound).
    writer_state: BTreeMap<ConnId, (AbortHandle, Reach)>,
    pending: VecDeque<OwnedInput<L>>,
    /// Where the node's root listener ([`ListenerKey::is_root`]) listens, once it does.
    root_addr: Option<std::net::SocketAddr>,
}

/// Whether a writer's queued bytes can still be delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    /// Still connecting.
    Dialling,
    /// Connected, peer alive as far as is known.
    Live,
    /// The peer closed or reset the connection, or the connect failed.
    Dead,
}

impl<B: Backend, L: ListenerKey + Send> Io<B, L> {
    /// A driver whose epoch is now; `who` names it in traces.
    pub(super) fn new(backend: B, who: String) -> Self {
        let (tx, rx) = unbounded_channel();
        Io {
            backend,
            who,
            epoch: tokio::time::Instant::now(),
            tx,
            rx,
            listeners: BTreeMap::new(),
            accepts: BTreeMap::new(),
            conns: BTreeMap::new(),
            tasks: JoinSet::new(),
            writers: JoinSet::new(),
            writer_state: BTreeMap::new(),
            pending: VecDeque::new(),
            root_addr: None,
        }
    }

    /// The current time as a core instant.
    pub(super) fn now(&self) -> Instant {
        let d = tokio::time::Instant::now().saturating_duration_since(self.epoch);
        Instant::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// Where the node's root listener listens, once it does.
    pub(super) fn root_addr(&self) -> Option<std::net::SocketAddr> {
        self.root_addr
    }

    /// Carries out one effect; `tx` holds a write's bytes.
    pub(super) async fn execute(&mut self, out: Effect<L>, tx: &[u8]) {
        tracing::trace!(who = %self.who, ?out, "output");
        match out {
            Effect::Listen { listener } => match self.backend.listen(listener).await {
                Ok((l, addr)) => {
                    tracing::debug!(who = %self.who, ?listener, %addr, "listening");
                    if listener.is_root() {
                        self.root_addr.get_or_insert(addr);
                    }
                    self.listeners.insert(listener, Arc::new(l));
                    self.pending.push_back(OwnedInput::Listening { listener, addr });
                }
                Err(e) => self.pending.push_back(OwnedInput::ListenFailed { listener, reason: e.to_string() }),
            },
            Effect::Accept { listener, conn } => {
                let Some(l) = self.listeners.get(&listener) else {
                    tracing::warn!(who = %self.who, ?listener, %conn, "accept on a listener that is not open");
                    return;
                };
                let task = accept_task(self.backend.clone(), l.clone(), listener, conn, self.tx.clone());
                let handle = self.tasks.spawn(task);
                if let Some(old) = self.accepts.insert(listener, handle) {
                    old.abort();
                }
            }
            Effect::CloseListener { listener } => {
                self.listeners.remove(&listener);
                if let Some(a) = self.accepts.remove(&listener) {
                    a.abort();
                }
            }
            Effect::Connect { conn, addr } => self.open(conn, Start::Connect(addr)),
            // The writer task owns what it sends: one copy out of the shared buffer.
            Effect::Write { conn, .. } => self.command(conn, Cmd::Write(tx.to_vec())),
            Effect::Drain { conn, deadline } => {
                let bound = deadline.saturating_since(self.now());
                self.command(conn, Cmd::Drain(bound));
            }
            Effect::Close { conn } => {
                if let Some(c) = self.conns.remove(&conn) {
                    let _ = c.cmds.send(Cmd::Close);
                    if let Some(r) = c.reader {
                        r.abort();
                    }
                }
            }
        }
    }

    /// The next input, or `None` once `deadline` (core time) has come.
    pub(super) async fn next(&mut self, deadline: Option<Instant>) -> Option<OwnedInput<L>> {
        let wake = deadline.map(|d| self.epoch + Duration::from_nanos(d.as_nanos()));
        loop {
            if let Some(d) = self.pending.pop_front() {
                return Some(d);
            }
            let report = tokio::select! {
                biased;
                r = self.rx.recv() => r?,
                () = sleep_until(wake) => return None,
            };
            self.on_report(report);
        }
    }

    /// Stops accepting and reading, stops dialling, lets writers to live peers flush queued
    /// bytes (bounded), then ends.
    pub(super) async fn finish(mut self) {
        self.tasks.abort_all();
        self.listeners.clear();
        let mut dropped = 0;
        for (handle, reach) in self.writer_state.values() {
            if *reach != Reach::Live {
                handle.abort();
                dropped += 1;
            }
        }
        if dropped > 0 {
            tracing::debug!(who = %self.who, dropped, "writers still dialling or to a closed peer: not flushed");
        }
        for (_, c) in std::mem::take(&mut self.conns) {
            if let Some(r) = c.reader {
                r.abort();
            }
        }
        let flushed =
            tokio::time::timeout(FLUSH_BOUND, async { while self.writers.join_next().await.is_some() {} }).await;
        if flushed.is_err() {
            tracing::warn!(who = %self.who, "writers did not flush within {FLUSH_BOUND:?}; aborted");
        }
    }

    fn open(&mut self, conn: ConnId, start: Start<B>) {
        let (cmds, rx) = unbounded_channel();
        let reach = match start {
            Start::Connect(_) => Reach::Dialling,
            Start::Ready(_) => Reach::Live,
        };
        let handle = self.writers.spawn(writer_task(self.backend.clone(), conn, start, rx, self.tx.clone()));
        self.writer_state.insert(conn, (handle, reach));
        self.conns.insert(conn, Conn { cmds, reader: None });
    }

    fn reach(&mut self, conn: ConnId, reach: Reach) {
        if let Some((_, r)) = self.writer_state.get_mut(&conn) {
            *r = reach;
        }
    }

    fn start_reader(&mut self, conn: ConnId, reader: B::Reader) {
        let handle = self.tasks.spawn(reader_task::<B, L>(conn, reader, self.tx.clone()));
        match self.conns.get_mut(&conn) {
            Some(c) => c.reader = Some(handle),
            None => handle.abort(),
        }
    }

    fn command(&mut self, conn: ConnId, cmd: Cmd) {
        match self.conns.get(&conn) {
            Some(c) => {
                let _ = c.cmds.send(cmd);
            }
            None => tracing::debug!(who = %self.who, %conn, ?cmd, "command for a closed connection dropped"),
        }
    }

    fn on_report(&mut self, report: Report<B, L>) {
        while self.tasks.try_join_next().is_some() {}
        while self.writers.try_join_next().is_some() {}
        match &report {
            Report::Connected { conn, .. } => self.reach(*conn, Reach::Live),
            Report::ConnectFailed { conn, .. } | Report::PeerClosed { conn, .. } => self.reach(*conn, Reach::Dead),
            _ => {}
        }
        self.writer_state.retain(|_, (h, _)| !h.is_finished());
        let known = |conns: &BTreeMap<ConnId, Conn>, c: &ConnId| conns.contains_key(c);
        let delivery = match report {
            Report::Accepted { listener, conn, stream, from } => {
                self.accepts.remove(&listener);
                let (reader, writer) = self.backend.split(stream);
                self.open(conn, Start::Ready(writer));
                self.start_reader(conn, reader);
                OwnedInput::Accepted { conn, from }
            }
            Report::Connected { conn, reader } => {
                if !known(&self.conns, &conn) {
                    return;
                }
                self.start_reader(conn, reader);
                OwnedInput::Connected { conn }
            }
            Report::ConnectFailed { conn, reason } => {
                self.conns.remove(&conn);
                OwnedInput::ConnectFailed { conn, reason }
            }
            Report::Received { conn, bytes } if known(&self.conns, &conn) => OwnedInput::Received { conn, bytes },
            Report::PeerClosed { conn, reason } if known(&self.conns, &conn) => OwnedInput::PeerClosed { conn, reason },
            Report::Drain { conn, result } if known(&self.conns, &conn) => result.input(conn),
            Report::Received { .. } | Report::PeerClosed { .. } | Report::Drain { .. } => return,
        };
        self.pending.push_back(delivery);
    }
}

/// Sleeps until `wake`, or forever without one.
async fn sleep_until(wake: Option<tokio::time::Instant>) {
    match wake {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
