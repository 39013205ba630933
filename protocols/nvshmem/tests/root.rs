//! The root, driven by hand: bad check-ins are typed errors, strangers are dropped.

use std::net::SocketAddr;

use bootsim_core::codec::{encode_frame, ExtInfo, Preamble, WireError};
use bootsim_core::{ConnId, Instant};
use bootsim_nvshmem::{
    BootstrapError, Effect, Event, Input, Limits, Observation, Output, Root, RootConfig, UniqueId, NVSHMEM_UID_VERSION,
};

const MAGIC: u64 = 0xabcdef;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn new_root() -> (Root, Vec<Output>) {
    let uid = UniqueId { version: NVSHMEM_UID_VERSION, root: addr("10.0.0.1:5000"), magic: MAGIC };
    let mut root = Root::new(RootConfig { uid, nranks: None, limits: Limits::default() }, Instant::ZERO);
    root.handle(
        Instant::ZERO,
        Input::Listening { listener: bootsim_nvshmem::Listener::Rendezvous, addr: addr("10.0.0.1:5000") },
    );
    let out = drain(&mut root);
    (root, out)
}

fn drain(root: &mut Root) -> Vec<Output> {
    drain_writes(root).into_iter().map(|(o, _)| o).collect()
}

/// Every output, each write with the bytes the root put in the driver's buffer.
fn drain_writes(root: &mut Root) -> Vec<(Output, Vec<u8>)> {
    let mut tx = Vec::new();
    std::iter::from_fn(|| root.poll_output(&mut tx).map(|o| (o, tx.clone()))).collect()
}

fn accepted(out: &[Output]) -> ConnId {
    out.iter()
        .rev()
        .find_map(|o| if let Output::Effect(Effect::Accept { conn, .. }) = o { Some(*conn) } else { None })
        .expect("an accept")
}

fn check_in_bytes(magic: u64, version: i32, rank: i32, nranks: i32) -> Vec<u8> {
    let mut b = Preamble::bootstrap(magic).encode().to_vec();
    encode_frame(&mut b, &version.to_le_bytes());
    let info = ExtInfo { rank, nranks, listen_root: addr("10.1.0.1:7001"), listen: addr("10.1.0.1:7000") };
    encode_frame(&mut b, &info.encode());
    b
}

fn feed(root: &mut Root, conn: ConnId, bytes: &[u8]) -> Vec<Output> {
    root.handle(Instant::ZERO, Input::Accepted { conn, from: addr("10.1.0.9:40000") });
    root.handle(Instant::ZERO, Input::Received { conn, bytes });
    drain(root)
}

fn error(out: &[Output]) -> Option<BootstrapError> {
    out.iter()
        .find_map(|o| if let Output::Observe(Observation::Completed(c)) = o { c.result.clone().err() } else { None })
}

#[test]
fn duplicate_rank_is_an_error() {
    let (mut root, out) = new_root();
    let out = feed(&mut root, accepted(&out), &check_in_bytes(MAGIC, NVSHMEM_UID_VERSION, 1, 3));
    assert_eq!(error(&out), None);
    let out = feed(&mut root, accepted(&out), &check_in_bytes(MAGIC, NVSHMEM_UID_VERSION, 1, 3));
    assert_eq!(error(&out), Some(BootstrapError::DuplicateRank { rank: 1, nranks: 3 }));
    assert!(root.is_done());
}

#[test]
fn nranks_disagreement_and_range_are_errors() {
    let (mut root, out) = new_root();
    let out = feed(&mut root, accepted(&out), &check_in_bytes(MAGIC, NVSHMEM_UID_VERSION, 0, 3));
    let out2 = feed(&mut root, accepted(&out), &check_in_bytes(MAGIC, NVSHMEM_UID_VERSION, 1, 4));
    assert_eq!(error(&out2), Some(BootstrapError::NranksMismatch { rank: 1, theirs: 4, ours: 3 }));
    let (mut root, out) = new_root();
    let out = feed(&mut root, accepted(&out), &check_in_bytes(MAGIC, NVSHMEM_UID_VERSION, 5, 3));
    assert_eq!(error(&out), Some(BootstrapError::RankOutOfRange { rank: 5, nranks: 3 }));
}

#[test]
fn wrong_version_is_answered_then_an_error() {
    let (mut root, out) = new_root();
    let conn = accepted(&out);
    root.handle(Instant::ZERO, Input::Accepted { conn, from: addr("10.1.0.9:40000") });
    root.handle(Instant::ZERO, Input::Received { conn, bytes: &check_in_bytes(MAGIC, 12345, 0, 2) });
    let written = drain_writes(&mut root);
    // The root still answers with its own version so the rank can fail cleanly too.
    let mut version = Vec::new();
    encode_frame(&mut version, &NVSHMEM_UID_VERSION.to_le_bytes());
    assert!(written.contains(&(Output::Effect(Effect::Write { conn, len: version.len() }), version)), "{written:?}");
    let out: Vec<Output> = written.into_iter().map(|(o, _)| o).collect();
    assert_eq!(
        error(&out),
        Some(BootstrapError::RootVersionMismatch {
            from: "10.1.0.9:40000".into(),
            theirs: 12345,
            ours: NVSHMEM_UID_VERSION
        })
    );
}

