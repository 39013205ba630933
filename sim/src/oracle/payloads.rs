//! What the judge asks a protocol about its workload's bytes (the seam between the judge's
//! integrity check and a protocol): how many operations a rank runs, what each must deliver,
//! whose chunks a result is made of, and what some bytes are. NVSHMEM's collectives
//! (`protocol::nvshmem::payloads`) and the rendezvous example's rounds implement it; the
//! judge names no protocol.

use std::fmt;

use bootsim_core::OpType;

use super::{BytesAre, Detail};

/// What bytes are, as the protocol whose workload made them tells: a payload (operation,
/// sender, receiver), a short copy, zeros. For worlds that record no messages.
pub trait Origins {
    /// What `bytes` are, if they tell (None: nothing known).
    fn what(&self, bytes: &[u8]) -> Option<BytesAre>;
}

/// A protocol's workload as the judge checks it: each operation's correct result, chunk by
/// chunk, and a wrong chunk's origin ([`Origins`]) and detail.
pub trait Payloads: Origins + fmt::Debug + Send {
    /// How many operations (init apart) every rank runs.
    fn ops(&self) -> usize;
    /// Operation `index`'s type (findings name it `TYPE #index`); None past the last.
    fn op_type(&self, index: usize) -> Option<OpType>;
    /// The bytes rank `rank`'s operation `index` must deliver (None: not checked).
    fn expected(&self, rank: u32, index: usize) -> Option<Vec<u8>>;
    /// True when operation `index`'s expected bytes are the same for every rank, so the judge
    /// makes them once for all (an allgather's).
    fn same_for_all(&self, index: usize) -> bool {
        let _ = index;
        false
    }
    /// The ranks whose chunks rank `rank`'s result of operation `index` holds, in order, each
    /// an equal share of it.
    fn senders(&self, rank: u32, index: usize) -> Vec<u32>;
    /// The protocol's account of the first wrong item of a chunk of rank `rank`'s operation
    /// `index`, `got` where `expected` was due (NVSHMEM: the QP handle and what verbs would do).
    fn detail(&self, rank: u32, index: usize, expected: &[u8], got: &[u8]) -> Option<Detail> {
        let _ = (rank, index, expected, got);
        None
    }
}
