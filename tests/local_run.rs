//! The generic local world (`bootsim_adapters::local_run`) over NVSHMEM's protocol binding; here
//! rather than in the adapters crate because the binding and its judge live in `bootsim-sim`.

use std::time::Duration;

use bootsim_core::seam::{Nodes, Protocol, Setup};
use bootsim_nvshmem::workload::Workload;
use bootsim_nvshmem::{Completion, Event, Variant};
use bootsim_sim::oracle;
use bootsim_sim::protocol::Nvshmem;
use bootsim_sim::{Finding, Verdict};

use bootsim_adapters::local_run::run_local;

#[test]
fn nvshmems_nodes_pass_on_loopback_and_every_rank_is_judged() {
    let variant = Variant::preset("nvshmem-3.7").unwrap();
    let workload = Workload::Deepep { qps: 24 };
    let run = run_local(&Nvshmem, &variant, &workload, 3, 3, Duration::from_secs(30)).unwrap();
    let (verdict, findings) = &run.report;
    assert_eq!(*verdict, Verdict::Pass, "{findings:?}");
    assert_eq!(run.record.ranks.len(), 3);
    let ops = workload.ops(3).len();
    for (r, rank) in run.record.ranks.iter().enumerate() {
        assert_eq!(rank.rank, r as u32);
        assert_eq!((rank.ops.len(), rank.failed()), (ops, false), "rank {r}: {rank:?}");
    }
    assert!(run.ranks.iter().all(|r| matches!(r, Some(Ok(_)))));
    assert!(run.ip.is_loopback() && run.ip != std::net::IpAddr::from([127, 0, 0, 1]), "{}", run.ip);
}

/// NVSHMEM whose last rank belongs to another session (another seed's magic): the root drops
/// it as a stranger, and the others wait for it.
struct LastRankLost;

impl Protocol for LastRankLost {
    type Node = <Nvshmem as Protocol>::Node;
    type Variant = Variant;
    type Workload = Workload;
    type Judge = oracle::Judge;

    fn name(&self) -> &'static str {
        "nvshmem-last-rank-lost"
    }

    fn nodes(&self, setup: &Setup<'_, Variant, Workload>) -> Nodes<Self::Node> {
        let mut nodes = Nvshmem.nodes(setup);
        let other = Nvshmem.nodes(&Setup { seed: setup.seed + 1, ..*setup });
        *nodes.ranks.last_mut().unwrap() = other.ranks.into_iter().last().unwrap();
        nodes
    }

    fn judge(&self, setup: &Setup<'_, Variant, Workload>) -> oracle::Judge {
        Nvshmem.judge(setup)
    }

    fn event_words(&self, event: &Event, kconn: Option<u64>) -> String {
        Nvshmem.event_words(event, kconn)
    }

    fn completion_words(&self, completion: &Completion) -> String {
        Nvshmem.completion_words(completion)
    }
}

#[test]
fn ranks_still_waiting_at_the_deadline_are_hangs_that_say_what_they_wait_for() {
    let variant = Variant::preset("nvshmem-3.7").unwrap();
    let workload = Workload::Deepep { qps: 24 };
    let run = run_local(&LastRankLost, &variant, &workload, 0, 3, Duration::from_secs(2)).unwrap();
    let (verdict, findings) = &run.report;
    // Rank 2's refused check-in is the error; ranks 0 and 1 hang, saying what they wait for.
    assert_eq!(*verdict, Verdict::Error, "{findings:?}");
    let hangs: Vec<String> =
        findings.iter().filter(|f| matches!(f, Finding::Hang { .. })).map(ToString::to_string).collect();
    for r in 0..2 {
        let waits = format!("hang: rank {r} waits for init: waiting for the root to send the ring successor");
        assert!(hangs.iter().any(|h| h.starts_with(&waits)), "{hangs:?}");
    }
    assert!(findings.iter().any(|f| f.rank() == Some(2) && f.to_string().contains("refused the check-in")));
    assert!(run.ranks[..2].iter().all(Option::is_none), "ranks 0 and 1 were stopped at the deadline");
    assert!(run.elapsed < Duration::from_secs(20), "{:?}", run.elapsed);
}
