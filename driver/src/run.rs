//! The driver loop of a node (a rank or the root): one loop for both, and for any protocol.

use std::net::SocketAddr;

use bootsim_core::seam::{Completed, Observation, Output};
use tokio::sync::oneshot;

use super::io::Io;
use super::strangers::StrangerLog;
use super::{Backend, Driven, DriverError, ErrorOf, NodeRun, Watch};

/// Runs rank `rank`'s node (its operations queued on it): init, then each operation (the node
/// starts each itself), stopping at the first error; then closes every connection and
/// listener and lets queued bytes flush.
pub async fn run_rank<B: Backend, N: Driven>(backend: B, rank: u32, node: N) -> Result<NodeRun<N>, DriverError<N>> {
    run_rank_watched(backend, rank, node, ()).await
}

/// [`run_rank`], telling `watch` what the rank does as it happens (for a world that must know
/// what a rank that never returns did and waits for).
pub async fn run_rank_watched<B, N, W>(backend: B, rank: u32, node: N, watch: W) -> Result<NodeRun<N>, DriverError<N>>
where
    B: Backend,
    N: Driven,
    W: Watch<N>,
{
    let (run, failure) = drive(backend, format!("rank {rank}"), node, watch, None).await;
    match failure {
        Some(error) => {
            let completed = run.completions.iter().filter(|c| c.result().is_ok()).count();
            let culprit = N::Completion::culprit(rank, &error);
            Err(DriverError::Failed { error, completed, run: Box::new(run), culprit })
        }
        None => Ok(run),
    }
}

/// Runs the root's node until its session ends (every rank told what it needed, or failed).
pub async fn run_root<B: Backend, N: Driven>(backend: B, node: N) -> Result<NodeRun<N>, DriverError<N>> {
    run_root_notify(backend, node, None).await
}

/// [`run_root`], sending the rendezvous address (where the root's listener,
/// [`bootsim_core::seam::ListenerKey::is_root`], listens) on `notify` once it listens (for
/// writing the unique ID when the port is ephemeral).
pub async fn run_root_notify<B: Backend, N: Driven>(
    backend: B,
    node: N,
    notify: Option<oneshot::Sender<SocketAddr>>,
) -> Result<NodeRun<N>, DriverError<N>> {
    match drive(backend, "root".to_string(), node, (), notify).await {
        (_, Some(error)) => Err(DriverError::Root(error)),
        (run, None) => Ok(run),
    }
}

/// The one driver loop: carries out the node's effects, records its observations, feeds it
/// inputs and timeouts until it finishes or an operation fails; then closes the node and lets
/// queued bytes flush. Returns what it did and the first failure.
async fn drive<B, N, W>(
    backend: B,
    who: String,
    mut node: N,
    mut watch: W,
    mut notify: Option<oneshot::Sender<SocketAddr>>,
) -> (NodeRun<N>, Option<ErrorOf<N>>)
where
    B: Backend,
    N: Driven,
    W: Watch<N>,
{
    let mut io = Io::new(backend, who.clone());
    let mut run = NodeRun::default();
    let mut failure: Option<ErrorOf<N>> = None;
    let mut strangers = StrangerLog::default();
    // The frames the state machine writes; reused from one write to the next.
    let mut tx = Vec::new();
    loop {
        while let Some(out) = node.poll_output(&mut tx) {
            match out {
                Output::Observe(Observation::Completed(c)) => {
                    let ok = c.result().is_ok();
                    tracing::debug!(%who, op = c.op(), ok, "completed");
                    if let (None, Err(e)) = (&failure, c.result()) {
                        failure = Some(e.clone());
                    }
                    let at = io.now();
                    watch.completion(at, &c);
                    run.completions.push(c);
                    run.completed_at.push(at);
                }
                Output::Observe(Observation::Event(e)) => {
                    tracing::debug!(%who, event = ?e, "event");
                    strangers.observe(&who, &e);
                    let at = io.now();
                    watch.event(at, &e);
                    run.events.push(e);
                    run.events_at.push(at);
                }
                Output::Effect(effect) => io.execute(effect, &tx).await,
            }
        }
        if let (Some(addr), Some(_)) = (io.root_addr(), notify.as_ref()) {
            let _ = notify.take().map(|n| n.send(addr));
        }
        if failure.is_some() || node.is_finished() {
            break;
        }
        watch.blocked(&node);
        match io.next(node.poll_timeout()).await {
            Some(d) => node.handle(io.now(), d.as_input()),
            None => node.handle_timeout(io.now()),
        }
    }
    let leaked = node.unexpected();
    node.close(io.now());
    if !leaked.is_empty() {
        tracing::warn!(%who, ?leaked, "unexpected-list entries left at close");
    }
    while let Some(out) = node.poll_output(&mut tx) {
        if let Output::Effect(effect) = out {
            io.execute(effect, &tx).await;
        }
    }
    io.finish().await;
    (run, failure)
}
