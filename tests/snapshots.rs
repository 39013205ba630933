//! Full traces of canonical cases, reviewed as insta snapshots: any change in behaviour (the
//! protocol, the kernel model, the oracles, the trace format) shows up as a diff in review.
//! Update deliberately with `INSTA_UPDATE=always cargo test --test snapshots`, then read the diff.

use bootsim_sim::{run_case, Case};

/// The trace lines, the report and the digest: everything simulated, nothing from the host.
fn transcript(case: &str) -> String {
    let report = run_case(&Case::parse(case).expect("valid case"), true);
    let trace = report.trace.as_ref().expect("traced");
    format!("{}\n{report}trace-digest: {}\n", trace.lines.join("\n"), trace.digest)
}

const REPORT: &str = "engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3";

#[test]
fn report_under_nvshmem_3_4() {
    insta::assert_snapshot!("report-nvshmem-3.4", transcript(REPORT));
}

#[test]
fn report_under_nvshmem_3_7() {
    insta::assert_snapshot!("report-nvshmem-3.7", transcript(&REPORT.replace("nvshmem-3.4", "nvshmem-3.7")));
}

#[test]
fn report_schedule_under_seq() {
    insta::assert_snapshot!("report-seq", transcript(&REPORT.replace("nvshmem-3.4", "seq")));
}

#[test]
fn shrunk_report_under_nvshmem_3_4() {
    let case = "engine=fast variant=nvshmem-3.4 workload=custom ops=alltoall:24,barrier ranks=2 adversary=rss seed=3 \
                stall_gap=off stalls=1:3:p2:82";
    insta::assert_snapshot!("shrunk-report-nvshmem-3.4", transcript(case));
}
