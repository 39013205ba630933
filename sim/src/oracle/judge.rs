//! The judge, fed as a run goes: each take is checked for a mismatch when it happens, each
//! operation's bytes when it completes, so a world that streams its record into it keeps only
//! what is in flight. [`super::judge`] feeds a whole record through the same steps, so both
//! give the same findings in the same order.

use std::collections::BTreeMap;

use bootsim_core::ids::OpType;
use bootsim_core::{MsgOrigin, OpId, RunRecord, SentMsg, TakenMsg};

use super::{
    drain, errors, integrity, leaks, liveness, mismatches, provenance_of, Finding, Payloads, Provenance, Verdict,
};

/// A take of one rank not yet judged with its operation: the peer it asked for, the receiving
/// step and which message it was; its operation and kind are its [`Run`]'s. 12 bytes: a world
/// in an all-to-all holds one per message (n² at once), so what the takes of one operation
/// share is kept once per run of them, and another message's record aside
/// ([`Pending::others`]), not in every take. A rank's takes come in its program's order, so runs
/// follow its operations; takes alternating between operations would cost a run each (28 bytes a
/// take, more than the 24 of one record per take).
#[derive(Clone, Copy, Debug)]
struct PendingTake {
    from: u32,
    step: u32,
    source: TakeSource,
}

/// Which message a take was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TakeSource {
    /// Not recorded.
    Unknown,
    /// The one its own step sent: same operation, kind and step, from the peer asked for.
    Own,
    /// Another: its record is the first of [`Pending::others`] with the same operation and peer.
    Other,
}

/// Consecutive takes of one operation and kind: [`Pending::takes`] up to `end`, from the
/// previous run's end.
#[derive(Clone, Copy, Debug)]
struct Run {
    op: OpId,
    kind: OpType,
    end: usize,
}

/// One rank's takes whose operation has not completed yet.
#[derive(Debug, Default)]
struct Pending {
    /// The takes in order, in runs of one operation ([`Pending::runs`]).
    takes: Vec<PendingTake>,
    runs: Vec<Run>,
    /// The messages of the takes that were another message ([`TakeSource::Other`]), in order,
    /// with the operation and peer of their take.
    others: Vec<(OpId, u32, SentMsg)>,
}

impl Pending {
    fn push(&mut self, t: &TakenMsg, source: Option<&SentMsg>) {
        let MsgOrigin { op, kind, step } = t.origin;
        let source = match source {
            None => TakeSource::Unknown,
            Some(s) if s.origin == t.origin && s.from == t.from => TakeSource::Own,
            Some(s) => {
                self.others.push((op, t.from, s.clone()));
                TakeSource::Other
            }
        };
        // Grown by an eighth, not doubled: n ranks each hold about n takes at once.
        if self.takes.len() == self.takes.capacity() {
            self.takes.reserve_exact((self.takes.len() / 8).max(16));
        }
        self.takes.push(PendingTake { from: t.from, step, source });
        match self.runs.last_mut() {
            Some(run) if run.op == op && run.kind == kind => run.end = self.takes.len(),
            _ => self.runs.push(Run { op, kind, end: self.takes.len() }),
        }
    }

    /// The runs with their takes, in order.
    fn runs(&self) -> impl Iterator<Item = (&Run, &[PendingTake])> {
        let starts = std::iter::once(0).chain(self.runs.iter().map(|r| r.end));
        self.runs.iter().zip(starts).map(|(run, start)| (run, &self.takes[start..run.end]))
    }

    /// The message the first take of operation `op` from `peer` was, as findings name it
    /// (`provenance_of` it).
    fn source(&self, op: OpId, peer: u32) -> Option<Provenance> {
        let (run, take) = self
            .runs()
            .filter(|(run, _)| run.op == op)
            .find_map(|(run, takes)| takes.iter().find(|t| t.from == peer).map(|t| (run, t)))?;
        match take.source {
            TakeSource::Unknown => None,
            TakeSource::Own => {
                Some(Provenance::Message { from: take.from, origin: MsgOrigin { op, kind: run.kind, step: take.step } })
            }
            TakeSource::Other => {
                self.others.iter().find(|(o, f, _)| *o == op && *f == peer).map(|(_, _, s)| provenance_of(s))
            }
        }
    }

