//! `bootsim core-rank` (hidden): one bootsim-core rank in a process of its own, for sessions
//! whose every rank must be a process (under the accept interposer, which reaches processes,
//! not threads). It prints its record as one JSON line ([`CoreRankOut`]).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::anyhow;
use bootsim_adapters::plugin::AFTER_PEER_FAILED;
use bootsim_adapters::tokio_sockets::{real_limits, run_blocking_until, Rendezvous, SessionConfig};
use bootsim_core::{Awaited, RankRecord, RecordedError};
use bootsim_driver::rank_record;
use bootsim_nvshmem::workload::{build_op, parse_ops};
use bootsim_nvshmem::Variant;
use serde::{Deserialize, Serialize};

/// Arguments of `bootsim core-rank`.
#[derive(clap::Args, Debug)]
pub struct CoreRankArgs {
    /// The variant (a preset name).
    #[arg(long)]
    variant: String,
    /// Its first per-call tag (variants with a tag counter).
    #[arg(long)]
    first_tag: Option<u64>,
    /// This rank.
    #[arg(long)]
    rank: u32,
    /// World size.
    #[arg(long)]
    ranks: u32,
    /// The unique-ID file (rank 0 writes it when it runs the root, others read it).
    #[arg(long)]
    uid_file: PathBuf,
    /// The collectives, as `ops=` of a case string.
    #[arg(long)]
    ops: String,
    /// Payload seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Bound on each operation and on the wait for the unique ID.
    #[arg(long, default_value_t = 30_000)]
    op_timeout_ms: u64,
}

/// What a core-rank process reports: the parts of its [`RankRecord`] the oracle reads, the
/// errors and the wait in their words (the parent's record holds them as text: the typed peer
/// and operation do not cross the process boundary; blame does, on stderr).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CoreRankOut {
    /// Init's error.
    pub init: Option<String>,
    /// Each operation's bytes or error.
    pub ops: Vec<Result<Vec<u8>, String>>,
    /// What it was still waiting in.
    pub unfinished: Option<String>,
}

impl CoreRankOut {
    /// As rank `rank`'s record.
    pub fn record(self, rank: u32) -> RankRecord {
        RankRecord {
            rank,
            init: self.init.map(RecordedError::Text),
            ops: self.ops.into_iter().map(|o| o.map_err(RecordedError::Text)).collect(),
            unfinished: self.unfinished.map(Awaited::Text),
            ..Default::default()
        }
    }
}

/// Runs the rank and prints its record.
pub fn core_rank(a: CoreRankArgs) -> anyhow::Result<ExitCode> {
    let mut variant = Variant::preset(&a.variant).ok_or_else(|| anyhow!("--variant {:?}: not a preset", a.variant))?;
    if let Some(t) = a.first_tag {
        variant = variant.with_first_tag(t);
    }
    let specs = parse_ops(&a.ops).map_err(|e| anyhow!("--ops: {e}"))?;
    let ops = specs.iter().enumerate().map(|(i, s)| build_op(*s, a.seed, i as u32, a.rank, a.ranks)).collect();
    let op_timeout = Duration::from_millis(a.op_timeout_ms);
    let cfg = SessionConfig {
        rank: a.rank,
        nranks: a.ranks,
        variant,
        limits: real_limits(op_timeout),
        magic: super::smoke::random_u64(),
        ip: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        rendezvous: Rendezvous::UidFile(a.uid_file),
        uid_wait: op_timeout,
    };
    // The parent stops this process as a launcher would when another rank fails.
    let result = run_blocking_until(cfg, ops, &|| false, AFTER_PEER_FAILED).expect("never asked to stop");
    let r = rank_record(a.rank, &result);
    let out = CoreRankOut {
        init: r.init.map(|e| e.to_string()),
        ops: r.ops.into_iter().map(|o| o.map_err(|e| e.to_string())).collect(),
        unfinished: r.unfinished.map(|w| w.to_string()),
    };
    println!("{}", serde_json::to_string(&out)?);
    Ok(ExitCode::SUCCESS)
}
