//! `scripts/load-table.sh`, the command behind docs/load-model.md's scaling table, runs at a
//! small size and prints one row per profile and flood with one failure rate per world size.

use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn the_scaling_table_script_prints_every_row_and_column() {
    let out = Command::new("bash")
        .args(["scripts/load-table.sh", "3", "2,4", "0,600000", "cpu rps=on"])
        .current_dir(ROOT)
        .env("BOOTSIM", env!("CARGO_BIN_EXE_bootsim"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<&str> =
        text.lines().filter(|l| ["| rss", "| load", "| cpu"].iter().any(|p| l.starts_with(p))).collect();
    assert_eq!(rows.len(), 6, "{text}");
    assert!(text.contains("| cpu rps=on | 600000 |"), "{text}");
    assert!(text.starts_with("| profile | flood (pkt/s/host) | n=2 | n=4 |"), "{text}");
    for row in rows {
        let cells: Vec<&str> = row.split('|').map(str::trim).filter(|c| !c.is_empty()).collect();
        assert_eq!(cells.len(), 4, "{row}");
        for rate in &cells[2..] {
            let pct: f64 = rate.trim_end_matches(" %").parse().unwrap_or_else(|_| panic!("{row}"));
            assert!((0.0..=100.0).contains(&pct), "{row}");
        }
    }
    assert!(text.contains("(3 seeds per cell"), "{text}");
}

#[test]
fn the_script_names_a_missing_binary() {
    let out = Command::new("bash")
        .args(["scripts/load-table.sh", "1", "2", "0"])
        .current_dir(ROOT)
        .env("BOOTSIM", "/nonexistent/bootsim")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cargo build --release"));
}
