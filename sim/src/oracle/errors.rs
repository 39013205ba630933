//! Errors: every typed error a rank's init or operation, or the root, ended with is a finding,
//! stated as the record holds it.

use bootsim_core::{RankRecord, RecordedError, RootEnd};

use super::Finding;

/// Init's error of `rank`, if it failed.
pub(super) fn init(rank: &RankRecord) -> Option<Finding> {
    rank.init.as_ref().map(|e| Finding::Error { rank: Some(rank.rank), error: e.clone() })
}

/// An operation's error of rank `rank`.
pub(super) fn op(rank: u32, error: &RecordedError) -> Finding {
    Finding::Error { rank: Some(rank), error: error.clone() }
}

/// The root's error, if it failed.
pub(super) fn root(root: &RootEnd) -> Option<Finding> {
    match root {
        RootEnd::Failed(e) => Some(Finding::Error { rank: None, error: e.clone() }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_is_one_finding_stated_as_recorded() {
        let r = RankRecord { rank: 2, init: Some("init: cannot listen".into()), ..Default::default() };
        assert_eq!(init(&r).unwrap().to_string(), "error: rank 2: init: cannot listen");
        assert_eq!(init(&RankRecord::default()), None);
        assert_eq!(op(r.rank, &"barrier #1 failed".into()).to_string(), "error: rank 2: barrier #1 failed");
        assert_eq!(root(&RootEnd::Failed("root: bad".into())).unwrap().to_string(), "error: root: bad");
        for quiet in [RootEnd::NotObserved, RootEnd::Done, RootEnd::Waiting("x".into())] {
            assert_eq!(root(&quiet), None);
        }
    }

    #[test]
    fn a_typed_error_keeps_its_peer_and_shows_only_its_words() {
        use bootsim_core::Culprit;
        let typed =
            RecordedError::Protocol { op: 3, culprit: Some(Culprit::Rank(1)), text: "barrier #2 failed".into() };
        let r = RankRecord { rank: 2, ops: vec![Ok(vec![]), Err(typed.clone())], ..Default::default() };
        let Finding::Error { error, .. } = op(r.rank, r.ops[1].as_ref().unwrap_err()) else { panic!() };
        assert_eq!((error.culprit(), error.op()), (Some(Culprit::Rank(1)), Some(3)));
        // `--json` (docs/json.md) keeps its keys and the words as `error`, typed or text alike.
        for error in [typed, "barrier #2 failed".into()] {
            let json = serde_json::to_value(Finding::Error { rank: Some(2), error }).unwrap();
            assert_eq!(json, serde_json::json!({"kind": "error", "rank": 2, "error": "barrier #2 failed"}));
        }
    }
}
