//! NVSHMEM's operations as the bootstrap runs them, and their [`OpType`]s in message origins.

use std::fmt;

use bootsim_core::{OpType, OpTypeDef};

/// What kind of operation an [`bootsim_core::OpId`] of an NVSHMEM rank is.
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

/// One description per kind, in declaration order (the code is the index).
const TYPES: [OpTypeDef; 6] = [
    OpTypeDef { code: 0, name: "init", step: "step", bytes_unused: false },
    OpTypeDef { code: 1, name: "allgather", step: "step", bytes_unused: false },
    OpTypeDef { code: 2, name: "alltoall", step: "step", bytes_unused: false },
    OpTypeDef { code: 3, name: "barrier", step: "round", bytes_unused: true },
    OpTypeDef { code: 4, name: "send", step: "step", bytes_unused: false },
    OpTypeDef { code: 5, name: "recv", step: "step", bytes_unused: false },
];

/// The descriptions the origins point at (one address per kind).
static DEFS: [OpTypeDef; 6] = TYPES;

impl OpKind {
    /// The kind as message origins and the record carry it.
    pub fn op_type(self) -> OpType {
        OpType::new(&DEFS[self as usize])
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(DEFS[*self as usize].name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_keeps_its_name_and_only_a_barriers_bytes_are_unused() {
        use OpKind::*;
        let names: Vec<String> =
            [Init, Allgather, Alltoall, Barrier, Send, Recv].iter().map(|k| k.to_string()).collect();
        assert_eq!(names, ["init", "allgather", "alltoall", "barrier", "send", "recv"]);
        for k in [Init, Allgather, Alltoall, Barrier, Send, Recv] {
            assert_eq!(k.op_type().code(), k as u8);
            assert_eq!(k.op_type().name(), k.to_string());
            assert_eq!(k.op_type().bytes_unused(), k == Barrier);
        }
        assert_eq!(Barrier.op_type().step_word(), "round");
    }
}
