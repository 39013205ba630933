//! `bootsim bench --quick`: the smoke version of the benchmark table runs and prints every
//! section. Benchmarks, not tests: no wall time is asserted here.

use std::process::Command;

/// The table's rows with each cell's wrapped lines joined by spaces, one row per line.
fn unwrapped(table: &str) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for line in table.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        match rows.last_mut() {
            // A continuation line: its first column (the section) is empty.
            Some(row) if cells[0].is_empty() => {
                for (cell, more) in row.iter_mut().zip(&cells) {
                    if !more.is_empty() {
                        cell.push(' ');
                        cell.push_str(more);
                    }
                }
            }
            _ => rows.push(cells.iter().map(|c| c.to_string()).collect()),
        }
    }
    rows.iter().map(|r| r.join(" | ")).collect::<Vec<_>>().join("\n")
}

#[test]
fn bench_quick_exits_0_and_prints_one_table() {
    let o = Command::new(env!("CARGO_BIN_EXE_bootsim")).args(["bench", "--quick"]).output().expect("bootsim runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.starts_with("| section "), "{out}");
    // Not a terminal: the table fits the fixed pipe width, long cells wrapped onto more lines.
    assert!(out.lines().all(|l| l.chars().count() <= 120), "{out}");
    let out = unwrapped(&out);
    for section in ["1 throughput", "2 scale", "3 time to detect", "4 real sockets"] {
        assert!(out.contains(section), "no {section} rows in\n{out}");
    }
    assert!(out.contains("bare turmoil"), "{out}");
    assert!(out.contains("--variant seq"), "{out}");
    // Every target carries a verdict.
    assert!(out.contains("fast >= 50x turmoil: "), "{out}");
    assert!(out.contains("median <= 10 seeds: "), "{out}");
    // The scale rows measure what issue #17's table asks, side by side.
    assert!(out.contains("CPU-s") && out.contains("agenda events") && out.contains("wake-ups"), "{out}");
    assert!(out.contains("CPU - messages exponent: "), "{out}");
    // Per frame as well as per message: the ring's frames are not messages (issue #17).
    assert!(out.contains("frames written per message") && out.contains("agenda events per frame"), "{out}");
    assert!(out.contains("packets ~ ranks^"), "{out}");
    assert!(out.contains("ranks=4096 | not run (--max-ranks; make bench-scale)"), "{out}");
}
