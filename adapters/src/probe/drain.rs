//! The sender-side TX drain of the report's fix: poll `ioctl(fd, TIOCOUTQ)` (unsent plus
//! unacknowledged bytes) until it reads 0, which only happens once the peer has ACKed the
//! data, i.e. once the connection sits in the receiver's accept queue.

use std::io;
use std::os::fd::RawFd;
use std::thread;
use std::time::{Duration, Instant};

use bootsim_core::{DrainPoll, DrainStep};
use serde::Serialize;

use crate::os::{outq, DEFAULT_POLL_INTERVAL};

/// How one blocking drain went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainWait {
    /// Time from the first poll to the last.
    pub waited: Duration,
    /// `TIOCOUTQ` polls made.
    pub polls: u32,
    /// Whether the bound ran out before the queue emptied.
    pub timed_out: bool,
}

/// Polls [`outq`] on `fd` every [`DEFAULT_POLL_INTERVAL`] until it reads 0 or `bound` has
/// passed (core's [`DrainPoll`] decides), blocking the thread (the probe's sender is a plain
/// thread; the async driver's drain is [`crate::os::drain`]).
pub fn drain_txq(fd: RawFd, bound: Duration) -> io::Result<DrainWait> {
    let poll = DrainPoll { interval: DEFAULT_POLL_INTERVAL, bound };
    let start = Instant::now();
    let mut polls = 0;
    loop {
        let queued = outq(fd)?;
        polls += 1;
        let waited = start.elapsed();
        match poll.step(u64::from(queued), waited) {
            DrainStep::Drained => return Ok(DrainWait { waited, polls, timed_out: false }),
            DrainStep::TimedOut => return Ok(DrainWait { waited, polls, timed_out: true }),
            DrainStep::PollAfter(pause) => thread::sleep(pause),
        }
    }
}

/// Drain waits of a whole probe run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DrainSummary {
    /// The bound, in milliseconds.
    pub bound_ms: u64,
    /// Connections drained.
    pub drains: u32,
    /// Mean wait, in microseconds.
    pub mean_us: u64,
    /// Longest wait, in microseconds.
    pub max_us: u64,
    /// `TIOCOUTQ` polls, all connections together.
    pub polls: u64,
    /// Drains that hit the bound with bytes still unacknowledged.
    pub timeouts: u32,
}

impl DrainSummary {
    /// Summarises `outcomes` of drains bounded by `bound`.
    pub fn from_outcomes(bound: Duration, outcomes: &[DrainWait]) -> Self {
        let total: u128 = outcomes.iter().map(|o| o.waited.as_micros()).sum();
        DrainSummary {
            bound_ms: bound.as_millis() as u64,
            drains: outcomes.len() as u32,
            mean_us: total.checked_div(outcomes.len() as u128).unwrap_or(0) as u64,
            max_us: outcomes.iter().map(|o| o.waited.as_micros() as u64).max().unwrap_or(0),
            polls: outcomes.iter().map(|o| u64::from(o.polls)).sum(),
            timeouts: outcomes.iter().filter(|o| o.timed_out).count() as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::DEFAULT_DRAIN_TIMEOUT;

    #[test]
    fn summary_of_nothing_and_of_some() {
        assert_eq!(DrainSummary::from_outcomes(DEFAULT_DRAIN_TIMEOUT, &[]).mean_us, 0);
        let o = |ms, timed_out| DrainWait { waited: Duration::from_millis(ms), polls: 2, timed_out };
        let s = DrainSummary::from_outcomes(Duration::from_millis(100), &[o(10, false), o(100, true)]);
        assert_eq!((s.bound_ms, s.drains, s.mean_us, s.max_us, s.polls, s.timeouts), (100, 2, 55_000, 100_000, 4, 1));
    }

    #[test]
    fn bad_fd_is_an_error() {
        assert!(drain_txq(-1, DEFAULT_DRAIN_TIMEOUT).is_err());
    }

    #[test]
    fn loopback_drains_at_once() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _server = l.accept().unwrap();
        c.write_all(&[1; 72]).unwrap();
        let o = drain_txq(c.as_raw_fd(), DEFAULT_DRAIN_TIMEOUT).unwrap();
        assert!(!o.timed_out);
    }
}
