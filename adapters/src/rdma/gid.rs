//! GID selection from a port's GID table, given as plain data.
//!
//! On RoCE the GID is the only address a QP has (`lid` is 0), and the table of a ConnectX port
//! holds, per IP address of its netdev, one RoCE v1 and one RoCE v2 entry (plus the link-local
//! `fe80::` pair). NVSHMEM picks a RoCE v2 entry (`NVSHMEM_IB_GID_INDEX` overrides); so do we:
//!
//! 1. an explicit `--gid-index` wins, if the table has a non-zero entry with that index;
//! 2. otherwise the lowest-index RoCE v2 entry whose GID is IPv4-mapped (`::ffff:a.b.c.d`);
//! 3. otherwise the lowest-index RoCE v2 entry;
//! 4. otherwise (native InfiniBand, where every entry has type IB) the lowest-index IB entry.
//!
//! RoCE v1 entries are never chosen automatically, and an all-zero GID is never chosen at all
//! (an RTR with a zero destination GID is exactly the EINVAL the NVSHMEM bug produces).

use std::fmt;

/// The type of a GID table entry (`enum ibv_gid_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GidType {
    /// `IBV_GID_TYPE_IB` (0): native InfiniBand.
    Ib,
    /// `IBV_GID_TYPE_ROCE_V1` (1): RoCE over raw Ethernet (ethertype 0x8915).
    RoceV1,
    /// `IBV_GID_TYPE_ROCE_V2` (2): RoCE over UDP/IP (port 4791), what ConnectX-7 fabrics use.
    RoceV2,
}

impl GidType {
    /// Maps the numeric `ibv_gid_type`; `None` for values this crate does not know.
    pub fn from_raw(raw: u32) -> Option<GidType> {
        match raw {
            0 => Some(GidType::Ib),
            1 => Some(GidType::RoceV1),
            2 => Some(GidType::RoceV2),
            _ => None,
        }
    }
}

impl fmt::Display for GidType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GidType::Ib => "IB",
            GidType::RoceV1 => "RoCE v1",
            GidType::RoceV2 => "RoCE v2",
        })
    }
}

/// One entry of a port's GID table (`struct ibv_gid_entry` without the port number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GidEntry {
    /// The entry's index in the port's GID table (what `ah_attr.grh.sgid_index` takes).
    pub index: u32,
    /// The GID, in wire (network) byte order.
    pub gid: [u8; 16],
    /// The entry's type.
    pub gid_type: GidType,
    /// Interface index of the netdev the entry belongs to; 0 if none.
    pub ndev_ifindex: u32,
}

impl GidEntry {
    /// True when the GID is all zeros.
    pub fn is_zero(&self) -> bool {
        gid_is_zero(&self.gid)
    }

    /// True when the GID is an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`).
    pub fn is_ipv4_mapped(&self) -> bool {
        gid_ipv4(&self.gid).is_some()
    }
}

impl fmt::Display for GidEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {} {}", self.index, self.gid_type, GidDisplay(&self.gid))?;
        if self.ndev_ifindex != 0 {
            write!(f, " (ifindex {})", self.ndev_ifindex)?;
        }
        Ok(())
    }
}

/// True when all 16 bytes are zero.
pub fn gid_is_zero(gid: &[u8; 16]) -> bool {
    gid.iter().all(|&b| b == 0)
}

/// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`), if it is one.
pub fn gid_ipv4(gid: &[u8; 16]) -> Option<[u8; 4]> {
    if gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff {
        Some([gid[12], gid[13], gid[14], gid[15]])
    } else {
        None
    }
}

use bootsim_nvshmem::GidDisplay;

/// Why no GID could be selected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GidError {
    /// `--gid-index` names an index the table does not have.
    #[error("--gid-index {index} is not in the GID table ({})", describe_table(.table))]
    IndexNotInTable {
        /// The requested index.
        index: u32,
        /// The indices the table does have, ascending.
        table: Vec<u32>,
    },
    /// `--gid-index` names an entry whose GID is all zeros.
    #[error("--gid-index {index} names an all-zero GID (GID table has {table_size} entries)")]
    ZeroGid {
        /// The requested index.
        index: u32,
        /// Number of entries in the table.
        table_size: usize,
    },
    /// No entry qualifies for automatic selection.
    #[error(
        "no usable GID: none of the {table_size} GID table entries is a non-zero RoCE v2 or IB \
         GID; pass --gid-index"
    )]
    NoUsableGid {
        /// Number of entries in the table.
        table_size: usize,
    },
    /// The entry exists, but ibverbs 0.9.2 cannot address it: its `set_gid_index` and
    /// `endpoint` treat the index as a position in the table of *valid* entries (and assert
    /// that both agree), so a sparse table would make them panic.
    #[error(
        "GID index {index} sits at position {position} of a sparse GID table, which ibverbs \
         0.9.2 cannot address (it assumes index == position)"
    )]
    SparseTable {
        /// The selected index.
        index: u32,
        /// Where the entry actually sits in the table of valid entries.
        position: usize,
    },
}

