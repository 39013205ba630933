//! What the oracle says: one [`Finding`] per thing a checker noticed, and the [`Verdict`] they
//! imply together.

use std::fmt;

use serde::Serialize;

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
        /// The operation, as the trace names it.
        op: String,
        /// The peer whose chunk was wrong.
        peer: u32,
        /// Where the received bytes came from, e.g. "barrier #2 round 1 from rank 0".
        source: String,
        /// First wrong QP handle: expected and received (alltoall of handles only).
        expected_qp: Option<String>,
        /// The QP handle received in its place.
        received_qp: Option<String>,
        /// What hardware would do with it.
        verbs: Option<String>,
    },
    /// A receive took another step's message.
    ///
    /// Rank `rank`'s receive for `taken_for` took the message `source` names; `benign` when its
    /// bytes are never used (a barrier's).
    #[allow(missing_docs)] // fields documented above: the line is left as is for the oracle branch
    Mismatch { rank: u32, taken_for: String, source: String, benign: bool },
    /// An operation failed.
    ///
    /// `rank`: the rank whose operation failed (`None`: the root); `error`: the error's text.
    #[allow(missing_docs)] // fields documented above: the line is left as is for the oracle branch
    Error { rank: Option<u32>, error: String },
    /// A participant did not finish before the deadline.
    ///
    /// `who` ("rank 2", "the root") waits for `waiting`, with these (peer, tag) pairs on its
    /// `unexpected` list.
    #[allow(missing_docs)] // fields documented above: the line is left as is for the oracle branch
    Hang { who: String, waiting: String, unexpected: Vec<(i32, i32)> },
    /// Connections left in an unexpected list at the end.
    ///
    /// `rank`'s list still holds connections with these (peer, tag) `entries`.
    #[allow(missing_docs)] // fields documented above: the line is left as is for the oracle branch
    Leak { rank: u32, entries: Vec<(i32, i32)> },
    /// A drain gave up (fail-open): ordering was no longer guaranteed.
    ///
    /// Rank `rank`'s drain of its connection to rank `to` (message tag `tag`) gave up after
    /// `waited_ms` milliseconds.
    #[allow(missing_docs)] // fields documented above: the line is left as is for the oracle branch
    DrainGaveUp { rank: u32, to: u32, tag: i32, waited_ms: u64 },
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
            Finding::Corruption { rank, op, peer, source, expected_qp, received_qp, verbs } => {
                write!(f, "corruption: rank {rank} {op} chunk from rank {peer} holds {source}")?;
                if let (Some(e), Some(r)) = (expected_qp, received_qp) {
                    write!(f, "; expected {e}, received {r}")?;
                }
                if let Some(v) = verbs {
                    write!(f, "; {v}")?;
                }
                Ok(())
            }
            Finding::Mismatch { rank, taken_for, source, benign } => {
                let b = if *benign { " (benign: barrier bytes are unused)" } else { "" };
                write!(f, "mismatch: rank {rank} {taken_for} took {source}{b}")
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
            Finding::Hang { who, .. } => who.strip_prefix("rank ").and_then(|r| r.parse().ok()),
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
