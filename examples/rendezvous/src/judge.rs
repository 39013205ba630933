//! The protocol's judge: bootsim's oracle (`bootsim_sim::oracle::Judge`, whose checks every
//! protocol shares: each operation's bytes, mismatches, errors, hangs, early ends, leaks,
//! drains), told this protocol's payloads: each exchange round's correct result from the seed,
//! and what a wrong chunk's bytes are.

use bootsim_core::{OpId, OpName, OpType};
use bootsim_sim::oracle::{self, BytesAre, OpRef, Origins, Payload, Payloads};

use crate::payload::{expected, provenance, receives_from};
use crate::protocol::Workload;
use crate::types::ROUND;

/// A judge of one run of a [`Workload`]: bootsim's oracle told its [`Rounds`].
pub type Judge = oracle::Judge;

/// A judge of `workload` over `n` ranks with payload seed `seed`.
pub fn judge(workload: Workload, seed: u64, n: u32) -> Judge {
    oracle::Judge::new(Rounds { workload, seed, n }, n)
}

/// The exchange rounds of a run as the oracle checks them: `workload` over `n` ranks with
/// payload seed `seed`.
#[derive(Clone, Copy, Debug)]
pub struct Rounds {
    /// The workload.
    pub workload: Workload,
    /// The payload seed.
    pub seed: u64,
    /// Ranks in the run.
    pub n: u32,
}

impl Origins for Rounds {
    /// A payload of the run: exchange #k's from one rank for another.
    fn what(&self, bytes: &[u8]) -> Option<BytesAre> {
        let (from, to, round) = provenance(self.seed, self.n, self.workload.rounds, bytes)?;
        let op = OpRef::Op(OpName(ROUND, OpId(round)));
        Some(BytesAre::Payload(Payload { op, part: "payload", from, to: Some(to) }))
    }
}

impl Payloads for Rounds {
    fn ops(&self) -> usize {
        self.workload.rounds as usize
    }

    fn op_type(&self, index: usize) -> Option<OpType> {
        (index < self.ops()).then_some(ROUND)
    }

    fn expected(&self, rank: u32, index: usize) -> Option<Vec<u8>> {
        let (w, round) = (self.workload, index as u32 + 1);
        (round <= w.rounds).then(|| expected(self.seed, w.peers, rank, self.n, round, w.len))
    }

    fn senders(&self, rank: u32, _index: usize) -> Vec<u32> {
        receives_from(self.workload.peers, rank, self.n)
    }
}

#[cfg(test)]
mod tests {
    use bootsim_core::{Instant, RunRecord, SentMsg, TakenMsg};
    use bootsim_sim::oracle::{Finding, Verdict};

    use super::*;
    use crate::payload::payload;
    use crate::types::origin;

    #[test]
    fn right_bytes_pass_and_a_swapped_chunk_is_named_by_the_message_taken_or_its_bytes() {
        let (w, seed, n) = (Workload::TWO_ROUNDS, 3, 2);
        let mut record = RunRecord::new(n as usize);
        let mut j = judge(w, seed, n);
        for r in 0..n {
            for k in 1..=2 {
                let got = expected(seed, w.peers, r, n, k, w.len);
                j.completed(r, k as usize - 1, &Ok(got.clone()));
                record.ranks[r as usize].ops.push(Ok(got));
            }
        }
        assert_eq!(j.finish(&record), (Verdict::Pass, vec![]));

        // Rank 0's round 1 took rank 1's round-2 message (same tag), and round 2 the round-1 one.
        let mut j = judge(w, seed, n);
        let sent = |k| SentMsg { from: 1, to: 0, tag: 1, origin: origin(k), size: w.len, at: Instant::ZERO };
        let taken = |k| TakenMsg {
            at: Instant::ZERO,
            rank: 0,
            from: 1,
            tag: 1,
            origin: origin(k),
            size: w.len,
            expected_size: w.len,
            conn: None,
        };
        j.taken(&taken(1), Some(&sent(2)));
        j.completed(0, 0, &Ok(payload(seed, 1, 0, 2, w.len)));
        j.completed(0, 1, &Ok(payload(seed, 1, 0, 1, w.len)));
        let mut record = RunRecord::new(1);
        record.ranks[0].ops = vec![Ok(Vec::new()); 2];
        let (verdict, findings) = j.finish(&record);
        let text: Vec<String> = findings.iter().map(ToString::to_string).collect();
        assert_eq!(verdict, Verdict::Corruption);
        assert_eq!(
            text,
            [
                "mismatch: rank 0 exchange #0 step 1 took exchange #1 step 1 from rank 1",
                "corruption: rank 0 exchange #0 chunk from rank 1 holds exchange #1 step 1 from rank 1",
                "corruption: rank 0 exchange #1 chunk from rank 1 holds exchange #0's payload from rank 1 for rank 0",
            ]
        );
        // Typed: the operation, and the bytes' round, sender and receiver.
        let Finding::Corruption { op, source: oracle::Provenance::Bytes(BytesAre::Payload(p)), .. } = &findings[2]
        else {
            panic!("{findings:?}")
        };
        assert_eq!(
            (op, &p.op, p.from, p.to),
            (&OpRef::Op(OpName(ROUND, OpId(2))), &OpRef::Op(OpName(ROUND, OpId(1))), 1, Some(0))
        );
        assert_eq!(origin(2).op, OpId(2));
        // In `--json`: the keys every protocol's corruption has; this protocol adds no detail.
        assert_eq!(
            serde_json::to_string(&findings[2]).unwrap(),
            r#"{"kind":"corruption","rank":0,"op":"exchange #1","peer":1,"source":"exchange #0's payload from rank 1 for rank 0"}"#
        );
    }

    #[test]
    fn a_rank_that_stops_early_without_an_error_is_one() {
        let mut record = RunRecord::new(1);
        record.ranks[0].ops.push(Ok(Vec::new()));
        let (verdict, findings) = judge(Workload::TWO_ROUNDS, 0, 1).finish(&record);
        assert_eq!(verdict, Verdict::Error);
        assert_eq!(findings[0].to_string(), "error: rank 0: ended after 1 of 2 operations without an error");
    }
}
