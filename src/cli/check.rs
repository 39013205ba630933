//! `bootsim check --plugin VERSION|PATH`: "is my NVSHMEM build affected?" without root.
//!
//! Runs the plugin's own binary as every rank under the accept interposer with the schedules
//! that matter (from the hazard map, `bootsim explore --hazard-map`: the pairs of collectives the
//! plugin's workloads put back to back, alltoall then barrier (`deepep`) and alltoall then
//! alltoall (`qp-create`), whose second message from rank 0 to rank 1 is accepted first), at
//! 2 and 4 ranks; prints per workload affected or not with the symptom in the user's terms, and
//! the first cached version that is not affected. Exit 1 affected, 0 not, 3 could not run (no
//! interposer, a plugin that does not load, or a schedule the interposer could not apply: no
//! false all-clear).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::anyhow;
use bootsim_core::RunRecord;
use bootsim_sim::protocol::nvshmem::judge;
use bootsim_sim::Verdict;

use super::real_nvshmem::REPORT_POLICY;
use super::shuffle::Interposer;
use super::smoke::parse_workload;
use super::smoke::plugin::Session;
use super::smoke::plugin_smoke::locate_plugin;
use bootsim_adapters::wire::{wire_available, Policy};

/// Arguments of `bootsim check`.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// NVSHMEM's UID bootstrap plugin: a version (fetched into the cache when missing) or the
    /// path of a nvshmem_bootstrap_uid.so* of your own build.
    #[arg(long, value_name = "VERSION|PATH")]
    plugin: String,
    /// Runs per workload and world size.
    #[arg(long, default_value_t = 3)]
    iterations: u32,
    /// Bound on each operation (NVSHMEM has none).
    #[arg(long, default_value_t = 5_000)]
    op_timeout_ms: u64,
}

/// The workloads checked: name, what it is in the user's terms.
const WORKLOADS: [(&str, &str); 2] = [
    ("deepep", "alltoall then barrier (DeepEP's and NVSHMEM's init: QP handle exchange)"),
    ("qp-create", "back-to-back alltoalls (nvshmemx_qp_create)"),
];
/// World sizes checked.
const RANKS: [u32; 2] = [2, 4];

/// One workload's answer.
struct Answer {
    affected: bool,
    symptom: String,
}

/// Runs `bootsim check`.
pub fn check(a: CheckArgs) -> anyhow::Result<ExitCode> {
    if a.iterations == 0 {
        anyhow::bail!("--iterations must be at least 1");
    }
    Interposer::locate()?;
    let plugin = locate_plugin(&a.plugin)?;
    let name = plugin.version.as_ref().map_or_else(|| plugin.path.display().to_string(), |v| format!("NVSHMEM {v}"));
    let wire =
        if wire_available().is_ok() { " and behind the userspace wire (this process has CAP_NET_ADMIN)" } else { "" };
    println!(
        "check: {name} under the accept interposer{wire}, schedule '{REPORT_POLICY}' (rank 0's second message to rank 1 accepted first), ranks {RANKS:?}, {} runs each",
        a.iterations
    );
    let answers = check_one(&a, &a.plugin)?;
    let mut affected = false;
    for ((wl, what), ans) in WORKLOADS.iter().zip(&answers) {
        affected |= ans.affected;
        let head = if ans.affected { "AFFECTED" } else { "not affected" };
        println!("check: {wl} ({what}): {head}: {}", ans.symptom);
    }
    if !affected {
        println!("check: {name}: not affected by the accept-order bug on these schedules");
        return Ok(ExitCode::SUCCESS);
    }
    match first_unaffected(&a, plugin.version.as_deref())? {
        Some(v) => println!("check: {name} is affected; the first cached version that is not: NVSHMEM {v}"),
        None => println!(
            "check: {name} is affected; no cached version is free of it (scripts/fetch-nvshmem.sh VERSION adds one)"
        ),
    }
    Ok(ExitCode::from(1))
}

