//! Integrity: every successful operation delivered exactly the bytes its workload implies. A
//! wrong chunk is named by where its bytes came from (the message the receive took, where the
//! world records messages; else what the bytes themselves tell) and, for a QP handle, by what
//! the verbs layer would do with it.

use bootsim_core::{MessageLog, OpId, QpHandle, RankRecord};

use super::{describe_sent, provenance, verbs, Finding};
use crate::workload::{expected_result, OpSpec};

/// Checks the result of rank `rank`'s operation `index` (of `specs` over `n` ranks, payload
/// seed `seed`) against the bytes its workload implies.
pub(super) fn check(
    specs: &[OpSpec],
    seed: u64,
    n: u32,
    rank: &RankRecord,
    index: usize,
    got: &[u8],
    log: &MessageLog,
) -> Vec<Finding> {
    let (r, i) = (rank.rank, index as u32);
    let Some(&spec) = specs.get(index) else { return Vec::new() };
    match expected_result(spec, seed, i, r, n) {
        Some(expected) if got != expected.as_slice() => {
            let source = |p| source_of(log, r, OpId(i + 1), p);
            corruption(specs, seed, n, r, i, got, &expected, &source)
        }
        _ => Vec::new(),
    }
}

/// The sender and step of the message rank `r`'s operation `op` took from `peer`, if recorded.
fn source_of(log: &MessageLog, r: u32, op: OpId, peer: u32) -> Option<String> {
    let t = log.taken.iter().find(|t| t.rank == r && t.origin.op == op && t.from == peer)?;
    log.source(t).map(describe_sent)
}

/// Names each wrong chunk of a successful operation, where its bytes came from
/// (`source(peer)`, else what the bytes themselves tell), and what the verbs layer would do
/// with a wrong QP handle.
#[allow(clippy::too_many_arguments)]
fn corruption(
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
                    expected_qp = Some(exp[k].to_string());
                    received_qp = Some(rec[k].to_string());
                    verbs = Some(verbs::check(specs, seed, n, r, &rec[k]));
                }
            }
        }
        findings.push(Finding::Corruption {
            rank: r,
            op: format!("{} #{index}", spec.kind()),
            peer: p as u32,
            source,
            expected_qp,
            received_qp,
            verbs,
        });
    }
    findings
}
