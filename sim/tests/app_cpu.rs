//! The fast engine charges each rank's socket calls and own work to its core (`cpu`
//! profile), where softirq preempts it: a rank sharing its core with a flooded RX queue
//! finishes its bootstrap later than one on an idle core, and both later than one whose CPU
//! time is not modelled.

use std::time::Duration;

use bootsim_sim::sweep::sweep;
use bootsim_sim::Case;

/// Total bootstrap time over seeds 0..10 of the report's pattern on 8 ranks under `words`.
fn total(words: &str) -> Duration {
    let case = format!(
        "engine=fast variant=seq workload=custom ops=barrier,alltoall:576 ranks=8 adversary=cpu \
         rx_queues=1 cpus=2 flood_flows=1 flood_rate=300000 {words}"
    );
    let c = Case::parse(&case).unwrap();
    let seeds: Vec<u64> = (0..10).collect();
    sweep(&c, &seeds, 1, &|_, _| {}).unwrap().results.iter().map(|r| r.bootstrap_time).sum()
}

#[test]
fn a_rank_behind_softirq_on_its_core_boots_later() {
    // One RX queue on CPU 0 carries the whole flood (45 % of that CPU) and every handshake.
    let behind = total("app_cpu=0");
    let idle = total("app_cpu=1");
    let free = total("syscall_cost=0 app_work=0");
    assert!(behind > idle, "app on the softirq core {behind:?}, on the idle core {idle:?}");
    assert!(idle > free, "app on the idle core {idle:?}, CPU time not modelled {free:?}");
}