    /// Forgets the takes of operations up to `op`.
    fn done_up_to(&mut self, op: OpId) {
        self.others.retain(|(o, _, _)| *o > op);
        if self.runs.iter().all(|r| r.op > op) {
            return;
        }
        let (mut start, mut kept, mut runs) = (0, 0, 0);
        for i in 0..self.runs.len() {
            let run = self.runs[i];
            if run.op > op {
                self.takes.copy_within(start..run.end, kept);
                kept += run.end - start;
                self.runs[runs] = Run { end: kept, ..run };
                runs += 1;
            }
            start = run.end;
        }
        self.takes.truncate(kept);
        self.runs.truncate(runs);
    }
}

/// The oracle's state while a run goes on; [`Judge::finish`] gives the verdict. It asks the
/// protocol's [`Payloads`] what each operation must deliver and what wrong bytes are.
#[derive(Debug)]
pub struct Judge {
    payloads: Box<dyn Payloads>,
    n: u32,
    /// Mismatches, in the order they were taken.
    mismatches: Vec<Finding>,
    /// Per rank: its takes whose operation has not completed yet.
    pending: Vec<Pending>,
    /// Per rank: each operation's error or corruption, in operation order.
    ops: Vec<Vec<Finding>>,
    /// Each expected result the same for every rank (an allgather's) by operation index, with
    /// how many ranks have yet to complete it: made once, not once per rank (it was 14 % of a
    /// 64-rank run's instructions), and dropped when the last rank is judged.
    allgathers: BTreeMap<usize, (Vec<u8>, u32)>,
}

