//! What the RDMA check exchanges over the bootstrap, and how it is laid out.
//!
//! Two exchanges, mirroring what NVSHMEM's IBRC/IBGDA transports do at init:
//!
//! * an **allgather** of one [`ExtraRecord`] per rank (24 bytes): what a rank contributes beyond
//!   the 24-byte [`QpHandle`]: its GID index and type, path MTU, PSN and K. NVSHMEM exchanges
//!   none of this (each side uses fixed PSNs and its own port's MTU); the check carries it so a
//!   misconfiguration is reported as such instead of as a transport error;
//! * an **alltoall** of [`QpHandle`]s, K per peer, in exactly NVSHMEM's layout: rank r's send
//!   buffer is `nranks` chunks of `K × 24` bytes, chunk p holding the handles of r's K QPs meant
//!   for peer p (IBGDA `ibgda_rc_handle`, IBRC `nvshmemt_ib_common_ep_handle`; the alltoall is
//!   `bootstrap_uid_alltoall(send, recv, K*24)`). After the alltoall, chunk p of r's receive
//!   buffer holds p's K handles meant for r, so r's QP `(p, k)` connects to `recv[p][k]`.
//!
//! The self chunk is part of the layout (NVSHMEM's alltoall copies it locally): the check gives
//! it K loopback QPs, each connected to itself, as ibverbs' own loopback example does.

use std::fmt;

use bootsim_nvshmem::QpHandle;

/// Position of one QP in the layout: peer rank and index among the K QPs for that peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QpSlot {
    /// The peer rank this QP is connected to.
    pub peer: u32,
    /// Index among the K QPs toward `peer`.
    pub qp: u32,
}

impl fmt::Display for QpSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "peer {} qp {}", self.peer, self.qp)
    }
}

/// Errors of the exchange layer: bad sizes, bad records, disagreeing ranks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExchangeError {
    /// `rank >= nranks`, `nranks == 0` or `qps_per_peer == 0`.
    #[error("invalid layout: rank {rank}, nranks {nranks}, {qps_per_peer} QPs per peer")]
    InvalidLayout {
        /// Rank.
        rank: u32,
        /// Number of ranks.
        nranks: u32,
        /// K.
        qps_per_peer: u32,
    },
    /// A buffer of the wrong size.
    #[error("{what}: expected {expected} bytes, got {got}")]
    Length {
        /// Which buffer.
        what: &'static str,
        /// Expected size.
        expected: usize,
        /// Actual size.
        got: usize,
    },
    /// An extra record that does not start with [`ExtraRecord::MAGIC`].
    #[error("extra record: bad magic {got:#010x} (expected {:#010x})", ExtraRecord::MAGIC)]
    Magic {
        /// The magic found.
        got: u32,
    },
    /// An extra record field outside its range.
    #[error("extra record: {field} = {value} is out of range")]
    Field {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// Peer `peer`'s record disagrees with this rank on `field`.
    #[error("rank {peer}'s extra record says {field} = {theirs}, this rank uses {ours}")]
    Disagree {
        /// The peer.
        peer: u32,
        /// The field.
        field: &'static str,
        /// Peer's value.
        theirs: u64,
        /// Ours.
        ours: u64,
    },
}

/// Geometry of the per-peer QP set of one rank: `nranks × qps_per_peer` QPs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QpLayout {
    nranks: u32,
    rank: u32,
    qps_per_peer: u32,
}

impl QpLayout {
    /// A layout; fails if `rank >= nranks` or either count is 0.
    pub fn new(nranks: u32, rank: u32, qps_per_peer: u32) -> Result<QpLayout, ExchangeError> {
        if nranks == 0 || rank >= nranks || qps_per_peer == 0 {
            return Err(ExchangeError::InvalidLayout { rank, nranks, qps_per_peer });
        }
        Ok(QpLayout { nranks, rank, qps_per_peer })
    }

