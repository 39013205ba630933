//! The NCCL model over real loopback sockets with the model's root: every variant runs
//! `nccl-init` (CollNet on, 2 ranks per node) and `nccl-p2p` to completion for n = 1, 2, 3, 5.
//! (Against NCCL's real root: real_root.rs.)

mod common;

use std::time::Duration;

use common::loopback::Loopback;

#[test]
fn every_variant_runs_its_workloads_over_loopback_with_the_model_root() {
    for v in bootsim_nccl::ALL {
        for n in [1, 2, 3, 5] {
            let init = bootsim_nccl::InitParams { ranks_per_node: 2, channels: 2, collnet: true };
            for (name, progs) in [
                ("nccl-init", bootsim_nccl::nccl_init(v, n, init)),
                ("nccl-p2p", bootsim_nccl::nccl_p2p(v, n, &bootsim_nccl::P2pParams::every_peer(n))),
            ] {
                let steps: usize = progs.iter().map(Vec::len).sum();
                let mut lb = Loopback::new(v, progs, None);
                lb.run(Duration::from_secs(20));
                let what = format!("{v} {name} n={n}");
                lb.assert_all_done(&what);
                assert_eq!(lb.completed(), steps, "{what}: every step of every rank completed");
            }
        }
    }
}
