//! The report's schedule at 2 ranks, scripted: rank 1 accepts rank 0's barrier connection before
//! rank 0's alltoall connection (alltoall of 576 bytes per peer, then a barrier).

use std::time::Duration;

use bootsim_nvshmem::memnet::{Hold, MemNet, NvshmemNet};
use bootsim_nvshmem::OpKind;
use bootsim_nvshmem::{BootstrapError, Event, Op, Variant};

const CHUNK: usize = 576;
const BARRIER_WORD: [u8; 4] = [0xb4, 0x44, 0x1e, 0x00];

fn handles(from: u32, to: u32) -> Vec<u8> {
    (0..CHUNK).map(|i| (i as u8).wrapping_add(1).wrapping_mul(from as u8 * 2 + to as u8 + 1) | 1).collect()
}

/// Runs allgather(28), alltoall(576/peer), barrier on 2 ranks with rank 0's alltoall connection
/// to rank 1 held until its barrier connection is queued (or 50 ms pass).
fn run(variant: Variant) -> MemNet {
    let mut net = MemNet::new(2, variant);
    // Rank 0's connections to rank 1's listener: #0 ring, #1 alltoall, #2 barrier.
    net.hold(Hold { from: 0, to: 1, nth: 1, fallback: Duration::from_millis(50) });
    for r in 0..2 {
        let chunks: Vec<u8> = (0..2).flat_map(|p| handles(r, p)).collect();
        let word = if r == 0 { BARRIER_WORD } else { [0; 4] };
        net.queue_ops(r, [Op::Allgather { mine: vec![r as u8; 28] }, Op::Alltoall { chunks }, Op::Barrier { word }]);
    }
    net.run(Duration::from_secs(10));
    net
}

fn expected_alltoall(r: u32) -> Vec<u8> {
    (0..2).flat_map(|p| handles(p, r)).collect()
}

#[test]
fn nvshmem_3_4_corrupts_silently_then_truncates() {
    let net = run(Variant::NVSHMEM_3_4);
    let r1 = net.results(1);
    assert_eq!(r1[0].result, Ok([[0u8; 28], [1u8; 28]].concat()));
    // The alltoall "succeeds": chunk 0 holds the barrier word, then the calloc'd zeros.
    let got = r1[1].result.clone().expect("3.4 reports success");
    assert_eq!(r1[1].kind, OpKind::Alltoall);
    assert_eq!(&got[..4], &BARRIER_WORD);
    assert!(got[4..CHUNK].iter().all(|&b| b == 0), "bytes 4..576 stay zero");
    assert_eq!(&got[CHUNK..], &handles(1, 1)[..]);
    // The barrier then finds the 576-byte alltoall message.
    assert_eq!(
        r1[2].result,
        Err(BootstrapError::Truncated { rank: 1, peer: 0, op: OpKind::Barrier, tag: 1, expected: 4, got: 576 })
    );
    // Rank 0 saw nothing wrong.
    assert_eq!(net.results(0)[1].result, Ok(expected_alltoall(0)));
    assert!(net
        .events
        .iter()
        .any(|(_, _, e)| matches!(e, Event::ShortMessageAccepted { from: 0, tag: 1, got: 4, expected: 576, .. })));
}

#[test]
fn nvshmem_3_7_fails_with_size_mismatch() {
    let net = run(Variant::NVSHMEM_3_7);
    assert_eq!(
        net.results(1)[1].result,
        Err(BootstrapError::SizeMismatch { rank: 1, peer: 0, op: OpKind::Alltoall, tag: 1, expected: 576, got: 4 })
    );
    let msg = net.results(1)[1].result.clone().unwrap_err().to_string();
    assert_eq!(
        msg,
        "rank 1: alltoall recv from rank 0 tag 0x1: message size mismatch: received 4 bytes instead of 576"
    );
}

