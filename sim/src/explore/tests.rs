use super::*;
use crate::case::Case;
use crate::oracle::Verdict;

fn all() -> Bounds {
    Bounds { stop_at_violation: false, ..Bounds::default() }
}

#[test]
fn smoke_report() {
    for s in [
        "variant=nvshmem-3.4 workload=deepep ranks=2",
        "variant=seq workload=deepep ranks=2",
        "variant=persistent workload=deepep ranks=3",
        "variant=nvshmem-3.7 workload=qp-create k=3 ranks=3",
    ] {
        let case = Case::parse(s).unwrap();
        let ex = explore(&case, Faults::default(), all());
        eprintln!(
            "{s}: states {} transitions {} finals {} schedules {} depth {} verdicts {:?} incomplete {:?}",
            ex.states, ex.transitions, ex.finals, ex.schedules, ex.depth, ex.verdicts, ex.incomplete
        );
        if let Some(c) = ex.counterexample() {
            eprintln!("  cx {} {}", c.verdict, c.case);
            for f in &c.findings {
                eprintln!("    {f}");
            }
        }
    }
    let _ = Verdict::Pass;
}

#[test]
fn smoke_replay() {
    for s in [
        "variant=nvshmem-3.4 workload=deepep ranks=2",
        "variant=nvshmem-3.7 workload=deepep ranks=2",
        "variant=nvshmem-3.7 workload=qp-create ranks=4 k=2",
        "variant=disjoint workload=qp-create ranks=4 k=2",
        "variant=nvshmem-3.4 workload=deepep ranks=3 adversary=fifo",
    ] {
        let case = Case::parse(s).unwrap();
        let ex = explore(&case, Faults::default(), Bounds::default());
        eprintln!(
            "{s}: states {} finals {} verdicts {:?} incomplete {:?}",
            ex.states, ex.finals, ex.verdicts, ex.incomplete
        );
        if let Some(c) = ex.counterexample() {
            let r = crate::run::run_case(&c.case, false);
            eprintln!("  cx {} {} -> fast {}", c.verdict, c.case, r.verdict);
        }
    }
}
