//! The command line: clap definitions and dispatch to one file per subcommand.

mod bench;
mod check;
mod compare;
mod conformance;
pub(crate) mod core_rank;
mod explore;
mod merge;
mod plugin_rank;
mod probe;
mod rdma;
pub(crate) mod real_nvshmem;
mod run;
pub(crate) mod scratch;
mod shrink;
pub(crate) mod shuffle;
pub(crate) mod smoke;
mod sweep;
mod table;

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
    /// One run of a case string: the verdict and a short summary (exit 1 on a violation; 3,
    /// verdict guard, when the work guard stopped a run too costly to simulate).
    Run(run::RunArgs),
    /// The same run with the full trace, ending with `trace-digest: <hex>` (exit codes as `run`).
    Replay(run::ReplayArgs),
    /// Many seeds per variant; per variant, runs and violations by verdict (exit 1 on any
    /// violation, else 3 when the work guard stopped a run: verdict guard, no verdict).
    Sweep(sweep::SweepArgs),
    /// Every variant side by side on one workload and adversary (the headline table): NVSHMEM's
    /// presets, or NCCL's versions (nccl-2.8, nccl-2.19, nccl-2.21, nccl-2.30) for --workload
    /// nccl-init or nccl-p2p.
    Compare(compare::CompareArgs),
    /// Minimise a failing case, keeping its verdict; `--save seeds/NAME.toml` records it.
    Shrink(shrink::ShrinkArgs),
    /// Every accept order of a case: a proof of no violation, or the shortest counterexample.
    Explore(explore::ExploreArgs),
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
    /// Is my NVSHMEM affected? Its plugin under the schedules that matter, without root (exit 1
    /// affected, naming the first cached version that is not; 0 not affected; 3 could not run).
    Check(check::CheckArgs),
    /// Run any program with its incoming connections accepted in the order a policy decides
    /// (the accept interposer, LD_PRELOAD; no root needed).
    Shuffle(shuffle::ShuffleArgs),
    /// One bootsim-core rank in a process of its own (started by `smoke --plugin` under the
    /// accept interposer).
    #[command(hide = true)]
    CoreRank(core_rank::CoreRankArgs),
    /// One rank of NVSHMEM's real UID bootstrap plugin (started by `smoke --plugin`).
    #[command(hide = true)]
    PluginRank(plugin_rank::PluginRankArgs),
}

/// Exit code of a run that could not be carried out (an I/O error, a peer that refused, a
/// missing capability); 2 is bad usage, 1 a violation found.
pub const EXIT_RUNTIME: u8 = 3;

/// An error that is not the user's usage but the world's: exits [`EXIT_RUNTIME`].
#[derive(Debug)]
pub struct RuntimeFailure(pub anyhow::Error);

impl std::fmt::Display for RuntimeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::error::Error for RuntimeFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// Marks an error as a runtime failure (exit 3).
pub(crate) fn runtime(e: impl Into<anyhow::Error>) -> anyhow::Error {
    anyhow::Error::new(RuntimeFailure(e.into()))
}

/// The error and its causes, each cause only where the text does not already say it (some
/// errors print their source themselves).
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
    }
    text
}

/// The exit code for an error: 3 for a runtime failure, 2 for bad usage.
pub fn error_code(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<RuntimeFailure>()) {
        EXIT_RUNTIME
    } else {
        2
    }
}

/// Parses `HOST:PORT`, where HOST is a name (resolved now) or an address, to its first address:
/// the value parser of every address flag.
pub(crate) fn host_port(s: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if !s.contains(':') {
        return Err(format!("`{s}` is not HOST:PORT (e.g. node002:7777 or 10.1.2.3:7777)"));
    }
    let mut addrs = s.to_socket_addrs().map_err(|e| format!("`{s}`: {e}"))?;
    addrs.next().ok_or_else(|| format!("`{s}` resolves to no address"))
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
        Command::Explore(a) => explore::explore(a),
        Command::Merge(a) => merge::merge(a),
        Command::PluginRank(a) => plugin_rank::plugin_rank(a),
        Command::CoreRank(a) => core_rank::core_rank(a),
        Command::RealNvshmem(a) => real_nvshmem::real_nvshmem(a),
        Command::Conformance(a) => conformance::conformance(a),
        Command::Shuffle(a) => shuffle::shuffle(a),
        Command::Check(a) => check::check(a),
    }
}
