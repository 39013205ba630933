//! One bootstrap rank as a sans-IO state machine: NVSHMEM's `nvshmemi_bootstrap_plugin_init`,
//! `bootstrap_send`/`bootstrap_recv` and the collectives, step for step, under any [`Variant`].

mod buffer;
mod conn;
mod exec;
mod peers;
mod plan;
mod pool;
mod queued;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;

use bootsim_core::codec::{WireError, SOCKADDR_LEN};
use bootsim_core::ids::{ConnId, OpId};
use bootsim_core::time::Instant;
use bootsim_core::{Awaited, Blocked};

use crate::error::{BootstrapError, Culprit};
use crate::io::Outbox;
use crate::io::{Completion, Effect, Event, Input, Limits, Output};
use crate::listener::Listener;
use crate::uid::UniqueId;
use crate::variant::{Transport, Variant};
use crate::OpKind;

use buffer::Buffer;
pub use buffer::{ChunkSink, Chunked, Chunks, MakeChunk};
use conn::{ConnTable, Role};
use peers::{PeerAddrs, PeerVec};
use plan::Step;
use queued::Queued;

/// Everything a rank is told before it starts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RankConfig {
    /// This rank, `0..nranks`.
    pub rank: u32,
    /// World size.
    pub nranks: u32,
    /// The shared unique ID (root address, magic, version).
    pub uid: UniqueId,
    /// Protocol variant.
    pub variant: Variant,
    /// Protection against bad peers.
    pub limits: Limits,
}

/// An application operation, queued with [`Rank::push`] and started once init and the ones
/// before it completed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Ring allgather of `mine`; the result holds `nranks` slices of its length.
    Allgather {
        /// This rank's contribution.
        mine: Vec<u8>,
    },
    /// Alltoall: `chunks` holds `nranks` equal chunks, chunk p for rank p; the result likewise.
    Alltoall {
        /// This rank's `nranks` chunks, concatenated.
        chunks: Vec<u8>,
    },
    /// Dissemination barrier; `word` stands in for the 4 uninitialised bytes NVSHMEM sends.
    Barrier {
        /// The 4 bytes sent in each round.
        word: [u8; 4],
    },
    /// One point-to-point send.
    Send {
        /// The receiving rank.
        peer: u32,
        /// The message tag.
        tag: i32,
        /// The payload.
        data: Vec<u8>,
    },
    /// One point-to-point receive of `size` bytes.
    Recv {
        /// The sending rank.
        peer: u32,
        /// The message tag.
        tag: i32,
        /// The payload size expected, in bytes.
        size: usize,
    },
}

impl Op {
    /// The operation's kind.
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Allgather { .. } => OpKind::Allgather,
            Op::Alltoall { .. } => OpKind::Alltoall,
            Op::Barrier { .. } => OpKind::Barrier,
            Op::Send { .. } => OpKind::Send,
            Op::Recv { .. } => OpKind::Recv,
        }
    }
}

/// The operation in progress.
#[derive(Clone, Debug, Hash)]
struct Running {
    id: OpId,
    kind: OpKind,
    steps: plan::Steps,
    input: Buffer,
    result: Buffer,
    wait: Wait,
}

/// What a rank is blocked in ([`Rank::waiting`]); its `Display` is [`Rank::waiting_for`]'s text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    op: bootsim_core::OpName,
    step: Option<Step>,
    wait: Wait,
}

impl std::fmt::Display for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let step = self.step.as_ref().map_or("finishing".to_string(), |s| exec::describe_step(s, &self.wait));
        write!(f, "{}: {step} ({})", self.op, exec::describe_wait(&self.wait))
    }
}

/// What the front step is blocked on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Wait {
    /// The front step has not begun.
    Start,
    /// Both listeners' addresses.
    Listening,
    /// A timer.
    Until(Instant),
    /// A dialed connection's handshake.
    Connecting(ConnId),
    /// Bytes on a specific connection (root reply, ring frame, successor address).
    Reading(ConnId),
    /// The next connection from a listener.
    Accepting(ConnId),
    /// The header of a just-accepted point-to-point connection.
    Header(ConnId),
    /// The payload of the connection matched for this receive.
    Payload(ConnId),
    /// The send queue drain of a message connection.
    Draining(ConnId),
    /// Sequenced and persistent transports: the next message from the peer.
    Arrival,
    /// Per-message receive under [`Limits::read_ahead`]: the next connection in accept order.
    Inbound,
    /// Init under [`Limits::read_ahead`]: a pooled connection on the step's listener whose
    /// preamble carries the session magic (the root's, or the ring predecessor's).
    Pool,
}

