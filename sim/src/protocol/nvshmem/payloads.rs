//! NVSHMEM's workload as the judge checks it ([`Payloads`]): each collective's correct result
//! from (seed, operation, sender, receiver), and where a wrong chunk's bytes came from, told by
//! the bytes themselves (every payload is derived from what it belongs to, so a chunk that
//! equals another operation's payload names it), for worlds that do not record connections (the
//! real NVSHMEM plugin). A wrong QP handle's detail is [`super::verbs`]'.

use bootsim_core::{OpId, OpName, OpType};
use bootsim_nvshmem::workload::{allgather_slice, alltoall_chunk, barrier_word, expected_result, OpSpec};
use bootsim_nvshmem::{OpKind, QpHandle};

use super::verbs::{self, WrongQp};
use crate::oracle::{BytesAre, Detail, OpRef, Origins, Payload, Payloads};

/// A run's NVSHMEM workload: its collectives over `n` ranks with payload seed `seed`.
#[derive(Clone, Debug)]
pub struct NvshmemPayloads {
    specs: Vec<OpSpec>,
    seed: u64,
    n: u32,
}

impl NvshmemPayloads {
    /// The payloads of `specs` over `n` ranks with payload seed `seed`.
    pub fn new(specs: &[OpSpec], seed: u64, n: u32) -> NvshmemPayloads {
        NvshmemPayloads { specs: specs.to_vec(), seed, n }
    }
}

/// Operation `index` of kind `kind` as findings name it: `alltoall #2`.
fn op(kind: OpKind, index: usize) -> OpRef {
    OpRef::Op(OpName(kind.op_type(), OpId(index as u32 + 1)))
}

impl Origins for NvshmemPayloads {
    fn what(&self, chunk: &[u8]) -> Option<BytesAre> {
        let (seed, n) = (self.seed, self.n);
        // A result cut short has no chunk here: its bytes tell nothing.
        if chunk.is_empty() {
            return None;
        }
        if chunk.iter().all(|&b| b == 0) {
            return Some(BytesAre::Zeros { len: chunk.len() });
        }
        for (i, spec) in self.specs.iter().enumerate() {
            let i32_ = i as u32;
            match *spec {
                OpSpec::Alltoall(len) if len == chunk.len() => {
                    for p in 0..n {
                        for q in 0..n {
                            if alltoall_chunk(seed, i32_, p, q, len) == chunk {
                                let op = op(OpKind::Alltoall, i);
                                return Some(BytesAre::Payload(Payload { op, part: "chunk", from: p, to: Some(q) }));
                            }
                        }
                    }
                }
                OpSpec::Allgather(len) if len == chunk.len() => {
                    if let Some(p) = (0..n).find(|&p| allgather_slice(seed, i32_, p, len) == chunk) {
                        let op = op(OpKind::Allgather, i);
                        return Some(BytesAre::Payload(Payload { op, part: "slice", from: p, to: None }));
                    }
                }
                _ => {}
            }
        }
        if chunk.len() > 4 && chunk[4..].iter().all(|&b| b == 0) {
            let word = &chunk[..4];
            let barriers = self.specs.iter().enumerate().filter(|(_, s)| matches!(s, OpSpec::Barrier));
            let whose = barriers.into_iter().find_map(|(i, _)| {
                (0..n).find(|&p| barrier_word(p, i as u32) == word).map(|p| Payload {
                    op: op(OpKind::Barrier, i),
                    part: "word",
                    from: p,
                    to: None,
                })
            });
            let (head, rest, kind) = (word.to_vec(), chunk.len() - 4, OpKind::Barrier.op_type());
            return Some(BytesAre::ShortCopy { head, rest, kind, whose });
        }
        None
    }
}

impl Payloads for NvshmemPayloads {
    fn ops(&self) -> usize {
        self.specs.len()
    }

    fn op_type(&self, index: usize) -> Option<OpType> {
        self.specs.get(index).map(|s| s.kind().op_type())
    }

    fn expected(&self, rank: u32, index: usize) -> Option<Vec<u8>> {
        expected_result(*self.specs.get(index)?, self.seed, index as u32, rank, self.n)
    }

    fn same_for_all(&self, index: usize) -> bool {
        matches!(self.specs.get(index), Some(OpSpec::Allgather(_)))
    }

    fn senders(&self, _rank: u32, _index: usize) -> Vec<u32> {
        (0..self.n).collect()
    }

    /// In an alltoall of QP handles, the first handle that differs, with what the verbs layer
    /// would do with it; for other chunks a `WrongQp` naming none (its `--json` keys null).
    fn detail(&self, rank: u32, index: usize, expected: &[u8], got: &[u8]) -> Option<Detail> {
        let mut qp = None;
        if let Some(&OpSpec::Alltoall(l)) = self.specs.get(index) {
            if l % QpHandle::SIZE == 0 && got.len() == l {
                let exp = QpHandle::decode_all(expected).unwrap_or_default();
                let rec = QpHandle::decode_all(got).unwrap_or_default();
                if let Some(k) = (0..exp.len()).find(|&k| exp[k] != rec[k]) {
                    qp = Some((exp[k], rec[k], verbs::check(&self.specs, self.seed, self.n, rank, &rec[k])));
                }
            }
        }
        Some(Detail::new(WrongQp(qp)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_payloads_short_copies_and_zeros() {
        let specs = [OpSpec::Alltoall(48), OpSpec::Barrier, OpSpec::Alltoall(48)];
        let p = NvshmemPayloads::new(&specs, 7, 2);
        let of_chunk = |c: &[u8]| p.what(c).map(|b| b.to_string());
        let other = alltoall_chunk(7, 2, 1, 0, 48);
        assert_eq!(of_chunk(&other).unwrap(), "alltoall #2's chunk from rank 1 for rank 0");
        let mut short = vec![0u8; 48];
        short[..4].copy_from_slice(&barrier_word(0, 1));
        let s = of_chunk(&short).unwrap();
        assert!(s.contains("barrier #1's word of rank 0") && s.contains("other 44 bytes zero"), "{s}");
        assert!(of_chunk(&[0; 48]).unwrap().starts_with("48 zero bytes"));
        assert_eq!(of_chunk(&[9; 48]), None);
        // Typed: which operation, sender and receiver.
        let Some(BytesAre::Payload(Payload { op: OpRef::Op(OpName(kind, id)), from: 1, to: Some(0), .. })) =
            p.what(&other)
        else {
            panic!("{:?}", p.what(&other))
        };
        assert_eq!((kind, id), (OpKind::Alltoall.op_type(), OpId(3)));
    }
}
