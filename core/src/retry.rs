//! NVSHMEM's connect retry (NCCL 2.19's `socketStartConnect`, copied into NVSHMEM's bootstrap)
//! as one small state machine that every driver, simulated or real, asks what to do after a
//! failed connect: `ECONNREFUSED` and `ETIMEDOUT` each have their own counter; the failure
//! that brings its counter to the limit gives up; every other one sleeps `SLEEP_INT` (1 ms)
//! and redials. Any other errno is fatal, which is the driver's to classify.

use std::time::Duration;

/// The retry limits; [`RetryPolicy::default`] is NVSHMEM's compiled-in constants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Sleep after a refused or timed-out attempt (upstream `SLEEP_INT`, 1 ms).
    pub refused_interval: Duration,
    /// Refused attempts allowed in total (upstream `RETRY_REFUSED_TIMES`, 20 000); 0 acts as 1.
    pub refused_max: u32,
    /// Timed-out attempts allowed in total (upstream `RETRY_TIMEDOUT_TIMES`, 3); 0 acts as 1.
    pub timedout_max: u32,
}

impl Default for RetryPolicy {
    /// 1 ms, 20 000 refusals, 3 timeouts: NVSHMEM's compiled-in constants.
    fn default() -> Self {
        Self { refused_interval: Duration::from_millis(1), refused_max: 20_000, timedout_max: 3 }
    }
}

/// How one connect attempt failed, as far as the retry cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectFailure {
    /// `ECONNREFUSED`: nothing listens (yet).
    Refused,
    /// `ETIMEDOUT`: the handshake never completed.
    TimedOut,
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryStep {
    /// Sleep this long, then dial again with a fresh socket.
    RedialAfter(Duration),
    /// Give up: the limit for this kind of failure is reached.
    GiveUp(GaveUp),
}

/// A connect that gave up: the limit of one kind of failure was reached. Its text, e.g.
/// "connection refused 20000 times", is the final error every driver reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GaveUp {
    /// `refused_max` attempts were refused (this many).
    #[error("connection refused {0} times")]
    Refused(u32),
    /// `timedout_max` attempts timed out (this many).
    #[error("connect timed out {0} times")]
    TimedOut(u32),
}

/// One connect's retry state: feed it each failure, do what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRetry {
    policy: RetryPolicy,
    refused: u32,
    timed_out: u32,
}

impl ConnectRetry {
    /// A fresh connect under `policy`.
    pub fn new(policy: RetryPolicy) -> Self {
        ConnectRetry { policy, refused: 0, timed_out: 0 }
    }

    /// The next step after a failed attempt (`++count == max` gives up, as upstream).
    pub fn on_failure(&mut self, failure: ConnectFailure) -> RetryStep {
        let (count, max) = match failure {
            ConnectFailure::Refused => (&mut self.refused, self.policy.refused_max),
            ConnectFailure::TimedOut => (&mut self.timed_out, self.policy.timedout_max),
        };
        *count = count.saturating_add(1);
        if *count >= max.max(1) {
            return RetryStep::GiveUp(match failure {
                ConnectFailure::Refused => GaveUp::Refused(*count),
                ConnectFailure::TimedOut => GaveUp::TimedOut(*count),
            });
        }
        RetryStep::RedialAfter(self.policy.refused_interval)
    }

    /// Failed attempts so far: (refused, timed out).
    pub fn failures(&self) -> (u32, u32) {
        (self.refused, self.timed_out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(policy: RetryPolicy, script: &[ConnectFailure]) -> Vec<RetryStep> {
        let mut r = ConnectRetry::new(policy);
        script.iter().map(|f| r.on_failure(*f)).collect()
    }

    #[test]
    fn each_kind_gives_up_on_the_failure_that_reaches_its_limit_and_sleeps_1ms_otherwise() {
        use ConnectFailure::*;
        let p = RetryPolicy { refused_max: 3, ..RetryPolicy::default() };
        let steps = run(p, &[Refused, TimedOut, Refused, TimedOut, Refused]);
        let wait = RetryStep::RedialAfter(Duration::from_millis(1));
        assert_eq!(steps[..4], [wait.clone(), wait.clone(), wait.clone(), wait]);
        assert_eq!(steps[4], RetryStep::GiveUp(GaveUp::Refused(3)));
        assert_eq!(GaveUp::Refused(3).to_string(), "connection refused 3 times");
        // Three timeouts end it (NVSHMEM's default), whatever the refusals before.
        let steps = run(RetryPolicy::default(), &[TimedOut, TimedOut, TimedOut]);
        assert_eq!(steps[2], RetryStep::GiveUp(GaveUp::TimedOut(3)));
        assert_eq!(GaveUp::TimedOut(3).to_string(), "connect timed out 3 times");
        // A limit of 0 acts as 1: the first failure gives up.
        let p = RetryPolicy { refused_max: 0, ..RetryPolicy::default() };
        assert_eq!(run(p, &[Refused])[0], RetryStep::GiveUp(GaveUp::Refused(1)));
    }
}
