//! Any protocol's root and N ranks as tasks of this process on the real kernel's loopback: the
//! protocol's own nodes ([`Protocol::nodes`]), run by the protocol-blind driver over
//! [`TokioNet`], judged by the protocol's own judge. The run has a loopback address of its own
//! (127.x.y.z), so the root's listener takes the port its key names ([`ListenerKey::port`], as in
//! simulation) without colliding with another run; the ranks' listeners take ephemeral ports
//! there. The ranks start once the root listens. A rank still running at the deadline is stopped
//! and recorded with what it waited for (the nodes have no timers of their own). [`run_ranks`]
//! runs ranks alone, built to check in to a root outside this process (a real library's).

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bootsim_core::seam::{Judge, ListenerKey, Node, Nodes, Protocol, Setup};
use bootsim_core::{RankRecord, RootEnd, RunRecord};
use bootsim_driver::{rank_record, root_error, run_rank_watched, run_root_notify, ErrorOf, Kept, RunResult, TaskNode};
use tokio::sync::oneshot;

use crate::tokio_sockets::TokioNet;

/// A local run's result.
pub struct LocalRun<P: Protocol> {
    /// Every rank's end as the real worlds record it (a rank stopped at the deadline:
    /// `unfinished`, with what it waited for; one whose node panicked: that error), and the
    /// root's end.
    pub record: RunRecord,
    /// What the protocol's judge concluded from the record.
    pub report: <P::Judge as Judge>::Report,
    /// Each rank's run or error, by rank; `None` for a rank stopped at the deadline.
    pub ranks: Vec<Option<RunResult<P::Node>>>,
    /// The loopback address the run had.
    pub ip: IpAddr,
    /// Wall time of the run.
    pub elapsed: Duration,
}

/// Runs `protocol`'s root and `n` ranks (its `variant`, its `workload` with payloads from
/// `seed`) on loopback, giving up on the ranks still running after `deadline`. Fails only when
/// it could not run: no runtime, or no free loopback address for the root's port.
pub fn run_local<P>(
    protocol: &P,
    variant: &P::Variant,
    workload: &P::Workload,
    seed: u64,
    n: u32,
    deadline: Duration,
) -> io::Result<LocalRun<P>>
where
    P: Protocol<Node: TaskNode>,
    ErrorOf<P::Node>: PartialEq,
{
    let started = std::time::Instant::now();
    let port = root_port::<<P::Node as Node>::Listener>()?;
    let ip = free_loopback(port)?;
    let setup = Setup { variant, workload, seed, n, root_ip: ip };
    let Nodes { root, ranks } = protocol.nodes(&setup);
    let net = TokioNet { rendezvous_port: port, ..TokioNet::new(ip) };
    let Ranks { record, ranks: ends } = run_on(net, Some(root), ranks, deadline)?;
    let mut judge = protocol.judge(&setup);
    judge.feed(&record);
    let report = judge.finish(&record);
    Ok(LocalRun { record, report, ranks: ends, ip, elapsed: started.elapsed() })
}

/// What [`run_ranks`] gives: the ranks' record (the root not observed) and each rank's run.
pub struct Ranks<N: TaskNode> {
    /// Every rank's end as the real worlds record it (as [`LocalRun::record`]).
    pub record: RunRecord,
    /// Each rank's run or error, by rank; `None` for a rank stopped at the deadline.
    pub ranks: Vec<Option<RunResult<N>>>,
}

/// Runs rank nodes built to check in to a root this process does not run (a real library's, at
/// the address their nodes were given), their listeners on `ip`, giving up on the ranks still
/// running after `deadline`. Fails only when it could not run (no runtime).
pub fn run_ranks<N: TaskNode>(ranks: Vec<N>, ip: IpAddr, deadline: Duration) -> io::Result<Ranks<N>>
where
    ErrorOf<N>: PartialEq,
{
    run_on(TokioNet::new(ip), None, ranks, deadline)
}

/// The root (if this run has it) and the ranks on `net` by the deadline, recorded.
fn run_on<N: TaskNode>(net: TokioNet, root: Option<N>, ranks: Vec<N>, deadline: Duration) -> io::Result<Ranks<N>>
where
    ErrorOf<N>: PartialEq,
{
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let kept: Vec<Kept<N>> = ranks.iter().map(|_| Kept::default()).collect();
    let Ran { ranks: ends, panicked, root } = rt.block_on(run_nodes(net, root, ranks, &kept, deadline));
    drop(rt);
    let records = ends.iter().zip(&kept).zip(0u32..).map(|((end, kept), r)| match end {
        Some(result) => rank_record(r, result),
        None => stopped(r, kept, panicked.iter().find(|(k, _)| *k == r).map(|(_, why)| why.as_str())),
    });
    let mut record = RunRecord::of_ranks(records.collect());
    record.root = root;
    Ok(Ranks { record, ranks: ends })
}

