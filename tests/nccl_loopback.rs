//! NCCL's model over real loopback sockets with the model's root, run by the one async driver
//! (`bootsim_adapters::local_run`, tokio sockets): every variant runs `nccl-init` (CollNet on,
//! 2 ranks per node, 2 channels) and `nccl-p2p` to every peer to completion for n = 1, 2, 3, 5,
//! the real kernel choosing the chunking and the accept order, and NCCL's judge finds nothing.
//! Here rather than in `bootsim-nccl` because the driver's tokio sockets are the adapters' and
//! NCCL's binding and judge are sim's. (Against NCCL's real root: `nccl_real_root.rs`.)

mod common;

use std::time::Duration;

use bootsim_adapters::local_run::run_local;
use bootsim_core::RootEnd;
use bootsim_nccl::{InitParams, Workload};
use bootsim_sim::protocol::Nccl;
use bootsim_sim::Verdict;

use common::nccl_ranks::every_step_done;

#[test]
fn every_variant_runs_its_workloads_over_loopback_with_the_model_root() {
    for v in bootsim_nccl::ALL {
        for n in [1, 2, 3, 5] {
            let init = Workload::Init(InitParams { ranks_per_node: 2, channels: 2, collnet: true });
            let p2p = Workload::P2p { channels: 2, distances: None };
            for (name, workload) in [("nccl-init", init), ("nccl-p2p", p2p)] {
                let what = format!("{v} {name} n={n}");
                let run = run_local(&Nccl, &v, &workload, 7, n, Duration::from_secs(30)).expect("a local run");
                let programs = workload.programs(v, n);
                let steps = every_step_done(&run.ranks, &programs).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(steps > n as usize, "{what}: init and more on every rank");
                let (verdict, findings) = &run.report;
                assert_eq!(*verdict, Verdict::Pass, "{what}: {findings:?}");
                assert_eq!(run.record.root, RootEnd::Done, "{what}: the model's root served everyone");
            }
        }
    }
}