    /// Number of ranks.
    pub fn nranks(&self) -> u32 {
        self.nranks
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// K, the number of QPs per peer.
    pub fn qps_per_peer(&self) -> u32 {
        self.qps_per_peer
    }

    /// Total number of QPs (`nranks × K`, self chunk included).
    pub fn len(&self) -> usize {
        self.nranks as usize * self.qps_per_peer as usize
    }

    /// Never true: a valid layout has at least one QP.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Flat index of `slot` (`peer × K + qp`).
    ///
    /// # Panics
    /// If the slot is outside the layout.
    pub fn index(&self, slot: QpSlot) -> usize {
        assert!(slot.peer < self.nranks && slot.qp < self.qps_per_peer, "{slot} outside layout");
        slot.peer as usize * self.qps_per_peer as usize + slot.qp as usize
    }

    /// The slot at flat index `index`.
    ///
    /// # Panics
    /// If `index >= self.len()`.
    pub fn slot(&self, index: usize) -> QpSlot {
        assert!(index < self.len(), "QP index {index} outside layout");
        let k = self.qps_per_peer as usize;
        QpSlot { peer: (index / k) as u32, qp: (index % k) as u32 }
    }

    /// All slots in flat-index order.
    pub fn slots(&self) -> impl Iterator<Item = QpSlot> + '_ {
        (0..self.len()).map(|i| self.slot(i))
    }

    /// Bytes of one peer's chunk: `K × 24`, the `size` NVSHMEM passes to its alltoall.
    pub fn chunk_len(&self) -> usize {
        self.qps_per_peer as usize * QpHandle::SIZE
    }

    /// Bytes of the whole alltoall send (and receive) buffer.
    pub fn payload_len(&self) -> usize {
        self.nranks as usize * self.chunk_len()
    }

    /// The alltoall send buffer: `handles[i]` (in flat-index order) at `i × 24`.
    pub fn encode(&self, handles: &[QpHandle]) -> Result<Vec<u8>, ExchangeError> {
        if handles.len() != self.len() {
            return Err(ExchangeError::Length {
                what: "handles to encode (QPs)",
                expected: self.len(),
                got: handles.len(),
            });
        }
        Ok(handles.iter().flat_map(|h| h.to_bytes()).collect())
    }

    /// Splits the alltoall receive buffer back into handles, in flat-index order: element
    /// `index(QpSlot{peer: p, qp: k})` is what p sent for its k-th QP toward this rank.
    pub fn decode(&self, bytes: &[u8]) -> Result<Vec<QpHandle>, ExchangeError> {
        if bytes.len() != self.payload_len() {
            return Err(ExchangeError::Length {
                what: "alltoall receive buffer",
                expected: self.payload_len(),
                got: bytes.len(),
            });
        }
        Ok(QpHandle::decode_all(bytes).expect("length is a multiple of 24"))
    }

    /// Peer `peer`'s chunk of an alltoall buffer.
    ///
    /// # Panics
    /// If `bytes` is not `payload_len()` long or `peer >= nranks`.
    pub fn chunk<'a>(&self, bytes: &'a [u8], peer: u32) -> &'a [u8] {
        assert_eq!(bytes.len(), self.payload_len(), "alltoall buffer length");
        assert!(peer < self.nranks, "peer {peer} outside layout");
        let c = self.chunk_len();
        &bytes[peer as usize * c..(peer as usize + 1) * c]
    }
}

/// Builds the NVSHMEM handle from what ibverbs exposes: QPN, LID and the 16 GID bytes (wire
/// order). The GID is split like NVSHMEM's `memcpy` of `gid.global.{subnet_prefix,
/// interface_id}` into host-order `u64`s, so `QpHandle::gid()` returns the same 16 bytes.
pub fn handle_from_parts(qpn: u32, lid: u16, gid: [u8; 16]) -> QpHandle {
    QpHandle {
        qpn,
        lid,
        spn: u64::from_le_bytes(gid[..8].try_into().expect("8 bytes")),
        iid: u64::from_le_bytes(gid[8..].try_into().expect("8 bytes")),
    }
}

