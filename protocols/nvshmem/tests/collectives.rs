//! Every collective gives the right bytes for 1..16 ranks under every variant, with in-order
//! delivery (the in-memory world's FIFO accept queues).

use std::time::Duration;

use bootsim_nvshmem::memnet::{MemNet, NvshmemNet};
use bootsim_nvshmem::OpKind;
use bootsim_nvshmem::{Op, Variant, PRESETS};

fn chunk(from: u32, to: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (from as usize * 31 + to as usize * 7 + i) as u8).collect()
}

fn ops(r: u32, n: u32) -> Vec<Op> {
    let mine: Vec<u8> = (0..28).map(|i| (r as u8).wrapping_mul(3).wrapping_add(i)).collect();
    let chunks: Vec<u8> = (0..n).flat_map(|p| chunk(r, p, 48)).collect();
    vec![
        Op::Allgather { mine },
        Op::Alltoall { chunks: chunks.clone() },
        Op::Barrier { word: [r as u8, 0xba, 0xbe, 0] },
        Op::Alltoall { chunks },
        Op::Barrier { word: [0; 4] },
        Op::Allgather { mine: vec![r as u8; 8] },
    ]
}

fn check(n: u32, variant: Variant) {
    let mut net = MemNet::new(n, variant);
    for r in 0..n {
        net.queue_ops(r, ops(r, n));
    }
    net.run(Duration::from_secs(60));
    for r in 0..n {
        let results = net.results(r);
        assert_eq!(results.len(), 6, "{variant} n={n} rank {r}: {results:?}, waiting: {:?}", net.rank(r).waiting_for());
        let ok: Vec<&Vec<u8>> =
            results.iter().map(|c| c.result.as_ref().unwrap_or_else(|e| panic!("{variant} n={n}: {e}"))).collect();
        let gathered: Vec<u8> =
            (0..n).flat_map(|p| (0..28).map(move |i| (p as u8).wrapping_mul(3).wrapping_add(i))).collect();
        assert_eq!(ok[0], &gathered);
        let received: Vec<u8> = (0..n).flat_map(|p| chunk(p, r, 48)).collect();
        assert_eq!(ok[1], &received, "{variant} n={n} rank {r} alltoall");
        assert_eq!(ok[3], &received);
        assert_eq!(results[2].kind, OpKind::Barrier);
        assert_eq!(ok[5], &(0..n).flat_map(|p| [p as u8; 8]).collect::<Vec<u8>>());
        assert!(net.rank(r).unexpected().is_empty(), "{variant} n={n} rank {r} left unexpected connections");
    }
}

#[test]
fn every_variant_every_size() {
    for name in PRESETS {
        let variant = Variant::preset(name).unwrap();
        for n in [1, 2, 3, 4, 5, 8, 16] {
            check(n, variant);
        }
    }
}

#[test]
fn stagger_above_128_ranks_still_completes() {
    let n = 130;
    let mut net = MemNet::new(n, Variant::NVSHMEM_3_7);
    for r in 0..n {
        net.queue_ops(r, [Op::Barrier { word: [0; 4] }]);
    }
    net.run(Duration::from_secs(60));
    // Rank 129 staggers 129 ms before calling the root.
    assert!(net.now().as_nanos() >= 129_000_000);
    for r in 0..n {
        assert!(net.results(r)[0].result.is_ok());
    }
}
