//! scripts/fetch-nccl.sh against a stand-in for pip (no network): it extracts libnccl.so.2 once
//! into the cache, does not download a cached version again, leaves nothing else behind, and
//! names the version the index refuses.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fetch-nccl.sh")
}

/// A folder with `python`: pip's `download` writes a wheel holding a fake libnccl.so.2 (or
/// refuses version 9.9.9) and logs each call; anything else goes to the real python3.
fn stand_in(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bootsim-fetch-nccl-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let real = String::from_utf8(Command::new("bash").args(["-c", "command -v python3"]).output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_string();
    let py = format!(
        r#"#!/usr/bin/env bash
if [[ "$1 $2" == "-m pip" ]]; then
  shift 2
  [[ "$1" == --version ]] && exit 0
  echo "pip $*" >> '{log}'
  dest=""; spec=""
  while [[ $# -gt 0 ]]; do case "$1" in --dest) dest="$2"; shift 2;; -*) shift;; *) spec="$1"; shift;; esac; done
  [[ "$spec" == *==9.9.9 ]] && {{ echo "ERROR: No matching distribution found for $spec" >&2; exit 1; }}
  exec '{real}' -c "import zipfile,sys; zipfile.ZipFile(sys.argv[1],'w').writestr('nvidia/nccl/lib/libnccl.so.2','ELF')" "$dest/nccl.whl"
fi
exec '{real}' "$@"
"#,
        log = dir.join("calls").display()
    );
    let path = dir.join("python");
    std::fs::write(&path, py).unwrap();
    Command::new("chmod").arg("+x").arg(&path).status().unwrap();
    dir
}

fn run(dir: &Path, version: &str) -> Output {
    Command::new("bash")
        .arg(script())
        .arg(version)
        .env("PYTHON", dir.join("python"))
        .env("BOOTSIM_NCCL_CACHE", dir.join("cache"))
        .output()
        .unwrap()
}

fn downloads(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("calls")).unwrap_or_default().matches("pip download").count()
}

#[test]
fn fetch_nccl_extracts_the_library_once_and_names_a_refused_version() {
    let dir = stand_in("once");
    let o = run(&dir, "2.21.5");
    let lib = dir.join("cache/2.21.5/libnccl.so.2");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), lib.display().to_string());
    assert_eq!(std::fs::read_to_string(&lib).unwrap(), "ELF");
    assert_eq!(downloads(&dir), 1);

    let o = run(&dir, "2.21.5");
    assert!(o.status.success());
    assert_eq!(downloads(&dir), 1, "a cached version is not downloaded again");
    let left: Vec<_> = std::fs::read_dir(dir.join("cache")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("2.21.5")], "nothing but the version's folder is left");

    let o = run(&dir, "9.9.9");
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("fetch-nccl: could not download nvidia-nccl-cu12==9.9.9"), "{err}");
    assert!(!dir.join("cache/9.9.9").exists());
    let left = std::fs::read_dir(dir.join("cache")).unwrap().count();
    assert_eq!(left, 1, "a refused version leaves nothing behind");

    let o = run(&dir, "latest");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad version 'latest'"));
    let _ = std::fs::remove_dir_all(&dir);
}