fn describe_table(indices: &[u32]) -> String {
    match indices {
        [] => "the table is empty".to_string(),
        [only] => format!("1 entry: index {only}"),
        _ => {
            let contiguous = indices.windows(2).all(|w| w[1] == w[0] + 1);
            if contiguous {
                format!("{} entries: indices {}..={}", indices.len(), indices[0], indices[indices.len() - 1])
            } else {
                let list: Vec<String> = indices.iter().map(u32::to_string).collect();
                format!("{} entries: indices {}", indices.len(), list.join(", "))
            }
        }
    }
}

/// How [`select_gid`] picked its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GidReason {
    /// Explicit `--gid-index`.
    Override,
    /// RoCE v2, IPv4-mapped.
    RoceV2Ipv4,
    /// RoCE v2, not IPv4-mapped (an IPv6 address, or link-local).
    RoceV2,
    /// Native InfiniBand.
    Ib,
}

impl fmt::Display for GidReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GidReason::Override => "--gid-index",
            GidReason::RoceV2Ipv4 => "RoCE v2, IPv4-mapped",
            GidReason::RoceV2 => "RoCE v2",
            GidReason::Ib => "IB",
        })
    }
}

/// A selected GID table entry and why it was selected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GidChoice {
    /// The entry.
    pub entry: GidEntry,
    /// Why.
    pub reason: GidReason,
}

/// Picks the local GID: see the module documentation for the order of preference.
///
/// `table` is the port's GID table in any order; indices are matched by value, not position.
pub fn select_gid(table: &[GidEntry], override_index: Option<u32>) -> Result<GidChoice, GidError> {
    if let Some(index) = override_index {
        let entry = table.iter().find(|e| e.index == index).ok_or_else(|| {
            let mut indices: Vec<u32> = table.iter().map(|e| e.index).collect();
            indices.sort_unstable();
            indices.dedup();
            GidError::IndexNotInTable { index, table: indices }
        })?;
        if entry.is_zero() {
            return Err(GidError::ZeroGid { index, table_size: table.len() });
        }
        return Ok(GidChoice { entry: *entry, reason: GidReason::Override });
    }

    // Each tier: the lowest-index non-zero entry that qualifies.
    let qualifies = |reason: GidReason, e: &GidEntry| match reason {
        GidReason::RoceV2Ipv4 => e.gid_type == GidType::RoceV2 && e.is_ipv4_mapped(),
        GidReason::RoceV2 => e.gid_type == GidType::RoceV2,
        GidReason::Ib => e.gid_type == GidType::Ib,
        GidReason::Override => false,
    };
    for reason in [GidReason::RoceV2Ipv4, GidReason::RoceV2, GidReason::Ib] {
        let best = table.iter().filter(|e| !e.is_zero() && qualifies(reason, e)).min_by_key(|e| e.index);
        if let Some(entry) = best {
            return Ok(GidChoice { entry: *entry, reason });
        }
    }
    Err(GidError::NoUsableGid { table_size: table.len() })
}

