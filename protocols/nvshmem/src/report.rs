//! How NVSHMEM's typed error is stated in a run record ([`bootsim_core::RunRecord`]): the text
//! the oracle's findings carry, the same in every world.

use crate::error::BootstrapError;

/// A core error as a finding states it: without the leading "rank N: " (the finding names the
/// rank) and with the operation's workload index after its kind ("alltoall #2 recv from ..."),
/// as NVSHMEM's plugin rank reports it. `completion` counts init as 0.
pub fn error_text(rank: u32, completion: usize, e: &BootstrapError) -> String {
    let text = e.to_string();
    let text = text.strip_prefix(&format!("rank {rank}: ")).unwrap_or(&text).to_string();
    // Init: no index.
    let Some(index) = u32::try_from(completion).ok().and_then(|c| bootsim_core::OpId(c).workload_index()) else {
        return text;
    };
    for kind in ["allgather", "alltoall", "barrier"] {
        if let Some(rest) = text.strip_prefix(kind) {
            return format!("{kind} #{index}{rest}");
        }
    }
    text
}
