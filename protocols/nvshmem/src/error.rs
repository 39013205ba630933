//! Typed errors; each names the rank, peer, operation, tag and sizes that apply.

use std::net::SocketAddr;
use std::time::Duration;

use crate::OpKind;
use bootsim_core::codec::WireError;
pub use bootsim_core::{Blocked, Culprit};

/// Why an operation (or the root) failed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum BootstrapError {
    /// Strict size check: the message's size differs from the receive buffer's.
    #[error("rank {rank}: {op} recv from rank {peer} tag {tag:#x}: message size mismatch: received {got} bytes instead of {expected}")]
    SizeMismatch {
        /// The rank that failed.
        rank: u32,
        /// The rank the receive was from.
        peer: u32,
        /// The operation that failed.
        op: OpKind,
        /// The receive's tag.
        tag: i32,
        /// The receive buffer's size, in bytes.
        expected: usize,
        /// The message's size, in bytes.
        got: usize,
    },
    /// Lenient size check: the message was longer than the receive buffer.
    #[error("rank {rank}: {op} recv from rank {peer} tag {tag:#x}: message truncated: received {got} bytes instead of {expected}")]
    Truncated {
        /// The rank that failed.
        rank: u32,
        /// The rank the receive was from.
        peer: u32,
        /// The operation that failed.
        op: OpKind,
        /// The receive's tag.
        tag: i32,
        /// The receive buffer's size, in bytes.
        expected: usize,
        /// The message's size, in bytes.
        got: usize,
    },
    /// Sequenced or persistent transports: the next message in order is not the one expected.
    #[error("rank {rank}: {op} recv from rank {peer}: message #{seq} has tag {got_tag:#x} and {got_size} bytes, expected tag {expected_tag:#x} and {expected_size} bytes")]
    OutOfStep {
        /// The rank that failed.
        rank: u32,
        /// The rank the receive was from.
        peer: u32,
        /// The operation that failed.
        op: OpKind,
        /// The message's position in the peer's order.
        seq: u64,
        /// The tag expected.
        expected_tag: i32,
        /// The message's tag.
        got_tag: i32,
        /// The size expected, in bytes.
        expected_size: usize,
        /// The message's size, in bytes.
        got_size: usize,
    },
    /// 3.8: the per-call tag counter has passed 2^31 - 1.
    #[error(
        "rank {rank}: {op}: UID bootstrap message tag space exhausted (the next tag would be {next:#x}, past 2^31-1)"
    )]
    TagSpaceExhausted {
        /// The rank that failed.
        rank: u32,
        /// The operation that failed.
        op: OpKind,
        /// The tag the counter would have handed out next.
        next: u64,
    },
    /// The unexpected list grew past its bound (a peer that knows the magic floods this rank).
    #[error("rank {rank}: {op}: the unexpected list holds {count} connections and {bytes} bytes, over its bound ({what}); the last from rank {from} tag {tag:#x}")]
    UnexpectedOverflow {
        /// The rank that failed.
        rank: u32,
        /// The operation that failed.
        op: OpKind,
        /// The rank its newest entry came from, as its header says.
        from: i32,
        /// Its newest entry's tag.
        tag: i32,
        /// Connections the list holds.
        count: usize,
        /// Bytes those connections buffer together.
        bytes: usize,
        /// The bound it passed ("at most 64 connections").
        what: String,
    },
    /// The root closed the check-in without answering: it refused this rank (a root drops a
    /// connection whose session magic is not its own) or it stopped.
    #[error("rank {rank}: init: the root at {root} refused the check-in: it closed the connection without answering, as a root does to a rank whose session magic is not its own (check the shared secret, the job id and the session address), or it stopped")]
    CheckInRefused {
        /// The rank that failed.
        rank: u32,
        /// The root's address.
        root: SocketAddr,
    },
    /// The check-in's connection timed out before the root answered: this rank's kernel gave up
    /// retransmitting to the root (`ETIMEDOUT`); the root did not close it.
    #[error("rank {rank}: init: the connection to the root at {root} timed out before it answered the check-in: this rank's kernel gave up retransmitting to it (ETIMEDOUT), so the root's host, or the path between them, is down; the root did not close the connection")]
    CheckInTimedOut {
        /// The rank that failed.
        rank: u32,
        /// The root's address.
        root: SocketAddr,
    },
    /// The root answered with another unique-ID version (a mixed build).
    #[error("rank {rank}: unique ID version {ours} but the root speaks {root}")]
    VersionMismatch {
        /// The rank that failed.
        rank: u32,
        /// This rank's unique-ID version.
        ours: i32,
        /// The root's unique-ID version.
        root: i32,
    },
    /// A connection of the session carried bytes that do not decode.
    #[error("rank {rank}: {op}: {}", wire_text(from, error))]
    Wire {
        /// The rank that failed.
        rank: u32,
        /// The operation that failed.
        op: OpKind,
        /// Who sent the bytes ("rank 2", "the root", an address).
        from: String,
        /// What did not decode.
        error: WireError,
        /// Who sent the bytes (`from` names what they were).
        peer: Culprit,
    },
    /// Connecting failed after the driver's retries.
    #[error("rank {rank}: {op}: cannot connect to {to} at {addr}: {reason}")]
    Connect {
        /// The rank that failed.
        rank: u32,
        /// The operation that failed.
        op: OpKind,
        /// Who it dialled ("rank 2", "the root").
        to: String,
        /// The address it dialled.
        addr: SocketAddr,
        /// The last error, as the world reports it.
        reason: String,
        /// The one it dialled, when known (the ring successor before the root named it is not).
        peer: Option<Culprit>,
    },
    /// A listener could not be opened.
    #[error("rank {rank}: cannot listen: {reason}")]
    Listen {
        /// The rank that failed.
        rank: u32,
        /// The error, as the world reports it.
        reason: String,
    },
    /// Nothing arrived within the configured timeout.
    #[error("rank {rank}: {op}: no progress for {}ms while {waiting}", after.as_millis())]
    Timeout {
        /// The rank that failed.
        rank: u32,
        /// The operation that failed.
        op: OpKind,
        /// What the node was waiting for.
        waiting: String,
        /// How long it went without progress.
        after: Duration,
        /// The one the step waited for, when it waited for one.
        peer: Option<Culprit>,
        /// How the step was blocked on `peer` (in connect() to it, or otherwise).
        blocked: Blocked,
    },
    /// The application asked for something the protocol cannot do.
    #[error("rank {rank}: invalid {op}: {reason}")]
    InvalidOp {
        /// The rank that failed.
        rank: u32,
        /// The operation that failed.
        op: OpKind,
        /// What is wrong with it.
        reason: String,
    },
    /// Root: a rank checked in twice.
    #[error("root: rank {rank} of {nranks} ranks has already checked in")]
    DuplicateRank {
        /// The rank that checked in twice.
        rank: i32,
        /// The number of ranks in the world.
        nranks: u32,
    },
    /// Root: a rank disagrees about the world size.
    #[error("root: rank {rank} says nranks={theirs}, but the world has {ours} ranks")]
    NranksMismatch {
        /// The rank that disagrees.
        rank: i32,
        /// The world size the rank sent.
        theirs: i32,
        /// The root's world size.
        ours: u32,
    },
    /// Root: a rank number outside the world.
    #[error("root: invalid rank {rank} for {nranks} ranks")]
    RankOutOfRange {
        /// The rank number received.
        rank: i32,
        /// The number of ranks in the world.
        nranks: i32,
    },
    /// Root: the rank's root listener could not be reached.
    #[error("root: cannot connect to rank {to} at {addr}: {reason}")]
    RootConnect {
        /// The rank whose root listener it dialled.
        to: u32,
        /// The address it dialled.
        addr: SocketAddr,
        /// The last error, as the world reports it.
        reason: String,
    },
    /// Root: nothing arrived within the configured timeout. `missing`: the culprits: the ranks
    /// that have not checked in (when the world size is known), or the checked-in rank it
    /// cannot reach to send its successor.
    #[error("root: no progress for {}ms while {waiting}", after.as_millis())]
    RootTimeout {
        /// What the root was waiting for.
        waiting: String,
        /// How long it went without progress.
        after: Duration,
        /// The ranks that have not checked in, or the one the root cannot reach.
        missing: Vec<u32>,
    },
    /// Root: its listener could not be opened.
    #[error("root: cannot listen: {reason}")]
    RootListen {
        /// The error, as the world reports it.
        reason: String,
    },
    /// Root: a rank's unique-ID version differs from the root's.
    #[error("root: a rank at {from} speaks unique ID version {theirs}, the root {ours}")]
    RootVersionMismatch {
        /// The rank's address.
        from: String,
        /// The rank's unique-ID version.
        theirs: i32,
        /// The root's unique-ID version.
        ours: i32,
    },
}

