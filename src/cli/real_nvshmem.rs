//! `bootsim real-nvshmem`: "is my NVSHMEM affected, and does upgrading fix it?" asked of the
//! shipped binaries. Each NVSHMEM version's real UID bootstrap plugin runs each workload on
//! loopback and behind the userspace wire with a reordering policy (the real kernel's accept
//! queue, reordered), beside bootsim-core's matching variant under the same policy; one row
//! per (implementation, workload, world), verdicts counted over the iterations.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use bootsim_core::RunRecord;
use bootsim_sim::protocol::nvshmem::judge;
use bootsim_sim::Verdict;

use super::smoke::parse_workload;
use super::smoke::plugin::Session;
use super::smoke::plugin_smoke::locate_plugin;
use bootsim_adapters::wire::{wire_available, Policy};

/// The reordering policy of the report: rank 0's alltoall connection to rank 1 (host 1 > host 2,
/// its second connection) held until the next one on the pair completes (at most 500 ms).
pub const REPORT_POLICY: &str = "release-on-next=500ms,select=pair:1>2:2";

/// Arguments of `bootsim real-nvshmem`.
#[derive(clap::Args, Debug)]
pub struct RealNvshmemArgs {
    /// NVSHMEM versions (fetched into the cache when missing) or plugin paths.
    #[arg(long, value_delimiter = ',', default_value = "3.4.5,3.7.1,3.8.0")]
    versions: Vec<String>,
    /// Workloads (deepep, qp-create, nvshmem-init, churn).
    #[arg(long, value_delimiter = ',', default_value = "deepep,qp-create")]
    workloads: Vec<String>,
    /// World size.
    #[arg(long, default_value_t = 2)]
    ranks: u32,
    /// Iterations per row.
    #[arg(long, default_value_t = 200)]
    iterations: u32,
    /// The wire's policy for the reordered rows.
    #[arg(long, default_value = REPORT_POLICY)]
    wire: String,
    /// Reorder with the accept interposer instead of the wire (no root needed), with this policy
    /// (e.g. the same as --wire's); bootsim-core's ranks then run as processes of their own.
    #[arg(long, value_name = "POLICY")]
    accept: Option<String>,
    /// Bound on each operation (NVSHMEM has none; a rank still blocked 500 ms after another
    /// failed is stopped, as a launcher would).
    #[arg(long, default_value_t = 5_000)]
    op_timeout_ms: u64,
    /// Leave out bootsim-core's rows.
    #[arg(long)]
    no_core: bool,
    /// Exit 1 unless every row matches `--expect` (e.g. the documented table's verdicts).
    #[arg(long, value_delimiter = ',', value_name = "IMPL:WORKLOAD:WIRE=VERDICT")]
    expect: Vec<String>,
}

struct Row {
    implementation: String,
    workload: String,
    wire: bool,
    accept: bool,
    counts: BTreeMap<Verdict, u32>,
    ms: u128,
}

/// Runs the matrix and prints the table.
pub fn real_nvshmem(a: RealNvshmemArgs) -> anyhow::Result<ExitCode> {
    if a.iterations == 0 || a.ranks < 2 {
        bail!("--iterations must be at least 1 and --ranks at least 2");
    }
    // A bad policy is bad usage, before anything is fetched or started.
    a.wire.parse::<Policy>().map_err(|e| anyhow!("--wire '{}': {e}", a.wire))?;
    if let Some(p) = &a.accept {
        super::shuffle::parse_policy("--accept", p)?;
        super::shuffle::Interposer::locate()?;
    } else {
        wire_available().map_err(|why| {
            super::runtime(anyhow!(
                "real-nvshmem needs the userspace wire (root, /dev/net/tun): {why}; --accept POLICY reorders without it"
            ))
        })?;
    }
    let mut rows = Vec::new();
    for version in &a.versions {
        let plugin = locate_plugin(version)?;
        for wl_name in &a.workloads {
            let workload = parse_workload(wl_name)?;
            let mut impls = vec![(format!("NVSHMEM {version}"), (0..a.ranks).collect::<BTreeSet<u32>>())];
            if !a.no_core {
                impls.push((format!("bootsim {}", plugin.family.variant()), BTreeSet::new()));
            }
            for (implementation, plugin_ranks) in impls {
                let session = Session::new(
                    a.ranks,
                    plugin.clone(),
                    plugin_ranks,
                    workload.ops(0),
                    Duration::from_millis(a.op_timeout_ms),
                );
                for wire in [false, true] {
                    let t0 = Instant::now();
                    let mut counts = BTreeMap::new();
                    // The reordered row: under the interposer's policy, or behind the wire.
                    let session = Session { accept: if wire { a.accept.clone() } else { None }, ..session.clone() };
                    for _ in 0..a.iterations {
                        let policy = (wire && a.accept.is_none()).then(|| a.wire.parse::<Policy>()).transpose()?;
                        let it = session.run(policy)?;
                        let record = RunRecord::of_ranks(it.ranks.iter().map(|e| e.record.clone()).collect());
                        let (verdict, _) = judge(&session.specs, session.seed, a.ranks, &record);
                        *counts.entry(verdict).or_default() += 1;
                    }
                    let row = Row {
                        implementation: implementation.clone(),
                        workload: wl_name.clone(),
                        wire,
                        accept: a.accept.is_some(),
                        counts,
                        ms: t0.elapsed().as_millis(),
                    };
                    eprintln!(
                        "real-nvshmem: {} {} {}: done in {} ms",
                        row.implementation,
                        row.workload,
                        row.network(),
                        row.ms
                    );
                    rows.push(row);
                }
            }
        }
    }
    print_table(&a, &rows);
    check_expectations(&a.expect, &rows)
}

