//! TX drain: wait until the kernel has no unacknowledged bytes on a socket.
//!
//! This is the proposed NVSHMEM fix (rev-0c06599) for `bootstrap_send`: before
//! `close`, poll `ioctl(fd, SIOCOUTQ)` every 200 µs until it reads 0, bounded by
//! a timeout (`NVSHMEM_BOOTSTRAP_UID_SEND_DRAIN_MS`, default 1000 ms). Like
//! upstream it *fails open*: an ioctl error or a timeout is reported, never
//! turned into an error that aborts the send.
//!
//! An OUTQ of 0 means the peer's *kernel* ACKed every byte (including a queued
//! FIN, which takes one sequence number), not that the peer application read
//! them.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use bootsim_core::DrainPoll;
use bootsim_driver::{poll_drain, DrainOutcome, DrainReport};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Upstream's poll interval between two `SIOCOUTQ` reads.
pub const DEFAULT_POLL_INTERVAL: Duration = bootsim_core::drain::DRAIN_POLL;

/// Upstream's default drain bound (`NVSHMEM_BOOTSTRAP_UID_SEND_DRAIN_MS=1000`).
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_millis(1000);

// `SIOCOUTQ` (Linux defines it as `TIOCOUTQ`) and `SIOCOUTQNSD` write one `int`.
nix::ioctl_read_bad!(siocoutq, libc::TIOCOUTQ, libc::c_int);
nix::ioctl_read_bad!(siocoutqnsd, libc::SIOCOUTQNSD, libc::c_int);

/// Reads an `int` through one of the ioctls above.
fn ioctl_int(
    fd: RawFd,
    ioctl: unsafe fn(libc::c_int, *mut libc::c_int) -> nix::Result<libc::c_int>,
    what: &str,
) -> io::Result<u32> {
    let mut n: libc::c_int = 0;
    // SAFETY: both requests write exactly one `int` through the pointer, which points to a
    // live local. A bad or closed fd makes the call fail with EBADF; it cannot cause memory
    // unsafety.
    if let Err(errno) = unsafe { ioctl(fd, &mut n) } {
        let err = io::Error::from(errno);
        return Err(io::Error::new(err.kind(), format!("ioctl({what}) on fd {fd}: {err}")));
    }
    u32::try_from(n).map_err(|_| {
        io::Error::new(io::ErrorKind::InvalidData, format!("ioctl({what}) on fd {fd} returned a negative count {n}"))
    })
}

/// Bytes in the send queue not yet ACKed by the peer (sent or not):
/// `SIOCOUTQ`, which Linux defines as `TIOCOUTQ`.
///
/// Fails with `EINVAL` on a listening socket and `EBADF` on a bad fd.
pub fn outq(fd: RawFd) -> io::Result<u32> {
    ioctl_int(fd, siocoutq, "SIOCOUTQ")
}

/// Bytes in the send queue not yet sent at all (`SIOCOUTQNSD`); always
/// `<= outq(fd)`.
pub fn outq_not_sent(fd: RawFd) -> io::Result<u32> {
    ioctl_int(fd, siocoutqnsd, "SIOCOUTQNSD")
}

/// Waits until `SIOCOUTQ` on `stream` is 0, polling every `poll_interval`,
/// for at most `timeout` (core's [`DrainPoll`] through the driver's [`poll_drain`]).
///
/// The first check is immediate. After that it sleeps `min(poll_interval,
/// time left)` between checks, and it reports `TimedOut` only once `timeout`
/// has fully elapsed, so `waited >= timeout` on that path. A zero `timeout`
/// means exactly one check. A zero `poll_interval` is treated as 1 µs. Note
/// that tokio's timer has 1 ms granularity, so the effective interval is
/// about 1 ms rather than upstream's 200 µs `usleep`.
///
/// Cancel-safe: it only reads socket state, so dropping the future stops it
/// with no side effect.
pub async fn drain(stream: &TcpStream, timeout: Duration, poll_interval: Duration) -> DrainReport {
    drain_fd(stream.as_raw_fd(), timeout, poll_interval).await
}

