//! What an engine run leaves behind for the oracles: completions, message records, final states,
//! and the trace.

use std::collections::BTreeMap;
use std::fmt;

use bootsim_core::{BootstrapError, Completion, ConnId, Event, Instant, MsgOrigin};
use sha2::{Digest, Sha256};

use crate::kernel::{EventKind, Flow, KernelStats};

/// A participant of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Node {
    /// The root.
    Root,
    /// Rank `r`.
    Rank(u32),
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Root => f.write_str("root"),
            Node::Rank(r) => write!(f, "rank{r}"),
        }
    }
}

/// A point-to-point message as its sender handed it over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentMsg {
    /// Sending rank.
    pub from: u32,
    /// Destination rank.
    pub to: u32,
    /// Its tag.
    pub tag: i32,
    /// The sender's operation and step.
    pub origin: MsgOrigin,
    /// Payload bytes.
    pub size: usize,
    /// When it was written.
    pub at: Instant,
}

/// A message a receive took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TakenMsg {
    /// When.
    pub at: Instant,
    /// The receiving rank.
    pub rank: u32,
    /// The (peer, tag) the receive asked for.
    pub from: u32,
    /// Tag asked for.
    pub tag: i32,
    /// The receiver's operation and step.
    pub origin: MsgOrigin,
    /// Bytes taken.
    pub size: usize,
    /// Bytes expected.
    pub expected_size: usize,
    /// The kernel connection it came on and its index there (joins with [`Outcome::sent`]).
    pub kconn: Option<(u64, u32)>,
}

/// How a rank ended.
#[derive(Clone, Debug, Default)]
pub struct RankEnd {
    /// Every completion (init first), with its time.
    pub completions: Vec<(Instant, Completion)>,
    /// When it finished its operations (or stopped at an error); `None`: still running at the end.
    pub finished: Option<Instant>,
    /// What it waited for when the run ended.
    pub waiting_for: Option<String>,
    /// Its unexpected list at the end, head first.
    pub unexpected: Vec<(i32, i32)>,
    /// Operations not completed (queued or running).
    pub ops_left: usize,
}

/// One drain before close: a sender polling SIOCOUTQ until its data is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainNote {
    /// When it started polling.
    pub start: Instant,
    /// When it completed or gave up.
    pub end: Instant,
    /// The sending rank.
    pub rank: u32,
    /// The destination rank.
    pub to: u32,
    /// The kernel connection it drained.
    pub kconn: Option<u64>,
    /// Whether it gave up at its deadline (fail-open).
    pub gave_up: bool,
    /// Bytes still unacknowledged when it ended.
    pub unacked: usize,
}

/// Everything a run produced.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Per rank.
    pub ranks: Vec<RankEnd>,
    /// The root's result, once it finished.
    pub root_result: Option<Result<Vec<u8>, BootstrapError>>,
    /// What the root waited for at the end.
    pub root_waiting: Option<String>,
    /// Sent messages by kernel connection number and index on it (persistent streams carry many).
    pub sent: BTreeMap<(u64, u32), SentMsg>,
    sent_on: BTreeMap<u64, u32>,
    taken_on: BTreeMap<u64, u32>,
    /// Taken messages, in order.
    pub taken: Vec<TakenMsg>,
    /// Drains that gave up: (time, rank, to, tag, waited, unacked).
    pub drain_gave_up: Vec<(Instant, u32, u32, i32, std::time::Duration, usize)>,
    /// Connections dropped as strays: (time, node, reason).
    pub strays: Vec<(Instant, Node, String)>,
    /// Notable kernel events per kernel connection (only when tracing): SYN sent, child
    /// enqueued, accepted, RX stalls, losses, retransmissions, backlog drops.
    pub kernel_notes: BTreeMap<u64, Vec<(Instant, EventKind)>>,
    flow_conn: BTreeMap<Flow, u64>,
    /// Every drain that waited (completed or gave up), in order.
    pub drains: Vec<DrainNote>,
    /// Kernel counters.
    pub kernel: KernelStats,
    /// Simulated time when the run stopped.
    pub end: Instant,
    /// The trace, if kept.
    pub trace: Option<Trace>,
}

impl Outcome {
    /// An empty outcome for `n` ranks.
    pub fn new(n: usize) -> Outcome {
        Outcome { ranks: vec![RankEnd::default(); n], ..Outcome::default() }
    }