/// A rank of the bootstrap. `Clone` and `Hash` let an explorer copy a world and recognise a
/// state it has seen.
#[derive(Clone, Debug, Hash)]
pub struct Rank {
    cfg: RankConfig,
    now: Instant,
    out: Outbox,
    conns: ConnTable,
    listeners: BTreeMap<Listener, SocketAddr>,
    successor: Option<SocketAddr>,
    peers: PeerAddrs,
    ring_send: Option<ConnId>,
    ring_recv: Option<ConnId>,
    /// NVSHMEM's unexpected list: (peer, tag, connection), appended at the tail, scanned from the head.
    unexpected: VecDeque<(i32, i32, ConnId)>,
    seq_out: PeerVec<u64>,
    seq_in: PeerVec<u64>,
    arrived: BTreeMap<(u32, u64), ConnId>,
    stream_out: PeerVec<Option<ConnId>>,
    stream_in: PeerVec<Option<ConnId>>,
    eager_accept: Option<ConnId>,
    /// Under `read_ahead`: the accept outstanding on the root-facing listener during init.
    root_accept: Option<ConnId>,
    /// Operations pushed and not yet started, in order.
    queued: VecDeque<Queued>,
    /// Per-message transport under `read_ahead`: accepted connections not yet taken by a
    /// receive, in accept order (their headers are read meanwhile).
    arrivals: VecDeque<ConnId>,
    next_op: u32,
    /// 3.8's per-call tag counter (variants with one tag per call).
    next_call_tag: u64,
    op: Option<Running>,
    ready: bool,
    failed: bool,
    last_progress: Instant,
}

impl Rank {
    /// A rank that begins init (listen, rendezvous, ring, address allgather) at once; init
    /// completes as operation 0 of kind [`OpKind::Init`].
    pub fn new(cfg: RankConfig, now: Instant) -> Rank {
        let n = cfg.nranks as usize;
        let mut rank = Rank {
            now,
            out: Outbox::default(),
            conns: ConnTable::default(),
            listeners: BTreeMap::new(),
            successor: None,
            peers: PeerAddrs::default(),
            ring_send: None,
            ring_recv: None,
            unexpected: VecDeque::new(),
            seq_out: PeerVec::new(n),
            seq_in: PeerVec::new(n),
            arrived: BTreeMap::new(),
            stream_out: PeerVec::new(n),
            stream_in: PeerVec::new(n),
            eager_accept: None,
            root_accept: None,
            queued: VecDeque::new(),
            arrivals: VecDeque::new(),
            next_op: 1,
            next_call_tag: cfg.variant.first_call_tag().unwrap_or(0),
            op: None,
            ready: false,
            failed: false,
            last_progress: now,
            cfg,
        };
        if rank.cfg.rank >= rank.cfg.nranks {
            let reason = format!("rank {} outside a world of {} ranks", rank.cfg.rank, rank.cfg.nranks);
            rank.failed = true;
            rank.out.completed(Completion {
                op: OpId(0),
                kind: OpKind::Init,
                result: Err(BootstrapError::InvalidOp { rank: rank.cfg.rank, op: OpKind::Init, reason }),
            });
            return rank;
        }
        let result = Buffer::Zeroed(n * SOCKADDR_LEN);
        rank.op = Some(Running {
            id: OpId(0),
            kind: OpKind::Init,
            steps: plan::init(rank.cfg.rank, rank.cfg.nranks, SOCKADDR_LEN),
            input: Buffer::default(),
            result,
            wait: Wait::Start,
        });
        rank.advance();
        rank
    }

    /// This rank's configuration.
    pub fn config(&self) -> &RankConfig {
        &self.cfg
    }

    /// True once init has completed.
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// True while an operation (init included) is in progress.
    pub fn is_busy(&self) -> bool {
        self.op.is_some()
    }

    /// Every peer's listener, known after init.
    pub fn peer_addrs(&self) -> Vec<SocketAddr> {
        self.peers.to_vec()
    }

