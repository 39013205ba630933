//! The accept interposer through the CLI: `bootsim shuffle` on a server whose output is its
//! accept order, NVSHMEM's real plugin reordered without CAP_NET_ADMIN (the README's table),
//! `bootsim check`, and no process or folder left after the parent is killed.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A program this test needs; under CI its absence is a failure, elsewhere a skip.
fn have(program: &str, args: &[&str]) -> bool {
    let ok = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok || bootsim_adapters::skip::can_run(program, Err(format!("{program} is missing")))
}

fn bootsim(args: &[&str]) -> Output {
    common::interposer();
    common::bootsim().args(args).output().unwrap()
}

/// The server whose output is its accept order.
const SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/accept-order-server.py");

fn shuffle(policy: &str) -> (String, String, Option<i32>) {
    let o = bootsim(&["shuffle", "--policy", policy, "--", "python3", SERVER, "6"]);
    (
        String::from_utf8_lossy(&o.stdout).trim().to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
        o.status.code(),
    )
}

#[test]
fn shuffle_reorders_any_program_deterministically_and_accounts_for_every_connection() {
    if !have("python3", &["-c", "pass"]) {
        return;
    }
    let (out, err, code) = shuffle("release-on-next=500ms,select=nth:1");
    assert_eq!(out, "0 2 1 3 4 5", "{err}");
    assert_eq!(code, Some(0), "the program's exit status is ours");
    assert!(err.contains("6 connections in 1 processes: 1 held, 6 delivered, 0 unaccepted at exit"), "{err}");
    let (a, _, _) = shuffle("permute=11:6");
    let (b, err, _) = shuffle("permute=11:6");
    assert_eq!(a, b, "the same seed, the same order");
    assert_ne!(a, "0 1 2 3 4 5", "seed 11 moves something: {err}");
    let o = bootsim(&["shuffle", "--policy", "none", "--", "sh", "-c", "exit 7"]);
    assert_eq!(o.status.code(), Some(7), "the program's exit status is ours");
    let (out, err, _) = shuffle("none");
    assert_eq!(out, "0 1 2 3 4 5");
    assert!(err.contains("a pass without an adversary proves nothing about reordering"), "{err}");
}

