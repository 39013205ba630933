//! Verbs: what hardware would do with a wrong QP handle a rank received, so a finding says
//! whether the run would fail loudly (EINVAL), cross-wire two QPs, or never reach RTS. With
//! the handles themselves, it is NVSHMEM's [`WrongItem`] in a corruption finding.

use std::fmt;

use bootsim_nvshmem::QpHandle;

use crate::oracle::WrongItem;
use bootsim_nvshmem::workload::{qp_handle, OpSpec};

/// What `ibv_modify_qp` to RTR would do with a received handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verbs {
    /// The handle's QPN or GID is zero: the call fails.
    Einval { rank: u32, qpn_zero: bool, gid_zero: bool },
    /// The handle is another pair's: `owner`'s QP `qp` meant for `meant_for` (of alltoall #`op`).
    CrossWired { rank: u32, owner: u32, qp: u32, meant_for: u32, op: usize },
    /// No peer created the QP.
    NeverRts { rank: u32, qpn: u32 },
}

impl fmt::Display for Verbs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Verbs::Einval { rank, qpn_zero, gid_zero } => {
                let what = match (qpn_zero, gid_zero) {
                    (true, true) => "QPN 0x0 and a zero GID",
                    (true, false) => "QPN 0x0",
                    _ => "a zero GID",
                };
                write!(f, "rank {rank} would call ibv_modify_qp(RTR) with {what}: EINVAL")
            }
            Verbs::CrossWired { rank, owner, qp, meant_for, op } => write!(
                f,
                "cross-wired QP: rank {rank} would connect to rank {owner}'s QP {qp} meant for rank {meant_for} (alltoall #{op})"
            ),
            Verbs::NeverRts { rank, qpn } => {
                write!(f, "rank {rank} would connect to QPN {qpn:#x}, which no peer created: the QP never reaches RTS")
            }
        }
    }
}

/// What `ibv_modify_qp` to RTR would do with a received handle on a RoCE NIC, for rank `r` of a
/// run of `specs` over `n` ranks with payload seed `seed`.
pub(super) fn check(specs: &[OpSpec], seed: u64, n: u32, r: u32, got: &QpHandle) -> Verbs {
    if got.qpn == 0 || got.gid_is_zero() {
        return Verbs::Einval { rank: r, qpn_zero: got.qpn == 0, gid_zero: got.gid_is_zero() };
    }
    let alltoalls = specs.iter().enumerate().filter(|(_, o)| matches!(o, OpSpec::Alltoall(_)));
    for (i, spec) in alltoalls {
        let OpSpec::Alltoall(len) = spec else { continue };
        let qps = (*len / QpHandle::SIZE) as u32;
        for p in 0..n {
            for q in 0..n {
                if p != r && q != r {
                    continue;
                }
                for k in 0..qps {
                    if qp_handle(seed ^ (i as u64) << 48, p, q, k) == *got {
                        return Verbs::CrossWired { rank: r, owner: p, qp: k, meant_for: q, op: i };
                    }
                }
            }
        }
    }
    Verbs::NeverRts { rank: r, qpn: got.qpn }
}

/// NVSHMEM's account of a wrong chunk: in an alltoall of QP handles, the first handle that
/// differs, with what the verbs layer would do with it (None for other chunks). Its `--json`
/// fields are `expected_qp`, `received_qp` and `verbs`, null where it names no handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrongQp(pub Option<(QpHandle, QpHandle, Verbs)>);

impl WrongItem for WrongQp {
    fn expected_received(&self) -> Option<(String, String)> {
        self.0.map(|(e, r, _)| (e.to_string(), r.to_string()))
    }

    fn consequence(&self) -> Option<String> {
        self.0.map(|(_, _, v)| v.to_string())
    }

    fn json_fields(&self) -> Vec<(&'static str, Option<String>)> {
        let (e, r) = self.expected_received().unzip();
        vec![("expected_qp", e), ("received_qp", r), ("verbs", self.consequence())]
    }
}
