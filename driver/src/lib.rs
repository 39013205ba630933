//! bootsim-driver, the async driver: runs any protocol's sans-IO node (a
//! [`bootsim_core::seam::Node`]: a rank or the root) over any socket [`Backend`], carrying out
//! each [`Effect`](bootsim_core::seam::Effect) in order, recording each
//! [`Observation`](bootsim_core::seam::Observation) and feeding back every
//! [`Input`](bootsim_core::seam::Input). Nothing of any protocol lives here: a protocol's
//! callers build its nodes and hand them to [`run_rank`] and [`run_root`].
//!
//! Per connection, one task owns the write half and executes writes, drains and the close in
//! the order the state machine asked for them; another task reads and forwards bytes. Time is
//! `tokio::time`, converted to core [`Instant`]s from an epoch taken at driver start, so the
//! same code runs under tokio's paused clock or a turmoil simulation.

#![warn(missing_docs)]

mod conn;
mod dial;
mod drain;
mod io;
mod kept;
mod record;
mod run;
mod strangers;
#[cfg(test)]
mod tests;

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use bootsim_core::seam::{Completed, ListenerKey, Node};
use bootsim_core::{Culprit, Instant};
use tokio::io::{AsyncRead, AsyncWrite};

pub use dial::{retry_dial, Attempt, DialFailed};
pub use drain::{poll_drain, DrainOutcome, DrainReport};
pub use kept::{Kept, Progress, Wait};
pub use record::{rank_record, root_error, run_of};
pub use run::{run_rank, run_rank_watched, run_root, run_root_notify};
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

    /// Opens the protocol's listener `which` (its [`ListenerKey::port`] in a simulated world;
    /// the root's, [`ListenerKey::is_root`], where the world says the rendezvous is); returns
    /// it and the address peers must dial.
    fn listen<L: ListenerKey + Send>(
        &self,
        which: L,
    ) -> impl Future<Output = std::io::Result<(Self::Listener, SocketAddr)>> + Send;
    /// Takes the next connection from the accept queue.
    fn accept(&self, l: &Self::Listener) -> impl Future<Output = std::io::Result<(Self::Stream, SocketAddr)>> + Send;
    /// Connects to `addr`, retrying as the protocol's world does (refused and timed-out attempts).
    fn connect(&self, addr: SocketAddr) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;
    /// Splits a stream into halves that can be used from two tasks.
    fn split(&self, s: Self::Stream) -> (Self::Reader, Self::Writer);
    /// Tells the backend which state-machine connection a write half carries (a simulated
    /// backend uses it to join protocol events with its own connection records). Optional.
    fn identify(&self, _conn: bootsim_core::ConnId, _w: &Self::Writer) {}
    /// Waits until the peer's kernel acknowledged every byte written, for at most `timeout`
    /// (with [`poll_drain`], reading the backend's send queue).
    fn drain(&self, w: &Self::Writer, timeout: Duration) -> impl Future<Output = DrainReport> + Send;
}

/// What a world watches of a node while the driver runs it (a simulated world keeps what a
/// node that never returns did, and what it waits for). Every hook is optional; `()` watches
/// nothing.
pub trait Watch<N: Node> {
    /// The node is about to block for its next input or timeout (it can be asked what it
    /// waits for and what its unexpected list holds).
    fn blocked(&mut self, _node: &N) {}
    /// The node observed `event` at `at` (driver clock).
    fn event(&mut self, _at: Instant, _event: &N::Event) {}
    /// One of the node's operations ended at `at` (driver clock).
    fn completion(&mut self, _at: Instant, _completion: &N::Completion) {}
}

impl<N: Node> Watch<N> for () {}

/// A node the driver runs: any seam [`Node`] whose listener keys move between tasks, whose
/// events print in debug logs and whose errors can be kept (the first failure is returned).
pub trait Driven: Node<Listener: Send, Event: fmt::Debug, Completion: Completed<Error: Clone>> {}

impl<N> Driven for N where N: Node<Listener: Send, Event: fmt::Debug, Completion: Completed<Error: Clone>> {}

/// A [`Driven`] node on a task of its own (it, its events and its errors move between
/// threads), whose progress a world keeps ([`Kept`]: its events and completions are cloned).
pub trait TaskNode:
    Driven + Send + 'static + Node<Event: Clone + Send, Completion: Clone + Send + Completed<Error: Send>>
{
}

