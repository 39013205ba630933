//! `bootsim run` and `bootsim replay`.

use std::process::ExitCode;

use anyhow::Context;
use bootsim_sim::{run_case, Case};

/// Arguments of `bootsim run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The case string, e.g. 'variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3'.
    case: String,
    /// Print the event trace (simulated time, host, event), one line each.
    #[arg(long)]
    trace: bool,
}

/// Arguments of `bootsim replay`.
#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The case string printed by a failing run.
    case: String,
}

fn parse(case: &str) -> anyhow::Result<Case> {
    Case::parse(case).with_context(|| format!("in '{case}'"))
}

fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// One run: verdict and summary; the trace with `--trace`.
pub fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    let case = parse(&a.case)?;
    let report = run_case(&case, a.trace);
    if let Some(trace) = &report.trace {
        for line in &trace.lines {
            tracing::info!(target: "bootsim::trace", "{line}");
            println!("{line}");
        }
    }
    print!("{report}");
    Ok(exit(report.verdict.is_ok()))
}

/// The same run with the full trace and its digest.
pub fn replay(a: ReplayArgs) -> anyhow::Result<ExitCode> {
    let case = parse(&a.case)?;
    let report = run_case(&case, true);
    let trace = report.trace.as_ref().expect("replay keeps the trace");
    for line in &trace.lines {
        println!("{line}");
    }
    print!("{report}");
    println!("trace-digest: {}", trace.digest);
    Ok(exit(report.verdict.is_ok()))
}
