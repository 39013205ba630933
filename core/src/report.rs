//! What one rank of a real run reports, the same record whichever implementation ran it
//! (bootsim-core over the async driver, NVSHMEM's own plugin in a process): the input of the
//! real-world oracle (`bootsim_sim::oracle::judge_results`).

use crate::error::BootstrapError;

/// One rank's end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RankReport {
    /// The rank.
    pub rank: u32,
    /// Init's error, if it failed.
    pub init: Option<String>,
    /// The workload's operations that ended, in order: received bytes or the error.
    pub ops: Vec<Result<Vec<u8>, String>>,
    /// Set when the rank was stopped before it ended: what it was waiting in.
    pub unfinished: Option<String>,
}

impl RankReport {
    /// True when init or an operation failed, or the rank was stopped.
    pub fn failed(&self) -> bool {
        self.init.is_some() || self.unfinished.is_some() || self.ops.iter().any(Result::is_err)
    }
}

/// A core error as a finding states it: without the leading "rank N: " (the finding names the
/// rank) and with the operation's workload index after its kind ("alltoall #2 recv from ..."),
/// as NVSHMEM's plugin rank reports it. `completion` counts init as 0.
pub fn error_text(rank: u32, completion: usize, e: &BootstrapError) -> String {
    let text = e.to_string();
    let text = text.strip_prefix(&format!("rank {rank}: ")).unwrap_or(&text).to_string();
    // Init: no index.
    let Some(index) = u32::try_from(completion).ok().and_then(|c| crate::OpId(c).workload_index()) else {
        return text;
    };
    for kind in ["allgather", "alltoall", "barrier"] {
        if let Some(rest) = text.strip_prefix(kind) {
            return format!("{kind} #{index}{rest}");
        }
    }
    text
}