impl<N> TaskNode for N where
    N: Driven + Send + 'static + Node<Event: Clone + Send, Completion: Clone + Send + Completed<Error: Send>>
{
}

/// What a node did: every completion (init first) and every protocol event, in order.
pub struct NodeRun<N: Node> {
    /// Completions in order; init is the first (the root's session is its only one).
    pub completions: Vec<N::Completion>,
    /// Protocol events in order.
    pub events: Vec<N::Event>,
    /// When each completion happened (driver clock, from the driver's start).
    pub completed_at: Vec<Instant>,
    /// When each event happened (driver clock, from the driver's start).
    pub events_at: Vec<Instant>,
}

impl<N: Node> Default for NodeRun<N> {
    fn default() -> Self {
        NodeRun { completions: Vec::new(), events: Vec::new(), completed_at: Vec::new(), events_at: Vec::new() }
    }
}

impl<N: Node> Clone for NodeRun<N>
where
    N::Completion: Clone,
    N::Event: Clone,
{
    fn clone(&self) -> Self {
        NodeRun {
            completions: self.completions.clone(),
            events: self.events.clone(),
            completed_at: self.completed_at.clone(),
            events_at: self.events_at.clone(),
        }
    }
}

impl<N: Node> fmt::Debug for NodeRun<N>
where
    N::Completion: fmt::Debug,
    N::Event: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeRun")
            .field("completions", &self.completions)
            .field("events", &self.events)
            .field("completed_at", &self.completed_at)
            .field("events_at", &self.events_at)
            .finish()
    }
}

impl<N: Node> PartialEq for NodeRun<N>
where
    N::Completion: PartialEq,
    N::Event: PartialEq,
{
    fn eq(&self, other: &Self) -> bool {
        self.completions == other.completions
            && self.events == other.events
            && self.completed_at == other.completed_at
            && self.events_at == other.events_at
    }
}

/// How a driver run of node `N` ended: what it did, or why it failed.
pub type RunResult<N> = Result<NodeRun<N>, DriverError<N>>;

/// The typed error of node `N`'s operations.
pub type ErrorOf<N> = <<N as Node>::Completion as Completed>::Error;

/// Why a driver run of node `N` failed.
pub enum DriverError<N: Node> {
    /// An operation (init included) failed; the protocol's error names rank, operation and step.
    Failed {
        /// The protocol's error.
        error: ErrorOf<N>,
        /// Operations that completed before it (init counts).
        completed: usize,
        /// Everything the rank did, the failed completion last.
        run: Box<NodeRun<N>>,
        /// The peer whose loss made it fail ([`Completed::culprit`]; for rank 0, what its
        /// root knew), `None` when the rank found the fault itself.
        culprit: Option<Culprit>,
    },
    /// The root failed (its error names what it was waiting for).
    Root(ErrorOf<N>),
    /// Setting up the run failed (runtime, unique-ID exchange).
    Setup(String),
}

impl<N: Node> DriverError<N> {
    /// The peer whose loss made rank `me` fail, if another's did.
    pub fn culprit(&self, me: u32) -> Option<Culprit> {
        match self {
            DriverError::Failed { culprit, .. } => *culprit,
            DriverError::Root(e) => N::Completion::culprit(me, e),
            DriverError::Setup(_) => None,
        }
    }
}

impl<N: Node> fmt::Display for DriverError<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::Failed { error, .. } => write!(f, "{error}"),
            DriverError::Root(error) => write!(f, "{error}"),
            DriverError::Setup(why) => f.write_str(why),
        }
    }
}

impl<N: Node> fmt::Debug for DriverError<N>
where
    ErrorOf<N>: fmt::Debug,
    N::Completion: fmt::Debug,
    N::Event: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::Failed { error, completed, run, culprit } => f
                .debug_struct("Failed")
                .field("error", error)
                .field("completed", completed)
                .field("run", run)
                .field("culprit", culprit)
                .finish(),
            DriverError::Root(error) => f.debug_tuple("Root").field(error).finish(),
            DriverError::Setup(why) => f.debug_tuple("Setup").field(why).finish(),
        }
    }
}

impl<N: Node> std::error::Error for DriverError<N>
where
    ErrorOf<N>: fmt::Debug,
    N::Completion: fmt::Debug,
    N::Event: fmt::Debug,
{
}