/// Checks one plugin: per workload, affected or not and why.
fn check_one(a: &CheckArgs, arg: &str) -> anyhow::Result<Vec<Answer>> {
    let plugin = locate_plugin(arg)?;
    let mut answers = Vec::new();
    for (wl, _) in WORKLOADS {
        let workload = parse_workload(wl)?;
        let mut worst: Option<(Verdict, String, u32)> = None;
        for n in RANKS {
            let session = Session {
                accept: Some(REPORT_POLICY.to_string()),
                ..Session::new(
                    n,
                    plugin.clone(),
                    (0..n).collect(),
                    workload.ops(0),
                    Duration::from_millis(a.op_timeout_ms),
                )
            };
            // Under the interposer, and behind the wire as well when this process may run it.
            let wire = wire_available().is_ok().then(|| Session { accept: None, ..session.clone() });
            let runs = std::iter::repeat_n(&session, a.iterations as usize)
                .map(|s| (s, None))
                .chain(wire.iter().flat_map(|w| std::iter::repeat_n(w, a.iterations as usize).map(|s| (s, Some(())))));
            for (session, on_wire) in runs {
                let policy = on_wire.map(|()| REPORT_POLICY.parse::<Policy>()).transpose()?;
                let it = session.run(policy)?;
                if let Some(why) =
                    it.ranks.iter().find_map(|e| e.record.init.as_ref().filter(|t| t.text().contains("cannot")))
                {
                    return Err(super::runtime(anyhow!("{wl} at {n} ranks could not run: {why}")));
                }
                let held = it.accept.as_ref().map_or(usize::from(on_wire.is_some()), |s| s.held);
                let record = RunRecord::of_ranks(it.ranks.iter().map(|e| e.record.clone()).collect());
                let (verdict, findings) = judge(&session.specs, session.seed, n, &record);
                if verdict.is_ok() && held == 0 {
                    return Err(super::runtime(anyhow!(
                        "{wl} at {n} ranks: the interposer held no connection, so the schedule was not applied \
                         (a statically linked plugin host, or a protocol it does not know): no answer"
                    )));
                }
                // The finding of the verdict's kind first (a hang after an error is its consequence).
                let mut texts: Vec<String> = findings.iter().map(|f| f.to_string()).collect();
                texts.sort_by_key(|t| !t.starts_with(verdict.name()));
                let text = format!("{}{}", texts.join("; "), if on_wire.is_some() { " (behind the wire)" } else { "" });
                if worst.as_ref().is_none_or(|w| verdict > w.0) {
                    worst = Some((verdict, text, n));
                }
            }
        }
        let (verdict, text, n) = worst.expect("at least one run");
        answers.push(match verdict {
            v if v.is_ok() => Answer { affected: false, symptom: format!("every run passed ({v})") },
            v => Answer { affected: true, symptom: format!("{} at {n} ranks ({v}): {}", symptom(&text), first(&text)) },
        });
    }
    Ok(answers)
}

/// The symptom in the user's terms.
fn symptom(text: &str) -> &'static str {
    if text.contains("cross-wired") {
        "cross-wired QP handles, silently: a rank connects its QP to the wrong remote QP"
    } else if text.contains("zero GID") || text.contains("zero") && text.contains("corruption") {
        "zeroed QP handles: ibv_modify_qp(RTR) fails with EINVAL, or worse, runs on garbage"
    } else if text.contains("size mismatch") {
        "\"Message size mismatch\": NVSHMEM init fails and the peer rank hangs"
    } else if text.contains("truncated") {
        "\"Message truncated\": NVSHMEM init fails"
    } else {
        "a bootstrap failure"
    }
}

fn first(text: &str) -> String {
    let t = text.split("; then").next().unwrap_or(text);
    if t.chars().count() > 240 {
        format!("{}...", t.chars().take(240).collect::<String>())
    } else {
        t.to_string()
    }
}

/// The first cached version, newer than `given` when it is known, that no workload affects.
fn first_unaffected(a: &CheckArgs, given: Option<&str>) -> anyhow::Result<Option<String>> {
    let key = |v: &str| v.split('.').map(|x| x.parse::<u32>().unwrap_or(0)).collect::<Vec<_>>();
    let mut cached: Vec<String> = std::fs::read_dir(bootsim_adapters::plugin::cache_dir())
        .map(|d| d.flatten().filter_map(|e| e.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    cached.retain(|v| v.split('.').count() == 3 && given.is_none_or(|g| key(v) > key(g)));
    cached.sort_by_key(|v| key(v));
    for v in cached {
        eprintln!("check: trying the cached NVSHMEM {v}");
        if check_one(a, &v)?.iter().all(|ans| !ans.affected) {
            return Ok(Some(v));
        }
    }
    Ok(None)
}
