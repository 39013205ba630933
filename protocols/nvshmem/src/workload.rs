//! Workloads: the sequences of collectives NVSHMEM really issues, with checkable payloads.
//!
//! Every payload is a pure function of (seed, sender, receiver, index), so the oracle knows
//! every byte that should arrive and, for a wrong one, where it came from.

use std::sync::OnceLock;

use bootsim_core::seed::derive;
use bootsim_core::Instant;
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use crate::rank::{ChunkSink, Chunked, Chunks, MakeChunk};
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
    key_last(key_prefix(seed, a, b), c)
}

/// [`key`] from its [`key_prefix`] and its last input.
#[inline]
fn key_last(prefix: u64, c: u64) -> u64 {
    mix(prefix ^ c)
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
    alltoall_chunk_put(seed, index, from, to, len, out);
}

/// [`alltoall_chunk`], put into `out` piece by piece (the one place its bytes are made).
fn alltoall_chunk_put<S: ChunkSink>(seed: u64, index: u32, from: u32, to: u32, len: usize, out: &mut S) {
    if len.is_multiple_of(QpHandle::SIZE) {
        for qp in 0..(len / QpHandle::SIZE) as u32 {
            out.put(&qp_handle(seed ^ u64::from(index) << 48, from, to, qp).to_bytes());
        }
    } else {
        bytes_put(key(seed, 2, u64::from(index) << 32 | u64::from(from), u64::from(to)), len, out);
    }
}

/// What rank `from` contributes to the `index`-th operation (an allgather of `len` bytes).
pub fn allgather_slice(seed: u64, index: u32, from: u32, len: usize) -> Vec<u8> {
    let mut slice = Vec::with_capacity(len);
    allgather_slice_into(seed, index, from, len, &mut slice);
    slice
}

/// The first input of an allgather slice's [`key`] (what tells its bytes from other data's).
const ALLGATHER_KEY: u64 = 3;

/// [`allgather_slice`], appended to `out`.
fn allgather_slice_into(seed: u64, index: u32, from: u32, len: usize, out: &mut Vec<u8>) {
    bytes_put(key(seed, ALLGATHER_KEY, u64::from(index), u64::from(from)), len, out);
}

/// The most bytes an allgather's slices may take when made once for every rank of a world
/// ([`queue_ops`]); a larger allgather's slices are made again each time one is needed.
pub const SHARED_SLICES_MAX: usize = 1 << 20;

/// [`allgather_slice_into`] of one operation for any rank, its key's common part made once.
/// Shared by a world's `n` ranks (`n` > 0), its slices are made once, all together, the first
/// time one is needed, and read from then on: every rank checks every peer's slice as it comes,
/// then gives them all in its result, n² slices in the world, made only n times.
struct AllgatherSlices {
    /// [`key_prefix`] of the operation.
    prefix: u64,
    len: usize,
    /// How many slices are kept once made: the world's ranks, or 0 (none kept).
    n: u32,
    /// Slices `0..n`, one after another, once one was needed.
    made: OnceLock<Box<[u8]>>,
}

impl AllgatherSlices {
    /// Slice `from`, made: [`allgather_slice_into`]'s bytes, from the key's common part.
    #[inline]
    fn make<S: ChunkSink>(&self, from: u32, out: &mut S) {
        bytes_put(key_last(self.prefix, u64::from(from)), self.len, out);
    }
}

impl MakeChunk for AllgatherSlices {
    #[inline]
    fn put_chunk<S: ChunkSink>(&self, from: u32, out: &mut S) {
        match self.kept(from..from + 1) {
            Some(slice) => out.put(slice),
            None => self.make(from, out),
        }
    }

    fn kept(&self, from: std::ops::Range<u32>) -> Option<&[u8]> {
        if from.end > self.n {
            return None;
        }
        let all = self.made.get_or_init(|| {
            let mut all = Vec::with_capacity(self.n as usize * self.len);
            (0..self.n).for_each(|p| self.make(p, &mut all));
            all.into_boxed_slice()
        });
        all.get(from.start as usize * self.len..from.end as usize * self.len)
    }
}

