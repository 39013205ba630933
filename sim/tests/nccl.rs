//! NCCL's bootstrap on the fast engine under the kernel adversaries (issue #26): over a fixed
//! seed range, each variant's verdict counts and its #1176 symptom count (a 4-byte sync
//! receive handed a connectInfo: "Message truncated : received N bytes instead of 4") equal
//! the recorded figures. 2.19 shows the symptom, 2.21 and 2.30 never do, 2.8 swaps messages
//! silently. `--ignored` prints the wider table quoted in docs/nccl-protocol.md.

use bootsim_sim::sweep::verdict_counts;
use bootsim_sim::{run_case, Case, Finding, Verdict};

/// The #1176 symptom: NCCL's truncation error on a 4-byte (sync) receive.
fn is_1176(f: &Finding) -> bool {
    matches!(f, Finding::Error { error, .. } if error.text().contains("Message truncated : received ") && error.text().ends_with("instead of 4"))
}

/// (verdict counts as `name=n` for the non-zero ones, runs showing the #1176 symptom).
fn tally(case: &str, seeds: std::ops::Range<u64>) -> (String, usize) {
    let base = Case::parse(case).unwrap_or_else(|e| panic!("{case}: {e}"));
    let mut counts = std::collections::BTreeMap::<Verdict, usize>::new();
    let mut symptom = 0;
    for seed in seeds {
        let r = run_case(&base.with_seed(seed).unwrap(), false);
        *counts.entry(r.verdict).or_default() += 1;
        symptom += usize::from(r.findings.iter().any(is_1176));
    }
    let counts = verdict_counts(|v| counts.get(&v).copied().unwrap_or(0));
    let text = counts.iter().filter(|(_, &n)| n > 0).map(|(k, n)| format!("{k}={n}")).collect::<Vec<_>>().join(" ");
    (text, symptom)
}

/// (case without a seed, verdict counts over seeds 0..100, runs with the #1176 symptom).
/// Since RX-queue admission is decided when a packet is sent (issue #28 item 4), 2.19's
/// `nccl-p2p` counts 15 (was 16), its `nccl-init` 55 (was 57), 2.8's `nccl-init` 74 (was 75):
/// other seeds, the same rates (`verdict_equivalence.rs`), every error still the symptom.
const RECORDED: &[(&str, &str, usize)] = &[
    ("variant=nccl-2.8 workload=nccl-p2p ranks=2 adversary=rss", "pass=100", 0),
    ("variant=nccl-2.19 workload=nccl-p2p ranks=2 adversary=rss", "error=15 pass=85", 15),
    ("variant=nccl-2.21 workload=nccl-p2p ranks=2 adversary=rss", "pass=100", 0),
    ("variant=nccl-2.30 workload=nccl-p2p ranks=2 adversary=rss", "pass=100", 0),
    ("variant=nccl-2.8 workload=nccl-init ranks=8 adversary=rss", "corruption=74 pass=26", 0),
    ("variant=nccl-2.19 workload=nccl-init ranks=8 adversary=rss", "error=55 pass=45", 55),
    ("variant=nccl-2.21 workload=nccl-init ranks=8 adversary=rss", "pass=100", 0),
    ("variant=nccl-2.30 workload=nccl-init ranks=8 adversary=rss", "pass=100", 0),
];

#[test]
fn nccl_verdicts_and_1176_symptoms_over_a_fixed_seed_range_are_unchanged() {
    let mut diffs = Vec::new();
    for &(case, counts, symptom) in RECORDED {
        let got = tally(case, 0..100);
        if got != (counts.to_string(), symptom) {
            diffs.push(format!("{case}: recorded ({counts}, {symptom}), now ({}, {})", got.0, got.1));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

#[test]
#[ignore = "the wider table (cargo test --release -p bootsim-sim --test nccl -- --ignored --nocapture)"]
fn the_1176_table() {
    let shapes = [
        "workload=nccl-p2p ranks=2",
        "workload=nccl-p2p ranks=4",
        "workload=nccl-p2p ranks=8",
        "workload=nccl-init ranks=2",
        "workload=nccl-init ranks=8",
        "workload=nccl-init ranks=16",
        "workload=nccl-init ranks=16 collnet=on",
    ];
    println!("| shape | adversary | variant | verdicts over seeds 0..200 | #1176 symptom |");
    println!("|---|---|---|---|---|");
    for shape in shapes {
        for adversary in ["rss", "swarm", "lossy"] {
            for v in bootsim_nccl::variant::NAMES {
                let (counts, symptom) = tally(&format!("variant={v} {shape} adversary={adversary}"), 0..200);
                println!("| {shape} | {adversary} | {v} | {counts} | {symptom}/200 |");
            }
        }
    }
}

/// The turmoil engine runs NCCL's nodes through the async driver (the same seam): 2.19 shows
/// the #1176 symptom there too, 2.21 never does.
#[test]
fn nccl_on_the_turmoil_engine_shows_1176_on_2_19_only() {
    let (counts, symptom) = tally("engine=turmoil variant=nccl-2.19 workload=nccl-p2p ranks=2 adversary=rss", 0..20);
    assert!(symptom > 0 && counts.contains("error="), "2.19 on turmoil: {counts}, {symptom} symptoms");
    let (counts, symptom) = tally("engine=turmoil variant=nccl-2.21 workload=nccl-p2p ranks=2 adversary=rss", 0..20);
    assert_eq!((counts.as_str(), symptom), ("pass=20", 0));
}

/// `--json`'s corruption of an NCCL run: the keys every protocol's corruption has, and none of
/// NVSHMEM's QP keys (docs/json.md: a protocol's detail keys are its own); `op` and `source`
/// name NCCL's calls and program steps.
#[test]
fn an_nccl_corruption_in_json_has_the_shared_keys_only() {
    let case = "engine=fast protocol=nccl variant=nccl-2.8 workload=nccl-init ranks=2 adversary=rss seed=5";
    let report = run_case(&Case::parse(case).unwrap(), false);
    let f = report.findings.iter().find(|f| matches!(f, Finding::Corruption { .. })).expect("a corruption");
    let Finding::Corruption { rank, op, peer, source, .. } = f else { unreachable!() };
    let (op, source) = (op.to_string(), source.to_string());
    let text = |s: &str| serde_json::to_string(s).unwrap();
    let want =
        format!(r#"{{"kind":"corruption","rank":{rank},"op":{},"peer":{peer},"source":{}}}"#, text(&op), text(&source));
    assert_eq!(serde_json::to_string(f).unwrap(), want);
    assert!(op.starts_with("ncclTransportP2pSetup(") && op.ends_with(')'), "{op}");
    assert!(op.contains(" at transport.cc:") && op.contains(" (step "), "{op}");
    assert!(source.contains(" (step ") && source.contains(" from rank "), "{source}");
}