    /// The unexpected list, head first: (peer, tag) of each connection parked there.
    pub fn unexpected(&self) -> Vec<(i32, i32)> {
        self.unexpected.iter().map(|&(p, t, _)| (p, t)).collect()
    }

    /// Connections still open (a leak check after the last operation).
    pub fn open_connections(&self) -> usize {
        self.conns.len()
    }

    /// A one-line description of what the current operation waits for, if any.
    pub fn waiting_for(&self) -> Option<String> {
        self.waiting().map(|w| w.to_string())
    }

    /// What the running operation is blocked in, as a value that is cheap to take and compare
    /// and is formatted only when shown (a driver that reports it on every wake-up compares
    /// it with the last one it reported).
    pub fn waiting(&self) -> Option<Waiting> {
        let op = self.op.as_ref()?;
        Some(Waiting {
            op: bootsim_core::OpName(op.kind.op_type(), op.id),
            step: op.steps.front().cloned(),
            wait: op.wait,
        })
    }

    /// What the running operation is blocked in, as the run record keeps it: [`Rank::waiting`]'s
    /// words, the operation, the peer its step waits for, and whether it sits in connect() to
    /// that peer to send it a message (NVSHMEM accepts nothing meanwhile).
    pub fn awaited(&self) -> Option<Awaited> {
        let (peer, blocked) = self.blocked_on()?;
        let waiting = self.waiting()?;
        Some(Awaited::Protocol { op: Some(waiting.op), peer, blocked, text: waiting.to_string() })
    }

    /// The peer the running operation's front step waits for and how it is blocked on it.
    fn blocked_on(&self) -> Option<(Option<Culprit>, Blocked)> {
        let op = self.op.as_ref()?;
        let step = op.steps.front();
        let peer = step.and_then(|s| exec::step_peer(s, &op.wait, self.cfg.rank, self.cfg.nranks));
        let blocked = match (step, op.wait) {
            (Some(Step::Send { .. }), Wait::Connecting(_)) => Blocked::ConnectToSend,
            (Some(_), Wait::Connecting(_)) => Blocked::Connect,
            _ => Blocked::Other,
        };
        Some((peer, blocked))
    }

    /// 3.8's `reserve_tags`: the call's one tag, or the exhaustion error (the counter unmoved).
    fn reserve_call_tag(&mut self, op: OpKind) -> Result<i32, BootstrapError> {
        let tag = self.next_call_tag;
        match i32::try_from(tag) {
            Ok(t) if t > 0 && tag <= crate::variant::MAX_CALL_TAG => {
                self.next_call_tag += 1;
                Ok(t)
            }
            _ => Err(BootstrapError::TagSpaceExhausted { rank: self.cfg.rank, op, next: tag }),
        }
    }

    /// Queues an application operation. The rank starts each queued operation, in order, once
    /// init and the one before it completed; after a failure it starts none of the rest. An
    /// operation that cannot start (e.g. a size that does not split) completes at once with
    /// its error, under its own operation number.
    pub fn push(&mut self, now: Instant, op: Op) {
        self.enqueue(now, Queued::Ready(op));
    }

    /// [`Rank::push`] of an operation whose bytes are made from the seed ([`Chunked`]): its
    /// input chunks are made when sent and its result is held as its difference from the
    /// expected one, so neither is held whole (an all-to-all's or allgather's is n chunks per
    /// rank, n² in the world); it completes with the bytes the plain operation would.
    pub fn push_chunked(&mut self, now: Instant, op: Chunked) {
        self.enqueue(now, Queued::Chunked(op));
    }

    fn enqueue(&mut self, now: Instant, q: Queued) {
        self.now = self.now.max(now);
        self.queued.push_back(q);
        self.start_queued();
        self.advance();
    }

    /// Operations queued and not yet started.
    pub fn queued(&self) -> usize {
        self.queued.len()
    }

    /// True when nothing more will happen without a new operation: init and every queued
    /// operation completed, or one failed.
    pub fn is_finished(&self) -> bool {
        self.op.is_none() && (self.queued.is_empty() || self.failed)
    }

    /// Starts the next queued operation if the rank is idle and ready.
    fn start_queued(&mut self) {
        if !self.ready || self.failed || self.op.is_some() {
            return;
        }
        let Some(q) = self.queued.pop_front() else { return };
        let kind = q.kind();
        if let Err(error) = self.start(q) {
            let id = OpId(self.next_op);
            self.next_op += 1;
            self.queued.clear();
            self.out.completed(Completion { op: id, kind, result: Err(error) });
        }
    }

