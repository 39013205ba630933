//! The first cause of a failed `--local` run: a rank that failed because it lost another names
//! that one ("rank 0 gave up: it lost rank 3"), and the chain is followed to the rank that
//! failed on its own (died, or the first error that blames nobody else).

use std::collections::BTreeMap;

/// The rank a FAIL line of rank `rank` blames: the first other rank its finding names ("the
/// root" is rank 0's: a `--local` rank 0 runs it).
fn blamed(rank: u32, finding: &str) -> Option<u32> {
    let mut words = finding.split(|c: char| !c.is_ascii_alphanumeric()).peekable();
    while let Some(w) = words.next() {
        let k = match (w, words.peek()) {
            ("rank", Some(n)) => n.parse::<u32>().ok(),
            ("the", Some(&"root")) => Some(0),
            _ => None,
        };
        if let Some(k) = k.filter(|&k| k != rank) {
            return Some(k);
        }
    }
    None
}

/// The finding of rank `rank`'s first FAIL line in `out` (`rank R/N iter I: FAIL after X ms: ...`).
pub(super) fn finding(rank: u32, out: &str) -> Option<String> {
    let head = format!("rank {rank}/");
    let line = out.lines().find(|l| l.starts_with(&head) && l.contains(": FAIL after "))?;
    Some(line.split_once(" ms: ").map_or(line, |(_, e)| e).to_string())
}

/// One sentence naming the first cause and who gave up because of whom, from each failed
/// rank's finding and the ranks that died (`dead`: rank, how); `None` if nothing failed.
pub(super) fn first_cause(findings: &BTreeMap<u32, String>, dead: &BTreeMap<u32, String>) -> Option<String> {
    let lost: BTreeMap<u32, u32> = findings
        .iter()
        .filter(|(r, _)| !dead.contains_key(r))
        .filter_map(|(r, f)| Some((*r, blamed(*r, f)?)))
        .collect();
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
        let text = first_cause(&findings, &dead).unwrap();
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
        let text = first_cause(&findings, &BTreeMap::new()).unwrap();
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
        let text = first_cause(&findings, &dead).unwrap();
        assert_eq!(
            text,
            "first cause: rank 2 died of signal 9 (rank 0 gave up: it lost rank 2, rank 1 gave up: it lost rank 0)"
        );
    }
}
