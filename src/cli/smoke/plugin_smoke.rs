//! `bootsim smoke --plugin ...`: the command's side of a [`Session`]: resolve the plugin, run
//! the iterations, count verdicts, print the summary.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use bootsim_adapters::plugin::{locate, PluginSpec};
use bootsim_nvshmem::workload::Workload;
use bootsim_nvshmem::Variant;
use bootsim_sim::Verdict;

use super::plugin::Session;
use super::wire::parse_policy;
use super::SmokeArgs;
use crate::cli::real_nvshmem::REPORT_POLICY;
use crate::cli::shuffle;

/// `scripts/fetch-nvshmem.sh` of the source tree this program was built from.
const FETCH_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/fetch-nvshmem.sh");

/// Resolves `--plugin`: a cached version (fetched when missing) or a path.
pub(crate) fn locate_plugin(arg: &str) -> anyhow::Result<PluginSpec> {
    let mut fetch_failed = false;
    let found = locate(arg, |version| {
        fetch_failed = true;
        if !Path::new(FETCH_SCRIPT).exists() {
            return Err(format!("NVSHMEM {version} is not in the cache; run scripts/fetch-nvshmem.sh {version}"));
        }
        eprintln!("bootsim: NVSHMEM {version} is not in the cache: running scripts/fetch-nvshmem.sh {version}");
        match Command::new("bash").arg(FETCH_SCRIPT).arg(version).status() {
            Ok(s) if s.success() => {
                fetch_failed = false;
                Ok(())
            }
            Ok(s) => Err(format!("scripts/fetch-nvshmem.sh {version} failed ({s})")),
            Err(e) => Err(format!("running scripts/fetch-nvshmem.sh: {e}")),
        }
    });
    // A version that cannot be fetched is the world's failure (exit 3); a bad path is usage.
    found.map_err(|e| if fetch_failed { crate::cli::runtime(anyhow!(e)) } else { anyhow!(e) })
}

/// Runs `smoke --local n --plugin arg`.
pub(super) fn run(
    args: &SmokeArgs,
    n: u32,
    arg: &str,
    variant: Variant,
    workload: &Workload,
) -> anyhow::Result<ExitCode> {
    if n == 0 || n > 64 {
        bail!("--local {n} with --plugin: 1..=64 ranks");
    }
    let plugin = locate_plugin(arg)?;
    if args.tag_counter.is_some() && plugin.family != bootsim_adapters::plugin::PluginFamily::TagPerCall {
        bail!("--tag-counter: {arg} has no per-call tag counter (only NVSHMEM 3.8 and later do)");
    }
    let plugin_ranks: BTreeSet<u32> = match &args.plugin_ranks {
        Some(list) => list.iter().copied().collect(),
        None => (0..n).collect(),
    };
    if let Some(r) = plugin_ranks.iter().find(|&&r| r >= n) {
        bail!("--plugin-ranks: rank {r} is outside a world of {n} ranks");
    }
    let core_variant = match args.tag_counter {
        Some(t) if variant.first_call_tag().is_some() => variant.with_first_tag(t),
        _ => variant,
    };
    let session = Session {
        n,
        plugin: plugin.clone(),
        plugin_ranks: plugin_ranks.clone(),
        core_variant,
        specs: workload.ops(args.seed),
        seed: args.seed,
        op_timeout: Duration::from_millis(args.op_timeout_ms),
        tag_counter: args.tag_counter,
        capture: false,
        accept: match &args.wire {
            Some(_) => None,
            None => Some(args.accept.clone().unwrap_or_else(|| REPORT_POLICY.to_string())),
        },
    };
    let accept = session.accept.as_deref().map(|p| shuffle::parse_policy("--accept", p)).transpose()?;
    let make_policy = args.wire.as_deref().map(|p| parse_policy(p, args.seed, n)).transpose()?;
    if make_policy.is_some() {
        bootsim_adapters::wire::wire_available()
            .map_err(|why| crate::cli::runtime(anyhow!("--wire needs the userspace wire: {why}")))?;
    }
    let who = match &plugin.version {
        Some(v) => format!("NVSHMEM {v}"),
        None => "a plugin of unknown version".into(),
    };
    println!(
        "plugin: {who} at {} (speaks like bootsim {}); plugin ranks {:?}, bootsim-core ranks {:?} ({core_variant})",
        plugin.path.display(),
        plugin.family.variant(),
        plugin_ranks,
        (0..n).filter(|r| !plugin_ranks.contains(r)).collect::<Vec<_>>(),
    );
    let core_ranks = plugin_ranks.len() < n as usize;
    let matching = Variant::preset(plugin.family.variant()).expect("a preset");
    let mismatched = core_ranks && !core_variant.same_wire_bytes(&matching);
    if mismatched {
        println!(
            "plugin: MISMATCHED PAIR: bootsim-core ranks run {core_variant} but {who} speaks like {}: their tags or framing differ \
             (the bytes conformance compares): expect a failure, not a pass",
            plugin.family.variant()
        );
    }
    if let Some(p) = &accept {
        shuffle::Interposer::locate()?;
        println!(
            "accept: every rank a process, its accept() under the interposer (LD_PRELOAD), policy '{p}' (hosts: rank + 1)"
        );
        if !p.is_adversary() {
            println!("accept: {}", shuffle::NO_ADVERSARY);
        }
    }
    let started = Instant::now();
    let mut counts: BTreeMap<Verdict, u32> = BTreeMap::new();
    let mut first_cause = None;
    for iter in 0..args.iterations {
        let policy = make_policy.as_ref().map(|m| m()).transpose()?;
        let (verdict, findings, it) = session.run_and_print(iter, policy)?;
        if !verdict.is_ok() && first_cause.is_none() {
            first_cause = it.first_cause(&findings).map(|c| format!("; iter {iter}'s {c}"));
        }
        if let (false, Some(w)) = (verdict.is_ok(), &it.wire) {
            println!("wire: iter {iter}: {} connections, {} decisions", w.connections, w.decisions.len());
        }
        if let Some(a) = &it.accept {
            println!("accept: iter {iter}: {}", a.headline());
            if !verdict.is_ok() {
                for h in a.holds() {
                    println!("accept: iter {iter}: {h}");
                }
            }
        }
        *counts.entry(verdict).or_default() += 1;
    }
    let worst = counts.keys().copied().max().unwrap_or(Verdict::Pass);
    // A real world has no work guard (the simulator's): no `guard` column.
    let tally: Vec<String> = Verdict::ALL
        .iter()
        .filter(|v| **v != Verdict::Guard)
        .map(|v| format!("{v} {}", counts.get(v).copied().unwrap_or(0)))
        .collect();
    let wire = match (&args.wire, &session.accept) {
        (Some(p), _) => format!(" --wire '{p}'"),
        (None, Some(p)) => format!(" --accept '{p}'"),
        (None, None) => String::new(),
    };
    let pair = if mismatched && !worst.is_ok() {
        " (a mismatched pair: the two sides do not speak the same protocol)"
    } else {
        ""
    };
    println!(
        "smoke --local {n} --plugin {arg}{wire}: workload {} x{}: {}: verdict {worst}{pair} in {} ms{}",
        workload.name(),
        args.iterations,
        tally.join(", "),
        started.elapsed().as_millis(),
        first_cause.unwrap_or_default()
    );
    if worst.is_ok() && accept.as_ref().is_some_and(|p| !p.is_adversary()) {
        println!("smoke: {}", shuffle::NO_ADVERSARY);
    }
    Ok(if worst.is_ok() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
