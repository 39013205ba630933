//! Connections dropped as strangers' (wrong magic, garbage, a header that stalled or was
//! evicted): shown at the default level, rate-limited, and counted for the run's summary.

use bootsim_core::seam::Observed;

/// Shows the first few dropped strangers of one state machine, then every hundredth.
#[derive(Debug, Default)]
pub(super) struct StrangerLog {
    dropped: u64,
}

impl StrangerLog {
    /// Logs `event` if it is a dropped stranger ([`Observed::stranger`]).
    pub(super) fn observe(&mut self, who: &str, event: &impl Observed) {
        let Some((from, why)) = event.stranger() else { return };
        self.dropped += 1;
        let dropped = self.dropped;
        if dropped <= 5 || dropped.is_multiple_of(100) {
            tracing::warn!(%who, %from, %why, dropped, "dropped a stranger's connection");
        }
    }
}

/// True if `event` is a dropped stranger's connection.
pub fn is_stranger_dropped(event: &impl Observed) -> bool {
    event.stranger().is_some()
}
