//! Workloads: the sequences of collectives NVSHMEM really issues, with checkable payloads.
//!
//! Every payload is a pure function of (seed, sender, receiver, index), so the oracle knows
//! every byte that should arrive and, for a wrong one, where it came from.

use std::sync::Arc;

use bootsim_core::seed::derive;
use bootsim_core::Instant;
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use crate::rank::{Chunked, Chunks};
use crate::OpKind;
use crate::{Op, QpHandle, Rank};

/// One collective of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpSpec {
    /// Allgather of `len` bytes per rank.
    Allgather(usize),
    /// Alltoall of `len` bytes per peer (a multiple of 24 carries QP handles).
    Alltoall(usize),
    /// Barrier.
    Barrier,
}

impl OpSpec {
    /// The core's kind of this operation.
    pub fn kind(self) -> OpKind {
        match self {
            OpSpec::Allgather(_) => OpKind::Allgather,
            OpSpec::Alltoall(_) => OpKind::Alltoall,
            OpSpec::Barrier => OpKind::Barrier,
        }
    }
}

/// A named workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Workload {
    /// The report's case: allgather(28), alltoall of `qps` handles per peer, barrier.
    Deepep {
        /// QP handles per peer in the alltoall.
        qps: u32,
    },
    /// The sequence of collectives NVSHMEM's init makes (IBGDA transport, `qps` RC QPs per peer).
    NvshmemInit {
        /// RC QPs per peer.
        qps: u32,
    },
    /// `nvshmemx_qp_create(k)`: k back-to-back alltoalls of one handle per peer, then a barrier.
    QpCreate {
        /// How many alltoalls.
        k: u32,
    },
    /// A seeded random sequence of `len` collectives and sizes.
    Churn {
        /// How many collectives.
        len: u32,
    },
    /// An explicit list, e.g. `allgather:8,alltoall:576,barrier`.
    Custom(Vec<OpSpec>),
}

impl Workload {
    /// `deepep`'s QP handles per peer when a case does not say (`qps=`).
    pub const DEEPEP_QPS: u32 = 24;
    /// `nvshmem-init`'s RC QPs per peer when a case does not say (`qps=`).
    pub const INIT_QPS: u32 = 2;
    /// `qp-create`'s alltoalls when a case does not say (`k=`).
    pub const QP_CREATE_K: u32 = 4;
    /// `churn`'s collectives when a case does not say (`len=`).
    pub const CHURN_LEN: u32 = 12;
}

impl std::fmt::Display for Workload {
    /// The workload as a case string gives it: its name, then its parameters that differ from
    /// the defaults (`deepep`, `deepep qps=3`, `custom ops=allgather:8,barrier`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())?;
        match self {
            Workload::Deepep { qps } if *qps != Workload::DEEPEP_QPS => write!(f, " qps={qps}"),
            Workload::NvshmemInit { qps } if *qps != Workload::INIT_QPS => write!(f, " qps={qps}"),
            Workload::QpCreate { k } if *k != Workload::QP_CREATE_K => write!(f, " k={k}"),
            Workload::Churn { len } if *len != Workload::CHURN_LEN => write!(f, " len={len}"),
            Workload::Custom(ops) => write!(f, " ops={}", format_ops(ops)),
            _ => Ok(()),
        }
    }
}

/// Names `Workload::parse` accepts.
pub const WORKLOADS: [&str; 5] = ["deepep", "nvshmem-init", "qp-create", "churn", "custom"];