    /// Records a core event; `kconn` is the kernel connection of the event's connection.
    pub fn record_event(&mut self, at: Instant, node: Node, e: Event, kconn: Option<u64>) {
        let Node::Rank(rank) = node else {
            if let Event::StrayDropped { error, .. } = e {
                self.strays.push((at, node, error.to_string()));
            }
            return;
        };
        match e {
            Event::MessageSent { to, tag, origin, size, .. } => {
                if let Some(k) = kconn {
                    let i = self.sent_on.entry(k).or_insert(0);
                    self.sent.insert((k, *i), SentMsg { from: rank, to, tag, origin, size, at });
                    *i += 1;
                }
            }
            Event::MessageTaken { from, tag, origin, size, expected_size, .. } => {
                let kconn = kconn.map(|k| {
                    let i = self.taken_on.entry(k).or_insert(0);
                    *i += 1;
                    (k, *i - 1)
                });
                self.taken.push(TakenMsg { at, rank, from, tag, origin, size, expected_size, kconn });
            }
            Event::DrainGaveUp { to, tag, waited, unacked, .. } => {
                let start = Instant::from_nanos(at.as_nanos().saturating_sub(waited.as_nanos() as u64));
                self.drains.push(DrainNote { start, end: at, rank, to, kconn, gave_up: true, unacked });
                self.drain_gave_up.push((at, rank, to, tag, waited, unacked))
            }
            Event::DrainCompleted { to, waited, .. } if !waited.is_zero() => {
                let start = Instant::from_nanos(at.as_nanos().saturating_sub(waited.as_nanos() as u64));
                self.drains.push(DrainNote { start, end: at, rank, to, kconn, gave_up: false, unacked: 0 });
            }
            Event::StrayDropped { error, .. } => self.strays.push((at, node, error.to_string())),
            _ => {}
        }
    }

    /// Records a kernel trace event under its connection.
    pub fn record_kernel(&mut self, at: Instant, kind: EventKind) {
        let conn = match kind {
            EventKind::SynSent { sock, flow, .. } => {
                self.flow_conn.insert(flow, sock.conn());
                sock.conn()
            }
            EventKind::ChildEnqueued { sock, .. } | EventKind::Accepted { sock, .. } => sock.conn(),
            _ => return self.record_flow_event(at, kind),
        };
        self.kernel_notes.entry(conn).or_default().push((at, kind));
    }

    /// Files a packet-level event (stall, loss, retransmission, backlog drop) under the
    /// connection whose 4-tuple it names (the latest connection with that 4-tuple).
    fn record_flow_event(&mut self, at: Instant, kind: EventKind) {
        let flow = match kind {
            EventKind::RxStall { flow, .. }
            | EventKind::PacketLost { flow, .. }
            | EventKind::RingDrop { flow, .. }
            | EventKind::Retransmit { flow, .. }
            | EventKind::BacklogDrop { flow, .. }
            | EventKind::SynAckExpired { flow } => flow,
            _ => return,
        };
        if let Some(&conn) = self.flow_conn.get(&flow) {
            self.kernel_notes.entry(conn).or_default().push((at, kind));
        }
    }
}

/// The connection a core event is about, if any.
pub fn event_conn(e: &Event) -> Option<ConnId> {
    match e {
        Event::MessageSent { conn, .. }
        | Event::MessageTaken { conn, .. }
        | Event::UnexpectedQueued { conn, .. }
        | Event::ShortMessageAccepted { conn, .. }
        | Event::DrainGaveUp { conn, .. }
        | Event::DrainCompleted { conn, .. }
        | Event::StrayDropped { conn, .. }
        | Event::StalledDropped { conn, .. } => Some(*conn),
        _ => None,
    }
}

/// A finished trace: its lines and their SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// One line per event: simulated time, who, what.
    pub lines: Vec<String>,
    /// Hex SHA-256 of the lines joined by newlines.
    pub digest: String,
}

/// Collects trace lines when enabled; costs nothing otherwise.
pub struct TraceSink {
    lines: Option<Vec<String>>,
}

impl TraceSink {
    /// A sink that keeps lines only if `enabled`.
    pub fn new(enabled: bool) -> Self {
        TraceSink { lines: enabled.then(Vec::new) }
    }

    /// True when lines are kept.
    pub fn enabled(&self) -> bool {
        self.lines.is_some()
    }

    /// Appends `time who what`.
    pub fn line(&mut self, at: Instant, who: impl fmt::Display, what: fmt::Arguments<'_>) {
        if let Some(lines) = &mut self.lines {
            lines.push(format!("{at} {who} {what}"));
        }
    }

    /// The trace with its digest.
    pub fn finish(self) -> Option<Trace> {
        let lines = self.lines?;
        let mut h = Sha256::new();
        for l in &lines {
            h.update(l.as_bytes());
            h.update(b"\n");
        }
        let digest = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Some(Trace { lines, digest })
    }
}
