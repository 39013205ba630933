//! The judge, fed as a run goes: each take is checked for a mismatch when it happens, each
//! operation's bytes when it completes, so a world that streams its record into it keeps only
//! what is in flight. [`super::judge`] feeds a whole record through the same steps, so both
//! give the same findings in the same order.

use std::collections::BTreeMap;

use bootsim_core::{MsgOrigin, OpId, RunRecord, SentMsg, TakenMsg};

use super::{drain, errors, integrity, leaks, liveness, mismatches, provenance_of, Finding, Provenance, Verdict};
use bootsim_nvshmem::workload::{expected_result, OpSpec};

/// A take of one rank not yet judged with its operation: the receiving step, the peer it
/// asked for and the message it was. 32 bytes: a world in an alltoall holds one per message.
#[derive(Debug)]
struct PendingTake {
    origin: MsgOrigin,
    from: u32,
    /// Whether the world recorded the message it was.
    known: bool,
    /// That message, when it was not the one its own step sent (same operation, type and
    /// step, from the peer asked for); a field of its own rather than an enum with the two
    /// cases above, which would not fit in 32 bytes.
    other: Option<Box<SentMsg>>,
}

impl PendingTake {
    fn new(t: &TakenMsg, source: Option<&SentMsg>) -> PendingTake {
        let other = source.filter(|s| s.origin != t.origin || s.from != t.from).map(|s| Box::new(s.clone()));
        PendingTake { origin: t.origin, from: t.from, known: source.is_some(), other }
    }

    /// The message it was, as findings name it (`provenance_of` it).
    fn source(&self) -> Option<Provenance> {
        match &self.other {
            _ if !self.known => None,
            None => Some(Provenance::Message { from: self.from, origin: self.origin }),
            Some(s) => Some(provenance_of(s)),
        }
    }
}

/// The oracle's state while a run goes on; [`Judge::finish`] gives the verdict.
#[derive(Debug)]
pub struct Judge {
    specs: Vec<OpSpec>,
    seed: u64,
    n: u32,
    /// Mismatches, in the order they were taken.
    mismatches: Vec<Finding>,
    /// Per rank: its takes whose operation has not completed yet.
    pending: Vec<Vec<PendingTake>>,
    /// Per rank: each operation's error or corruption, in operation order.
    ops: Vec<Vec<Finding>>,
    /// Each allgather's expected result by operation index, with how many ranks have yet to
    /// complete it: the same for every rank, so made once, not once per rank (it was 14 % of
    /// a 64-rank run's instructions), and dropped when the last rank is judged.
    allgathers: BTreeMap<usize, (Vec<u8>, u32)>,
}

impl Judge {
    /// A judge of `specs` over `n` ranks with payload seed `seed`.
    pub fn new(specs: &[OpSpec], seed: u64, n: u32) -> Judge {
        Judge {
            specs: specs.to_vec(),
            seed,
            n,
            mismatches: Vec::new(),
            pending: Vec::new(),
            ops: Vec::new(),
            allgathers: BTreeMap::new(),
        }
    }

    /// A receive took `t`, which is `source` if that is known.
    pub fn taken(&mut self, t: &TakenMsg, source: Option<&SentMsg>) {
        if let Some(sent) = source {
            self.mismatches.extend(mismatches::of_take(t, sent));
        }
        slot(&mut self.pending, t.rank).push(PendingTake::new(t, source));
    }

    /// Rank `r`'s operation `index` (from 0; init is not one) ended with `result`: its error,
    /// or its bytes checked against the workload with the messages it took.
    pub fn completed(&mut self, r: u32, index: usize, result: &Result<Vec<u8>, String>) {
        slot(&mut self.ops, r);
        let (pending, ops) = (slot(&mut self.pending, r), &mut self.ops[r as usize]);
        let op = OpId(index as u32 + 1);
        match result {
            Err(e) => ops.push(errors::op(r, e)),
            Ok(got) => {
                let source = |peer: u32| {
                    pending.iter().find(|t| t.origin.op == op && t.from == peer).and_then(PendingTake::source)
                };
                let (specs, seed, n) = (&self.specs, self.seed, self.n);
                let expected = |spec| expected_result(spec, seed, index as u32, r, n);
                match specs.get(index) {
                    Some(&spec @ OpSpec::Allgather(_)) => {
                        let (bytes, left) =
                            self.allgathers.entry(index).or_insert_with(|| (expected(spec).unwrap_or_default(), n));
                        ops.extend(integrity::check(specs, seed, n, r, index, got, bytes, &source));
                        *left = left.saturating_sub(1);
                        if *left == 0 {
                            self.allgathers.remove(&index);
                        }
                    }
                    Some(&spec) => {
                        if let Some(bytes) = expected(spec) {
                            ops.extend(integrity::check(specs, seed, n, r, index, got, &bytes, &source));
                        }
                    }
                    None => {}
                }
            }
        }
        pending.retain(|t| t.origin.op > op);
    }

