//! One iteration of a real run, judged by the library's oracle and printed a line per rank:
//! the same findings and verdicts as simulation, for bootsim-core ranks and NVSHMEM's plugin.

use std::time::Duration;

use bootsim_core::{RankRecord, RunRecord};
use bootsim_sim::oracle::judge;
use bootsim_sim::workload::OpSpec;
use bootsim_sim::{Finding, Verdict};

/// Judges the ranks of one iteration and prints `rank r/n iter i[ label]: ok ...` or
/// `... FAIL after ... ms: finding; then finding`; returns the verdict and the findings.
pub(super) fn print_iteration(
    iter: u32,
    specs: &[OpSpec],
    seed: u64,
    reports: &[RankRecord],
    took: &[Duration],
    label: &dyn Fn(u32) -> String,
) -> (Verdict, Vec<Finding>) {
    let n = reports.len() as u32;
    let (verdict, findings) = judge(specs, seed, n, &RunRecord::of_ranks(reports.to_vec()));
    for (report, took) in reports.iter().zip(took) {
        let r = report.rank;
        let ms = took.as_millis();
        let mine: Vec<String> = findings.iter().filter(|f| f.rank() == Some(r)).map(ToString::to_string).collect();
        if mine.is_empty() {
            println!("rank {r}/{n} iter {iter}{}: ok: init + {} ops verified in {ms} ms", label(r), specs.len());
        } else {
            println!("rank {r}/{n} iter {iter}{}: FAIL after {ms} ms: {}", label(r), mine.join("; then "));
        }
    }
    (verdict, findings)
}
