//! Integrity: every successful operation delivered exactly the bytes its workload implies. A
//! wrong chunk is named by where its bytes came from (the message the receive took, where the
//! world records messages; else what the bytes themselves tell) and, for a QP handle, by what
//! the verbs layer would do with it.

use bootsim_nvshmem::QpHandle;

use super::verbs::{self, WrongQp};
use super::{provenance, Detail, Finding, Provenance};
use bootsim_nvshmem::workload::OpSpec;

/// Checks the result of rank `r`'s operation `index` (of `specs` over `n` ranks, payload seed
/// `seed`) against `expected`, the bytes its workload implies (`workload::expected_result`;
/// the judge makes an allgather's, the same for every rank, once), and names each wrong chunk:
/// where its bytes came from (`source(peer)`, the message that operation took from `peer` where
/// the world recorded it, else what the bytes themselves tell) and what the verbs layer would do
/// with a wrong QP handle.
#[allow(clippy::too_many_arguments)]
pub(super) fn check(
    specs: &[OpSpec],
    seed: u64,
    n: u32,
    r: u32,
    index: usize,
    got: &[u8],
    expected: &[u8],
    source: &dyn Fn(u32) -> Option<Provenance>,
) -> Vec<Finding> {
    let Some(&spec) = specs.get(index).filter(|_| got != expected) else { return Vec::new() };
    let index = index as u32;
    let len = expected.len() / (n as usize).max(1);
    let mut findings = Vec::new();
    for p in 0..n as usize {
        let range = p * len..(p + 1) * len;
        let chunk = got.get(range.clone()).unwrap_or_default();
        if chunk == &expected[range.clone()] {
            continue;
        }
        let source = source(p as u32).unwrap_or_else(|| {
            Provenance::Told(
                provenance::of_chunk(specs, seed, n, chunk).unwrap_or_else(|| "bytes of unknown origin".to_string()),
            )
        });
        let mut qp = None;
        if let OpSpec::Alltoall(l) = spec {
            if l % QpHandle::SIZE == 0 && chunk.len() == l {
                let exp = QpHandle::decode_all(&expected[range]).unwrap_or_default();
                let rec = QpHandle::decode_all(chunk).unwrap_or_default();
                if let Some(k) = (0..exp.len()).find(|&k| exp[k] != rec[k]) {
                    qp = Some((exp[k], rec[k], verbs::check(specs, seed, n, r, &rec[k])));
                }
            }
        }
        findings.push(Finding::Corruption {
            rank: r,
            op: format!("{} #{index}", spec.kind()),
            peer: p as u32,
            source,
            detail: Some(Detail::new(WrongQp(qp))),
        });
    }
    findings
}

#[cfg(test)]
mod tests {
    use bootsim_core::{Instant, MessageLog, MsgOrigin, SentMsg, TakenMsg};
    use bootsim_nvshmem::OpKind;

    use super::super::provenance_of;
    use super::*;
    use bootsim_nvshmem::workload::{alltoall_chunk, expected_result};

    #[test]
    fn a_wrong_chunk_is_named_by_the_message_taken_else_by_its_bytes() {
        let (specs, seed, n) = ([OpSpec::Alltoall(48), OpSpec::Alltoall(48)], 5, 2);
        let (rank, unknown) = (1, |_| None);
        let right = expected_result(specs[1], seed, 1, 1, n).unwrap();
        assert_eq!(check(&specs, seed, n, rank, 1, &right, &right, &unknown), vec![]);
        // Rank 1's chunk from rank 0 holds alltoall #0's chunk.
        let mut got = right.clone();
        got[..48].copy_from_slice(&alltoall_chunk(seed, 0, 0, 1, 48));
        let by_bytes = check(&specs, seed, n, rank, 1, &got, &right, &unknown);
        let text = by_bytes[0].to_string();
        assert_eq!(by_bytes.len(), 1, "{by_bytes:?}");
        assert!(
            text.starts_with(
                "corruption: rank 1 alltoall #1 chunk from rank 0 holds alltoall #0's chunk from rank 0 for rank 1; "
            ),
            "{text}"
        );
        // The chunk holds QP handles: what the verbs layer would do with the first wrong one.
        assert!(
            text.ends_with("cross-wired QP: rank 1 would connect to rank 0's QP 0 meant for rank 1 (alltoall #0)"),
            "{text}"
        );
        let mut log = MessageLog::default();
        let sent_origin = MsgOrigin { op: bootsim_core::OpId(1), kind: OpKind::Alltoall.op_type(), step: 1 };
        log.sent(Some(9), SentMsg { from: 0, to: 1, tag: 1, origin: sent_origin, size: 48, at: Instant::ZERO });
        let taken_origin = MsgOrigin { op: bootsim_core::OpId(2), kind: OpKind::Alltoall.op_type(), step: 1 };
        let t = TakenMsg {
            at: Instant::ZERO,
            rank: 1,
            from: 0,
            tag: 1,
            origin: taken_origin,
            size: 48,
            expected_size: 48,
            conn: None,
        };
        log.taken(Some(9), t);
        let taken = |p| log.taken.iter().find(|t| t.from == p).and_then(|t| log.source(t)).map(provenance_of);
        let by_message = check(&specs, seed, n, rank, 1, &got, &right, &taken);
        let text = by_message[0].to_string();
        let want = "corruption: rank 1 alltoall #1 chunk from rank 0 holds alltoall #0 step 1 from rank 0; ";
        assert!(text.starts_with(want), "{text}");
    }

    #[test]
    fn the_json_of_a_corruption_keeps_nvshmems_qp_fields_where_they_always_were() {
        // The fields `--json` has always had, null where no QP handle is named.
        let (specs, seed, n) = ([OpSpec::Allgather(8), OpSpec::Alltoall(48)], 5, 2);
        let unknown = |_| None;
        let right = expected_result(specs[0], seed, 0, 1, n).unwrap();
        let mut got = right.clone();
        got[0] ^= 1;
        let f = &check(&specs, seed, n, 1, 0, &got, &right, &unknown)[0];
        assert_eq!(
            serde_json::to_string(f).unwrap(),
            r#"{"kind":"corruption","rank":1,"op":"allgather #0","peer":0,"source":"bytes of unknown origin","expected_qp":null,"received_qp":null,"verbs":null}"#
        );
        let right = expected_result(specs[1], seed, 1, 1, n).unwrap();
        let mut got = right.clone();
        got[..48].fill(0);
        let f = &check(&specs, seed, n, 1, 1, &got, &right, &unknown)[0];
        let json = serde_json::to_string(f).unwrap();
        let Finding::Corruption { detail: Some(d), .. } = f else { panic!("{f:?}") };
        let (e, r) = d.expected_received().unwrap();
        let want = format!(
            r#"{{"kind":"corruption","rank":1,"op":"alltoall #1","peer":0,"source":"48 zero bytes: nothing was written into it","expected_qp":"{e}","received_qp":"{r}","verbs":"rank 1 would call ibv_modify_qp(RTR) with QPN 0x0 and a zero GID: EINVAL"}}"#
        );
        assert_eq!(json, want);
    }
}
