//! The simulator finds the reported bug on its own, and the robust variants never fail.

use bootsim_sim::sweep::sweep;
use bootsim_sim::{run_case, Case, Finding, Verdict};

fn case(s: &str) -> Case {
    Case::parse(s).unwrap()
}

fn seeds(n: u64) -> Vec<u64> {
    (0..n).collect()
}

#[test]
fn nvshmem_3_4_corrupts_with_the_reports_symptoms_within_100_seeds() {
    let c = case("engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss");
    let s = sweep(&c, &seeds(100), 2, &|_, _| {}).unwrap();
    let first = s.first_failure().expect("3.4 fails within 100 seeds under rss");
    assert_eq!(first.verdict, Verdict::Corruption);
    let report = run_case(&c.with_seed(first.seed).unwrap(), false);
    let corruption = report.findings.iter().find_map(|f| match f {
        Finding::Corruption { detail: Some(d), source, .. } => {
            Some((d.expected_received().map(|(_, r)| r), d.consequence(), source.to_string()))
        }
        _ => None,
    });
    let (received, verbs, source) = corruption.expect("a corruption finding");
    assert!(received.unwrap().ends_with("and a zero GID"), "the GID arrives zeroed");
    assert!(verbs.unwrap().contains("ibv_modify_qp(RTR) with a zero GID: EINVAL"));
    assert!(source.starts_with("barrier #2 round 1 from rank"), "{source}");
    assert!(report.findings.iter().any(|f| matches!(f, Finding::Error { error, .. } if error.text().contains("message truncated: received 576 bytes instead of 4"))));
}

#[test]
fn nvshmem_3_7_fails_with_a_size_mismatch_within_100_seeds() {
    let c = case("engine=fast variant=nvshmem-3.7 workload=deepep ranks=2 adversary=rss");
    let s = sweep(&c, &seeds(100), 2, &|_, _| {}).unwrap();
    let first = s.first_failure().expect("3.7 fails within 100 seeds under rss");
    assert_eq!(first.verdict, Verdict::Error);
    assert!(first.first_finding.as_ref().unwrap().contains("message size mismatch: received 4 bytes instead of 576"));
}

#[test]
fn robust_variants_never_fail_under_any_profile() {
    for variant in ["seq", "persistent"] {
        for adversary in ["fifo", "rss", "lossy", "overflow", "swarm"] {
            for (workload, ranks) in [("deepep", 2), ("nvshmem-init", 5), ("qp-create", 3)] {
                let c = case(&format!(
                    "engine=fast variant={variant} workload={workload} ranks={ranks} adversary={adversary}"
                ));
                let s = sweep(&c, &seeds(20), 2, &|_, _| {}).unwrap();
                assert_eq!(s.failures(), 0, "{c}: {:?}", s.first_failure());
            }
        }
    }
}

/// NVSHMEM 3.8.0's per-call tags: within one call every peer sends a rank at most one message,
/// so (peer, tag) names exactly one message whatever the accept order: no mismatch, benign or
/// not, under any profile. It can still hang where every NVSHMEM does: under `swarm`, two ranks
/// each blocked in connect() to the other with both accept queues full (its receiver accepts
/// only when it receives, unlike seq's).
#[test]
fn nvshmem_3_8_never_takes_one_message_for_another() {
    for adversary in ["fifo", "rss", "lossy", "overflow", "swarm"] {
        for (workload, ranks) in [("deepep", 2), ("nvshmem-init", 5), ("qp-create", 3), ("churn", 4)] {
            let c = case(&format!(
                "engine=fast variant=nvshmem-3.8 workload={workload} ranks={ranks} adversary={adversary}"
            ));
            let s = sweep(&c, &seeds(30), 2, &|_, _| {}).unwrap();
            for v in [Verdict::Benign, Verdict::Corruption, Verdict::Error] {
                assert_eq!(s.count(v), 0, "{c}: {v}: {:?}", s.first_failure());
            }
        }
    }
}

#[test]
fn no_variant_fails_under_fifo() {
    for variant in bootsim_nvshmem::PRESETS {
        for (workload, ranks) in [("deepep", 2), ("nvshmem-init", 4), ("churn", 3)] {
            let c = case(&format!("engine=fast variant={variant} workload={workload} ranks={ranks} adversary=fifo"));
            let s = sweep(&c, &seeds(10), 2, &|_, _| {}).unwrap();
            assert_eq!(s.failures(), 0, "{c}: {:?}", s.first_failure());
            assert_eq!(s.count(Verdict::Pass), 10, "{c}: fifo never even reorders benignly");
        }
    }
}

#[test]
fn same_case_same_digest_and_jobs_do_not_matter() {
    let c = case("engine=fast variant=nvshmem-3.4 workload=nvshmem-init ranks=6 adversary=lossy seed=11");
    let a = run_case(&c, true).trace.unwrap();
    let b = run_case(&c, true).trace.unwrap();
    assert_eq!(a.digest, b.digest);
    assert_eq!(a.lines, b.lines);
    assert_ne!(a.digest, run_case(&c.with_seed(12).unwrap(), true).trace.unwrap().digest);
    let c = case("engine=fast variant=nvshmem-3.7 workload=deepep ranks=2 adversary=swarm");
    let one = sweep(&c, &seeds(40), 1, &|_, _| {}).unwrap();
    assert_eq!(one, sweep(&c, &seeds(40), 2, &|_, _| {}).unwrap());
    assert_eq!(one, sweep(&c, &seeds(40), 5, &|_, _| {}).unwrap());
    assert_eq!(one.results.iter().map(|r| r.seed).collect::<Vec<_>>(), seeds(40), "results in seed order");
}

#[test]
fn what_ran_before_on_a_thread_does_not_change_a_run() {
    // Runs hand their containers, emptied, to the next run on their thread: a small case's
    // trace after a larger run (and after an untraced one, and another protocol's) is the
    // one a fresh thread gives, on either engine (the turmoil engine's kernel model keeps its
    // containers the same way).
    let small = [
        case("engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3"),
        case("engine=fast protocol=nccl variant=nccl-2.19 workload=nccl-init ranks=8 adversary=rss seed=0"),
        case("engine=turmoil variant=nvshmem-3.7 workload=nvshmem-init ranks=4 adversary=rss seed=1"),
    ];
    let fresh: Vec<_> = small
        .iter()
        .map(|c| {
            let c = c.clone();
            std::thread::spawn(move || run_case(&c, true).trace.unwrap()).join().unwrap()
        })
        .collect();
    run_case(&case("engine=fast variant=nvshmem-3.7 workload=nvshmem-init ranks=48 adversary=load seed=2"), true);
    run_case(&case("engine=fast variant=persistent workload=churn ranks=8 adversary=lossy seed=5"), false);
    run_case(&case("engine=turmoil variant=drain workload=deepep ranks=8 adversary=load seed=4"), false);
    for (c, f) in small.iter().zip(&fresh) {
        let after = run_case(c, true).trace.unwrap();
        assert_eq!((&after.digest, &after.lines), (&f.digest, &f.lines), "{c}");
    }
}

#[test]
fn a_bigger_world_runs() {
    let c = case("engine=fast variant=nvshmem-3.7 workload=nvshmem-init ranks=64 adversary=rss seed=1");
    let r = run_case(&c, false);
    assert!(matches!(r.verdict, Verdict::Pass | Verdict::Benign | Verdict::Error), "{r}");
    assert!(r.messages > 64 * 63);
}
