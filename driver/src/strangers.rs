//! Connections dropped as strangers' (wrong magic, garbage, a header that stalled or was
//! evicted): shown at the default level, rate-limited, and counted for the run's summary.

use bootsim_core::Event;

/// Shows the first few dropped strangers of one state machine, then every hundredth.
#[derive(Debug, Default)]
pub(super) struct StrangerLog {
    dropped: u64,
}

impl StrangerLog {
    /// Logs `event` if it is a dropped stranger.
    pub(super) fn observe(&mut self, who: &str, event: &Event) {
        let (from, why) = match event {
            Event::StrayDropped { from, error, .. } => (from, error.to_string()),
            Event::StalledDropped { from, after, .. } => (from, format!("header incomplete after {after:?}")),
            _ => return,
        };
        self.dropped += 1;
        let dropped = self.dropped;
        if dropped <= 5 || dropped.is_multiple_of(100) {
            tracing::warn!(%who, %from, %why, dropped, "dropped a stranger's connection");
        }
    }
}

/// True if `event` is a dropped stranger's connection.
pub fn is_stranger_dropped(event: &Event) -> bool {
    matches!(event, Event::StrayDropped { .. } | Event::StalledDropped { .. })
}
