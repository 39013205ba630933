//! Identifiers the core hands to drivers.

use std::fmt;

/// A connection, numbered by the state machine that asked for it (connect or accept).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}

/// An application operation, numbered in the order the application started it (init is 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u32);

impl OpId {
    /// The operation's index in the application's workload (from 0, init apart), the one number
    /// every person-facing output shows; `None` for init.
    pub fn workload_index(self) -> Option<u32> {
        (self.0 != 0).then(|| self.0 - 1)
    }
}

/// An operation as a person reads it: `init`, `alltoall #1` (see [`OpId::workload_index`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpName(pub OpKind, pub OpId);

impl fmt::Display for OpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1.workload_index() {
            Some(i) => write!(f, "{} #{i}", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

/// What kind of operation an [`OpId`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpKind {
    /// Rendezvous with the root, ring setup and the address allgather.
    Init,
    /// Ring allgather over the persistent ring connections.
    Allgather,
    /// Pairwise-shift alltoall over point-to-point messages.
    Alltoall,
    /// Dissemination barrier over point-to-point messages.
    Barrier,
    /// A single point-to-point send.
    Send,
    /// A single point-to-point receive.
    Recv,
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpKind::Init => "init",
            OpKind::Allgather => "allgather",
            OpKind::Alltoall => "alltoall",
            OpKind::Barrier => "barrier",
            OpKind::Send => "send",
            OpKind::Recv => "recv",
        })
    }
}

/// Where a point-to-point message belongs: which operation of its sender, and which step of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MsgOrigin {
    /// The operation's id on the rank that sent or receives it.
    pub op: OpId,
    /// The operation's kind.
    pub kind: OpKind,
    /// The step within the operation (alltoall shift, barrier round), from 1.
    pub step: u32,
}

impl fmt::Display for MsgOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let step = match self.kind {
            OpKind::Barrier => "round",
            _ => "step",
        };
        write!(f, "{} {} {}", OpName(self.kind, self.op), step, self.step)
    }
}
