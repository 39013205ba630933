//! One refusal-and-timeout script fed to every driver of NVSHMEM's connect retry: the tokio
//! adapter (errno from `connect()`), the turmoil backend (the model's handshake, or turmoil's
//! own refusal) and the fast engine (the kernel model's RST / SYN-timeout events). Each driver's
//! own classification and reaction run; the test records when each attempt was dialed and the
//! final error, and asserts every driver made the same attempts at the same times and gave up
//! with the same error (core's `GaveUp` text). A driver that counted one failure more or less,
//! slept after one kind of failure and not the other, ignored the policy or reported its own
//! text fails here.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use bootsim_core::{ConnectFailure, ConnectRetry, Instant, RetryPolicy};
use bootsim_driver::{retry_dial, Attempt};

use super::fast::{on_connect_event, Redial};
use super::turmoil::backend::connect_retrying;
use super::turmoil::gate::Handshake;
use crate::kernel::{EventKind, SockId};

use ConnectFailure::{Refused, TimedOut};

/// One attempt's scripted outcome: `None` connects.
type Step = Option<ConnectFailure>;

/// What a driver did: when each attempt was dialed (since the first), and the final error
/// (`None`: connected).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    dialed_at: Vec<Duration>,
    error: Option<String>,
}

/// Small limits and an unusual pause, so a driver that used upstream's constants shows.
fn policy() -> RetryPolicy {
    RetryPolicy { refused_interval: Duration::from_millis(3), refused_max: 4, timedout_max: 2 }
}

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap()
}

fn step_at(script: &[Step], i: usize) -> Step {
    *script.get(i).expect("the driver dialed past the end of the script")
}

/// The tokio adapter's path: the driver's loop over tokio's `connect()` classified by errno (as
/// bootsim-adapters' `connect_with_retry` does), scripted; a connecting step dials a real
/// loopback listener.
fn tokio_driver(script: &[Step]) -> Run {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    paused_runtime().block_on(async {
        let start = tokio::time::Instant::now();
        let mut dialed_at = Vec::new();
        let dial = || {
            let step = step_at(script, dialed_at.len());
            dialed_at.push(start.elapsed());
            async move {
                Attempt::of(match step {
                    None => tokio::net::TcpStream::connect(addr).await,
                    Some(Refused) => Err(io::Error::from_raw_os_error(libc::ECONNREFUSED)),
                    Some(TimedOut) => Err(io::Error::from_raw_os_error(libc::ETIMEDOUT)),
                })
            }
        };
        let error = match retry_dial(&policy(), dial).await {
            Ok(_) => None,
            Err(e) => {
                assert_eq!(e.attempts as usize, dialed_at.len(), "tokio's attempt count: {e:?}");
                match e.gave_up {
                    Some(why) => Some(why.to_string()),
                    None => panic!("tokio gave up on a fatal error: {}", e.last),
                }
            }
        };
        Run { dialed_at, error }
    })
}

/// The turmoil backend: its real retry over scripted attempts, refusals alternating between
/// the model's RST and turmoil's own "nothing bound" error.
fn turmoil_driver(script: &[Step]) -> Run {
    let addr: SocketAddr = "10.0.0.2:7000".parse().unwrap();
    paused_runtime().block_on(async {
        let start = tokio::time::Instant::now();
        let mut dialed_at = Vec::new();
        let dial = || {
            let i = dialed_at.len();
            let step = step_at(script, i);
            dialed_at.push(start.elapsed());
            async move {
                match step {
                    None => Ok(((), Handshake::Established)),
                    Some(Refused) if i % 2 == 1 => Err(io::ErrorKind::ConnectionRefused.into()),
                    Some(Refused) => Ok(((), Handshake::Refused)),
                    Some(TimedOut) => Ok(((), Handshake::TimedOut)),
                }
            }
        };
        let error = match connect_retrying(addr, &policy(), dial).await {
            Ok(()) => None,
            Err(e) => {
                let text = e.to_string();
                let why = text.strip_prefix(&format!("connect to {addr}: ")).unwrap_or(&text);
                Some(why.to_string())
            }
        };
        Run { dialed_at, error }
    })
}

/// The fast engine: its reaction to the kernel model's connect events, redialing at the time
/// it schedules.
fn fast_driver(script: &[Step]) -> Run {
    let mut retry = ConnectRetry::new(policy());
    let mut now = Instant::ZERO;
    let mut dialed_at = Vec::new();
    loop {
        let sock = SockId(dialed_at.len() as u64);
        let kind = match step_at(script, dialed_at.len()) {
            None => EventKind::Connected { sock },
            Some(Refused) => EventKind::Refused { sock },
            Some(TimedOut) => EventKind::ConnectTimedOut { sock },
        };
        dialed_at.push(now - Instant::ZERO);
        match on_connect_event(&mut retry, now, &kind) {
            None => return Run { dialed_at, error: None },
            Some(Redial::At(at)) => now = at,
            Some(Redial::Fail(reason)) => return Run { dialed_at, error: Some(reason) },
        }
    }
}

/// Feeds `script` to every driver and asserts they agree; returns the common run.
fn every_driver(script: &[Step]) -> Run {
    let fast = fast_driver(script);
    let drivers = [("tokio", tokio_driver(script)), ("turmoil", turmoil_driver(script))];
    for (name, run) in drivers {
        assert_eq!(run, fast, "{name} and the fast engine disagree on script {script:?}");
    }
    fast
}

fn ms(v: &[u64]) -> Vec<Duration> {
    v.iter().map(|&m| Duration::from_millis(m)).collect()
}

#[test]
fn refusals_and_timeouts_end_the_same_way_in_every_driver() {
    // Two timeouts end it at the fifth attempt, after a 3 ms pause following every failure
    // (timeouts included), whatever the refusals counted before.
    let run = every_driver(&[Some(Refused), Some(Refused), Some(TimedOut), Some(Refused), Some(TimedOut)]);
    assert_eq!(run.dialed_at, ms(&[0, 3, 6, 9, 12]));
    assert_eq!(run.error.as_deref(), Some("connect timed out 2 times"));

    // The fourth refusal ends it; the timeout between does not reset the refusal count.
    let run = every_driver(&[Some(Refused), Some(TimedOut), Some(Refused), Some(Refused), Some(Refused)]);
    assert_eq!(run.dialed_at, ms(&[0, 3, 6, 9, 12]));
    assert_eq!(run.error.as_deref(), Some("connection refused 4 times"));

    // Under the limits the connect succeeds on the attempt after the last failure.
    let run = every_driver(&[Some(TimedOut), Some(Refused), Some(Refused), Some(Refused), None]);
    assert_eq!(run.dialed_at, ms(&[0, 3, 6, 9, 12]));
    assert_eq!(run.error, None);

    // A first-attempt success sleeps nowhere.
    assert_eq!(every_driver(&[None]), Run { dialed_at: ms(&[0]), error: None });
}
