//! `engine=turmoil`: every rank and the root is a turmoil host running the same async driver
//! as real sockets (`bootsim_driver`), over the `backend::TurmoilNet` backend whose
//! accept order and drains come from the kernel model.

pub(crate) mod backend;
pub(crate) mod gate;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use bootsim_core::{
    BootstrapError, Completion, ConnId, Instant, Limits, Op, OpId, OpKind, RankConfig, RootConfig, UniqueId,
};
use bootsim_driver::{run_rank, run_root, DriverError, RankRun};

use super::outcome::{event_conn, Node, Outcome};
use super::work_guard::WorkGuard;
use crate::case::Case;
use crate::kernel::{Kernel, SockId};
use crate::seed::derive;
use crate::words::{completion_line, event_line};
use crate::workload::build_op;
use backend::TurmoilNet;
use bootsim_core::ports::ROOT_PORT;
use gate::{sim_now, GateHandle};

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

type Slot = Arc<Mutex<Option<(Instant, Result<RankRun, DriverError>)>>>;

/// Runs a case on turmoil. `crash` names a rank whose host crashes at that simulated time.
pub fn run(case: &Case, trace: bool, crash: Option<(u32, Duration)>) -> Outcome {
    let n = case.ranks;
    let kernel = Kernel::new(case.kernel_config(), derive(case.seed, "kernel", 0), n);
    let gate = GateHandle::new(kernel, trace);
    let mut sim = turmoil::Builder::new()
        .rng_seed(derive(case.seed, "turmoil", 0))
        .epoch(UNIX_EPOCH)
        .simulation_duration(case.deadline + Duration::from_secs(1))
        .tick_duration(TICK)
        .min_message_latency(Duration::ZERO)
        .max_message_latency(Duration::ZERO)
        .tcp_capacity(n as usize + 64)
        .build();
    // As in the fast engine (and NVSHMEM), ranks block forever; the deadline decides a hang.
    let limits = Limits::default();
    let magic = derive(case.seed, "magic", 0);
    let spec = case.workload.ops(case.seed);
    let slots: Vec<Slot> = (0..n).map(|_| Arc::new(Mutex::new(None))).collect();
    let root_slot: Arc<Mutex<Option<Result<(), DriverError>>>> = Arc::new(Mutex::new(None));
    for r in 0..n {
        let ops: Vec<Op> = spec.iter().enumerate().map(|(i, s)| build_op(*s, case.seed, i as u32, r, n)).collect();
        let (gate, slot, root_slot, variant) =
            (gate.clone(), slots[r as usize].clone(), root_slot.clone(), case.variant);
        // A host (not a client) so that it can be crashed; it is never restarted.
        sim.host(format!("h{r}"), move || {
            let (gate, slot, root_slot, ops) = (gate.clone(), slot.clone(), root_slot.clone(), ops.clone());
            async move {
                let net = TurmoilNet { host: r, gate, retry: bootsim_core::RetryPolicy::default() };
                let uid = UniqueId {
                    version: variant.uid_version(),
                    root: std::net::SocketAddr::new(backend::host_ip(0), ROOT_PORT),
                    magic,
                };
                let root = (r == 0).then(|| {
                    let net = net.clone();
                    tokio::spawn(async move {
                        let res = run_root(net, RootConfig { uid, nranks: None, limits }).await;
                        *root_slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(res.map(|_| ()));
                    })
                });
                let cfg = RankConfig { rank: r, nranks: n, uid, variant, limits };
                let res = run_rank(net, cfg, ops).await;
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
        if sim.elapsed() >= case.deadline {
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
    let mut out = collect(case, slots, root_slot, gate, end, crashed);
    out.gave_up = gave_up;
    out
}

fn collect(
    case: &Case,
    slots: Vec<Slot>,
    root_slot: Arc<Mutex<Option<Result<(), DriverError>>>>,
    gate: GateHandle,
    end: Instant,
    crashed: Option<u32>,
) -> Outcome {
    let mut out = Outcome::new(case.ranks as usize);
    let mut rank_lines: BTreeMap<u32, Vec<(Instant, String)>> = BTreeMap::new();
    let gate = gate.into_inner();
    let conn_ids = gate.as_ref().map(|g| g.conn_ids.clone()).unwrap_or_default();
    let waits = gate.as_ref().map(|g| g.waits.clone()).unwrap_or_default();
    let mut progress = gate.as_ref().map(|g| g.progress.clone()).unwrap_or_default();
    for (r, slot) in slots.into_iter().enumerate() {
        let taken = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some((at, res)) = taken else {
            let (waiting, unexpected) = waits.get(&(r as u32)).cloned().unwrap_or_default();
            let waiting = match (crashed, waiting) {
                (Some(c), _) if c as usize == r => "nothing: its host crashed".to_string(),
                (_, Some(w)) => w,
                (_, None) => "(still running at the deadline)".to_string(),
            };
            // What it did before it stopped: its messages and completions count (explain and the
            // oracle see the overtaking that left it waiting).
            if let Some(run) = progress.remove(&(r as u32)) {
                record_events(&mut out, r as u32, &run, &conn_ids, &mut rank_lines);
                record_completions(&mut out, r as u32, &run, &mut rank_lines, run.completed_at.iter().copied());
            }
            out.rank_stopped(r as u32, Some(waiting), unexpected);
            continue;
        };
        let run = match res {
            Ok(run) => run,
            Err(DriverError::Failed { error: BootstrapError::Timeout { waiting, .. }, run, .. }) => {
                // A core op timeout (not set by this engine, kept for callers that set one).
                record_events(&mut out, r as u32, &run, &conn_ids, &mut rank_lines);
                out.rank_stopped(r as u32, Some(waiting), Vec::new());
                continue;
            }
            Err(DriverError::Failed { run, .. }) => *run,
            Err(other) => RankRun {
                completions: vec![Completion {
                    op: OpId(0),
                    kind: OpKind::Init,
                    result: Err(BootstrapError::InvalidOp {
                        rank: r as u32,
                        op: OpKind::Init,
                        reason: other.to_string(),
                    }),
                }],
                completed_at: vec![at],
                ..RankRun::default()
            },
        };
        record_events(&mut out, r as u32, &run, &conn_ids, &mut rank_lines);
        let times = run.completed_at.iter().copied().chain(std::iter::repeat(at));
        record_completions(&mut out, r as u32, &run, &mut rank_lines, times);
        out.rank_ended(r as u32, at);
    }
    match root_slot.lock().unwrap_or_else(|p| p.into_inner()).take() {
        Some(Ok(())) => out.root_ended(&Ok(Vec::new())),
        Some(Err(DriverError::Root(BootstrapError::RootTimeout { waiting, .. }))) => out.root_stopped(Some(waiting)),
        Some(Err(e)) => {
            out.root_ended(&Err(BootstrapError::InvalidOp { rank: 0, op: OpKind::Init, reason: e.to_string() }))
        }
        None => out.root_stopped(None),
    }
    out.end = end;
    if let Some(g) = gate {
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

/// Records a rank's completions at `times`, and their trace lines after its events in `lines`.
fn record_completions(
    out: &mut Outcome,
    rank: u32,
    run: &RankRun,
    lines: &mut BTreeMap<u32, Vec<(Instant, String)>>,
    times: impl Iterator<Item = Instant>,
) {
    for (at, c) in times.zip(&run.completions) {
        lines.entry(rank).or_default().push((at, completion_line(c)));
        out.completed(rank, at, c.clone());
    }
}

/// Records a rank's protocol events, joined to model connections through the gate's ids.
/// Also keeps each event's trace line, in `lines` per rank.
fn record_events(
    out: &mut Outcome,
    rank: u32,
    run: &RankRun,
    ids: &BTreeMap<(u32, ConnId), SockId>,
    lines: &mut BTreeMap<u32, Vec<(Instant, String)>>,
) {
    for (e, at) in run.events.iter().zip(&run.events_at) {
        let kconn = event_conn(e).and_then(|c| ids.get(&(rank, c))).map(|s| s.conn());
        lines.entry(rank).or_default().push((*at, event_line(e, kconn)));
        out.record_event(*at, Node::Rank(rank), e.clone(), kconn);
    }
}
