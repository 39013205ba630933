//! NCCL's failures, with NCCL's own words where NCCL has them, and the rank, call, peer, tag and
//! sizes that apply.

use std::net::SocketAddr;

use bootsim_core::codec::WireError;

use crate::program::Call;

/// Why a rank's bootstrap call failed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum NcclError {
    /// `bootstrapNetRecv`: the message is larger than the receive buffer (a smaller one succeeds).
    #[error("rank {rank}: {call}: recv from rank {peer} tag {tag:#x}: Message truncated : received {received} bytes instead of {expected}")]
    Truncated {
        /// The rank that failed.
        rank: u32,
        /// The NCCL call it was in.
        call: Call,
        /// The rank the receive was from (-1: any rank).
        peer: i32,
        /// The receive's tag.
        tag: i32,
        /// The message's size, in bytes.
        received: usize,
        /// The receive buffer's size, in bytes.
        expected: usize,
    },
    /// `socketProgress`: the peer closed the connection before the bytes NCCL was waiting for.
    #[error("rank {rank}: {call}: socketProgress: Connection closed by remote peer {from} (waiting for {what})")]
    Closed {
        /// The rank that failed.
        rank: u32,
        /// The NCCL call it was in.
        call: Call,
        /// The address of the peer that closed it (or the connection's name).
        from: String,
        /// What NCCL was reading when it closed.
        what: &'static str,
    },
    /// `socketProgressOpt`: `recv` failed with `ETIMEDOUT` before the bytes NCCL was waiting for:
    /// this rank's kernel gave up retransmitting to the peer, which did not close it.
    #[error("rank {rank}: {call}: socketProgressOpt: Call to recv from {from} failed : Connection timed out (waiting for {what}; this rank's kernel gave up retransmitting to it)")]
    TimedOut {
        /// The rank that failed.
        rank: u32,
        /// The NCCL call it was in.
        call: Call,
        /// The address of the peer it lost (or the connection's name).
        from: String,
        /// What NCCL was reading when it timed out.
        what: &'static str,
    },
    /// `socketFinalizeAccept` (2.9-2.26): the right magic but another socket type.
    #[error("rank {rank}: {call}: socketFinalizeAccept: wrong type {got} != {expected} (from {from})")]
    WrongType {
        /// The rank that failed.
        rank: u32,
        /// The NCCL call it was in.
        call: Call,
        /// The address it came from (or the connection's name).
        from: String,
        /// The socket type received.
        got: i32,
        /// The socket type NCCL expects there.
        expected: i32,
    },
    /// Bytes that cannot be a message of this session (a negative size, a bad address family).
    #[error("rank {rank}: {call}: {error} (from {from})")]
    Wire {
        /// The rank that failed.
        rank: u32,
        /// The NCCL call it was in.
        call: Call,
        /// The address they came from (or the connection's name).
        from: String,
        /// What did not decode.
        error: WireError,
    },
    /// Connecting failed after the driver's retries (`socketStartConnect`).
    #[error("rank {rank}: {call}: connect to {to} at {addr} failed: {reason}")]
    Connect {
        /// The rank that failed.
        rank: u32,
        /// The NCCL call it was in.
        call: Call,
        /// Who it dialled ("rank 2", "the root", "its ring successor").
        to: String,
        /// The address it dialled.
        addr: SocketAddr,
        /// The last error, as the world reports it.
        reason: String,
    },
    /// A listener could not be opened.
    #[error("rank {rank}: cannot listen: {reason}")]
    Listen {
        /// The rank that failed.
        rank: u32,
        /// The error, as the world reports it.
        reason: String,
    },
    /// A program step that cannot run (a peer out of range); bootsim's own check.
    #[error("rank {rank}: {call}: {reason}")]
    Invalid {
        /// The rank that failed.
        rank: u32,
        /// The NCCL call it was in.
        call: Call,
        /// What is wrong with the step.
        reason: String,
    },
}

/// Why the root thread gave up (it closes its listener and returns: the ranks then hang).
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum RootError {
    /// `bootstrapRoot`: a check-in with another world size.
    #[error("root: Bootstrap Root : mismatch in rank count from procs {ours} : {theirs}")]
    NranksMismatch {
        /// The root's world size (from the first check-in).
        ours: i32,
        /// The world size this check-in sent.
        theirs: i32,
    },
    /// `bootstrapRoot`: a rank checked in twice.
    #[error("root: Bootstrap Root : rank {rank} of {nranks} ranks has already checked in")]
    Duplicate {
        /// The rank that checked in twice.
        rank: i32,
        /// The number of ranks in the world.
        nranks: i32,
    },
    /// 2.23 on: a check-in disagrees with the first about the world or the roots.
    #[error("root: Bootstrap Root : mismatch in info from procs, nranks {} vs {}, nroots {} vs {}, iroot {} vs {}, offset {} vs {}", ours[0], theirs[0], ours[1], theirs[1], ours[2], theirs[2], ours[3], theirs[3])]
    InfoMismatch {
        /// The first check-in's nranks, nroots, iroot and offset.
        ours: [i32; 4],
        /// This check-in's nranks, nroots, iroot and offset.
        theirs: [i32; 4],
    },
    /// 2.23 on: the rank is not one this root serves.
    #[error("root: Bootstrap Root : localId {local} is out of range")]
    LocalIdOutOfRange {
        /// The local id the check-in named.
        local: i64,
    },
    /// A rank number outside 0..nranks, or a world NCCL cannot size (up to 2.22 NCCL indexes its
    /// arrays with the rank unchecked; 2.23 on divides by nroots).
    #[error(
        "root: check-in from rank {rank} of {nranks} ranks cannot be served (bootsim's check: NCCL does not make it)"
    )]
    OutOfRange {
        /// The rank the check-in named.
        rank: i32,
        /// The world size it named.
        nranks: i32,
    },
    /// The check-in was larger than `extInfo`.
    #[error("root: check-in from {from}: Message truncated : received {received} bytes instead of {expected}")]
    Truncated {
        /// The address the check-in came from.
        from: String,
        /// The check-in's size, in bytes.
        received: usize,
        /// The size of `extInfo`, in bytes.
        expected: usize,
    },
    /// A check-in connection closed early, or carried another socket type (before 2.27).
    #[error("root: check-in from {from}: {what}")]
    BadConnection {
        /// The address the check-in came from.
        from: String,
        /// What was wrong with it.
        what: String,
    },
    /// Bytes that do not decode.
    #[error("root: check-in from {from}: {error}")]
    Wire {
        /// The address the check-in came from.
        from: String,
        /// What did not decode.
        error: WireError,
    },
    /// The root could not reach a rank's root listener.
    #[error("root: connect to rank {rank} at {addr} failed: {reason}")]
    Connect {
        /// The rank it dialled.
        rank: u32,
        /// The address it dialled.
        addr: String,
        /// The last error, as the world reports it.
        reason: String,
    },
    /// The root could not listen.
    #[error("root: cannot listen: {reason}")]
    Listen {
        /// The error, as the world reports it.
        reason: String,
    },
}
