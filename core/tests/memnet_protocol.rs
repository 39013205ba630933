//! The in-memory world runs any protocol on the seam, not only NVSHMEM's: the toy check-in
//! protocol (`bootsim_core::seam::checkin`) built through `Protocol` and run by `MemNet::of`.

use std::time::Duration;

use bootsim_core::memnet::{MemNet, Node as Who};
use bootsim_core::seam::checkin::CheckIn;
use bootsim_core::seam::{Judge, Node, Protocol, Setup};
use bootsim_core::RunRecord;

#[test]
fn memnet_runs_a_protocol_that_is_not_nvshmem() {
    let mut net = MemNet::of(&CheckIn, &(), &(), 1, 4);
    net.run(Duration::from_secs(1));
    let root_end: Vec<_> = net.completions.iter().filter(|(_, who, _)| *who == Who::Root).collect();
    assert_eq!(root_end.len(), 1, "{:?}", net.completions);
    assert_eq!(root_end[0].2.result, Ok(vec![0, 1, 2, 3]));
    let said: Vec<u8> = net.events.iter().map(|(_, _, e)| e.rank).collect();
    assert_eq!(said, vec![0, 1, 2, 3], "each rank's hello, in dial order");
    assert!((0..4).all(|r| net.node(r).is_finished() && net.results(r).is_empty()));
    let mut judge = CheckIn.judge(&Setup { variant: &(), workload: &(), seed: 1, n: 4, root_ip: [10, 0, 0, 1].into() });
    judge.completed(0, 0, &Ok(vec![]));
    assert_eq!(judge.finish(&RunRecord::new(4)), 1);
}
