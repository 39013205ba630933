//! Oracles: integrity of every delivered byte, what hardware would do with the exchanged QP
//! handles, typed errors, liveness and leaks. They turn an [`Outcome`] into a [`Verdict`].

use std::fmt;

use bootsim_core::{MsgOrigin, OpId, OpKind, QpHandle};
use serde::Serialize;

use crate::case::Case;
use crate::engine::outcome::{Outcome, SentMsg, TakenMsg};
use crate::workload::{expected_result, qp_handle, OpSpec};

mod provenance;
mod results;

pub use results::judge_results;

/// How a run ended, worst first in `Ord`'s reverse: corruption beats error beats hang.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Every rank finished with the right bytes.
    Pass,
    /// Messages were swapped, but only barrier messages whose bytes nobody uses.
    Benign,
    /// Unfinished ranks at the deadline.
    Hang,
    /// An operation failed with a typed error.
    Error,
    /// An operation reported success with wrong bytes.
    Corruption,
}

impl Verdict {
    /// Every verdict, in table order.
    pub const ALL: [Verdict; 5] = [Verdict::Pass, Verdict::Benign, Verdict::Corruption, Verdict::Error, Verdict::Hang];

    /// True for pass and benign.
    pub fn is_ok(self) -> bool {
        matches!(self, Verdict::Pass | Verdict::Benign)
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Benign => "benign",
            Verdict::Hang => "hang",
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
        rank: u32,
        op: String,
        peer: u32,
        /// Where the received bytes came from, e.g. "barrier #2 round 1 from rank 0".
        source: String,
        /// First wrong QP handle: expected and received (alltoall of handles only).
        expected_qp: Option<String>,
        received_qp: Option<String>,
        /// What hardware would do with it.
        verbs: Option<String>,
    },
    /// A receive took another step's message.
    Mismatch { rank: u32, taken_for: String, source: String, benign: bool },
    /// An operation failed.
    Error { rank: Option<u32>, error: String },
    /// A participant did not finish before the deadline.
    Hang { who: String, waiting: String, unexpected: Vec<(i32, i32)> },
    /// Connections left in an unexpected list at the end.
    Leak { rank: u32, entries: Vec<(i32, i32)> },
    /// A drain gave up (fail-open): ordering was no longer guaranteed.
    DrainGaveUp { rank: u32, to: u32, tag: i32, waited_ms: u64 },
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
        }
    }
}

fn describe(origin: &MsgOrigin, from: Option<u32>) -> String {
    let from = from.map_or(String::new(), |f| format!(" from rank {f}"));
    format!("{origin}{from}")
}

fn describe_sent(s: &SentMsg) -> String {
    describe(&s.origin, Some(s.from))
}

/// Judges a run.
pub fn judge(case: &Case, out: &Outcome) -> (Verdict, Vec<Finding>) {
    let n = case.ranks;
    let spec = case.workload.ops(case.seed);
    let mut findings = Vec::new();

    for t in &out.taken {
        let Some(sent) = t.kconn.and_then(|k| out.sent.get(&k)) else { continue };
        if sent.origin.op == t.origin.op && sent.origin.step == t.origin.step {
            continue;
        }
        let benign = sent.origin.kind == OpKind::Barrier && t.origin.kind == OpKind::Barrier;
        findings.push(Finding::Mismatch {
            rank: t.rank,
            taken_for: describe(&t.origin, None),
            source: describe_sent(sent),
            benign,
        });
    }

    for (r, end) in out.ranks.iter().enumerate() {
        let r = r as u32;
        for (_, c) in &end.completions {
            match &c.result {
                Err(e) => findings.push(Finding::Error {
                    rank: Some(r),
                    error: bootsim_core::report::error_text(r, c.op.0 as usize, e),
                }),
                Ok(bytes) if c.op != OpId(0) => {
                    let index = c.op.0 - 1;
                    let Some(&op_spec) = spec.get(index as usize) else { continue };
                    if let Some(expected) = expected_result(op_spec, case.seed, index, r, n) {
                        if *bytes != expected {
                            let source = |p| source_of(out, r, c.op, p).map(describe_sent);
                            findings.extend(corruption(&spec, case.seed, n, r, index, bytes, &expected, &source));
                        }
                    }
                }
                Ok(_) => {}
            }
        }
        if end.finished.is_none() {
            findings.push(Finding::Hang {
                who: format!("rank {r}"),
                waiting: end.waiting_for.clone().unwrap_or_else(|| "its next operation".into()),
                unexpected: end.unexpected.clone(),
            });
        } else if !end.unexpected.is_empty() {
            findings.push(Finding::Leak { rank: r, entries: end.unexpected.clone() });
        }
    }
    match &out.root_result {
        Some(Err(e)) => findings.push(Finding::Error { rank: None, error: e.to_string() }),
        None => findings.push(Finding::Hang {
            who: "the root".into(),
            waiting: out.root_waiting.clone().unwrap_or_default(),
            unexpected: Vec::new(),
        }),
        Some(Ok(_)) => {}
    }
    for &(_, rank, to, tag, waited, _) in &out.drain_gave_up {
        findings.push(Finding::DrainGaveUp { rank, to, tag, waited_ms: waited.as_millis() as u64 });
    }
    let verdict = findings.iter().map(Finding::verdict).max().unwrap_or(Verdict::Pass);
    (verdict, findings)
}

