//! The set-up scripts' logic, run for real against stub package tools: the install branch that
//! only a fresh machine takes (packages missing, apt lists empty) runs here on every `make test`,
//! even where the packages are already installed.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A temporary folder of stub commands that log their calls to `calls.log`.
struct Stubs {
    dir: PathBuf,
}

impl Stubs {
    fn new(name: &str) -> Stubs {
        let dir = std::env::temp_dir().join(format!("bootsim-stubs-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("bin")).unwrap();
        fs::write(dir.join("calls.log"), "").unwrap();
        Stubs { dir }
    }

    fn stub(&self, name: &str, body: &str) {
        let path = self.dir.join("bin").join(name);
        let log = self.dir.join("calls.log");
        let script = format!(
            "#!/usr/bin/env bash\necho \"{name} $*\" >> '{}'\nSTATE='{}'\n{body}\n",
            log.display(),
            self.dir.display()
        );
        fs::write(&path, script).unwrap();
        Command::new("chmod").arg("+x").arg(&path).status().unwrap();
    }

    fn calls(&self) -> String {
        fs::read_to_string(self.dir.join("calls.log")).unwrap()
    }

    fn run(&self, script: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        let path = format!("{}:/usr/bin:/bin", self.dir.join("bin").display());
        let mut cmd = Command::new("bash");
        cmd.arg(Path::new(ROOT).join(script)).args(args).env("PATH", path).current_dir(&self.dir);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }
}

impl Drop for Stubs {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The head of a stub `apt-get`: refuses a call without a bounded wait for the dpkg lock (as a
/// real apt would fail at once while unattended-upgrades holds it), then drops the `-o` options.
const APT_OPTIONS: &str = r#"[[ "$*" == *"-o DPkg::Lock::Timeout="* ]] || { echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)" >&2; exit 100; }
while [[ "$1" == -o ]]; do shift 2; done"#;

/// A dpkg/apt world: packages are "installed" once `apt-get install` has named them; apt-cache
/// has candidates only after `apt-get update` (a fresh machine's empty lists).
fn fake_apt(s: &Stubs, uid: u32) {
    s.stub(
        "dpkg-query",
        r#"pkg="${@: -1}"; if grep -qx "$pkg" "$STATE/installed" 2>/dev/null; then printf 'install ok installed'; else exit 1; fi"#,
    );
    s.stub(
        "apt-cache",
        r#"if [[ -f "$STATE/updated" ]]; then printf '  Installed: (none)\n  Candidate: 1.0\n'; else printf '  Installed: (none)\n  Candidate: (none)\n'; fi"#,
    );
    s.stub(
        "apt-get",
        &format!("{APT_OPTIONS}\n{}", r#"case "$1" in update) touch "$STATE/updated";; install) for a in "$@"; do case "$a" in -*|install) ;; *) echo "$a" >> "$STATE/installed";; esac; done;; esac"#),
    );
    s.stub("id", &format!("echo {uid}"));
    s.stub("sudo", r#""$@""#);
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn apt_install_on_a_fresh_machine_updates_the_lists_then_installs_what_is_missing() {
    let s = Stubs::new("fresh");
    fake_apt(&s, 0);
    let o = s.run("scripts/apt-install.sh", &["t", "pkg-a", "pkg-b"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let calls = s.calls();
    assert!(
        calls.contains("apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends pkg-a pkg-b"),
        "{calls}"
    );
    assert!(calls.contains("apt-get -o DPkg::Lock::Timeout=600 update"), "{calls}");
    assert!(!calls.contains("sudo"), "root needs no sudo: {calls}");
    assert!(text(&o).contains("t: done"), "{}", text(&o));
}

#[test]
fn apt_install_with_everything_present_touches_nothing() {
    let s = Stubs::new("present");
    fake_apt(&s, 0);
    fs::write(s.dir.join("installed"), "pkg-a\n").unwrap();
    let o = s.run("scripts/apt-install.sh", &["t", "pkg-a"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!s.calls().contains("apt-get"), "{}", s.calls());
    assert!(text(&o).contains("already installed: pkg-a"));
}

#[test]
fn apt_install_as_a_user_goes_through_sudo_and_fails_when_a_package_did_not_install() {
    let s = Stubs::new("user");
    fake_apt(&s, 1000);
    // This apt-get "succeeds" without installing anything.
    s.stub("apt-get", &format!("{APT_OPTIONS}\n{}", r#"[[ "$1" == update ]] && touch "$STATE/updated"; exit 0"#));
    let o = s.run("scripts/apt-install.sh", &["t", "pkg-a"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        s.calls().contains("sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install"),
        "{}",
        s.calls()
    );
    assert!(text(&o).contains("pkg-a still not installed"), "{}", text(&o));
}

#[test]
fn apt_install_waits_for_a_held_dpkg_lock_within_its_bound_and_says_when_it_gives_up() {
    let s = Stubs::new("lock");
    fake_apt(&s, 0);
    fs::write(s.dir.join("updated"), "").unwrap();
    // This apt-get waited its whole DPkg::Lock::Timeout and the lock was still held.
    s.stub(
        "apt-get",
        r#"echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)" >&2; exit 100"#,
    );
    let o = s.run("scripts/apt-install.sh", &["t", "pkg-a"], &[("APT_LOCK_TIMEOUT", "7")]);
    assert_eq!(o.status.code(), Some(100), "{}", text(&o));
    assert!(s.calls().contains("apt-get -o DPkg::Lock::Timeout=7 install"), "{}", s.calls());
    let out = text(&o);
    assert!(out.contains("It is held by process 4242"), "apt's own words are shown: {out}");
    assert!(out.contains("t: gave up after waiting 7 s for the apt/dpkg lock"), "{out}");
    assert!(!out.contains("t: done"), "{out}");

    // Any other apt failure is not blamed on the lock; a malformed bound is refused up front.
    s.stub("apt-get", r#"echo "E: Unable to locate package pkg-a" >&2; exit 100"#);
    let o = s.run("scripts/apt-install.sh", &["t", "pkg-a"], &[]);
    assert_eq!(o.status.code(), Some(100), "{}", text(&o));
    assert!(!text(&o).contains("gave up"), "{}", text(&o));
    let o = s.run("scripts/apt-install.sh", &["t", "pkg-a"], &[("APT_LOCK_TIMEOUT", "ten")]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("APT_LOCK_TIMEOUT must be whole seconds, got 'ten'"), "{}", text(&o));
}

#[test]
fn every_project_script_parses() {
    let mut scripts: Vec<PathBuf> = fs::read_dir(Path::new(ROOT).join("scripts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sh"))
        .collect();
    scripts.push(Path::new(ROOT).join(".ci/run"));
    assert!(scripts.len() >= 6, "{scripts:?}");
    for p in scripts {
        let o = Command::new("bash").arg("-n").arg(&p).output().unwrap();
        assert!(o.status.success(), "{} does not parse: {}", p.display(), text(&o));
    }
}

/// A stand-in for `python3` that answers `pip --version`, fakes `pip download` with a wheel
/// holding the two files, and runs the real interpreter for the unpacking step.
fn fake_python(s: &Stubs) -> String {
    let real = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .map(String::from)
        .unwrap_or_else(|| {
            let o = Command::new("bash").args(["-c", "command -v python3"]).output().unwrap();
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        });
    s.stub(
        "fakepy",
        &format!(
            r#"REAL='{real}'
if [[ "$1 $2" == "-m pip" ]]; then
  shift 2
  [[ "$1" == --version ]] && {{ echo "pip 23"; exit 0; }}
  dest=""; spec=""
  while [[ $# -gt 0 ]]; do case "$1" in --dest) dest="$2"; shift 2;; -*) shift;; *) spec="$1"; shift;; esac; done
  [[ "$spec" == *==9.9.9 ]] && {{ echo "No matching distribution found for $spec" >&2; exit 1; }}
  "$REAL" -c "import zipfile,sys; z=zipfile.ZipFile(sys.argv[1],'w'); z.writestr('nvidia/nvshmem/lib/nvshmem_bootstrap_uid.so.3','ELF'); z.writestr('nvidia/nvshmem/include/bootstrap_device_host/nvshmem_uniqueid.h','h')" "$dest/fake-1.whl"
  exit 0
fi
exec "$REAL" "$@""#
        ),
    );
    s.dir.join("bin/fakepy").display().to_string()
}

#[test]
fn fetch_nvshmem_extracts_the_plugin_once_and_names_a_missing_version() {
    let s = Stubs::new("fetch");
    let py = fake_python(&s);
    let cache = s.dir.join("cache").display().to_string();
    let env = [("PYTHON", py.as_str()), ("BOOTSIM_NVSHMEM_CACHE", cache.as_str())];

    let o = s.run("scripts/fetch-nvshmem.sh", &["3.4.5"], &env);
    assert!(o.status.success(), "{}", text(&o));
    let plugin = s.dir.join("cache/3.4.5/nvshmem_bootstrap_uid.so.3");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), plugin.display().to_string());
    assert_eq!(fs::read_to_string(&plugin).unwrap(), "ELF");
    assert!(s.dir.join("cache/3.4.5/nvshmem_uniqueid.h").exists());
    let downloads = s.calls().matches("pip download").count();
    assert_eq!(downloads, 1, "{}", s.calls());

    // Cached: no second download; nothing but the two files is left behind.
    let o = s.run("scripts/fetch-nvshmem.sh", &["3.4.5"], &env);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(s.calls().matches("pip download").count(), 1, "{}", s.calls());
    let left: Vec<_> = fs::read_dir(s.dir.join("cache")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("3.4.5")]);

    let o = s.run("scripts/fetch-nvshmem.sh", &["9.9.9"], &env);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("could not download nvidia-nvshmem-cu12==9.9.9"), "{}", text(&o));
    assert!(!s.dir.join("cache/9.9.9").exists());

    let o = s.run("scripts/fetch-nvshmem.sh", &["latest"], &env);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("bad version 'latest'"), "{}", text(&o));
}

#[test]
fn a_set_up_step_that_cannot_run_fails_under_ci_and_is_counted_then_summarised_elsewhere() {
    let s = Stubs::new("skip");
    let log = s.dir.join("skips.log");
    let log_s = log.display().to_string();
    for ci in ["true", "1"] {
        let o = s.run("scripts/skip.sh", &["chromium", "no sudo"], &[("CI", ci), ("BOOTSIM_SKIP_LOG", &log_s)]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("cannot run under CI: needs chromium: no sudo"), "{}", text(&o));
    }
    assert!(!log.exists(), "a CI failure is not a skip");
    for ci in ["false", "0", ""] {
        let o = s.run("scripts/skip.sh", &["chromium", "no sudo"], &[("CI", ci), ("BOOTSIM_SKIP_LOG", &log_s)]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = s.run("scripts/skip-summary.sh", &[&log_s], &[]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(out.starts_with("make test: 3 tests SKIPPED (not run, not passed) on this machine:\n"), "{out}");
    assert_eq!(out.matches("  SKIPPED make test step: needs chromium: no sudo").count(), 3, "{out}");
    fs::remove_file(&log).unwrap();
    let o = s.run("scripts/skip-summary.sh", &[&log_s], &[]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "make test: 0 tests skipped\n");
}

#[test]
fn make_install_puts_a_working_bootsim_in_prefix_bin() {
    // The dev profile: the build cargo test has just made (README's `make install` is release).
    let prefix = std::env::temp_dir().join(format!("bootsim-install-{}", std::process::id()));
    let _ = fs::remove_dir_all(&prefix);
    let o = Command::new("make")
        .args(["install", "PROFILE=dev"])
        .arg(format!("PREFIX={}", prefix.display()))
        .current_dir(ROOT)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let bin = prefix.join("bin/bootsim");
    assert!(text(&o).contains(&format!("installed {}", bin.display())), "{}", text(&o));
    let v = Command::new(&bin).arg("--version").output().unwrap();
    // The installed binary finds its installed interposer (no BOOTSIM_PRELOAD, not the build tree).
    let shuffled = Command::new(&bin)
        .args(["shuffle", "--policy", "none", "--", "true"])
        .env_remove("BOOTSIM_PRELOAD")
        .output()
        .unwrap();
    let _ = fs::remove_dir_all(&prefix);
    assert!(v.status.success() && String::from_utf8_lossy(&v.stdout).starts_with("bootsim "), "{}", text(&v));
    assert!(shuffled.status.success(), "{}", text(&shuffled));
}
