//! What an engine run leaves behind: the run record the oracle judges (completions, message
//! log, final states) and what only a simulated world has (kernel notes, the trace).

use std::collections::BTreeMap;
use std::fmt;

use bootsim_core::seam::{Completed, Judge as SeamJudge, Noted, Observed};
use bootsim_core::{Awaited, ConnId, DrainGiveUp, Instant, RecordedError, RootEnd, RunRecord, SentMsg, TakenMsg};
use bootsim_nvshmem::BootstrapError;
use sha2::{Digest, Sha256};

use crate::kernel::{EventKind, Flow, KernelStats};
use crate::oracle::{Finding, Verdict};
use bootsim_nvshmem::workload::OpSpec;

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

/// Everything a run produced: the record the oracle judges, and what only a simulated world
/// has (strays, kernel notes and counters, drains that waited, the trace).
#[derive(Debug, Default)]
pub struct Outcome {
    /// The judged part, the same record real worlds produce.
    pub record: RunRecord,
    /// Connections dropped as strays: (time, node, reason).
    pub strays: Vec<(Instant, Node, String)>,
    /// Notable kernel events per kernel connection (only when tracing): SYN sent, child
    /// enqueued, accepted, RX stalls, losses, retransmissions, backlog drops.
    pub kernel_notes: BTreeMap<u64, Vec<(Instant, EventKind)>>,
    /// Every RX stall, in order (only when tracing): what `shrink` forces explicitly.
    pub rx_stalls: Vec<EventKind>,
    flow_conn: BTreeMap<Flow, u64>,
    /// Every drain that waited (completed or gave up), in order.
    pub drains: Vec<DrainNote>,
    /// Kernel counters.
    pub kernel: KernelStats,
    /// Simulated time when the run stopped.
    pub end: Instant,
    /// The trace, if kept.
    pub trace: Option<Trace>,
    /// Set in a streaming outcome: the judge its messages and results went to as they came.
    judge: Option<StreamJudge>,
    /// Why the engine stopped before the deadline with ranks unfinished (its work guard).
    pub gave_up: Option<super::GuardTrip>,
}

impl Outcome {
    /// An empty outcome for `n` ranks.
    pub fn new(n: usize) -> Outcome {
        Outcome { record: RunRecord::new(n), ..Outcome::default() }
    }

    /// An outcome for `n` ranks that judges as the run goes (the protocol's `judge`) and keeps
    /// only what is in flight: messages until taken, no operation's bytes once judged (each
    /// `Ok` holds none). [`Outcome::verdict`] gives its verdict; explain, the timeline and
    /// shrink need a full outcome ([`Outcome::new`]), as a traced run keeps.
    pub fn streaming(n: usize, judge: Box<dyn SeamJudge<Report = (Verdict, Vec<Finding>)>>) -> Outcome {
        let mut out = Outcome::new(n);
        out.record.messages = bootsim_core::MessageLog::streaming();
        out.judge = Some(StreamJudge(judge));
        out
    }

    /// The verdict and findings of an NVSHMEM run of `specs` (payload seed `seed`, `n` ranks):
    /// [`Outcome::verdict_by`] NVSHMEM's judge.
    pub fn verdict(&mut self, specs: &[OpSpec], seed: u64, n: u32) -> (Verdict, Vec<Finding>) {
        self.verdict_with(|| crate::protocol::nvshmem::judge_of(specs, seed, n))
    }

    /// The verdict and findings: the streaming judge's, else the record judged whole by `judge`
    /// (the protocol's). A run the engine's work guard stopped is [`Verdict::Guard`] with the
    /// guard's finding first, unless it failed worse before (an error or corruption stands); its
    /// unfinished ranks are no hangs (the deadline never came), so hang findings are dropped.
    pub fn verdict_by(&mut self, judge: impl SeamJudge<Report = (Verdict, Vec<Finding>)>) -> (Verdict, Vec<Finding>) {
        self.verdict_with(|| judge)
    }

