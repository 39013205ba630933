//! What the oracle says: one [`Finding`] per thing a checker noticed, and the [`Verdict`] they
//! imply together.

use std::fmt;
use std::sync::Arc;

use bootsim_core::{Awaited, MsgOrigin, OpName, OpType, RecordedError};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// How a run ended, worst first in `Ord`'s reverse: corruption beats error beats guard beats hang
/// (a run the work guard stopped has no deadline hangs, but what failed before it still counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Every rank finished with the right bytes.
    Pass,
    /// Messages were swapped, but only barrier messages whose bytes nobody uses.
    Benign,
    /// Unfinished ranks at the deadline.
    Hang,
    /// No verdict on the protocol: the engine's work guard stopped the run before its deadline
    /// (the case is too costly to simulate). Not a violation; the CLI's "could not run" (exit 3).
    Guard,
    /// An operation failed with a typed error.
    Error,
    /// An operation reported success with wrong bytes.
    Corruption,
}

impl Verdict {
    /// Every verdict, in table order.
    pub const ALL: [Verdict; 6] =
        [Verdict::Pass, Verdict::Benign, Verdict::Corruption, Verdict::Error, Verdict::Hang, Verdict::Guard];

    /// True for pass and benign.
    pub fn is_ok(self) -> bool {
        matches!(self, Verdict::Pass | Verdict::Benign)
    }

    /// True for a violation of the protocol: neither ok nor a run the guard stopped.
    pub fn is_violation(self) -> bool {
        !self.is_ok() && self != Verdict::Guard
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Benign => "benign",
            Verdict::Hang => "hang",
            Verdict::Guard => "guard",
            Verdict::Error => "error",
            Verdict::Corruption => "corruption",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.name() == s)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One thing an oracle noticed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// A successful operation delivered wrong bytes from `peer`.
    Corruption {
        /// The rank whose operation returned the wrong bytes.
        rank: u32,
        /// The operation (or, for a protocol that names program steps, the step).
        op: OpRef,
        /// The peer whose chunk was wrong.
        peer: u32,
        /// Where the received bytes came from, e.g. "barrier #2 round 1 from rank 0".
        source: Provenance,
        /// The protocol's own account of the first wrong item (NVSHMEM: the QP handle expected
        /// and received, and what the verbs layer would do with it); its `--json` fields sit
        /// beside the others.
        #[serde(flatten)]
        detail: Option<Detail>,
    },
    /// A receive took another step's message.
    Mismatch {
        /// The rank whose receive took it.
        rank: u32,
        /// The step the receive was for.
        taken_for: OpRef,
        /// Where the message taken came from.
        source: Provenance,
        /// Whether its bytes are never used (neither side reads them), so no harm is done.
        benign: bool,
    },
    /// An operation failed.
    Error {
        /// The rank whose operation failed (`None`: the root).
        rank: Option<u32>,
        /// The error, typed as the record holds it (its words in `--json`).
        #[serde(serialize_with = "as_text")]
        error: RecordedError,
    },
    /// A participant did not finish before the deadline.
    Hang {
        /// Who waits: a rank or the root.
        who: Who,
        /// What it waits for, typed as the record holds it (its words in `--json`).
        #[serde(serialize_with = "as_text")]
        waiting: Awaited,
        /// The (peer, tag) pairs on its unexpected list.
        unexpected: Vec<(i32, i32)>,
    },
    /// Connections left in an unexpected list at the end.
    Leak {
        /// The rank whose list it is.
        rank: u32,
        /// The (peer, tag) of each connection still on it.
        entries: Vec<(i32, i32)>,
    },
    /// A drain gave up (fail-open): ordering was no longer guaranteed.
    DrainGaveUp {
        /// The rank that drained.
        rank: u32,
        /// The rank its connection went to.
        to: u32,
        /// The drained message's tag.
        tag: i32,
        /// How long it waited, in milliseconds.
        waited_ms: u64,
    },
    /// The engine's work guard stopped the run after `steps` steps at simulated `at`, before
    /// its deadline: the case is too costly to simulate with its kernel `knobs`. `progress`
    /// names the unfinished ranks, latest progress first.
    Guard {
        /// Engine steps taken when the guard tripped.
        steps: u64,
        /// Simulated time it tripped at, rendered (`255.082349s`).
        at: String,
        /// The case's deadline, in milliseconds of simulated time.
        deadline_ms: u64,
        /// The unfinished ranks' last progress, latest first.
        progress: String,
        /// The kernel knobs that made the case costly.
        knobs: String,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Corruption { rank, op, peer, source, detail } => {
                write!(f, "corruption: rank {rank} {op} chunk from rank {peer} holds {source}")?;
                if let Some((e, r)) = detail.as_ref().and_then(Detail::expected_received) {
                    write!(f, "; expected {e}, received {r}")?;
                }
                if let Some(v) = detail.as_ref().and_then(Detail::consequence) {
                    write!(f, "; {v}")?;
                }
                Ok(())
            }
            Finding::Mismatch { rank, taken_for, source, benign } => {
                write!(f, "mismatch: rank {rank} {taken_for} took {source}")?;
                if *benign {
                    write!(f, " (benign: {})", taken_for.unused_bytes())?;
                }
                Ok(())
            }
            Finding::Error { rank: Some(r), error } => write!(f, "error: rank {r}: {error}"),
            Finding::Error { rank: None, error } => write!(f, "error: {error}"),
            Finding::Hang { who, waiting, unexpected } => {
                write!(f, "hang: {who} waits for {waiting}")?;
                if !unexpected.is_empty() {
                    write!(f, "; unexpected list: {}", crate::words::peer_tags(unexpected))?;
                }
                Ok(())
            }
            Finding::Leak { rank, entries } => {
                write!(
                    f,
                    "leak: rank {rank} ends with unexpected connections from {}",
                    crate::words::peer_tags(entries)
                )
            }
            Finding::DrainGaveUp { rank, to, tag, waited_ms } => {
                write!(f, "drain gave up: rank {rank} to rank {to} tag {tag:#x} after {waited_ms} ms (fail-open)")
            }
            Finding::Guard { steps, at, deadline_ms, progress, knobs } => write!(
                f,
                "guard: the run exceeded {steps} steps at simulated {at}, before deadline_ms={deadline_ms}; \
                 last progress by {progress}; the case is too costly to simulate with these kernel knobs: \
                 {knobs} (lower the costs or the deadline)"
            ),
        }
    }
}

