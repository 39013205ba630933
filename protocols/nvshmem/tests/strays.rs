//! Connections that are not part of the session are dropped without disturbing the bootstrap.

use std::time::Duration;

use bootsim_core::codec::{encode_frame, Preamble, WireError};
use bootsim_nvshmem::memnet::{MemNet, Node, NvshmemNet};
use bootsim_nvshmem::{Event, Limits, Op, Variant, PRESETS};

/// Strangers: they do not know the session's magic.
fn strangers() -> Vec<(Vec<u8>, bool)> {
    vec![
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), true),
        (Preamble::bootstrap(0xbad).encode().to_vec(), true),
        (vec![0x01, 0x02], true),
        (vec![0xff; 4096], true),
        // Half-open, in front of the ring predecessor's connection: init must drop it and
        // accept again rather than dial its successor a second time.
        (vec![0x5e], false),
    ]
}

/// Malformed connections that carry the session's magic (a buggy peer). The ring connection
/// has no header beyond the preamble, so, as in NVSHMEM, these are injected after init.
fn malformed() -> Vec<(Vec<u8>, bool)> {
    let magic = 0x5eed_0000_b007_51a1u64; // memnet's session magic
    let mut oversize = Preamble::bootstrap(magic).encode().to_vec();
    oversize.extend_from_slice(&i32::MAX.to_le_bytes());
    let mut negative = Preamble::bootstrap(magic).encode().to_vec();
    negative.extend_from_slice(&(-1i32).to_le_bytes());
    let mut wrong_type = Preamble { magic, kind: 7 }.encode().to_vec();
    encode_frame(&mut wrong_type, &0i32.to_le_bytes());
    vec![
        (oversize, true),
        (negative, true),
        (wrong_type, true),
        (Preamble::bootstrap(magic).encode()[..6].to_vec(), false), // stalls in the middle of its header
    ]
}

#[test]
fn strays_are_dropped_and_the_bootstrap_completes() {
    let limits = Limits { header_timeout: Some(Duration::from_millis(500)), ..Limits::default() };
    for name in PRESETS {
        let variant = Variant::preset(name).unwrap();
        let mut net = MemNet::with_limits(3, variant, limits);
        for to in 0..3 {
            for (bytes, close) in strangers() {
                net.inject(to, bytes, close);
            }
        }
        net.run(Duration::from_secs(60));
        for to in 0..3 {
            assert!(net.rank(to).is_ready(), "{name}: rank {to} init despite strangers: {:?}", net.completions);
            for (bytes, close) in malformed() {
                net.inject(to, bytes, close);
            }
        }
        for r in 0..3 {
            let chunks: Vec<u8> = (0..3).flat_map(|p| vec![(r * 3 + p) as u8; 24]).collect();
            net.queue_ops(r, [Op::Alltoall { chunks }, Op::Barrier { word: [1, 2, 3, 4] }]);
        }
        net.run(Duration::from_secs(60));
        for r in 0..3u32 {
            let res = net.results(r);
            assert_eq!(res.len(), 2, "{name}: rank {r}: {res:?} waiting {:?}", net.rank(r).waiting_for());
            let expected: Vec<u8> = (0..3u32).flat_map(|p| vec![(p * 3 + r) as u8; 24]).collect();
            assert_eq!(res[0].result, Ok(expected), "{name}: rank {r}");
        }
        let dropped =
            net.events.iter().filter(|(_, n, e)| *n != Node::Root && matches!(e, Event::StrayDropped { .. })).count();
        let stalled = net.events.iter().filter(|(_, _, e)| matches!(e, Event::StalledDropped { .. })).count();
        assert_eq!(dropped, 3 * 7, "{name}: every garbage stray logged");
        assert_eq!(stalled, 6, "{name}: every half-open stray dropped after the header timeout");
    }
}

