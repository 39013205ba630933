//! Failure reports people can read: the explanation of the report's corpus case names the
//! stalled RX queue and the symptom, `run`/`replay` print it, and `--json` has the documented
//! fields (docs/json.md).

use std::path::Path;
use std::process::{Command, Output};

use bootsim_sim::{explain, run_case, Case};
use serde_json::Value;

fn report_case() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/report-nvshmem-3.4.toml");
    let text = std::fs::read_to_string(path).expect("seeds/report-nvshmem-3.4.toml");
    let v: toml::Value = toml::from_str(&text).expect("valid seed file");
    v["case"].as_str().expect("a case string").to_string()
}

fn bootsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bootsim")).args(args).output().expect("bootsim runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_report_case_is_explained_in_plain_lines() {
    let case = Case::parse(&report_case()).unwrap();
    // A sweep keeps no trace: explain re-runs the case with tracing and says the same.
    let lines = explain(&run_case(&case, false));
    assert_eq!(lines, explain(&run_case(&case, true)));
    assert!((3..=6).contains(&lines.len()), "{lines:#?}");
    let text = lines.join("\n");
    for needle in [
        "rank 1 sent alltoall #1 step 1 (576 bytes, tag 0x1) to rank 0 on connection 7",
        "then barrier #2 round 1 (4 bytes, tag 0x1) on connection 8",
        "Connection 8 overtook connection 7",
        "handshake-completing ACK waited",
        "in RX queue 1 on host 0 (rank 0)",
        "took the barrier #2 round 1 message: 4 bytes where 576 were expected",
        "QPN 0x820001ba and a zero GID",
        "ibv_modify_qp(RTR) with a zero GID: EINVAL",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[test]
fn the_size_checked_variant_explains_its_error_and_hang() {
    let case = Case::parse("engine=fast variant=nvshmem-3.7 workload=deepep ranks=2 adversary=rss seed=3").unwrap();
    let text = explain(&run_case(&case, false)).join("\n");
    assert!(text.contains("Connection 8 overtook connection 7"), "{text}");
    assert!(text.contains("message size mismatch: received 4 bytes instead of 576"), "{text}");
    assert!(text.contains("rank 1 hangs"), "{text}");
}

#[test]
fn passing_runs_need_no_explanation() {
    let case = Case::parse("engine=fast variant=seq seed=3").unwrap();
    assert!(explain(&run_case(&case, false)).is_empty());
}

#[test]
fn run_and_replay_print_an_explain_block_only_when_failing() {
    let case = report_case();
    for cmd in ["run", "replay"] {
        let out = stdout(&bootsim(&[cmd, &case]));
        let block = out.split("\nexplain:\n").nth(1).unwrap_or_else(|| panic!("{cmd}: no explain block:\n{out}"));
        assert!(block.contains("RX queue 1 on host 0"), "{block}");
    }
    assert!(!stdout(&bootsim(&["run", "engine=fast variant=seq seed=3"])).contains("explain:"));
}

fn json(args: &[&str]) -> (Option<i32>, Value) {
    let o = bootsim(args);
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", stdout(&o)));
    (o.status.code(), v)
}

#[test]
fn run_json_has_the_documented_fields() {
    let (code, v) = json(&["run", &report_case(), "--json"]);
    assert_eq!(code, Some(1));
    assert_eq!(v["schema"], 1);
    assert_eq!(v["command"], "run");
    assert_eq!(v["case"], "engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3");
    assert_eq!(v["verdict"], "corruption");
    assert_eq!(v["ok"], false);
    let findings = v["findings"].as_array().expect("findings");
    assert!(findings.iter().any(|f| f["kind"] == "corruption" && f["received_qp"].is_string()), "{findings:?}");
    let explain = v["explain"].as_array().expect("explain");
    assert!((3..=6).contains(&explain.len()));
    assert!(explain.iter().any(|l| l.as_str().unwrap().contains("RX queue 1 on host 0")));
    assert!(v["bootstrap_ms"].as_f64().unwrap() > 0.0);
    assert!(v["bootstrap_ns"].as_u64().unwrap() > 0);
    for key in [
        "messages",
        "packets",
        "stalled",
        "lost",
        "retransmits",
        "backlog_drops",
        "enqueued",
        "orphans",
        "agenda_events",
        "stale_timers",
        "wakeups",
    ] {
        assert!(v["stats"][key].is_u64(), "stats.{key}");
    }
    assert_eq!(v["stats"]["messages"], 4);
    assert!(v["replay"].as_str().unwrap().starts_with("bootsim replay '"));
    assert!(v["trace_digest"].is_null() && v["trace"].is_null() && v["timeline"].is_null());
}

#[test]
fn replay_json_carries_the_digest_and_passing_runs_exit_0() {
    let (code, v) = json(&["replay", &report_case(), "--json"]);
    assert_eq!(code, Some(1));
    assert_eq!(v["command"], "replay");
    let digest = v["trace_digest"].as_str().expect("digest");
    assert!(digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(v["trace"].is_null());

    let (code, v) = json(&["run", "engine=fast variant=seq seed=3", "--json", "--trace"]);
    assert_eq!(code, Some(0));
    assert_eq!((v["verdict"].as_str(), v["ok"].as_bool()), (Some("pass"), Some(true)));
    assert_eq!(v["explain"].as_array().map(Vec::len), Some(0));
    assert!(v["trace"].as_array().is_some_and(|t| !t.is_empty()));
    assert!(v["trace_digest"].is_string());
}
