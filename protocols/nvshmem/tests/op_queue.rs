//! The rank owns its queue of operations: it starts each when the one before completes, gives
//! an operation that cannot start its own number and kind, and starts nothing after a failure.

use std::time::Duration;

use bootsim_core::OpId;
use bootsim_nvshmem::memnet::{MemNet, NvshmemNet};
use bootsim_nvshmem::OpKind;
use bootsim_nvshmem::{BootstrapError, Chunked, Chunks, Completion, Op, Variant};

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

#[test]
fn a_chunked_operation_runs_as_the_same_operation_pushed_made_and_makes_each_chunk_when_sent() {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    fn chunk(from: u32, to: u32) -> Vec<u8> {
        vec![from as u8, to as u8, 7]
    }
    // Rank 2 expects a wrong chunk from rank 0: held as a difference, given back as received.
    fn expected(r: u32, p: u32) -> Vec<u8> {
        if (r, p) == (2, 0) {
            vec![9; 3]
        } else {
            chunk(p, r)
        }
    }
    fn slice(p: u32) -> Vec<u8> {
        vec![p as u8 + 1; 5]
    }
    let run = |chunked: bool| {
        let made = Arc::new(AtomicU32::new(0));
        let mut net = MemNet::new(3, Variant::preset("nvshmem-3.7").unwrap());
        for r in 0..3u32 {
            net.queue_ops(r, [Op::Barrier { word: [1; 4] }]);
            if chunked {
                let counter = made.clone();
                let input = Chunks::from_fn(move |p, out| {
                    counter.fetch_add(1, Ordering::Relaxed);
                    out.put(&chunk(r, p))
                });
                let expected = Chunks::from_fn(move |p, out| out.put(&expected(r, p)));
                net.queue_chunked(r, Chunked::Alltoall { len: 3, input, expected });
                net.queue_chunked(
                    r,
                    Chunked::Allgather { len: 5, expected: Chunks::from_fn(|p, out| out.put(&slice(p))) },
                );
                // Queued behind init and the barrier: nothing made yet.
                assert_eq!(made.load(Ordering::Relaxed), 0);
            } else {
                let chunks = (0..3).flat_map(|p| chunk(r, p)).collect();
                net.queue_ops(r, [Op::Alltoall { chunks }, Op::Allgather { mine: slice(r) }]);
            }
        }
        net.run(Duration::from_secs(60));
        let results: Vec<Vec<Completion>> = (0..3).map(|r| net.results(r).into_iter().cloned().collect()).collect();
        (results, made.load(Ordering::Relaxed))
    };
    let (plain, _) = run(false);
    let (chunked, made) = run(true);
    assert_eq!(made, 9, "each rank made its own chunk and each one it sent, once");
    assert_eq!(plain, chunked);
    assert!(chunked.iter().all(|res| res.len() == 3 && res.iter().all(|c| c.result.is_ok())), "{chunked:?}");
}

#[test]
fn a_world_queued_at_once_shares_its_allgathers_slices_and_completes_with_the_workloads_results() {
    use bootsim_core::memnet::listener_addr;
    use bootsim_core::seam::Nodes;
    use bootsim_core::Instant;
    use bootsim_nvshmem::memnet::Node;
    use bootsim_nvshmem::workload::{expected_result, queue_ops, OpSpec};
    use bootsim_nvshmem::{Limits, Listener, NvshmemNode, Rank, RankConfig, Root, RootConfig, UniqueId};

    let (n, seed, variant) = (5, 11, Variant::preset("nvshmem-3.7").unwrap());
    let specs =
        [OpSpec::Allgather(28), OpSpec::Alltoall(48), OpSpec::Allgather(3), OpSpec::Barrier, OpSpec::Allgather(9)];
    let uid =
        UniqueId { version: variant.uid_version(), root: listener_addr(Node::Root, Listener::Rendezvous), magic: 7 };
    let (limits, now) = (Limits::default(), Instant::ZERO);
    let mut ranks: Vec<NvshmemNode> = (0..n)
        .map(|rank| NvshmemNode::Rank(Rank::new(RankConfig { rank, nranks: n, uid, variant, limits }, now)))
        .collect();
    queue_ops(ranks.iter_mut().map(|node| node.rank_mut().expect("a rank")), now, &specs, seed, n);
    let root = NvshmemNode::Root(Root::new(RootConfig { uid, nranks: None, limits }, now));
    let mut net = MemNet::from_nodes(Nodes { root, ranks });
    net.run(Duration::from_secs(60));
    for r in 0..n {
        let results = net.results(r);
        let ops: Vec<&Completion> = results.iter().copied().filter(|c| c.kind != OpKind::Init).collect();
        assert_eq!(ops.len(), specs.len(), "rank {r}: {results:?}");
        for (i, (spec, c)) in specs.iter().zip(ops).enumerate() {
            let got = c.result.as_ref().unwrap_or_else(|e| panic!("rank {r} op {i}: {e}"));
            if let Some(want) = expected_result(*spec, seed, i as u32, r, n) {
                assert_eq!(got, &want, "rank {r} op {i} ({spec:?})");
            }
        }
    }
}
