//! `bootsim run` and `bootsim replay`: the verdict, an `explain:` block for failing runs,
//! `--json` (schema in docs/json.md) and `replay --timeline out.html`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use bootsim_sim::case::shorten;
use bootsim_sim::{explain, run_case, timeline, Case, Finding, RunReport, Verdict};
use serde::Serialize;

/// Arguments of `bootsim run`.
#[derive(clap::Args, Debug)]
#[command(after_help = Case::keys_help())]
pub struct RunArgs {
    /// The case string, e.g. 'variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3'.
    case: String,
    /// Print the event trace (simulated time, host, event), one line each.
    #[arg(long)]
    trace: bool,
    /// Print one JSON object instead of text (schema: docs/json.md).
    #[arg(long)]
    json: bool,
}

/// Arguments of `bootsim replay`.
#[derive(clap::Args, Debug)]
#[command(after_help = Case::keys_help())]
pub struct ReplayArgs {
    /// The case string printed by a failing run.
    case: String,
    /// Print one JSON object (with the trace digest) instead of the trace (schema: docs/json.md).
    #[arg(long)]
    json: bool,
    /// Also write a self-contained HTML sequence diagram of the run to this file.
    #[arg(long, value_name = "OUT.html")]
    timeline: Option<PathBuf>,
}

/// Version of the `--json` object; bumped when a field changes meaning or disappears.
pub const JSON_SCHEMA: u32 = 1;

/// Kernel and message counters of a run, as JSON.
#[derive(Serialize, Debug)]
pub struct StatsJson {
    messages: usize,
    writes: u64,
    packets: u64,
    stalled: u64,
    lost: u64,
    retransmits: u64,
    backlog_drops: u64,
    enqueued: u64,
    orphans: u64,
    agenda_events: u64,
    stale_timers: u64,
    wakeups: u64,
}

/// One run as JSON: the stable output of `run --json` and `replay --json` (docs/json.md).
#[derive(Serialize, Debug)]
pub struct RunJson<'a> {
    schema: u32,
    command: &'static str,
    case: String,
    verdict: Verdict,
    ok: bool,
    findings: &'a [Finding],
    explain: Vec<String>,
    bootstrap_ms: f64,
    bootstrap_ns: u64,
    stats: StatsJson,
    replay: String,
    trace_digest: Option<&'a str>,
    trace: Option<&'a [String]>,
    timeline: Option<String>,
}

/// The JSON object of a report; `lines` includes the trace lines, `timeline` the file written.
pub fn report_json<'a>(
    command: &'static str,
    report: &'a RunReport,
    lines: bool,
    timeline: Option<String>,
) -> RunJson<'a> {
    let k = &report.kernel;
    RunJson {
        schema: JSON_SCHEMA,
        command,
        case: report.case.to_string(),
        verdict: report.verdict,
        ok: report.verdict.is_ok(),
        findings: &report.findings,
        explain: explain(report),
        bootstrap_ms: report.bootstrap_time.as_nanos() as f64 / 1e6,
        bootstrap_ns: report.bootstrap_time.as_nanos() as u64,
        stats: StatsJson {
            messages: report.messages,
            writes: k.writes,
            packets: k.packets,
            stalled: k.stalled,
            lost: k.lost,
            retransmits: k.retransmits,
            backlog_drops: k.backlog_drops,
            enqueued: k.enqueued,
            orphans: k.orphans,
            agenda_events: k.agenda_events,
            stale_timers: k.stale_timers,
            wakeups: k.wakeups,
        },
        replay: format!("bootsim replay '{}'", report.case),
        trace_digest: report.trace.as_ref().map(|t| t.digest.as_str()),
        trace: report.trace.as_ref().filter(|_| lines).map(|t| t.lines.as_slice()),
        timeline,
    }
}

fn parse(case: &str) -> anyhow::Result<Case> {
    Case::parse(case).with_context(|| format!("in '{}'", shorten(case)))
}

/// A case whose run keeps every result (traced): refused up front if those do not fit.
fn parse_traced(case: &str) -> anyhow::Result<Case> {
    let c = parse(case)?;
    c.check_kept_results(true).with_context(|| format!("in '{}'", shorten(case)))?;
    Ok(c)
}

/// 0 nothing wrong, 1 a violation, 3 verdict guard: a case the simulator stopped before its
/// deadline (its work guard) could not be run within bounds, so there is no verdict on the
/// protocol (a violation found before the guard tripped still exits 1).
fn exit(report: &RunReport) -> ExitCode {
    if report.verdict == Verdict::Guard {
        ExitCode::from(3)
    } else if report.verdict.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Writes `text` to stdout; a closed pipe (`| head`, quitting `less`) is not an error.
fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

fn print_json(j: &RunJson<'_>) -> anyhow::Result<()> {
    emit(&(serde_json::to_string_pretty(j)? + "\n"))
}

/// The report, then an `explain:` block when the run failed.
fn report_text(report: &RunReport) -> String {
    let mut s = report.to_string();
    let lines = explain(report);
    if !lines.is_empty() {
        s.push_str("explain:\n");
        for l in lines {
            s.push_str(&format!("  {l}\n"));
        }
    }
    if report.verdict == Verdict::Guard {
        s.push_str(
            "could not run: the work guard stopped the simulation before the case's deadline (exit 3): no verdict on \
             the protocol\n",
        );
    }
    s
}

fn trace_text(lines: &[String]) -> String {
    lines.iter().flat_map(|l| [l.as_str(), "\n"]).collect()
}

/// One run: verdict, summary and explanation; the trace with `--trace`.
pub fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    let case = if a.trace { parse_traced(&a.case)? } else { parse(&a.case)? };
    let report = run_case(&case, a.trace);
    if a.json {
        print_json(&report_json("run", &report, a.trace, None))?;
        return Ok(exit(&report));
    }
    if let Some(trace) = &report.trace {
        for line in &trace.lines {
            tracing::info!(target: "bootsim::trace", "{line}");
        }
        emit(&trace_text(&trace.lines))?;
    }
    emit(&report_text(&report))?;
    Ok(exit(&report))
}

/// The same run with the full trace and its digest; `--timeline` writes the picture.
pub fn replay(a: ReplayArgs) -> anyhow::Result<ExitCode> {
    let case = parse_traced(&a.case)?;
    let report = run_case(&case, true);
    let written = match &a.timeline {
        Some(path) => {
            let html = timeline::render_html(&report).map_err(anyhow::Error::from)?;
            std::fs::write(path, html)
                .with_context(|| format!("writing the timeline to {}", path.display()))
                .map_err(super::runtime)?;
            Some(path.display().to_string())
        }
        None => None,
    };
    if a.json {
        print_json(&report_json("replay", &report, false, written))?;
        return Ok(exit(&report));
    }
    let trace = report.trace.as_ref().context("replay keeps the trace")?;
    let mut text = trace_text(&trace.lines);
    text.push_str(&report_text(&report));
    text.push_str(&format!("trace-digest: {}\n", trace.digest));
    if let Some(p) = written {
        text.push_str(&format!("timeline: {p}\n"));
    }
    emit(&text)?;
    Ok(exit(&report))
}
