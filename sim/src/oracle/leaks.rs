//! Leaks: a rank that ended holds no connection in its unexpected list (a message nobody will
//! take). A hung rank's list is part of its hang finding instead.

use bootsim_core::RankRecord;

use super::Finding;

/// Whether `rank` ended with unexpected connections.
pub(super) fn check(rank: &RankRecord) -> Option<Finding> {
    (rank.unfinished.is_none() && !rank.unexpected.is_empty())
        .then(|| Finding::Leak { rank: rank.rank, entries: rank.unexpected.clone() })
}