impl Workload {
    /// The workload's name.
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Deepep { .. } => "deepep",
            Workload::NvshmemInit { .. } => "nvshmem-init",
            Workload::QpCreate { .. } => "qp-create",
            Workload::Churn { .. } => "churn",
            Workload::Custom(_) => "custom",
        }
    }

    /// The collectives every rank runs, in order.
    pub fn ops(&self, seed: u64) -> Vec<OpSpec> {
        use OpSpec::*;
        match self {
            Workload::Deepep { qps } => vec![Allgather(28), Alltoall(24 * *qps as usize), Barrier],
            Workload::NvshmemInit { qps } => {
                let mut v = vec![
                    Allgather(8),  // hostHash (init.cu:328)
                    Allgather(4),  // npes_node
                    Allgather(4),  // MPS: float (init.cu:817)
                    Allgather(1),  // MPS: bool
                    Allgather(8),  // symmetric heap base (mem_heap.cpp)
                    Allgather(64), // heap handles
                    Allgather(4),  // pids (mem_transport.cpp:70)
                    Allgather(64), // fabric info
                    Allgather(64), // gpu_info (topo.cpp:225)
                    Allgather(4),  // transport_map
                    Allgather(32), // pe_info
                    // IBGDA connect_endpoints: DCT handles, then the RC alltoall, then a barrier.
                    Allgather(2 * 56),
                    Alltoall(24 * *qps as usize),
                    Barrier,       // transport.cpp:435
                    Barrier,       // proxy (proxy.cpp:242)
                    Barrier,       // init.cu:1158
                    Allgather(16), // team init
                    Allgather(16),
                    Barrier, // team_internal.cpp:1372-1416
                    Barrier,
                    Barrier,
                    Barrier, // init.cu:1162
                    Barrier, // init.cu:1174
                ];
                v.shrink_to_fit();
                v
            }
            Workload::QpCreate { k } => {
                let mut v: Vec<OpSpec> = (0..*k).map(|_| Alltoall(24)).collect();
                v.push(Barrier);
                v
            }
            Workload::Churn { len } => {
                let mut rng = ChaCha8Rng::seed_from_u64(derive(seed, "churn", 0));
                (0..*len)
                    .map(|_| match rng.next_u32() % 3 {
                        0 => Allgather(1 + (rng.next_u32() % 64) as usize),
                        1 => Alltoall(24 * (1 + (rng.next_u32() % 24) as usize)),
                        _ => Barrier,
                    })
                    .collect()
            }
            Workload::Custom(ops) => ops.clone(),
        }
    }
}

/// Parses `allgather:8,alltoall:576,barrier`.
pub fn parse_ops(s: &str) -> Result<Vec<OpSpec>, String> {
    let mut ops = Vec::new();
    for item in s.split(',').filter(|i| !i.is_empty()) {
        let (name, size) = match item.split_once(':') {
            Some((n, l)) => (n, Some(l)),
            None => (item, None),
        };
        let len = |what: &str| -> Result<usize, String> {
            let l = size.ok_or_else(|| format!("`{item}`: {what} needs a size, e.g. {what}:8"))?;
            l.parse::<usize>()
                .ok()
                .filter(|&l| l > 0 && l <= 1 << 20)
                .ok_or_else(|| format!("`{item}`: size must be 1..=1048576"))
        };
        ops.push(match name {
            "allgather" => OpSpec::Allgather(len("allgather")?),
            "alltoall" => OpSpec::Alltoall(len("alltoall")?),
            "barrier" if size.is_none() => OpSpec::Barrier,
            _ => return Err(format!("`{item}`: accepted: allgather:N, alltoall:N, barrier")),
        });
    }
    if ops.is_empty() {
        return Err("ops= needs at least one operation".into());
    }
    Ok(ops)
}

