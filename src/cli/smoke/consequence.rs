//! Causes and consequences of a plugin session's failure. NVSHMEM has no timeouts, so bootsim
//! stops a rank that makes no progress; the ranks that fail after that stop (a peer reset
//! under them, or still blocked on the stopped one) fail because of bootsim's stop, not on
//! their own. They are consequences: shown, but not counted in the verdict, and the summary
//! names the first cause (the rank stopped first, and who held its listener).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Instant;

use bootsim_adapters::plugin::Held;
use bootsim_core::{RankRecord, RecordedError};
use bootsim_nvshmem::UniqueId;

/// How one rank ended, as far as causes go.
#[derive(Clone, Debug)]
pub(crate) struct Ending {
    /// The rank.
    pub rank: u32,
    /// Whether it failed at all.
    pub failed: bool,
    /// When it ended.
    pub ended: Instant,
    /// When it was stopped for making no progress (stuck on its own).
    pub stuck_at: Option<Instant>,
}

/// The ranks whose failure followed bootsim's first stop of a stuck rank, each with the rank
/// stopped: a rank stuck on its own is never one, nor a rank that failed before the stop.
pub(crate) fn consequences(ends: &[Ending]) -> BTreeMap<u32, u32> {
    let Some(first) = ends.iter().filter_map(|e| Some((e.stuck_at?, e.rank))).min() else {
        return BTreeMap::new();
    };
    ends.iter().filter(|e| e.failed && e.stuck_at.is_none() && e.ended > first.0).map(|e| (e.rank, first.1)).collect()
}

/// The words a consequence's line carries.
pub(crate) fn consequence_text(stopped: u32) -> String {
    format!(" (a consequence: after bootsim stopped rank {stopped})")
}

/// `first cause: rank R made no progress ...` for the first stuck rank (by the time it was
/// stopped, then rank), naming the silent connection it held, if any; else the first failed
/// rank's finding. `finding` gives a rank's findings as text.
pub(crate) fn first_cause(
    ends: &[Ending],
    held: &dyn Fn(u32) -> Vec<Held>,
    finding: &dyn Fn(u32) -> Option<String>,
) -> Option<String> {
    let gone = consequences(ends);
    let mut causes: Vec<&Ending> = ends.iter().filter(|e| e.failed && !gone.contains_key(&e.rank)).collect();
    causes.sort_by_key(|e| (e.stuck_at.is_none(), e.stuck_at, e.rank));
    let first = causes.first()?;
    let mut text = match (first.stuck_at, held_silent(&held(first.rank))) {
        (Some(_), Some(h)) => format!("first cause: rank {} made no progress: {h}", first.rank),
        (Some(_), None) => format!("first cause: rank {} made no progress and was stopped by bootsim", first.rank),
        (None, _) => format!("first cause: rank {} failed: {}", first.rank, finding(first.rank).unwrap_or_default()),
    };
    if !gone.is_empty() {
        let list: Vec<String> = gone.keys().map(|r| format!("rank {r}")).collect();
        text.push_str(&format!(" ({} failed after bootsim stopped rank {})", list.join(", "), first.rank));
    }
    Some(text)
}

/// `its listener A held a silent connection from B ...` for the connections nothing was read
/// from (at NVSHMEM's root: the one it was blocked on, waiting for a check-in).
pub(crate) fn held_silent(held: &[Held]) -> Option<String> {
    let silent: Vec<String> =
        held.iter().filter(|h| h.unread == 0).map(|h| format!("{} from {}", h.local, h.remote)).collect();
    (!silent.is_empty()).then(|| {
        format!(
            "its listener held a connection that sent nothing: {} (NVSHMEM's root serves one connection at a time and \
             waits for it with no timeout)",
            silent.join(", ")
        )
    })
}

/// The root's address in the unique-ID file at `uid` (what a non-root rank dialled).
pub(crate) fn root_addr(uid: &Path) -> Option<SocketAddr> {
    let bytes: [u8; UniqueId::LEN] = std::fs::read(uid).ok()?.try_into().ok()?;
    UniqueId::decode(&bytes).ok().map(|u| u.root)
}

/// Marks `record`'s failure as the loss of the root at `root` (rank 0's): the rank gave up
/// because of it.
pub(crate) fn lost_the_root(record: &mut RankRecord, root: SocketAddr) {
    let words = format!("; it gave up: it lost rank 0 (the root at {root})");
    let failure = record.init.as_mut().or_else(|| record.ops.iter_mut().rev().find_map(|o| o.as_mut().err()));
    if let Some(e) = failure {
        *e = std::mem::replace(e, RecordedError::Text(String::new())).map_text(|text| text + &words);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn end(rank: u32, failed: bool, ended: Instant, stuck: bool) -> Ending {
        Ending { rank, failed, ended, stuck_at: stuck.then_some(ended) }
    }

    #[test]
    fn failures_after_bootsims_first_stop_are_its_consequences() {
        let t = Instant::now();
        let ms = |n| t + Duration::from_millis(n);
        // Rank 0 stuck and stopped at 3000 ms; rank 1 reset under it at 3001; rank 2 stuck on
        // its own at 3002; rank 3 failed before the stop.
        let ends = [end(0, true, ms(3000), true), end(1, true, ms(3001), false), end(2, true, ms(3002), true)];
        let mut all = ends.to_vec();
        all.push(end(3, true, ms(10), false));
        assert_eq!(consequences(&all), [(1, 0)].into());
        let held = |r: u32| {
            let h =
                Held { local: "127.0.0.1:5000".parse().unwrap(), remote: "127.0.0.1:6000".parse().unwrap(), unread: 0 };
            if r == 0 {
                vec![h]
            } else {
                Vec::new()
            }
        };
        let text = first_cause(&ends, &held, &|_| None).unwrap();
        assert!(
            text.starts_with(
                "first cause: rank 0 made no progress: its listener held a connection that sent nothing: \
                 127.0.0.1:5000 from 127.0.0.1:6000"
            ),
            "{text}"
        );
        assert!(text.ends_with("(rank 1 failed after bootsim stopped rank 0)"), "{text}");
        // Nothing stopped: no consequences, and the first cause is a failure's finding.
        let ends = [end(0, false, ms(5), false), end(1, true, ms(4), false)];
        assert!(consequences(&ends).is_empty());
        let text = first_cause(&ends, &held, &|r| Some(format!("error {r}"))).unwrap();
        assert_eq!(text, "first cause: rank 1 failed: error 1");
    }

    #[test]
    fn a_rank_that_lost_the_root_says_so() {
        let mut r = RankRecord { rank: 1, init: Some("init: reset".into()), ..Default::default() };
        lost_the_root(&mut r, "127.0.0.1:29500".parse().unwrap());
        assert_eq!(r.init.unwrap().text(), "init: reset; it gave up: it lost rank 0 (the root at 127.0.0.1:29500)");
    }
}
