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

#[test]
fn a_case_the_simulator_gives_up_on_exits_3_naming_its_knobs_on_either_engine() {
    // A day of simulated time with a stall walked every microsecond: the work guard ends it.
    // That is no verdict on the protocol but a case that could not be run within bounds.
    // (turmoil does not model the application's CPU time: its costs are 0 there.)
    for (engine, cpu) in [("fast", "1ms"), ("turmoil", "0")] {
        let case = format!(
            "engine={engine} ranks=2 deadline_ms=86400000 service=1ms syscall_cost={cpu} app_work={cpu} \
             stall_gap=1us stall_skew=1000 adversary=cpu"
        );
        let o = run(&["run", &case]);
        assert_eq!(o.status.code(), Some(3), "{engine}: {}", text(&o));
        assert!(text(&o).contains("the simulation gave up after"), "{engine}: {}", text(&o));
        assert!(text(&o).contains("kernel knobs: service=1ms"), "{engine}: {}", text(&o));
        assert!(text(&o).contains("could not run: the simulation gave up"), "{engine}: {}", text(&o));
    }
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
