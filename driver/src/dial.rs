//! NVSHMEM's connect retry loop for every async driver (tokio sockets in bootsim-adapters,
//! turmoil's simulated sockets in bootsim-sim): one attempt at a time, core's
//! [`ConnectRetry`] deciding what a refusal or a timeout means.

use std::future::Future;
use std::io;

use bootsim_core::{ConnectFailure, ConnectRetry, GaveUp, RetryPolicy, RetryStep};

/// How one connect attempt of an async driver ended, as the driver classified it.
#[derive(Debug)]
pub enum Attempt<T> {
    /// Connected.
    Connected(T),
    /// Refused or timed out: the retry decides; the error is kept as the last one.
    Failed(ConnectFailure, io::Error),
    /// Any other error: never retried.
    Fatal(io::Error),
}

impl<T> Attempt<T> {
    /// Classifies one `connect()` result as upstream does: `ECONNREFUSED` and `ETIMEDOUT`
    /// are retried, every other error is fatal.
    pub fn of(dialed: io::Result<T>) -> Self {
        match dialed {
            Ok(stream) => Attempt::Connected(stream),
            Err(err) => match err.kind() {
                io::ErrorKind::ConnectionRefused => Attempt::Failed(ConnectFailure::Refused, err),
                io::ErrorKind::TimedOut => Attempt::Failed(ConnectFailure::TimedOut, err),
                _ => Attempt::Fatal(err),
            },
        }
    }
}

/// A connect that [`retry_dial`] ended without a stream.
#[derive(Debug)]
pub struct DialFailed {
    /// Attempts made, the last included.
    pub attempts: u32,
    /// The retry's give-up, or `None` for a fatal error.
    pub gave_up: Option<GaveUp>,
    /// The last attempt's error.
    pub last: io::Error,
}

/// Makes an attempt with `dial`, asks core's [`ConnectRetry`] what a refusal or timeout means,
/// sleeps its pause (tokio's clock, simulated under turmoil) and dials again, until connected
/// or the retry gives up. Returns the stream and the attempts.
pub async fn retry_dial<T, F, Fut>(policy: &RetryPolicy, mut dial: F) -> Result<(T, u32), DialFailed>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Attempt<T>>,
{
    let mut attempts: u32 = 0;
    let mut retry = ConnectRetry::new(policy.clone());
    loop {
        attempts = attempts.saturating_add(1);
        let (failure, last) = match dial().await {
            Attempt::Connected(stream) => return Ok((stream, attempts)),
            Attempt::Failed(failure, last) => (failure, last),
            Attempt::Fatal(last) => return Err(DialFailed { attempts, gave_up: None, last }),
        };
        match retry.on_failure(failure) {
            RetryStep::RedialAfter(pause) => {
                let (refused, timed_out) = retry.failures();
                if failure == ConnectFailure::TimedOut || refused.is_multiple_of(1000) {
                    tracing::info!(refused, timed_out, error = %last, "connect failed, retrying");
                }
                tokio::time::sleep(pause).await;
            }
            RetryStep::GiveUp(why) => return Err(DialFailed { attempts, gave_up: Some(why), last }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_follows_upstream() {
        let os = io::Error::from_raw_os_error;
        let class = |e: io::Error| match Attempt::<()>::of(Err(e)) {
            Attempt::Failed(f, _) => Some(f),
            Attempt::Fatal(_) => None,
            Attempt::Connected(()) => unreachable!(),
        };
        // ECONNREFUSED (111) and ETIMEDOUT (110) on Linux; everything else is fatal.
        assert_eq!(class(os(111)), Some(ConnectFailure::Refused));
        assert_eq!(class(os(110)), Some(ConnectFailure::TimedOut));
        assert_eq!(class(os(101)), None, "ENETUNREACH");
        assert_eq!(class(os(113)), None, "EHOSTUNREACH");
        assert_eq!(class(io::ErrorKind::TimedOut.into()), Some(ConnectFailure::TimedOut));
        assert_eq!(class(io::ErrorKind::Other.into()), None);
    }
}