#[test]
fn a_connection_carrying_more_than_one_message_is_dropped_not_buffered() {
    // A valid header for (rank 0, tag 99) followed by far more than max_message bytes.
    let limits = Limits { max_message: 1024, ..Limits::default() };
    for name in ["nvshmem-3.4", "nvshmem-3.7", "seq"] {
        let variant = Variant::preset(name).unwrap();
        let mut net = MemNet::with_limits(2, variant, limits);
        net.run(Duration::from_secs(10));
        let mut bytes = Preamble::bootstrap(0x5eed_0000_b007_51a1).encode().to_vec();
        encode_frame(&mut bytes, &0i32.to_le_bytes());
        encode_frame(&mut bytes, &99i32.to_le_bytes());
        if name == "seq" {
            encode_frame(&mut bytes, &7u64.to_le_bytes());
        }
        bytes.extend(std::iter::repeat_n(0xab, 10_000));
        net.inject(1, bytes, false);
        net.queue_ops(0, [Op::Barrier { word: [1; 4] }]);
        net.queue_ops(1, [Op::Barrier { word: [2; 4] }]);
        net.run(Duration::from_secs(10));
        assert!(net.results(1)[0].result.is_ok(), "{name}: {:?}", net.results(1));
        assert!(
            net.events
                .iter()
                .any(|(_, _, e)| matches!(e, Event::StrayDropped { error: WireError::TooLarge { .. }, .. })),
            "{name}: the oversized connection is logged"
        );
        assert!(net.rank(1).unexpected().is_empty(), "{name}");
    }
}

#[test]
fn a_trickle_of_stalled_strangers_does_not_keep_a_waiting_rank_alive() {
    // Rank 0 waits in a barrier for rank 1, which never calls it; a stranger that stalls in its
    // header arrives every 400 ms and is dropped after 500 ms. Only the awaited peer's
    // progress counts, so the 2 s operation timeout still fires.
    let limits = Limits {
        header_timeout: Some(Duration::from_millis(500)),
        op_timeout: Some(Duration::from_secs(2)),
        ..Limits::default()
    };
    let mut net = MemNet::with_limits(2, Variant::NVSHMEM_3_7, limits);
    net.run(Duration::from_millis(100));
    assert!(net.rank(0).is_ready() && net.rank(1).is_ready());
    net.queue_ops(0, [Op::Barrier { word: [1, 2, 3, 4] }]);
    for k in 1..=25u64 {
        net.run(Duration::from_millis(100 + 400 * k));
        net.inject(0, vec![0x5e], false);
    }
    let failed = net
        .completions
        .iter()
        .find(|(_, node, c)| *node == Node::Rank(0) && c.result.is_err())
        .map(|(at, _, c)| (*at, c.result.clone().unwrap_err().to_string()));
    let (at, error) = failed.expect("rank 0 times out despite the strangers");
    assert!(error.contains("no progress for 2000ms while barrier #0"), "{error}");
    assert!(at.as_nanos() < Duration::from_secs(3).as_nanos() as u64, "timed out at {at}, not 2 s after the start");
    let dropped = net.events.iter().filter(|(_, _, e)| matches!(e, Event::StalledDropped { .. })).count();
    assert!(dropped >= 2, "strangers were accepted and dropped meanwhile: {dropped}");
}

#[test]
fn a_peer_flooding_the_unexpected_list_fails_the_rank_with_an_error_that_names_it() {
    // Connections with the session's magic and a valid header whose tag nobody waits for:
    // NVSHMEM parks each on the unexpected list with its bytes; bootsim bounds the list.
    let magic = 0x5eed_0000_b007_51a1u64; // memnet's session magic
    let forged = |tag: i32| {
        let mut b = Preamble::bootstrap(magic).encode().to_vec();
        encode_frame(&mut b, &1i32.to_le_bytes());
        encode_frame(&mut b, &tag.to_le_bytes());
        encode_frame(&mut b, &[0xab; 1000]);
        b
    };
    for (limits, what) in [
        (Limits { max_unexpected_bytes: 2500, ..Limits::default() }, "at most 2500 bytes"),
        (Limits { max_unexpected: 2, ..Limits::default() }, "at most 2 connections"),
    ] {
        let mut net = MemNet::with_limits(2, Variant::NVSHMEM_3_7, limits);
        net.run(Duration::from_millis(100));
        net.queue_ops(0, [Op::Barrier { word: [1, 2, 3, 4] }]);
        net.run(Duration::from_millis(200));
        for tag in 9..13 {
            net.inject(0, forged(tag), false);
        }
        net.run(Duration::from_secs(1));
        let error = net
            .completions
            .iter()
            .find_map(|(_, node, c)| (*node == Node::Rank(0)).then(|| c.result.clone().err()).flatten())
            .expect("rank 0 fails");
        let text = error.to_string();
        assert!(text.contains(what) && text.contains("the last from rank 1 tag 0xb"), "{text}");
    }
}
