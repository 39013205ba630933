//! The RX-queue stalls a traced run actually suffered, as an explicit `stalls=` list.

use crate::engine::outcome::Outcome;
use crate::kernel::{EventKind, ScriptedStall, StallAt};

/// Every RX stall of a traced run as a forced stall of that packet (`HOST:QUEUE:pN:DUR`), in the
/// order the RX queues admitted their packets (sending order; arrival order under RPS, `load`
/// and `cpu`). Replaying them with random stalls off delays exactly the packets the
/// random ones delayed; anchored to packets rather than times, each keeps hitting its packet
/// when others are removed.
pub fn stalls_of(out: &Outcome) -> Vec<ScriptedStall> {
    out.rx_stalls.iter().filter_map(forced).collect()
}

fn forced(e: &EventKind) -> Option<ScriptedStall> {
    let EventKind::RxStall { host, queue, from, until, nth, .. } = *e else { return None };
    (until > from).then(|| ScriptedStall {
        host: host.0,
        queue,
        at: StallAt::Packet(nth),
        dur: (until - from).as_nanos() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{run_case, Case};

    #[test]
    fn a_traced_run_gives_its_stalls_in_order() {
        let case = Case::parse("engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3").unwrap();
        let report = run_case(&case, true);
        let got = stalls_of(&report.outcome);
        assert_eq!(got.len() as u64, report.kernel.stalled, "one forced stall per stalled packet");
        assert_eq!(got[0], ScriptedStall { host: 0, queue: 4, at: StallAt::Packet(0), dur: 48_571 });
    }

    /// A packet's stall is counted when it is sent (`Net::transmit`): a packet sent by the calls
    /// that end a run, arriving after it, is counted, and both engines trace it too.
    #[test]
    fn every_stall_counted_is_traced_on_both_engines() {
        for (engine, seeds) in [("fast", 0..40), ("turmoil", 0..12)] {
            let mut after_the_end = 0;
            for seed in seeds {
                let line =
                    format!("engine={engine} variant=nvshmem-3.7 workload=deepep ranks=2 adversary=rss seed={seed}");
                let report = run_case(&Case::parse(&line).unwrap(), true);
                assert_eq!(stalls_of(&report.outcome).len() as u64, report.kernel.stalled, "{line}");
                let end = report.outcome.end;
                let after = |e: &&EventKind| matches!(e, EventKind::RxStall { from, .. } if *from > end);
                after_the_end += report.outcome.rx_stalls.iter().filter(after).count();
            }
            assert!(after_the_end > 0, "{engine}: the seeds must stall a packet after the run's end");
        }
    }
}
