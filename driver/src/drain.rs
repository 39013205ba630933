//! The drain loop every async world runs (real sockets reading SIOCOUTQ, turmoil's sockets
//! reading the kernel model): core's [`DrainPoll`] decides, this loop reads and sleeps on
//! tokio's clock (simulated under turmoil).

use std::io;
use std::time::Duration;

use bootsim_core::seam::OwnedInput;
use bootsim_core::{ConnId, DrainPoll, DrainStep};

/// How a drain ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainOutcome {
    /// The send queue read 0: the peer's kernel acknowledged everything.
    Drained,
    /// The bound passed with `unacked` bytes still queued (last reading).
    TimedOut {
        /// The send queue at the last reading.
        unacked: u64,
    },
    /// Reading the send queue failed (the text of the error); the drain gave up at once.
    Unsupported(String),
}

/// A drain's result: never an error, only a report (the fix fails open).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainReport {
    /// How it ended.
    pub outcome: DrainOutcome,
    /// Time from the start of the drain to the last reading.
    pub waited: Duration,
    /// Readings taken, the first, immediate one included.
    pub polls: u32,
}

impl DrainReport {
    /// The input the state machine is fed for this drain on `conn` (an unsupported drain is a
    /// timeout with nothing known to be queued).
    pub fn input<L>(&self, conn: ConnId) -> OwnedInput<L> {
        let waited = self.waited;
        match self.outcome {
            DrainOutcome::Drained => OwnedInput::Drained { conn, waited },
            DrainOutcome::TimedOut { unacked } => {
                OwnedInput::DrainTimedOut { conn, waited, unacked: usize::try_from(unacked).unwrap_or(usize::MAX) }
            }
            DrainOutcome::Unsupported(_) => OwnedInput::DrainTimedOut { conn, waited, unacked: 0 },
        }
    }
}

/// Reads the send queue with `read` as `poll` says, `elapsed` giving the time since the drain
/// started on the world's clock, sleeping on tokio's clock between readings.
///
/// Cancel-safe: it only reads, so dropping the future stops it with no side effect.
pub async fn poll_drain(
    poll: DrainPoll,
    mut elapsed: impl FnMut() -> Duration,
    mut read: impl FnMut() -> io::Result<u64>,
) -> DrainReport {
    let mut polls: u32 = 0;
    loop {
        polls = polls.saturating_add(1);
        let reading = read();
        let waited = elapsed();
        let report = |outcome| DrainReport { outcome, waited, polls };
        let unacked = match reading {
            Ok(n) => n,
            Err(e) => return report(DrainOutcome::Unsupported(e.to_string())),
        };
        match poll.step(unacked, waited) {
            DrainStep::Drained => return report(DrainOutcome::Drained),
            DrainStep::TimedOut => return report(DrainOutcome::TimedOut { unacked }),
            DrainStep::PollAfter(pause) => tokio::time::sleep(pause).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paused() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap()
    }

    /// Runs a drain over scripted readings (the last one repeats), on tokio's paused clock.
    fn drain(bound_ms: u64, readings: &[io::Result<u64>]) -> DrainReport {
        paused().block_on(async {
            let start = tokio::time::Instant::now();
            let mut i = 0;
            let read = || {
                let r = readings.get(i).or(readings.last()).unwrap();
                i += 1;
                r.as_ref().map(|n| *n).map_err(|e| io::Error::new(e.kind(), e.to_string()))
            };
            poll_drain(DrainPoll::new(Duration::from_millis(bound_ms)), || start.elapsed(), read).await
        })
    }

    #[test]
    fn drained_timed_out_and_unsupported() {
        // tokio's timer rounds the 200 µs pause up to its 1 ms tick.
        let r = drain(10, &[Ok(5), Ok(5), Ok(0)]);
        assert_eq!((r.outcome, r.polls, r.waited), (DrainOutcome::Drained, 3, Duration::from_millis(2)));
        let r = drain(1, &[Ok(7)]);
        assert_eq!((r.outcome.clone(), r.waited), (DrainOutcome::TimedOut { unacked: 7 }, Duration::from_millis(1)));
        assert_eq!(
            r.input::<()>(ConnId(3)),
            OwnedInput::DrainTimedOut { conn: ConnId(3), waited: r.waited, unacked: 7 }
        );
        let r = drain(1, &[Err(io::Error::other("ioctl(SIOCOUTQ): EINVAL"))]);
        assert!(matches!(r.outcome, DrainOutcome::Unsupported(ref t) if t.contains("SIOCOUTQ")), "{r:?}");
        assert_eq!(r.polls, 1);
    }
}