/// A reference alltoall: `recv[r]`'s chunk p is `sends[p]`'s chunk r. All buffers must have the
/// same length, a multiple of `sends.len()`. For tests and for the simulator's ground truth.
pub fn alltoall_in_memory(sends: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, ExchangeError> {
    let n = sends.len();
    let Some(first) = sends.first() else {
        return Ok(Vec::new());
    };
    let total = first.len();
    if !total.is_multiple_of(n) {
        return Err(ExchangeError::Length {
            what: "alltoall send buffer (multiple of nranks)",
            expected: total / n * n,
            got: total,
        });
    }
    if let Some(bad) = sends.iter().find(|s| s.len() != total) {
        return Err(ExchangeError::Length { what: "alltoall send buffer", expected: total, got: bad.len() });
    }
    let c = total / n;
    Ok((0..n).map(|r| sends.iter().flat_map(|s| s[r * c..(r + 1) * c].iter().copied()).collect()).collect())
}

/// What rank `rank` should receive from an uncorrupted alltoall, in flat-index order, given
/// every rank's local handles (`world[p]` = p's `local_handles()`, flat-index order).
///
/// # Panics
/// If a rank's handle list does not have `nranks × K` entries.
pub fn expected_received(world: &[Vec<QpHandle>], rank: u32, qps_per_peer: u32) -> Vec<QpHandle> {
    let n = world.len();
    let k = qps_per_peer as usize;
    let mut out = Vec::with_capacity(n * k);
    for (p, handles) in world.iter().enumerate() {
        assert_eq!(handles.len(), n * k, "rank {p}'s handle count");
        out.extend_from_slice(&handles[rank as usize * k..(rank as usize + 1) * k]);
    }
    out
}

/// Per-rank record allgathered next to the handles (24 bytes, little-endian):
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | magic [`ExtraRecord::MAGIC`] (`"BSX1"`) |
/// | 4 | 4 | rank |
/// | 8 | 4 | GID index (`sgid_index` this rank uses) |
/// | 12 | 4 | PSN (24 bits): the first PSN this rank sends with, which peers must use as RQ PSN |
/// | 16 | 2 | K (QPs per peer) |
/// | 18 | 1 | path MTU (`enum ibv_mtu`, 1..=5) |
/// | 19 | 1 | GID type (`enum ibv_gid_type`, 0..=2) |
/// | 20 | 4 | reserved, zero (room for an rkey if an RDMA-WRITE canary is ever added) |
///
/// No rkey/addr: ibverbs 0.9.2 only posts SEND/RECV, so the canary needs none, and its
/// `sq_psn` is hard-coded to 0, so `psn` is always 0 with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExtraRecord {
    /// The contributing rank.
    pub rank: u32,
    /// Its GID table index.
    pub gid_index: u32,
    /// Its send PSN (24 bits).
    pub psn: u32,
    /// K.
    pub qps_per_peer: u16,
    /// `enum ibv_mtu` (1 = 256 … 5 = 4096).
    pub path_mtu: u8,
    /// `enum ibv_gid_type` of its GID (0 IB, 1 RoCE v1, 2 RoCE v2).
    pub gid_type: u8,
}

impl ExtraRecord {
    /// Encoded size.
    pub const SIZE: usize = 24;
    /// `"BSX1"` read as a little-endian u32.
    pub const MAGIC: u32 = u32::from_le_bytes(*b"BSX1");

