//! `bootsim smoke` as separate processes on loopback: 8 local ranks complete every workload
//! under every variant, and a rank killed mid-run fails the others with a clear error within the
//! timeout.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bootsim_nvshmem::PRESETS;

mod common;
use common::{bootsim, text, wait_until};

/// `bootsim smoke --local 8 --workload W --variant V` for every preset: every rank verified.
fn eight_local_ranks(workload: &str) {
    let started = Instant::now();
    for variant in PRESETS {
        let t0 = Instant::now();
        let o =
            bootsim().args(["smoke", "--local", "8", "--workload", workload, "--variant", variant]).output().unwrap();
        let out = text(&o);
        assert_eq!(o.status.code(), Some(0), "{variant} {workload}: {out}");
        for r in 0..8 {
            let ok = format!("rank {r}/8 iter 0: ok: init + ");
            assert!(out.lines().any(|l| l.starts_with(&ok) && l.contains("ops verified")), "{variant} rank {r}: {out}");
        }
        assert!(out.contains(&format!("smoke --local 8: variant {variant} workload {workload} x1: pass")), "{out}");
        eprintln!("8 processes {workload} {variant}: {} ms", t0.elapsed().as_millis());
    }
    eprintln!("8 processes {workload} every preset: {} ms", started.elapsed().as_millis());
}

#[test]
fn eight_local_ranks_deepep_under_every_preset() {
    eight_local_ranks("deepep");
}

#[test]
fn eight_local_ranks_nvshmem_init_under_every_preset() {
    eight_local_ranks("nvshmem-init");
}

#[test]
fn eight_local_ranks_qp_create_under_every_preset() {
    eight_local_ranks("qp-create");
}

#[test]
fn eight_local_ranks_churn_under_every_preset() {
    eight_local_ranks("churn");
}

/// A rank process of a 4-rank uid-file session, `--iterations 50`, 2 s op timeout.
fn rank(r: u32, uid: &Path) -> Child {
    bootsim()
        .args(["smoke", "--rank", &r.to_string(), "--ranks", "4", "--ip", "127.0.0.1"])
        .arg("--uid-file")
        .arg(uid)
        .args(["--workload", "nvshmem-init", "--variant", "nvshmem-3.7", "--iterations", "50"])
        .args(["--op-timeout-ms", "2000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_rank_killed_mid_run_fails_the_others_with_rank_and_step_within_the_timeout() {
    let scratch = tempfile::Builder::new().prefix("bootsim-smoke-faults-").tempdir().unwrap();
    let dir = scratch.path().to_path_buf();
    let uid = dir.join("uid");
    let mut ranks: Vec<Child> = (0..4).map(|r| rank(r, &uid)).collect();
    // Kill rank 2 once it has verified two whole iterations: the others are then in the middle
    // of the 50 iterations, which cannot finish without it.
    let lines = ranks[2].stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(lines).lines().map_while(Result::ok) {
            if line.contains("iter 1: ok") {
                let _ = tx.send(line);
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(15));
    ranks[2].kill().unwrap();
    let killed = Instant::now();
    let _ = ranks[2].wait();
    assert!(first.is_ok(), "rank 2 never completed iteration 1");
    // Each survivor gives up on its own: op timeout (2 s) plus a bounded flush (5 s).
    let deadline = killed + Duration::from_secs(20);
    let mut report = Vec::new();
    for (r, mut child) in ranks.into_iter().enumerate().filter(|(r, _)| *r != 2) {
        let code = wait_until(&mut child, deadline);
        let took = killed.elapsed();
        let o = child.wait_with_output().unwrap();
        report.push((r, code, took, text(&o)));
    }
    for (r, code, took, out) in &report {
        assert_eq!(*code, Some(1), "rank {r} (after {took:?}): {out}");
        let fail = out
            .lines()
            .find(|l| l.starts_with(&format!("rank {r}/4 iter ")) && l.contains(": FAIL after "))
            .unwrap_or_else(|| panic!("rank {r}: no FAIL line: {out}"));
        let error = fail.split_once(" ms: ").map_or("", |(_, e)| e);
        // The core's errors name the rank, the operation and the step (what it waited for, the
        // peer it could not reach, or the message that broke); a rank between iterations names
        // the unique-ID file rank 0 no longer writes.
        // The oracle's findings name the rank first: `error: rank R: ...` or `hang: rank R waits for ...`.
        let who = error.starts_with(&format!("error: rank {r}: "))
            || error.starts_with(&format!("hang: rank {r} waits for "));
        let named = who
            && [
                " while ",
                "cannot connect to ",
                "recv from rank ",
                "malformed data from ",
                "no unique ID in ",
                "stopped or died mid-message",
            ]
            .iter()
            .any(|step| error.contains(step));
        assert!(named, "rank {r}: unclear error: {fail}\n{out}");
        eprintln!("rank {r} exited {code:?} {took:?} after the kill: {fail}");
    }
    assert!(report[0].3.contains("smoke: FAIL"), "{}", report[0].3);
}