    /// Starts an application operation. Only one runs at a time, after init.
    fn start(&mut self, op: Queued) -> Result<OpId, BootstrapError> {
        let (rank, n) = (self.cfg.rank, self.cfg.nranks);
        let kind = op.kind();
        let invalid = |reason: String| BootstrapError::InvalidOp { rank, op: kind, reason };
        if self.failed || !self.ready {
            return Err(invalid("init has not completed".into()));
        }
        if let Some(running) = &self.op {
            return Err(invalid(format!("{} #{} is still running", running.kind, running.id.0.saturating_sub(1))));
        }
        let max = self.cfg.limits.max_message;
        let call_tag = match (kind, self.cfg.variant.first_call_tag()) {
            (OpKind::Alltoall | OpKind::Barrier, Some(_)) => Some(self.reserve_call_tag(kind)?),
            _ => None,
        };
        // An allgather's or all-to-all's input and result, its own chunk (of `len` bytes) in place.
        let gathered = |len: usize, input: Buffer, mut result: Buffer, mine: &[u8]| {
            result.write(rank as usize * len, mine);
            (input, result)
        };
        let (steps, input, result) = match op {
            Queued::Ready(Op::Allgather { mine }) => {
                let len = mine.len();
                if len > max {
                    return Err(invalid(format!("{len} bytes exceed max_message {max}")));
                }
                let (input, result) =
                    gathered(len, Buffer::default(), Buffer::Bytes(vec![0u8; len * n as usize]), &mine);
                (plan::allgather(rank, n, len), input, result)
            }
            Queued::Chunked(Chunked::Allgather { len, expected }) => {
                if len > max {
                    return Err(invalid(format!("{len} bytes exceed max_message {max}")));
                }
                let mut mine = Vec::with_capacity(len);
                expected.make(rank, &mut mine);
                let (input, result) = gathered(len, Buffer::default(), Buffer::predicted(len, n, expected), &mine);
                (plan::allgather(rank, n, len), input, result)
            }
            Queued::Ready(Op::Alltoall { chunks }) => {
                if chunks.len() % n as usize != 0 {
                    return Err(invalid(format!("{} bytes do not split into {n} equal chunks", chunks.len())));
                }
                let chunk = chunks.len() / n as usize;
                if chunk > max {
                    return Err(invalid(format!("chunks of {chunk} bytes exceed max_message {max}")));
                }
                let mine = chunks[rank as usize * chunk..(rank as usize + 1) * chunk].to_vec();
                let result = Buffer::Bytes(vec![0u8; chunks.len()]);
                let (input, result) = gathered(chunk, Buffer::Bytes(chunks), result, &mine);
                (plan::alltoall(rank, n, chunk, &self.cfg.variant, call_tag), input, result)
            }
            Queued::Chunked(Chunked::Alltoall { len: chunk, input, expected }) => {
                if chunk > max {
                    return Err(invalid(format!("chunks of {chunk} bytes exceed max_message {max}")));
                }
                let mut mine = Vec::with_capacity(chunk);
                input.make(rank, &mut mine);
                let result = Buffer::predicted(chunk, n, expected);
                let (input, result) = gathered(chunk, Buffer::made(chunk, n, input), result, &mine);
                (plan::alltoall(rank, n, chunk, &self.cfg.variant, call_tag), input, result)
            }
            Queued::Ready(Op::Barrier { word }) => {
                let word = if self.cfg.variant.zeroes_barrier_word() { [0; 4] } else { word };
                (plan::barrier(rank, n, &self.cfg.variant, call_tag), Buffer::default(), Buffer::Bytes(word.to_vec()))
            }
            Queued::Ready(Op::Send { peer, tag, data }) => {
                if peer >= n || data.len() > max {
                    return Err(invalid(format!("send of {} bytes to rank {peer} (world {n}, max {max})", data.len())));
                }
                let range = 0..data.len();
                let step = plan::Step::Send { peer, tag, step: 1, source: plan::Source::Input, range };
                (plan::Steps::of([step]), Buffer::Bytes(data), Buffer::default())
            }
            Queued::Ready(Op::Recv { peer, tag, size }) => {
                if peer >= n || size > max {
                    return Err(invalid(format!("recv of {size} bytes from rank {peer} (world {n}, max {max})")));
                }
                let steps = plan::Steps::of([plan::Step::Recv { peer, tag, step: 1, into: 0..size }]);
                (steps, Buffer::default(), Buffer::Bytes(vec![0u8; size]))
            }
        };
        let id = OpId(self.next_op);
        self.next_op += 1;
        self.last_progress = self.now;
        self.op = Some(Running { id, kind, steps, input, result, wait: Wait::Start });
        Ok(id)
    }

