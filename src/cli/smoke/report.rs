//! One iteration of a real run, judged by the library's oracle and printed a line per rank:
//! the same findings and verdicts as simulation, for bootsim-core ranks and NVSHMEM's plugin.

use std::time::Duration;

use bootsim_core::{RankRecord, RunRecord};
use bootsim_sim::oracle::judge;
use bootsim_sim::workload::OpSpec;
use bootsim_sim::{Finding, Verdict};

/// Judges the ranks of one iteration and prints `rank r/n iter i[ label]: ok ...` or
/// `... FAIL after ... ms: finding; then finding`; returns the verdict and the findings.
/// `consequence(r)`, when it says why, marks rank r's failure as another's consequence: its
/// line says so, and its findings do not count in the verdict.
pub(super) fn print_iteration(
    iter: u32,
    specs: &[OpSpec],
    seed: u64,
    reports: &[RankRecord],
    took: &[Duration],
    label: &dyn Fn(u32) -> String,
    consequence: &dyn Fn(u32) -> Option<String>,
) -> (Verdict, Vec<Finding>) {
    let n = reports.len() as u32;
    let (all, findings) = judge(specs, seed, n, &RunRecord::of_ranks(reports.to_vec()));
    let verdict = match reports.iter().any(|r| consequence(r.rank).is_some()) {
        true => {
            let causes = findings.iter().filter(|f| f.rank().is_none_or(|r| consequence(r).is_none()));
            causes.map(Finding::verdict).max().unwrap_or(all)
        }
        false => all,
    };
    for (report, took) in reports.iter().zip(took) {
        let r = report.rank;
        let ms = took.as_millis();
        let mine: Vec<String> = findings.iter().filter(|f| f.rank() == Some(r)).map(ToString::to_string).collect();
        if mine.is_empty() {
            println!("rank {r}/{n} iter {iter}{}: ok: init + {} ops verified in {ms} ms", label(r), specs.len());
        } else {
            let after = consequence(r).unwrap_or_default();
            println!("rank {r}/{n} iter {iter}{}: FAIL after {ms} ms{after}: {}", label(r), mine.join("; then "));
        }
    }
    (verdict, findings)
}

/// The iterations part of a summary: how many were ok of how many ran, and, when a failure
/// stopped the run early, how many of the asked-for did not run.
pub(super) fn iterations_text(ok: u32, ran: u32, asked: u32) -> String {
    let mut text = format!("{ok}/{ran} iterations ok");
    if ran < asked {
        text.push_str(&format!(
            " ({} of {asked} not run: stopped at the first failure; --keep-going runs them all)",
            asked - ran
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::iterations_text;

    #[test]
    fn a_stopped_run_says_how_many_ran_and_how_many_did_not() {
        assert_eq!(iterations_text(3, 3, 3), "3/3 iterations ok");
        assert_eq!(iterations_text(4, 5, 5), "4/5 iterations ok");
        assert_eq!(
            iterations_text(0, 1, 20),
            "0/1 iterations ok (19 of 20 not run: stopped at the first failure; --keep-going runs them all)"
        );
    }
}
