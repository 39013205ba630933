//! The tasks of one driver: accept, per-connection writer (connect included) and reader.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bootsim_core::seam::ListenerKey;
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
    /// EOF or reset.
    PeerClosed { conn: ConnId },
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

/// Forwards every chunk read, then EOF (or a reset) as `PeerClosed`.
pub(super) async fn reader_task<B: Backend, L>(conn: ConnId, mut r: B::Reader, tx: UnboundedSender<Report<B, L>>) {
    // Uninitialised capacity, reused from read to read: most bootstrap connections carry a few
    // dozen bytes, and zeroing a fresh 64 KiB for each was 8.6 % of a turmoil run's
    // instructions (callgrind, nvshmem-init at 16 ranks).
    let mut buf = Vec::with_capacity(READ_CHUNK);
    loop {
        buf.clear();
        match r.read_buf(&mut buf).await {
            Ok(0) => break,
            Ok(_) => {
                if tx.send(Report::Received { conn, bytes: buf.as_slice().to_vec() }).is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::debug!(%conn, error = %e, "read failed; reported as closed");
                break;
            }
        }
    }
    let _ = tx.send(Report::PeerClosed { conn });
}
