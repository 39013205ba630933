//! `bootsim sweep`: K seeds per variant on J threads.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{bail, Context};
use bootsim_sim::case::shorten;
use bootsim_sim::sweep::{sweep as run_sweep, JsonLine, Shard, SweepSummary};
use bootsim_sim::{Case, Verdict};
use indicatif::{ProgressBar, ProgressStyle};

/// The filters shared by `sweep` and `compare`.
#[derive(clap::Args, Debug, Clone)]
pub struct Filters {
    /// Workload (parameters with --set, e.g. --set k=8, or --set gpus_per_node=4 for nccl-init).
    #[arg(long, default_value = "deepep", value_parser = clap::builder::PossibleValuesParser::new(bootsim_sim::case::workload_names()))]
    pub workload: String,
    /// World size.
    #[arg(long, default_value_t = 2)]
    pub ranks: u32,
    /// Adversary profile.
    #[arg(long, default_value = "rss", value_parser = clap::builder::PossibleValuesParser::new(bootsim_sim::kernel::PROFILES))]
    pub adversary: String,
    /// Seeds per variant.
    #[arg(long, default_value_t = 100)]
    pub seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    pub start: u64,
    /// Engine: fast (the discrete-event loop) or turmoil (the real async driver on turmoil hosts).
    #[arg(long, default_value = "fast", value_parser = ["fast", "turmoil"])]
    pub engine: String,
    /// Extra case words, e.g. --set qps=4 --set backlog=2.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Worker threads, at least 1 (results do not depend on it).
    #[arg(long, default_value_t = std::thread::available_parallelism().map_or(1, |n| n.get()), value_parser = at_least_one)]
    pub jobs: usize,
}

/// `--jobs`: a count of worker threads; 0 would run nothing, so it is refused (exit 2).
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1 (0 workers would run nothing)".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

impl Filters {
    /// The case for one variant.
    pub fn case(&self, variant: &str) -> anyhow::Result<Case> {
        if self.seeds == 0 {
            anyhow::bail!("--seeds must be at least 1");
        }
        if self.start.checked_add(self.seeds - 1).is_none() {
            anyhow::bail!("--start {} --seeds {} runs past the last seed (2^64 - 1)", self.start, self.seeds);
        }
        let mut s = format!(
            "engine={} variant={variant} workload={} ranks={} adversary={} seed={}",
            self.engine, self.workload, self.ranks, self.adversary, self.start
        );
        for kv in &self.set {
            s.push(' ');
            s.push_str(kv);
        }
        Case::parse(&s).with_context(|| format!("in '{}'", shorten(&s)))
    }
}

/// Arguments of `bootsim sweep`.
#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// Variants, comma-separated (NVSHMEM's presets or NCCL's versions).
    #[arg(long, value_delimiter = ',', required = true, value_parser = clap::builder::PossibleValuesParser::new(bootsim_sim::case::variant_names()))]
    variant: Vec<String>,
    #[command(flatten)]
    filters: Filters,
    /// Run only shard I of N: the seeds s of the range with s % N == I (see docs/sharding.md).
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    shard: Option<Shard>,
    /// One JSON line per failing seed, then one summary line per variant (for `bootsim merge`).
    #[arg(long)]
    json: bool,
}

fn parse_shard(s: &str) -> Result<Shard, String> {
    Shard::parse(s)
}

