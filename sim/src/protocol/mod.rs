//! The protocols the engines run, each bound to the seam (`bootsim_core::seam`): how its nodes
//! are built from a case and how its runs are judged and worded; and the one place a report
//! (explain) asks which protocol a case names, for its words.

use bootsim_core::MsgOrigin;

use crate::case::Case;

pub mod nccl;
pub mod nvshmem;

pub use nccl::Nccl;
pub use nvshmem::Nvshmem;

/// A message's step as `case`'s protocol names it in person-facing words (explain): NVSHMEM's
/// operation and step from its origin's type (`barrier #2 round 1`, [`crate::words::step_name`]),
/// NCCL's call and source line from its programs. `rank` sent it to `peer` (`sent`), or its
/// receive from `peer` took it.
pub fn message_name(case: &Case, rank: u32, peer: u32, origin: &MsgOrigin, sent: bool) -> String {
    match case.nccl() {
        Some(nc) => nccl::message_name(nc, case.ranks(), rank, peer, origin, sent),
        None => crate::words::step_name(origin),
    }
}

/// Whether explain tells `case`'s findings worst first rather than in the judge's order: NCCL
/// aborts a rank's init at its first error, so its runs end in many hangs behind that one error.
pub fn worst_first(case: &Case) -> bool {
    case.nccl().is_some()
}

/// The ports by which reports (explain, the timeline) tell the root's connections apart: its
/// check-in listener and the ranks' listeners it dials to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootPorts {
    /// The root's listener ranks check in at.
    pub root: u16,
    /// A rank's listener the root connects to.
    pub from_root: u16,
}

/// [`RootPorts`] of `case`'s protocol; none for a protocol of the user's own (its reports
/// show every connection as rank to rank).
pub fn root_ports(case: &Case) -> Option<RootPorts> {
    match (case.protocol(), case.nccl()) {
        (_, Some(_)) => {
            use bootsim_nccl::Listener;
            Some(RootPorts { root: Listener::Root.port(), from_root: Listener::FromRoot.port() })
        }
        ("nvshmem", None) => {
            use bootsim_nvshmem::ports::{FROM_ROOT_PORT, ROOT_PORT};
            Some(RootPorts { root: ROOT_PORT, from_root: FROM_ROOT_PORT })
        }
        _ => None,
    }
}
