//! `bootsim bench`: the smoke version of the report runs and prints every section one row per
//! line within 80 columns, its JSON renders, and BENCHMARKS.md's generated tables are exactly
//! what the generator prints for the committed BENCHMARKS.json. Benchmarks, not tests: no wall
//! time is asserted here, and the real bench never runs at scale here.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn bootsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bootsim")).args(args).output().expect("bootsim runs")
}

fn ok(o: &Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn tmp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

#[test]
fn bench_quick_prints_every_section_in_80_columns_and_writes_json() {
    let json = tmp("bench-quick.json");
    let _ = std::fs::remove_file(&json);
    let out = ok(&bootsim(&["bench", "--quick", "--json", json.to_str().unwrap()]));
    assert!(out.starts_with("bootsim bench --quick --json "), "{out}");
    // One row per line, readable in an 80-column terminal: nothing wraps.
    for line in out.lines() {
        assert!(line.chars().count() <= 80, "longer than 80 columns: {line}\n{out}");
    }
    for title in [
        "1 throughput",
        "2 scale",
        "2b scale: fast nccl-init",
        "3 time to detect",
        "4 real sockets",
        "5 profile",
        "targets (issue #28)",
    ] {
        assert!(out.lines().any(|l| l.starts_with(title)), "no {title} table in\n{out}");
    }
    // One line per row: every subject, every point, every variant on its own line.
    for row in ["bare turmoil 16 ", "fast deepep 2 ", "turmoil init 16 ", "nvshmem-3.7  deepep 2 ", "seq   "] {
        assert_eq!(out.lines().filter(|l| l.starts_with(row)).count(), 1, "{row} in\n{out}");
    }
    // Both scale series ran their 64-rank point to a pass.
    assert_eq!(out.lines().filter(|l| l.trim_start().starts_with("64 ") && l.ends_with(" pass")).count(), 2, "{out}");
    assert!(out.lines().any(|l| l.trim_start().starts_with("4096  not run: --max-ranks")), "{out}");
    // Every target carries a verdict.
    for t in ["fast >= 50x turmoil, init 16 ", "ns per agenda event, 1024 ranks ", "median <= 10 seeds "] {
        let line = out.lines().find(|l| l.contains(t)).unwrap_or_else(|| panic!("no target {t} in\n{out}"));
        assert!(["PASS", "MISS", "not measured"].iter().any(|v| line.ends_with(v)), "{line}");
    }

    // The JSON holds the figures the text shows, and renders into Markdown tables.
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["meta"]["quick"], true);
    let p64 = report["scale"].as_array().unwrap().iter().find(|p| p["ranks"] == 64).expect("a 64-rank point");
    assert_eq!(p64["outcome"]["status"], "done");
    assert_eq!(p64["outcome"]["verdict"], "pass");
    let messages = p64["outcome"]["messages"].as_f64().unwrap();
    assert!(out.contains(&format!(" {messages} ")), "{messages} messages not in the text\n{out}");
    // NCCL's init series: the same points and figures, its own child per point.
    let n64 =
        report["nccl_scale"].as_array().unwrap().iter().find(|p| p["ranks"] == 64).expect("an NCCL 64-rank point");
    assert_eq!(n64["outcome"]["status"], "done");
    assert_eq!(n64["outcome"]["verdict"], "pass");
    let nccl_messages = n64["outcome"]["messages"].as_f64().unwrap();
    assert_ne!(nccl_messages, messages, "the NCCL series ran NVSHMEM's case");
    assert!(out.contains(&format!(" {nccl_messages} ")), "{nccl_messages} messages not in the text\n{out}");
    // Section 5: the 16-rank case under callgrind, whole and split (where valgrind runs: under
    // CI it must, `make test` installs it).
    let profile = &report["profile"];
    assert_eq!(profile["ranks"], 16, "{profile}");
    let found = Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success());
    let found = found
        .then_some(())
        .ok_or_else(|| "`valgrind --version` did not run: run scripts/install-valgrind.sh".to_string());
    if bootsim_adapters::skip::can_run("valgrind", found) {
        assert_eq!(profile["outcome"]["status"], "done", "{profile}");
        let p = &profile["outcome"];
        let total = p["instructions"].as_u64().unwrap();
        let sum =
            |k: &str| p[k].as_array().unwrap().iter().map(|x| x["instructions"].as_u64().unwrap()).collect::<Vec<_>>();
        // Every instruction once by layer; each function a part of the whole, none empty.
        assert_eq!(sum("layers").iter().sum::<u64>(), total, "{p}");
        assert!(sum("functions").iter().all(|&f| f > 0 && f < total), "{p}");
        assert!(p["agenda_events"].as_u64().unwrap() > 0 && p["packets"].as_u64().unwrap() > 0, "{p}");
        let title = "5 profile: callgrind, fast nvshmem-init 16 ranks rss seed=1, inclusive";
        assert!(out.lines().any(|l| l == title), "no {title} in\n{out}");
        let whole = out.lines().find(|l| l.starts_with("whole run ")).unwrap_or_else(|| panic!("{out}"));
        assert!(whole.contains(&format!(" {:.1} ", total as f64 / 1e6)) && whole.contains(" 100.0% "), "{whole}");
        for part in ["kernel: agenda, delivery, timers ", "NVSHMEM's rank state machines ", "sim kernel model "] {
            assert_eq!(out.lines().filter(|l| l.starts_with(part)).count(), 1, "{part} in\n{out}");
        }
    } else {
        assert_eq!(profile["outcome"]["status"], "not_run", "{profile}");
    }
    let md = ok(&bootsim(&["bench", "--markdown", json.to_str().unwrap()]));
    assert!(md.contains("| ranks | CPU-s | MiB | messages |"), "{md}");
    assert!(md.contains("| 64 | "), "{md}");
    assert!(md.contains("**2b scale: fast nccl-init (nccl-2.30) seed=1, a child per point**"), "{md}");
}

#[test]
fn benchmarks_md_tables_are_the_generated_ones_for_the_committed_json() {
    let doc = tmp("BENCHMARKS.md");
    let committed = std::fs::read_to_string(Path::new(ROOT).join("BENCHMARKS.md")).unwrap();
    std::fs::write(&doc, &committed).unwrap();
    let json = Path::new(ROOT).join("BENCHMARKS.json");
    ok(&bootsim(&["bench", "--markdown", json.to_str().unwrap(), "--update", doc.to_str().unwrap()]));
    let regenerated = std::fs::read_to_string(&doc).unwrap();
    assert!(
        regenerated == committed,
        "BENCHMARKS.md's generated section differs from `bootsim bench --markdown BENCHMARKS.json`: \
         regenerate it with `bootsim bench --markdown BENCHMARKS.json --update BENCHMARKS.md` \
         (make bench does), never edit it by hand"
    );
}

#[test]
fn markdown_of_a_file_that_is_not_a_report_says_so() {
    let bad = tmp("not-a-report.json");
    std::fs::write(&bad, "{\"x\": 1}").unwrap();
    let o = bootsim(&["bench", "--markdown", bad.to_str().unwrap()]);
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a bench report"), "{o:?}");
}
