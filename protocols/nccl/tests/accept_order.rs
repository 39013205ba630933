//! NCCL's root and ranks stepped in memory with an accept order chosen by the test: the honest
//! order passes for every variant and workload; the order of NVIDIA/nccl#1176 (a transport
//! setup's 4-byte sync overtaken by the next setup's connectInfo) fails 2.19 with NCCL's message
//! and passes 2.21; matching by peer alone (2.8) hands a receive a message of another tag.

use bootsim_nccl::memnet::{NcclNet, Node, Outcome};
use bootsim_nccl::program::payload;
use bootsim_nccl::{nccl_init, nccl_p2p, CallKind, Graph, InitParams, NcclError, P2pParams, Planned, Step, Variant};

fn run(v: Variant, programs: Vec<Vec<Planned>>) -> NcclNet {
    let mut w = NcclNet::new(v, programs);
    w.run();
    w
}

/// Every rank done, the root done, every receive took its own message, and every allgather
/// other than the address exchange holds each rank's bytes.
fn assert_clean(w: &NcclNet, programs: &[Vec<Planned>], what: &str) {
    for r in 0..programs.len() as u32 {
        assert_eq!(w.outcome(r), Outcome::Done, "{what}: rank {r}");
    }
    assert_eq!(w.root_result(), Some(Ok(())), "{what}: root");
    assert_eq!(w.mismatches(), vec![], "{what}");
    for (r, prog) in programs.iter().enumerate() {
        for (s, p) in prog.iter().enumerate() {
            if let Step::RingAllgather { size, addresses: false } = p.step {
                let want: Vec<u8> = (0..programs.len() as u32).flat_map(|q| payload(q, s, size)).collect();
                assert_eq!(w.result(r as u32, s), Some(&Ok(want)), "{what}: rank {r} step {s} ({})", p.call);
            }
        }
        for r in 0..programs.len() as u32 {
            assert!(w.rank(r).unexpected().is_empty(), "{what}: rank {r} left connections unexpected");
        }
    }
}

#[test]
fn the_honest_order_passes_every_variant_and_workload() {
    for v in bootsim_nccl::ALL {
        for (n, per) in [(1, 8), (2, 8), (3, 8), (4, 2), (5, 2), (8, 8), (16, 8)] {
            for collnet in [false, true] {
                let progs = nccl_init(v, n, InitParams { ranks_per_node: per, channels: 2, collnet });
                let w = run(v, progs.clone());
                assert_clean(&w, &progs, &format!("{v} nccl-init n={n} per-node={per} collnet={collnet}"));
            }
            let progs = nccl_p2p(v, n, &P2pParams::every_peer(n));
            let w = run(v, progs.clone());
            assert_clean(&w, &progs, &format!("{v} nccl-p2p n={n}"));
        }
    }
}

/// Two NULL-graph setups between 2 ranks, one channel each way: a 256-byte connectInfo exchange
/// and a 4-byte sync each, all at distance 1.
fn two_p2p_setups(v: Variant) -> Vec<Vec<Planned>> {
    nccl_p2p(v, 2, &P2pParams { channels: 1, distances: vec![1, 1] })
}

/// The step of `prog` that is the first setup's sync send.
fn first_sync_send(prog: &[Planned]) -> usize {
    prog.iter()
        .position(|p| matches!(p.call.kind, CallKind::SetupSync { .. }) && matches!(p.step, Step::Send { .. }))
        .expect("a sync send")
}

