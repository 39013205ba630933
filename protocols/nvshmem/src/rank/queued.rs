//! Operations waiting in a rank's queue: made already, or made when they start (an input
//! generated from a seed when it is needed, instead of held by every rank from the start).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::OpKind;

use super::Op;

/// How a queued operation is made when it starts.
pub(crate) type Make = Arc<dyn Fn() -> Op + Send + Sync>;

/// A queued operation.
#[derive(Clone)]
pub(crate) enum Queued {
    Ready(Op),
    Later { kind: OpKind, make: Make },
}

impl Queued {
    /// The operation's kind, without making it.
    pub(crate) fn kind(&self) -> OpKind {
        match self {
            Queued::Ready(op) => op.kind(),
            Queued::Later { kind, .. } => *kind,
        }
    }

    /// The operation itself.
    pub(crate) fn op(self) -> Op {
        match self {
            Queued::Ready(op) => op,
            Queued::Later { make, .. } => make(),
        }
    }
}

impl fmt::Debug for Queued {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Queued::Ready(op) => op.fmt(f),
            Queued::Later { kind, .. } => write!(f, "{kind:?} (made when it starts)"),
        }
    }
}

/// A made operation hashes as the operation itself, as the queue did when it held only those.
impl Hash for Queued {
    fn hash<H: Hasher>(&self, h: &mut H) {
        match self {
            Queued::Ready(op) => op.hash(h),
            Queued::Later { kind, .. } => kind.hash(h),
        }
    }
}