#[test]
fn robust_variants_deliver_the_right_bytes() {
    for variant in
        [Variant::NVSHMEM_3_8, Variant::SEQ, Variant::PERSISTENT, Variant::DRAIN, Variant::PR97, Variant::DISJOINT]
    {
        let net = run(variant);
        for r in 0..2 {
            let res = net.results(r);
            assert_eq!(res.len(), 3, "{variant}: rank {r}");
            assert_eq!(res[1].result, Ok(expected_alltoall(r)), "{variant}: rank {r} alltoall");
            assert!(res[2].result.is_ok(), "{variant}: rank {r} barrier {:?}", res[2].result);
        }
    }
}

#[test]
fn nvshmem_3_8_gives_every_call_its_own_tag_and_runs_out_at_2_31() {
    // Tags 1, 2 for the alltoall and the barrier: the held alltoall connection cannot be taken
    // for the barrier's (the 3.8.0 plugin puts 1, 2, 3, 4 on the wire for alltoall, barrier,
    // alltoall, barrier).
    let net = run(Variant::NVSHMEM_3_8);
    let tags: Vec<i32> = net
        .events
        .iter()
        .filter_map(|(_, _, e)| if let Event::MessageSent { to: 1, tag, .. } = e { Some(*tag) } else { None })
        .collect();
    assert_eq!(tags, vec![1, 2]);
    // Started two below the limit: alltoall 0x7ffffffe, barrier 0x7fffffff, then the next
    // alltoall fails with the plugin's words and the counter stays where it was.
    let mut net = MemNet::new(2, Variant::NVSHMEM_3_8.with_first_tag(0x7fff_fffe));
    for r in 0..2 {
        let chunks: Vec<u8> = (0..2).flat_map(|p| handles(r, p)).collect();
        let a = Op::Alltoall { chunks };
        net.queue_ops(r, [a.clone(), Op::Barrier { word: [0; 4] }, a]);
    }
    net.run(Duration::from_secs(10));
    let r0 = net.results(0);
    assert_eq!(r0[0].result, Ok(expected_alltoall(0)));
    assert!(r0[1].result.is_ok());
    let err = r0[2].result.clone().unwrap_err();
    assert_eq!(err, BootstrapError::TagSpaceExhausted { rank: 0, op: OpKind::Alltoall, next: 0x8000_0000 });
    assert!(err.to_string().contains("UID bootstrap message tag space exhausted"), "{err}");
}

#[test]
fn the_drain_waits_for_the_held_connection() {
    let net = run(Variant::DRAIN);
    let waited: Vec<Duration> = net
        .events
        .iter()
        .filter_map(|(_, _, e)| if let Event::DrainCompleted { waited, .. } = e { Some(*waited) } else { None })
        .collect();
    assert!(waited.contains(&Duration::from_millis(50)), "{waited:?}");
    // With a bound below the hold, the drain gives up and the bug comes back (fail-open).
    let net = run(Variant::DRAIN.with_drain_ms(10));
    assert!(net.events.iter().any(|(_, _, e)| matches!(e, Event::DrainGaveUp { to: 1, tag: 1, .. })));
    assert!(matches!(net.results(1)[1].result, Err(BootstrapError::SizeMismatch { expected: 576, got: 4, .. })));
}

#[test]
fn seq_and_persistent_reject_a_program_mismatch() {
    // Rank 0 sends 8 bytes with tag 5; rank 1 expects 16 bytes with tag 5.
    for variant in [Variant::SEQ, Variant::PERSISTENT] {
        let mut net = MemNet::new(2, variant);
        net.queue_ops(0, [Op::Send { peer: 1, tag: 5, data: vec![1; 8] }]);
        net.queue_ops(1, [Op::Recv { peer: 0, tag: 5, size: 16 }]);
        net.run(Duration::from_secs(1));
        assert_eq!(
            net.results(1)[0].result,
            Err(BootstrapError::OutOfStep {
                rank: 1,
                peer: 0,
                op: OpKind::Recv,
                seq: 0,
                expected_tag: 5,
                got_tag: 5,
                expected_size: 16,
                got_size: 8
            }),
            "{variant}"
        );
    }
}
