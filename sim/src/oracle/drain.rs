//! Drains: each drain before close that gave up at its deadline is named. It is no failure by
//! itself (fail-open), but from then on message order is no longer guaranteed.

use bootsim_core::DrainGiveUp;

use super::Finding;

/// One finding per drain that gave up, in order.
pub(super) fn check(gave_up: &[DrainGiveUp]) -> Vec<Finding> {
    gave_up
        .iter()
        .map(|d| Finding::DrainGaveUp { rank: d.rank, to: d.to, tag: d.tag, waited_ms: d.waited.as_millis() as u64 })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bootsim_core::Instant;

    use super::*;

    #[test]
    fn each_give_up_is_named_in_order() {
        let d = |rank, ms| DrainGiveUp {
            at: Instant::ZERO,
            rank,
            to: 3,
            tag: 0x10,
            waited: Duration::from_millis(ms),
            unacked: 8,
        };
        let text: Vec<String> = check(&[d(1, 5), d(0, 7)]).iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "drain gave up: rank 1 to rank 3 tag 0x10 after 5 ms (fail-open)",
                "drain gave up: rank 0 to rank 3 tag 0x10 after 7 ms (fail-open)"
            ]
        );
    }
}
