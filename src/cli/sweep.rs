//! `bootsim sweep`: K seeds per variant on J threads.

use std::process::ExitCode;

use anyhow::{bail, Context};
use bootsim_core::PRESETS;
use bootsim_sim::sweep::{sweep as run_sweep, SweepSummary};
use bootsim_sim::{Case, Verdict};

/// The filters shared by `sweep` and `compare`.
#[derive(clap::Args, Debug, Clone)]
pub struct Filters {
    /// Workload: deepep, nvshmem-init, qp-create, churn, custom.
    #[arg(long, default_value = "deepep")]
    pub workload: String,
    /// World size.
    #[arg(long, default_value_t = 2)]
    pub ranks: u32,
    /// Adversary profile: fifo, rss, lossy, overflow, swarm.
    #[arg(long, default_value = "rss")]
    pub adversary: String,
    /// Seeds per variant.
    #[arg(long, default_value_t = 100)]
    pub seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    pub start: u64,
    /// Engine.
    #[arg(long, default_value = "fast")]
    pub engine: String,
    /// Extra case words, e.g. --set qps=4 --set backlog=2.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Worker threads (results do not depend on it).
    #[arg(long, default_value_t = std::thread::available_parallelism().map_or(1, |n| n.get()))]
    pub jobs: usize,
}

impl Filters {
    /// The case for one variant.
    pub fn case(&self, variant: &str) -> anyhow::Result<Case> {
        let mut s = format!(
            "engine={} variant={variant} workload={} ranks={} adversary={} seed={}",
            self.engine, self.workload, self.ranks, self.adversary, self.start
        );
        for kv in &self.set {
            s.push(' ');
            s.push_str(kv);
        }
        Case::parse(&s).with_context(|| format!("in '{s}'"))
    }

    /// The seeds this sweep runs.
    pub fn seeds(&self) -> Vec<u64> {
        (self.start..self.start.saturating_add(self.seeds)).collect()
    }
}

/// Arguments of `bootsim sweep`.
#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// Variants, comma-separated (presets).
    #[arg(long, value_delimiter = ',', required = true)]
    variant: Vec<String>,
    #[command(flatten)]
    filters: Filters,
}

/// Runs each variant's sweep.
pub fn sweep_all(variants: &[String], f: &Filters) -> anyhow::Result<Vec<SweepSummary>> {
    for v in variants {
        if !PRESETS.contains(&v.as_str()) {
            bail!("unknown variant `{v}`; accepted: {}", PRESETS.join(", "));
        }
    }
    let cases = variants.iter().map(|v| f.case(v)).collect::<anyhow::Result<Vec<_>>>()?;
    let seeds = f.seeds();
    Ok(cases.iter().map(|c| run_sweep(c, &seeds, f.jobs, &|_, _| {})).collect())
}

/// Prints, per variant, runs and violations by verdict and the first failing case's replay line.
pub fn sweep(a: SweepArgs) -> anyhow::Result<ExitCode> {
    let summaries = sweep_all(&a.variant, &a.filters)?;
    let mut failed = false;
    for s in &summaries {
        let counts: Vec<String> = Verdict::ALL.iter().map(|v| format!("{v}={}", s.count(*v))).collect();
        println!("{:<12} runs={} {}", s.case.variant_name, s.results.len(), counts.join(" "));
        if let Some(first) = s.first_failure() {
            failed = true;
            if let Some(f) = &first.first_finding {
                println!("  first failure: {f}");
            }
            println!("  replay: bootsim replay '{}'", s.case.with_seed(first.seed));
        }
    }
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
