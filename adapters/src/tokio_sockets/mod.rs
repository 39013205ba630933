//! The real-socket [`Backend`] and its one-rank-per-process session: tokio TCP on one interface address, NVSHMEM's connect retry
//! ([`os::connect_with_retry`]) and the SIOCOUTQ drain ([`os::drain`]).

#[cfg(test)]
mod flood_tests;
mod session;
#[cfg(test)]
mod tests;

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bootsim_core::seam::ListenerKey;
use bootsim_nvshmem::Limits;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

use bootsim_driver::{Backend, DrainReport};

use crate::os;
use bootsim_core::RetryPolicy;

pub use session::{
    read_uid_file, run_blocking, run_blocking_notify, run_blocking_until, run_process, write_atomically,
    write_uid_file, Rendezvous, SessionConfig,
};

/// Default no-progress bound for real sockets.
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default bound for an accepted connection's header.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// How many connections a real-socket listener reads headers of at once (see
/// [`Limits::read_ahead`]): enough for every honest peer of a burst, few enough that strangers
/// cannot exhaust descriptors.
pub const DEFAULT_READ_AHEAD: usize = 64;

/// Limits for real sockets: `op_timeout` (no progress), a 5 s header timeout, so a dead peer
/// ends in an error naming rank and step instead of a hang, and read-ahead, so strangers on a
/// listener delay honest peers by at most about one header timeout.
pub fn real_limits(op_timeout: Duration) -> Limits {
    Limits {
        op_timeout: Some(op_timeout),
        header_timeout: Some(DEFAULT_HEADER_TIMEOUT),
        read_ahead: Some(DEFAULT_READ_AHEAD),
        ..Limits::default()
    }
}

/// Tokio TCP sockets bound on one address.
#[derive(Clone, Debug)]
pub struct TokioNet {
    /// The address every listener binds (the bootstrap interface's).
    pub ip: IpAddr,
    /// Port of the root's rendezvous listener (0: ephemeral); rank listeners always use 0.
    pub rendezvous_port: u16,
    /// Connect retry policy (NVSHMEM's by default).
    pub retry: RetryPolicy,
    /// Drain poll interval (200 µs as upstream).
    pub drain_poll: Duration,
}

impl TokioNet {
    /// Sockets on `ip`, ephemeral ports, NVSHMEM's retry and drain poll.
    pub fn new(ip: IpAddr) -> Self {
        TokioNet { ip, rendezvous_port: 0, retry: RetryPolicy::default(), drain_poll: os::DEFAULT_POLL_INTERVAL }
    }
}

impl Backend for TokioNet {
    type Listener = TcpListener;
    type Stream = TcpStream;
    type Reader = OwnedReadHalf;
    type Writer = OwnedWriteHalf;

    async fn listen<L: ListenerKey + Send>(&self, which: L) -> io::Result<(TcpListener, SocketAddr)> {
        let port = if which.is_root() { self.rendezvous_port } else { 0 };
        let l = TcpListener::bind((self.ip, port)).await?;
        let addr = l.local_addr()?;
        Ok((l, addr))
    }

    async fn accept(&self, l: &TcpListener) -> io::Result<(TcpStream, SocketAddr)> {
        let (s, from) = l.accept().await?;
        s.set_nodelay(true)?;
        Ok((s, from))
    }

    async fn connect(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        os::connect_with_retry(addr, &self.retry).await.map_err(io::Error::other)
    }

    fn split(&self, s: TcpStream) -> (OwnedReadHalf, OwnedWriteHalf) {
        s.into_split()
    }

    async fn drain(&self, w: &OwnedWriteHalf, timeout: Duration) -> DrainReport {
        os::drain(w.as_ref(), timeout, self.drain_poll).await
    }
}
