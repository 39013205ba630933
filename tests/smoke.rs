//! `bootsim smoke` over real loopback sockets, one rank per process.

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{bootsim, on_free_port, text};

#[test]
fn four_local_ranks_pass_deepep_under_pr97() {
    let o = bootsim().args(["smoke", "--local", "4", "--workload", "deepep", "--variant", "pr97"]).output().unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    for r in 0..4 {
        assert!(out.contains(&format!("rank {r}/4 iter 0: ok: init + 3 ops verified")), "rank {r}: {out}");
    }
    assert!(out.contains("smoke --local 4: variant pr97 workload deepep x1: pass"), "{out}");
}

#[test]
fn a_rank_that_never_comes_fails_the_others_with_rank_and_step() {
    let scratch = tempfile::Builder::new().prefix("bootsim-smoke-test-").tempdir().unwrap();
    let dir = scratch.path().to_path_buf();
    let uid: PathBuf = dir.join("uid");
    let started = Instant::now();
    let children: Vec<_> = (0..2)
        .map(|r| {
            bootsim()
                .args(["smoke", "--rank", &r.to_string(), "--ranks", "3", "--ip", "127.0.0.1"])
                .arg("--uid-file")
                .arg(&uid)
                .args(["--op-timeout-ms", "2000", "--workload", "deepep", "--variant", "pr97"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<Output> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    let elapsed = started.elapsed();
    for (r, o) in outputs.iter().enumerate() {
        let out = text(o);
        assert_eq!(o.status.code(), Some(1), "rank {r}: {out}");
        let want = format!(
            "hang: rank {r} waits for init: no progress for 2000ms while init: waiting for the root to send the ring successor"
        );
        assert!(out.contains(&want), "rank {r}: {out}");
    }
    assert!(outputs[0].stdout.ends_with(b"\n") && text(&outputs[0]).contains("smoke: FAIL"), "{}", text(&outputs[0]));
    // The culprit is named, not only the reporter: rank 2 never came.
    assert!(
        text(&outputs[0]).contains("the root waits for check-in 3 of 3; not yet checked in: rank 2"),
        "{}",
        text(&outputs[0])
    );
    // A liveness bound (the issue: "within the timeout"), generous for a loaded 2-core box.
    assert!(elapsed >= Duration::from_millis(1900) && elapsed < Duration::from_secs(30), "{elapsed:?}");
}

/// Ranks of one session, each a process with its own environment.
fn session(port: u16, envs: [&[(&str, &str)]; 2]) -> Vec<Output> {
    let addr = format!("127.0.0.1:{port}");
    let children: Vec<_> = (0..2)
        .map(|r| {
            let mut c = bootsim();
            c.args(["smoke", "--session", &addr, "--rank", &r.to_string(), "--ranks", "2", "--op-timeout-ms", "2000"]);
            c.env_remove("BOOTSIM_SESSION_SECRET");
            for (k, v) in envs[r] {
                c.env(k, v);
            }
            c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    children.into_iter().map(|c| c.wait_with_output().unwrap()).collect()
}

#[test]
fn a_shared_secret_makes_the_magic_and_a_rank_without_it_cannot_join() {
    let secret: &[(&str, &str)] = &[("BOOTSIM_SESSION_SECRET", "s3cret"), ("SLURM_JOB_ID", "42")];
    let outs = on_free_port(0, 1, |port| session(port, [secret, secret]));
    for o in &outs {
        assert_eq!(o.status.code(), Some(0), "{}", text(o));
        assert!(!text(o).contains("derived from the address"), "{}", text(o));
    }
    // Rank 1 with another secret speaks with another magic: the root drops its check-in as a
    // stranger's, and the session fails within the timeout instead of admitting it.
    let other: &[(&str, &str)] = &[("BOOTSIM_SESSION_SECRET", "guess"), ("SLURM_JOB_ID", "42")];
    let outs = on_free_port(0, 1, |port| session(port, [secret, other]));
    assert_eq!(outs[0].status.code(), Some(1), "{}", text(&outs[0]));
    assert!(text(&outs[0]).contains("not yet checked in: rank 1"), "{}", text(&outs[0]));
    // Without any secret, every rank says its magic is derivable.
    let outs = on_free_port(0, 1, |port| session(port, [&[], &[]]));
    assert!(text(&outs[1]).contains("warning: rank 1: the session magic is derived from the address"));
}

/// Two ranks that speak different variants (3.8 and 3.4 tags disagree): every iteration fails.
fn mismatched(port: u16, extra: &[&str]) -> Vec<Output> {
    let addr = format!("127.0.0.1:{port}");
    let children: Vec<_> = [(0, "nvshmem-3.8"), (1, "nvshmem-3.4")]
        .into_iter()
        .map(|(r, v)| {
            let mut c = bootsim();
            c.args(["smoke", "--session", &addr, "--rank", &r.to_string(), "--ranks", "2", "--variant", v]);
            c.args(["--workload", "qp-create", "--iterations", "3", "--op-timeout-ms", "500"]).args(extra);
            c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    children.into_iter().map(|c| c.wait_with_output().unwrap()).collect()
}

#[test]
fn a_failed_iteration_stops_the_run_and_says_how_many_ran_unless_told_to_keep_going() {
    let outs = on_free_port(5, 3, |port| mismatched(port, &[]));
    let out = text(&outs[0]);
    assert_eq!(outs[0].status.code(), Some(1), "{out}");
    assert!(out.contains("iter 0: FAIL") && !out.contains("iter 1:"), "{out}");
    assert!(
        out.contains("0/1 iterations ok (2 of 3 not run: stopped at the first failure; --keep-going runs them all)"),
        "{out}"
    );
    let outs = on_free_port(6, 3, |port| mismatched(port, &["--keep-going"]));
    for (r, o) in outs.iter().enumerate() {
        let out = text(o);
        assert_eq!(o.status.code(), Some(1), "rank {r}: {out}");
        for i in 0..3 {
            assert!(out.contains(&format!("rank {r}/2 iter {i}: FAIL")), "rank {r} runs every iteration: {out}");
        }
    }
    assert!(text(&outs[0]).contains(": 0/3 iterations ok in "), "{}", text(&outs[0]));
}

#[test]
fn in_process_ranks_run_nvshmems_nodes_over_the_protocol_blind_driver() {
    let o = bootsim()
        .args(["smoke", "--local", "3", "--in-process", "--variant", "pr97", "--iterations", "2"])
        .output()
        .unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    for iter in 0..2 {
        assert!(out.contains(&format!("in-process: iter {iter}: root and 3 ranks on 127.")), "{out}");
        for r in 0..3 {
            assert!(out.contains(&format!("rank {r}/3 iter {iter}: ok: init + 3 ops verified")), "rank {r}: {out}");
        }
    }
    let summary = "smoke --local 3 --in-process: protocol nvshmem variant pr97 workload deepep: pass: verdict pass: \
                   2/2 iterations ok";
    assert!(out.contains(summary), "{out}");
    // In-process ranks share this process: no wire, no plugin process.
    let o = bootsim().args(["smoke", "--local", "2", "--in-process", "--wire", "none"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn in_process_ranks_run_every_nccl_version_on_both_workloads_and_nccl_needs_in_process() {
    for v in ["nccl-2.8", "nccl-2.19", "nccl-2.21", "nccl-2.30"] {
        for w in ["nccl-init", "nccl-p2p"] {
            let o = bootsim()
                .args(["smoke", "--local", "3", "--in-process", "--variant", v, "--workload", w])
                .output()
                .unwrap();
            let out = text(&o);
            assert_eq!(o.status.code(), Some(0), "{v} {w}: {out}");
            let summary = format!("smoke --local 3 --in-process: protocol nccl variant {v} workload {w}: pass");
            assert!(out.contains(&summary), "{out}");
        }
    }
    // NCCL's real ranks need GPUs; its model's ranks run only in this process.
    let o = bootsim().args(["smoke", "--local", "2", "--variant", "nccl-2.30"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--local N --in-process only"), "{}", text(&o));
}

#[test]
fn smoke_refuses_what_it_would_otherwise_ignore() {
    let cases: [(&[&str], &str); 4] = [
        (&["--in-process", "--rank", "0", "--ranks", "1", "--session", "127.0.0.1:1"], "--in-process needs --local N"),
        (
            &["--local", "2", "--in-process", "--variant", "nccl-2.19", "--iterations", "0"],
            "--iterations must be at least 1",
        ),
        (&["--local", "2", "--in-process", "--variant", "nccl-2.19", "--workload", "nvshmem-init"], "is NVSHMEM's"),
        (
            &["--local", "2", "--in-process", "--variant", "nccl-2.19", "--drain-ms", "5"],
            "NCCL's bootstrap has no drain",
        ),
    ];
    for (args, want) in cases {
        let o = bootsim().arg("smoke").args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{args:?}: expected {want:?} in {}", text(&o));
    }
}
