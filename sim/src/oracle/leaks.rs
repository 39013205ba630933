//! Leaks: a rank that ended holds no connection in its unexpected list (a message nobody will
//! take). A hung rank's list is part of its hang finding instead.

use bootsim_core::RankRecord;

use super::Finding;

/// Whether `rank` ended with unexpected connections.
pub(super) fn check(rank: &RankRecord) -> Option<Finding> {
    (rank.unfinished.is_none() && !rank.unexpected.is_empty())
        .then(|| Finding::Leak { rank: rank.rank, entries: rank.unexpected.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_rank_with_unexpected_connections_leaks_a_hung_one_does_not() {
        let ended = RankRecord { rank: 4, unexpected: vec![(1, 2), (0, 7)], ..Default::default() };
        assert_eq!(
            check(&ended).unwrap().to_string(),
            "leak: rank 4 ends with unexpected connections from rank 1 tag 0x2, rank 0 tag 0x7"
        );
        let hung = RankRecord { unfinished: Some("x".into()), ..ended };
        assert_eq!(check(&hung), None);
        assert_eq!(check(&RankRecord::default()), None);
    }
}