#[test]
fn issue_1176_rank_0s_sync_overtaken_by_its_next_connect_info_truncates_on_2_19() {
    let progs = two_p2p_setups(Variant::Nccl219);
    let mut w = NcclNet::new(Variant::Nccl219, progs.clone());
    w.hold_step(0, first_sync_send(&progs[0]));
    w.run();
    let Outcome::Failed(e) = w.outcome(1) else { panic!("rank 1 must fail, got {:?}", w.outcome(1)) };
    assert!(matches!(e, NcclError::Truncated { received: 256, expected: 4, .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("Message truncated : received 256 bytes instead of 4"), "{text}");
    assert!(text.contains("transport.cc:204"), "NCCL reports the sync's receive at transport.cc:204: {text}");
    assert!(text.contains("sync"), "{text}");
}

#[test]
fn issue_1176_the_same_order_passes_on_2_21_and_2_30() {
    for v in [Variant::Nccl221, Variant::Nccl230] {
        let progs = two_p2p_setups(v);
        let mut w = NcclNet::new(v, progs.clone());
        w.hold_step(0, first_sync_send(&progs[0]));
        w.run();
        assert_clean(&w, &progs, &format!("{v} with rank 0's first sync held"));
        // The overtaking happened: rank 1 queued the connectInfo as unexpected while it waited.
        let queued = w.net.events.iter().any(|(_, _, o)| matches!(o, bootsim_nccl::Event::Queued { .. }));
        assert!(queued, "{v}: the held sync must have been overtaken");
    }
}

/// The step of `prog` that sends the ring setup's connectInfo.
fn ring_exchange_send(prog: &[Planned]) -> usize {
    prog.iter()
        .position(|p| {
            matches!(p.call.kind, CallKind::SetupExchange { graph: Graph::Ring, .. })
                && matches!(p.step, Step::Send { .. })
        })
        .expect("a ring exchange send")
}

/// `nccl-init` with 2 ranks on one node and one channel, run with rank 0's ring connectInfo held
/// until its next connection to rank 1 is queued.
fn ring_exchange_held(v: Variant) -> (NcclNet, Vec<Vec<Planned>>) {
    let progs = nccl_init(v, 2, InitParams { ranks_per_node: 8, channels: 1, collnet: false });
    let mut w = NcclNet::new(v, progs.clone());
    w.hold_step(0, ring_exchange_send(&progs[0]));
    w.run();
    (w, progs)
}

#[test]
fn matching_by_peer_alone_on_2_8_hands_the_ring_receive_the_tree_message() {
    // n=2 on one node: the ring setup's connectInfo (intended tag 0x101) and the tree setup's
    // (0x102) are the same size, so the receive that takes the wrong one succeeds silently.
    let (w, _) = ring_exchange_held(Variant::Nccl28);
    assert_eq!(w.outcome(1), Outcome::Done, "2.8 cannot tell: no error");
    let m = w.mismatches();
    assert!(!m.is_empty(), "the ring receive took the tree message");
    assert_eq!((m[0].rank, m[0].expected.2, m[0].got.2), (1, 0x101, 0x102), "{m:?}");

    // The same order on 2.21: the tags tell them apart (2.19 fails it another way, below).
    let (w, progs) = ring_exchange_held(Variant::Nccl221);
    assert_clean(&w, &progs, "2.21 with rank 0's ring exchange held");
}

#[test]
fn issue_1176_within_one_setup_on_2_19_the_sync_overtakes_its_own_exchange() {
    // ncclCommInitRank alone, 2 ranks: rank 0's ring connectInfo is held until its sync (same
    // tag on 2.19) is queued. Rank 1's exchange receive takes the 4-byte sync and succeeds (a
    // shorter message leaves the rest of the buffer as it was); its sync receive then takes the
    // 256-byte connectInfo: NVIDIA/nccl#1176's message, from transport.cc:204.
    let (w, _) = ring_exchange_held(Variant::Nccl219);
    let Outcome::Failed(e) = w.outcome(1) else { panic!("rank 1 must fail, got {:?}", w.outcome(1)) };
    let text = e.to_string();
    assert!(text.contains("Message truncated : received 256 bytes instead of 4"), "{text}");
    assert!(text.contains("ring graph") && text.contains("transport.cc:204"), "{text}");
    let short =
        w.net.events.iter().any(|(_, n, o)| {
            matches!((n, o), (Node::Rank(1), bootsim_nccl::Event::Taken { size: 4, expected: 256, .. }))
        });
    assert!(short, "the exchange receive took the 4-byte sync first");
    assert!(matches!(w.outcome(0), Outcome::Hung(_)), "rank 0 waits for rank 1 for good: {:?}", w.outcome(0));
}

#[test]
fn the_root_answers_in_rank_order_up_to_2_21_and_early_from_2_30() {
    use bootsim_nccl::Event::{CheckedIn, SuccessorSent};
    for (v, early) in [(Variant::Nccl219, false), (Variant::Nccl230, true)] {
        let progs = nccl_p2p(v, 4, &P2pParams { channels: 1, distances: vec![] });
        let w = run(v, progs.clone());
        assert_clean(&w, &progs, &format!("{v} init only"));
        let order: Vec<String> = w
            .net
            .events
            .iter()
            .filter_map(|(_, _, o)| match o {
                CheckedIn { rank, .. } => Some(format!("in{rank}")),
                SuccessorSent { to, .. } => Some(format!("out{to}")),
                _ => None,
            })
            .collect();
        let want = if early { "in0 in1 out0 in2 out1 in3 out2 out3" } else { "in0 in1 in2 in3 out0 out1 out2 out3" };
        assert_eq!(order.join(" "), want, "{v}");
    }
}

#[test]
fn strangers_on_a_ranks_listener_per_version() {
    use bootsim_core::codec::Preamble;
    // A wrong magic (an nmap probe that sends bytes) is skipped by every version with a magic;
    // one that connects and closes at once (NVIDIA/nccl#1612) kills 2.19 and 2.21 with NCCL's
    // "Connection closed by remote peer" and is skipped from 2.27 (2.30 here).
    let bad_magic = Preamble { magic: 0x1234, kind: 1 }.encode().to_vec();
    for v in [Variant::Nccl219, Variant::Nccl221, Variant::Nccl230] {
        let progs = nccl_p2p(v, 3, &P2pParams::every_peer(3));
        let mut w = NcclNet::new(v, progs.clone());
        w.inject(1, bad_magic.clone());
        w.run();
        assert_clean(&w, &progs, &format!("{v} with a wrong-magic stranger"));

        let mut w = NcclNet::new(v, progs.clone());
        w.inject(1, Vec::new());
        w.run();
        match (v, w.outcome(1)) {
            (Variant::Nccl230, out) => assert_eq!(out, Outcome::Done, "{v}"),
            (_, Outcome::Failed(e)) => {
                assert!(e.to_string().contains("Connection closed by remote peer"), "{v}: {e}")
            }
            (_, out) => panic!("{v}: rank 1 must fail, got {out:?}"),
        }
    }
}

#[test]
fn an_idle_stranger_on_a_ranks_listener_hangs_every_version() {
    // NCCL reads a connection's magic (or, in 2.8, its header) before accepting the next, with
    // no timeout: an idle client ahead of the peers blocks the rank for good (nccl#1871, #1808).
    for v in bootsim_nccl::ALL {
        let progs = nccl_p2p(v, 3, &P2pParams::every_peer(3));
        let mut w = NcclNet::new(v, progs.clone());
        w.inject_idle(1);
        w.run();
        let Outcome::Hung(why) = w.outcome(1) else { panic!("{v}: rank 1 must hang, got {:?}", w.outcome(1)) };
        assert!(why.contains("192.0.2.1"), "{v}: the wait names the stranger: {why}");
    }
}
