//! Verdict-rate equivalence (issue #28 item 4): the kernel model now gives each corpus case,
//! under each adversary, the verdict rates recorded from the model before its last change of
//! event granularity (`data/verdict_rates_27b7073.tsv`, seeds 0..999 and 0..99): no verdict's share
//! differs at the 1 % level (two-proportion z-test). A model change that fails it changes what
//! the model means, not only its cost.
//!
//! The issue asks for 1000 seeds a case. In the dev profile (our crates unoptimised) that is
//! about 20 minutes on two cores, longer than the whole `make test`, so by default this sweeps
//! the first [`DEFAULT_SEEDS`] seeds of each (about two minutes) against the same seeds'
//! recorded counts (a weaker test: it sees only large shifts);
//! `BOOTSIM_EQUIVALENCE_SEEDS=1000 cargo test --release -p bootsim-sim --test
//! verdict_equivalence` runs the full test (about a minute and a half in release).

use bootsim_sim::equivalence::{compare, parse_table, Z_CRIT_1PCT};

const RECORDED: &str = include_str!("data/verdict_rates_27b7073.tsv");

/// Seeds swept per case and adversary unless `BOOTSIM_EQUIVALENCE_SEEDS` says otherwise.
const DEFAULT_SEEDS: u64 = 100;

#[test]
fn every_corpus_case_keeps_its_verdict_rates_under_every_adversary() {
    let seeds = std::env::var("BOOTSIM_EQUIVALENCE_SEEDS")
        .map_or(DEFAULT_SEEDS, |s| s.parse().unwrap_or_else(|e| panic!("BOOTSIM_EQUIVALENCE_SEEDS={s:?}: {e}")));
    let rows: Vec<_> = parse_table(RECORDED).unwrap().into_iter().filter(|r| r.seeds == seeds).collect();
    assert!(rows.len() >= 140, "{} cases recorded over {seeds} seeds (100 and 1000 are)", rows.len());
    // Every corpus file is in the table (as rows, or as combinations the parser refuses).
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../seeds");
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".toml") {
            assert!(RECORDED.contains(&format!("{name}\t")), "{name} is not in the recorded table: record it");
        }
    }
    let mut differ = Vec::new();
    let mut worst = (0.0f64, String::new());
    for row in &rows {
        let c = compare(row, seeds, 2).unwrap();
        if c.largest.1.abs() > worst.0 {
            worst = (c.largest.1.abs(), format!("{} ({}: z = {:.2})", row.case, c.largest.0, c.largest.1));
        }
        if !c.equivalent() {
            let (v, z) = &c.largest;
            differ.push(format!(
                "{}: recorded {:?}, now {:?} over {seeds} seeds, {v} z = {z:.2}",
                row.case, row.counts, c.now
            ));
        }
    }
    eprintln!(
        "{} cases x adversaries over {seeds} seeds, largest |z| {:.2} (limit {Z_CRIT_1PCT}): {}",
        rows.len(),
        worst.0,
        worst.1
    );
    assert!(differ.is_empty(), "verdict rates differ at the 1 % level:\n{}", differ.join("\n"));
}
