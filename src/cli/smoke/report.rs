//! One iteration of a real run, judged by the library's oracle and printed a line per rank:
//! the same findings and verdicts as simulation, for bootsim-core ranks and NVSHMEM's plugin.

use std::time::Duration;

use bootsim_core::{RankRecord, RunRecord};
use bootsim_nvshmem::workload::OpSpec;
use bootsim_sim::protocol::nvshmem::judge;
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
    let judged = judge(specs, seed, n, &RunRecord::of_ranks(reports.to_vec()));
    let ranks = Ranks { reports, took, ops: Some(specs.len()) };
    print_judged(iter, &ranks, label, consequence, judged)
}

/// One iteration's ranks as [`print_judged`] prints them.
pub(super) struct Ranks<'a> {
    /// Each rank's record, by rank.
    pub reports: &'a [RankRecord],
    /// Each rank's time.
    pub took: &'a [Duration],
    /// The workload's operations, where known (else each record's count).
    pub ops: Option<usize>,
}

/// Prints the ranks of one iteration judged by any protocol's judge (`judged`, its verdict and
/// findings), as [`print_iteration`] does; returns the verdict (a consequence's findings
/// apart) and the findings.
pub(super) fn print_judged(
    iter: u32,
    ranks: &Ranks<'_>,
    label: &dyn Fn(u32) -> String,
    consequence: &dyn Fn(u32) -> Option<String>,
    judged: (Verdict, Vec<Finding>),
) -> (Verdict, Vec<Finding>) {
    let (all, findings) = judged;
    let n = ranks.reports.len() as u32;
    let verdict = match ranks.reports.iter().any(|r| consequence(r.rank).is_some()) {
        true => {
            let causes = findings.iter().filter(|f| f.rank().is_none_or(|r| consequence(r).is_none()));
            causes.map(Finding::verdict).max().unwrap_or(all)
        }
        false => all,
    };
    for (report, took) in ranks.reports.iter().zip(ranks.took) {
        let r = report.rank;
        let ms = took.as_millis();
        let mine: Vec<String> = findings.iter().filter(|f| f.rank() == Some(r)).map(ToString::to_string).collect();
        if mine.is_empty() {
            let ops = ranks.ops.unwrap_or(report.ops.len());
            println!("rank {r}/{n} iter {iter}{}: ok: init + {ops} ops verified in {ms} ms", label(r));
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
