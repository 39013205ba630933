//! The turmoil implementation of the driver's [`Backend`]: turmoil sockets, with accept order
//! and send-queue drains decided by the kernel model through the [`GateHandle`].

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bootsim_core::seam::ListenerKey;
use bootsim_core::{ConnectFailure, DrainPoll, RetryPolicy};
use bootsim_driver::{poll_drain, retry_dial, Attempt, Backend, DialFailed, DrainOutcome, DrainReport};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use turmoil::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::gate::{sim_now, GateHandle, Handshake};
use crate::kernel::{ListenerId, SockId};

use bootsim_core::drain::DRAIN_POLL;
/// How often blocked accepts (and connects) look at the model's queues.
const ACCEPT_POLL: Duration = Duration::from_micros(100);
/// Host `h`'s address in the simulation (turmoil hosts are named `h0`, `h1`, ...).
pub fn host_ip(h: u32) -> IpAddr {
    turmoil::lookup(format!("h{h}"))
}

/// The turmoil backend of one host.
#[derive(Clone)]
pub struct TurmoilNet {
    /// This host.
    pub host: u32,
    /// The shared kernel gate.
    pub gate: GateHandle,
    /// NVSHMEM's connect retry ([`RetryPolicy::default`] is upstream's constants).
    pub retry: RetryPolicy,
}

/// A listener: turmoil's, drained eagerly into the gate by a task, and the model's.
pub struct GateListener {
    model: ListenerId,
    acceptor: tokio::task::AbortHandle,
    gate: GateHandle,
}

impl Drop for GateListener {
    /// Closing the listener stops the eager acceptor (dropping turmoil's listener) and closes
    /// the model's.
    fn drop(&mut self) {
        self.acceptor.abort();
        if turmoil::in_simulation() {
            self.gate.lock().close_listener(self.model);
        }
    }
}

/// A connection: turmoil's stream plus its model socket.
pub struct GateStream {
    inner: turmoil::net::TcpStream,
    /// The model's client socket, when this end dialed (writes are mirrored into the model).
    sock: Option<SockId>,
    /// The model socket of this end (client or child), to join protocol events with the model.
    id: Option<SockId>,
}

/// The write half: mirrors every write and the close into the model (connector side).
pub struct GateWriter {
    inner: OwnedWriteHalf,
    sock: Option<SockId>,
    id: Option<SockId>,
    gate: GateHandle,
    closed: bool,
}

fn host_of(ip: IpAddr) -> Option<u32> {
    let name = turmoil::reverse_lookup(ip)?;
    name.strip_prefix('h')?.parse().ok()
}

impl TurmoilNet {
    /// One connect attempt: turmoil connects at once (the eager acceptor); the model decides
    /// when and how the kernel's handshake ends, as a blocking connect() would see it.
    async fn dial_once(&self, to: u32, addr: SocketAddr) -> io::Result<(GateStream, Handshake)> {
        let inner = turmoil::net::TcpStream::connect(addr).await?;
        let local = inner.local_addr()?;
        let sock = self.gate.lock().connected(self.host, to, addr.port(), local, addr);
        loop {
            match self.gate.lock().handshake(sock) {
                Handshake::Pending => {}
                end => return Ok((GateStream { inner, sock: Some(sock), id: Some(sock) }, end)),
            }
            tokio::time::sleep(ACCEPT_POLL).await;
        }
    }
}

/// How one simulated attempt ended for NVSHMEM's retry: the model's handshake (RST is a
/// refusal, unanswered SYNs a timeout), or turmoil's own refusal when nothing is bound.
pub fn attempt_of<T>(dialed: io::Result<(T, Handshake)>) -> Attempt<T> {
    match dialed {
        Ok((stream, Handshake::Established)) => Attempt::Connected(stream),
        Ok((_, Handshake::Refused)) => {
            Attempt::Failed(ConnectFailure::Refused, io::ErrorKind::ConnectionRefused.into())
        }
        Ok((_, Handshake::TimedOut | Handshake::Pending)) => {
            Attempt::Failed(ConnectFailure::TimedOut, io::ErrorKind::TimedOut.into())
        }
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Attempt::Failed(ConnectFailure::Refused, e),
        Err(e) => Attempt::Fatal(e),
    }
}

