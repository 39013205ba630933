//! The protocol's judge: each exchange round's bytes against the payloads the seed implies,
//! a wrong chunk named by the message its receive took; the checks any protocol shares
//! (mismatches, errors, hangs, leaks, drains) are bootsim's oracle's, fed the same record.

use std::collections::BTreeMap;

use bootsim_core::seam::Judge as SeamJudge;
use bootsim_core::{RunRecord, SentMsg, TakenMsg};
use bootsim_sim::oracle::{self, Finding, Provenance, Verdict};

use crate::payload::{expected, provenance, receives_from};
use crate::protocol::Workload;

/// A judge of one run of a [`Workload`] over `n` ranks with payload seed `seed`.
#[derive(Debug)]
pub struct Judge {
    workload: Workload,
    seed: u64,
    n: u32,
    /// The checks every protocol shares; its workload is empty, so it judges no bytes.
    shared: oracle::Judge,
    /// Per (rank, round, peer): the message that round's receive took from the peer, if known.
    took: BTreeMap<(u32, u32, u32), SentMsg>,
    /// Wrong bytes per rank, in operation order (so the findings' order does not depend on
    /// how a world interleaved the ranks).
    corruptions: BTreeMap<u32, Vec<Finding>>,
}

impl Judge {
    /// A judge of `workload` over `n` ranks with payload seed `seed`.
    pub fn new(workload: Workload, seed: u64, n: u32) -> Judge {
        Judge {
            workload,
            seed,
            n,
            shared: oracle::Judge::new(&[], seed, n),
            took: BTreeMap::new(),
            corruptions: BTreeMap::new(),
        }
    }

    /// Where a wrong chunk of rank `r`'s round `round` from `peer` came from.
    fn source(&self, r: u32, round: u32, peer: u32, chunk: &[u8]) -> String {
        if let Some(s) = self.took.get(&(r, round, peer)) {
            return format!("exchange #{}'s message from rank {} (tag {:#x})", s.origin.op.0 - 1, s.from, s.tag);
        }
        match provenance(self.seed, self.n, self.workload.rounds, chunk) {
            Some((f, t, k)) => format!("exchange #{}'s payload from rank {f} for rank {t}", k - 1),
            None => "bytes of unknown origin".to_string(),
        }
    }
}

impl SeamJudge for Judge {
    type Report = (Verdict, Vec<Finding>);

    fn taken(&mut self, taken: &TakenMsg, source: Option<&SentMsg>) {
        self.shared.taken(taken, source);
        if let Some(s) = source {
            self.took.insert((taken.rank, taken.origin.op.0, taken.from), s.clone());
        }
    }

    fn completed(&mut self, rank: u32, index: usize, result: &Result<Vec<u8>, bootsim_core::RecordedError>) {
        self.shared.completed(rank, index, result);
        let round = index as u32 + 1;
        let Ok(got) = result else { return };
        let (len, n) = (self.workload.len, self.n);
        let want = expected(self.seed, self.workload.peers, rank, n, round, len);
        if *got != want && round <= self.workload.rounds {
            for (i, peer) in receives_from(self.workload.peers, rank, n).into_iter().enumerate() {
                let (want, chunk) =
                    (&want[i * len..(i + 1) * len], got.get(i * len..(i + 1) * len).unwrap_or_default());
                if chunk != want {
                    let source = self.source(rank, round, peer, chunk);
                    self.corruptions.entry(rank).or_default().push(Finding::Corruption {
                        rank,
                        op: format!("exchange #{index}"),
                        peer,
                        source: Provenance::Told(source),
                        detail: None,
                    });
                }
            }
        }
        self.took.retain(|&(r, k, _), _| r != rank || k > round);
    }

    fn init_ended(&mut self, rank: u32) {
        self.shared.init_ended(rank);
    }

    fn finish(&mut self, record: &RunRecord) -> (Verdict, Vec<Finding>) {
        let shared = std::mem::replace(&mut self.shared, oracle::Judge::new(&[], self.seed, self.n));
        let (_, mut findings) = shared.finish(record);
        findings.extend(std::mem::take(&mut self.corruptions).into_values().flatten());
        // The shared checks know no workload: a rank that stopped early without an error is ours to name.
        let rounds = self.workload.rounds as usize;
        for rank in record.ranks.iter().filter(|r| !r.failed() && r.ops.len() < rounds) {
            let error = format!("ended after {} of {rounds} exchange rounds without an error", rank.ops.len());
            findings.push(Finding::Error { rank: Some(rank.rank), error: error.into() });
        }
        let verdict = findings.iter().map(Finding::verdict).max().unwrap_or(Verdict::Pass);
        (verdict, findings)
    }
}

#[cfg(test)]
mod tests {
    use bootsim_core::{Instant, OpId};

    use super::*;
    use crate::payload::payload;
    use crate::types::origin;

    #[test]
    fn right_bytes_pass_and_a_swapped_chunk_is_named_by_the_message_taken() {
        let (w, seed, n) = (Workload::TWO_ROUNDS, 3, 2);
        let mut record = RunRecord::new(n as usize);
        let mut j = Judge::new(w, seed, n);
        for r in 0..n {
            for k in 1..=2 {
                let got = expected(seed, w.peers, r, n, k, w.len);
                j.completed(r, k as usize - 1, &Ok(got.clone()));
                record.ranks[r as usize].ops.push(Ok(got));
            }
        }
        assert_eq!(j.finish(&record), (Verdict::Pass, vec![]));

        // Rank 0's round 1 took rank 1's round-2 message (same tag), and round 2 the round-1 one.
        let mut j = Judge::new(w, seed, n);
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
        let (verdict, findings) = j.finish(&RunRecord::new(0));
        let text: Vec<String> = findings.iter().map(ToString::to_string).collect();
        assert_eq!(verdict, Verdict::Corruption);
        assert_eq!(
            text,
            [
                "mismatch: rank 0 round #0 step 1 took round #1 step 1 from rank 1",
                "corruption: rank 0 exchange #0 chunk from rank 1 holds exchange #1's message from rank 1 (tag 0x1)",
                "corruption: rank 0 exchange #1 chunk from rank 1 holds exchange #0's payload from rank 1 for rank 0",
            ]
        );
        assert_eq!(origin(2).op, OpId(2));
    }

    #[test]
    fn a_rank_that_stops_early_without_an_error_is_one() {
        let mut record = RunRecord::new(1);
        record.ranks[0].ops.push(Ok(Vec::new()));
        let (verdict, findings) = Judge::new(Workload::TWO_ROUNDS, 0, 1).finish(&record);
        assert_eq!(verdict, Verdict::Error);
        assert_eq!(findings[0].to_string(), "error: rank 0: ended after 1 of 2 exchange rounds without an error");
    }
}