    /// Init of rank `r` ended: its takes are judged by nothing else.
    pub fn init_ended(&mut self, r: u32) {
        slot(&mut self.pending, r).retain(|t| t.origin.op > OpId(0));
    }

    /// The verdict and findings, in the fixed order: mismatches as taken; then per rank its
    /// init error, each operation's error or corruption in order, and its hang, early end or
    /// leak; then the root; then drains. What `record` holds beyond the fed messages and
    /// operations (ends, waits, the root, drains) is read here.
    pub fn finish(mut self, record: &RunRecord) -> (Verdict, Vec<Finding>) {
        let findings = std::mem::take(&mut self.mismatches);
        let ops = self.specs.len();
        conclude(
            findings,
            record,
            |_| ops,
            |rank| self.ops.get_mut(rank as usize).map(std::mem::take).unwrap_or_default(),
        )
    }
}

/// The findings every protocol's judge ends with, after `findings` (its mismatches): per rank
/// its init error, then `op_findings` (each operation's error or corruption, in order), its
/// hang, early end (of `ops(rank)` operations) or leak; then the root; then drains. With the
/// verdict they imply.
pub(crate) fn conclude(
    mut findings: Vec<Finding>,
    record: &RunRecord,
    ops: impl Fn(u32) -> usize,
    mut op_findings: impl FnMut(u32) -> Vec<Finding>,
) -> (Verdict, Vec<Finding>) {
    for rank in &record.ranks {
        findings.extend(errors::init(rank));
        findings.extend(op_findings(rank.rank));
        findings.extend(liveness::rank(rank, ops(rank.rank)));
        findings.extend(leaks::check(rank));
    }
    findings.extend(errors::root(&record.root));
    findings.extend(liveness::root(&record.root));
    findings.extend(drain::check(&record.drain_gave_up));
    let verdict = findings.iter().map(Finding::verdict).max().unwrap_or(Verdict::Pass);
    (verdict, findings)
}

/// Rank `r`'s entry of a per-rank table, made if the table is shorter.
fn slot<T>(table: &mut Vec<Vec<T>>, r: u32) -> &mut Vec<T> {
    let r = r as usize;
    if table.len() <= r {
        table.resize_with(r + 1, Vec::new);
    }
    &mut table[r]
}

#[cfg(test)]
mod tests {
    use bootsim_core::{Instant, MsgOrigin, OpId, SentMsg, TakenMsg};
    use bootsim_nvshmem::OpKind;

    use bootsim_core::RunRecord;

    use super::{provenance_of, Judge, PendingTake};
    use crate::oracle::Verdict;
    use bootsim_nvshmem::workload::{expected_result, OpSpec};

    #[test]
    fn an_allgathers_expected_bytes_are_made_once_shared_by_every_rank_and_dropped_after_the_last() {
        let (specs, seed, n) = ([OpSpec::Allgather(8), OpSpec::Allgather(3)], 4, 3);
        let mut j = Judge::new(&specs, seed, n);
        for r in 0..n {
            for (i, s) in specs.iter().enumerate() {
                let mut got = expected_result(*s, seed, i as u32, r, n).unwrap();
                if (r, i) == (1, 1) {
                    got[3] ^= 1; // rank 1's second allgather: rank 1's own slice, byte 0, is wrong
                }
                j.completed(r, i, &Ok(got));
            }
            let judged = r + 1;
            assert_eq!(j.allgathers.len(), if judged < n { 2 } else { 0 }, "after rank {r}");
        }
        // The ends as the streaming world leaves them: each operation's bytes dropped once judged.
        let mut record = RunRecord::new(n as usize);
        for rank in &mut record.ranks {
            rank.ops = vec![Ok(Vec::new()); specs.len()];
        }
        let (verdict, findings) = j.finish(&record);
        assert_eq!(verdict, Verdict::Corruption);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(
            findings[0].to_string().starts_with("corruption: rank 1 allgather #1 chunk from rank 1 "),
            "{findings:?}"
        );
    }

    #[test]
    fn a_pending_take_is_small_and_names_its_source_as_the_sent_message_would() {
        // A world in an alltoall holds one per message in flight.
        assert!(std::mem::size_of::<PendingTake>() <= 32, "{}", std::mem::size_of::<PendingTake>());
        let origin = |op, step| MsgOrigin { op: OpId(op), kind: OpKind::Alltoall.op_type(), step };
        let t = TakenMsg {
            at: Instant::ZERO,
            rank: 1,
            from: 0,
            tag: 1,
            origin: origin(2, 1),
            size: 48,
            expected_size: 48,
            conn: None,
        };
        let sent = |o, from| SentMsg { from, to: 1, tag: 1, origin: o, size: 48, at: Instant::ZERO };
        for s in [sent(origin(2, 1), 0), sent(origin(1, 1), 0), sent(origin(2, 1), 3), sent(origin(2, 2), 0)] {
            assert_eq!(PendingTake::new(&t, Some(&s)).source(), Some(provenance_of(&s)), "{s:?}");
        }
        assert_eq!(PendingTake::new(&t, None).source(), None);
    }
}
