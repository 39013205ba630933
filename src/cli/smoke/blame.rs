//! The first cause of a failed `--local` run: a rank that failed because it lost another names
//! that one ("rank 0 gave up: it lost rank 3"), and the chain is followed to the rank that
//! failed on its own (died, or the first error that blames nobody else).

use std::collections::BTreeMap;

/// The line a `--local` rank process writes on stderr beside a FAIL line: the rank whose loss
/// made it fail, typed where the error was made (`DriverError::culprit`), not read back out of
/// the finding's words. The parent takes these lines out of what it shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct BlameLine {
    /// The rank that failed.
    pub rank: u32,
    /// The rank it lost.
    pub lost: u32,
}

/// How a [`BlameLine`] starts on stderr.
const PREFIX: &str = "bootsim-blame: ";

impl BlameLine {
    /// The stderr line.
    pub(super) fn line(&self) -> String {
        format!("{PREFIX}{}", serde_json::to_string(self).unwrap_or_default())
    }

    /// The blame `line` holds, if it is one.
    pub(super) fn parse(line: &str) -> Option<BlameLine> {
        serde_json::from_str(line.strip_prefix(PREFIX)?).ok()
    }
}

/// The finding of rank `rank`'s first FAIL line in `out` (`rank R/N iter I: FAIL after X ms: ...`).
pub(super) fn finding(rank: u32, out: &str) -> Option<String> {
    let head = format!("rank {rank}/");
    let line = out.lines().find(|l| l.starts_with(&head) && l.contains(": FAIL after "))?;
    Some(line.split_once(" ms: ").map_or(line, |(_, e)| e).to_string())
}

/// One sentence naming the first cause and who gave up because of whom, from each failed
/// rank's finding, the rank each lost (`lost`: rank, the one it lost) and the ranks that died
/// (`dead`: rank, how); `None` if nothing failed.
pub(super) fn first_cause(
    findings: &BTreeMap<u32, String>,
    lost: &BTreeMap<u32, u32>,
    dead: &BTreeMap<u32, String>,
) -> Option<String> {
    let lost: BTreeMap<u32, u32> =
        lost.iter().filter(|(r, k)| !dead.contains_key(r) && r != k).map(|(r, k)| (*r, *k)).collect();
    // Follow each rank's chain to its end (a rank that blames nobody, a dead one, or a loop).
    let root_of = |mut r: u32| {
        let mut seen = vec![r];
        while let Some(&k) = lost.get(&r) {
            if seen.contains(&k) {
                break;
            }
            seen.push(k);
            r = k;
        }
        r
    };
    let mut causes: Vec<u32> = findings.keys().chain(dead.keys()).map(|&r| root_of(r)).collect();
    causes.sort_unstable();
    causes.dedup();
    let first: Vec<String> = causes
        .iter()
        .map(|r| match (dead.get(r), findings.get(r)) {
            (Some(how), _) => format!("rank {r} {how}"),
            (None, Some(f)) => format!("rank {r} failed: {f}"),
            (None, None) => format!("rank {r}"),
        })
        .collect();
    if first.is_empty() {
        return None;
    }
    let gave_up: Vec<String> = lost
        .iter()
        .filter(|(r, _)| !causes.contains(r))
        .map(|(r, k)| format!("rank {r} gave up: it lost rank {k}"))
        .collect();
    let mut text = format!("first cause: {}", first.join("; "));
    if !gave_up.is_empty() {
        text.push_str(&format!(" ({})", gave_up.join(", ")));
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_is_followed_to_the_rank_that_died() {
        let findings: BTreeMap<u32, String> = [
            (0, "error: rank 0: barrier: rank 3 closed the connection after 0 of 4 bytes of a frame".to_string()),
            (1, "hang: rank 1 waits for barrier #2: recv from rank 0 tag 0x2".to_string()),
            (3, "error: rank 3: barrier: rank 2 closed the connection after 0 of 4 bytes".to_string()),
        ]
        .into();
        let dead: BTreeMap<u32, String> = [(2, "died of signal 9".to_string())].into();
        let lost: BTreeMap<u32, u32> = [(0, 3), (1, 0), (3, 2)].into();
        let text = first_cause(&findings, &lost, &dead).unwrap();
        assert_eq!(
            text,
            "first cause: rank 2 died of signal 9 (rank 0 gave up: it lost rank 3, rank 1 gave up: it lost rank 0, \
             rank 3 gave up: it lost rank 2)"
        );
    }

    #[test]
    fn a_rank_that_blames_nobody_is_the_cause() {
        let findings: BTreeMap<u32, String> = [
            (1, "error: rank 1: init: malformed data from rank 1".to_string()),
            (2, "hang: rank 2 waits for init: connecting the ring".to_string()),
        ]
        .into();
        // Rank 2 waits in init and names nobody: no blame line came for it.
        let text = first_cause(&findings, &BTreeMap::new(), &BTreeMap::new()).unwrap();
        assert!(text.starts_with("first cause: rank 1 failed: error: rank 1: init: malformed"), "{text}");
        assert!(text.contains("; rank 2 failed"), "{text}");
    }

    #[test]
    fn waiting_for_the_root_is_losing_rank_0() {
        let findings: BTreeMap<u32, String> = [
            (0, "hang: rank 0 waits for init; the root waits for check-in 3 of 4; not yet checked in: rank 2".into()),
            (1, "hang: rank 1 waits for init: waiting for the root to send the ring successor".to_string()),
        ]
        .into();
        let dead: BTreeMap<u32, String> = [(2, "died of signal 9".to_string())].into();
        let lost: BTreeMap<u32, u32> = [(0, 2), (1, 0)].into();
        let text = first_cause(&findings, &lost, &dead).unwrap();
        assert_eq!(
            text,
            "first cause: rank 2 died of signal 9 (rank 0 gave up: it lost rank 2, rank 1 gave up: it lost rank 0)"
        );
    }

    #[test]
    fn a_blame_line_round_trips_and_other_lines_are_not_one() {
        let b = BlameLine { rank: 1, lost: 0 };
        assert_eq!(BlameLine::parse(&b.line()), Some(b));
        assert_eq!(BlameLine::parse("rank 1 lost rank 0"), None);
        assert_eq!(BlameLine::parse("bootsim-blame: garbage"), None);
    }
}
