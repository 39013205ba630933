//! scratch
use std::time::Instant;

use bootsim_nccl::world::explore;
use bootsim_nccl::{nccl_init, nccl_p2p, InitParams, P2pParams, Variant};

#[test]
fn scratch() {
    let only = std::env::var("ONLY").unwrap_or_default();
    for v in bootsim_nccl::ALL {
        for n in 2..=4u32 {
            let shapes = vec![
                (format!("init per=2 collnet=0"), nccl_init(v, n, InitParams { ranks_per_node: 2, channels: 1, collnet: false })),
                (format!("init per=2 collnet=1"), nccl_init(v, n, InitParams { ranks_per_node: 2, channels: 1, collnet: true })),
                (format!("p2p every"), nccl_p2p(v, n, &P2pParams { channels: 1, ..P2pParams::every_peer(n) })),
            ];
            for (name, progs) in shapes {
                let tag = format!("{v} n={n} {name}");
                if !tag.contains(&only) { continue; }
                let t = Instant::now();
                let ex = explore(v, progs, 200_000);
                println!("{tag}: states {} terminals {} depth {} complete {} {:?} cx {:?}", ex.states, ex.terminals, ex.max_depth, ex.complete, t.elapsed(), ex.counterexample.as_ref().map(|c| (c.schedule.len(), c.violations[0].to_string())));
            }
        }
    }
}