#[test]
fn a_stranger_is_dropped_and_the_next_check_in_taken() {
    let (mut root, out) = new_root();
    let stranger = accepted(&out);
    let out = feed(&mut root, stranger, b"GET / HTTP/1.1\r\n\r\n");
    assert!(out.contains(&Output::Effect(Effect::Close { conn: stranger })));
    assert!(out.iter().any(|o| matches!(
        o,
        Output::Observe(Observation::Event(Event::StrayDropped { error: WireError::BadMagic { .. }, .. }))
    )));
    let out = feed(&mut root, accepted(&out), &check_in_bytes(MAGIC, NVSHMEM_UID_VERSION, 0, 1));
    // One rank: straight to the fan-out.
    assert!(out.iter().any(|o| matches!(o, Output::Effect(Effect::Connect { .. }))));
    assert_eq!(root.checked_in(), 1);
}

#[test]
fn a_huge_nranks_is_refused_before_any_allocation() {
    let (mut root, out) = new_root();
    let out = feed(&mut root, accepted(&out), &check_in_bytes(MAGIC, NVSHMEM_UID_VERSION, 0, i32::MAX));
    assert_eq!(error(&out), Some(BootstrapError::RankOutOfRange { rank: 0, nranks: i32::MAX }));
}

#[test]
fn a_connection_mid_check_in_does_not_hide_the_missing_rank() {
    // Ranks 0-2 of 4 checked in, rank 3 never comes, and a stranger's connection is open mid
    // check-in when the root is asked what it waits for (a connect/close flood makes that the
    // common case): the answer names rank 3 either way.
    let uid = UniqueId { version: NVSHMEM_UID_VERSION, root: addr("10.0.0.1:5000"), magic: MAGIC };
    let limits = Limits { read_ahead: Some(8), ..Limits::default() };
    let mut root = Root::new(RootConfig { uid, nranks: Some(4), limits }, Instant::ZERO);
    root.handle(Instant::ZERO, Input::Listening { listener: bootsim_nvshmem::Listener::Rendezvous, addr: uid.root });
    let mut out = drain(&mut root);
    for r in 0..3 {
        let conn = accepted(&out);
        let mut more = feed(&mut root, conn, &check_in_bytes(MAGIC, NVSHMEM_UID_VERSION, r, 4));
        out.append(&mut more);
    }
    assert_eq!(root.checked_in(), 3);
    let waiting = root.waiting_for().unwrap();
    assert!(waiting.contains("not yet checked in: rank 3"), "{waiting}");
    let stranger = accepted(&out);
    root.handle(Instant::ZERO, Input::Accepted { conn: stranger, from: addr("192.0.2.1:1") });
    root.handle(Instant::ZERO, Input::Received { conn: stranger, bytes: &[0x5e] });
    let waiting = root.waiting_for().unwrap();
    assert!(waiting.contains("not yet checked in: rank 3"), "with a stranger mid-check-in: {waiting}");
}

#[test]
fn a_root_that_cannot_reach_a_checked_in_rank_names_it_at_its_timeout() {
    // Every rank checked in, and the root's connection back to rank 0 never completes (the
    // rank died after checking in): at the root's op timeout its typed culprit is that rank, so
    // a rank that hangs behind the root is blamed on it, not on the rank it waits for.
    let uid = UniqueId { version: NVSHMEM_UID_VERSION, root: addr("10.0.0.1:5000"), magic: MAGIC };
    let limits = Limits { op_timeout: Some(std::time::Duration::from_secs(2)), ..Limits::default() };
    let mut root = Root::new(RootConfig { uid, nranks: None, limits }, Instant::ZERO);
    root.handle(Instant::ZERO, Input::Listening { listener: bootsim_nvshmem::Listener::Rendezvous, addr: uid.root });
    let mut out = drain(&mut root);
    for r in 0..2 {
        let mut more = feed(&mut root, accepted(&out), &check_in_bytes(MAGIC, NVSHMEM_UID_VERSION, r, 2));
        out.append(&mut more);
    }
    let to =
        out.iter().find_map(|o| if let Output::Effect(Effect::Connect { addr, .. }) = o { Some(*addr) } else { None });
    assert!(to.is_some(), "the root dials a rank back: {out:?}");
    let waiting = root.waiting_for().unwrap();
    assert!(waiting.starts_with("connect to rank 0"), "{waiting}");
    let late = root.poll_timeout().expect("an op timeout");
    root.handle_timeout(late);
    match error(&drain(&mut root)) {
        Some(e @ BootstrapError::RootTimeout { .. }) => {
            assert_eq!(e.culprit(0), Some(bootsim_core::Culprit::Rank(0)), "{e}");
            let BootstrapError::RootTimeout { missing, .. } = e else { unreachable!() };
            assert_eq!(missing, vec![0]);
        }
        other => panic!("expected the root's timeout, got {other:?}"),
    }
}