    /// [`Outcome::verdict_by`] with the protocol's judge made only when it is needed: a run
    /// judged as it went has its own (making NCCL's oracle again was 6 % of an 8-rank run).
    pub fn verdict_with<J: SeamJudge<Report = (Verdict, Vec<Finding>)>>(
        &mut self,
        judge: impl FnOnce() -> J,
    ) -> (Verdict, Vec<Finding>) {
        let (verdict, mut findings) = match self.judge.take() {
            Some(mut j) => j.0.finish(&self.record),
            None => {
                let mut judge = judge();
                judge.feed(&self.record);
                judge.finish(&self.record)
            }
        };
        match &self.gave_up {
            Some(trip) => {
                findings.retain(|f| !matches!(f, Finding::Hang { .. }));
                findings.insert(0, trip.finding(&self.record));
                (verdict.max(Verdict::Guard), findings)
            }
            None => (verdict, findings),
        }
    }

    /// Records a completion of rank `r` (init first, then each operation in order).
    pub fn completed<C: Completed>(&mut self, r: u32, at: Instant, c: C) {
        let op = c.op();
        let index = op as usize;
        let mut result = c.into_result().map_err(|e| RecordedError::of::<C>(r, op, &e));
        let rank = &mut self.record.ranks[r as usize];
        if let Some(StreamJudge(j)) = &mut self.judge {
            if index == 0 {
                j.init_ended(r);
            } else {
                j.completed(r, rank.ops.len(), &result);
                if let Ok(bytes) = &mut result {
                    *bytes = Vec::new();
                }
            }
        }
        rank.ended(index, at, result);
    }

    /// Marks rank `r` as ended (its operations done or stopped at an error) at `at`, once.
    /// Returns whether it had not ended before.
    pub fn rank_ended(&mut self, r: u32, at: Instant) -> bool {
        let end = &mut self.record.ranks[r as usize].finished_at;
        let first = end.is_none();
        end.get_or_insert(at);
        first
    }

    /// Records the root's result.
    pub fn root_ended(&mut self, result: &Result<Vec<u8>, BootstrapError>) {
        self.root_finished(result.as_ref().err().map(RecordedError::of_root::<bootsim_nvshmem::Completion>));
    }

    /// Records the root's end: done, or failed with this error.
    pub fn root_finished(&mut self, error: Option<RecordedError>) {
        self.record.root = match error {
            None => RootEnd::Done,
            Some(e) => RootEnd::Failed(e),
        };
    }

    /// Records where rank `r` stands when the run stops: its unexpected list and, unless it
    /// ended, what it waits for.
    pub fn rank_stopped(&mut self, r: u32, waiting_for: Option<Awaited>, unexpected: Vec<(i32, i32)>) {
        let end = &mut self.record.ranks[r as usize];
        end.unexpected = unexpected;
        if end.finished_at.is_none() {
            end.unfinished = Some(waiting_for.unwrap_or_else(|| "its next operation".into()));
        }
    }

    /// Records what the root waits for when the run stops, unless it ended.
    pub fn root_stopped(&mut self, waiting_for: Option<Awaited>) {
        if self.record.root == RootEnd::NotObserved {
            self.record.root = RootEnd::Waiting(waiting_for.unwrap_or_else(|| String::new().into()));
        }
    }

