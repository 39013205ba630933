//! The TX drain before close (the proposed NVSHMEM fix, rev-0c06599) as one small policy every
//! world asks, as [`crate::ConnectRetry`] is for connects: read SIOCOUTQ at once, then every
//! [`DrainPoll::interval`] until it reads 0 or [`DrainPoll::bound`] has passed. It fails open: a
//! bound that runs out is reported, never turned into an error. Each world reads the queue and
//! sleeps its own way (tokio's clock, turmoil's, a blocking thread, the fast engine's agenda).

use std::time::Duration;

/// How often the drain before close reads SIOCOUTQ: 200 µs, as the proposed fix does.
pub const DRAIN_POLL: Duration = Duration::from_micros(200);

/// How a drain polls: the interval between two reads and the bound on the whole wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainPoll {
    /// Time between two reads (the fix's 200 µs); zero acts as 1 µs.
    pub interval: Duration,
    /// How long the drain may wait in all (`NVSHMEM_BOOTSTRAP_UID_SEND_DRAIN_MS`).
    pub bound: Duration,
}

/// What to do after one reading of the send queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainStep {
    /// The queue read 0: the peer's kernel acknowledged everything.
    Drained,
    /// The bound has passed with bytes still queued: give up (fail-open).
    TimedOut,
    /// Read again after this long.
    PollAfter(Duration),
}

impl DrainPoll {
    /// A drain bounded by `bound`, polling at the fix's interval ([`DRAIN_POLL`]).
    pub fn new(bound: Duration) -> Self {
        DrainPoll { interval: DRAIN_POLL, bound }
    }

    /// The step after a reading of `unacked` bytes taken `waited` after the drain started:
    /// the sleep never passes the bound, so the last reading is taken at the bound itself.
    pub fn step(&self, unacked: u64, waited: Duration) -> DrainStep {
        if unacked == 0 {
            return DrainStep::Drained;
        }
        if waited >= self.bound {
            return DrainStep::TimedOut;
        }
        DrainStep::PollAfter(self.interval.max(Duration::from_micros(1)).min(self.bound - waited))
    }

    /// When, from the drain's start, the first reading at or after `since` is taken (readings
    /// fall on whole intervals): where a world that knows the moment the queue emptied puts
    /// the drain's end.
    pub fn reading_at_or_after(&self, since: Duration) -> Duration {
        let poll = self.interval.max(Duration::from_micros(1)).as_nanos();
        let at = since.as_nanos().div_ceil(poll) * poll;
        Duration::from_nanos(u64::try_from(at).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn reads_until_empty_or_the_bound_and_never_sleeps_past_it() {
        let p = DrainPoll::new(MS);
        assert_eq!(p.step(0, Duration::ZERO), DrainStep::Drained);
        assert_eq!(p.step(0, 5 * MS), DrainStep::Drained, "an empty queue at the bound is drained");
        assert_eq!(p.step(72, Duration::ZERO), DrainStep::PollAfter(DRAIN_POLL));
        assert_eq!(p.step(72, Duration::from_micros(900)), DrainStep::PollAfter(Duration::from_micros(100)));
        assert_eq!(p.step(72, MS), DrainStep::TimedOut);
        // A zero bound is one reading; a zero interval still advances.
        assert_eq!(DrainPoll::new(Duration::ZERO).step(1, Duration::ZERO), DrainStep::TimedOut);
        let busy = DrainPoll { interval: Duration::ZERO, bound: MS };
        assert_eq!(busy.step(1, Duration::ZERO), DrainStep::PollAfter(Duration::from_micros(1)));
    }

    #[test]
    fn readings_fall_on_whole_intervals() {
        let p = DrainPoll::new(MS);
        assert_eq!(p.reading_at_or_after(Duration::ZERO), Duration::ZERO);
        assert_eq!(p.reading_at_or_after(Duration::from_micros(1)), DRAIN_POLL);
        assert_eq!(p.reading_at_or_after(DRAIN_POLL), DRAIN_POLL);
        assert_eq!(p.reading_at_or_after(Duration::from_micros(401)), 3 * DRAIN_POLL);
    }
}
