//! `bootsim shrink`, sharded sweeps, `--json` and `bootsim merge`, end to end.

use std::process::{Command, Output};

use bootsim_nvshmem::workload::Workload;
use bootsim_sim::shrink::shrink;
use bootsim_sim::sweep::JsonLine;
use bootsim_sim::{run_case, Case, Verdict};

fn bootsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bootsim")).args(args).output().expect("bootsim runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const REPORT: &str = "engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3";

#[test]
fn the_report_shrinks_to_two_ranks_few_ops_and_a_handful_of_stalls() {
    for (variant, verdict) in [("nvshmem-3.4", Verdict::Corruption), ("nvshmem-3.7", Verdict::Error)] {
        let case = Case::parse(&REPORT.replace("nvshmem-3.4", variant)).unwrap();
        let s = shrink(&case).unwrap();
        assert_eq!(s.verdict, verdict);
        assert_eq!(s.case.ranks(), 2);
        let Workload::Custom(ops) = &s.case.workload() else { panic!("not custom: {}", s.case) };
        assert!(ops.len() <= 3, "{}", s.case);
        let stalls = s.case.kernel_config().stalls.clone();
        assert!(!stalls.is_empty() && stalls.len() <= 5, "{}", s.case);
        assert_eq!(s.case.kernel_config().stall_gap, None);
        // The printed case replays with the same verdict, and shrinking is deterministic.
        assert_eq!(run_case(&Case::parse(&s.case.to_string()).unwrap(), false).verdict, verdict);
        assert_eq!(shrink(&case).unwrap().case, s.case);
    }
}

#[test]
fn shrink_prints_the_minimal_case_and_saves_a_seed_entry() {
    let scratch = tempfile::Builder::new().prefix("bootsim-shrink-").tempdir().unwrap();
    let dir = scratch.path().to_path_buf();
    let path = dir.join("report-min.toml");
    let _ = std::fs::remove_file(&path);
    let p = path.to_str().unwrap();
    let o = bootsim(&["shrink", REPORT, "--save", p, "--found", "2026-11-30"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let out = stdout(&o);
    assert!(out.starts_with("verdict: corruption\ncase: engine=fast variant=nvshmem-3.4 workload=custom"), "{out}");
    let entry: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(entry["verdict"].as_str(), Some("corruption"));
    assert_eq!(entry["found"].as_str(), Some("2026-11-30"));
    let case = Case::parse(entry["case"].as_str().unwrap()).unwrap();
    assert_eq!(run_case(&case, false).verdict, Verdict::Corruption);
    let again = bootsim(&["shrink", REPORT, "--save", p]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("the file exists"));
}

#[test]
fn a_passing_case_is_refused_with_exit_2() {
    let o = bootsim(&["shrink", "engine=fast variant=seq workload=deepep ranks=2 adversary=rss seed=3"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("does not fail (verdict pass)"), "{err}");
    let o = bootsim(&["shrink", "ranks=0"]);
    assert_eq!(o.status.code(), Some(2));
    let o = bootsim(&["shrink", REPORT, "--save", "x.txt"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("must be a .toml file"));
}

fn sweep_json(shard: &str) -> String {
    let o = bootsim(&[
        "sweep",
        "--variant",
        "nvshmem-3.7,seq",
        "--seeds",
        "40",
        "--start",
        "5",
        "--shard",
        shard,
        "--json",
    ]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&o.stderr));
    stdout(&o)
}

#[test]
fn shards_are_disjoint_cover_the_range_and_merge_to_the_unsharded_summary() {
    let n = 3;
    let scratch = tempfile::Builder::new().prefix("bootsim-merge-").tempdir().unwrap();
    let dir = scratch.path().to_path_buf();
    let mut files = Vec::new();
    let mut failing: Vec<(String, u64)> = Vec::new();
    let mut runs = 0;
    for i in 0..n {
        let text = sweep_json(&format!("{i}/{n}"));
        for line in text.lines() {
            match serde_json::from_str::<JsonLine>(line).expect("every line parses") {
                JsonLine::Failure { variant, seed, case, .. } => {
                    assert_eq!(seed % n, i);
                    assert_eq!(Case::parse(&case).unwrap().seed(), seed);
                    failing.push((variant, seed));
                }
                JsonLine::Summary { runs: r, shard, .. } => {
                    assert_eq!((shard.index, shard.count), (i, n));
                    runs += r;
                }
            }
        }
        let f = dir.join(format!("out.{i}.jsonl"));
        std::fs::write(&f, text).unwrap();
        files.push(f.to_str().unwrap().to_string());
    }
    assert_eq!(runs, 2 * 40, "the shards together run every seed once");
    let whole = sweep_json("0/1");
    let mut whole_failing: Vec<(String, u64)> = whole
        .lines()
        .filter_map(|l| match serde_json::from_str::<JsonLine>(l).unwrap() {
            JsonLine::Failure { variant, seed, .. } => Some((variant, seed)),
            JsonLine::Summary { .. } => None,
        })
        .collect();
    failing.sort();
    whole_failing.sort();
    assert_eq!(failing, whole_failing);
    assert!(!failing.is_empty());

    let mut args = vec!["merge"];
    args.extend(files.iter().map(String::as_str));
    let merged = bootsim(&args);
    let plain = bootsim(&["sweep", "--variant", "nvshmem-3.7,seq", "--seeds", "40", "--start", "5"]);
    assert_eq!(merged.status.code(), Some(1));
    assert_eq!(stdout(&merged), stdout(&plain));
    args.push("--json");
    assert_eq!(stdout(&bootsim(&args)), whole, "merge --json equals the unsharded --json");
}

#[test]
fn merge_rejects_bad_input_with_exit_2_and_a_file_it_cannot_read_with_3() {
    let scratch = tempfile::Builder::new().prefix("bootsim-merge-bad-").tempdir().unwrap();
    let dir = scratch.path().to_path_buf();
    let f = dir.join("bad.jsonl");
    std::fs::write(&f, "{\"type\":\"nope\"}\n").unwrap();
    let o = bootsim(&["merge", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad.jsonl:1: not a `bootsim sweep --json` line"));
    let o = bootsim(&["merge", dir.join("missing.jsonl").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "an I/O error is could-not-run");
}

#[test]
fn compare_json_is_one_object_per_variant() {
    let o = bootsim(&["compare", "--seeds", "10", "--json"]);
    let rows: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), bootsim_nvshmem::PRESETS.len());
    assert!(rows.iter().all(|r| r["runs"] == 10 && r["variant"].is_string()));
}
