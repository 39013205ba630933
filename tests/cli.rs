//! End-to-end tests of the `bootsim` command as a user runs it.

use std::process::{Command, Output};

fn bootsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bootsim")).args(args).output().expect("bootsim runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_failing_run_exits_1_and_prints_its_replay_line() {
    let o = bootsim(&["run", "engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(out.starts_with("verdict: corruption"), "{out}");
    assert!(out.contains(
        "replay: bootsim replay 'engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3'"
    ));
}

#[test]
fn a_passing_run_exits_0() {
    let o = bootsim(&["run", "engine=fast variant=seq seed=3"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).starts_with("verdict: pass"));
}

#[test]
fn replay_twice_prints_the_same_digest() {
    let case = "engine=fast variant=nvshmem-3.7 workload=nvshmem-init ranks=4 adversary=lossy seed=5";
    let digest = |o: Output| {
        stdout(&o).lines().find_map(|l| l.strip_prefix("trace-digest: ").map(String::from)).expect("digest line")
    };
    let a = digest(bootsim(&["replay", case]));
    assert_eq!(a.len(), 64);
    assert_eq!(a, digest(bootsim(&["replay", case])));
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    for (args, needle) in [
        (vec!["run", "ranks=0"], "ranks=0: must be 1..=65536"),
        (vec!["run", "ranks=70000"], "must be 1..=65536"),
        (vec!["run", "engine=fast variant=nvshmem-9"], "accepted: nvshmem-3.4"),
        (vec!["run", "garbage"], "not key=value"),
        (vec!["sweep", "--variant", "nope", "--seeds", "1"], "possible values: nvshmem-3.4, nvshmem-3.7, nvshmem-3.8"),
        (vec!["sweep", "--variant", "nvshmem-3.9", "--seeds", "1"], "a similar value exists: 'nvshmem-3.8'"),
        (
            vec!["sweep", "--variant", "seq", "--adversary", "chaos", "--seeds", "1"],
            "possible values: fifo, rss, lossy",
        ),
        (vec!["compare", "--workload", "deeppe"], "a similar value exists: 'deepep'"),
    ] {
        let o = bootsim(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

/// A line a protocol of the user's own printed (`harness::replay_line`) is not the CLI's to run:
/// every command that takes a case refuses it as usage, naming the protocol and the known ones,
/// and says how it replays (through the library, in the user's cargo test).
#[test]
fn a_custom_protocols_case_line_exits_2_and_says_how_to_replay_it() {
    let world = bootsim_sim::Case::parse("engine=fast ranks=2 adversary=swarm seed=11 stall_gap=off").unwrap();
    let line = bootsim_sim::harness::replay_line("rendezvous", "reused-tag", "two-rounds", &world);
    assert!(line.starts_with("protocol=rendezvous variant=reused-tag workload=two-rounds engine=fast"), "{line}");
    for args in [
        vec!["replay", &line],
        vec!["run", &line],
        vec!["run", &line, "--json"],
        vec!["shrink", &line],
        vec!["explore", &line],
    ] {
        let o = bootsim(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(stdout(&o), "", "{args:?}: nothing run");
        assert!(
            err.contains("protocol=`rendezvous` is not one of bootsim's protocols (known: nvshmem, nccl)"),
            "{args:?}: {err}"
        );
        assert!(err.contains("replays in your own cargo test"), "{args:?}: {err}");
        assert!(err.contains("bootsim_sim::harness::run(&YourProtocol, &variant, &workload, &bootsim_sim::harness::world_of(LINE)?, true)"), "{args:?}: {err}");
    }
}

#[test]
fn sweep_results_do_not_depend_on_jobs() {
    let run = |jobs: &str| {
        let o = bootsim(&["sweep", "--variant", "nvshmem-3.4,seq", "--seeds", "60", "--jobs", jobs]);
        assert_eq!(o.status.code(), Some(1));
        stdout(&o)
    };
    let one = run("1");
    assert_eq!(one, run("2"));
    assert_eq!(one, run("3"));
    assert!(one.contains("nvshmem-3.4"), "{one}");
    assert!(one.lines().any(|l| l.starts_with("seq") && l.contains("corruption=0 error=0 hang=0")), "{one}");
}

#[test]
fn compare_prints_the_headline_table() {
    let o = bootsim(&["compare", "--seeds", "50"]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    for v in bootsim_nvshmem::PRESETS {
        assert!(out.lines().any(|l| l.starts_with(&format!("| {v} "))), "{v} missing: {out}");
    }
    let row = |v: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("| {v} ")))
            .unwrap()
            .split('|')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_ne!(row("nvshmem-3.4")[4], "0", "3.4 corrupts under rss: {out}");
    assert_ne!(row("nvshmem-3.7")[5], "0", "3.7 errors under rss: {out}");
    assert_eq!(row("seq")[2], "50");
}

#[test]
fn without_an_engine_every_command_runs_fast_and_engine_turmoil_runs_the_real_driver() {
    let o = bootsim(&["run", "variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3"]);
    let out = stdout(&o);
    assert!(out.contains("case: engine=fast variant=nvshmem-3.4"), "{out}");
    assert_eq!(o.status.code(), Some(1), "{out}");
    let o = bootsim(&["run", "engine=turmoil variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=5"]);
    let out = stdout(&o);
    assert!(out.contains("case: engine=turmoil variant=nvshmem-3.4"), "{out}");
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("took barrier #2 round 1 from rank 0"), "{out}");
    // An error names its rank once.
    assert!(out.contains("error: rank 1: barrier #2 recv from rank 0 tag 0x1: message truncated"), "{out}");
}

#[test]
fn run_help_lists_every_case_key_and_its_example_fails_as_it_says() {
    let o = bootsim(&["run", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = stdout(&o);
    for key in ["engine", "variant", "drain_ms", "first_tag", "workload", "ranks", "adversary", "seed", "deadline_ms"] {
        assert!(help.lines().any(|l| l.trim_start().starts_with(key)), "{key} missing from run --help:\n{help}");
    }
    for preset in bootsim_nvshmem::PRESETS {
        assert!(help.contains(preset), "{preset} missing from run --help");
    }
    assert!(help.contains("rx_queues") && help.contains("[default: fast]"), "{help}");
    let example = help.lines().find_map(|l| l.strip_prefix("Example: bootsim run '")).expect("an example");
    let case = example.split('\'').next().unwrap();
    let o = bootsim(&["run", case]);
    assert_eq!(o.status.code(), Some(1), "the help's example: {}", stdout(&o));
    assert!(stdout(&o).starts_with("verdict: corruption"));
    for v in bootsim_sim::case::variant_names().into_iter().chain(bootsim_sim::case::workload_names()) {
        assert!(help.contains(v), "{v} missing from run --help");
    }
    let nccl = help.lines().find_map(|l| l.strip_prefix("NCCL example: bootsim run '")).expect("an NCCL example");
    let o = bootsim(&["run", nccl.split('\'').next().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "the help's NCCL example: {}", stdout(&o));
    assert!(stdout(&o).contains("Message truncated : received 512 bytes instead of 4"), "{}", stdout(&o));
}

#[test]
fn durations_that_could_overflow_the_simulated_clock_are_refused_and_the_extremes_run() {
    for bad in [
        "engine=fast service=5000000000s ranks=2 seed=1",
        "engine=fast stall_xm=4999999999s ranks=2",
        "engine=fast stall_cap=5000000000s",
        // A bare number has no unit (it meant nanoseconds here, milliseconds in policies).
        "engine=fast latency=20",
        "deadline_ms=18446744073709551615",
    ] {
        let o = bootsim(&["run", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("at most 3600s") || e.contains("at most 1ms") || e.contains("must be 1..=86400000"), "{e}");
    }
    // The largest accepted values run to a verdict (this binary has overflow checks in tests).
    for edge in [
        "engine=fast service=1ms ranks=2 seed=1 deadline_ms=86400000",
        "engine=fast syn_rto=3600s rto_min=3600s rto_max=3600s adversary=lossy loss_good=0.5 ranks=3 deadline_ms=86400000",
        "engine=fast latency=3600s jitter=3600s stall_xm=3600s stall_cap=3600s ranks=3 deadline_ms=86400000",
    ] {
        let o = bootsim(&["run", edge]);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{edge}: {}{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).starts_with("verdict: "), "{edge}: {}", stdout(&o));
    }
}

#[test]
fn a_world_too_large_for_the_memory_budget_is_refused_with_the_estimate() {
    let o = bootsim(&["run", "engine=fast workload=custom ops=barrier ranks=16384"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("needs about 6275 MiB (every rank's state"), "{}", stderr(&o));
}

#[test]
fn the_readmes_nvshmem_3_8_hang_is_the_connect_deadlock() {
    let o = bootsim(&["run", "variant=nvshmem-3.8 workload=nvshmem-init ranks=16 adversary=swarm seed=2"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.starts_with("verdict: hang"), "{out}");
    assert!(out.contains("accept queue was full and dropped its handshake"), "{out}");
    assert!(
        out.contains("Deadlock: ranks 4 and 12 each wait in connect() for the other")
            && out.contains("NVSHMEM gives up after 3 connect timeouts (about 381 s here)"),
        "{out}"
    );
}

#[test]
fn sweep_json_counts_are_an_object_and_merge_checks_the_layout() {
    let scratch = tempfile::Builder::new().prefix("bootsim-merge-").tempdir().unwrap();
    let dir = scratch.path().to_path_buf();
    let mut files = Vec::new();
    for shard in ["0/2", "1/2"] {
        let o = bootsim(&["sweep", "--variant", "nvshmem-3.4", "--seeds", "20", "--shard", shard, "--json"]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let out = stdout(&o);
        let summary: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
        assert_eq!(summary["type"], "summary");
        assert_eq!(summary["schema"], 3);
        let counts = summary["counts"].as_object().expect("counts is an object");
        let total: u64 = counts.values().map(|n| n.as_u64().unwrap()).sum();
        assert_eq!(total, summary["runs"].as_u64().unwrap());
        assert!(counts.contains_key("hang") && counts.contains_key("corruption"), "{counts:?}");
        let path = dir.join(format!("out.{}.jsonl", files.len()));
        std::fs::write(&path, out).unwrap();
        files.push(path.to_string_lossy().into_owned());
    }
    // Merged shards print what one unsharded sweep prints.
    let merged = bootsim(&["merge", &files[0], &files[1]]);
    let whole = bootsim(&["sweep", "--variant", "nvshmem-3.4", "--seeds", "20"]);
    assert_eq!(merged.status.code(), Some(1));
    assert_eq!(stdout(&merged), stdout(&whole));
    // A line of the old layout (no schema, counts as pairs) is refused with what to do.
    let old = dir.join("old.jsonl");
    let text = std::fs::read_to_string(&files[0]).unwrap().replace("\"schema\":3,", "");
    std::fs::write(&old, text).unwrap();
    let o = bootsim(&["merge", &old.to_string_lossy()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("layout 0") && stderr(&o).contains("re-run"), "{}", stderr(&o));
    // A failure line's verdict is read as a verdict: an unknown one (or a pass) is refused.
    let bad = dir.join("bad.jsonl");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(text.contains("\"verdict\":\"corruption\""), "{text}");
    std::fs::write(&bad, text.replacen("\"verdict\":\"corruption\"", "\"verdict\":\"corrupted\"", 1)).unwrap();
    let o = bootsim(&["merge", &bad.to_string_lossy()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("`corrupted` is no verdict of a failure line"), "{}", stderr(&o));
}

#[test]
fn sweep_and_compare_take_nccls_versions_and_the_first_failure_is_1176() {
    let o = bootsim(&[
        "sweep",
        "--variant",
        "nccl-2.19,nccl-2.21",
        "--workload",
        "nccl-p2p",
        "--ranks",
        "2",
        "--seeds",
        "20",
        "--jobs",
        "1",
    ]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("nccl-2.21    runs=20 pass=20"), "{out}");
    assert!(out.contains("Message truncated : received 512 bytes instead of 4"), "{out}");
    assert!(
        out.contains("replay: bootsim replay 'engine=fast protocol=nccl variant=nccl-2.19 workload=nccl-p2p ranks=2"),
        "{out}"
    );
    let o = bootsim(&[
        "compare",
        "--workload",
        "nccl-init",
        "--ranks",
        "2",
        "--seeds",
        "10",
        "--fail-on",
        "nccl-2.21,nccl-2.30",
    ]);
    assert_eq!(o.status.code(), Some(0), "2.21 and 2.30 never fail: {}", stdout(&o));
    for v in bootsim_sim::case::variants_for("nccl-init") {
        assert!(stdout(&o).contains(&format!("| {v:<9} |")), "{v}: {}", stdout(&o));
    }
    let o = bootsim(&["compare", "--workload", "nccl-init", "--fail-on", "nvshmem-3.7"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("accepted with --workload nccl-init: all, nccl-2.8"), "{}", stderr(&o));
}
