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