/// Checks that `index` can be handed to ibverbs 0.9.2's `QueuePairBuilder::set_gid_index`,
/// which asserts `index < table.len()` and later indexes the table by position (asserting
/// that the entry there has that index). `table_indices` are the `gid_index` values of the
/// valid entries in the order ibverbs returns them.
pub fn ibverbs_addressable(table_indices: &[u32], index: u32) -> Result<(), GidError> {
    match table_indices.iter().position(|&i| i == index) {
        Some(position) if position == index as usize => Ok(()),
        Some(position) => Err(GidError::SparseTable { index, position }),
        None => {
            let mut indices = table_indices.to_vec();
            indices.sort_unstable();
            indices.dedup();
            Err(GidError::IndexNotInTable { index, table: indices })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: u8, b: u8, c: u8, d: u8) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&[a, b, c, d]);
        g
    }

    fn link_local() -> [u8; 16] {
        let mut g = [0u8; 16];
        g[0] = 0xfe;
        g[1] = 0x80;
        g[8..].copy_from_slice(&[0x02, 0x42, 0xac, 0xff, 0xfe, 0x11, 0x00, 0x02]);
        g
    }

    fn ipv6() -> [u8; 16] {
        let mut g = [0u8; 16];
        g[0] = 0x20;
        g[1] = 0x01;
        g[2] = 0x0d;
        g[3] = 0xb8;
        g[15] = 7;
        g
    }

    fn e(index: u32, gid: [u8; 16], gid_type: GidType) -> GidEntry {
        GidEntry { index, gid, gid_type, ndev_ifindex: 3 }
    }

    /// A typical ConnectX RoCE table: link-local v1/v2, then IPv4 v1/v2, then IPv6 v1/v2.
    fn cx_table() -> Vec<GidEntry> {
        vec![
            e(0, link_local(), GidType::RoceV1),
            e(1, link_local(), GidType::RoceV2),
            e(2, v4(10, 0, 0, 1), GidType::RoceV1),
            e(3, v4(10, 0, 0, 1), GidType::RoceV2),
            e(4, ipv6(), GidType::RoceV1),
            e(5, ipv6(), GidType::RoceV2),
        ]
    }

    #[test]
    fn prefers_roce_v2_ipv4_mapped() {
        let c = select_gid(&cx_table(), None).unwrap();
        assert_eq!(c.entry.index, 3);
        assert_eq!(c.reason, GidReason::RoceV2Ipv4);
        // Order of the table does not matter.
        let mut rev = cx_table();
        rev.reverse();
        assert_eq!(select_gid(&rev, None).unwrap().entry.index, 3);
    }

    #[test]
    fn falls_back_to_any_roce_v2() {
        let table: Vec<_> = cx_table().into_iter().filter(|e| !e.is_ipv4_mapped()).collect();
        let c = select_gid(&table, None).unwrap();
        assert_eq!((c.entry.index, c.reason), (1, GidReason::RoceV2));
    }

    #[test]
    fn lowest_index_wins_among_equals() {
        let table = vec![e(7, v4(10, 0, 0, 9), GidType::RoceV2), e(5, v4(10, 0, 0, 8), GidType::RoceV2)];
        assert_eq!(select_gid(&table, None).unwrap().entry.index, 5);
    }

    #[test]
    fn native_ib_falls_back_to_ib_entry() {
        let table = vec![e(0, link_local(), GidType::Ib)];
        let c = select_gid(&table, None).unwrap();
        assert_eq!((c.entry.index, c.reason), (0, GidReason::Ib));
    }

    #[test]
    fn roce_v1_only_is_not_chosen() {
        let table = vec![e(0, link_local(), GidType::RoceV1), e(1, v4(1, 2, 3, 4), GidType::RoceV1)];
        let err = select_gid(&table, None).unwrap_err();
        assert_eq!(err, GidError::NoUsableGid { table_size: 2 });
        assert!(err.to_string().contains("pass --gid-index"), "{err}");
        // ...but an explicit override may pick one.
        assert_eq!(select_gid(&table, Some(1)).unwrap().entry.index, 1);
    }

    #[test]
    fn zero_gids_are_never_chosen() {
        let table = vec![
            e(0, [0; 16], GidType::RoceV2),
            e(1, [0; 16], GidType::RoceV2),
            e(2, v4(10, 1, 1, 1), GidType::RoceV1),
            e(3, ipv6(), GidType::RoceV2),
        ];
        assert_eq!(select_gid(&table, None).unwrap().entry.index, 3);

        let only_zero = vec![e(0, [0; 16], GidType::RoceV2), e(1, [0; 16], GidType::Ib)];
        assert_eq!(select_gid(&only_zero, None).unwrap_err(), GidError::NoUsableGid { table_size: 2 });
        let err = select_gid(&only_zero, Some(1)).unwrap_err();
        assert_eq!(err, GidError::ZeroGid { index: 1, table_size: 2 });
        assert_eq!(err.to_string(), "--gid-index 1 names an all-zero GID (GID table has 2 entries)");
    }

    #[test]
    fn override_is_validated_against_the_table() {
        let c = select_gid(&cx_table(), Some(5)).unwrap();
        assert_eq!((c.entry.index, c.reason), (5, GidReason::Override));

        let err = select_gid(&cx_table(), Some(9)).unwrap_err();
        assert_eq!(err.to_string(), "--gid-index 9 is not in the GID table (6 entries: indices 0..=5)");
        let sparse = vec![e(0, link_local(), GidType::RoceV2), e(4, ipv6(), GidType::RoceV2)];
        assert_eq!(
            select_gid(&sparse, Some(2)).unwrap_err().to_string(),
            "--gid-index 2 is not in the GID table (2 entries: indices 0, 4)"
        );
        assert_eq!(
            select_gid(&[], Some(0)).unwrap_err().to_string(),
            "--gid-index 0 is not in the GID table (the table is empty)"
        );
        assert_eq!(
            select_gid(&sparse[..1], Some(3)).unwrap_err().to_string(),
            "--gid-index 3 is not in the GID table (1 entry: index 0)"
        );
    }

    #[test]
    fn ibverbs_needs_index_equal_position() {
        let table: Vec<u32> = cx_table().iter().map(|e| e.index).collect();
        for i in 0..6 {
            assert_eq!(ibverbs_addressable(&table, i), Ok(()));
        }
        let sparse = [0, 4];
        assert_eq!(ibverbs_addressable(&sparse, 4), Err(GidError::SparseTable { index: 4, position: 1 }));
        assert!(matches!(ibverbs_addressable(&sparse, 2), Err(GidError::IndexNotInTable { index: 2, .. })));
    }

    #[test]
    fn display() {
        let g = v4(192, 168, 1, 20);
        assert_eq!(GidDisplay(&g).to_string(), "::ffff:192.168.1.20");
        assert_eq!(e(3, g, GidType::RoceV2).to_string(), "[3] RoCE v2 ::ffff:192.168.1.20 (ifindex 3)");
        assert_eq!(GidDisplay(&link_local()).to_string(), "fe80::242:acff:fe11:2");
        assert_eq!(GidType::from_raw(2), Some(GidType::RoceV2));
        assert_eq!(GidType::from_raw(3), None);
    }
}
