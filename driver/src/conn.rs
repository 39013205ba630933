//! The tasks of one driver: accept, per-connection writer (connect included) and reader.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bootsim_core::seam::{CloseReason, ListenerKey};
use bootsim_core::ConnId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::{Backend, DrainReport};

/// Read buffer size of a reader task.
const READ_CHUNK: usize = 64 * 1024;

/// A command for a connection's writer task, executed in order.
#[derive(Debug)]
pub(super) enum Cmd {
    /// Write these bytes after the ones queued before.
    Write(Vec<u8>),
    /// Report when everything written is acknowledged, within this bound.
    Drain(Duration),
    /// Shut down the write side after the queued bytes, and end.
    Close,
}

/// What a task reports to the driver loop; `L` is the protocol's listener key.
pub(super) enum Report<B: Backend, L> {
    /// An accept finished.
    Accepted { listener: L, conn: ConnId, stream: B::Stream, from: SocketAddr },
    /// A connect finished: the read half, for the driver to start a reader.
    Connected { conn: ConnId, reader: B::Reader },
    /// A connect failed for good.
    ConnectFailed { conn: ConnId, reason: String },
    /// Bytes arrived.
    Received { conn: ConnId, bytes: Vec<u8> },
    /// The connection ended for reading: EOF, a reset or a timeout.
    PeerClosed { conn: ConnId, reason: CloseReason },
    /// A drain ended.
    Drain { conn: ConnId, result: DrainReport },
}

/// How a writer task gets its write half.
pub(super) enum Start<B: Backend> {
    /// Connect first (the read half goes back to the driver).
    Connect(SocketAddr),
    /// Already connected (accepted).
    Ready(B::Writer),
}

/// Accepts one connection; transient accept errors are logged and retried.
pub(super) async fn accept_task<B: Backend, L: ListenerKey>(
    backend: B,
    l: Arc<B::Listener>,
    listener: L,
    conn: ConnId,
    tx: UnboundedSender<Report<B, L>>,
) {
    loop {
        match backend.accept(&l).await {
            Ok((stream, from)) => {
                let _ = tx.send(Report::Accepted { listener, conn, stream, from });
                return;
            }
            Err(e) => {
                tracing::warn!(?listener, %conn, error = %e, "accept failed, retrying");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Owns a connection's write half: connects if asked, then runs commands in order.
pub(super) async fn writer_task<B: Backend, L>(
    backend: B,
    conn: ConnId,
    start: Start<B>,
    mut cmds: UnboundedReceiver<Cmd>,
    tx: UnboundedSender<Report<B, L>>,
) {
    let mut w = match start {
        Start::Ready(w) => w,
        Start::Connect(addr) => match backend.connect(addr).await {
            Ok(stream) => {
                let (reader, w) = backend.split(stream);
                let _ = tx.send(Report::Connected { conn, reader });
                w
            }
            Err(e) => {
                let _ = tx.send(Report::ConnectFailed { conn, reason: e.to_string() });
                return;
            }
        },
    };
    backend.identify(conn, &w);
    let mut broken = false;
    while let Some(cmd) = cmds.recv().await {
        match cmd {
            Cmd::Write(bytes) if !broken => {
                if let Err(e) = w.write_all(&bytes).await {
                    tracing::warn!(%conn, error = %e, "write failed; later writes on this connection are dropped");
                    broken = true;
                }
            }
            Cmd::Write(_) => {}
            Cmd::Drain(bound) => {
                let result = backend.drain(&w, bound).await;
                let _ = tx.send(Report::Drain { conn, result });
            }
            Cmd::Close => break,
        }
    }
    if let Err(e) = w.shutdown().await {
        tracing::debug!(%conn, error = %e, "shutdown failed");
    }
}

/// Forwards every chunk read, then the end (EOF, a reset, a timeout) as `PeerClosed`.
pub(super) async fn reader_task<B: Backend, L>(conn: ConnId, mut r: B::Reader, tx: UnboundedSender<Report<B, L>>) {
    // Uninitialised capacity, reused from read to read: most bootstrap connections carry a few
    // dozen bytes, and zeroing a fresh 64 KiB for each was 8.6 % of a turmoil run's
    // instructions (callgrind, nvshmem-init at 16 ranks).
    let mut buf = Vec::with_capacity(READ_CHUNK);
    let reason = loop {
        buf.clear();
        match r.read_buf(&mut buf).await {
            Ok(0) => break CloseReason::Eof,
            Ok(_) => {
                if tx.send(Report::Received { conn, bytes: buf.as_slice().to_vec() }).is_err() {
                    return;
                }
            }
            Err(e) => {
                let reason = close_reason(&e);
                tracing::debug!(%conn, error = %e, %reason, "read failed; reported as closed");
                break reason;
            }
        }
    };
    let _ = tx.send(Report::PeerClosed { conn, reason });
}

/// Why a read's error ended its connection. On an established socket Linux reports the end of
/// its retransmissions (`tcp_write_err`) as the last ICMP error it received, or `ETIMEDOUT` if
/// none: an ICMP "unreachable" never ends such a socket by itself. So `ETIMEDOUT`,
/// `EHOSTUNREACH`, `ENETUNREACH`, `ENETDOWN` and `EHOSTDOWN` are this host's kernel giving up on
/// the peer. Every other error is read as a reset: `ECONNRESET` and `ECONNABORTED` are resets,
/// and the rest (`EIO`, ...) are the connection failing under the reader without the peer
/// closing it in order, which a reset's words ("reset", never "the peer closed") describe best.
pub(super) fn close_reason(e: &std::io::Error) -> CloseReason {
    use std::io::ErrorKind;
    /// Linux's `EHOSTDOWN`, which `ErrorKind` has no name for.
    const EHOSTDOWN: i32 = 112;
    match e.kind() {
        ErrorKind::TimedOut | ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable | ErrorKind::NetworkDown => {
            CloseReason::TimedOut
        }
        _ if e.raw_os_error() == Some(EHOSTDOWN) => CloseReason::TimedOut,
        _ => CloseReason::Reset,
    }
}

#[cfg(test)]
mod tests {
    use super::close_reason;
    use bootsim_core::seam::CloseReason;
    use std::io::{Error, ErrorKind};

    #[test]
    fn a_read_error_is_a_timeout_only_when_the_kernel_says_so() {
        assert_eq!(close_reason(&Error::from(ErrorKind::TimedOut)), CloseReason::TimedOut);
        assert_eq!(close_reason(&Error::from_raw_os_error(110)), CloseReason::TimedOut, "ETIMEDOUT on Linux");
        // A give-up after an ICMP error reports that error (Linux's tcp_write_err).
        for (errno, name) in [(113, "EHOSTUNREACH"), (101, "ENETUNREACH"), (100, "ENETDOWN"), (112, "EHOSTDOWN")] {
            assert_eq!(close_reason(&Error::from_raw_os_error(errno)), CloseReason::TimedOut, "{name}");
        }
        for kind in [ErrorKind::ConnectionReset, ErrorKind::BrokenPipe, ErrorKind::ConnectionAborted, ErrorKind::Other]
        {
            assert_eq!(close_reason(&Error::from(kind)), CloseReason::Reset, "{kind:?}");
        }
    }
}