    /// Feeds one input.
    pub fn handle(&mut self, now: Instant, input: Input<'_>) {
        self.now = self.now.max(now);
        match input {
            Input::Listening { listener, addr } => {
                self.listeners.insert(listener, addr);
                self.arm_pool_accepts();
            }
            Input::ListenFailed { listener, reason } => {
                let rank = self.cfg.rank;
                self.fail(BootstrapError::Listen { rank, reason: format!("{listener}: {reason}") });
            }
            Input::Accepted { conn, from } => self.on_accepted(conn, from),
            Input::Connected { conn } => {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.established = true;
                }
            }
            Input::ConnectFailed { conn, reason } => self.on_connect_failed(conn, reason),
            Input::Received { conn, bytes } => {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.reader.push(bytes);
                    if !self.unexpected.is_empty() && self.unexpected.iter().any(|&(_, _, u)| u == conn) {
                        if let Err(e) = self.check_unexpected() {
                            self.fail(e);
                            return;
                        }
                    }
                    if !self.over_budget(conn) {
                        self.index_eager(conn);
                    }
                }
            }
            Input::PeerClosed { conn, reason } => {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.reader.push_close(reason);
                    self.index_eager(conn);
                }
            }
            Input::Drained { conn, waited } => {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.drained = Some((waited, None));
                }
            }
            Input::DrainTimedOut { conn, waited, unacked } => {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.drained = Some((waited, Some(unacked)));
                }
            }
        }
        self.advance();
    }

    /// The next time [`Rank::handle_timeout`] must be called, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut consider = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        if let Some(op) = &self.op {
            if let Wait::Until(t) = op.wait {
                consider(t);
            }
            if let Some(d) = self.cfg.limits.op_timeout {
                consider(self.last_progress + d);
            }
        }
        if let Some(d) = self.cfg.limits.header_timeout {
            for (_, c) in self.conns.iter() {
                if matches!(c.role, Role::MessageIn | Role::RingRecv | Role::FromRoot) && c.header_pending() {
                    consider(c.opened + d);
                }
            }
        }
        // A receive waiting behind an arrival whose header is late looks again once its grace
        // has passed (it is then passed over as a stranger's).
        if let (Some(op), Some(g)) = (&self.op, self.inbound_grace()) {
            if op.wait == Wait::Inbound {
                let late = self.arrivals.iter().filter_map(|id| self.conns.get(*id));
                for c in late.filter(|c| c.header_pending() && self.now < c.opened + g) {
                    consider(c.opened + g);
                }
            }
        }
        next
    }

    /// Under `read_ahead`, how long a receive waits for the header of an arrival ahead of a
    /// complete one before passing it over: a fifth of the header timeout (an honest peer's
    /// header follows its connect within a round trip; under a reordering wire, within the
    /// hold). `None`: forever (pure accept order).
    pub(super) fn inbound_grace(&self) -> Option<std::time::Duration> {
        self.cfg.limits.header_timeout.map(|h| h / 5)
    }

    /// Lets time pass up to `now`: timers, stalled headers, the no-progress timeout.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        self.drop_stalled_headers();
        if let (Some(op), Some(limit)) = (&self.op, self.cfg.limits.op_timeout) {
            if self.now >= self.last_progress + limit && !matches!(op.wait, Wait::Until(_)) {
                let waiting = self.waiting_for().unwrap_or_default();
                let (peer, blocked) = self.blocked_on().unwrap_or_default();
                let (rank, kind) = (self.cfg.rank, op.kind);
                self.fail(BootstrapError::Timeout { rank, op: kind, waiting, after: limit, peer, blocked });
            }
        }
        self.advance();
    }

    /// The next output for the driver, in order. For an [`Effect::Write`], the bytes to send
    /// replace the contents of `tx`, a buffer the driver owns and reuses.
    pub fn poll_output(&mut self, tx: &mut Vec<u8>) -> Option<Output> {
        self.out.poll(tx)
    }

    /// Closes every connection and listener (NVSHMEM's `bootstrap_uid_close`). The unexpected
    /// list is returned, head first: non-empty means messages were left unconsumed.
    pub fn close(&mut self, now: Instant) -> Vec<(i32, i32)> {
        self.now = self.now.max(now);
        let leaked = self.unexpected();
        let ids: Vec<ConnId> = self.conns.iter().map(|(id, _)| *id).collect();
        for id in ids {
            self.conns.remove(id);
            self.out.effect(Effect::Close { conn: id });
        }
        self.unexpected.clear();
        if self.listeners.remove(&Listener::Peers).is_some() {
            self.out.effect(Effect::CloseListener { listener: Listener::Peers });
        }
        self.eager_accept = None;
        self.root_accept = None;
        self.arrivals.clear();
        self.op = None;
        self.failed = true;
        leaked
    }

    fn emit(&mut self, event: Event) {
        self.out.event(event);
    }

    fn fail(&mut self, error: BootstrapError) {
        let Some(op) = self.op.take() else { return };
        if let Wait::Payload(c) | Wait::Header(c) | Wait::Reading(c) = op.wait {
            if Some(c) != self.ring_recv && self.conns.remove(c).is_some() {
                self.out.effect(Effect::Close { conn: c });
            }
        }
        if op.kind == OpKind::Init {
            self.failed = true;
        }
        self.queued.clear();
        self.out.completed(Completion { op: op.id, kind: op.kind, result: Err(error) });
    }

    fn on_accepted(&mut self, conn: ConnId, from: SocketAddr) {
        let wait = self.op.as_ref().map(|o| o.wait);
        if self.root_accept == Some(conn)
            || (self.eager_accept == Some(conn) && self.ring_recv.is_none() && !self.ready)
        {
            self.on_pool_accepted(conn, from);
        } else if self.eager_accept == Some(conn) {
            self.eager_accept = None;
            self.make_room(Listener::Peers);
            self.conns.insert(conn, conn::Conn::new(Role::MessageIn, Some(from), self.now));
            if self.cfg.variant.transport == Transport::PerMessage {
                self.arrivals.push_back(conn);
            } else {
                self.index_eager(conn);
            }
            self.arm_eager_accept();
        } else if wait == Some(Wait::Accepting(conn)) {
            let role = match self.op.as_ref().and_then(|o| o.steps.front()) {
                Some(Step::AwaitSuccessor) => Role::FromRoot,
                Some(Step::RingConnect { .. }) => Role::RingRecv,
                _ => Role::MessageIn,
            };
            self.conns.insert(conn, conn::Conn::new(role, Some(from), self.now));
            // Not progress: whoever connected has not yet shown the session magic (a stranger
            // dropped at the header timeout must not restart the operation timer).
            if let Some(op) = &mut self.op {
                op.wait = if role == Role::MessageIn { Wait::Header(conn) } else { Wait::Reading(conn) };
            }
        } else {
            // Not asked for (a driver bug or a cancelled accept): refuse it cleanly.
            self.out.effect(Effect::Close { conn });
        }
    }

    fn on_connect_failed(&mut self, conn: ConnId, reason: String) {
        let Some(c) = self.conns.remove(conn) else { return };
        let waiting = self.op.as_ref().map(|o| o.wait) == Some(Wait::Connecting(conn));
        if !waiting {
            return;
        }
        let (rank, kind) = (self.cfg.rank, self.op.as_ref().map_or(OpKind::Init, |o| o.kind));
        let (to, peer) = match (c.role, self.op.as_ref().and_then(|o| o.steps.front())) {
            (Role::ToRoot, _) => ("the root".to_string(), Some(Culprit::Root)),
            (_, Some(Step::Send { peer, .. })) => (format!("rank {peer}"), Some(Culprit::Rank(*peer))),
            (_, Some(Step::RingConnect { succ, .. })) => ("the ring successor".to_string(), Some(Culprit::Rank(*succ))),
            _ => ("the ring successor".to_string(), None),
        };
        let addr = c.remote.unwrap_or(self.cfg.uid.root);
        self.fail(BootstrapError::Connect { rank, op: kind, to, addr, reason, peer });
    }

    /// Sequenced and persistent transports take every connection, and so does the per-message
    /// transport under `read_ahead` (reading headers ahead of the receives that will want
    /// them): keep one accept outstanding. A per-message backlog of `max_unexpected`
    /// connections stops accepting (the kernel's backlog holds the rest, as for NVSHMEM).
    fn arm_eager_accept(&mut self) {
        // Under read-ahead the peer listener is read ahead from the moment it listens (during
        // init its pool holds the ring predecessor's connection, see `pool`).
        let early = self.cfg.limits.read_ahead.is_some() && self.listeners.contains_key(&Listener::Peers);
        if self.eager_accept.is_some() || !(self.ready || early) || self.failed {
            return;
        }
        if self.cfg.variant.transport == Transport::PerMessage
            && (self.cfg.limits.read_ahead.is_none() || self.arrivals.len() >= self.cfg.limits.max_unexpected)
        {
            return;
        }
        let conn = self.conns.allocate();
        self.eager_accept = Some(conn);
        self.out.effect(Effect::Accept { listener: Listener::Peers, conn });
    }

    /// Eager transports: parse an inbound header as soon as it is complete and index the connection.
    fn index_eager(&mut self, id: ConnId) {
        if self.read_pool_preamble(id) {
            return;
        }
        let transport = self.cfg.variant.transport;
        if transport == Transport::PerMessage {
            return self.read_ahead_header(id);
        }
        let magic = self.cfg.uid.magic;
        let Some(c) = self.conns.get_mut(id) else { return };
        if c.role != Role::MessageIn || !c.header_pending() {
            return;
        }
        let from = c.remote;
        let header = match c.parse_header(magic, transport) {
            Ok(Some(h)) => h,
            Ok(None) => return,
            Err(error) => return self.drop_stray(id, from, error),
        };
        let n = self.cfg.nranks;
        let Some(src) = u32::try_from(header.rank).ok().filter(|&r| r < n) else {
            return self.drop_stray(id, from, WireError::RankOutOfRange { rank: header.rank, nranks: n });
        };
        match transport {
            Transport::Sequenced => {
                if self.arrived.contains_key(&(src, header.seq)) || header.seq < self.seq_in.get(src as usize) {
                    return self.drop_stray(id, from, WireError::DuplicateSequence { rank: src, seq: header.seq });
                }
                self.arrived.insert((src, header.seq), id);
            }
            Transport::Persistent => {
                if self.stream_in.get(src as usize).is_some() {
                    return self.drop_stray(id, from, WireError::DuplicateStream { rank: src });
                }
                *self.stream_in.get_mut(src as usize) = Some(id);
            }
            Transport::PerMessage => {}
        }
    }

    /// Per-message transport under `read_ahead`: parses a waiting connection's header as its
    /// bytes come (so a complete one is neither timed out nor evicted) and drops garbage at once.
    fn read_ahead_header(&mut self, id: ConnId) {
        if !self.arrivals.contains(&id) {
            return;
        }
        let magic = self.cfg.uid.magic;
        let Some(c) = self.conns.get_mut(id) else { return };
        let from = c.remote;
        if let Err(error) = c.parse_header(magic, Transport::PerMessage) {
            self.arrivals.retain(|&a| a != id);
            self.drop_stray(id, from, error);
        }
    }

    fn drop_stray(&mut self, id: ConnId, from: Option<SocketAddr>, error: WireError) {
        self.conns.remove(id);
        self.out.effect(Effect::Close { conn: id });
        let from = from.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        self.emit(Event::StrayDropped { conn: id, from, error });
    }

    /// A per-message connection carries one message: more unconsumed bytes than the largest
    /// message and its header is a peer misbehaving, and the bytes would otherwise pile up in
    /// memory (NVSHMEM leaves them to TCP flow control). Drops it; true if it did.
    fn over_budget(&mut self, id: ConnId) -> bool {
        const HEADER: usize = 64;
        if self.cfg.variant.transport == Transport::Persistent {
            return false;
        }
        let Some(c) = self.conns.get(id) else { return false };
        let max = self.cfg.limits.max_message;
        if c.role != Role::MessageIn || c.reader.buffered() <= max + HEADER {
            return false;
        }
        let (from, len) = (c.remote, c.reader.buffered());
        self.unexpected.retain(|&(_, _, conn)| conn != id);
        self.arrived.retain(|_, conn| *conn != id);
        self.drop_stray(id, from, WireError::TooLarge { len, max: max + HEADER });
        if let Some(op) = &mut self.op {
            if matches!(op.wait, Wait::Header(c) | Wait::Payload(c) if c == id) {
                op.wait = Wait::Start;
            }
        }
        true
    }

    /// The unexpected list within its bounds (count and buffered bytes), else the error that
    /// names the sender of its newest entry.
    pub(crate) fn check_unexpected(&self) -> Result<(), BootstrapError> {
        let limits = &self.cfg.limits;
        let count = self.unexpected.len();
        let bytes: usize =
            self.unexpected.iter().filter_map(|&(_, _, c)| self.conns.get(c)).map(|c| c.reader.buffered()).sum();
        let what = if count > limits.max_unexpected {
            format!("at most {} connections", limits.max_unexpected)
        } else if bytes > limits.max_unexpected_bytes {
            format!("at most {} bytes", limits.max_unexpected_bytes)
        } else {
            return Ok(());
        };
        let (from, tag, _) = *self.unexpected.back().expect("over a bound, so not empty");
        let op = self.op.as_ref().map_or(OpKind::Init, |o| o.kind);
        Err(BootstrapError::UnexpectedOverflow { rank: self.cfg.rank, op, from, tag, count, bytes, what })
    }

    /// Under `read_ahead = k`: before a new connection joins, the oldest of `k` waiting
    /// connections whose header is incomplete (not yet taken by a receive) is evicted, so idle
    /// strangers can neither hold honest peers behind them nor pile up descriptors.
    fn make_room(&mut self, listener: Listener) {
        let Some(k) = self.cfg.limits.read_ahead else { return };
        let waiting: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(id, c)| c.role.listener() == Some(listener) && c.header_pending() && !self.is_taken(**id))
            .map(|(id, _)| *id)
            .collect();
        if waiting.len() < k.max(1) {
            return;
        }
        let oldest = waiting[0];
        let Some(c) = self.conns.remove(oldest) else { return };
        self.arrivals.retain(|&a| a != oldest);
        self.out.effect(Effect::Close { conn: oldest });
        let from = c.remote.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        let after = self.now.saturating_since(c.opened);
        self.emit(Event::StalledDropped { conn: oldest, from, after });
    }

    /// True if the running step is reading this connection (it is not evicted then).
    fn is_taken(&self, conn: ConnId) -> bool {
        self.op
            .as_ref()
            .is_some_and(|o| matches!(o.wait, Wait::Header(c) | Wait::Payload(c) | Wait::Reading(c) if c == conn))
    }

    fn drop_stalled_headers(&mut self) {
        let Some(limit) = self.cfg.limits.header_timeout else { return };
        let now = self.now;
        let stalled: Vec<(ConnId, Option<SocketAddr>)> = self
            .conns
            .iter()
            .filter(|(_, c)| matches!(c.role, Role::MessageIn | Role::RingRecv | Role::FromRoot))
            .filter(|(_, c)| c.header_pending() && now >= c.opened + limit)
            .map(|(id, c)| (*id, c.remote))
            .collect();
        for (id, from) in stalled {
            self.conns.remove(id);
            self.arrivals.retain(|&a| a != id);
            self.out.effect(Effect::Close { conn: id });
            let from = from.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
            self.emit(Event::StalledDropped { conn: id, from, after: limit });
            // Not progress: a stranger that stalls and is dropped must not keep the operation
            // alive (a steady trickle of them would defeat the timeout).
            if let Some(op) = &mut self.op {
                if matches!(op.wait, Wait::Header(c) | Wait::Reading(c) if c == id) {
                    op.wait = Wait::Start;
                }
            }
        }
    }

    /// Moves the front step on to `wait`. Only what the awaited peer does counts as progress for
    /// the operation timeout: a newly accepted connection (its header not yet read, maybe a
    /// stranger's) or the next accept does not.
    fn set_wait(&mut self, wait: Wait) {
        let progress = !matches!(wait, Wait::Accepting(_) | Wait::Header(_) | Wait::Start | Wait::Inbound | Wait::Pool);
        if let Some(op) = &mut self.op {
            op.wait = wait;
        }
        if progress {
            self.last_progress = self.now;
        }
    }
}
