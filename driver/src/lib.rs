//! bootsim-driver, the async driver: runs a core [`Rank`](bootsim_core::Rank) or [`Root`](bootsim_core::Root)
//! over any socket [`Backend`], carrying out each [`Output`](bootsim_core::Output) in order and
//! feeding back every [`Input`](bootsim_core::Input). Nothing of the protocol lives here.
//!
//! Per connection, one task owns the write half and executes writes, drains and the close in
//! the order the state machine asked for them; another task reads and forwards bytes. Time is
//! `tokio::time`, converted to core [`Instant`](bootsim_core::Instant)s from an epoch taken at
//! driver start, so the same code runs under tokio's paused clock or a turmoil simulation.

mod conn;
mod dial;
mod drain;
mod io;
mod record;
mod run;
mod strangers;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use bootsim_core::{BootstrapError, Completion, Culprit, Event, Listener};
use tokio::io::{AsyncRead, AsyncWrite};

pub use dial::{retry_dial, Attempt, DialFailed};
pub use drain::{poll_drain, DrainOutcome, DrainReport};
pub use record::{rank_record, run_of};
pub use run::{run_rank, run_root, run_root_notify};
pub use strangers::is_stranger_dropped;

/// How long the driver waits, once finished, for queued writes to reach the kernel.
pub const FLUSH_BOUND: Duration = Duration::from_secs(5);

/// A socket implementation: real tokio sockets, or a simulated network.
pub trait Backend: Clone + Send + Sync + 'static {
    /// A listening socket.
    type Listener: Send + Sync + 'static;
    /// An established connection.
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// The read half of a [`Backend::Stream`].
    type Reader: AsyncRead + Unpin + Send + 'static;
    /// The write half of a [`Backend::Stream`] (drains are asked of it).
    type Writer: AsyncWrite + Unpin + Send + 'static;

    /// Opens `which` listener; returns it and the address peers must dial.
    fn listen(&self, which: Listener) -> impl Future<Output = std::io::Result<(Self::Listener, SocketAddr)>> + Send;
    /// Takes the next connection from the accept queue.
    fn accept(&self, l: &Self::Listener) -> impl Future<Output = std::io::Result<(Self::Stream, SocketAddr)>> + Send;
    /// Connects to `addr`, retrying as NVSHMEM does (refused and timed-out attempts).
    fn connect(&self, addr: SocketAddr) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;
    /// Splits a stream into halves that can be used from two tasks.
    fn split(&self, s: Self::Stream) -> (Self::Reader, Self::Writer);
    /// Tells the backend which state-machine connection a write half carries (a simulated
    /// backend uses it to join protocol events with its own connection records). Optional.
    fn identify(&self, _conn: bootsim_core::ConnId, _w: &Self::Writer) {}
    /// Told, before the rank blocks, what it waits for and what its unexpected list holds (a
    /// simulated backend reports it if the run ends unfinished). Optional.
    fn report_wait(&self, _waiting: Option<String>, _unexpected: Vec<(i32, i32)>) {}
    /// Told each protocol event as it happens (a simulated backend keeps those of a rank that
    /// never finishes, whose [`RankRun`] is never returned). Optional.
    fn report_event(&self, _at: bootsim_core::Instant, _event: &bootsim_core::Event) {}
    /// Told each completion as it happens, for the same reason. Optional.
    fn report_completion(&self, _at: bootsim_core::Instant, _completion: &bootsim_core::Completion) {}
    /// Waits until the peer's kernel acknowledged every byte written, for at most `timeout`
    /// (with [`poll_drain`], reading the backend's send queue).
    fn drain(&self, w: &Self::Writer, timeout: Duration) -> impl Future<Output = DrainReport> + Send;
}

/// What a rank did: every completion (init first) and every protocol event, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RankRun {
    /// Completions in order; init is the first.
    pub completions: Vec<Completion>,
    /// Protocol events in order.
    pub events: Vec<Event>,
    /// When each completion happened (driver clock, from the driver's start).
    pub completed_at: Vec<bootsim_core::Instant>,
    /// When each event happened (driver clock, from the driver's start).
    pub events_at: Vec<bootsim_core::Instant>,
}

/// What the root did: its protocol events (check-ins, dropped strangers) in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RootRun {
    /// Protocol events in order.
    pub events: Vec<Event>,
    /// When each event happened (driver clock, from the driver's start).
    pub events_at: Vec<bootsim_core::Instant>,
}

impl DriverError {
    /// The peer whose loss made rank `me` fail, if another's did.
    pub fn culprit(&self, me: u32) -> Option<Culprit> {
        match self {
            DriverError::Failed { culprit, .. } => *culprit,
            DriverError::Root(e) => e.culprit(me),
            DriverError::Setup(_) => None,
        }
    }
}

/// Why a driver run failed.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// An operation (init included) failed; the core's error names rank, operation and step.
    #[error("{error}")]
    Failed {
        /// The core's error.
        error: BootstrapError,
        /// Operations that completed before it (init counts).
        completed: usize,
        /// Everything the rank did, the failed completion last.
        run: Box<RankRun>,
        /// The peer whose loss made it fail ([`BootstrapError::culprit`]; for rank 0, what its
        /// root knew), `None` when the rank found the fault itself.
        culprit: Option<Culprit>,
    },
    /// The root failed (its error names what it was waiting for).
    #[error("{0}")]
    Root(BootstrapError),
    /// Setting up the run failed (runtime, unique-ID exchange).
    #[error("{0}")]
    Setup(String),
}