#[test]
fn shuffle_refuses_a_bad_policy_and_says_where_the_library_should_be() {
    let o = bootsim(&["shuffle", "--policy", "hold=5ms,select=evn", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(common::text(&o).contains("bad policy part `evn`"), "{}", common::text(&o));
    // One duration grammar: a bare number meant milliseconds here and nanoseconds in kernel
    // knobs, so it is refused with the forms that work.
    let o = bootsim(&["shuffle", "--policy", "hold=20", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(common::text(&o).contains("`20` has no unit: write 20ms"), "{}", common::text(&o));
    common::interposer();
    let o = common::bootsim()
        .args(["shuffle", "--policy", "none", "--", "true"])
        .env("BOOTSIM_PRELOAD", "/nonexistent/libbootsim_preload.so")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", common::text(&o));
    assert!(common::text(&o).contains("BOOTSIM_PRELOAD=/nonexistent/libbootsim_preload.so: no such file"));
}

/// `bootsim ARGS` without CAP_NET_ADMIN: under `setpriv --bounding-set -net_admin` as root,
/// as it is for anyone else.
fn without_net_admin(args: &[&str]) -> (Option<i32>, String) {
    common::interposer();
    let root = std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")));
    let o = if root && have("setpriv", &["--help"]) {
        Command::new("setpriv")
            .args(["--bounding-set", "-net_admin", env!("CARGO_BIN_EXE_bootsim")])
            .args(args)
            .output()
    } else {
        common::bootsim().args(args).output()
    }
    .unwrap();
    (o.status.code(), common::text(&o))
}

#[test]
fn the_real_nvshmem_table_reproduces_under_the_interposer_without_net_admin() {
    // README "Is my NVSHMEM affected?": 3.4.5 corruption, 3.7.1 error on deepep and corruption on
    // qp-create, 3.8.0 pass; every run, as with the wire.
    for (v, wl, verdict) in [
        ("3.4.5", "deepep", "corruption 2, error 0, hang 0: verdict corruption"),
        ("3.4.5", "qp-create", "corruption 2, error 0, hang 0: verdict corruption"),
        ("3.7.1", "deepep", "corruption 0, error 2, hang 0: verdict error"),
        ("3.7.1", "qp-create", "corruption 2, error 0, hang 0: verdict corruption"),
        ("3.8.0", "deepep", "pass 2, benign 0, corruption 0, error 0, hang 0: verdict pass"),
        ("3.8.0", "qp-create", "pass 2, benign 0, corruption 0, error 0, hang 0: verdict pass"),
    ] {
        let (code, out) =
            without_net_admin(&["smoke", "--local", "2", "--plugin", v, "--workload", wl, "--iterations", "2"]);
        assert!(out.contains(verdict), "{v} {wl}: {out}");
        assert_eq!(code, Some(if verdict.ends_with("pass") { 0 } else { 1 }), "{v} {wl}: {out}");
        assert!(out.contains("accept: iter 1: ") && out.contains(" held, "), "the decision log is reported: {out}");
        if !verdict.ends_with("pass") {
            // The hold that made the failure, in the log's words (with the message's header when
            // it had arrived by then: the peek does not wait under a pair selector).
            assert!(
                out.contains("connection 2 (host 1 > host 2 #2") && out.contains("released by connection"),
                "{out}"
            );
        }
    }
    let (code, out) = without_net_admin(&["smoke", "--local", "2", "--plugin", "3.7.1", "--accept", "none"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("a pass without an adversary proves nothing about reordering"), "{out}");
}

#[test]
fn real_nvshmem_makes_the_table_with_the_interposer_in_place_of_the_wire() {
    // Every NVSHMEM row beside bootsim's variant under the same policy, as behind the wire.
    let expect = [
        "NVSHMEM 3.4.5:deepep:interposer=corruption",
        "NVSHMEM 3.4.5:qp-create:interposer=corruption",
        "NVSHMEM 3.7.1:deepep:interposer=error",
        "NVSHMEM 3.7.1:qp-create:interposer=corruption",
        "NVSHMEM 3.8.0:deepep:interposer=pass",
        "NVSHMEM 3.8.0:qp-create:interposer=pass",
        "NVSHMEM 3.7.1:deepep:loopback=pass",
        // bootsim's matching variants under the same policy, each rank a process.
        "bootsim nvshmem-3.4:deepep:interposer=corruption",
        "bootsim nvshmem-3.4:qp-create:interposer=corruption",
        "bootsim nvshmem-3.7:deepep:interposer=error",
        "bootsim nvshmem-3.7:qp-create:interposer=corruption",
        "bootsim nvshmem-3.8:deepep:interposer=pass",
        "bootsim nvshmem-3.8:qp-create:interposer=pass",
    ]
    .join(",");
    let policy = "release-on-next=500ms,select=pair:1>2:2";
    let (code, out) =
        without_net_admin(&["real-nvshmem", "--accept", policy, "--iterations", "2", "--expect", &expect]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("| NVSHMEM 3.7.1       | qp-create | interposer |    2 |"), "{out}");
    // Without --accept and without the capability, it says how to run without root.
    let (code, out) = without_net_admin(&["real-nvshmem", "--iterations", "1"]);
    if code == Some(3) {
        assert!(out.contains("--accept POLICY reorders without it"), "{out}");
    }
}

#[test]
fn check_answers_is_my_build_affected_without_root() {
    let (code, out) = without_net_admin(&["check", "--plugin", "3.7.1", "--iterations", "1"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("deepep (") && out.contains("AFFECTED: \"Message size mismatch\""), "{out}");
    assert!(out.contains("qp-create (") && out.contains("AFFECTED: cross-wired QP handles"), "{out}");
    assert!(out.contains("the first cached version that is not: NVSHMEM 3.8.0"), "{out}");
    let (code, out) = without_net_admin(&["check", "--plugin", "3.8.0", "--iterations", "1"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("NVSHMEM 3.8.0: not affected"), "{out}");
    let (code, out) = without_net_admin(&["check", "--plugin", "./no/such/plugin.so"]);
    assert_eq!(code, Some(2), "{out}");
}

/// The PIDs whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else { continue };
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        if after.split(' ').nth(1).and_then(|x| x.parse::<u32>().ok()) == Some(pid) {
            out.push(p);
        }
    }
    out
}

/// Running and not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !matches!(s[s.rfind(')').unwrap() + 2..].chars().next(), Some('Z') | Some('X')))
}

fn folders_of(pid: u32) -> Vec<PathBuf> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.starts_with("bootsim-") && n.contains(&format!("-{pid}-"))
        })
        .collect()
}

#[test]
fn killing_the_parent_leaves_no_process_and_no_folder() {
    common::interposer();
    // Three plugin ranks whose every connection is held 20 s (they block in init), and three
    // `smoke --local` rank processes with more iterations than the test waits for.
    let plugin: &[&str] = &["smoke", "--local", "3", "--plugin", "3.8.0", "--accept", "hold=20000ms,select=all"];
    let local: &[&str] = &["smoke", "--local", "3", "--iterations", "1000000"];
    for (args, signal, name) in [
        (plugin, libc::SIGINT, "SIGINT"),
        (plugin, libc::SIGTERM, "SIGTERM"),
        (plugin, libc::SIGKILL, "SIGKILL"),
        (local, libc::SIGTERM, "SIGTERM to --local"),
        (local, libc::SIGKILL, "SIGKILL to --local"),
    ] {
        let mut parent = common::bootsim().args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let pid = parent.id();
        let t0 = Instant::now();
        let kids = loop {
            let k = children_of(pid);
            if k.len() >= 3 || t0.elapsed() > Duration::from_secs(30) {
                break k;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(kids.len(), 3, "{name}: three ranks started");
        assert!(!folders_of(pid).is_empty(), "{name}: the run has its folder");
        // SAFETY: a signal to the child this test spawned.
        unsafe { libc::kill(pid as i32, signal) };
        let status = parent.wait().unwrap();
        let t1 = Instant::now();
        while kids.iter().any(|&k| alive(k)) && t1.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(kids.iter().all(|&k| !alive(k)), "{name}: the ranks died with their parent");
        if signal == libc::SIGKILL {
            // Nothing runs at a SIGKILL: the next run removes the folder of the dead process.
            assert!(bootsim(&["shuffle", "--policy", "none", "--", "true"]).status.success());
        } else {
            assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), None, "{name}: handled");
            assert_eq!(status.code(), Some(128 + signal), "{name}");
        }
        assert_eq!(folders_of(pid), Vec::<PathBuf>::new(), "{name}: no folder left");
    }
}
