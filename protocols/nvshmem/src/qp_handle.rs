//! NVSHMEM's 24-byte RC endpoint handle, the payload whose corruption the report is about.

use std::fmt;
use std::net::Ipv6Addr;

/// `struct {u32 qpn; u16 lid; u64 spn; u64 iid}` as NVSHMEM lays it out (IBGDA `ibgda_rc_handle`,
/// IBRC `nvshmemt_ib_common_ep_handle`): qpn at 0, lid at 4, two bytes of padding, spn at 8,
/// iid at 16, host byte order. On RoCE `lid` is 0 and the GID is `spn` (subnet prefix) and `iid`
/// (interface id).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QpHandle {
    /// Queue pair number (24 bits on real hardware).
    pub qpn: u32,
    /// InfiniBand local identifier; 0 on RoCE.
    pub lid: u16,
    /// GID subnet prefix, as the host-order u64 NVSHMEM copies.
    pub spn: u64,
    /// GID interface id, as the host-order u64 NVSHMEM copies.
    pub iid: u64,
}

impl QpHandle {
    /// Encoded size in bytes.
    pub const SIZE: usize = 24;

    /// The handle's bytes, padding zeroed.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..4].copy_from_slice(&self.qpn.to_le_bytes());
        b[4..6].copy_from_slice(&self.lid.to_le_bytes());
        b[8..16].copy_from_slice(&self.spn.to_le_bytes());
        b[16..24].copy_from_slice(&self.iid.to_le_bytes());
        b
    }

    /// Reads a handle from exactly 24 bytes (padding ignored).
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        QpHandle {
            qpn: u32::from_le_bytes(b[0..4].try_into().expect("4 bytes")),
            lid: u16::from_le_bytes(b[4..6].try_into().expect("2 bytes")),
            spn: u64_at(8),
            iid: u64_at(16),
        }
    }

    /// Splits a buffer of concatenated handles; `None` if its length is not a multiple of 24.
    pub fn decode_all(bytes: &[u8]) -> Option<Vec<QpHandle>> {
        if !bytes.len().is_multiple_of(Self::SIZE) {
            return None;
        }
        Some(bytes.chunks_exact(Self::SIZE).map(|c| QpHandle::from_bytes(c.try_into().expect("chunk of 24"))).collect())
    }

    /// The 16-byte GID as it goes on the wire of RoCE (spn then iid, each host order as copied).
    pub fn gid(&self) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[..8].copy_from_slice(&self.spn.to_le_bytes());
        g[8..].copy_from_slice(&self.iid.to_le_bytes());
        g
    }

    /// True when the GID is all zeros: RTR with it fails on RoCE (EINVAL, or "Unable to create ah").
    pub fn gid_is_zero(&self) -> bool {
        self.spn == 0 && self.iid == 0
    }
}

/// A GID as every output prints it: IPv6 text (RFC 5952), so `::ffff:10.0.0.2` for RoCE v2's
/// IPv4-mapped GIDs, `fe80::...` for link-local ones and `::` for a zero GID.
pub struct GidDisplay<'a>(pub &'a [u8; 16]);

impl fmt::Display for GidDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Ipv6Addr::from(*self.0))
    }
}

impl fmt::Display for QpHandle {
    /// `QPN 0x404500 GID ::ffff:10.0.0.2`, or `QPN 0x1 and a zero GID`: how findings and
    /// explanations name a received or expected handle.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.gid_is_zero() {
            write!(f, "QPN {:#x} and a zero GID", self.qpn)
        } else {
            write!(f, "QPN {:#x} GID {}", self.qpn, GidDisplay(&self.gid()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gids_print_as_ipv6_text() {
        let mut g = [0u8; 16];
        assert_eq!(GidDisplay(&g).to_string(), "::");
        g[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 2]);
        assert_eq!(GidDisplay(&g).to_string(), "::ffff:10.0.0.2");
        let h = QpHandle { qpn: 0x404500, lid: 0, spn: 0, iid: u64::from_le_bytes(g[8..].try_into().unwrap()) };
        assert_eq!(h.to_string(), "QPN 0x404500 GID ::ffff:10.0.0.2");
        assert_eq!(QpHandle { qpn: 1, ..QpHandle::default() }.to_string(), "QPN 0x1 and a zero GID");
    }

    #[test]
    fn layout_matches_nvshmem() {
        let h = QpHandle { qpn: 0x0102_0304, lid: 0x0506, spn: 0x1112_1314_1516_1718, iid: 0x2122_2324_2526_2728 };
        let b = h.to_bytes();
        assert_eq!(&b[0..4], &[4, 3, 2, 1]);
        assert_eq!(&b[4..8], &[6, 5, 0, 0]);
        assert_eq!(b[8], 0x18);
        assert_eq!(b[23], 0x21);
        assert_eq!(QpHandle::from_bytes(&b), h);
        assert_eq!(QpHandle::decode_all(&[b, b].concat()).unwrap(), vec![h, h]);
        assert!(QpHandle::decode_all(&b[..20]).is_none());
    }
}
