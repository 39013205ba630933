//! Property sweeps: proptest draws the case (workload, ranks, variant, adversary, seed) and,
//! where shrinking should mean something, the adversary's own choices (an explicit list of
//! RX-queue stalls with random stalls off), so a failure shrinks to fewer, shorter stalls.
//!
//! CI runs a few dozen cases per property; a larger sweep is one command away:
//! `PROPTEST_CASES=10000 cargo test --release --test properties`.
//! Failures persist to `proptest-regressions/properties-<property>.txt` (commit them).

use bootsim_nvshmem::workload::{format_ops, OpSpec};
use bootsim_sim::kernel::{ScriptedStall, StallAt};
use bootsim_sim::{run_case, Case, Verdict};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

/// Cases per property: `PROPTEST_CASES`, else a CI-sized default.
fn config(property: &'static str) -> Config {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(128);
    let file: &'static str = Box::leak(format!("proptest-regressions/properties-{property}.txt").into_boxed_str());
    Config { cases, failure_persistence: Some(Box::new(FileFailurePersistence::Direct(file))), ..Config::default() }
}

fn op() -> impl Strategy<Value = OpSpec> {
    prop_oneof![
        (1usize..64).prop_map(OpSpec::Allgather),
        (1usize..8).prop_map(|q| OpSpec::Alltoall(24 * q)),
        Just(OpSpec::Barrier),
    ]
}

/// Workload words of a case string.
fn workload() -> impl Strategy<Value = String> {
    prop_oneof![
        (1u32..=4).prop_map(|q| format!("workload=deepep qps={q}")),
        (1u32..=2).prop_map(|q| format!("workload=nvshmem-init qps={q}")),
        (1u32..=4).prop_map(|k| format!("workload=qp-create k={k}")),
        (1u32..=6).prop_map(|l| format!("workload=churn len={l}")),
        prop::collection::vec(op(), 1..5).prop_map(|ops| format!("workload=custom ops={}", format_ops(&ops))),
    ]
}

fn variant() -> impl Strategy<Value = &'static str> {
    prop::sample::select(bootsim_nvshmem::PRESETS.to_vec())
}

/// Forced stalls of the n-th packet on a queue of a host below `ranks` (rss has 8 queues).
fn stalls(ranks: u32) -> impl Strategy<Value = Vec<ScriptedStall>> {
    let one = (0..ranks, 0u16..8, 0u64..24, 1u64..5_000).prop_map(|(host, queue, n, us)| ScriptedStall {
        host,
        queue,
        at: StallAt::Packet(n),
        dur: us * 1000,
    });
    prop::collection::vec(one, 0..12)
}

/// A case under a random adversary profile.
fn random_case(variants: Vec<&'static str>, adversaries: Vec<&'static str>) -> impl Strategy<Value = String> {
    (prop::sample::select(variants), workload(), 2u32..=4, prop::sample::select(adversaries), any::<u64>())
        .prop_map(|(v, w, r, a, s)| format!("engine=fast variant={v} {w} ranks={r} adversary={a} seed={s}"))
}

/// A case whose stalls proptest chose (random stalls off).
fn scripted_case(variants: Vec<&'static str>) -> impl Strategy<Value = String> {
    (prop::sample::select(variants), workload(), 2u32..=3, 0u64..1000).prop_flat_map(|(v, w, r, s)| {
        stalls(r).prop_map(move |list| {
            format!(
                "engine=fast variant={v} {w} ranks={r} adversary=rss seed={s} stall_gap=off stalls={}",
                ScriptedStall::format_list(&list)
            )
        })
    })
}

fn verdict(case: &str) -> (Verdict, String) {
    let c = Case::parse(case).expect("strategies build valid cases");
    let r = run_case(&c, false);
    let v = r.verdict;
    (v, r.to_string())
}

const ROBUST: [&str; 2] = ["seq", "persistent"];
const ALL_ADVERSARIES: [&str; 5] = ["fifo", "rss", "lossy", "overflow", "swarm"];

proptest! {
    #![proptest_config(config("robust-random"))]
    /// `seq` and `persistent` never violate, under any random adversary.
    #[test]
    fn seq_and_persistent_never_violate(case in random_case(ROBUST.to_vec(), ALL_ADVERSARIES.to_vec())) {
        let (v, report) = verdict(&case);
        prop_assert!(v.is_ok(), "{report}");
    }
}

proptest! {
    #![proptest_config(config("robust-scripted"))]
    /// `seq` and `persistent` never violate, whatever stalls the adversary forces.
    #[test]
    fn seq_and_persistent_never_violate_under_forced_stalls(case in scripted_case(ROBUST.to_vec())) {
        let (v, report) = verdict(&case);
        prop_assert!(v.is_ok(), "{report}");
    }
}

proptest! {
    #![proptest_config(config("per-call-tags"))]
    /// `nvshmem-3.8` never takes one message for another (no corruption, error or benign swap)
    /// under any random adversary or forced stalls; only the connect deadlock of full accept
    /// queues (a hang, as in every NVSHMEM) remains.
    #[test]
    fn nvshmem_3_8_never_mismatches(
        case in prop_oneof![random_case(vec!["nvshmem-3.8"], ALL_ADVERSARIES.to_vec()), scripted_case(vec!["nvshmem-3.8"])]
    ) {
        let (v, report) = verdict(&case);
        prop_assert!(v == Verdict::Pass || v == Verdict::Hang, "{}", report);
    }
}

proptest! {
    #![proptest_config(config("fifo"))]
    /// Without reordering (`fifo`), no variant violates, and in particular nothing hangs.
    #[test]
    fn no_variant_violates_or_hangs_under_fifo(
        v in variant(), w in workload(), ranks in 1u32..=4, seed in any::<u64>()
    ) {
        let (got, report) = verdict(&format!("engine=fast variant={v} {w} ranks={ranks} adversary=fifo seed={seed}"));
        prop_assert_ne!(got, Verdict::Hang, "{}", report);
        prop_assert!(got.is_ok(), "{}", report);
    }
}

proptest! {
    #![proptest_config(config("determinism"))]
    /// The same case twice gives the same trace digest.
    #[test]
    fn same_case_same_digest(
        case in prop_oneof![random_case(variant_list(), ALL_ADVERSARIES.to_vec()), scripted_case(variant_list())]
    ) {
        let c = Case::parse(&case).expect("valid");
        let a = run_case(&c, true).trace.expect("traced").digest;
        let b = run_case(&c, true).trace.expect("traced").digest;
        prop_assert_eq!(a, b, "{}", case);
    }
}

fn variant_list() -> Vec<&'static str> {
    bootsim_nvshmem::PRESETS.to_vec()
}

/// The scripted adversary is strong enough to matter: the report's bug needs one forced stall.
#[test]
fn one_forced_stall_breaks_nvshmem_3_4_but_not_seq() {
    let case = "engine=fast variant=nvshmem-3.4 workload=custom ops=alltoall:24,barrier ranks=2 adversary=rss seed=3 \
                stall_gap=off stalls=1:3:p2:82";
    assert_eq!(verdict(case).0, Verdict::Corruption);
    assert!(verdict(&case.replace("nvshmem-3.4", "seq")).0.is_ok());
    assert_eq!(verdict(&case.replace("nvshmem-3.4", "nvshmem-3.8")).0, Verdict::Pass);
}