/// [`AllgatherSlices`] of the `index`-th operation, its slices kept once made if it is shared
/// by a world's `n` ranks (`n` > 0) and they take at most [`SHARED_SLICES_MAX`] bytes.
fn allgather_slices(seed: u64, index: u32, len: usize, n: u32) -> Chunks {
    Chunks::new(AllgatherSlices::new(seed, index, len, n))
}

impl AllgatherSlices {
    /// See [`allgather_slices`].
    fn new(seed: u64, index: u32, len: usize, n: u32) -> AllgatherSlices {
        let n = if (n as usize).saturating_mul(len) <= SHARED_SLICES_MAX { n } else { 0 };
        let prefix = key_prefix(seed, ALLGATHER_KEY, u64::from(index));
        AllgatherSlices { prefix, len, n, made: OnceLock::new() }
    }
}

/// The chunks of the `index`-th operation (an alltoall of `len` bytes per peer) rank `r` sends
/// (`sent`: chunk p for peer p) or should receive (chunk p from peer p).
struct AlltoallChunks {
    seed: u64,
    index: u32,
    r: u32,
    len: usize,
    sent: bool,
}

impl MakeChunk for AlltoallChunks {
    fn put_chunk<S: ChunkSink>(&self, p: u32, out: &mut S) {
        let (from, to) = if self.sent { (self.r, p) } else { (p, self.r) };
        alltoall_chunk_put(self.seed, self.index, from, to, self.len, out);
    }
}

/// The 4 bytes rank `from` passes to the `index`-th operation (a barrier): non-zero, and
/// recognisable ("BA" then the rank and op index).
pub fn barrier_word(from: u32, index: u32) -> [u8; 4] {
    [0xba, (from & 0xff) as u8, ((from >> 8) & 0xff) as u8, (index & 0x7f) as u8 | 0x80]
}

/// `len` bytes derived from `k`, put into `out` (the one place they are made): word `i` is
/// `mix(k ^ i)`, little-endian, the last one cut to length.
#[inline]
fn bytes_put<S: ChunkSink>(k: u64, len: usize, out: &mut S) {
    let words = len / 8;
    for i in 0..words as u64 {
        out.put(&mix(k ^ i).to_le_bytes());
    }
    let rest = len % 8;
    if rest > 0 {
        out.put(&mix(k ^ words as u64).to_le_bytes()[..rest]);
    }
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
    queue_chunked(rank, now, spec, seed, index, r, n, None);
}

/// [`queue_op`] of every operation of `specs`, in order, on each of a world's `n` ranks (told
/// apart by their [`crate::RankConfig::rank`]): each allgather's expected slices are shared by
/// all of them, made once for the world (up to [`SHARED_SLICES_MAX`] bytes an allgather, while
/// it runs) instead of once by every rank.
pub fn queue_ops<'a>(ranks: impl IntoIterator<Item = &'a mut Rank>, now: Instant, specs: &[OpSpec], seed: u64, n: u32) {
    let slices: Vec<Option<Chunks>> = (0..specs.len() as u32)
        .zip(specs)
        .map(|(index, spec)| match *spec {
            OpSpec::Allgather(len) => Some(allgather_slices(seed, index, len, n)),
            _ => None,
        })
        .collect();
    for rank in ranks {
        let r = rank.config().rank;
        for ((index, spec), slices) in (0..specs.len() as u32).zip(specs).zip(&slices) {
            queue_chunked(rank, now, *spec, seed, index, r, n, slices.clone());
        }
    }
}

