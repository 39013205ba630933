//! Liveness: every participant ends. A rank or root still waiting when the run stopped hangs
//! (what it waited for, and the unexpected list that might hold what it wants); a rank that
//! ended without an error before its last operation stopped silently.

use bootsim_core::{RankRecord, RootEnd};

use super::Finding;

/// Whether `rank` hung, or ended early without an error, in a workload of `ops` operations.
pub(super) fn rank(rank: &RankRecord, ops: usize) -> Option<Finding> {
    let r = rank.rank;
    if let Some(waiting) = &rank.unfinished {
        return Some(Finding::Hang {
            who: format!("rank {r}"),
            waiting: waiting.clone(),
            unexpected: rank.unexpected.clone(),
        });
    }
    let failed = rank.init.is_some() || rank.ops.iter().any(Result::is_err);
    (!failed && rank.ops.len() < ops).then(|| Finding::Error {
        rank: Some(r),
        error: format!("ended after {} of {} operations without an error", rank.ops.len(), ops),
    })
}

/// Whether the root hung.
pub(super) fn root(root: &RootEnd) -> Option<Finding> {
    match root {
        RootEnd::Waiting(waiting) => {
            Some(Finding::Hang { who: "the root".into(), waiting: waiting.clone(), unexpected: Vec::new() })
        }
        _ => None,
    }
}
