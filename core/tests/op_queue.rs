//! The rank owns its queue of operations: it starts each when the one before completes, gives
//! an operation that cannot start its own number and kind, and starts nothing after a failure.

use std::time::Duration;

use bootsim_core::memnet::MemNet;
use bootsim_core::{BootstrapError, Op, OpId, OpKind, Variant};

#[test]
fn an_operation_that_cannot_start_fails_under_its_own_number_and_the_rest_never_start() {
    let mut net = MemNet::new(3, Variant::preset("nvshmem-3.4").unwrap());
    for r in 0..3 {
        // 5 bytes do not split into 3 chunks.
        let ops = [Op::Barrier { word: [1; 4] }, Op::Alltoall { chunks: vec![0; 5] }, Op::Barrier { word: [2; 4] }];
        net.queue_ops(r, ops);
    }
    net.run(Duration::from_secs(60));
    for r in 0..3 {
        let res = net.results(r);
        assert_eq!(res.len(), 2, "rank {r}: {res:?}");
        assert_eq!((res[0].op, res[0].kind), (OpId(1), OpKind::Barrier));
        assert!(res[0].result.is_ok());
        assert_eq!((res[1].op, res[1].kind), (OpId(2), OpKind::Alltoall));
        assert!(matches!(&res[1].result, Err(BootstrapError::InvalidOp { op: OpKind::Alltoall, .. })), "{res:?}");
        assert!(net.rank(r).is_finished());
        assert_eq!(net.rank(r).queued(), 0, "the barrier after the failure was dropped");
    }
}

#[test]
fn a_long_queue_of_operations_that_complete_at_once_does_not_recurse() {
    // One rank: every barrier completes as soon as it starts, inside the same call.
    let mut net = MemNet::new(1, Variant::preset("nvshmem-3.7").unwrap());
    net.queue_ops(0, (0..200_000).map(|i| Op::Barrier { word: (i as u32).to_le_bytes() }));
    net.run(Duration::from_secs(60));
    let res = net.results(0);
    assert_eq!(res.len(), 200_000);
    assert!(res.iter().all(|c| c.result.is_ok()));
    assert_eq!(res.last().unwrap().op, OpId(200_000));
}
