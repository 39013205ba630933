//! Liveness: every participant ends. A rank or root still waiting when the run stopped hangs
//! (what it waited for, and the unexpected list that might hold what it wants); a rank that
//! ended without an error before its last operation stopped silently.

use bootsim_core::{RankRecord, RootEnd};

use super::{Finding, Who};

/// Whether `rank` hung, or ended early without an error, in a workload of `ops` operations.
pub(super) fn rank(rank: &RankRecord, ops: usize) -> Option<Finding> {
    let r = rank.rank;
    if let Some(waiting) = &rank.unfinished {
        return Some(Finding::Hang {
            who: Who::Rank(r),
            waiting: waiting.clone(),
            unexpected: rank.unexpected.clone(),
        });
    }
    let failed = rank.init.is_some() || rank.ops.iter().any(Result::is_err);
    (!failed && rank.ops.len() < ops).then(|| Finding::Error {
        rank: Some(r),
        error: format!("ended after {} of {} operations without an error", rank.ops.len(), ops).into(),
    })
}

/// Whether the root hung.
pub(super) fn root(root: &RootEnd) -> Option<Finding> {
    match root {
        RootEnd::Waiting(waiting) => {
            Some(Finding::Hang { who: Who::Root, waiting: waiting.clone(), unexpected: Vec::new() })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopped_ranks_hang_and_silent_early_ends_are_errors() {
        let hung = RankRecord {
            rank: 1,
            unfinished: Some("recv from rank 0 tag 0x2".into()),
            unexpected: vec![(3, 5)],
            ..Default::default()
        };
        assert_eq!(
            rank(&hung, 2).unwrap().to_string(),
            "hang: rank 1 waits for recv from rank 0 tag 0x2; unexpected list: rank 3 tag 0x5"
        );
        let early = RankRecord { rank: 0, ops: vec![Ok(vec![])], ..Default::default() };
        assert_eq!(
            rank(&early, 2).unwrap().to_string(),
            "error: rank 0: ended after 1 of 2 operations without an error"
        );
        assert_eq!(rank(&early, 1), None);
        let failed = RankRecord { rank: 0, ops: vec![Err("e".into())], ..Default::default() };
        assert_eq!(rank(&failed, 2), None, "its error is the finding");
        assert_eq!(
            root(&RootEnd::Waiting("check-in 3".into())).unwrap().to_string(),
            "hang: the root waits for check-in 3"
        );
        assert_eq!(root(&RootEnd::NotObserved), None);
    }

    #[test]
    fn a_hang_keeps_the_typed_wait_and_shows_only_its_words() {
        use bootsim_core::{Awaited, Blocked, Culprit};
        let wait = Awaited::Protocol {
            op: None,
            peer: Some(Culprit::Rank(7)),
            blocked: Blocked::ConnectToSend,
            text: "send to rank 7 tag 0x8 (connect of local c85)".into(),
        };
        let hung = RankRecord { rank: 3, unfinished: Some(wait.clone()), ..Default::default() };
        let Some(Finding::Hang { waiting, .. }) = rank(&hung, 1) else { panic!() };
        assert_eq!(waiting, wait);
        let json = serde_json::to_value(root(&RootEnd::Waiting(wait)).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "hang", "who": "the root", "waiting": "send to rank 7 tag 0x8 (connect of local c85)", "unexpected": []})
        );
    }
}
