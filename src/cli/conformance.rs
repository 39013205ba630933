//! `bootsim conformance --plugin V`: proves bootsim-core byte-faithful to a shipped NVSHMEM
//! plugin. The same workload runs twice behind the userspace wire with no reordering: once with
//! every rank the real plugin, once with every rank bootsim-core's matching variant. The wire
//! records what each connection's client sent; the two records must be equal connection by
//! connection (per ordered pair of ranks) except addresses, ports and the session magic.

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bootsim_adapters::plugin::conformance::{by_pair, differences, transcript, ConnTranscript};
use bootsim_adapters::wire::{wire_available, Policy};
use bootsim_nvshmem::workload::parse_ops;
use bootsim_nvshmem::Variant;

use super::smoke::plugin::Session;
use super::smoke::plugin_smoke::locate_plugin;

/// Arguments of `bootsim conformance`.
#[derive(clap::Args, Debug)]
pub struct ConformanceArgs {
    /// The NVSHMEM version (fetched into the cache when missing) or a plugin path.
    #[arg(long, value_name = "VERSION|PATH")]
    plugin: String,
    /// World size (2..=16).
    #[arg(long, default_value_t = 3)]
    ranks: u32,
    /// The collectives after init: back-to-back calls show how tags are numbered.
    #[arg(long, default_value = "alltoall:576,barrier,alltoall:576,barrier,allgather:8")]
    ops: String,
    /// Payload seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// bootsim's variant to compare with (default: the one that speaks like the plugin).
    #[arg(long)]
    variant: Option<String>,
    /// Print every connection of both worlds.
    #[arg(long)]
    show: bool,
}

/// Runs the comparison; exit 0 when the transcripts agree, 1 when they differ.
pub fn conformance(a: ConformanceArgs) -> anyhow::Result<ExitCode> {
    if !(2..=16).contains(&a.ranks) {
        bail!("--ranks {}: 2..=16", a.ranks);
    }
    let specs = parse_ops(&a.ops).map_err(|e| anyhow!("--ops: {e}"))?;
    let plugin = locate_plugin(&a.plugin)?;
    let name = a.variant.clone().unwrap_or_else(|| plugin.family.variant().to_string());
    let variant = Variant::preset(&name).ok_or_else(|| anyhow!("unknown variant {name:?}"))?;
    wire_available()
        .map_err(|why| super::runtime(anyhow!("conformance needs the userspace wire (root, /dev/net/tun): {why}")))?;
    let session = |plugin_ranks: BTreeSet<u32>| Session {
        n: a.ranks,
        plugin: plugin.clone(),
        plugin_ranks,
        core_variant: variant,
        specs: specs.clone(),
        seed: a.seed,
        op_timeout: Duration::from_secs(10),
        tag_counter: None,
        capture: true,
        accept: None,
    };
    let who = plugin.version.as_ref().map_or_else(|| plugin.path.display().to_string(), |v| format!("NVSHMEM {v}"));
    let mut worlds = Vec::new();
    for (label, ranks) in [(who.clone(), (0..a.ranks).collect()), (format!("bootsim {name}"), BTreeSet::new())] {
        let s = session(ranks);
        let (verdict, findings, it) = s.run_and_print(0, Some("none".parse::<Policy>()?))?;
        if !verdict.is_ok() {
            bail!("{label} did not complete the workload ({verdict}): {findings:?}");
        }
        let wire = it.wire.context("a wire run has a wire report")?;
        let ts: Vec<ConnTranscript> = wire
            .streams
            .iter()
            .map(|st| transcript(st, a.ranks, !variant.zeroes_barrier_word()))
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow!("{label}: a connection does not parse: {e}"))?;
        worlds.push((label, ts));
    }
    let (pl, pt) = &worlds[0];
    let (cl, ct) = &worlds[1];
    if a.show {
        for (label, ts) in &worlds {
            println!("{label}:");
            for (pair, list) in by_pair(ts) {
                for (i, t) in list.iter().enumerate() {
                    println!("  {}>{} #{i}: {t}", pair.0, pair.1);
                }
            }
        }
    }
    let diffs = differences(pt, ct);
    let masked = if variant.zeroes_barrier_word() { "" } else { ", 4-byte barrier words (uninitialised in NVSHMEM)" };
    if diffs.is_empty() {
        println!(
            "conformance: {pl} and {cl} put the same bytes on the wire: {} connections between {} ranks, ops {} (masked: addresses, ports, magic{masked})",
            pt.len(),
            a.ranks,
            a.ops
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!("conformance: {pl} and {cl} DIFFER ({} differences):", diffs.len());
        for d in &diffs {
            println!("  {d}");
        }
        Ok(ExitCode::from(1))
    }
}