/// The turmoil driver's connect: NVSHMEM's retry (adapters' [`retry_dial`], core's state
/// machine) over `dial`, one attempt each; a give-up fails with "connect to ADDR: " and core's
/// [`bootsim_core::GaveUp`] text. Tests script `dial`; the backend dials turmoil and the model.
pub async fn connect_retrying<T, F, Fut>(addr: SocketAddr, policy: &RetryPolicy, mut dial: F) -> io::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = io::Result<(T, Handshake)>>,
{
    let attempt = || {
        let dialed = dial();
        async move { attempt_of(dialed.await) }
    };
    match retry_dial(policy, attempt).await {
        Ok((stream, _)) => Ok(stream),
        Err(DialFailed { gave_up: Some(why), .. }) => {
            Err(io::Error::new(io::ErrorKind::TimedOut, format!("connect to {addr}: {why}")))
        }
        Err(DialFailed { last, .. }) => Err(last),
    }
}

impl Backend for TurmoilNet {
    type Listener = GateListener;
    type Stream = GateStream;
    type Reader = OwnedReadHalf;
    type Writer = GateWriter;

    async fn listen<L: ListenerKey + Send>(&self, which: L) -> io::Result<(GateListener, SocketAddr)> {
        let port = which.port();
        let tl = turmoil::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).await?;
        let addr = SocketAddr::new(host_ip(self.host), port);
        let model = self.gate.lock().listen(self.host, port)?;
        let gate = self.gate.clone();
        let acceptor = tokio::spawn(async move {
            while let Ok((stream, client)) = tl.accept().await {
                gate.lock().arrived(stream, client, addr);
            }
        })
        .abort_handle();
        Ok((GateListener { model, acceptor, gate: self.gate.clone() }, addr))
    }

    async fn accept(&self, l: &GateListener) -> io::Result<(GateStream, SocketAddr)> {
        loop {
            let got = self.gate.lock().try_accept(l.model);
            if let Some((inner, from, child)) = got {
                return Ok((GateStream { inner, sock: None, id: Some(child) }, from));
            }
            tokio::time::sleep(ACCEPT_POLL).await;
        }
    }

    async fn connect(&self, addr: SocketAddr) -> io::Result<GateStream> {
        let to = host_of(addr.ip()).ok_or_else(|| io::Error::other(format!("no simulated host at {addr}")))?;
        connect_retrying(addr, &self.retry, || self.dial_once(to, addr)).await
    }

    fn split(&self, s: GateStream) -> (OwnedReadHalf, GateWriter) {
        let (r, w) = s.inner.into_split();
        (r, GateWriter { inner: w, sock: s.sock, id: s.id, gate: self.gate.clone(), closed: false })
    }

    fn identify(&self, conn: bootsim_core::ConnId, w: &GateWriter) {
        if let Some(id) = w.id {
            self.gate.lock().identify(self.host, conn, id);
        }
    }

    async fn drain(&self, w: &GateWriter, timeout: Duration) -> DrainReport {
        let Some(sock) = w.sock else {
            return DrainReport { outcome: DrainOutcome::Drained, waited: Duration::ZERO, polls: 0 };
        };
        let start = sim_now();
        let poll = DrainPoll { interval: DRAIN_POLL, bound: timeout };
        poll_drain(poll, || sim_now() - start, || Ok(self.gate.lock().outq(sock) as u64)).await
    }
}

impl AsyncWrite for GateWriter {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let (Poll::Ready(Ok(n)), Some(sock)) = (&r, self.sock) {
            self.gate.lock().write(sock, *n);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        if r.is_ready() && !self.closed {
            self.closed = true;
            if let Some(sock) = self.sock {
                self.gate.lock().close(sock);
            }
        }
        r
    }
}

impl AsyncRead for GateStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for GateStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
