//! engine=turmoil: the same driver as real sockets, the kernel model gating accepts and drains.

use std::collections::BTreeSet;
use std::time::Duration;

use bootsim_nvshmem::PRESETS;
use bootsim_sim::engine::turmoil;
use bootsim_sim::protocol::nvshmem::judge;
use bootsim_sim::protocol::Nvshmem;
use bootsim_sim::sweep::sweep;
use bootsim_sim::{run_case, Case, Finding, Verdict};

fn case(s: &str) -> Case {
    Case::parse(s).unwrap()
}

fn seeds(n: u64) -> Vec<u64> {
    (0..n).collect()
}

#[test]
fn the_report_is_found_on_turmoil_and_robust_variants_hold() {
    let first = |v: &str| {
        let c = case(&format!("engine=turmoil variant={v} workload=deepep ranks=2 adversary=rss"));
        sweep(&c, &seeds(100), 2, &|_, _| {}).unwrap()
    };
    let s34 = first("nvshmem-3.4");
    assert_eq!(s34.first_failure().expect("3.4 fails within 100 seeds").verdict, Verdict::Corruption);
    let s37 = first("nvshmem-3.7");
    let f = s37.first_failure().expect("3.7 fails within 100 seeds");
    assert!(f.first_finding.as_ref().unwrap().contains("size mismatch: received 4 bytes instead of 576"), "{f:?}");
    for v in ["nvshmem-3.8", "seq", "persistent"] {
        assert_eq!(first(v).failures(), 0, "{v}");
    }
}

#[test]
fn nothing_fails_under_fifo_on_turmoil() {
    for v in PRESETS {
        let c = case(&format!("engine=turmoil variant={v} workload=deepep ranks=2 adversary=fifo"));
        assert_eq!(sweep(&c, &seeds(20), 2, &|_, _| {}).unwrap().failures(), 0, "{v}");
    }
}

#[test]
fn same_case_same_digest_on_turmoil() {
    let c = case("engine=turmoil variant=nvshmem-3.4 workload=nvshmem-init ranks=4 adversary=rss seed=5");
    let a = run_case(&c, true).trace.unwrap();
    let b = run_case(&c, true).trace.unwrap();
    assert_eq!(a.digest, b.digest);
    assert!(a.lines.len() > 50);
}

#[test]
fn a_crashed_host_leaves_the_others_with_a_clear_liveness_report() {
    let c =
        case("engine=turmoil variant=nvshmem-3.7 workload=nvshmem-init ranks=3 adversary=fifo seed=1 deadline_ms=5000");
    let out = turmoil::run(&Nvshmem, &c.variant(), c.workload(), &c, false, Some((1, Duration::from_millis(3))));
    let (verdict, findings) = judge(&c.workload().ops(c.seed()), c.seed(), c.ranks(), &out.record);
    assert_eq!(verdict, Verdict::Hang, "{findings:?}");
    let hangs: Vec<&Finding> = findings.iter().filter(|f| matches!(f, Finding::Hang { .. })).collect();
    assert!(hangs.iter().any(|f| f.to_string().contains("rank 1 waits for nothing: its host crashed")), "{hangs:?}");
    assert!(
        hangs.iter().any(|f| f.to_string().starts_with("hang: rank 0 waits for")
            || f.to_string().starts_with("hang: rank 2 waits for")),
        "{hangs:?}"
    );
}

/// Which variants fail (not pass or benign) in `n` seeds of one setting.
fn failing(engine: &str, workload: &str, ranks: u32, adversary: &str, n: u64) -> BTreeSet<&'static str> {
    PRESETS
        .into_iter()
        .filter(|v| {
            let c =
                case(&format!("engine={engine} variant={v} workload={workload} ranks={ranks} adversary={adversary}"));
            sweep(&c, &seeds(n), 2, &|_, _| {}).unwrap().failures() > 0
        })
        .collect()
}

#[test]
fn engines_agree_on_which_variants_fail() {
    for (workload, ranks, n) in [("deepep", 2, 60), ("nvshmem-init", 8, 6)] {
        for adversary in ["fifo", "rss"] {
            let fast = failing("fast", workload, ranks, adversary, n);
            let turmoil = failing("turmoil", workload, ranks, adversary, n);
            assert_eq!(fast, turmoil, "{workload} ranks={ranks} adversary={adversary}");
        }
    }
}

#[test]
fn turmoil_honours_the_deadline() {
    let r = run_case(
        &case("engine=turmoil variant=nvshmem-3.7 workload=deepep ranks=2 adversary=fifo deadline_ms=1"),
        false,
    );
    assert_eq!(r.verdict, Verdict::Hang, "{r}");
    assert!(r.findings.iter().any(|f| f.to_string().contains("hang: rank 0 waits for init: ")), "{r}");
}

#[test]
fn turmoil_retries_connects_the_model_times_out_as_nvshmem_does() {
    // Heavy loss with one SYN retry: model handshakes time out often; NVSHMEM retries
    // ETIMEDOUT three times, so the robust variants must still never fail.
    for v in ["seq", "persistent"] {
        let c = case(&format!(
            "engine=turmoil variant={v} workload=deepep ranks=2 adversary=lossy syn_retries=1 loss_good=0.1"
        ));
        let s = sweep(&c, &seeds(20), 2, &|_, _| {}).unwrap();
        assert_eq!(s.failures(), 0, "{v}: {:?}", s.first_failure());
    }
}

#[test]
fn an_unfinished_ranks_messages_are_kept_and_explain_names_the_overtaking() {
    // Rank 0 is left waiting in the barrier (unfinished at the end): its alltoall and barrier
    // messages must still be in the outcome, or explain would say nothing overtook anything.
    let c = case("engine=turmoil variant=nvshmem-3.7 workload=deepep ranks=2 adversary=rss seed=4");
    let r = bootsim_sim::run_case(&c, true);
    assert_eq!(r.verdict, Verdict::Error, "{r}");
    assert!(
        r.outcome.record.messages.sent.len() >= 3,
        "messages of the unfinished rank kept: {}",
        r.outcome.record.messages.sent.len()
    );
    let text = bootsim_sim::explain(&r).join("\n");
    assert!(text.contains("Connection 8 overtook connection 7"), "{text}");
}
