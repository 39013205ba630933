//! `bootsim plugin-rank` (hidden): one rank of NVSHMEM's real UID bootstrap plugin, in a
//! process of its own, started by `smoke --plugin` and `real-nvshmem`. It prints one JSON
//! record per line as each plugin call begins and ends (adapters::plugin::RankLine).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail};
use bootsim_adapters::plugin::{run_rank, PluginRankConfig, UidSource};
use bootsim_nvshmem::workload::{build_op, parse_ops};

/// Arguments of `bootsim plugin-rank`.
#[derive(clap::Args, Debug)]
pub struct PluginRankArgs {
    /// The plugin file.
    #[arg(long)]
    plugin: PathBuf,
    /// The ABI version presented to the plugin.
    #[arg(long, default_value_t = 30000)]
    abi: i32,
    /// This rank.
    #[arg(long)]
    rank: u32,
    /// World size.
    #[arg(long)]
    ranks: u32,
    /// The unique-ID file: rank 0 creates it (get_unique_id) with --create, others read it.
    #[arg(long, required_unless_present = "uid_stdin")]
    uid_file: Option<PathBuf>,
    /// Read the 128-byte unique ID from stdin, as 256 hex digits (session mode; never on the
    /// command line: it holds the session magic).
    #[arg(long, conflicts_with_all = ["uid_file", "create"])]
    uid_stdin: bool,
    /// Call get_unique_id and publish the ID (this rank runs the root).
    #[arg(long)]
    create: bool,
    /// How long to wait for the unique-ID file.
    #[arg(long, default_value_t = 30_000)]
    uid_wait_ms: u64,
    /// The collectives, as `ops=` of a case string.
    #[arg(long)]
    ops: String,
    /// Payload seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// 3.8.0 only: preset the per-call tag counter after init.
    #[arg(long)]
    tag_counter: Option<u64>,
}

/// Runs one plugin rank; exit 0 when every call returned 0, 1 at the first failure.
pub fn plugin_rank(a: PluginRankArgs) -> anyhow::Result<ExitCode> {
    let specs = parse_ops(&a.ops).map_err(|e| anyhow!("--ops: {e}"))?;
    let ops: Vec<_> = specs.iter().enumerate().map(|(i, s)| build_op(*s, a.seed, i as u32, a.rank, a.ranks)).collect();
    let uid = match (a.uid_stdin, a.uid_file) {
        (true, _) => {
            let mut hex = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut hex)
                .map_err(|e| anyhow!("--uid-stdin: {e}"))?;
            UidSource::Given(Box::new(parse_uid_hex(hex.trim())?))
        }
        (false, Some(path)) if a.create => UidSource::Create(path),
        (false, Some(path)) => UidSource::Read(path, Duration::from_millis(a.uid_wait_ms)),
        (false, None) => bail!("give --uid-file or --uid-stdin"),
    };
    let cfg = PluginRankConfig {
        plugin: a.plugin,
        abi: a.abi,
        rank: a.rank,
        nranks: a.ranks,
        uid,
        tag_counter: a.tag_counter,
    };
    let code = run_rank(&cfg, &ops, &mut std::io::stdout().lock());
    Ok(ExitCode::from(code as u8))
}

fn parse_uid_hex(hex: &str) -> anyhow::Result<[u8; 128]> {
    if hex.len() != 256 || !hex.is_ascii() {
        bail!("--uid-stdin: 256 hex digits (128 bytes), got {} characters", hex.len());
    }
    let mut out = [0u8; 128];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|e| anyhow!("--uid-stdin: {e}"))?;
    }
    Ok(out)
}
