//! `bootsim compare`: the headline table.

use std::process::ExitCode;

use bootsim_sim::case::variants_for;
use bootsim_sim::sweep::{Shard, SweepSummary};
use bootsim_sim::Verdict;
use serde::Serialize;

use super::sweep::{sweep_all, Filters};

/// Arguments of `bootsim compare`.
///
/// Exit code: 0 once the table is printed, whatever the verdicts (failing variants are the point
/// of a comparison); with `--fail-on`, 1 when a listed variant has a violation (for CI jobs),
/// else 3 when the work guard stopped a run of a listed variant (its `guard` column: no verdict);
/// 2 on bad usage.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Exit: 0 table printed (whatever the verdicts); 1 with --fail-on and a violation in a listed variant; \
                  2 bad usage; 3 with --fail-on, no violation but a run of a listed variant the work guard stopped \
                  (column guard: too costly to simulate, no verdict on the protocol)."
)]
pub struct CompareArgs {
    #[command(flatten)]
    filters: Filters,
    /// One JSON object per variant row instead of the table.
    #[arg(long)]
    json: bool,
    /// Exit 1 if any of these variants (comma-separated, or `all`) has a violation, e.g.
    /// `--fail-on nvshmem-3.8,seq,persistent` in a CI job that guards the robust designs.
    #[arg(long, value_delimiter = ',', value_name = "VARIANTS")]
    fail_on: Vec<String>,
}

/// One row of the table as JSON.
#[derive(Serialize)]
struct Row<'a> {
    variant: &'a str,
    case: String,
    runs: usize,
    pass: usize,
    benign: usize,
    corruption: usize,
    error: usize,
    hang: usize,
    /// Runs the engine's work guard stopped before their deadline (no verdict).
    guard: usize,
    seeds_to_first_failure: Option<usize>,
    first_failure_seed: Option<u64>,
    median_boot_ms: Option<f64>,
}

impl<'a> Row<'a> {
    fn of(s: &'a SweepSummary) -> Row<'a> {
        Row {
            variant: s.case.variant_label(),
            case: s.case.to_string(),
            runs: s.results.len(),
            pass: s.count(Verdict::Pass),
            benign: s.count(Verdict::Benign),
            corruption: s.count(Verdict::Corruption),
            error: s.count(Verdict::Error),
            hang: s.count(Verdict::Hang),
            guard: s.guards(),
            seeds_to_first_failure: s.seeds_to_first_failure(),
            first_failure_seed: s.first_failure().map(|r| r.seed),
            median_boot_ms: s.median_bootstrap().map(|d| d.as_secs_f64() * 1e3),
        }
    }
}

/// Every variant side by side: NVSHMEM's presets, or NCCL's versions for an NCCL workload.
pub fn compare(a: CompareArgs) -> anyhow::Result<ExitCode> {
    let names = variants_for(&a.filters.workload);
    let variants: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    for v in &a.fail_on {
        if v != "all" && !names.contains(&v.as_str()) {
            anyhow::bail!(
                "--fail-on `{v}`: accepted with --workload {}: all, {}",
                a.filters.workload,
                names.join(", ")
            );
        }
    }
    let summaries = sweep_all(&variants, &a.filters, Shard::WHOLE)?;
    let guarded = |name: &str| a.fail_on.iter().any(|v| v == "all" || v == name);
    let violated: Vec<&str> = summaries
        .iter()
        .filter(|s| guarded(s.case.variant_label()) && s.failures() > 0)
        .map(|s| s.case.variant_label())
        .collect();
    let stopped: Vec<&str> = summaries
        .iter()
        .filter(|s| guarded(s.case.variant_label()) && s.guards() > 0)
        .map(|s| s.case.variant_label())
        .collect();
    let code = super::sweep::sweep_exit(!violated.is_empty(), !stopped.is_empty());
    if a.json {
        for s in &summaries {
            println!("{}", serde_json::to_string(&Row::of(s))?);
        }
        return Ok(code);
    }
    let f = &a.filters;
    println!(
        "workload={} ranks={} adversary={} engine={} seeds {}..{}",
        f.workload,
        f.ranks,
        f.adversary,
        f.engine,
        f.start,
        f.start + f.seeds
    );
    let mut table = super::table::new(
        &[
            "variant",
            "runs",
            "pass",
            "benign",
            "corruption",
            "error",
            "hang",
            "guard",
            "first failure",
            "median boot ms",
        ],
        &[1, 2, 3, 4, 5, 6, 7, 8, 9],
    );
    for s in &summaries {
        // The seed itself, as the replay line below names it.
        let first = s.first_failure().map_or("-".to_string(), |r| format!("seed={}", r.seed));
        let median = s.median_bootstrap().map_or("-".to_string(), |d| format!("{:.3}", d.as_secs_f64() * 1e3));
        table.add_row(vec![
            s.case.variant_label().to_string(),
            s.results.len().to_string(),
            s.count(Verdict::Pass).to_string(),
            s.count(Verdict::Benign).to_string(),
            s.count(Verdict::Corruption).to_string(),
            s.count(Verdict::Error).to_string(),
            s.count(Verdict::Hang).to_string(),
            s.guards().to_string(),
            first,
            median,
        ]);
    }
    println!("{table}");
    for s in &summaries {
        if let Some(first) = s.first_failure() {
            println!("{}: bootsim replay '{}'", s.case.variant_label(), s.case.with_seed(first.seed)?);
        }
        if let Some(g) = s.first_guard() {
            println!(
                "{}: the work guard stopped {} run(s) (too costly to simulate, no verdict), first: bootsim replay '{}'",
                s.case.variant_label(),
                s.guards(),
                s.case.with_seed(g.seed)?
            );
        }
    }
    if !violated.is_empty() {
        println!("compare: violations in {} (--fail-on): exit 1", violated.join(", "));
    } else if !stopped.is_empty() {
        println!("compare: runs the work guard stopped in {} (--fail-on): no verdict, exit 3", stopped.join(", "));
    }
    Ok(code)
}
