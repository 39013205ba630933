//! Why a connection ended reaches the rank's error: the root closing (or resetting) the
//! check-in is a refusal, the rank's own kernel giving up on it (`ETIMEDOUT`) is a timeout that
//! names the unreachable root, not a root that refused.

use std::net::SocketAddr;

use bootsim_core::codec::encode_frame;
use bootsim_core::seam::CloseReason;
use bootsim_core::{Culprit, Instant};
use bootsim_nvshmem::{Effect, Input, Limits, Listener, Observation, Output, Rank, RankConfig, UniqueId, Variant};

/// Rank 1 of 4 dials the root at 10.0.0.1:9000, connects, is sent `reply` (part of the root's
/// answer), then its connection ends for `reason`: the error it fails with, and its culprit.
fn check_in_ends(reply: &[u8], reason: CloseReason) -> (String, Option<Culprit>) {
    let variant = Variant::preset("nvshmem-3.7").unwrap();
    let root: SocketAddr = "10.0.0.1:9000".parse().unwrap();
    let uid = UniqueId { version: variant.uid_version(), root, magic: 0x5eed };
    let mut rank = Rank::new(RankConfig { rank: 1, nranks: 4, uid, variant, limits: Limits::default() }, Instant::ZERO);
    let mut dialled = None;
    let mut failed = None;
    let mut feed = |rank: &mut Rank, input: Option<Input<'_>>| {
        if let Some(input) = input {
            rank.handle(Instant::ZERO, input);
        }
        let mut tx = Vec::new();
        while let Some(out) = rank.poll_output(&mut tx) {
            match out {
                Output::Effect(Effect::Connect { conn, addr }) if addr == root => dialled = Some(conn),
                Output::Observe(Observation::Completed(c)) => failed = c.result.err(),
                _ => {}
            }
        }
        (dialled, failed.clone())
    };
    feed(&mut rank, None);
    feed(&mut rank, Some(Input::Listening { listener: Listener::Peers, addr: "10.1.0.2:7001".parse().unwrap() }));
    let at = "10.1.0.2:7002".parse().unwrap();
    let (dialled, _) = feed(&mut rank, Some(Input::Listening { listener: Listener::FromRoot, addr: at }));
    let conn = dialled.expect("the rank dials the root");
    feed(&mut rank, Some(Input::Connected { conn }));
    if !reply.is_empty() {
        feed(&mut rank, Some(Input::Received { conn, bytes: reply }));
    }
    let (_, failed) = feed(&mut rank, Some(Input::PeerClosed { conn, reason }));
    let e = failed.expect("the rank fails");
    (e.to_string(), e.culprit(1))
}

#[test]
fn a_check_in_the_ranks_kernel_gave_up_on_is_a_timeout_not_a_refusal() {
    let refused = "rank 1: init: the root at 10.0.0.1:9000 refused the check-in: it closed the connection without \
                   answering, as a root does to a rank whose session magic is not its own (check the shared secret, \
                   the job id and the session address), or it stopped";
    for reason in [CloseReason::Eof, CloseReason::Reset] {
        assert_eq!(check_in_ends(&[], reason), (refused.to_string(), Some(Culprit::Root)), "{reason:?}");
    }
    let timed_out = "rank 1: init: the connection to the root at 10.0.0.1:9000 timed out before it answered the \
                     check-in: this rank's kernel gave up retransmitting to it (ETIMEDOUT), so the root's host, or the \
                     path between them, is down; the root did not close the connection";
    assert_eq!(check_in_ends(&[], CloseReason::TimedOut), (timed_out.to_string(), Some(Culprit::Root)));
}

#[test]
fn a_connection_that_timed_out_mid_message_names_the_timeout_and_the_peer() {
    let mut reply = Vec::new();
    encode_frame(&mut reply, &7i32.to_le_bytes());
    let part = &reply[..6];
    let (closed, _) = check_in_ends(part, CloseReason::Reset);
    assert_eq!(
        closed,
        "rank 1: init: the root closed the connection after 6 of 8 bytes of root version: the root stopped or died \
         mid-message, or gave up because it lost another rank"
    );
    let (timed_out, culprit) = check_in_ends(part, CloseReason::TimedOut);
    assert_eq!(
        timed_out,
        "rank 1: init: the connection to the root timed out after 6 of 8 bytes of root version: this rank's kernel gave up \
         retransmitting to the root (ETIMEDOUT), so the root's host, or the path between them, is down; the root did not \
         close it"
    );
    assert_eq!(culprit, Some(Culprit::Root));
}
