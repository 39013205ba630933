//! Why a connection ended reaches the rank's error: a peer that closed (or reset) the
//! connection is `socketProgress`'s "Connection closed by remote peer"; the rank's own kernel
//! giving up on it (`ETIMEDOUT`) is `socketProgressOpt`'s failed `recv`, "Connection timed out",
//! never a close by the peer.

use std::net::SocketAddr;

use bootsim_core::seam::CloseReason;
use bootsim_nccl::seam::Key;
use bootsim_nccl::{
    Call, CallKind, Effect, Input, Listener, Observation, Output, Planned, Rank, RankConfig, Step, Variant,
};

/// Rank 1 of 4 (NCCL 2.19) checks in, accepts the root's answer on its root-facing listener,
/// gets `part` of it, then that connection ends for `reason`: the error the rank fails with.
fn answer_ends(part: &[u8], reason: CloseReason) -> String {
    let v = Variant::Nccl219;
    let init = Planned { step: Step::Init, call: Call { kind: CallKind::BootstrapInit, site: "bootstrap.cc" } };
    let root: SocketAddr = "10.0.0.1:29500".parse().unwrap();
    let cfg = RankConfig { rank: 1, nranks: 4, variant: v, magic: 0xabcd, root, program: vec![init] };
    let mut rank = Rank::new(cfg);
    let mut failed = None;
    let mut step = |rank: &mut Rank, input: Option<Input<'_>>| {
        if let Some(input) = input {
            rank.handle(input);
        }
        let (mut tx, mut effects) = (Vec::new(), Vec::new());
        while let Some(out) = rank.poll_output(&mut tx) {
            match out {
                Output::Effect(e) => effects.push(e),
                Output::Observe(Observation::Completed(c)) => failed = c.result.err().map(|e| e.to_string()),
                Output::Observe(_) => {}
            }
        }
        (effects, failed.clone())
    };
    step(&mut rank, None);
    let ring = "10.1.0.2:7001".parse().unwrap();
    step(&mut rank, Some(Input::Listening { listener: Key::of(v, Listener::Ring), addr: ring }));
    let from_root = "10.1.0.2:7002".parse().unwrap();
    let (effects, _) =
        step(&mut rank, Some(Input::Listening { listener: Key::of(v, Listener::FromRoot), addr: from_root }));
    let Some(&Effect::Connect { conn, .. }) = effects.first() else { panic!("the rank dials the root: {effects:?}") };
    let (effects, _) = step(&mut rank, Some(Input::Connected { conn }));
    let accept = effects.iter().find_map(|e| match *e {
        Effect::Accept { listener, conn } if listener.listener == Listener::FromRoot => Some(conn),
        _ => None,
    });
    let conn = accept.expect("the rank waits for the root's answer");
    step(&mut rank, Some(Input::Accepted { conn, from: "10.0.0.1:40000".parse().unwrap() }));
    step(&mut rank, Some(Input::Received { conn, bytes: part }));
    let (_, failed) = step(&mut rank, Some(Input::PeerClosed { conn, reason }));
    failed.expect("the rank fails")
}

#[test]
fn an_answer_the_ranks_kernel_gave_up_on_is_a_failed_recv_not_a_close_by_the_root() {
    // The preamble's magic, then the connection ends.
    let part = 0xabcdu64.to_le_bytes();
    let closed =
        "rank 1: bootstrapInit at bootstrap.cc: socketProgress: Connection closed by remote peer 10.0.0.1:40000 \
                  (waiting for the root's answer)";
    assert_eq!(answer_ends(&part, CloseReason::Eof), closed);
    assert_eq!(answer_ends(&part, CloseReason::Reset), closed);
    assert_eq!(
        answer_ends(&part, CloseReason::TimedOut),
        "rank 1: bootstrapInit at bootstrap.cc: socketProgressOpt: Call to recv from 10.0.0.1:40000 failed : \
         Connection timed out (waiting for the root's answer; this rank's kernel gave up retransmitting to it)"
    );
}