/// Names each wrong chunk of a successful operation, where its bytes came from
/// (`source(peer)`, else what the bytes themselves tell), and what the verbs layer would do
/// with a wrong QP handle. One function for every world, simulated or real.
#[allow(clippy::too_many_arguments)]
pub(crate) fn corruption(
    specs: &[OpSpec],
    seed: u64,
    n: u32,
    r: u32,
    index: u32,
    got: &[u8],
    expected: &[u8],
    source: &dyn Fn(u32) -> Option<String>,
) -> Vec<Finding> {
    let spec = specs[index as usize];
    let len = expected.len() / (n as usize).max(1);
    let mut findings = Vec::new();
    for p in 0..n as usize {
        let range = p * len..(p + 1) * len;
        let chunk = got.get(range.clone()).unwrap_or_default();
        if chunk == &expected[range.clone()] {
            continue;
        }
        let source = source(p as u32)
            .or_else(|| provenance::of_chunk(specs, seed, n, chunk))
            .unwrap_or_else(|| "bytes of unknown origin".to_string());
        let (mut expected_qp, mut received_qp, mut verbs) = (None, None, None);
        if let OpSpec::Alltoall(l) = spec {
            if l % QpHandle::SIZE == 0 && chunk.len() == l {
                let exp = QpHandle::decode_all(&expected[range]).unwrap_or_default();
                let rec = QpHandle::decode_all(chunk).unwrap_or_default();
                if let Some(k) = (0..exp.len()).find(|&k| exp[k] != rec[k]) {
                    expected_qp = Some(show(&exp[k]));
                    received_qp = Some(show(&rec[k]));
                    verbs = Some(verbs_check(specs, seed, n, r, &rec[k]));
                }
            }
        }
        findings.push(Finding::Corruption {
            rank: r,
            op: format!("{} #{index}", kind_name(spec)),
            peer: p as u32,
            source,
            expected_qp,
            received_qp,
            verbs,
        });
    }
    findings
}

fn kind_name(spec: OpSpec) -> &'static str {
    match spec {
        OpSpec::Allgather(_) => "allgather",
        OpSpec::Alltoall(_) => "alltoall",
        OpSpec::Barrier => "barrier",
    }
}

fn source_of(out: &Outcome, r: u32, op: OpId, peer: u32) -> Option<&SentMsg> {
    let t: &TakenMsg = out.taken.iter().find(|t| t.rank == r && t.origin.op == op && t.from == peer)?;
    out.sent.get(&t.kconn?)
}

fn show(h: &QpHandle) -> String {
    h.to_string()
}

/// What `ibv_modify_qp` to RTR would do with a received handle on a RoCE NIC, for rank `r` of a
/// run of `specs` over `n` ranks with payload seed `seed`.
pub fn verbs_check(specs: &[OpSpec], seed: u64, n: u32, r: u32, got: &QpHandle) -> String {
    if got.qpn == 0 || got.gid_is_zero() {
        let what = match (got.qpn == 0, got.gid_is_zero()) {
            (true, true) => "QPN 0x0 and a zero GID",
            (true, false) => "QPN 0x0",
            _ => "a zero GID",
        };
        return format!("rank {r} would call ibv_modify_qp(RTR) with {what}: EINVAL");
    }
    let alltoalls = specs.iter().enumerate().filter(|(_, o)| matches!(o, OpSpec::Alltoall(_)));
    for (i, spec) in alltoalls {
        let OpSpec::Alltoall(len) = spec else { continue };
        let qps = (*len / QpHandle::SIZE) as u32;
        for p in 0..n {
            for q in 0..n {
                if p != r && q != r {
                    continue;
                }
                for k in 0..qps {
                    if qp_handle(seed ^ (i as u64) << 48, p, q, k) == *got {
                        return format!(
                            "cross-wired QP: rank {r} would connect to rank {p}'s QP {k} meant for rank {q} (alltoall #{i})"
                        );
                    }
                }
            }
        }
    }
    format!("rank {r} would connect to QPN {:#x}, which no peer created: the QP never reaches RTS", got.qpn)
}
