//! Mismatches: each receive took the message its own step sent, joined through the connection
//! and index the message travelled on. A receive that took another step's message is named;
//! between two barriers it is benign (barrier bytes are unused). Worlds that record no message
//! log have nothing to check here.

use bootsim_core::{MessageLog, OpKind};

use super::{describe, describe_sent, Finding};

/// Every receive in `log` that took another step's message, in the order they were taken.
pub(super) fn check(log: &MessageLog) -> Vec<Finding> {
    let mut findings = Vec::new();
    for t in &log.taken {
        let Some(sent) = log.source(t) else { continue };
        if sent.origin.op == t.origin.op && sent.origin.step == t.origin.step {
            continue;
        }
        let benign = sent.origin.kind == OpKind::Barrier && t.origin.kind == OpKind::Barrier;
        findings.push(Finding::Mismatch {
            rank: t.rank,
            taken_for: describe(&t.origin, None),
            source: describe_sent(sent),
            benign,
        });
    }
    findings
}
