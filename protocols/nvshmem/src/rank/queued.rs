//! Operations waiting in a rank's queue: made already, or chunked (inputs made from the seed
//! when sent, instead of held by every rank from the start).

use std::fmt;
use std::hash::{Hash, Hasher};

use crate::OpKind;

use super::buffer::Chunked;
use super::Op;

/// A queued operation.
#[derive(Clone)]
pub(crate) enum Queued {
    Ready(Op),
    Chunked(Chunked),
}

impl Queued {
    /// The operation's kind, without making it.
    pub(crate) fn kind(&self) -> OpKind {
        match self {
            Queued::Ready(op) => op.kind(),
            Queued::Chunked(Chunked::Allgather { .. }) => OpKind::Allgather,
            Queued::Chunked(Chunked::Alltoall { .. }) => OpKind::Alltoall,
        }
    }
}

impl fmt::Debug for Queued {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Queued::Ready(op) => op.fmt(f),
            Queued::Chunked(c) => c.fmt(f),
        }
    }
}

/// A made operation hashes as the operation itself, as the queue did when it held only those.
impl Hash for Queued {
    fn hash<H: Hasher>(&self, h: &mut H) {
        match self {
            Queued::Ready(op) => op.hash(h),
            Queued::Chunked(_) => self.kind().hash(h),
        }
    }
}
