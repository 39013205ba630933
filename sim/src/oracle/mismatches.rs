//! Mismatches: each receive took the message its own step sent, joined through the connection
//! and index the message travelled on. A receive that took another step's message is named;
//! between two operations whose bytes nobody reads (NVSHMEM's barriers) it is benign. Worlds that record no message
//! log have nothing to check here.

use bootsim_core::{SentMsg, TakenMsg};

use super::{provenance_of, Finding, OpRef};

/// The mismatch of a receive that took `t`, the message `sent`: none if it was its own step's.
pub(super) fn of_take(t: &TakenMsg, sent: &SentMsg) -> Option<Finding> {
    if sent.origin.op == t.origin.op && sent.origin.step == t.origin.step {
        return None;
    }
    let benign = sent.origin.kind.bytes_unused() && t.origin.kind.bytes_unused();
    Some(Finding::Mismatch { rank: t.rank, taken_for: OpRef::Step(t.origin), source: provenance_of(sent), benign })
}

#[cfg(test)]
mod tests {
    use bootsim_core::{Instant, MessageLog, MsgOrigin, OpId, OpType, OpTypeDef};

    use super::*;

    /// Two operation types as a protocol defines them: one whose bytes nobody reads.
    #[derive(Clone, Copy)]
    enum OpKind {
        Alltoall,
        Barrier,
    }

    impl OpKind {
        fn op_type(self) -> OpType {
            match self {
                OpKind::Alltoall => {
                    OpType::new(&OpTypeDef { code: 2, name: "alltoall", step: "step", bytes_unused: false })
                }
                OpKind::Barrier => {
                    OpType::new(&OpTypeDef { code: 3, name: "barrier", step: "round", bytes_unused: true })
                }
            }
        }
    }

    /// Every receive in `log` that took another step's message, in the order they were taken.
    fn check(log: &MessageLog) -> Vec<Finding> {
        log.taken.iter().filter_map(|t| of_take(t, log.source(t)?)).collect()
    }

    fn origin(op: u32, kind: OpKind, step: u32) -> MsgOrigin {
        MsgOrigin { op: OpId(op), kind: kind.op_type(), step }
    }

    fn send(log: &mut MessageLog, conn: u64, from: u32, o: MsgOrigin) {
        log.sent(Some(conn), SentMsg { from, to: 1, tag: 1, origin: o, size: 4, at: Instant::ZERO });
    }

    fn take(log: &mut MessageLog, conn: Option<u64>, o: MsgOrigin) {
        let t =
            TakenMsg { at: Instant::ZERO, rank: 1, from: 0, tag: 1, origin: o, size: 4, expected_size: 4, conn: None };
        log.taken(conn, t);
    }

    #[test]
    fn a_receive_that_took_another_steps_message_is_named_benign_only_between_barriers() {
        let mut log = MessageLog::default();
        // Connection 7 carries two barrier rounds; the receives take them in order.
        send(&mut log, 7, 0, origin(2, OpKind::Barrier, 1));
        send(&mut log, 7, 0, origin(2, OpKind::Barrier, 2));
        take(&mut log, Some(7), origin(2, OpKind::Barrier, 1));
        take(&mut log, Some(7), origin(2, OpKind::Barrier, 2));
        assert_eq!(check(&log), vec![]);
        // Connection 8: a barrier's message taken by another barrier, then by an alltoall.
        send(&mut log, 8, 0, origin(3, OpKind::Barrier, 1));
        send(&mut log, 8, 0, origin(3, OpKind::Barrier, 2));
        take(&mut log, Some(8), origin(4, OpKind::Barrier, 1));
        take(&mut log, Some(8), origin(1, OpKind::Alltoall, 1));
        // Unjoinable takes say nothing.
        take(&mut log, None, origin(1, OpKind::Alltoall, 2));
        let text: Vec<String> = check(&log).iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "mismatch: rank 1 barrier #3 round 1 took barrier #2 round 1 from rank 0 (benign: barrier bytes are unused)",
                "mismatch: rank 1 alltoall #0 step 1 took barrier #2 round 2 from rank 0",
            ]
        );
    }
}