impl Finding {
    /// The rank it is about, if one.
    pub fn rank(&self) -> Option<u32> {
        match self {
            Finding::Corruption { rank, .. }
            | Finding::Mismatch { rank, .. }
            | Finding::Leak { rank, .. }
            | Finding::DrainGaveUp { rank, .. } => Some(*rank),
            Finding::Error { rank, .. } => *rank,
            Finding::Guard { .. } => None,
            Finding::Hang { who: Who::Rank(r), .. } => Some(*r),
            Finding::Hang { who: Who::Root, .. } => None,
        }
    }

    /// The verdict this finding alone implies.
    pub fn verdict(&self) -> Verdict {
        match self {
            Finding::Corruption { .. } => Verdict::Corruption,
            Finding::Mismatch { benign: true, .. } => Verdict::Benign,
            Finding::Mismatch { benign: false, .. } => Verdict::Pass,
            Finding::Error { .. } | Finding::Leak { .. } => Verdict::Error,
            Finding::Hang { .. } => Verdict::Hang,
            Finding::DrainGaveUp { .. } => Verdict::Pass,
            Finding::Guard { .. } => Verdict::Guard,
        }
    }
}

/// A typed part of a finding as its words, in `--json`.
fn as_text<T: fmt::Display, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(value)
}

/// A participant of a run: a rank or the root (`rank 3`, `the root` in words and `--json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// A rank.
    Rank(u32),
    /// The root.
    Root,
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Who::Rank(r) => write!(f, "rank {r}"),
            Who::Root => f.write_str("the root"),
        }
    }
}

impl Serialize for Who {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// An operation, or one step of one, as a finding names it: kept typed, rendered at the edge
/// (the finding's line, explain, the timeline, `--json`'s string).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpRef {
    /// A workload operation: its type and id (`alltoall #1`).
    Op(OpName),
    /// One step of an operation (`barrier #2 round 1`).
    Step(MsgOrigin),
    /// A step of a protocol's per-rank program, by the call the protocol runs there in its own
    /// words (NCCL: `bootstrapAllGather(peer addresses) at bootstrap.cc:NNN`; None where the
    /// program has no such step): `CALL (step 9)`, or `step 9`.
    Call {
        /// The call, as the protocol names it.
        call: Option<String>,
        /// Its index in the rank's program.
        step: usize,
    },
}

impl OpRef {
    /// Why a swap of messages of this operation is benign, in its protocol's words: its
    /// messages' bytes are read by neither side (`barrier bytes are unused`).
    pub fn unused_bytes(&self) -> String {
        match self {
            OpRef::Op(OpName(kind, _)) | OpRef::Step(MsgOrigin { kind, .. }) => {
                format!("{} bytes are unused", kind.name())
            }
            OpRef::Call { .. } => "neither message's bytes are read".into(),
        }
    }
}

impl fmt::Display for OpRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpRef::Op(op) => write!(f, "{op}"),
            OpRef::Step(origin) => write!(f, "{origin}"),
            OpRef::Call { call: Some(call), step } => write!(f, "{call} (step {step})"),
            OpRef::Call { call: None, step } => write!(f, "step {step}"),
        }
    }
}

