//! sim's explorer world (`explore::World<P>`, generic over the seam) runs NCCL: random walks
//! through its accept choices, each end judged by NCCL's judge. 2.19's walks reach #1176's
//! "Message truncated ... instead of 4"; 2.21's never fail. (The search over it:
//! `nccl_explore.rs`.)

use bootsim_core::seam::{Judge as _, Protocol as _};
use bootsim_sim::explore::{Faults, World};
use bootsim_sim::protocol::Nccl;
use bootsim_sim::{Case, Verdict};

/// The verdict and finding texts of `walks` walks of `case`, the k-th taking choice
/// `(k * 7 + depth * 3) % choices` at each depth (deterministic, varied).
fn walks(case: &str, walks: u64) -> Vec<(Verdict, Vec<String>)> {
    let case = Case::parse(case).unwrap();
    let nc = case.nccl().expect("an NCCL case");
    let setup = bootsim_sim::protocol::nccl::setup(nc, &case);
    (0..walks)
        .map(|k| {
            let mut w = World::of(Nccl, nc.variant, nc.workload.clone(), &case, Faults::default());
            let mut depth = 0u64;
            while !w.choices().is_empty() {
                let pick = ((k * 7 + depth * 3) % w.choices().len() as u64) as usize;
                w = w.step(w.choices()[pick]);
                depth += 1;
            }
            let record = w.outcome().record;
            let mut judge = Nccl.judge(&setup);
            judge.feed(&record);
            let (verdict, findings) = judge.finish(&record);
            (verdict, findings.iter().map(ToString::to_string).collect())
        })
        .collect()
}

#[test]
fn sims_explorer_world_runs_nccl_and_its_walks_find_1176_on_2_19_only() {
    let bad = walks("variant=nccl-2.19 workload=nccl-p2p ranks=2", 40);
    assert!(
        bad.iter()
            .any(|(v, f)| *v == Verdict::Error
                && f.iter().any(|t| t.contains("transport.cc:204")
                    && t.contains("Message truncated : received 512 bytes instead of 4"))),
        "{bad:?}"
    );
    for v in ["nccl-2.21", "nccl-2.30"] {
        for (verdict, findings) in walks(&format!("variant={v} workload=nccl-p2p ranks=2"), 40) {
            assert_eq!(verdict, Verdict::Pass, "{v}: {findings:?}");
        }
    }
    let silent = walks("variant=nccl-2.8 workload=nccl-init gpus_per_node=2 ranks=2", 40);
    assert!(silent.iter().any(|(v, _)| *v == Verdict::Corruption), "{silent:?}");
}
