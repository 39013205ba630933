//! The driver loops of a rank and of the root.

use std::net::SocketAddr;

use bootsim_core::{BootstrapError, Completion, Op, Output, Rank, RankConfig, Root, RootConfig};
use tokio::sync::oneshot;

use super::io::Io;
use super::strangers::StrangerLog;
use super::{Backend, DriverError, RankRun, RootRun};

/// Runs one rank: init, then `ops` in order (the rank starts each itself), stopping at the
/// first error; then closes every
/// connection and listener and lets queued bytes flush.
pub async fn run_rank<B: Backend>(backend: B, cfg: RankConfig, ops: Vec<Op>) -> Result<RankRun, DriverError> {
    let who = format!("rank {}", cfg.rank);
    let me = cfg.rank;
    let mut io = Io::new(backend, who.clone());
    let mut rank = Rank::new(cfg, io.now());
    for op in ops {
        rank.push(io.now(), op);
    }
    let mut run = RankRun::default();
    let mut failure: Option<BootstrapError> = None;
    let mut strangers = StrangerLog::default();
    // The frames the state machine writes; reused from one write to the next.
    let mut tx = Vec::new();
    let mut last_waiting = None;
    loop {
        while let Some(out) = rank.poll_output(&mut tx) {
            match out {
                Output::Completed(c) => {
                    tracing::debug!(%who, op = c.op.0, kind = %c.kind, ok = c.result.is_ok(), "completed");
                    if let Err(e) = &c.result {
                        failure.get_or_insert_with(|| e.clone());
                    }
                    io.backend().report_completion(io.now(), &c);
                    run.completions.push(c);
                    run.completed_at.push(io.now());
                }
                Output::Event(e) => {
                    tracing::debug!(%who, event = ?e, "event");
                    strangers.observe(&who, &e);
                    io.backend().report_event(io.now(), &e);
                    run.events.push(e);
                    run.events_at.push(io.now());
                }
                other => io.execute(other, &tx).await,
            }
        }
        if failure.is_some() || rank.is_finished() {
            break;
        }
        // Formatting what the rank waits in on every wake-up was about 4 % of a turmoil run;
        // report it only when it changed.
        let now_waiting = (rank.waiting(), rank.unexpected());
        if last_waiting.as_ref() != Some(&now_waiting) {
            io.backend().report_wait(now_waiting.0.as_ref().map(ToString::to_string), now_waiting.1.clone());
            last_waiting = Some(now_waiting);
        }
        match io.next(rank.poll_timeout()).await {
            Some(d) => rank.handle(io.now(), d.as_input()),
            None => rank.handle_timeout(io.now()),
        }
    }
    let leaked = rank.close(io.now());
    if !leaked.is_empty() {
        tracing::warn!(%who, ?leaked, "unexpected-list entries left at close");
    }
    while let Some(out) = rank.poll_output(&mut tx) {
        io.execute(out, &tx).await;
    }
    io.finish().await;
    match failure {
        Some(error) => {
            let completed = run.completions.iter().filter(|c| c.result.is_ok()).count();
            let culprit = error.culprit(me);
            Err(DriverError::Failed { error, completed, run: Box::new(run), culprit })
        }
        None => Ok(run),
    }
}

/// Runs the root until every rank was told its successor (or it failed).
pub async fn run_root<B: Backend>(backend: B, cfg: RootConfig) -> Result<RootRun, DriverError> {
    run_root_notify(backend, cfg, None).await
}

/// [`run_root`], sending the rendezvous address on `notify` once the root listens (for writing
/// the unique ID when the port is ephemeral).
pub async fn run_root_notify<B: Backend>(
    backend: B,
    cfg: RootConfig,
    mut notify: Option<oneshot::Sender<SocketAddr>>,
) -> Result<RootRun, DriverError> {
    let mut io = Io::new(backend, "root".to_string());
    let mut root = Root::new(cfg, io.now());
    let mut result: Option<Completion> = None;
    let mut run = RootRun::default();
    let mut strangers = StrangerLog::default();
    // The frames the state machine writes; reused from one write to the next.
    let mut tx = Vec::new();
    loop {
        while let Some(out) = root.poll_output(&mut tx) {
            match out {
                Output::Completed(c) => result = Some(c),
                Output::Event(e) => {
                    tracing::debug!(who = "root", event = ?e, "event");
                    strangers.observe("root", &e);
                    run.events_at.push(io.now());
                    run.events.push(e);
                }
                other => io.execute(other, &tx).await,
            }
        }
        if let (Some(addr), Some(_)) = (root.addr(), notify.as_ref()) {
            let _ = notify.take().map(|n| n.send(addr));
        }
        if result.is_some() {
            break;
        }
        match io.next(root.poll_timeout()).await {
            Some(d) => root.handle(io.now(), d.as_input()),
            None => root.handle_timeout(io.now()),
        }
    }
    io.finish().await;
    match result.map(|c| c.result) {
        Some(Err(e)) => Err(DriverError::Root(e)),
        _ => Ok(run),
    }
}