/// Runs each variant's sweep over the seeds of `shard`, with a progress bar on a terminal.
pub fn sweep_all(variants: &[String], f: &Filters, shard: Shard) -> anyhow::Result<Vec<SweepSummary>> {
    let names = bootsim_sim::case::variant_names();
    for v in variants {
        if !names.contains(&v.as_str()) {
            bail!("unknown variant `{v}`; accepted: {}", names.join(", "));
        }
    }
    let cases = variants.iter().map(|v| f.case(v)).collect::<anyhow::Result<Vec<_>>>()?;
    let seeds = shard.seeds(f.start, f.seeds);
    let bar = progress_bar((seeds.len() * cases.len()) as u64);
    let (done_before, failed_before) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let report = |done: usize, failed: usize| {
        if let Some(b) = &bar {
            b.set_position((done_before.load(Ordering::Relaxed) + done) as u64);
            b.set_message(format!("{} failures", failed_before.load(Ordering::Relaxed) + failed));
        }
    };
    let summaries = cases
        .iter()
        .map(|c| {
            // Under swarm each seed draws its kernel: the sweep refuses, before running any, a
            // seed whose draw lacks a queue or CPU a knob names. The knobs and seeds are every
            // variant's, so the first variant's sweep says it.
            let s = run_sweep(c, &seeds, f.jobs, &report).map_err(|e| {
                anyhow::anyhow!(
                    "{}: {}; name a queue or CPU every draw has (or set rx_queues/cpus), or pick other seeds",
                    c.variant_label(),
                    e.0
                )
            })?;
            done_before.fetch_add(s.results.len(), Ordering::Relaxed);
            failed_before.fetch_add(s.failures(), Ordering::Relaxed);
            Ok(s)
        })
        .collect::<anyhow::Result<Vec<_>>>();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    summaries
}

/// A progress bar (runs done, failures, rate) when stderr is a terminal; `None` otherwise.
fn progress_bar(total: u64) -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let style = ProgressStyle::with_template("{bar:30} {pos}/{len} runs, {msg}, {per_sec} [{elapsed_precise}]")
        .expect("static template");
    Some(ProgressBar::new(total).with_style(style))
}

/// Prints, per variant, runs and violations by verdict and the first failing case's replay
/// line; with `--json`, JSON lines instead.
pub fn sweep(a: SweepArgs) -> anyhow::Result<ExitCode> {
    let shard = a.shard.unwrap_or(Shard::WHOLE);
    let summaries = sweep_all(&a.variant, &a.filters, shard)?;
    let failed = summaries.iter().any(|s| s.failures() > 0);
    let stopped = summaries.iter().any(|s| s.guards() > 0);
    if a.json {
        for s in &summaries {
            for line in JsonLine::from_summary(s, a.filters.start, a.filters.seeds, shard)? {
                println!("{}", serde_json::to_string(&line)?);
            }
        }
    } else {
        for s in &summaries {
            let first = s.first_failure().or(s.first_guard()).map(|r| (r.seed, r.first_finding.clone()));
            print_summary(&s.case, s.results.len(), |v| s.count(v), first)?;
        }
    }
    Ok(sweep_exit(failed, stopped))
}

/// `sweep`'s and `merge`'s exit: 1 on a violation, else 3 when the work guard stopped a run
/// (it could not be simulated within bounds: no verdict), else 0.
pub fn sweep_exit(violation: bool, stopped: bool) -> ExitCode {
    match (violation, stopped) {
        (true, _) => ExitCode::from(1),
        (false, true) => ExitCode::from(3),
        (false, false) => ExitCode::SUCCESS,
    }
}

/// One variant's summary as `sweep` prints it (shared with `merge`): its first violation, else
/// its first run the work guard stopped.
pub fn print_summary(
    case: &Case,
    runs: usize,
    count: impl Fn(Verdict) -> usize,
    first: Option<(u64, Option<String>)>,
) -> anyhow::Result<()> {
    let counts: Vec<String> = Verdict::ALL.iter().map(|v| format!("{v}={}", count(*v))).collect();
    println!("{:<12} runs={runs} {}", case.variant_label(), counts.join(" "));
    if let Some((seed, finding)) = first {
        match finding {
            Some(f) if f.starts_with("guard:") => println!("  first run the work guard stopped: {f}"),
            Some(f) => println!("  first failure: {f}"),
            None => {}
        }
        println!("  replay: bootsim replay '{}'", case.with_seed(seed)?);
    }
    Ok(())
}
