//! `engine=turmoil`: every rank and the root is a turmoil host running the same async driver
//! as real sockets (`bootsim_driver`), over the `backend::TurmoilNet` backend whose
//! accept order and drains come from the kernel model.

pub(crate) mod backend;
pub(crate) mod gate;
mod watch;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use bootsim_core::seam::{Completed, Node as SeamNode, Nodes, Observed, Protocol, Setup};
use bootsim_core::{Awaited, ConnId, Instant, RecordedError};
use bootsim_driver::{root_error, run_rank_watched, run_root, DriverError, Kept, NodeRun, RunResult, TaskNode};

use super::outcome::{Node, Outcome};
use super::work_guard::WorkGuard;
use crate::case::Case;
use crate::kernel::{Kernel, SockId};
use backend::TurmoilNet;
use bootsim_core::seed::derive;
use gate::{sim_now, GateHandle};
use watch::RankWatch;

/// How long every unfinished rank must be stuck, with the kernel model idle, to end a run early.
const QUIESCENT: Duration = Duration::from_secs(2);
/// turmoil's tick: the resolution of every sleep and delivery in this engine. tokio's timer
/// wheel rounds sleeps up to whole milliseconds, so a shorter tick would let each host's clock
/// run ahead of turmoil's.
const TICK: Duration = Duration::from_millis(1);

/// turmoil's clock as a core instant, outside any host (where `turmoil::sim_elapsed` is unset).
fn now_of(sim: &turmoil::Sim<'_>) -> Instant {
    Instant::from_nanos(u64::try_from(sim.elapsed().as_nanos()).unwrap_or(u64::MAX))
}

/// A rank's end: when, and its run or error.
type Slot<N> = Arc<Mutex<Option<(Instant, RunResult<N>)>>>;
/// The root's end.
type RootSlot<N> = Arc<Mutex<Option<Result<(), DriverError<N>>>>>;

