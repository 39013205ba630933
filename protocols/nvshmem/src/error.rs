//! Typed errors; each names the rank, peer, operation, tag and sizes that apply.

use std::net::SocketAddr;
use std::time::Duration;

use crate::OpKind;
use bootsim_core::codec::WireError;
pub use bootsim_core::Culprit;

/// Why an operation (or the root) failed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum BootstrapError {
    /// Strict size check: the message's size differs from the receive buffer's.
    #[error("rank {rank}: {op} recv from rank {peer} tag {tag:#x}: message size mismatch: received {got} bytes instead of {expected}")]
    SizeMismatch { rank: u32, peer: u32, op: OpKind, tag: i32, expected: usize, got: usize },
    /// Lenient size check: the message was longer than the receive buffer.
    #[error("rank {rank}: {op} recv from rank {peer} tag {tag:#x}: message truncated: received {got} bytes instead of {expected}")]
    Truncated { rank: u32, peer: u32, op: OpKind, tag: i32, expected: usize, got: usize },
    /// Sequenced or persistent transports: the next message in order is not the one expected.
    #[error("rank {rank}: {op} recv from rank {peer}: message #{seq} has tag {got_tag:#x} and {got_size} bytes, expected tag {expected_tag:#x} and {expected_size} bytes")]
    OutOfStep {
        rank: u32,
        peer: u32,
        op: OpKind,
        seq: u64,
        expected_tag: i32,
        got_tag: i32,
        expected_size: usize,
        got_size: usize,
    },
    /// 3.8: the per-call tag counter has passed 2^31 - 1.
    #[error(
        "rank {rank}: {op}: UID bootstrap message tag space exhausted (the next tag would be {next:#x}, past 2^31-1)"
    )]
    TagSpaceExhausted { rank: u32, op: OpKind, next: u64 },
    /// The unexpected list grew past its bound (a peer that knows the magic floods this rank).
    #[error("rank {rank}: {op}: the unexpected list holds {count} connections and {bytes} bytes, over its bound ({what}); the last from rank {from} tag {tag:#x}")]
    UnexpectedOverflow { rank: u32, op: OpKind, from: i32, tag: i32, count: usize, bytes: usize, what: String },
    /// The root closed the check-in without answering: it refused this rank (a root drops a
    /// connection whose session magic is not its own) or it stopped.
    #[error("rank {rank}: init: the root at {root} refused the check-in: it closed the connection without answering, as a root does to a rank whose session magic is not its own (check the shared secret, the job id and the session address), or it stopped")]
    CheckInRefused { rank: u32, root: SocketAddr },
    /// The root answered with another unique-ID version (a mixed build).
    #[error("rank {rank}: unique ID version {ours} but the root speaks {root}")]
    VersionMismatch { rank: u32, ours: i32, root: i32 },
    /// A connection of the session carried bytes that do not decode.
    #[error("rank {rank}: {op}: {}", wire_text(from, error))]
    Wire { rank: u32, op: OpKind, from: String, error: WireError },
    /// Connecting failed after the driver's retries.
    #[error("rank {rank}: {op}: cannot connect to {to} at {addr}: {reason}")]
    Connect { rank: u32, op: OpKind, to: String, addr: SocketAddr, reason: String },
    /// A listener could not be opened.
    #[error("rank {rank}: cannot listen: {reason}")]
    Listen { rank: u32, reason: String },
    /// Nothing arrived within the configured timeout.
    #[error("rank {rank}: {op}: no progress for {}ms while {waiting}", after.as_millis())]
    Timeout { rank: u32, op: OpKind, waiting: String, after: Duration },
    /// The application asked for something the protocol cannot do.
    #[error("rank {rank}: invalid {op}: {reason}")]
    InvalidOp { rank: u32, op: OpKind, reason: String },
    /// Root: a rank checked in twice.
    #[error("root: rank {rank} of {nranks} ranks has already checked in")]
    DuplicateRank { rank: i32, nranks: u32 },
    /// Root: a rank disagrees about the world size.
    #[error("root: rank {rank} says nranks={theirs}, but the world has {ours} ranks")]
    NranksMismatch { rank: i32, theirs: i32, ours: u32 },
    /// Root: a rank number outside the world.
    #[error("root: invalid rank {rank} for {nranks} ranks")]
    RankOutOfRange { rank: i32, nranks: i32 },
    /// Root: the rank's root listener could not be reached.
    #[error("root: cannot connect to rank {to} at {addr}: {reason}")]
    RootConnect { to: u32, addr: SocketAddr, reason: String },
    /// Root: nothing arrived within the configured timeout. `missing`: the culprits: the ranks
    /// that have not checked in (when the world size is known), or the checked-in rank it
    /// cannot reach to send its successor.
    #[error("root: no progress for {}ms while {waiting}", after.as_millis())]
    RootTimeout { waiting: String, after: Duration, missing: Vec<u32> },
    /// Root: its listener could not be opened.
    #[error("root: cannot listen: {reason}")]
    RootListen { reason: String },
    /// Root: a rank's unique-ID version differs from the root's.
    #[error("root: a rank at {from} speaks unique ID version {theirs}, the root {ours}")]
    RootVersionMismatch { from: String, theirs: i32, ours: i32 },
}

