//! NVSHMEM's shipped UID bootstrap plugins (3.4.5, 3.7.1, 3.8.0) as ranks: on loopback, mixed
//! with bootsim-core ranks, under the real kernel reordered by the userspace wire, and on the
//! wire byte for byte against bootsim-core's matching variants.
//!
//! The plugins come from the Python package index at set-up time (`make test` runs
//! scripts/fetch-nvshmem.sh; `--plugin VERSION` fetches a missing one itself). The wire tests
//! need CAP_NET_ADMIN, CAP_SYS_ADMIN and /dev/net/tun (CI runs as root); elsewhere they print
//! why and return.

use std::process::Command;
use std::time::{Duration, Instant};

const VERSIONS: [&str; 3] = ["3.4.5", "3.7.1", "3.8.0"];

fn bootsim(args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_bootsim")).args(args).output().unwrap();
    (o.status.code(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

fn no_wire() -> bool {
    !bootsim_adapters::skip::wire_can_run()
}

#[test]
fn every_version_passes_on_loopback_alone_and_mixed_with_bootsim_either_side_of_the_root() {
    for v in VERSIONS {
        let (code, out) = bootsim(&["smoke", "--local", "2", "--plugin", v, "--iterations", "3", "--accept", "none"]);
        assert_eq!(code, Some(0), "{v}: {out}");
        assert!(out.contains(&format!("rank 1/2 iter 2 [NVSHMEM {v}]: ok: init + 3 ops verified")), "{out}");
        assert!(out.contains("pass 3, benign 0, corruption 0, error 0, hang 0: verdict pass"), "{out}");
        // Interop: the plugin as the root (rank 0), then bootsim-core as the root.
        for plugin_ranks in ["0", "1"] {
            let args = [
                "smoke",
                "--local",
                "2",
                "--plugin",
                v,
                "--plugin-ranks",
                plugin_ranks,
                "--workload",
                "qp-create",
                "--accept",
                "none",
            ];
            let (code, out) = bootsim(&args);
            assert_eq!(code, Some(0), "{v} plugin ranks {plugin_ranks}: {out}");
            let core = format!("[bootsim nvshmem-3.{}]: ok", &v[2..3]);
            assert!(out.contains(&core), "{v}: {out}");
        }
    }
    // Four ranks, two of each, on NVSHMEM's real init sequence.
    let args = [
        "smoke",
        "--local",
        "4",
        "--plugin",
        "3.8.0",
        "--plugin-ranks",
        "0,2",
        "--workload",
        "nvshmem-init",
        "--accept",
        "none",
    ];
    let (code, out) = bootsim(&args);
    assert_eq!(code, Some(0), "{out}");
}

#[test]
fn a_mismatched_pair_fails_within_the_timeout_and_says_so() {
    let t0 = Instant::now();
    let args = [
        "smoke",
        "--local",
        "2",
        "--plugin",
        "3.4.5",
        "--plugin-ranks",
        "0",
        "--variant",
        "nvshmem-3.8",
        "--op-timeout-ms",
        "2000",
        "--accept",
        "none",
    ];
    let (code, out) = bootsim(&args);
    assert!(t0.elapsed() < Duration::from_secs(30), "bounded by the op timeout");
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("MISMATCHED PAIR: bootsim-core ranks run nvshmem-3.8 but NVSHMEM 3.4.5 speaks like nvshmem-3.4")
    );
    // 3.4.5 sends its barrier with tag 1, nvshmem-3.8 waits for tag 2: both wait, both are named.
    assert!(out.contains("rank 0/2 iter 0 [NVSHMEM 3.4.5]: FAIL") && out.contains("waits for barrier #2"), "{out}");
    assert!(out.contains("verdict hang (a mismatched pair"), "{out}");
}

#[test]
fn pairs_that_send_the_same_bytes_are_not_called_mismatched_and_pass() {
    // Conformance proves 3.4.5 byte-identical to nvshmem-3.7 and 3.7.1 to nvshmem-3.4: only the
    // receive-size check differs, which no clean run trips (so no adversary: `--accept none`).
    for (plugin, variant) in [("3.4.5", "nvshmem-3.7"), ("3.7.1", "nvshmem-3.4"), ("3.7.1", "drain")] {
        let args = [
            "smoke",
            "--local",
            "2",
            "--plugin",
            plugin,
            "--plugin-ranks",
            "0",
            "--variant",
            variant,
            "--accept",
            "none",
        ];
        let (code, out) = bootsim(&[&args[..], &["--iterations", "2", "--workload", "qp-create"]].concat());
        assert_eq!(code, Some(0), "{plugin} with {variant}: {out}");
        assert!(!out.contains("MISMATCHED"), "{plugin} with {variant}: {out}");
        assert!(out.contains("verdict pass"), "{out}");
    }
}

#[test]
fn the_3_8_tag_counter_runs_out_at_the_same_call_in_the_binary_and_in_the_core() {
    // Started at 2^31 - 2: alltoall #0 and #1 take the last two tags, alltoall #2 fails.
    let args = [
        "smoke",
        "--local",
        "2",
        "--plugin",
        "3.8.0",
        "--plugin-ranks",
        "0",
        "--tag-counter",
        "2147483646",
        "--workload",
        "qp-create",
        "--accept",
        "none",
    ];
    let (code, out) = bootsim(&args);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("[NVSHMEM 3.8.0]: FAIL after")
            && out
                .contains("error: rank 0: alltoall #2: UID bootstrap message tag space exhausted (the plugin's words)"),
        "{out}"
    );
    assert!(
        out.contains("[bootsim nvshmem-3.8 first_tag=2147483646]: FAIL after")
            && out.contains("error: rank 1: alltoall #2: UID bootstrap message tag space exhausted"),
        "{out}"
    );
    assert!(out.contains("reserve_tags"), "the plugin's own line is shown: {out}");
}

#[test]
fn under_the_reordering_wire_each_version_fails_as_the_report_says_and_bootsim_agrees() {
    if no_wire() {
        return;
    }
    let mut expect = Vec::new();
    for (v, variant, deepep, qp) in [
        ("3.4.5", "nvshmem-3.4", "corruption", "corruption"),
        ("3.7.1", "nvshmem-3.7", "error", "corruption"),
        ("3.8.0", "nvshmem-3.8", "pass", "pass"),
    ] {
        for imp in [format!("NVSHMEM {v}"), format!("bootsim {variant}")] {
            expect.push(format!("{imp}:deepep:wire={deepep}"));
            expect.push(format!("{imp}:qp-create:wire={qp}"));
            expect.push(format!("{imp}:deepep:loopback=pass"));
            expect.push(format!("{imp}:qp-create:loopback=pass"));
        }
    }
    let expect = expect.join(",");
    let (code, out) = bootsim(&["real-nvshmem", "--iterations", "4", "--expect", &expect]);
    assert_eq!(code, Some(0), "{out}");
    let row = out.lines().find(|l| l.starts_with("| NVSHMEM 3.4.5 ") && l.contains("| wire ")).unwrap();
    assert!(row.contains("corruption"), "{row}");
}

#[test]
fn the_report_under_3_4_5_is_the_zeroed_handle_then_truncated() {
    if no_wire() {
        return;
    }
    let policy = "release-on-next=500ms,select=pair:1>2:2";
    let (code, out) = bootsim(&["smoke", "--local", "2", "--plugin", "3.4.5", "--wire", policy]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("rank 0/2 iter 0 [NVSHMEM 3.4.5]: ok"), "{out}");
    let r1 = out.lines().find(|l| l.starts_with("rank 1/2 iter 0")).unwrap();
    assert!(r1.contains("corruption: rank 1 alltoall #1 chunk from rank 0 holds a 4-byte message"), "{r1}");
    assert!(r1.contains("rank 1 would call ibv_modify_qp(RTR) with a zero GID: EINVAL"), "{r1}");
    assert!(r1.contains("then error: rank 1: barrier #2: message truncated: received 576 bytes instead of 4"), "{r1}");
    // 3.7.1: the size mismatch, and rank 0 left blocked (stopped as a launcher would).
    let (code, out) = bootsim(&["smoke", "--local", "2", "--plugin", "3.7.1", "--wire", policy]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("alltoall #1: message size mismatch: received 4 bytes, expected 576 bytes"), "{out}");
    // Rank 0 got rank 1's alltoall message, so it waits in the barrier for a message that never comes.
    assert!(out.contains("hang: rank 0 waits for barrier #2: still blocked 500 ms after another rank failed"), "{out}");
}

#[test]
fn conformance_every_version_speaks_the_bytes_of_its_bootsim_variant() {
    if no_wire() {
        return;
    }
    for v in VERSIONS {
        let (code, out) = bootsim(&["conformance", "--plugin", v]);
        assert_eq!(code, Some(0), "{v}: {out}");
        assert!(out.contains("put the same bytes on the wire: 31 connections between 3 ranks"), "{v}: {out}");
    }
    // The check can fail: 3.8.0's per-call tags are not 3.7's.
    let (code, out) = bootsim(&["conformance", "--plugin", "3.8.0", "--variant", "nvshmem-3.7"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("NVSHMEM 3.8.0 and bootsim nvshmem-3.7 DIFFER"), "{out}");
    assert!(out.contains("message rank 2 tag 0x3 576 bytes (3 frames) vs"), "{out}");
}

/// A session port below the ephemeral range (so no client socket of another test can hold it:
/// NVSHMEM binds its root without SO_REUSEADDR), free now for this port and the next
/// (iteration 1 uses port + 1).
fn session_port() -> u16 {
    let start = 20_000 + (std::process::id() % 5_000) as u16;
    (start..start + 5_000)
        .find(|p| (0..2).all(|k| std::net::TcpListener::bind(("127.0.0.1", p + k)).is_ok()))
        .expect("a free port pair below 30000")
}

#[test]
fn on_a_cluster_each_launched_process_runs_its_rank_in_session_mode_plugin_or_core() {
    // As srun starts them: one process per rank, rank and size from SLURM_PROCID/SLURM_NTASKS,
    // NVSHMEM_BOOTSTRAP_UID_SESSION_ID semantics; ranks 0 and 2 the real 3.8.0, rank 1 bootsim.
    let session = format!("127.0.0.1:{}", session_port());
    let spawned: Vec<_> = (0..3)
        .map(|r| {
            Command::new(env!("CARGO_BIN_EXE_bootsim"))
                .args(["smoke", "--plugin", "3.8.0", "--plugin-ranks", "0,2", "--session", &session])
                .args(["--workload", "qp-create", "--iterations", "2", "--op-timeout-ms", "10000"])
                .env("SLURM_PROCID", r.to_string())
                .env("SLURM_NTASKS", "3")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = spawned.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    for (r, o) in outs.iter().enumerate() {
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.status.code(), Some(0), "rank {r}: {text}");
        assert!(text.contains(&format!("rank {r}/3 iter 1: ok: init + 5 ops verified")), "rank {r}: {text}");
    }
    let r0 = String::from_utf8_lossy(&outs[0].stdout);
    assert!(r0.contains("smoke: pass: NVSHMEM 3.8.0 workload qp-create ranks 3: 2/2"), "{r0}");
    // The derived session secret is said out loud.
    assert!(String::from_utf8_lossy(&outs[0].stderr).contains("the session magic is derived from the address"));
}

#[test]
fn the_tag_counter_knob_is_refused_for_a_plugin_without_one() {
    // It writes into the plugin's state at 3.8.0's offset: never into another layout.
    let (code, out) = bootsim(&["smoke", "--local", "2", "--plugin", "3.7.1", "--tag-counter", "5"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("--tag-counter: 3.7.1 has no per-call tag counter"), "{out}");
}

#[test]
fn a_plugin_that_does_not_load_is_could_not_run_not_a_protocol_verdict() {
    // The real 3.7.1 plugin with its ELF magic broken: bootsim takes it for a plugin (its
    // messages are there), the rank processes cannot dlopen it.
    let o = Command::new("bash").arg("scripts/fetch-nvshmem.sh").arg("3.7.1").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let real = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let scratch = tempfile::Builder::new().prefix("bootsim-broken-plugin-").tempdir().unwrap();
    let dir = scratch.path().to_path_buf();
    let broken = dir.join("nvshmem_bootstrap_uid.so.3");
    let mut bytes = std::fs::read(&real).unwrap();
    bytes[..4].copy_from_slice(b"XXXX");
    std::fs::write(&broken, bytes).unwrap();
    let (code, out) = bootsim(&["smoke", "--local", "2", "--plugin", broken.to_str().unwrap(), "--iterations", "3"]);
    assert_eq!(code, Some(3), "{out}");
    assert!(
        out.contains("iter 0 [plugin ")
            && out.contains("could not run (no protocol verdict): init: cannot load the plugin"),
        "{out}"
    );
    assert!(!out.contains("verdict error"), "not counted as the protocol's error: {out}");
}
