//! The oracle for worlds that report each rank's results rather than a simulated trace: real
//! sockets (`bootsim smoke`), the namespaces behind the userspace wire, and the real NVSHMEM
//! plugin. Same findings and verdicts as a simulated run's [`super::judge`].

use bootsim_core::RankReport;

use super::{corruption, Finding, Verdict};
use crate::workload::{expected_result, OpSpec};

/// Judges the ranks of one real run of `specs` over `n` ranks, payload seed `seed`.
pub fn judge_results(specs: &[OpSpec], seed: u64, n: u32, ranks: &[RankReport]) -> (Verdict, Vec<Finding>) {
    let mut findings = Vec::new();
    for rank in ranks {
        let r = rank.rank;
        if let Some(e) = &rank.init {
            let error = if e.starts_with("init") { e.clone() } else { format!("init: {e}") };
            findings.push(Finding::Error { rank: Some(r), error });
        }
        for (i, result) in rank.ops.iter().enumerate() {
            let Some(&spec) = specs.get(i) else { break };
            match result {
                Err(e) => findings.push(Finding::Error { rank: Some(r), error: e.clone() }),
                Ok(got) => {
                    if let Some(want) = expected_result(spec, seed, i as u32, r, n) {
                        if *got != want {
                            findings.extend(corruption(specs, seed, n, r, i as u32, got, &want, &|_| None));
                        }
                    }
                }
            }
        }
        let failed = rank.init.is_some() || rank.ops.iter().any(Result::is_err);
        if let Some(waiting) = &rank.unfinished {
            findings.push(Finding::Hang { who: format!("rank {r}"), waiting: waiting.clone(), unexpected: Vec::new() });
        } else if !failed && rank.ops.len() < specs.len() {
            findings.push(Finding::Error {
                rank: Some(r),
                error: format!("ended after {} of {} operations without an error", rank.ops.len(), specs.len()),
            });
        }
    }
    let verdict = findings.iter().map(Finding::verdict).max().unwrap_or(Verdict::Pass);
    (verdict, findings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::build_op;
    use bootsim_core::Op;

    fn ok_report(specs: &[OpSpec], seed: u64, r: u32, n: u32) -> RankReport {
        let ops = specs
            .iter()
            .enumerate()
            .map(|(i, s)| Ok(expected_result(*s, seed, i as u32, r, n).unwrap_or_default()))
            .collect();
        RankReport { rank: r, ops, ..Default::default() }
    }

    #[test]
    fn the_reports_zeroed_chunk_is_corruption_with_einval_and_its_origin() {
        let specs = [OpSpec::Alltoall(576), OpSpec::Barrier];
        let mut r1 = ok_report(&specs, 3, 1, 2);
        // 3.4.5: rank 1's chunk from rank 0 got the barrier's 4 bytes, the rest stayed zero.
        let got = r1.ops[0].as_mut().unwrap();
        got[..576].fill(0);
        got[..4].copy_from_slice(&[1, 2, 3, 4]);
        r1.ops[1] = Err("Message truncated : received 576 bytes instead of 4".into());
        let (v, f) = judge_results(&specs, 3, 2, &[ok_report(&specs, 3, 0, 2), r1]);
        assert_eq!(v, Verdict::Corruption);
        let text: Vec<String> = f.iter().map(ToString::to_string).collect();
        assert!(
            text[0].starts_with("corruption: rank 1 alltoall #0 chunk from rank 0 holds a 4-byte message 01020304"),
            "{text:?}"
        );
        assert!(text[0].contains("received QPN 0x4030201 and a zero GID"), "{text:?}");
        assert!(text[0].ends_with("EINVAL"), "{text:?}");
        assert_eq!(text[1], "error: rank 1: Message truncated : received 576 bytes instead of 4");
    }

    #[test]
    fn errors_hangs_and_silent_stops_are_named() {
        let specs = [OpSpec::Alltoall(576), OpSpec::Barrier];
        let r0 = RankReport { rank: 0, unfinished: Some("barrier #1".into()), ..Default::default() };
        let r1 = RankReport { rank: 1, ops: vec![Err("size mismatch".into())], ..Default::default() };
        let (v, f) = judge_results(&specs, 0, 2, &[r0, r1]);
        assert_eq!(v, Verdict::Error);
        assert_eq!(f.len(), 2, "{f:?}");
        let quiet = RankReport { rank: 0, ops: vec![], ..Default::default() };
        assert_eq!(judge_results(&specs, 0, 1, &[quiet]).0, Verdict::Error);
        let good: Vec<_> = (0..2).map(|r| ok_report(&specs, 0, r, 2)).collect();
        assert_eq!(judge_results(&specs, 0, 2, &good), (Verdict::Pass, vec![]));
        // Not a stub: the payloads are what ranks send.
        assert!(matches!(build_op(specs[0], 0, 0, 0, 2), Op::Alltoall { .. }));
    }
}