/// [`drain`] on a raw fd; the caller keeps the fd open for the whole call.
async fn drain_fd(fd: RawFd, timeout: Duration, poll_interval: Duration) -> DrainReport {
    let start = Instant::now();
    let poll = DrainPoll { interval: poll_interval, bound: timeout };
    let report = poll_drain(poll, || start.elapsed(), || outq(fd).map(u64::from)).await;
    match &report.outcome {
        DrainOutcome::Drained => {}
        DrainOutcome::TimedOut { unacked } => {
            tracing::warn!(fd, unacked, ?timeout, "TX drain timed out; proceeding (fail-open)");
        }
        DrainOutcome::Unsupported(error) => {
            tracing::warn!(fd, %error, "TX drain unsupported; proceeding (fail-open)");
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (client.unwrap(), accepted.unwrap().0)
    }

    /// Writes until the kernel refuses more: the send buffer and the peer's
    /// receive window are full. A peer that never reads can ACK none of the
    /// rest, so `SIOCOUTQ > 0` from then on. Returns the bytes written.
    async fn fill(stream: &TcpStream) -> usize {
        let chunk = vec![0u8; 1 << 16];
        let mut written = 0usize;
        loop {
            stream.writable().await.unwrap();
            match stream.try_write(&chunk) {
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && written > 0 => return written,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("write failed after {written} bytes: {e}"),
            }
        }
    }

    #[tokio::test]
    async fn idle_socket_has_empty_queues() {
        let (client, _server) = pair().await;
        assert_eq!(outq(client.as_raw_fd()).unwrap(), 0);
        assert_eq!(outq_not_sent(client.as_raw_fd()).unwrap(), 0);
        let report = drain(&client, Duration::ZERO, DEFAULT_POLL_INTERVAL).await;
        assert_eq!(report.outcome, DrainOutcome::Drained);
        assert_eq!(report.polls, 1);
    }

    #[tokio::test]
    async fn few_kb_to_a_reading_peer_drains() {
        let (mut client, mut server) = pair().await;
        let reader = tokio::spawn(async move {
            let mut buf = Vec::new();
            server.read_to_end(&mut buf).await.unwrap();
            buf.len()
        });
        client.write_all(&[7u8; 4096]).await.unwrap();
        // Generous bound: only reached if something is badly wrong.
        let report = drain(&client, Duration::from_secs(2), DEFAULT_POLL_INTERVAL).await;
        assert_eq!(report.outcome, DrainOutcome::Drained, "{report:?}");
        assert!(report.polls >= 1);
        drop(client);
        assert_eq!(reader.await.unwrap(), 4096);
    }

    #[tokio::test]
    async fn full_window_to_a_silent_peer_times_out() {
        let (client, _silent_server) = pair().await;
        let written = fill(&client).await;
        let timeout = Duration::from_millis(50);
        let report = drain(&client, timeout, DEFAULT_POLL_INTERVAL).await;
        match report.outcome {
            DrainOutcome::TimedOut { unacked } => assert!(unacked > 0, "{report:?}"),
            other => panic!("expected TimedOut, got {other:?} after writing {written} bytes"),
        }
        assert!(report.waited >= timeout, "{report:?}");
        assert!(report.polls >= 2, "{report:?}");
        let fd = client.as_raw_fd();
        assert!(outq_not_sent(fd).unwrap() <= outq(fd).unwrap());
    }

    #[tokio::test]
    async fn ioctl_failure_is_reported_not_raised() {
        // SIOCOUTQ is EINVAL on a listening socket.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let err = outq(listener.as_raw_fd()).unwrap_err();
        assert!(err.to_string().contains("SIOCOUTQ"), "{err}");
        let report = drain_fd(listener.as_raw_fd(), Duration::from_secs(1), DEFAULT_POLL_INTERVAL).await;
        assert!(matches!(report.outcome, DrainOutcome::Unsupported(ref t) if t.contains("SIOCOUTQ")));
        assert_eq!(report.polls, 1);
    }

    #[tokio::test]
    async fn dropping_the_future_cancels_it() {
        let (client, _silent_server) = pair().await;
        fill(&client).await;
        let cut = tokio::time::timeout(
            Duration::from_millis(20),
            drain(&client, Duration::from_secs(3600), DEFAULT_POLL_INTERVAL),
        )
        .await;
        assert!(cut.is_err(), "drain finished on its own: {cut:?}");
    }
}
