//! The command line: clap definitions and dispatch to one file per subcommand.

mod bench;
mod compare;
mod conformance;
mod merge;
mod plugin_rank;
mod probe;
mod rdma;
mod real_nvshmem;
mod run;
mod shrink;
pub(crate) mod smoke;
mod sweep;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Deterministic simulation testing of NVSHMEM's TCP UID bootstrap and its variants.
#[derive(Parser, Debug)]
#[command(name = "bootsim", version, about)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// One run of a case string: the verdict and a short summary (exit 1 on a violation).
    Run(run::RunArgs),
    /// The same run with the full trace, ending with `trace-digest: <hex>`.
    Replay(run::ReplayArgs),
    /// Many seeds per variant; per variant, runs and violations by verdict (exit 1 on any failure).
    Sweep(sweep::SweepArgs),
    /// Every variant side by side on one workload and adversary (the headline table).
    Compare(compare::CompareArgs),
    /// Minimise a failing case, keeping its verdict; `--save seeds/NAME.toml` records it.
    Shrink(shrink::ShrinkArgs),
    /// Combine `sweep --shard I/N --json` outputs into the summary `sweep` prints.
    Merge(merge::MergeArgs),
    /// The bootstrap over real TCP sockets, one rank per process, with the integrity oracle.
    Smoke(smoke::SmokeArgs),
    /// The benchmark table: engine throughput, scale, time to detect the report's bug.
    Bench(bench::BenchArgs),
    /// Measure the real kernel: `probe accept-order`, the report's standalone reproducer.
    Probe(probe::ProbeArgs),
    /// NVSHMEM's shipped UID bootstrap plugins (3.4.5, 3.7.1, 3.8.0) under the real kernel, reordered
    /// by the userspace wire, beside bootsim's matching variants: a table of verdicts.
    RealNvshmem(real_nvshmem::RealNvshmemArgs),
    /// Prove bootsim-core byte-faithful to a shipped NVSHMEM plugin: both on the wire, compared.
    Conformance(conformance::ConformanceArgs),
    /// One rank of NVSHMEM's real UID bootstrap plugin (started by `smoke --plugin`).
    #[command(hide = true)]
    PluginRank(plugin_rank::PluginRankArgs),
}

/// Runs the chosen subcommand; `Err` is bad usage (exit 2).
pub fn dispatch(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Run(a) => run::run(a),
        Command::Replay(a) => run::replay(a),
        Command::Sweep(a) => sweep::sweep(a),
        Command::Compare(a) => compare::compare(a),
        Command::Probe(a) => probe::probe(a),
        Command::Bench(a) => bench::bench(a),
        Command::Smoke(a) => smoke::smoke(a),
        Command::Shrink(a) => shrink::shrink(a),
        Command::Merge(a) => merge::merge(a),
        Command::PluginRank(a) => plugin_rank::plugin_rank(a),
        Command::RealNvshmem(a) => real_nvshmem::real_nvshmem(a),
        Command::Conformance(a) => conformance::conformance(a),
    }
}
