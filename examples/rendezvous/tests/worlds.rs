//! The rendezvous protocol on the worlds beside the fast engine, with no engine or driver file
//! touched for it: the turmoil engine (its nodes through the async driver over turmoil's
//! simulated sockets and the kernel model) finds the reused tag's corruption and passes the
//! round tag; real loopback sockets (the same driver over tokio) run both variants end to end.

use std::time::Duration;

use bootsim_adapters::local_run::run_local;
use bootsim_example_rendezvous::{Rendezvous, Variant, Workload};
use bootsim_sim::harness::sweep;
use bootsim_sim::{Case, Verdict};

#[test]
fn the_turmoil_engine_finds_the_reused_tag_and_passes_the_round_tag() {
    let case = Case::parse("engine=turmoil ranks=3 adversary=rss").unwrap();
    let buggy = sweep(&Rendezvous, &Variant::ReusedTag, &Workload::TWO_ROUNDS, &case, 0..30, 1).unwrap();
    let first = buggy.first_failure().expect("the reused tag corrupts on turmoil within 30 seeds");
    assert_eq!(first.verdict, Verdict::Corruption, "{first:?}");
    let fixed = sweep(&Rendezvous, &Variant::RoundTag, &Workload::TWO_ROUNDS, &case, 0..30, 1).unwrap();
    assert!(fixed.first_failure().is_none(), "the round tag failed on turmoil: {:?}", fixed.first_failure());
}

#[test]
fn real_loopback_sockets_run_both_variants_through_the_protocol_blind_driver() {
    for variant in Variant::ALL {
        for n in [1, 2, 4] {
            let run = run_local(&Rendezvous, &variant, &Workload::TWO_ROUNDS, 7, n, Duration::from_secs(20))
                .expect("a loopback address for the run");
            assert_eq!(run.record.ranks.len(), n as usize);
            // The real kernel on loopback rarely reorders; the round tag must always pass, and
            // whatever the reused tag gets is judged, never a hang or an error.
            let (verdict, findings) = &run.report;
            match variant {
                Variant::RoundTag => assert_eq!(*verdict, Verdict::Pass, "{variant:?} n={n}: {findings:?}"),
                Variant::ReusedTag => {
                    assert!(matches!(verdict, Verdict::Pass | Verdict::Corruption), "{variant:?} n={n}: {findings:?}")
                }
            }
        }
    }
}
