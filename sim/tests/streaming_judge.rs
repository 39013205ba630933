//! An untraced fast-engine run is judged as it goes and keeps only what is in flight (issue
//! #17 item 2); a traced run keeps the whole record and is judged at the end. Both must give
//! the same verdict and the same findings, in the same order, for every kind of finding.

use bootsim_sim::{run_case, Case, Finding, Verdict};

/// Cases and seed ranges that between them reach every verdict the fast engine gives.
const CASES: &[(&str, u64)] = &[
    ("engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss", 40),
    ("engine=fast variant=nvshmem-3.7 workload=qp-create k=3 ranks=3 adversary=rss", 40),
    ("engine=fast variant=nvshmem-3.7 workload=nvshmem-init ranks=5 adversary=lossy", 30),
    // Hangs and errors as well as mismatches.
    ("engine=fast variant=nvshmem-3.4 workload=churn len=8 ranks=4 adversary=swarm", 30),
    ("engine=fast variant=disjoint workload=qp-create k=3 ranks=3 adversary=rss", 30),
];
// tests/seeds.rs compares the two for every recorded case too (drain give-ups among them).

fn texts(f: &[Finding]) -> Vec<String> {
    f.iter().map(ToString::to_string).collect()
}

#[test]
fn a_streamed_run_is_judged_exactly_as_its_whole_record() {
    let mut seen = std::collections::BTreeSet::new();
    let mut kinds = std::collections::BTreeSet::new();
    let mut diffs = Vec::new();
    for &(line, seeds) in CASES {
        for seed in 0..seeds {
            let case = Case::parse(&format!("{line} seed={seed}")).unwrap();
            let streamed = run_case(&case, false);
            let whole = run_case(&case, true);
            assert!(streamed.trace.is_none() && whole.trace.is_some());
            seen.insert(whole.verdict);
            kinds.extend(texts(&whole.findings).iter().filter_map(|t| t.split(':').next().map(str::to_string)));
            if (streamed.verdict, texts(&streamed.findings)) != (whole.verdict, texts(&whole.findings)) {
                diffs.push(format!(
                    "{case}\n  streamed {}: {:?}\n  whole    {}: {:?}",
                    streamed.verdict,
                    texts(&streamed.findings),
                    whole.verdict,
                    texts(&whole.findings)
                ));
            }
            assert_eq!(streamed.messages, whole.messages, "{case}: messages counted");
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    assert!(kinds.len() >= 4, "mismatch, corruption, error and hang findings all compared: {kinds:?}");
    for v in [Verdict::Pass, Verdict::Benign, Verdict::Corruption, Verdict::Error] {
        assert!(seen.contains(&v), "no case reached {v}: the comparison would not cover it ({seen:?})");
    }
}

#[test]
fn a_streamed_run_keeps_no_message_once_taken_and_no_bytes_once_judged() {
    let case =
        Case::parse("engine=fast variant=nvshmem-3.7 workload=nvshmem-init ranks=8 adversary=rss seed=1").unwrap();
    let streamed = run_case(&case, false);
    assert_eq!(streamed.verdict, Verdict::Pass);
    let log = &streamed.outcome.record.messages;
    assert!(streamed.messages > 0);
    assert_eq!((log.held(), log.taken.len()), (0, 0), "every message was taken, none kept");
    for r in &streamed.outcome.record.ranks {
        assert_eq!(r.ops.len(), case.workload().ops(case.seed()).len());
        assert!(r.ops.iter().all(|o| o.as_ref().is_ok_and(Vec::is_empty)), "rank {}: bytes kept", r.rank);
    }
    // The whole record of the same run keeps every message and every result.
    let whole = run_case(&case, true);
    assert_eq!(whole.outcome.record.messages.sent.len(), streamed.messages);
    assert!(whole.outcome.record.ranks.iter().all(|r| r.ops.iter().any(|o| o.as_ref().is_ok_and(|b| !b.is_empty()))));
}
