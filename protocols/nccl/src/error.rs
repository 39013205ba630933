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
    Truncated { rank: u32, call: Call, peer: i32, tag: i32, received: usize, expected: usize },
    /// `socketProgress`: the peer closed the connection before the bytes NCCL was waiting for.
    #[error("rank {rank}: {call}: socketProgress: Connection closed by remote peer {from} (waiting for {what})")]
    Closed { rank: u32, call: Call, from: String, what: &'static str },
    /// `socketFinalizeAccept` (2.9-2.26): the right magic but another socket type.
    #[error("rank {rank}: {call}: socketFinalizeAccept: wrong type {got} != {expected} (from {from})")]
    WrongType { rank: u32, call: Call, from: String, got: i32, expected: i32 },
    /// Bytes that cannot be a message of this session (a negative size, a bad address family).
    #[error("rank {rank}: {call}: {error} (from {from})")]
    Wire { rank: u32, call: Call, from: String, error: WireError },
    /// Connecting failed after the driver's retries (`socketStartConnect`).
    #[error("rank {rank}: {call}: connect to {to} at {addr} failed: {reason}")]
    Connect { rank: u32, call: Call, to: String, addr: SocketAddr, reason: String },
    /// A listener could not be opened.
    #[error("rank {rank}: cannot listen: {reason}")]
    Listen { rank: u32, reason: String },
    /// A program step that cannot run (a peer out of range); bootsim's own check.
    #[error("rank {rank}: {call}: {reason}")]
    Invalid { rank: u32, call: Call, reason: String },
}

/// Why the root thread gave up (it closes its listener and returns: the ranks then hang).
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum RootError {
    /// `bootstrapRoot`: a check-in with another world size.
    #[error("root: Bootstrap Root : mismatch in rank count from procs {ours} : {theirs}")]
    NranksMismatch { ours: i32, theirs: i32 },
    /// `bootstrapRoot`: a rank checked in twice.
    #[error("root: Bootstrap Root : rank {rank} of {nranks} ranks has already checked in")]
    Duplicate { rank: i32, nranks: i32 },
    /// 2.23 on: a check-in disagrees with the first about the world or the roots.
    #[error("root: Bootstrap Root : mismatch in info from procs, nranks {} vs {}, nroots {} vs {}, iroot {} vs {}, offset {} vs {}", ours[0], theirs[0], ours[1], theirs[1], ours[2], theirs[2], ours[3], theirs[3])]
    InfoMismatch { ours: [i32; 4], theirs: [i32; 4] },
    /// 2.23 on: the rank is not one this root serves.
    #[error("root: Bootstrap Root : localId {local} is out of range")]
    LocalIdOutOfRange { local: i64 },
    /// A rank number outside 0..nranks, or a world NCCL cannot size (up to 2.22 NCCL indexes its
    /// arrays with the rank unchecked; 2.23 on divides by nroots).
    #[error(
        "root: check-in from rank {rank} of {nranks} ranks cannot be served (bootsim's check: NCCL does not make it)"
    )]
    OutOfRange { rank: i32, nranks: i32 },
    /// The check-in was larger than `extInfo`.
    #[error("root: check-in from {from}: Message truncated : received {received} bytes instead of {expected}")]
    Truncated { from: String, received: usize, expected: usize },
    /// A check-in connection closed early, or carried another socket type (before 2.27).
    #[error("root: check-in from {from}: {what}")]
    BadConnection { from: String, what: String },
    /// Bytes that do not decode.
    #[error("root: check-in from {from}: {error}")]
    Wire { from: String, error: WireError },
    /// The root could not reach a rank's root listener.
    #[error("root: connect to rank {rank} at {addr} failed: {reason}")]
    Connect { rank: u32, addr: String, reason: String },
    /// The root could not listen.
    #[error("root: cannot listen: {reason}")]
    Listen { reason: String },
}
