//! NVSHMEM's blocking-connect retry loop (`socketStartConnect`), as async.
//!
//! Upstream retries `ECONNREFUSED` every 1 ms up to 20 000 times (about 20 s,
//! the window a peer has to start listening) and `ETIMEDOUT` up to 3 times;
//! any other errno is fatal. The two counters are independent. Here every
//! attempt uses a fresh socket, and `TCP_NODELAY` is set on success as
//! upstream does on both ends.

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use tokio::net::TcpStream;
use tracing::Instrument;

use bootsim_core::{GaveUp, RetryPolicy};
use bootsim_driver::{retry_dial, Attempt, DialFailed};

/// Why [`connect_with_retry`] gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp {
    /// The retry's limit for one kind of failure was reached (core's [`GaveUp`]).
    Exhausted(GaveUp),
    /// An errno that is never retried.
    Fatal,
    /// Connected, but setting `TCP_NODELAY` failed.
    NoDelay,
}

impl std::fmt::Display for GiveUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exhausted(why) => write!(f, "{why}"),
            Self::Fatal => f.write_str("non-retryable error"),
            Self::NoDelay => f.write_str("setting TCP_NODELAY failed"),
        }
    }
}

/// A failed [`connect_with_retry`]: the address, how many attempts were made
/// and the last OS error.
#[derive(Debug, thiserror::Error)]
#[error("connect to {addr} failed after {attempts} attempts ({reason}): {last}")]
pub struct ConnectError {
    /// The address being connected to.
    pub addr: SocketAddr,
    /// Connect attempts made, refused, timed-out and the final one included.
    pub attempts: u32,
    /// Which limit or error ended the loop.
    pub reason: GiveUp,
    /// The last error; its text is part of the message.
    pub last: io::Error,
}

/// One tokio connect attempt, classified by errno.
fn attempt_of(addr: SocketAddr, dialed: io::Result<TcpStream>) -> Attempt<TcpStream> {
    let err = match dialed {
        // Nobody listened yet and the kernel picked the target's own port as our ephemeral
        // port: TCP's simultaneous open connected the socket to itself. That is a refusal
        // (the peer is not up), not a peer: reading it would return our own preamble.
        Ok(stream) if is_self_connection(&stream) => {
            tracing::warn!(%addr, "connected to itself (the target port is in the ephemeral range and nothing listens yet); retrying");
            drop(stream);
            io::Error::from(io::ErrorKind::ConnectionRefused)
        }
        Ok(stream) => return Attempt::Connected(stream),
        Err(e) => e,
    };
    Attempt::of(Err(err))
}

/// Connects to `addr`, retrying `ECONNREFUSED` and `ETIMEDOUT` per `policy`
/// and failing at once on any other error. Sets `TCP_NODELAY`.
///
/// Cancel-safe: dropping the future drops any half-open socket.
pub async fn connect_with_retry(addr: SocketAddr, policy: &RetryPolicy) -> Result<TcpStream, ConnectError> {
    connect_with_retry_using(addr, policy, TcpStream::connect).await
}

/// [`connect_with_retry`] with the dial given: `dial(addr)` is one `connect()` (tests script
/// errno sequences through it; production passes `TcpStream::connect`).
pub async fn connect_with_retry_using<F, Fut>(
    addr: SocketAddr,
    policy: &RetryPolicy,
    mut dial: F,
) -> Result<TcpStream, ConnectError>
where
    F: FnMut(SocketAddr) -> Fut,
    Fut: Future<Output = io::Result<TcpStream>>,
{
    let attempt = || {
        let dialed = dial(addr);
        async move { attempt_of(addr, dialed.await) }
    };
    // The span puts the address on the loop's "retrying" lines.
    match retry_dial(policy, attempt).instrument(tracing::info_span!("connect", %addr)).await {
        Ok((stream, attempts)) => match stream.set_nodelay(true) {
            Ok(()) => Ok(stream),
            Err(last) => Err(ConnectError { addr, attempts, reason: GiveUp::NoDelay, last }),
        },
        Err(DialFailed { attempts, gave_up, last }) => {
            let reason = gave_up.map_or(GiveUp::Fatal, GiveUp::Exhausted);
            tracing::warn!(%addr, attempts, %reason, error = %last, "connect failed");
            Err(ConnectError { addr, attempts, reason, last })
        }
    }
}

/// True when a connected socket's two ends are the same address (a TCP self-connection).
pub fn is_self_connection(stream: &TcpStream) -> bool {
    matches!((stream.local_addr(), stream.peer_addr()), (Ok(l), Ok(p)) if l == p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn a_socket_connected_to_its_own_port_is_recognised() {
        // Bind an ephemeral port, then connect the same socket to it: simultaneous open.
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let me = sock.local_addr().unwrap();
        let stream = sock.connect(me).await.expect("a self-connection succeeds on Linux");
        assert!(is_self_connection(&stream));
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let other = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        assert!(!is_self_connection(&other));
    }

    /// A loopback port that was free a moment ago (nothing listens on it).
    fn free_port() -> SocketAddr {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    }

    #[test]
    fn default_policy_is_upstream() {
        let p = RetryPolicy::default();
        assert_eq!(p.refused_interval, Duration::from_millis(1));
        assert_eq!((p.refused_max, p.timedout_max), (20_000, 3));
    }

    #[tokio::test]
    async fn listener_that_appears_late_is_reached() {
        let addr = free_port();
        let late = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            let l = TcpListener::bind(addr).await.unwrap();
            l.accept().await.unwrap().0
        });
        let stream = connect_with_retry(addr, &RetryPolicy::default()).await.unwrap();
        assert!(stream.nodelay().unwrap());
        assert_eq!(stream.peer_addr().unwrap(), addr);
        late.await.unwrap();
    }

    #[tokio::test]
    async fn nothing_listening_gives_up_after_refused_max() {
        let addr = free_port();
        let policy = RetryPolicy { refused_max: 5, ..RetryPolicy::default() };
        let err = connect_with_retry(addr, &policy).await.unwrap_err();
        assert_eq!(err.attempts, 5);
        assert_eq!(err.reason, GiveUp::Exhausted(GaveUp::Refused(5)));
        let msg = err.to_string();
        assert!(msg.contains(&addr.to_string()), "{msg}");
        assert!(msg.contains("5 attempts"), "{msg}");
        assert!(msg.to_lowercase().contains("refused"), "{msg}");
    }

    #[tokio::test]
    async fn zero_limit_still_tries_once() {
        let policy = RetryPolicy { refused_max: 0, ..RetryPolicy::default() };
        let err = connect_with_retry(free_port(), &policy).await.unwrap_err();
        assert_eq!(err.attempts, 1);
    }
}