impl BootstrapError {
    /// The peer whose loss made this rank (`me`) fail, if it failed because of another: a peer
    /// that closed or sent garbage, one it could not reach, the root that refused it, the peer a
    /// timed-out step waited for, the ranks that never checked in. `None` when the rank found
    /// the fault itself (a size or order mismatch, its tags, its own listener): it is the cause.
    pub fn culprit(&self, me: u32) -> Option<Culprit> {
        match self {
            BootstrapError::Wire { from, .. } => Culprit::named(from, me),
            BootstrapError::Connect { to, .. } => Culprit::named(to, me),
            BootstrapError::Timeout { waiting, .. } => Culprit::named(waiting, me),
            BootstrapError::CheckInRefused { .. } => Some(Culprit::Root),
            BootstrapError::RootConnect { to, .. } => Some(Culprit::Rank(*to)),
            BootstrapError::RootTimeout { missing, .. } => missing.first().map(|&r| Culprit::Rank(r)),
            _ => None,
        }
    }
}

/// A connection's failure as a person reads it: a peer that closed mid-message is named as the
/// culprit (it stopped or died), other bytes are "malformed data".
fn wire_text(from: &str, error: &WireError) -> String {
    match error {
        WireError::Truncated { what, needed, have } => format!(
            "{from} closed the connection after {have} of {needed} bytes of {what}: {from} stopped or died mid-message, \
             or gave up because it lost another rank"
        ),
        e => format!("malformed data from {from}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_culprit_is_the_peer_a_rank_lost_and_none_for_a_fault_it_found() {
        let wire = |from: &str| BootstrapError::Wire {
            rank: 1,
            op: OpKind::Barrier,
            from: from.into(),
            error: WireError::Truncated { what: "a frame", needed: 4, have: 0 },
        };
        assert_eq!(wire("rank 2").culprit(1), Some(Culprit::Rank(2)));
        assert_eq!(wire("the root").culprit(1), Some(Culprit::Root));
        let waiting = "barrier #2: recv from rank 1 tag 0x2 (bytes on local c3)".to_string();
        let t = BootstrapError::Timeout { rank: 0, op: OpKind::Barrier, waiting, after: Duration::from_secs(1) };
        assert_eq!(t.culprit(0), Some(Culprit::Rank(1)));
        let missing = BootstrapError::RootTimeout { waiting: String::new(), after: Duration::ZERO, missing: vec![3] };
        assert_eq!(missing.culprit(0), Some(Culprit::Rank(3)));
        let refused = BootstrapError::CheckInRefused { rank: 2, root: "127.0.0.1:1".parse().unwrap() };
        assert_eq!(refused.culprit(2).map(Culprit::rank), Some(0));
        let own = BootstrapError::SizeMismatch { rank: 1, peer: 0, op: OpKind::Barrier, tag: 2, expected: 4, got: 8 };
        assert_eq!(own.culprit(1), None);
    }

    #[test]
    fn a_peer_that_closed_mid_message_is_named_as_the_culprit() {
        let e = BootstrapError::Wire {
            rank: 0,
            op: OpKind::Barrier,
            from: "rank 2".into(),
            error: WireError::Truncated { what: "a frame", needed: 4, have: 0 },
        };
        assert_eq!(
            e.to_string(),
            "rank 0: barrier: rank 2 closed the connection after 0 of 4 bytes of a frame: rank 2 stopped or died mid-message, \
             or gave up because it lost another rank"
        );
        let e = BootstrapError::Wire {
            rank: 0,
            op: OpKind::Barrier,
            from: "rank 2".into(),
            error: WireError::NegativeLength { len: -1 },
        };
        assert_eq!(e.to_string(), "rank 0: barrier: malformed data from rank 2: negative frame length -1");
    }
}
