//! `bootsim bench --quick`: the smoke version of the benchmark table runs and prints every
//! section. Benchmarks, not tests: no wall time is asserted here.

use std::process::Command;

#[test]
fn bench_quick_exits_0_and_prints_one_table() {
    let o = Command::new(env!("CARGO_BIN_EXE_bootsim")).args(["bench", "--quick"]).output().expect("bootsim runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.starts_with("| section "), "{out}");
    for section in ["1 throughput", "2 scale", "3 time to detect", "4 real sockets"] {
        assert!(out.contains(section), "no {section} rows in\n{out}");
    }
    assert!(out.contains("bare turmoil"), "{out}");
    assert!(out.contains("--variant seq"), "{out}");
    // Every target carries a verdict.
    assert!(out.contains("fast >= 50x turmoil: "), "{out}");
    assert!(out.contains("median <= 10 seeds: "), "{out}");
}