/// Runs a case of `protocol` (its `variant` and `workload`) on turmoil: each rank a host
/// running the async driver over the kernel model's accept order and drains, the root on
/// rank 0's host. `crash` names a rank whose host crashes at that simulated time.
pub fn run<P: Protocol<Node: TaskNode>>(
    protocol: &P,
    variant: &P::Variant,
    workload: &P::Workload,
    case: &Case,
    trace: bool,
    crash: Option<(u32, Duration)>,
) -> Outcome {
    let n = case.ranks();
    let kernel = Kernel::new(case.kernel_config().clone(), derive(case.seed(), "kernel", 0), n);
    let gate = GateHandle::new(kernel, trace);
    let mut sim = turmoil::Builder::new()
        .rng_seed(derive(case.seed(), "turmoil", 0))
        .epoch(UNIX_EPOCH)
        .simulation_duration(case.deadline() + Duration::from_secs(1))
        .tick_duration(TICK)
        .min_message_latency(Duration::ZERO)
        .max_message_latency(Duration::ZERO)
        .tcp_capacity(n as usize + 64)
        .build();
    // Hosts are named h0, h1, ... in order; naming h0 first gives it the address its host
    // gets when it registers below.
    let root_ip = sim.lookup("h0");
    let setup = Setup { variant, workload, seed: case.seed(), n, root_ip };
    let Nodes { root, ranks } = protocol.nodes(&setup);
    let slots: Vec<Slot<P::Node>> = (0..n).map(|_| Arc::new(Mutex::new(None))).collect();
    let progress: Vec<Kept<P::Node>> = (0..n).map(|_| Kept::default()).collect();
    let root_slot: RootSlot<P::Node> = Arc::new(Mutex::new(None));
    let mut root = Some(root);
    for (r, rank) in (0..n).zip(ranks) {
        // Its nodes, taken when the host starts.
        let nodes = Arc::new(Mutex::new(Some((rank, if r == 0 { root.take() } else { None }))));
        let (gate, slot, root_slot, progress) =
            (gate.clone(), slots[r as usize].clone(), root_slot.clone(), progress[r as usize].clone());
        // A host (not a client) so that it can be crashed; it is never restarted.
        sim.host(format!("h{r}"), move || {
            let taken = nodes.lock().unwrap_or_else(|p| p.into_inner()).take();
            let (gate, slot, root_slot, progress) = (gate.clone(), slot.clone(), root_slot.clone(), progress.clone());
            async move {
                let Some((rank, root)) = taken else { return Ok(()) };
                let net = TurmoilNet { host: r, gate: gate.clone(), retry: bootsim_core::RetryPolicy::default() };
                let root = root.map(|root| {
                    let net = net.clone();
                    tokio::spawn(async move {
                        let res = run_root(net, root).await;
                        *root_slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(res.map(|_| ()));
                    })
                });
                let res = run_rank_watched(net, r, rank, RankWatch::new(r, gate, progress)).await;
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some((sim_now(), res));
                if let Some(root) = root {
                    let _ = root.await;
                }
                Ok(())
            }
        });
    }
    let mut crashed = None;
    // As the fast engine: a case too costly to simulate ends with an error naming its knobs
    // (each turmoil tick is a step; the kernel model's work counts too).
    let mut guard = WorkGuard::new(n);
    let mut gave_up = None;
    loop {
        if let Some((rank, at)) = crash {
            if crashed.is_none() && sim.elapsed() >= at {
                sim.crash(format!("h{rank}"));
                crashed = Some(rank);
            }
        }
        let all = slots
            .iter()
            .enumerate()
            .all(|(r, s)| Some(r as u32) == crashed || s.lock().unwrap_or_else(|p| p.into_inner()).is_some());
        if all {
            break;
        }
        if sim.elapsed() >= case.deadline() {
            break;
        }
        // Unfinished ranks all blocked and the network idle: nothing can happen any more, so
        // the deadline would only confirm the hang (checked every 100 ticks; cheap).
        if sim.elapsed().as_millis() % 100 == 0 && gate.peek().quiescent(now_of(&sim), QUIESCENT) {
            break;
        }
        if let Some(why) = guard.step(now_of(&sim), case, || gate.peek().kernel().work()) {
            gave_up = Some(why);
            break;
        }
        // Hosts (not clients) run the ranks, so step()'s "all clients done" means nothing here.
        match sim.step() {
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "turmoil stopped");
                break;
            }
        }
    }
    let end = Instant::from_nanos(sim.elapsed().as_nanos() as u64);
    drop(sim);
    let ends = Ends { slots, progress, root: root_slot, end, crashed };
    let mut out = collect(protocol, case, ends, gate);
    out.gave_up = gave_up;
    out
}

/// What the hosts left when the simulation stopped.
struct Ends<N: SeamNode> {
    slots: Vec<Slot<N>>,
    progress: Vec<Kept<N>>,
    root: RootSlot<N>,
    end: Instant,
    crashed: Option<u32>,
}