/// Formats ops back as `parse_ops` reads them.
pub fn format_ops(ops: &[OpSpec]) -> String {
    ops.iter()
        .map(|o| match o {
            OpSpec::Allgather(l) => format!("allgather:{l}"),
            OpSpec::Alltoall(l) => format!("alltoall:{l}"),
            OpSpec::Barrier => "barrier".into(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// splitmix64: a pure mixing function (payload derivation, not a random stream).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn key(seed: u64, a: u64, b: u64, c: u64) -> u64 {
    mix(key_prefix(seed, a, b) ^ c)
}

/// [`key`] before its last input: what a chunk made many times over (every peer's slice of an
/// allgather) makes once.
fn key_prefix(seed: u64, a: u64, b: u64) -> u64 {
    mix(mix(seed ^ a.wrapping_mul(0x1000_0001)) ^ b)
}

/// The QP handle rank `from` sends rank `to` for its `qp`-th QP: a non-zero 24-bit QPN and a
/// RoCE v2 IPv4-mapped GID (::ffff:10.x.y.z) of `from`'s NIC, lid 0.
pub fn qp_handle(seed: u64, from: u32, to: u32, qp: u32) -> QpHandle {
    let h = key(seed, 1, u64::from(from) << 32 | u64::from(to), u64::from(qp));
    let qpn = 0x100 + (h as u32 & 0x00ff_fe00) + qp % 0x100;
    let ip = 0x0a00_0000u32 | (from + 1);
    let gid = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, (ip >> 24) as u8, (ip >> 16) as u8, (ip >> 8) as u8, ip as u8];
    QpHandle {
        qpn,
        lid: 0,
        spn: u64::from_le_bytes(gid[..8].try_into().expect("8")),
        iid: u64::from_le_bytes(gid[8..].try_into().expect("8")),
    }
}

/// The chunk `from` sends `to` in the `index`-th operation (an alltoall of `len` bytes per peer).
pub fn alltoall_chunk(seed: u64, index: u32, from: u32, to: u32, len: usize) -> Vec<u8> {
    let mut chunk = Vec::with_capacity(len);
    alltoall_chunk_into(seed, index, from, to, len, &mut chunk);
    chunk
}

/// [`alltoall_chunk`], appended to `out`.
fn alltoall_chunk_into(seed: u64, index: u32, from: u32, to: u32, len: usize, out: &mut Vec<u8>) {
    if len.is_multiple_of(QpHandle::SIZE) {
        for qp in 0..(len / QpHandle::SIZE) as u32 {
            out.extend_from_slice(&qp_handle(seed ^ u64::from(index) << 48, from, to, qp).to_bytes());
        }
    } else {
        bytes_into(key(seed, 2, u64::from(index) << 32 | u64::from(from), u64::from(to)), len, out);
    }
}

/// What rank `from` contributes to the `index`-th operation (an allgather of `len` bytes).
pub fn allgather_slice(seed: u64, index: u32, from: u32, len: usize) -> Vec<u8> {
    let mut slice = Vec::with_capacity(len.next_multiple_of(8));
    allgather_slice_into(seed, index, from, len, &mut slice);
    slice
}

/// The first input of an allgather slice's [`key`] (what tells its bytes from other data's).
const ALLGATHER_KEY: u64 = 3;

/// [`allgather_slice`], appended to `out`.
fn allgather_slice_into(seed: u64, index: u32, from: u32, len: usize, out: &mut Vec<u8>) {
    bytes_into(key(seed, ALLGATHER_KEY, u64::from(index), u64::from(from)), len, out);
}

/// [`allgather_slice_into`] of the `index`-th operation for any rank, its key's common part
/// made once (a rank makes every peer's slice twice: to check it, then in its result).
fn allgather_slices(seed: u64, index: u32, len: usize) -> Chunks {
    let prefix = key_prefix(seed, ALLGATHER_KEY, u64::from(index));
    Arc::new(move |from, out| bytes_into(mix(prefix ^ u64::from(from)), len, out))
}

/// The 4 bytes rank `from` passes to the `index`-th operation (a barrier): non-zero, and
/// recognisable ("BA" then the rank and op index).
pub fn barrier_word(from: u32, index: u32) -> [u8; 4] {
    [0xba, (from & 0xff) as u8, ((from >> 8) & 0xff) as u8, (index & 0x7f) as u8 | 0x80]
}

/// `len` bytes derived from `k`, appended to `out`.
fn bytes_into(k: u64, len: usize, out: &mut Vec<u8>) {
    let end = out.len() + len;
    for i in 0..len.div_ceil(8) as u64 {
        out.extend_from_slice(&mix(k ^ i).to_le_bytes());
    }
    out.truncate(end);
}

/// The `n` pieces `piece(0..n)`, each `len` bytes, one after another (into one buffer of the
/// final size: collecting a flattened iterator grew it step by step).
fn concat(n: u32, len: usize, piece: impl Fn(u32) -> Vec<u8>) -> Vec<u8> {
    let mut all = Vec::with_capacity(n as usize * len);
    for p in 0..n {
        all.extend_from_slice(&piece(p));
    }
    all
}

/// The core operation rank `r` of `n` starts for workload op `index`.
pub fn build_op(spec: OpSpec, seed: u64, index: u32, r: u32, n: u32) -> Op {
    match spec {
        OpSpec::Allgather(len) => Op::Allgather { mine: allgather_slice(seed, index, r, len) },
        OpSpec::Alltoall(len) => Op::Alltoall { chunks: concat(n, len, |p| alltoall_chunk(seed, index, r, p, len)) },
        OpSpec::Barrier => Op::Barrier { word: barrier_word(r, index) },
    }
}

/// Queue workload op `index` on rank `r` of `n` ([`build_op`]'s operation): an allgather or
/// all-to-all chunked ([`Chunked`]), its chunks made from the seed when sent and its result
/// held as its difference from [`expected_chunk_into`], not held whole by every rank at once.
pub fn queue_op(rank: &mut Rank, now: Instant, spec: OpSpec, seed: u64, index: u32, r: u32, n: u32) {
    match spec {
        OpSpec::Allgather(len) => {
            rank.push_chunked(now, Chunked::Allgather { len, expected: allgather_slices(seed, index, len) })
        }
        OpSpec::Alltoall(len) => {
            let expected: Chunks = Arc::new(move |p, out| expected_chunk_into(spec, seed, index, r, p, out));
            let input: Chunks = Arc::new(move |p, out| alltoall_chunk_into(seed, index, r, p, len, out));
            rank.push_chunked(now, Chunked::Alltoall { len, input, expected })
        }
        OpSpec::Barrier => rank.push(now, build_op(spec, seed, index, r, n)),
    }
}

/// The chunk rank `r` must get from peer `p` in workload op `index` (none for a barrier),
/// appended to `out`.
pub fn expected_chunk_into(spec: OpSpec, seed: u64, index: u32, r: u32, p: u32, out: &mut Vec<u8>) {
    match spec {
        OpSpec::Allgather(len) => allgather_slice_into(seed, index, p, len, out),
        OpSpec::Alltoall(len) => alltoall_chunk_into(seed, index, p, r, len, out),
        OpSpec::Barrier => {}
    }
}

/// The result rank `r` must get from workload op `index`; `None` for a barrier (its bytes are unused).
pub fn expected_result(spec: OpSpec, seed: u64, index: u32, r: u32, n: u32) -> Option<Vec<u8>> {
    match spec {
        OpSpec::Allgather(len) | OpSpec::Alltoall(len) => {
            let mut all = Vec::with_capacity(n as usize * len + 8);
            for p in 0..n {
                expected_chunk_into(spec, seed, index, r, p, &mut all);
            }
            Some(all)
        }
        OpSpec::Barrier => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_distinct_nonzero_and_roce() {
        let mut seen = std::collections::BTreeSet::new();
        for from in 0..8 {
            for to in 0..8 {
                for qp in 0..24 {
                    let h = qp_handle(7, from, to, qp);
                    assert!(h.qpn != 0 && h.qpn < 1 << 24 && !h.gid_is_zero() && h.lid == 0);
                    assert_eq!(h.gid()[10..12], [0xff, 0xff]);
                    assert!(seen.insert(h), "duplicate handle");
                }
            }
        }
    }

    #[test]
    fn ops_parse_and_print() {
        let ops = parse_ops("allgather:8,alltoall:576,barrier").unwrap();
        assert_eq!(ops, vec![OpSpec::Allgather(8), OpSpec::Alltoall(576), OpSpec::Barrier]);
        assert_eq!(format_ops(&ops), "allgather:8,alltoall:576,barrier");
        assert!(parse_ops("gather:3").unwrap_err().contains("accepted"));
        assert!(parse_ops("alltoall").unwrap_err().contains("needs a size"));
        assert!(parse_ops("").is_err());
    }

    #[test]
    fn an_allgathers_slices_made_from_their_common_key_are_each_ranks_expected_ones() {
        for (seed, index, len) in [(1, 0, 8), (7, 3, 1), (u64::MAX, 11, 112), (42, 17, 28)] {
            let slices = allgather_slices(seed, index, len);
            for p in 0..9 {
                let (mut made, mut expected) = (vec![5], vec![5]);
                slices(p, &mut made);
                expected_chunk_into(OpSpec::Allgather(len), seed, index, 3, p, &mut expected);
                assert_eq!(made, expected, "seed {seed} op {index} slice {p}");
                assert_eq!(made[1..], allgather_slice(seed, index, p, len));
            }
        }
    }

    #[test]
    fn churn_is_seeded() {
        let w = Workload::Churn { len: 20 };
        assert_eq!(w.ops(1), w.ops(1));
        assert_ne!(w.ops(1), w.ops(2));
    }
}