    /// Records a protocol event; `kconn` is the kernel connection of the event's connection.
    pub fn record_event<E: Observed>(&mut self, at: Instant, node: Node, e: E, kconn: Option<u64>) {
        let noted = e.noted();
        let Node::Rank(rank) = node else {
            if let Noted::Stray { error } = noted {
                self.strays.push((at, node, error));
            }
            return;
        };
        let log = &mut self.record.messages;
        match noted {
            Noted::Sent { to, tag, origin, size } => {
                log.sent(kconn, SentMsg { from: rank, to, tag, origin, size, at });
            }
            Noted::Taken { from, tag, origin, size, expected_size } => {
                let (t, source) =
                    log.taken(kconn, TakenMsg { at, rank, from, tag, origin, size, expected_size, conn: None });
                if let Some(StreamJudge(j)) = &mut self.judge {
                    j.taken(&t, source.as_ref());
                }
            }
            Noted::DrainGaveUp { to, tag, waited, unacked } => {
                let start = Instant::from_nanos(at.as_nanos().saturating_sub(waited.as_nanos() as u64));
                self.drains.push(DrainNote { start, end: at, rank, to, kconn, gave_up: true, unacked });
                self.record.drain_gave_up.push(DrainGiveUp { at, rank, to, tag, waited, unacked });
            }
            Noted::DrainCompleted { to, waited } if !waited.is_zero() => {
                let start = Instant::from_nanos(at.as_nanos().saturating_sub(waited.as_nanos() as u64));
                self.drains.push(DrainNote { start, end: at, rank, to, kconn, gave_up: false, unacked: 0 });
            }
            Noted::Stray { error } => self.strays.push((at, node, error)),
            _ => {}
        }
    }

    /// Records a trace-only kernel event under its connection (packet events under the latest
    /// connection with their 4-tuple); returns that connection, for the trace line.
    pub fn record_kernel(&mut self, at: Instant, kind: EventKind) -> Option<u64> {
        if matches!(kind, EventKind::RxStall { .. }) {
            self.rx_stalls.push(kind);
        }
        let conn = crate::words::kernel_conn(&kind, &mut self.flow_conn)?;
        if !kind.is_app() {
            self.kernel_notes.entry(conn).or_default().push((at, kind));
        }
        Some(conn)
    }
}

/// The connection a protocol event is about, if any.
pub fn event_conn<E: Observed>(e: &E) -> Option<ConnId> {
    e.conn()
}

/// A streaming outcome's judge: the protocol's, fed as the run goes.
struct StreamJudge(Box<dyn SeamJudge<Report = (Verdict, Vec<Finding>)>>);

impl fmt::Debug for StreamJudge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StreamJudge")
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

/// Appends a trace line (`sink, time, who, format...`) when the sink keeps lines; otherwise its
/// arguments are not even evaluated (making them cost an untraced run's write 18 instructions).
macro_rules! trace_line {
    ($sink:expr, $at:expr, $who:expr, $($what:tt)+) => {
        if $sink.enabled() {
            $sink.line($at, $who, format_args!($($what)+));
        }
    };
}
pub(crate) use trace_line;

/// Collects trace lines when enabled; costs nothing otherwise (through the `trace_line!` macro).
pub struct TraceSink {
    lines: Option<Vec<(Instant, String)>>,
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
            lines.push((at, format!("{at} {who} {what}")));
        }
    }

    /// Adds lines known only when the run ends (the turmoil engine's rank events), each after
    /// the kept lines of the same or an earlier time, in the order given among equal times.
    pub fn merge(&mut self, who: impl fmt::Display, extra: Vec<(Instant, String)>) {
        let Some(lines) = &mut self.lines else { return };
        let mut extra: Vec<(Instant, String)> =
            extra.into_iter().map(|(at, what)| (at, format!("{at} {who} {what}"))).collect();
        extra.sort_by_key(|(at, _)| *at);
        let kept = std::mem::take(lines);
        let mut extra = extra.into_iter().peekable();
        for (at, line) in kept {
            while let Some(x) = extra.next_if(|(t, _)| *t < at) {
                lines.push(x);
            }
            lines.push((at, line));
        }
        lines.extend(extra);
    }

    /// The trace with its digest.
    pub fn finish(self) -> Option<Trace> {
        let lines: Vec<String> = self.lines?.into_iter().map(|(_, l)| l).collect();
        let mut h = Sha256::new();
        for l in &lines {
            h.update(l.as_bytes());
            h.update(b"\n");
        }
        let digest = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Some(Trace { lines, digest })
    }
}
