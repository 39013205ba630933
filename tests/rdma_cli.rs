//! `bootsim smoke --rdma` on a machine without an RDMA device: one clear line and exit code 2,
//! never a panic; with the feature off, the same exit code and how to build it.

use std::process::Command;

#[test]
fn smoke_rdma_without_a_device_exits_2_with_one_clear_line() {
    let scratch = tempfile::Builder::new().prefix("bootsim-rdma-").tempdir().unwrap();
    let dir = scratch.path().to_path_buf();
    let uid = dir.join("uid");
    let o = Command::new(env!("CARGO_BIN_EXE_bootsim"))
        .args(["smoke", "--rank", "0", "--ranks", "1", "--rdma", "--op-timeout-ms", "3000"])
        .arg("--uid-file")
        .arg(&uid)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err} stdout: {}", String::from_utf8_lossy(&o.stdout));
    assert!(err.contains("no RDMA device found"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn smoke_local_rdma_passes_the_flags_to_every_rank_and_exits_2_without_a_device() {
    let o = Command::new(env!("CARGO_BIN_EXE_bootsim")).args(["smoke", "--local", "2", "--rdma"]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert_eq!(out.matches("no RDMA device found").count(), 2, "{out}");
}