    /// The record's bytes.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..4].copy_from_slice(&Self::MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.rank.to_le_bytes());
        b[8..12].copy_from_slice(&self.gid_index.to_le_bytes());
        b[12..16].copy_from_slice(&self.psn.to_le_bytes());
        b[16..18].copy_from_slice(&self.qps_per_peer.to_le_bytes());
        b[18] = self.path_mtu;
        b[19] = self.gid_type;
        b
    }

    /// Parses and range-checks a record.
    pub fn decode(bytes: &[u8]) -> Result<ExtraRecord, ExchangeError> {
        if bytes.len() != Self::SIZE {
            return Err(ExchangeError::Length { what: "extra record", expected: Self::SIZE, got: bytes.len() });
        }
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        let magic = u32_at(0);
        if magic != Self::MAGIC {
            return Err(ExchangeError::Magic { got: magic });
        }
        let rec = ExtraRecord {
            rank: u32_at(4),
            gid_index: u32_at(8),
            psn: u32_at(12),
            qps_per_peer: u16::from_le_bytes([bytes[16], bytes[17]]),
            path_mtu: bytes[18],
            gid_type: bytes[19],
        };
        let field = |field, value: u64| Err(ExchangeError::Field { field, value });
        if rec.psn > 0x00ff_ffff {
            return field("psn", rec.psn.into());
        }
        if rec.qps_per_peer == 0 {
            return field("qps_per_peer", 0);
        }
        if !(1..=5).contains(&rec.path_mtu) {
            return field("path_mtu", rec.path_mtu.into());
        }
        if rec.gid_type > 2 {
            return field("gid_type", rec.gid_type.into());
        }
        let reserved = u32_at(20);
        if reserved != 0 {
            return field("reserved", reserved.into());
        }
        Ok(rec)
    }

    /// Decodes an allgather buffer of `nranks` records and checks it against this rank's own
    /// record: record p must claim rank p, and every rank must agree on K, path MTU, PSN and
    /// GID type. (The GID index may differ between hosts.)
    pub fn decode_all(bytes: &[u8], mine: &ExtraRecord) -> Result<Vec<ExtraRecord>, ExchangeError> {
        if bytes.is_empty() || !bytes.len().is_multiple_of(Self::SIZE) {
            return Err(ExchangeError::Length {
                what: "extra record allgather buffer (multiple of 24)",
                expected: (bytes.len() / Self::SIZE).max(1) * Self::SIZE,
                got: bytes.len(),
            });
        }
        let records = bytes.chunks_exact(Self::SIZE).map(ExtraRecord::decode).collect::<Result<Vec<_>, _>>()?;
        for (p, r) in records.iter().enumerate() {
            let peer = p as u32;
            let checks: [(&'static str, u64, u64); 5] = [
                ("rank", r.rank.into(), peer.into()),
                ("qps_per_peer", r.qps_per_peer.into(), mine.qps_per_peer.into()),
                ("path_mtu", r.path_mtu.into(), mine.path_mtu.into()),
                ("psn", r.psn.into(), mine.psn.into()),
                ("gid_type", r.gid_type.into(), mine.gid_type.into()),
            ];
            for (field, theirs, ours) in checks {
                if theirs != ours {
                    return Err(ExchangeError::Disagree { peer, field, theirs, ours });
                }
            }
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(rank: u32, slot: usize) -> QpHandle {
        QpHandle {
            qpn: 0x100 * (rank + 1) + slot as u32,
            lid: 0,
            spn: 0x80fe,
            iid: 0x0100_000a_ffff_0000 + rank as u64,
        }
    }

    fn world(n: u32, k: u32) -> Vec<Vec<QpHandle>> {
        (0..n).map(|r| (0..(n * k) as usize).map(|i| h(r, i)).collect()).collect()
    }

    #[test]
    fn layout_geometry() {
        let l = QpLayout::new(4, 1, 3).unwrap();
        assert_eq!(l.len(), 12);
        assert_eq!(l.chunk_len(), 72);
        assert_eq!(l.payload_len(), 288);
        assert_eq!(l.slot(7), QpSlot { peer: 2, qp: 1 });
        assert_eq!(l.index(QpSlot { peer: 2, qp: 1 }), 7);
        let all: Vec<_> = l.slots().collect();
        assert_eq!(all.len(), 12);
        assert!(all.iter().enumerate().all(|(i, s)| l.index(*s) == i));
        assert_eq!(QpSlot { peer: 2, qp: 1 }.to_string(), "peer 2 qp 1");
        assert!(QpLayout::new(2, 2, 1).is_err());
        assert!(QpLayout::new(0, 0, 1).is_err());
        assert_eq!(QpLayout::new(2, 0, 0).unwrap_err().to_string(), "invalid layout: rank 0, nranks 2, 0 QPs per peer");
    }

    #[test]
    fn encode_lays_out_k_handles_per_peer() {
        let l = QpLayout::new(3, 0, 2).unwrap();
        let handles: Vec<_> = (0..6).map(|i| h(0, i)).collect();
        let buf = l.encode(&handles).unwrap();
        assert_eq!(buf.len(), 3 * 2 * 24);
        // Peer 2's chunk is bytes 96..144 and holds handles 4 and 5.
        let chunk = l.chunk(&buf, 2);
        assert_eq!(chunk.len(), 48);
        assert_eq!(&chunk[..24], &handles[4].to_bytes());
        assert_eq!(&chunk[24..], &handles[5].to_bytes());
        assert_eq!(l.decode(&buf).unwrap(), handles);
        assert!(l.encode(&handles[..5]).is_err());
        assert_eq!(
            l.decode(&buf[..140]).unwrap_err().to_string(),
            "alltoall receive buffer: expected 144 bytes, got 140"
        );
    }

    #[test]
    fn alltoall_routes_chunk_p_of_r_to_chunk_r_of_p() {
        let (n, k) = (4u32, 2u32);
        let w = world(n, k);
        let sends: Vec<Vec<u8>> =
            (0..n).map(|r| QpLayout::new(n, r, k).unwrap().encode(&w[r as usize]).unwrap()).collect();
        let recvs = alltoall_in_memory(&sends).unwrap();
        for r in 0..n {
            let l = QpLayout::new(n, r, k).unwrap();
            let got = l.decode(&recvs[r as usize]).unwrap();
            assert_eq!(got, expected_received(&w, r, k));
            // QP (p, q) of r connects to p's QP (r, q).
            for s in l.slots() {
                let theirs = QpLayout::new(n, s.peer, k).unwrap();
                let back = theirs.index(QpSlot { peer: r, qp: s.qp });
                assert_eq!(got[l.index(s)], w[s.peer as usize][back]);
            }
        }
        assert!(alltoall_in_memory(&[]).unwrap().is_empty());
        assert!(alltoall_in_memory(&[vec![0; 4], vec![0; 3]]).is_err());
        assert!(alltoall_in_memory(&[vec![0; 3], vec![0; 3]]).is_err());
    }

    #[test]
    fn handle_from_parts_keeps_gid_bytes() {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[10, 0, 0, 7]);
        let hd = handle_from_parts(0x1234, 0, gid);
        assert_eq!(hd.gid(), gid);
        assert!(!hd.gid_is_zero());
        assert_eq!(&hd.to_bytes()[8..24], &gid);
        assert_eq!(hd.spn, 0);
        assert!(handle_from_parts(1, 0, [0; 16]).gid_is_zero());
    }

    fn rec(rank: u32) -> ExtraRecord {
        ExtraRecord { rank, gid_index: 3, psn: 0, qps_per_peer: 24, path_mtu: 3, gid_type: 2 }
    }

    #[test]
    fn extra_record_roundtrip_and_layout() {
        let r = ExtraRecord { psn: 0x00ab_cdef, ..rec(5) };
        let b = r.encode();
        assert_eq!(&b[0..4], b"BSX1");
        assert_eq!(&b[4..8], &[5, 0, 0, 0]);
        assert_eq!(&b[8..12], &[3, 0, 0, 0]);
        assert_eq!(&b[12..16], &[0xef, 0xcd, 0xab, 0]);
        assert_eq!(&b[16..18], &[24, 0]);
        assert_eq!((b[18], b[19]), (3, 2));
        assert_eq!(&b[20..], &[0; 4]);
        assert_eq!(ExtraRecord::decode(&b).unwrap(), r);
    }

    #[test]
    fn extra_record_rejects_garbage() {
        let good = rec(0).encode();
        let with = |i: usize, v: u8| {
            let mut b = good;
            b[i] = v;
            ExtraRecord::decode(&b)
        };
        assert_eq!(
            ExtraRecord::decode(&good[..20]).unwrap_err().to_string(),
            "extra record: expected 24 bytes, got 20"
        );
        // A zeroed buffer, what the v3.4.5 short-read leaves behind.
        assert_eq!(
            ExtraRecord::decode(&[0; 24]).unwrap_err().to_string(),
            "extra record: bad magic 0x00000000 (expected 0x31585342)"
        );
        assert!(matches!(with(15, 1), Err(ExchangeError::Field { field: "psn", .. })));
        assert!(matches!(with(18, 6), Err(ExchangeError::Field { field: "path_mtu", .. })));
        assert!(matches!(with(18, 0), Err(ExchangeError::Field { field: "path_mtu", .. })));
        assert!(matches!(with(19, 3), Err(ExchangeError::Field { field: "gid_type", .. })));
        assert!(matches!(with(21, 1), Err(ExchangeError::Field { field: "reserved", .. })));
        let mut b = good;
        b[16] = 0;
        assert!(matches!(ExtraRecord::decode(&b), Err(ExchangeError::Field { field: "qps_per_peer", .. })));
    }

    #[test]
    fn extra_records_must_agree() {
        let all: Vec<u8> = (0..3).flat_map(|r| rec(r).encode()).collect();
        let mine = rec(1);
        assert_eq!(ExtraRecord::decode_all(&all, &mine).unwrap().len(), 3);

        // Per-host GID index differences are fine.
        let mut other = all.clone();
        other[24 + 8] = 7;
        assert!(ExtraRecord::decode_all(&other, &mine).is_ok());

        // Rank 2 uses MTU 4096.
        let mut mtu = all.clone();
        mtu[48 + 18] = 5;
        assert_eq!(
            ExtraRecord::decode_all(&mtu, &mine).unwrap_err().to_string(),
            "rank 2's extra record says path_mtu = 5, this rank uses 3"
        );
        // Records swapped: position 0 claims rank 1.
        let mut swapped = all.clone();
        swapped[..24].copy_from_slice(&rec(1).encode());
        assert_eq!(
            ExtraRecord::decode_all(&swapped, &mine).unwrap_err(),
            ExchangeError::Disagree { peer: 0, field: "rank", theirs: 1, ours: 0 }
        );
        assert!(ExtraRecord::decode_all(&all[..30], &mine).is_err());
        assert!(ExtraRecord::decode_all(&[], &mine).is_err());
    }
}