impl Judge {
    /// A judge of a run of `n` ranks whose workload's bytes `payloads` tells.
    pub fn new(payloads: impl Payloads + 'static, n: u32) -> Judge {
        Judge {
            payloads: Box::new(payloads),
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
        slot(&mut self.pending, t.rank).push(t, source);
    }

    /// Rank `r`'s operation `index` (from 0; init is not one) ended with `result`: its error,
    /// or its bytes checked against the workload with the messages it took.
    pub fn completed(&mut self, r: u32, index: usize, result: &Result<Vec<u8>, bootsim_core::RecordedError>) {
        slot(&mut self.ops, r);
        let (pending, ops) = (slot(&mut self.pending, r), &mut self.ops[r as usize]);
        let op = OpId(index as u32 + 1);
        match result {
            Err(e) => ops.push(errors::op(r, e)),
            Ok(got) => {
                let source = |peer: u32| pending.source(op, peer);
                let (payloads, n) = (&*self.payloads, self.n);
                if payloads.same_for_all(index) {
                    let (bytes, left) = self
                        .allgathers
                        .entry(index)
                        .or_insert_with(|| (payloads.expected(r, index).unwrap_or_default(), n));
                    ops.extend(integrity::check(payloads, r, index, got, bytes, &source));
                    *left = left.saturating_sub(1);
                    if *left == 0 {
                        self.allgathers.remove(&index);
                    }
                } else if let Some(bytes) = payloads.expected(r, index) {
                    ops.extend(integrity::check(payloads, r, index, got, &bytes, &source));
                }
            }
        }
        pending.done_up_to(op);
    }

    /// Init of rank `r` ended: its takes are judged by nothing else.
    pub fn init_ended(&mut self, r: u32) {
        slot(&mut self.pending, r).done_up_to(OpId(0));
    }

    /// The verdict and findings, in the fixed order: mismatches as taken; then per rank its
    /// init error, each operation's error or corruption in order, and its hang, early end or
    /// leak; then the root; then drains. What `record` holds beyond the fed messages and
    /// operations (ends, waits, the root, drains) is read here.
    pub fn finish(&mut self, record: &RunRecord) -> (Verdict, Vec<Finding>) {
        let findings = std::mem::take(&mut self.mismatches);
        let ops = self.payloads.ops();
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
fn slot<T: Default>(table: &mut Vec<T>, r: u32) -> &mut T {
    let r = r as usize;
    if table.len() <= r {
        table.resize_with(r + 1, T::default);
    }
    &mut table[r]
}

impl bootsim_core::seam::Judge for Judge {
    type Report = (Verdict, Vec<Finding>);

    fn taken(&mut self, taken: &TakenMsg, source: Option<&SentMsg>) {
        Judge::taken(self, taken, source);
    }

    fn completed(&mut self, rank: u32, index: usize, result: &Result<Vec<u8>, bootsim_core::RecordedError>) {
        Judge::completed(self, rank, index, result);
    }

    fn init_ended(&mut self, rank: u32) {
        Judge::init_ended(self, rank);
    }

    fn finish(&mut self, record: &RunRecord) -> (Verdict, Vec<Finding>) {
        Judge::finish(self, record)
    }
}

#[cfg(test)]
mod tests {
    use bootsim_core::{Instant, MsgOrigin, OpId, OpType, OpTypeDef, RunRecord, SentMsg, TakenMsg};

    use super::{provenance_of, Judge, Pending, PendingTake};
    use crate::oracle::{BytesAre, Origins, Payloads, Verdict};

    const GATHER: OpType = OpType::new(&OpTypeDef { code: 1, name: "gather", step: "step", bytes_unused: false });
    const SCATTER: OpType = OpType::new(&OpTypeDef { code: 2, name: "scatter", step: "step", bytes_unused: false });

    /// A toy workload: every operation gathers one byte per rank, `index * 16 + rank`, the
    /// same result for every rank.
    #[derive(Debug)]
    struct Gathers {
        ops: usize,
        n: u32,
    }

    impl Origins for Gathers {
        fn what(&self, _: &[u8]) -> Option<BytesAre> {
            None
        }
    }

    impl Payloads for Gathers {
        fn ops(&self) -> usize {
            self.ops
        }
        fn op_type(&self, index: usize) -> Option<OpType> {
            (index < self.ops).then_some(GATHER)
        }
        fn expected(&self, _: u32, index: usize) -> Option<Vec<u8>> {
            Some((0..self.n).map(|p| (index as u32 * 16 + p) as u8).collect())
        }
        fn same_for_all(&self, _: usize) -> bool {
            true
        }
        fn senders(&self, _: u32, _: usize) -> Vec<u32> {
            (0..self.n).collect()
        }
    }

    #[test]
    fn a_result_the_same_for_every_rank_is_made_once_and_dropped_after_the_last() {
        let (ops, n) = (2, 3);
        let mut j = Judge::new(Gathers { ops, n }, n);
        for r in 0..n {
            for i in 0..ops {
                let mut got = Gathers { ops, n }.expected(r, i).unwrap();
                if (r, i) == (1, 1) {
                    got[1] ^= 1; // rank 1's second gather: rank 1's own byte is wrong
                }
                j.completed(r, i, &Ok(got));
            }
            let judged = r + 1;
            assert_eq!(j.allgathers.len(), if judged < n { 2 } else { 0 }, "after rank {r}");
        }
        // The ends as the streaming world leaves them: each operation's bytes dropped once judged.
        let mut record = RunRecord::new(n as usize);
        for rank in &mut record.ranks {
            rank.ops = vec![Ok(Vec::new()); ops];
        }
        let (verdict, findings) = j.finish(&record);
        assert_eq!(verdict, Verdict::Corruption);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(
            findings[0].to_string(),
            "corruption: rank 1 gather #1 chunk from rank 1 holds bytes of unknown origin",
            "{findings:?}"
        );
    }

    #[test]
    fn a_pending_take_is_small_and_names_its_source_as_the_sent_message_would() {
        // A world in an alltoall holds one per message.
        assert!(std::mem::size_of::<PendingTake>() <= 12, "{}", std::mem::size_of::<PendingTake>());
        let origin = |op, step| MsgOrigin { op: OpId(op), kind: GATHER, step };
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
        let one = |s: Option<&SentMsg>| {
            let mut p = Pending::default();
            p.push(&t, s);
            p.source(OpId(2), 0)
        };
        for s in [sent(origin(2, 1), 0), sent(origin(1, 1), 0), sent(origin(2, 1), 3), sent(origin(2, 2), 0)] {
            assert_eq!(one(Some(&s)), Some(provenance_of(&s)), "{s:?}");
        }
        assert_eq!(one(None), None);
        // Among several: the first take of the operation from the peer, with its own record.
        let mut p = Pending::default();
        let (a, b) = (sent(origin(1, 1), 0), sent(origin(1, 2), 0));
        p.push(&TakenMsg { from: 3, ..t.clone() }, Some(&SentMsg { from: 3, ..a.clone() }));
        p.push(&t, Some(&b));
        p.push(&t, Some(&a));
        assert_eq!(p.source(OpId(2), 0), Some(provenance_of(&b)));
        assert_eq!(p.source(OpId(2), 3), Some(provenance_of(&SentMsg { from: 3, ..a })));
        p.done_up_to(OpId(2));
        assert_eq!((p.takes.len(), p.runs.len(), p.others.len(), p.source(OpId(2), 0)), (0, 0, 0, None));
    }

    #[test]
    fn takes_of_interleaved_operations_are_found_and_forgotten_as_a_list_of_every_take_would() {
        use rand_core::{Rng, SeedableRng};
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut p = Pending::default();
        // Every take with its own record, as the 24-byte takes were kept.
        let mut all: Vec<(TakenMsg, Option<SentMsg>)> = Vec::new();
        for step in 0..5_000u32 {
            let x = r.next_u64();
            let (op, peer) = ((x % 4) as u32 + 1, (x >> 8) as u32 % 6);
            if x >> 60 == 0 {
                let done = OpId((x >> 16) as u32 % 4 + 1);
                p.done_up_to(done);
                all.retain(|(t, _)| t.origin.op > done);
            } else {
                // Two kinds, changing within an operation too: a take's kind is its own.
                let kind = if (x >> 48) % 3 == 0 { SCATTER } else { GATHER };
                let origin = MsgOrigin { op: OpId(op), kind, step: (x >> 20) as u32 % 3 + 1 };
                let t = TakenMsg {
                    at: Instant::ZERO,
                    rank: 1,
                    from: peer,
                    tag: 1,
                    origin,
                    size: 1,
                    expected_size: 1,
                    conn: None,
                };
                let sent = match (x >> 24) % 3 {
                    0 => None,
                    1 => Some(SentMsg { from: peer, to: 1, tag: 1, origin, size: 1, at: Instant::ZERO }),
                    _ => Some(SentMsg { from: peer, to: 1, tag: 2, origin, size: step as usize, at: Instant::ZERO }),
                };
                let sent = sent.map(|s| if (x >> 26) % 2 == 0 { s } else { SentMsg { from: peer + 1, ..s } });
                p.push(&t, sent.as_ref());
                all.push((t, sent));
            }
            let (op, peer) = (OpId((x >> 32) as u32 % 5), (x >> 40) as u32 % 7);
            let expected = all.iter().find(|(t, _)| t.origin.op == op && t.from == peer).and_then(|(t, s)| {
                s.as_ref().map(|s| {
                    if s.origin == t.origin && s.from == t.from {
                        provenance_of(&SentMsg { from: t.from, origin: t.origin, ..s.clone() })
                    } else {
                        provenance_of(s)
                    }
                })
            });
            assert_eq!(p.source(op, peer), expected, "op {op:?} peer {peer} at {step}");
            assert_eq!(p.takes.len(), all.len());
        }
    }
}
