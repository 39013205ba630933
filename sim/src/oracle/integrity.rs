//! Integrity: every successful operation delivered exactly the bytes its workload implies. A
//! wrong chunk is named by where its bytes came from (the message the receive took, where the
//! world records messages; else what the protocol tells of the bytes themselves) and by the
//! protocol's own account of its first wrong item (NVSHMEM: what the verbs layer would do with
//! a wrong QP handle).

use bootsim_core::{OpId, OpName};

use super::{Finding, OpRef, Payloads, Provenance};

/// Checks the result `got` of rank `r`'s operation `index` of `payloads` against `expected`,
/// the bytes it must deliver ([`Payloads::expected`]; the judge makes those the same for every
/// rank once), and names each wrong chunk: where its bytes came from (`source(peer)`, the
/// message that operation took from `peer` where the world recorded it, else what the bytes
/// themselves tell, [`super::Origins::what`]) and the protocol's detail of it.
pub(super) fn check(
    payloads: &dyn Payloads,
    r: u32,
    index: usize,
    got: &[u8],
    expected: &[u8],
    source: &dyn Fn(u32) -> Option<Provenance>,
) -> Vec<Finding> {
    let Some(kind) = payloads.op_type(index).filter(|_| got != expected) else { return Vec::new() };
    let op = OpRef::Op(OpName(kind, OpId(index as u32 + 1)));
    let senders = payloads.senders(r, index);
    let len = expected.len() / senders.len().max(1);
    let mut findings = Vec::new();
    for (i, &p) in senders.iter().enumerate() {
        let range = i * len..(i + 1) * len;
        let chunk = got.get(range.clone()).unwrap_or_default();
        if chunk == &expected[range.clone()] {
            continue;
        }
        let source = source(p).or_else(|| payloads.what(chunk).map(Provenance::Bytes)).unwrap_or(Provenance::Unknown);
        let detail = payloads.detail(r, index, &expected[range], chunk);
        findings.push(Finding::Corruption { rank: r, op: op.clone(), peer: p, source, detail });
    }
    findings
}
