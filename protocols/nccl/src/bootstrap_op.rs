//! NCCL's bootstrap operations a point-to-point message belongs to, and their [`OpType`]s in
//! the run record's message origins.

use bootsim_core::{OpType, OpTypeDef};

use crate::program::CallKind;

/// The bootstrap operation a message is sent or taken in, by the call that makes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BootstrapOp {
    /// `bootstrapInit`: the root check-in and the ring.
    Init,
    /// `bootstrapAllGather` around the ring.
    RingAllGather,
    /// `ncclTransportP2pSetup`'s connectInfo exchange.
    SetupExchange,
    /// `ncclTransportP2pSetup`'s sync (a flag).
    SetupSync,
    /// `bootstrapBarrier` / `bootstrapIntraNodeBarrier` (flags).
    Barrier,
    /// `bootstrapIntraNodeAllGather`.
    IntraNodeAllGather,
    /// An application's own `bootstrapSend` / `bootstrapRecv`.
    PointToPoint,
}

/// One description per operation, in declaration order (the code is the index). The origin's
/// step is the message's intended tag, so its steps are called tags.
static DEFS: [OpTypeDef; 7] = [
    OpTypeDef { code: 0, name: "root check-in", step: "tag", bytes_unused: false },
    OpTypeDef { code: 1, name: "ring allgather", step: "tag", bytes_unused: false },
    OpTypeDef { code: 2, name: "p2p setup exchange", step: "tag", bytes_unused: false },
    OpTypeDef { code: 3, name: "p2p setup sync", step: "tag", bytes_unused: true },
    OpTypeDef { code: 4, name: "barrier", step: "tag", bytes_unused: true },
    OpTypeDef { code: 5, name: "intra-node allgather", step: "tag", bytes_unused: false },
    OpTypeDef { code: 6, name: "p2p send/recv", step: "tag", bytes_unused: false },
];

impl BootstrapOp {
    /// The operation a call's messages belong to.
    pub fn of(call: CallKind) -> BootstrapOp {
        match call {
            CallKind::BootstrapInit => BootstrapOp::Init,
            CallKind::AllGather(_) => BootstrapOp::RingAllGather,
            CallKind::SetupExchange { .. } => BootstrapOp::SetupExchange,
            CallKind::SetupSync { .. } => BootstrapOp::SetupSync,
            CallKind::Barrier { .. } => BootstrapOp::Barrier,
            CallKind::IntraNodeAllGather(_) => BootstrapOp::IntraNodeAllGather,
            CallKind::PointToPoint => BootstrapOp::PointToPoint,
        }
    }

    /// The operation as message origins carry it.
    pub fn op_type(self) -> OpType {
        OpType::new(&DEFS[self as usize])
    }

    /// True for flags NCCL never reads (the setup's sync, the barrier): one taken for another
    /// changes nothing.
    pub fn is_flag(self) -> bool {
        self.op_type().bytes_unused()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Graph;

    #[test]
    fn flags_are_the_calls_whose_bytes_nccl_never_reads() {
        let calls = [
            CallKind::BootstrapInit,
            CallKind::AllGather("peer info"),
            CallKind::SetupExchange { graph: Graph::Ring, conn_index: 0, i: 1 },
            CallKind::SetupSync { graph: Graph::Ring, conn_index: 0, i: 1 },
            CallKind::Barrier { tag: 7 },
            CallKind::IntraNodeAllGather("x"),
            CallKind::PointToPoint,
        ];
        for (i, call) in calls.into_iter().enumerate() {
            let op = BootstrapOp::of(call);
            assert_eq!(op.is_flag(), call.is_flag(), "{call:?}");
            assert_eq!(op.op_type().code() as usize, i);
        }
    }

    #[test]
    fn a_messages_origin_names_nccls_operation_the_same_for_its_send_and_its_receive() {
        use bootsim_core::seam::{Noted, Observed};
        use bootsim_core::ConnId;

        use crate::io::Event;

        let op = BootstrapOp::of(CallKind::SetupSync { graph: Graph::Ring, conn_index: 0, i: 1 });
        let (conn, step, logical_tag, nth) = (ConnId(3), 4, 9, 1);
        let sent = Event::Sent { conn, step, to: 1, tag: 9, logical_tag, nth, op, size: 4 };
        let taken = Event::Taken { conn, step, from: 0, tag: 9, logical_tag, nth, op, size: 4, expected: 4 };
        let (Noted::Sent { origin: s, .. }, Noted::Taken { origin: t, .. }) = (sent.noted(), taken.noted()) else {
            panic!("a send and a take")
        };
        assert_eq!(s, t);
        assert_eq!((s.kind.name(), s.kind.bytes_unused()), ("p2p setup sync", true));
        assert_eq!(s.to_string(), "p2p setup sync #1 tag 9");
        assert_eq!(crate::seam::origin_nth(&s), nth);
    }
}