impl Serialize for OpRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One sender's part of an operation, as the protocol whose workload made it names it:
/// `alltoall #2's chunk from rank 1 for rank 0`, `allgather #0's slice of rank 3`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payload {
    /// The operation.
    pub op: OpRef,
    /// What one sender's part of it is called: `chunk`, `slice`, `word`, `payload`.
    pub part: &'static str,
    /// The rank that sent it.
    pub from: u32,
    /// The rank it was made for, where each receiver gets its own (None: the same for all).
    pub to: Option<u32>,
}

impl fmt::Display for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Payload { op, part, from, to } = self;
        match to {
            Some(to) => write!(f, "{op}'s {part} from rank {from} for rank {to}"),
            None => write!(f, "{op}'s {part} of rank {from}"),
        }
    }
}

/// What some bytes are, told by the bytes themselves: every payload of a protocol's workload
/// is derived from what it belongs to (seed, operation, sender, receiver), so bytes equal to
/// one name it. A protocol tells it ([`super::payloads::Origins::what`]) for worlds that record no
/// messages (NVSHMEM's real plugin).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BytesAre {
    /// A payload of the workload.
    Payload(Payload),
    /// All `len` bytes zero: nothing was written into them.
    Zeros {
        /// How many.
        len: usize,
    },
    /// A shorter message's bytes (`head`) copied into the first bytes, the other `rest` bytes
    /// zero: a message of an operation of type `kind` taken for this one (`whose`, where its
    /// bytes name it).
    ShortCopy {
        /// The short message's bytes.
        head: Vec<u8>,
        /// The zero bytes after it.
        rest: usize,
        /// The type of operation whose message it is.
        kind: OpType,
        /// Whose message it is, if its bytes tell.
        whose: Option<Payload>,
    },
}

impl fmt::Display for BytesAre {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BytesAre::Payload(p) => write!(f, "{p}"),
            BytesAre::Zeros { len } => write!(f, "{len} zero bytes: nothing was written into it"),
            BytesAre::ShortCopy { head, rest, kind, whose } => {
                write!(f, "a {}-byte message ", head.len())?;
                for b in head {
                    write!(f, "{b:02x}")?;
                }
                if let Some(w) = whose {
                    write!(f, " ({w})")?;
                }
                write!(
                    f,
                    " copied into its first bytes, the other {rest} bytes zero: a {kind}'s message taken for this one"
                )
            }
        }
    }
}

/// Where the bytes of a wrong chunk (or a receive's message) came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// The message the receive took: who sent it, and the operation and step it belongs to.
    Message {
        /// The sending rank.
        from: u32,
        /// Its operation and step on the sender.
        origin: MsgOrigin,
    },
    /// The message the receive took, by the sender's program step (NCCL's calls).
    Sent {
        /// The sending rank.
        from: u32,
        /// Its step on the sender.
        step: OpRef,
    },
    /// What the bytes themselves tell (a world that records no messages).
    Bytes(BytesAre),
    /// Nothing tells.
    Unknown,
}

impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Provenance::Message { from, origin } => write!(f, "{origin} from rank {from}"),
            Provenance::Sent { from, step } => write!(f, "{step} from rank {from}"),
            Provenance::Bytes(bytes) => write!(f, "{bytes}"),
            Provenance::Unknown => f.write_str("bytes of unknown origin"),
        }
    }
}

impl Serialize for Provenance {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A protocol's account of the first wrong item in a corrupted chunk, kept typed in the finding
/// and rendered only at the edge: the finding's line, explain, the timeline, `--json`.
pub trait WrongItem: fmt::Debug + Send + Sync {
    /// The item expected and the one received, in the protocol's words (None: it names none).
    fn expected_received(&self) -> Option<(String, String)>;
    /// What the received item would lead to, where the protocol knows.
    fn consequence(&self) -> Option<String>;
    /// Its `--json` fields, in order, under the protocol's own keys (None is null).
    fn json_fields(&self) -> Vec<(&'static str, Option<String>)>;
}

/// A [`WrongItem`] in a [`Finding`]: shared, compared and serialized by what it renders.
#[derive(Clone)]
pub struct Detail(Arc<dyn WrongItem>);

impl Detail {
    /// A finding's detail of `item`.
    pub fn new(item: impl WrongItem + 'static) -> Detail {
        Detail(Arc::new(item))
    }

    /// See [`WrongItem::expected_received`].
    pub fn expected_received(&self) -> Option<(String, String)> {
        self.0.expected_received()
    }

    /// See [`WrongItem::consequence`].
    pub fn consequence(&self) -> Option<String> {
        self.0.consequence()
    }
}

impl fmt::Debug for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for Detail {
    fn eq(&self, other: &Detail) -> bool {
        self.0.json_fields() == other.0.json_fields()
    }
}

impl Eq for Detail {}

impl Serialize for Detail {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let fields = self.0.json_fields();
        let mut map = s.serialize_map(Some(fields.len()))?;
        for (key, value) in &fields {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}
