//! `bootsim smoke --local N --wire POLICY`: the ranks in network namespaces behind the
//! userspace wire, with the integrity oracle, QP-handle decoding and the drain's events.
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bootsim_adapters::nvshmem::{DriverError, RankRun};
use bootsim_adapters::tokio_sockets::real_limits;
use bootsim_adapters::wire::{self, FlowInfo, Policy, ReleaseReason, WireDecision, WireEvent, WireReport};
use bootsim_adapters::wire_run::{self, host_rank, WireRunConfig, ROOT_PORT};
use bootsim_driver::{rank_record, run_of};
use bootsim_nvshmem::workload::{build_op, Workload};
use bootsim_nvshmem::{Event, Variant};
use bootsim_sim::kernel::{EventKind, HostId, Kernel, KernelConfig, ListenerId};
use bootsim_sim::Verdict;

use super::report::print_iteration;
use super::{parse_magic, random_u64, SmokeArgs};

pub(super) fn run(
    args: &SmokeArgs,
    n: u32,
    policy_str: &str,
    variant: Variant,
    workload: &Workload,
) -> anyhow::Result<ExitCode> {
    if n == 0 || n > u32::from(wire::MAX_HOSTS) {
        bail!("--local with --wire needs 1..={} ranks", wire::MAX_HOSTS);
    }
    // Parse first: a bad policy is bad usage even where the wire is unavailable.
    let make_policy = parse_policy(policy_str, args.seed, n)?;
    wire::wire_available().map_err(|why| crate::cli::runtime(anyhow!("--wire needs the userspace wire: {why}")))?;
    let specs = workload.ops(args.seed);
    let magic = args.magic.as_deref().map(parse_magic).transpose()?.unwrap_or_else(random_u64);
    let cfg =
        WireRunConfig { nranks: n, variant, limits: real_limits(Duration::from_millis(args.op_timeout_ms)), magic };
    let head = format!(
        "smoke --local {n} --wire '{policy_str}': variant {variant_name} workload {} x{}",
        workload.name(),
        args.iterations,
        variant_name = variant.preset_name().map_or_else(|| variant.to_string(), str::to_string),
    );
    println!(
        "wire: ranks 0..{n} on hosts 10.213.0.1..10.213.0.{n} (host = rank + 1), root at 10.213.0.1:{ROOT_PORT}, variant {variant}"
    );
    let started = Instant::now();
    let mut worst = Verdict::Pass;
    let (mut ok_iters, mut ran) = (0, 0);
    for iter in 0..args.iterations {
        ran += 1;
        let policy = make_policy()?;
        match policy {
            Policy::Model(_) => println!("wire: iter {iter}: policy {policy_str} (the simulator's kernel model)"),
            _ => println!("wire: iter {iter}: policy {policy}"),
        }
        let ops: Vec<Vec<_>> = (0..n)
            .map(|r| specs.iter().enumerate().map(|(i, s)| build_op(*s, args.seed, i as u32, r, n)).collect())
            .collect();
        let run = wire_run::run_ranks(cfg, ops, policy).context("running the ranks on the wire")?;
        let reports: Vec<_> = run.ranks.iter().enumerate().map(|(r, res)| rank_record(r as u32, res)).collect();
        let (verdict, _) =
            print_iteration(iter, &specs, args.seed, &reports, &run.rank_times, &|_| String::new(), &|_| None);
        for (r, result) in run.ranks.iter().enumerate() {
            for note in notes(result) {
                println!("  rank {r}: {note}");
            }
        }
        print_wire(&run.wire);
        worst = worst.max(verdict);
        if verdict.is_ok() {
            ok_iters += 1;
        } else if !args.keep_going {
            break;
        }
    }
    let ms = started.elapsed().as_millis();
    let status = if worst.is_ok() { "pass" } else { "FAIL" };
    let iterations = super::report::iterations_text(ok_iters, ran, args.iterations);
    println!("{head}: {status}: verdict {worst}: {iterations} in {ms} ms");
    Ok(if worst.is_ok() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

pub(super) type PolicyMaker = Box<dyn Fn() -> anyhow::Result<Policy>>;

/// `model[=SEED][,adversary=PROFILE]` or a wire policy string.
pub(super) fn parse_policy(s: &str, default_seed: u64, n: u32) -> anyhow::Result<PolicyMaker> {
    let head = s.split(',').next().unwrap_or_default().trim();
    if head != "model" && !head.starts_with("model=") {
        s.parse::<Policy>().with_context(|| format!("--wire '{s}'"))?;
        let s = s.to_string();
        return Ok(Box::new(move || Ok(s.parse::<Policy>()?)));
    }
    let seed = match head.strip_prefix("model=") {
        Some(v) => v.trim().parse::<u64>().with_context(|| format!("--wire '{s}': `{v}` is not a seed"))?,
        None => default_seed,
    };
    let mut profile = "rss".to_string();
    for part in s.split(',').skip(1) {
        match part.trim().split_once('=') {
            Some(("adversary", p)) => profile = p.trim().to_string(),
            _ => bail!("--wire '{s}': bad part `{part}` (expected adversary=PROFILE)"),
        }
    }
    KernelConfig::profile_for_seed(&profile, seed).map_err(|e| anyhow!("--wire '{s}': {e}"))?;
    Ok(Box::new(move || {
        let cfg = KernelConfig::profile_for_seed(&profile, seed).map_err(|e| anyhow!("{e}"))?;
        Ok(model_policy(cfg, seed, n))
    }))
}

/// A `Policy::model` whose delays come from the simulator's kernel model: each real
/// connection, at its first SYN, is also opened in a seeded [`Kernel`] (same hosts, same
/// server port, at the same time since the start), and the wire holds its
/// handshake-completing packet for as long as the model took beyond its stall-free
/// handshake (three one-way latencies and services) to put the child in the accept queue:
/// the RX-queue stalls (and any SYN loss and retransmission) the model imposed on it.
fn model_policy(mut cfg: KernelConfig, seed: u64, n: u32) -> Policy {
    cfg.trace = true;
    let floor = (cfg.latency + cfg.service) * 3;
    let mut kernel = Kernel::new(cfg, seed, n);
    let mut listeners: BTreeMap<(u32, u16), ListenerId> = BTreeMap::new();
    let start = Instant::now();
    let mut model_now = bootsim_core::Instant::ZERO;
    Policy::model(move |flow: &FlowInfo| {
        let (from, to) = (host_rank(flow.src_host), host_rank(flow.dst_host));
        if flow.src_host == 0 || from >= n || to >= n {
            return Duration::ZERO;
        }
        let real = bootsim_core::Instant::from_nanos(start.elapsed().as_nanos() as u64);
        let t = real.max(model_now);
        let port = flow.dst.port();
        let l = match listeners.get(&(to, port)) {
            Some(l) => *l,
            None => match kernel.listen(t, HostId(to), port) {
                Ok(l) => *listeners.entry((to, port)).or_insert(l),
                Err(_) => return Duration::ZERO,
            },
        };
        let sock = kernel.connect(t, HostId(from), HostId(to), port);
        let limit = t + Duration::from_secs(10);
        let mut enqueued = None;
        while enqueued.is_none() {
            while let Some(ev) = kernel.poll_event() {
                if let EventKind::ChildEnqueued { sock: child, .. } = ev.kind {
                    if child.conn() == sock.conn() {
                        enqueued = Some(ev.at);
                    }
                }
            }
            while kernel.accept(model_now.max(t), l).is_some() {}
            match kernel.poll_timeout() {
                Some(at) if enqueued.is_none() && at <= limit => {
                    kernel.handle_timeout(at);
                    model_now = model_now.max(at);
                }
                _ => break,
            }
        }
        let delay = enqueued.map_or(Duration::ZERO, |at| at.saturating_since(t).saturating_sub(floor));
        tracing::info!(conn = flow.conn, ?delay, "model: hold for the kernel model's delay");
        delay
    })
}

/// The events an operator must see beside the verdict: drain timeouts, short messages.
fn notes(result: &Result<RankRun, DriverError>) -> Vec<String> {
    let Some(run) = run_of(result) else { return Vec::new() };
    let mut notes = Vec::new();
    let mut drains = (0usize, Duration::ZERO);
    for ev in &run.events {
        match ev {
            Event::DrainGaveUp { to, tag, waited, unacked, .. } => notes.push(format!(
                "DRAIN GAVE UP after {} ms on its message to rank {to} (tag {tag:#x}): {unacked} bytes still unacknowledged; closed anyway, ordering no longer guaranteed",
                waited.as_millis()
            )),
            Event::DrainCompleted { waited, .. } => {
                drains.0 += 1;
                drains.1 = drains.1.max(*waited);
            }
            Event::ShortMessageAccepted { from, tag, got, expected, .. } => notes.push(format!(
                "accepted a {got}-byte message from rank {from} (tag {tag:#x}) into a {expected}-byte buffer and reported success"
            )),
            _ => {}
        }
    }
    if drains.0 > 0 {
        notes.push(format!("{} drains completed, longest {:.1} ms", drains.0, drains.1.as_secs_f64() * 1e3));
    }
    notes
}

fn print_wire(report: &WireReport) {
    let held = report.count(|e| matches!(e, WireEvent::Held { .. }));
    let on_next =
        report.count(|e| matches!(e, WireEvent::Released { reason: ReleaseReason::NextCompleted { .. }, .. }));
    let on_deadline = report.count(|e| matches!(e, WireEvent::Released { reason: ReleaseReason::Deadline, .. }));
    let dropped = report.count(|e| matches!(e, WireEvent::DroppedAtShutdown { .. }));
    println!(
        "wire: {} connections, {} decisions: {held} held ({on_next} released by the next connection, {on_deadline} on deadline, {dropped} dropped at shutdown); {} packets forwarded",
        report.connections,
        report.decisions.len(),
        report.counters.forwarded
    );
    for d in report.decisions.iter().filter(|d| !matches!(d.event, WireEvent::Opened | WireEvent::Passed)) {
        println!("wire:   {}", decision_line(d));
    }
}

fn decision_line(d: &WireDecision) -> String {
    let f = &d.flow;
    let who = format!(
        "{:>9.3} ms conn {} (host {}>{} #{}: rank {} > rank {}, {} > {})",
        d.at_us as f64 / 1e3,
        f.conn,
        f.src_host,
        f.dst_host,
        f.pair_conn,
        host_rank(f.src_host),
        host_rank(f.dst_host),
        f.src,
        f.dst
    );
    let what = match d.event {
        WireEvent::Held { delay_us, until_next: true } => {
            format!("held until the next connection on the pair (at most {:.1} ms)", delay_us as f64 / 1e3)
        }
        WireEvent::Held { delay_us, until_next: false } => format!("held for {:.3} ms", delay_us as f64 / 1e3),
        WireEvent::Released { reason, packets, held_us } => {
            let why = match reason {
                ReleaseReason::Deadline => "on deadline".to_string(),
                ReleaseReason::NextCompleted { by_conn } => format!("by conn {by_conn}"),
            };
            format!("released {why} after {:.3} ms ({packets} packets)", held_us as f64 / 1e3)
        }
        WireEvent::DroppedAtShutdown { packets } => format!("dropped at shutdown ({packets} packets)"),
        WireEvent::Opened | WireEvent::Passed => format!("{:?}", d.event),
    };
    format!("{who}: {what}")
}