impl Row {
    /// The network column: loopback, wire, or interposer (loopback reordered in the process).
    fn network(&self) -> &'static str {
        match (self.wire, self.accept) {
            (true, true) => "interposer",
            (w, _) => wire_name(w),
        }
    }
}

fn wire_name(wire: bool) -> &'static str {
    if wire {
        "wire"
    } else {
        "loopback"
    }
}

fn print_table(a: &RealNvshmemArgs, rows: &[Row]) {
    match &a.accept {
        Some(p) => println!(
            "ranks={} iterations={} accept interposer policy '{p}' (loopback rows: no reordering)",
            a.ranks, a.iterations
        ),
        None => println!(
            "ranks={} iterations={} wire policy '{}' (loopback rows: no reordering)",
            a.ranks, a.iterations, a.wire
        ),
    }
    let mut table = super::table::new(
        &[
            "implementation",
            "workload",
            "network",
            "runs",
            "pass",
            "benign",
            "corruption",
            "error",
            "hang",
            "verdict",
            "ms",
        ],
        &[3, 4, 5, 6, 7, 8, 10],
    );
    for r in rows {
        let c = |v: Verdict| r.counts.get(&v).copied().unwrap_or(0).to_string();
        let worst = r.counts.keys().copied().max().unwrap_or(Verdict::Pass);
        table.add_row(vec![
            r.implementation.to_string(),
            r.workload.to_string(),
            r.network().to_string(),
            r.counts.values().sum::<u32>().to_string(),
            c(Verdict::Pass),
            c(Verdict::Benign),
            c(Verdict::Corruption),
            c(Verdict::Error),
            c(Verdict::Hang),
            worst.name().to_string(),
            r.ms.to_string(),
        ]);
    }
    println!("{table}");
}

/// `IMPL:WORKLOAD:WIRE=VERDICT`, e.g. `NVSHMEM 3.4.5:deepep:wire=corruption`: every run of the
/// row must end with that verdict.
fn check_expectations(expect: &[String], rows: &[Row]) -> anyhow::Result<ExitCode> {
    let mut bad = Vec::new();
    for e in expect {
        let (key, verdict) = e.split_once('=').ok_or_else(|| anyhow!("--expect {e:?}: IMPL:WORKLOAD:WIRE=VERDICT"))?;
        let want = Verdict::parse(verdict).ok_or_else(|| anyhow!("--expect {e:?}: unknown verdict {verdict:?}"))?;
        let row = rows
            .iter()
            .find(|r| format!("{}:{}:{}", r.implementation, r.workload, r.network()) == key)
            .ok_or_else(|| anyhow!("--expect {e:?}: no such row"))?;
        let total: u32 = row.counts.values().sum();
        if row.counts.get(&want).copied().unwrap_or(0) != total {
            bad.push(format!("{key}: expected {want} in every run, got {:?}", row.counts));
        }
    }
    for b in &bad {
        println!("real-nvshmem: MISMATCH: {b}");
    }
    Ok(if bad.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
