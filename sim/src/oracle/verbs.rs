//! Verbs: what hardware would do with a wrong QP handle a rank received, so a finding says
//! whether the run would fail loudly (EINVAL), cross-wire two QPs, or never reach RTS.

use bootsim_nvshmem::QpHandle;

use bootsim_nvshmem::workload::{qp_handle, OpSpec};

/// What `ibv_modify_qp` to RTR would do with a received handle on a RoCE NIC, for rank `r` of a
/// run of `specs` over `n` ranks with payload seed `seed`.
pub(super) fn check(specs: &[OpSpec], seed: u64, n: u32, r: u32, got: &QpHandle) -> String {
    if got.qpn == 0 || got.gid_is_zero() {
        let what = match (got.qpn == 0, got.gid_is_zero()) {
            (true, true) => "QPN 0x0 and a zero GID",
            (true, false) => "QPN 0x0",
            _ => "a zero GID",
        };
        return format!("rank {r} would call ibv_modify_qp(RTR) with {what}: EINVAL");
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
                        return format!(
                            "cross-wired QP: rank {r} would connect to rank {p}'s QP {k} meant for rank {q} (alltoall #{i})"
                        );
                    }
                }
            }
        }
    }
    format!("rank {r} would connect to QPN {:#x}, which no peer created: the QP never reaches RTS", got.qpn)
}
