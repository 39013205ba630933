//! The receiving half: accept K connections and read each one's index, in accept order.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags};
use serde::Serialize;

use super::stats::AcceptOrderStats;
use super::ProbeError;

/// How long the receiver waits for the next connection, or for a connection's bytes.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest frame payload the receiver accepts.
const MAX_PAYLOAD: u32 = 1 << 20;

/// What the receiving half saw.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ListenReport {
    /// Connection indices in accept order.
    pub order: Vec<u32>,
    /// That order compared with connect order.
    pub stats: AcceptOrderStats,
    /// From the start of accepting to the last frame read, in microseconds.
    pub elapsed_us: u64,
}

impl std::fmt::Display for ListenReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "accepted {} in {:.1} ms: {}",
            self.order.len(),
            self.elapsed_us as f64 / 1e3,
            super::report::StatsLine(&self.stats, &self.order)
        )
    }
}

/// A bound listening socket, so a caller can signal readiness before accepting.
#[derive(Debug)]
pub struct ProbeListener {
    listener: TcpListener,
}

impl ProbeListener {
    /// Binds and listens on `addr`.
    pub fn bind(addr: SocketAddr) -> Result<Self, ProbeError> {
        let listener = TcpListener::bind(addr).map_err(|e| ProbeError::io(format!("binding {addr}"), e))?;
        listener.set_nonblocking(true).map_err(|e| ProbeError::io("making the listener non-blocking", e))?;
        Ok(ProbeListener { listener })
    }

    /// Accepts `k` connections, reading each one's frame right away; fails when nothing
    /// arrives for `idle`.
    pub fn accept_k(&self, k: u32, idle: Duration) -> Result<ListenReport, ProbeError> {
        let start = Instant::now();
        let mut order = Vec::with_capacity(k as usize);
        for i in 0..k {
            wait_readable(self.listener.as_fd(), idle).map_err(|e| match e.kind() {
                io::ErrorKind::TimedOut => {
                    ProbeError::Timeout(format!("accepted {i} of {k} connections; none more for {idle:?}"))
                }
                _ => ProbeError::io("polling the listener", e),
            })?;
            let (mut stream, peer) = self.listener.accept().map_err(|e| ProbeError::io(format!("accept #{i}"), e))?;
            let ctx = |what: &'static str| move |e| ProbeError::io(format!("accepted #{i} from {peer}: {what}"), e);
            stream.set_nonblocking(false).map_err(ctx("set blocking"))?;
            stream.set_read_timeout(Some(idle)).map_err(ctx("set read timeout"))?;
            let mut head = [0u8; 8];
            stream.read_exact(&mut head).map_err(ctx("reading the frame header"))?;
            let [i0, i1, i2, i3, l0, l1, l2, l3] = head;
            let (idx, len) = (u32::from_le_bytes([i0, i1, i2, i3]), u32::from_le_bytes([l0, l1, l2, l3]));
            if len > MAX_PAYLOAD {
                return Err(ProbeError::Protocol(format!("accepted #{i} from {peer}: frame length {len} too large")));
            }
            io::copy(&mut (&mut stream).take(u64::from(len)), &mut io::sink()).map_err(ctx("reading the payload"))?;
            order.push(idx);
        }
        Ok(ListenReport {
            stats: AcceptOrderStats::from_order(&order),
            order,
            elapsed_us: start.elapsed().as_micros() as u64,
        })
    }
}

/// Binds `addr`, accepts `k` connections and reports their order.
pub fn listen(addr: SocketAddr, k: u32) -> Result<ListenReport, ProbeError> {
    ProbeListener::bind(addr)?.accept_k(k, DEFAULT_IDLE_TIMEOUT)
}

fn wait_readable(fd: std::os::fd::BorrowedFd<'_>, timeout: Duration) -> io::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        match nix::poll::poll(&mut [PollFd::new(fd, PollFlags::POLLIN)], ms) {
            Ok(n) if n > 0 => return Ok(()),
            Ok(_) if left.is_zero() || ms == 0 => return Err(io::ErrorKind::TimedOut.into()),
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}
