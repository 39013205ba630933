//! Loopback tests: 8 ranks and the root as tasks of one runtime, every preset variant.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use bootsim_core::{OpKind, RankConfig, RootConfig, UniqueId, Variant, PRESETS};
use bootsim_sim::workload::{build_op, expected_result, Workload};
use tokio::sync::oneshot;

use super::{real_limits, TokioNet};
use crate::driver::{run_rank, run_root_notify, DriverError, RankRun};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Runs `nranks` ranks and the root on loopback; returns each rank's result.
async fn world(
    nranks: u32,
    variant: Variant,
    workload: &Workload,
    op_timeout: Duration,
    start: u32,
) -> Vec<Result<RankRun, DriverError>> {
    let limits = real_limits(op_timeout);
    let net = TokioNet::new(LOOPBACK);
    let placeholder = UniqueId { version: variant.uid_version(), root: (LOOPBACK, 0).into(), magic: 0xb007_5111 };
    let (tx, rx) = oneshot::channel();
    let root =
        tokio::spawn(run_root_notify(net.clone(), RootConfig { uid: placeholder, nranks: None, limits }, Some(tx)));
    let uid = UniqueId { root: rx.await.expect("root listens"), ..placeholder };
    let specs = workload.ops(0);
    let ranks: Vec<_> = (start..nranks)
        .map(|r| {
            let ops = specs.iter().enumerate().map(|(i, s)| build_op(*s, 0, i as u32, r, nranks)).collect();
            let cfg = RankConfig { rank: r, nranks, uid, variant, limits };
            tokio::spawn(run_rank(net.clone(), cfg, ops))
        })
        .collect();
    let mut out = Vec::new();
    for r in ranks {
        out.push(r.await.expect("rank task"));
    }
    root.abort();
    out
}

async fn check(workload: Workload) {
    let n = 8;
    let specs = workload.ops(0);
    for name in PRESETS {
        let variant = Variant::preset(name).unwrap();
        let results = world(n, variant, &workload, Duration::from_secs(10), 0).await;
        for (r, res) in results.into_iter().enumerate() {
            let run = res.unwrap_or_else(|e| panic!("{name} {}: rank {r}: {e}", workload.name()));
            assert_eq!(run.completions.len(), specs.len() + 1, "{name}: rank {r}");
            assert_eq!(run.completions[0].kind, OpKind::Init);
            for (i, (spec, c)) in specs.iter().zip(&run.completions[1..]).enumerate() {
                let got = c.result.as_ref().unwrap();
                if let Some(want) = expected_result(*spec, 0, i as u32, r as u32, n) {
                    assert_eq!(got, &want, "{name}: rank {r} op {i} ({spec:?}) delivered wrong bytes");
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deepep_on_loopback_under_every_preset() {
    check(Workload::Deepep { qps: 24 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nvshmem_init_on_loopback_under_every_preset() {
    check(Workload::NvshmemInit { qps: 2 }).await;
}

#[tokio::test]
async fn a_missing_rank_times_out_naming_rank_and_step() {
    // Rank 0 never starts: the others wait for the root's successor message and time out.
    let workload = Workload::Deepep { qps: 1 };
    let results = world(3, Variant::PR97, &workload, Duration::from_millis(300), 1).await;
    for (i, res) in results.into_iter().enumerate() {
        let msg = res.expect_err("must time out").to_string();
        assert!(msg.starts_with(&format!("rank {}: init: no progress for 300ms", i + 1)), "{msg}");
        assert!(msg.contains("waiting for the root"), "{msg}");
    }
}