impl BootstrapError {
    /// The peer whose loss made this rank (`me`) fail, if it failed because of another: a peer
    /// that closed or sent garbage, one it could not reach, the root that refused it, the peer a
    /// timed-out step waited for, the ranks that never checked in. `None` when the rank found
    /// the fault itself (a size or order mismatch, its tags, its own listener): it is the cause.
    pub fn culprit(&self, me: u32) -> Option<Culprit> {
        match self {
            BootstrapError::Wire { peer, .. } => Some(*peer).filter(|p| *p != Culprit::Rank(me)),
            BootstrapError::Connect { peer, .. } | BootstrapError::Timeout { peer, .. } => {
                peer.filter(|p| *p != Culprit::Rank(me))
            }
            BootstrapError::CheckInRefused { .. } | BootstrapError::CheckInTimedOut { .. } => Some(Culprit::Root),
            BootstrapError::RootConnect { to, .. } => Some(Culprit::Rank(*to)),
            BootstrapError::RootTimeout { missing, .. } => missing.first().map(|&r| Culprit::Rank(r)),
            _ => None,
        }
    }
}

/// A connection's failure as a person reads it: a peer that closed mid-message is named as the
/// culprit (it stopped or died), a connection that timed out as one this rank's kernel gave up
/// on (the peer's host or the path to it is down: the peer did not close it), other bytes are
/// "malformed data".
fn wire_text(from: &str, error: &WireError) -> String {
    match error {
        WireError::Truncated { what, needed, have } => format!(
            "{from} closed the connection after {have} of {needed} bytes of {what}: {from} stopped or died mid-message, \
             or gave up because it lost another rank"
        ),
        WireError::TimedOut { what, needed, have } => format!(
            "the connection to {from} timed out after {have} of {needed} bytes of {what}: this rank's kernel gave up \
             retransmitting to {from} (ETIMEDOUT), so {from}'s host, or the path between them, is down; {from} did not close it"
        ),
        e => format!("malformed data from {from}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_culprit_is_the_peer_a_rank_lost_and_none_for_a_fault_it_found() {
        let wire = |peer: Culprit| BootstrapError::Wire {
            rank: 1,
            op: OpKind::Barrier,
            from: peer.to_string(),
            error: WireError::Truncated { what: "a frame", needed: 4, have: 0 },
            peer,
        };
        assert_eq!(wire(Culprit::Rank(2)).culprit(1), Some(Culprit::Rank(2)));
        assert_eq!(wire(Culprit::Root).culprit(1), Some(Culprit::Root));
        let waiting = "barrier #2: recv from rank 1 tag 0x2 (bytes on local c3)".to_string();
        let t = BootstrapError::Timeout {
            rank: 0,
            op: OpKind::Barrier,
            waiting,
            after: Duration::from_secs(1),
            peer: Some(Culprit::Rank(1)),
            blocked: Blocked::Other,
        };
        assert_eq!(t.culprit(0), Some(Culprit::Rank(1)));
        let missing = BootstrapError::RootTimeout { waiting: String::new(), after: Duration::ZERO, missing: vec![3] };
        assert_eq!(missing.culprit(0), Some(Culprit::Rank(3)));
        let refused = BootstrapError::CheckInRefused { rank: 2, root: "127.0.0.1:1".parse().unwrap() };
        assert_eq!(refused.culprit(2).map(Culprit::rank), Some(0));
        let own = BootstrapError::SizeMismatch { rank: 1, peer: 0, op: OpKind::Barrier, tag: 2, expected: 4, got: 8 };
        assert_eq!(own.culprit(1), None);
    }

    #[test]
    fn the_culprit_is_the_typed_peer_never_a_rank_the_text_mentions() {
        // The words name rank 3 (an address, a wait's description); the peer is rank 2.
        let t = BootstrapError::Timeout {
            rank: 0,
            op: OpKind::Init,
            waiting: "init: receiving from the ring predecessor (bytes on local c3 from rank 3's old address)".into(),
            after: Duration::from_secs(1),
            peer: Some(Culprit::Rank(2)),
            blocked: Blocked::Other,
        };
        assert_eq!(t.culprit(0), Some(Culprit::Rank(2)));
        let w = BootstrapError::Wire {
            rank: 0,
            op: OpKind::Init,
            from: "the allgathered address of rank 3".into(),
            error: WireError::NegativeLength { len: -1 },
            peer: Culprit::Rank(3),
        };
        assert_eq!(w.culprit(3), None, "a rank is never its own culprit");
        assert_eq!(w.culprit(0), Some(Culprit::Rank(3)));
    }

    #[test]
    fn a_peer_that_closed_mid_message_is_named_as_the_culprit() {
        let e = BootstrapError::Wire {
            rank: 0,
            op: OpKind::Barrier,
            from: "rank 2".into(),
            error: WireError::Truncated { what: "a frame", needed: 4, have: 0 },
            peer: Culprit::Rank(2),
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
            peer: Culprit::Rank(2),
        };
        assert_eq!(e.to_string(), "rank 0: barrier: malformed data from rank 2: negative frame length -1");
    }
}