/// [`queue_op`], an allgather's expected slices `slices` if given (shared), else its own.
#[allow(clippy::too_many_arguments)]
fn queue_chunked(
    rank: &mut Rank,
    now: Instant,
    spec: OpSpec,
    seed: u64,
    index: u32,
    r: u32,
    n: u32,
    slices: Option<Chunks>,
) {
    match spec {
        OpSpec::Allgather(len) => {
            let expected = slices.unwrap_or_else(|| allgather_slices(seed, index, len, 0));
            rank.push_chunked(now, Chunked::Allgather { len, expected })
        }
        OpSpec::Alltoall(len) => {
            let chunks = |sent| Chunks::new(AlltoallChunks { seed, index, r, len, sent });
            rank.push_chunked(now, Chunked::Alltoall { len, input: chunks(true), expected: chunks(false) })
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
            let mut all = Vec::with_capacity(n as usize * len);
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
        // Made each time (n = 0), kept for 6 ranks (slices 6.. past them made each time), and
        // for 9 ranks too many bytes to keep.
        let cases =
            [(1, 0, 8, 0), (7, 3, 1, 6), (u64::MAX, 11, 112, 6), (42, 17, 28, 0), (5, 2, SHARED_SLICES_MAX / 8, 9)];
        for (seed, index, len, n) in cases {
            let slices = allgather_slices(seed, index, len, n);
            for p in (0..9).rev() {
                let (mut made, mut expected) = (vec![5], vec![5]);
                slices.make(p, &mut made);
                expected_chunk_into(OpSpec::Allgather(len), seed, index, 3, p, &mut expected);
                assert_eq!(made, expected, "seed {seed} op {index} slice {p}");
                assert_eq!(made[1..], allgather_slice(seed, index, p, len));
                assert_checks_only(&slices, p, &made[1..]);
            }
        }
    }

    #[test]
    fn a_shared_allgathers_slices_are_made_once_for_all_its_ranks_and_only_if_small() {
        // Whether slice `p` of an allgather of `len` bytes shared by `n` ranks left all its
        // slices made and kept; and that they are the ones it gives.
        let kept_after = |len: usize, n: u32, p: u32| {
            let slices = AllgatherSlices::new(3, 1, len, n);
            let mut out = Vec::new();
            slices.put_chunk(p, &mut out);
            assert_eq!(out, allgather_slice(3, 1, p, len));
            let all: Vec<u8> = (0..n).flat_map(|p| allgather_slice(3, 1, p, len)).collect();
            slices.made.get().map(|made| assert_eq!(**made, all)).is_some()
        };
        assert!(kept_after(28, 5, 1), "5 slices of 28 bytes, all made at once");
        assert!(kept_after(SHARED_SLICES_MAX / 4, 4, 0), "at the bound");
        assert!(!kept_after(28, 5, 6), "a slice past the world's is made alone");
        assert!(!kept_after(SHARED_SLICES_MAX / 4 + 1, 4, 0), "past the bound");
        assert!(!kept_after(28, 0, 0), "not shared");
    }

    /// `chunks.is(p, ..)` holds for `chunk` and for nothing one byte off it: a byte changed
    /// (any of its first 200 or its last), one short, one more.
    fn assert_checks_only(chunks: &Chunks, p: u32, chunk: &[u8]) {
        assert!(chunks.is(p, chunk), "chunk {p} is itself");
        for i in (0..chunk.len().min(200)).chain([chunk.len() - 1]) {
            let mut off = chunk.to_vec();
            off[i] ^= 1;
            assert!(!chunks.is(p, &off), "chunk {p} with byte {i} changed");
        }
        assert!(!chunks.is(p, &chunk[..chunk.len() - 1]), "chunk {p} cut short");
        assert!(!chunks.is(p, &[chunk, &[0]].concat()), "chunk {p} with a byte more");
        assert!(!chunks.is(p + 1, chunk), "chunk {p} as chunk {}", p + 1);
    }

    #[test]
    fn an_alltoalls_chunks_sent_and_expected_are_its_payloads_and_check_only_themselves() {
        for (seed, index, len) in [(1, 0, 24), (7, 3, 48), (9, 2, 5), (42, 17, 13)] {
            let (r, n) = (2, 5);
            let chunks = |sent| Chunks::new(AlltoallChunks { seed, index, r, len, sent });
            let (input, expected) = (chunks(true), chunks(false));
            for p in 0..n {
                let (mut sent, mut want) = (Vec::new(), Vec::new());
                input.make(p, &mut sent);
                expected.make(p, &mut want);
                assert_eq!(sent, alltoall_chunk(seed, index, r, p, len));
                assert_eq!(want, alltoall_chunk(seed, index, p, r, len));
                let mut expected_into = Vec::new();
                expected_chunk_into(OpSpec::Alltoall(len), seed, index, r, p, &mut expected_into);
                assert_eq!(want, expected_into);
                assert_checks_only(&input, p, &sent);
                assert_checks_only(&expected, p, &want);
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