/// How the nodes of a local run ended.
struct Ran<N: TaskNode> {
    /// Every rank's end, `None` for one still running at the deadline (its task is dropped
    /// with the runtime) or one whose node panicked.
    ranks: Vec<Option<RunResult<N>>>,
    /// The ranks whose node panicked, with the panic's message.
    panicked: Vec<(u32, String)>,
    /// The root's end, as the judge's root checks read it (not observed without a root).
    root: RootEnd,
}

/// The root (if any) on its own task, then, once it listens, each rank on its own; every rank's
/// end, then the root's, all by the deadline.
async fn run_nodes<N: TaskNode>(
    net: TokioNet,
    root: Option<N>,
    ranks: Vec<N>,
    kept: &[Kept<N>],
    deadline: Duration,
) -> Ran<N> {
    let until = tokio::time::Instant::now() + deadline;
    let root = root.map(|root| {
        let (tx, listening) = oneshot::channel();
        (tokio::spawn(run_root_notify(net.clone(), root, Some(tx))), listening)
    });
    let root = match root {
        Some((task, listening)) => {
            // A root that failed to listen drops the sender: the ranks then report it missing.
            let _ = tokio::time::timeout_at(until, listening).await;
            Some(task)
        }
        None => None,
    };
    let tasks: Vec<_> = (0u32..)
        .zip(ranks)
        .zip(kept)
        .map(|((r, node), kept)| tokio::spawn(run_rank_watched(net.clone(), r, node, kept.clone())))
        .collect();
    let mut ends = Vec::with_capacity(tasks.len());
    let mut panicked = Vec::new();
    for (r, task) in (0u32..).zip(tasks) {
        ends.push(match tokio::time::timeout_at(until, task).await {
            Ok(Ok(result)) => Some(result),
            // A bug of the node's: said as such, with what it did (its Kept).
            Ok(Err(e)) => {
                panicked.push((r, panic_text(e)));
                None
            }
            // Still running: what it did and waits for is in its Kept.
            Err(_) => None,
        });
    }
    let Some(root) = root else { return Ran { ranks: ends, panicked, root: RootEnd::NotObserved } };
    let root = match tokio::time::timeout_at(until, root).await {
        Ok(Ok(Ok(_))) => RootEnd::Done,
        Ok(Ok(Err(e))) => RootEnd::Failed(root_error(&e)),
        Ok(Err(e)) => RootEnd::Failed(format!("the root's node panicked: {}", panic_text(e)).into()),
        Err(_) => RootEnd::Waiting("(still running at the deadline)".into()),
    };
    Ran { ranks: ends, panicked, root }
}

/// A task's panic message (or why it ended without one).
fn panic_text(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into()),
        Err(e) => e.to_string(),
    }
}

/// Rank `r` stopped at the deadline (what it did, and what it waited for), or ended by a
/// panic of its node (`panicked`: the message, an error of that rank's, not a hang).
fn stopped<N: TaskNode>(r: u32, kept: &Kept<N>, panicked: Option<&str>) -> RankRecord
where
    ErrorOf<N>: PartialEq,
{
    let progress = kept.take();
    let mut record = rank_record(r, &Ok(progress.run));
    let (waiting, unexpected) = progress.wait.unwrap_or_default();
    record.unexpected = unexpected;
    record.finished_at = None;
    match panicked {
        Some(why) => record.init = Some(format!("rank {r}'s node panicked: {why}").into()),
        None => record.unfinished = Some(waiting.unwrap_or_else(|| "(still running at the deadline)".into())),
    }
    record
}

/// The port of the protocol's root listener.
fn root_port<L: ListenerKey>() -> io::Result<u16> {
    let root = L::ALL.iter().find(|l| l.is_root());
    root.map(|l| l.port()).ok_or_else(|| io::Error::other("the protocol names no root listener"))
}

/// A loopback address of this run's own where `port` is free: 127.x.y.z from the process id
/// and a count of runs, the next one tried when it is taken.
fn free_loopback(port: u16) -> io::Result<IpAddr> {
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let mut last = None;
    for _ in 0..16 {
        let k = RUNS.fetch_add(1, Ordering::Relaxed);
        let x = std::process::id().wrapping_mul(0x9E37_79B1) ^ k.wrapping_mul(0x85EB_CA6B);
        let octet = |shift: u32| 1 + ((x >> shift) % 254) as u8;
        let ip = IpAddr::V4(Ipv4Addr::new(127, octet(0), octet(8), octet(16)));
        match std::net::TcpListener::bind(SocketAddr::new(ip, port)) {
            Ok(_) => return Ok(ip),
            Err(e) => last = Some(e),
        }
    }
    Err(last.map_or_else(
        || io::Error::other("no loopback address"),
        |e| io::Error::new(e.kind(), format!("no free loopback address for the root's port {port}: {e}")),
    ))
}
