//! `bootsim smoke --local N --in-process`: a protocol's root and N ranks as tasks of this
//! process on a loopback address of the run's own (adapters' `local_run`): the protocol's own
//! nodes over the protocol-blind driver and the real kernel's sockets, judged by the
//! protocol's own judge. Any protocol on the seam runs this way: the caller names it.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use bootsim_adapters::local_run::run_local;
use bootsim_core::seam::{Judge, Protocol};
use bootsim_driver::{ErrorOf, TaskNode};
use bootsim_sim::{Finding, Verdict};

use super::report::{iterations_text, print_judged, Ranks};
use super::{SmokeArgs, LOCAL_MAX};

/// Runs `args.iterations` iterations of `protocol` (its `variant` and `workload`, payloads from
/// `args.seed`) with `n` ranks, each bounded as a whole by `--op-timeout-ms`; `what` names the
/// protocol, variant and workload in the summary line.
pub(super) fn run<P>(
    args: &SmokeArgs,
    n: u32,
    protocol: &P,
    variant: &P::Variant,
    workload: &P::Workload,
    what: &str,
) -> anyhow::Result<ExitCode>
where
    P: Protocol<Node: TaskNode, Judge: Judge<Report = (Verdict, Vec<Finding>)>>,
    ErrorOf<P::Node>: PartialEq,
{
    if n == 0 || n > LOCAL_MAX {
        bail!("--local {n}: between 1 and {LOCAL_MAX} ranks");
    }
    let deadline = Duration::from_millis(args.op_timeout_ms);
    let started = std::time::Instant::now();
    let mut worst = Verdict::Pass;
    let (mut ok, mut ran) = (0, 0);
    for iter in 0..args.iterations {
        ran += 1;
        let run = run_local(protocol, variant, workload, args.seed, n, deadline)
            .map_err(|e| crate::cli::runtime(anyhow::anyhow!("iter {iter}: could not run on loopback: {e}")))?;
        // Each rank's time on its driver's clock; one stopped at the deadline, the run's.
        let took: Vec<Duration> = run
            .record
            .ranks
            .iter()
            .map(|r| r.finished_at.map_or(run.elapsed, |t| Duration::from_nanos(t.as_nanos())))
            .collect();
        println!("in-process: iter {iter}: root and {n} ranks on {}", run.ip);
        let ranks = Ranks { reports: &run.record.ranks, took: &took, ops: None };
        let (verdict, _) = print_judged(iter, &ranks, &|_| String::new(), &|_| None, run.report);
        worst = worst.max(verdict);
        if verdict.is_ok() {
            ok += 1;
        } else if !args.keep_going {
            break;
        }
    }
    let status = if worst.is_ok() { "pass" } else { "FAIL" };
    let iterations = iterations_text(ok, ran, args.iterations);
    let ms = started.elapsed().as_millis();
    println!("smoke --local {n} --in-process: {what}: {status}: verdict {worst}: {iterations} in {ms} ms");
    Ok(if worst.is_ok() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
