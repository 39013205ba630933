//! README's rule for exit codes, per command: 0 nothing wrong, 1 a violation, 2 usage, 3 could
//! not run (with the address or path that could not be used).

mod common;

use std::net::TcpListener;
use std::process::Output;
use std::time::{Duration, Instant};

use common::{bootsim, text};

fn run(args: &[&str]) -> Output {
    bootsim().args(args).output().unwrap()
}

#[test]
fn explore_pairs_exits_1_when_a_cell_has_a_counterexample_and_0_when_none_has() {
    let o = run(&["explore", "--pairs", "--variant", "nvshmem-3.4", "--ranks", "2"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("alltoall>alltoall n=2 corruption: bootsim replay '"), "{}", text(&o));
    // seq's worst cell is pass: nothing wrong.
    let o = run(&["explore", "--pairs", "--variant", "seq", "--ranks", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("counterexamples"), "{}", text(&o));
}

#[test]
fn merge_of_a_file_it_cannot_read_exits_3_naming_it_and_of_garbage_2() {
    let o = run(&["merge", "/nonexistent/out.0.jsonl"]);
    assert_eq!(o.status.code(), Some(3), "an I/O error is could-not-run: {}", text(&o));
    assert!(text(&o).contains("reading /nonexistent/out.0.jsonl"), "{}", text(&o));
    let bad = std::env::temp_dir().join(format!("bootsim-merge-garbage-{}.jsonl", std::process::id()));
    std::fs::write(&bad, "not json\n").unwrap();
    let o = run(&["merge", bad.to_str().unwrap()]);
    let _ = std::fs::remove_file(&bad);
    assert_eq!(o.status.code(), Some(2), "bad input is usage: {}", text(&o));
    assert!(text(&o).contains("not a `bootsim sweep --json` line"), "{}", text(&o));
}

/// A day of simulated time with a stall walked every microsecond: the work guard stops it.
/// (turmoil does not model the application's CPU time: its costs are 0 there.)
fn costly(engine: &str, cpu: &str) -> String {
    format!(
        "engine={engine} ranks=2 deadline_ms=86400000 service=1ms syscall_cost={cpu} app_work={cpu} \
         stall_gap=1us stall_skew=1000 adversary=cpu"
    )
}

#[test]
fn a_case_the_simulator_gives_up_on_is_verdict_guard_exit_3_naming_its_knobs_on_either_engine() {
    // No verdict on the protocol but a case that could not be run within bounds: its own
    // verdict, not an error, and no hangs (its deadline never came).
    for (engine, cpu) in [("fast", "1ms"), ("turmoil", "0")] {
        let o = run(&["run", &costly(engine, cpu)]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(3), "{engine}: {t}");
        assert!(t.starts_with("verdict: guard\n"), "{engine}: {t}");
        assert!(t.contains("guard: the run exceeded ") && t.contains(" steps at simulated "), "{engine}: {t}");
        assert!(t.contains("last progress by rank "), "{engine}: {t}");
        assert!(t.contains("kernel knobs: service=1ms"), "{engine}: {t}");
        assert!(!t.contains("error:") && !t.contains("hang:"), "{engine}: {t}");
        assert!(!t.contains("root failed"), "explain says what it is: {t}");
        assert!(t.contains("explain:\n  No verdict on the protocol: the simulation stopped"), "{engine}: {t}");
        assert!(t.contains("could not run: the work guard stopped the simulation"), "{engine}: {t}");
    }
}

#[test]
fn a_sweep_whose_knobs_do_not_fit_a_seeds_swarm_draw_is_refused_naming_the_seed() {
    // Under swarm each seed draws its RX queues: a stall on queue 7 fits some draws, not all
    // (it used to panic in the kernel model mid-sweep).
    let o = run(&[
        "sweep",
        "--variant",
        "nvshmem-3.7",
        "--workload",
        "deepep",
        "--ranks",
        "2",
        "--adversary",
        "swarm",
        "--set",
        "stall_gap=off",
        "--set",
        "stalls=0:7:p1:5",
        "--seeds",
        "200",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("the knobs do not fit the kernel adversary=swarm draws for it"), "{t}");
    assert!(t.contains("queue 7 does not exist"), "{t}");
    assert!(!t.contains("panicked"), "{t}");
}

#[test]
fn shrink_refuses_a_case_the_work_guard_stopped_with_exit_3() {
    // Each candidate could run to the guard's budget again, and a guard is no failure to keep.
    let o = run(&["shrink", &costly("fast", "1ms")]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("stopped by the work guard (verdict guard)"), "{t}");
    assert!(!t.contains("saved:"), "{t}");
}

#[test]
fn sweep_counts_guard_stops_apart_from_errors_and_exits_3() {
    let case = costly("fast", "1ms");
    let mut args = vec!["sweep", "--variant", "nvshmem-3.7", "--ranks", "2", "--adversary", "cpu", "--seeds", "1"];
    for kv in case.split_whitespace().filter(|w| !["engine=", "ranks=", "adversary="].iter().any(|k| w.starts_with(k)))
    {
        args.extend(["--set", kv]);
    }
    let o = run(&args);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "no violation, but a run with no verdict: {t}");
    assert!(t.contains(" error=0 hang=0 guard=1"), "{t}");
    assert!(t.contains("first run the work guard stopped: guard: the run exceeded"), "{t}");
}

#[test]
fn merge_exits_3_for_a_guard_stop_and_1_when_a_violation_is_beside_it() {
    let case = "engine=fast variant=nvshmem-3.7 workload=deepep ranks=2 adversary=cpu seed=0";
    let line = |verdict: &str, seed: u64| {
        format!(
            r#"{{"type":"failure","schema":3,"variant":"nvshmem-3.7","case":"{case}","seed":{seed},"verdict":"{verdict}","first_finding":"{verdict}: x"}}"#
        )
    };
    let summary = |guard: usize, error: usize| {
        format!(
            r#"{{"type":"summary","schema":3,"variant":"nvshmem-3.7","case":"{case}","start":0,"seeds":2,"shard":{{"index":0,"count":1}},"runs":2,"counts":{{"benign":0,"corruption":0,"error":{error},"hang":0,"pass":{},"guard":{guard}}},"first_failure_seed":null}}"#,
            2 - guard - error
        )
    };
    let file = std::env::temp_dir().join(format!("bootsim-merge-guard-{}.jsonl", std::process::id()));
    std::fs::write(&file, format!("{}\n{}\n", line("guard", 0), summary(1, 0))).unwrap();
    let o = run(&["merge", file.to_str().unwrap()]);
    std::fs::write(&file, format!("{}\n{}\n{}\n", line("guard", 0), line("error", 1), summary(1, 1))).unwrap();
    let both = run(&["merge", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("guard=1") && text(&o).contains("first run the work guard stopped"), "{}", text(&o));
    assert_eq!(both.status.code(), Some(1), "{}", text(&both));
    assert!(text(&both).contains("first failure: error: x"), "the violation first: {}", text(&both));
}

#[test]
fn sweep_and_compare_refuse_zero_jobs_with_2() {
    for cmd in ["sweep", "compare"] {
        let o = run(&[cmd, "--seeds", "2", "--jobs", "0"]);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", text(&o));
        assert!(text(&o).contains("--jobs") && text(&o).contains("must be at least 1"), "{cmd}: {}", text(&o));
        assert!(o.stdout.is_empty(), "{cmd}: nothing runs: {}", text(&o));
    }
    let o = run(&["sweep", "--variant", "seq", "--seeds", "2", "--jobs", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn a_root_port_in_use_exits_3_at_once_with_the_address() {
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let started = Instant::now();
    let o = run(&["smoke", "--rank", "0", "--ranks", "2", "--session", &addr, "--op-timeout-ms", "20000"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("could not run: root: cannot listen: {addr}: Address already in use")),
        "{}",
        text(&o)
    );
    assert!(started.elapsed() < Duration::from_secs(10), "not after the op timeout: {:?}", started.elapsed());
}

#[test]
fn a_rank_whose_root_refuses_every_connection_exits_3_with_the_address() {
    // A port nothing listens on, below the ephemeral range (where no outgoing connection takes it).
    let addr = format!("127.0.0.1:{}", common::free_port(7, 1));
    let o = run(&["smoke", "--rank", "1", "--ranks", "2", "--session", &addr, "--op-timeout-ms", "1000"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        text(&o).contains(&format!(
            "could not run: rank 1: could not reach the root: nothing listens at {addr} (connection refused"
        )),
        "{}",
        text(&o)
    );
    assert!(!text(&o).contains("hang"), "a refused root is not a hang: {}", text(&o));
}

#[test]
fn a_huge_case_string_is_refused_with_2_and_a_short_message() {
    let case = format!("ranks=2 {}", "x".repeat(131_000));
    let o = run(&["run", &case]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.len() < 400, "{} bytes of stderr for a 131 KB case: {err}", err.len());
    assert!(
        err.contains("... (131008 bytes in all)") && err.contains("... (131000 bytes in all)` is not key=value"),
        "{err}"
    );
}

#[test]
fn an_nccl_pair_case_without_its_pair_is_refused_with_2_and_the_right_form() {
    for args in [
        vec!["run", "workload=nccl-pair ranks=2"],
        vec!["sweep", "--variant", "nccl-2.21", "--workload", "nccl-pair", "--seeds", "1"],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("workload=nccl-pair needs pair=FIRST,SECOND"), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("e.g. workload=nccl-pair pair=ring-setup,barrier"), "{args:?}: {}", text(&o));
        assert!(o.stdout.is_empty(), "nothing runs: {}", text(&o));
    }
}

/// A run that keeps every result (traced, replayed, on turmoil) is sized with them: a case an
/// untraced run fits is refused with 2 before it starts, naming the bytes and the way out.
#[test]
fn a_traced_run_whose_kept_results_do_not_fit_is_refused_with_2_before_it_starts() {
    let big = "workload=nvshmem-init ranks=4096";
    for args in [&["run", "--trace", big][..], &["replay", big], &["run", &format!("{big} engine=turmoil")]] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("keeps every rank's results") && err.contains("MiB, over") && err.contains("without --trace"),
            "{args:?}: {err}"
        );
    }
}