fn collect<P: Protocol<Node: TaskNode>>(protocol: &P, case: &Case, ends: Ends<P::Node>, gate: GateHandle) -> Outcome {
    let Ends { slots, progress, root, end, crashed } = ends;
    let mut out = Outcome::new(case.ranks() as usize);
    let mut rank_lines: BTreeMap<u32, Vec<(Instant, String)>> = BTreeMap::new();
    let gate = gate.into_inner();
    let conn_ids = gate.as_ref().map(|g| g.conn_ids.clone()).unwrap_or_default();
    let waits = gate.as_ref().map(|g| g.waits.clone()).unwrap_or_default();
    let mut rec = Recorder { protocol, out: &mut out, ids: &conn_ids, lines: &mut rank_lines };
    for ((r, slot), progress) in (0u32..).zip(slots).zip(progress) {
        let taken = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some((at, res)) = taken else {
            let (waiting, unexpected) = waits.get(&r).cloned().unwrap_or_default();
            let waiting = match (crashed, waiting) {
                (Some(c), _) if c == r => "nothing: its host crashed".into(),
                (_, Some(w)) => w,
                (_, None) => "(still running at the deadline)".into(),
            };
            // What it did before it stopped: its messages and completions count (explain and the
            // oracle see the overtaking that left it waiting).
            let run = progress.take().run;
            let times = run.completed_at.clone();
            rec.events(r, &run);
            rec.completions(r, run, times.into_iter());
            rec.out.rank_stopped(r, Some(waiting), unexpected);
            continue;
        };
        let run = match res {
            Ok(run) => run,
            Err(DriverError::Failed { error, run, .. }) if <P::Node as SeamNode>::Completion::is_hang(&error) => {
                // An operation timeout (not set by this engine, kept for protocols that set one).
                rec.events(r, &run);
                let waited = Awaited::of_hang_told::<<P::Node as SeamNode>::Completion>(error.to_string(), r, &error);
                rec.out.rank_stopped(r, Some(waited), Vec::new());
                continue;
            }
            Err(DriverError::Failed { run, .. }) => *run,
            Err(other) => {
                // Not made by the driver for a rank (setup and the root's own errors); kept
                // as the rank's init error should that change.
                rec.out.record.ranks[r as usize].ended(0, at, Err(RecordedError::Text(other.to_string())));
                rec.out.rank_ended(r, at);
                continue;
            }
        };
        rec.events(r, &run);
        let times = run.completed_at.clone();
        rec.completions(r, run, times.into_iter().chain(std::iter::repeat(at)));
        rec.out.rank_ended(r, at);
    }
    match root.lock().unwrap_or_else(|p| p.into_inner()).take() {
        Some(Ok(())) => out.root_finished(None),
        Some(Err(DriverError::Root(e))) if <P::Node as SeamNode>::Completion::is_hang(&e) => {
            out.root_stopped(Some(Awaited::of_hang_told::<<P::Node as SeamNode>::Completion>(e.to_string(), 0, &e)))
        }
        Some(Err(e)) => out.root_finished(Some(root_error(&e))),
        None => out.root_stopped(None),
    }
    out.end = end;
    if let Some(mut g) = gate {
        g.trace_left();
        out.kernel = g.kernel().stats();
        for &(at, kind) in &g.notes {
            out.record_kernel(at, kind);
        }
        let mut sink = g.sink;
        if sink.enabled() {
            for (r, mut lines) in rank_lines {
                // Events before the completion they lead to, at equal times.
                lines.sort_by_key(|(at, _)| *at);
                sink.merge(Node::Rank(r), lines);
            }
        }
        out.trace = sink.finish();
    }
    out
}

/// Records ranks' runs into the outcome, with their trace lines per rank.
struct Recorder<'a, P> {
    protocol: &'a P,
    out: &'a mut Outcome,
    /// The model socket of each host's state-machine connection (the gate's ids).
    ids: &'a BTreeMap<(u32, ConnId), SockId>,
    lines: &'a mut BTreeMap<u32, Vec<(Instant, String)>>,
}

impl<P: Protocol<Node: TaskNode>> Recorder<'_, P> {
    /// Records a rank's completions at `times`, and their trace lines after its events.
    fn completions(&mut self, rank: u32, run: NodeRun<P::Node>, times: impl Iterator<Item = Instant>) {
        for (at, c) in times.zip(run.completions) {
            self.lines.entry(rank).or_default().push((at, self.protocol.completion_words(&c)));
            self.out.completed(rank, at, c);
        }
    }

    /// Records a rank's protocol events, joined to model connections through the gate's ids,
    /// with their trace lines.
    fn events(&mut self, rank: u32, run: &NodeRun<P::Node>) {
        for (e, at) in run.events.iter().zip(&run.events_at) {
            let kconn = e.conn().and_then(|c| self.ids.get(&(rank, c))).map(|s| s.conn());
            self.lines.entry(rank).or_default().push((*at, self.protocol.event_words(e, kconn)));
            self.out.record_event(*at, Node::Rank(rank), e.clone(), kconn);
        }
    }
}
