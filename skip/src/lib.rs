//! bootsim-skip: what a test does when its real part cannot run on this machine (no CAP_NET_ADMIN for the
//! wire, no chromium, no RDMA device): under CI it fails, naming what is missing; elsewhere it
//! prints a `SKIPPED` line and counts the skip, so `make test` can report how many did not run.
//!
//! The count goes to the file named by `BOOTSIM_SKIP_LOG` (the Makefile sets it and prints the
//! total after `cargo test`): one line per skipped test. CI may declare a need it knowingly
//! cannot meet (CI has no RDMA hardware) in `BOOTSIM_CI_LACKS` (comma-separated keys); only those
//! skip under CI.

#![warn(missing_docs)]

use std::io::Write;

/// The environment variable naming the file each skip is appended to.
pub const SKIP_LOG: &str = "BOOTSIM_SKIP_LOG";

/// Whether this process runs under CI: `CI` set to anything but empty, `0` or `false`.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// Whether the calling test may run its real part: `true` when `available` is `Ok`. Otherwise,
/// under CI (unless `key` is listed in `BOOTSIM_CI_LACKS`) this panics naming `key` and why;
/// elsewhere it prints `SKIPPED <test>: <key>: <why>`, appends that line to `BOOTSIM_SKIP_LOG`
/// and returns `false`.
pub fn can_run(key: &str, available: Result<(), String>) -> bool {
    let Err(why) = available else { return true };
    let test = std::thread::current().name().unwrap_or("a test").to_string();
    let declared = std::env::var("BOOTSIM_CI_LACKS").is_ok_and(|l| l.split(',').any(|k| k.trim() == key));
    if under_ci() && !declared {
        panic!(
            "{test} cannot run its real part under CI: needs {key}: {why} (a test under CI fails instead of skipping)"
        );
    }
    let line = format!("SKIPPED {test}: needs {key}: {why}");
    eprintln!("{line}");
    if let Some(path) = std::env::var_os(SKIP_LOG) {
        let appended =
            std::fs::OpenOptions::new().create(true).append(true).open(&path).and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = appended {
            eprintln!("could not count the skip in {}: {e}", path.to_string_lossy());
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_available_need_runs_and_logs_nothing() {
        assert!(can_run("anything", Ok(())));
    }
}
