//! NVSHMEM's UID bootstrap on the protocol seam: its listeners, completions and events read
//! through the seam's traits, and its [`Root`] and [`Rank`] (which emit the seam's outputs
//! themselves) as one [`Node`] type.

use std::net::SocketAddr;

use bootsim_core::ids::ConnId;
use bootsim_core::seam::{Completed, ListenerKey, Node, NodeOutput, Noted, Observed};
use bootsim_core::time::Instant;
use bootsim_core::{Blocked, Culprit};

use crate::error::BootstrapError;
use crate::io::{Completion, Event, Input};
use crate::listener::Listener;
use crate::rank::Rank;
use crate::root::Root;

impl ListenerKey for Listener {
    const ALL: &'static [Listener] = &[Listener::Peers, Listener::FromRoot, Listener::Rendezvous];

    fn port(self) -> u16 {
        crate::ports::sim_port(self)
    }

    fn is_peer(self) -> bool {
        self == Listener::Peers
    }

    fn is_root(self) -> bool {
        self == Listener::Rendezvous
    }
}

impl Completed for Completion {
    type Error = BootstrapError;

    fn op(&self) -> u32 {
        self.op.0
    }

    fn result(&self) -> Result<&[u8], &BootstrapError> {
        self.result.as_deref()
    }

    fn into_result(self) -> Result<Vec<u8>, BootstrapError> {
        self.result
    }

    fn error_text(rank: u32, op: u32, error: &BootstrapError) -> String {
        crate::report::error_text(rank, op as usize, error)
    }

    fn is_hang(error: &BootstrapError) -> bool {
        matches!(error, BootstrapError::Timeout { .. } | BootstrapError::RootTimeout { .. })
    }

    fn culprit(rank: u32, error: &BootstrapError) -> Option<Culprit> {
        error.culprit(rank)
    }
    fn blocked(error: &BootstrapError) -> Blocked {
        match error {
            BootstrapError::Timeout { blocked, .. } => *blocked,
            _ => Blocked::Other,
        }
    }
}

impl Observed for Event {
    fn conn(&self) -> Option<ConnId> {
        match self {
            Event::MessageSent { conn, .. }
            | Event::MessageTaken { conn, .. }
            | Event::UnexpectedQueued { conn, .. }
            | Event::ShortMessageAccepted { conn, .. }
            | Event::DrainGaveUp { conn, .. }
            | Event::DrainCompleted { conn, .. }
            | Event::StrayDropped { conn, .. }
            | Event::StalledDropped { conn, .. } => Some(*conn),
            Event::Ready | Event::CheckedIn { .. } => None,
        }
    }

    fn noted(&self) -> Noted {
        match *self {
            Event::MessageSent { to, tag, origin, size, .. } => Noted::Sent { to, tag, origin, size },
            Event::MessageTaken { from, tag, origin, size, expected_size, .. } => {
                Noted::Taken { from, tag, origin, size, expected_size }
            }
            Event::DrainGaveUp { to, tag, waited, unacked, .. } => Noted::DrainGaveUp { to, tag, waited, unacked },
            Event::DrainCompleted { to, waited, .. } => Noted::DrainCompleted { to, waited },
            Event::StrayDropped { ref error, .. } => Noted::Stray { error: error.to_string() },
            _ => Noted::Other,
        }
    }

    fn stranger(&self) -> Option<(SocketAddr, String)> {
        match self {
            Event::StrayDropped { from, error, .. } => Some((*from, error.to_string())),
            Event::StalledDropped { from, after, .. } => Some((*from, format!("header incomplete after {after:?}"))),
            _ => None,
        }
    }
}

/// One of NVSHMEM's nodes: the root or a rank.
// A world holds n ranks and one root: the enum is a rank's size, boxing ranks would cost n
// allocations and a pointer chase on every input.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, Hash)]
pub enum NvshmemNode {
    /// The root (the rendezvous thread of rank 0's process).
    Root(Root),
    /// A rank.
    Rank(Rank),
}

impl NvshmemNode {
    /// The rank, if this is one.
    pub fn rank(&self) -> Option<&Rank> {
        match self {
            NvshmemNode::Rank(r) => Some(r),
            NvshmemNode::Root(_) => None,
        }
    }

    /// The rank, mutably, if this is one (to queue operations).
    pub fn rank_mut(&mut self) -> Option<&mut Rank> {
        match self {
            NvshmemNode::Rank(r) => Some(r),
            NvshmemNode::Root(_) => None,
        }
    }
}

impl Node for NvshmemNode {
    type Listener = Listener;
    type Completion = Completion;
    type Event = Event;

    // Never inlined: `bootsim bench`'s profile reads this function's inclusive count, which
    // must hold every call in any build.
    #[inline(never)]
    fn handle(&mut self, now: Instant, input: Input<'_>) {
        match self {
            NvshmemNode::Root(n) => n.handle(now, input),
            NvshmemNode::Rank(n) => n.handle(now, input),
        }
    }

    fn poll_output(&mut self, tx: &mut Vec<u8>) -> Option<NodeOutput<Self>> {
        match self {
            NvshmemNode::Root(n) => n.poll_output(tx),
            NvshmemNode::Rank(n) => n.poll_output(tx),
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            NvshmemNode::Root(n) => n.poll_timeout(),
            NvshmemNode::Rank(n) => n.poll_timeout(),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        match self {
            NvshmemNode::Root(n) => n.handle_timeout(now),
            NvshmemNode::Rank(n) => n.handle_timeout(now),
        }
    }

    fn waiting_for(&self) -> Option<String> {
        match self {
            NvshmemNode::Root(n) => n.waiting_for(),
            NvshmemNode::Rank(n) => n.waiting_for(),
        }
    }

    /// A rank's typed wait ([`Rank::awaited`]); the root's words.
    fn awaited(&self) -> Option<bootsim_core::Awaited> {
        match self {
            NvshmemNode::Root(n) => n.waiting_for().map(|text| bootsim_core::Awaited::told(text, None)),
            NvshmemNode::Rank(n) => n.awaited(),
        }
    }

    fn unexpected(&self) -> Vec<(i32, i32)> {
        match self {
            NvshmemNode::Root(_) => Vec::new(),
            NvshmemNode::Rank(n) => n.unexpected(),
        }
    }

    fn is_finished(&self) -> bool {
        match self {
            NvshmemNode::Root(n) => n.is_done(),
            NvshmemNode::Rank(n) => n.is_finished(),
        }
    }

    /// A rank closes every connection and listener (NVSHMEM's `bootstrap_uid_close`); the
    /// root has closed its own when it finished.
    fn close(&mut self, now: Instant) {
        if let NvshmemNode::Rank(n) = self {
            n.close(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use bootsim_core::ids::OpId;

    use crate::OpKind;

    use super::*;

    #[test]
    fn a_completion_reads_its_op_and_result_through_the_seam() {
        let c = Completion { op: OpId(2), kind: OpKind::Barrier, result: Ok(vec![1, 2]) };
        assert_eq!((c.op(), c.result()), (2, Ok(&[1u8, 2][..])));
    }

    #[test]
    fn the_peer_listener_is_the_one_schedules_order_and_ports_are_the_simulated_ones() {
        assert!(Listener::Peers.is_peer() && !Listener::FromRoot.is_peer() && !Listener::Rendezvous.is_peer());
        assert!(Listener::Rendezvous.is_root() && !Listener::Peers.is_root() && !Listener::FromRoot.is_root());
        assert_eq!(Listener::Rendezvous.port(), crate::ports::ROOT_PORT);
        assert_eq!(Listener::Peers.port(), crate::ports::PEERS_PORT);
    }
    #[test]
    fn a_timeout_in_connect_to_send_keeps_how_it_was_blocked_in_the_record() {
        let timeout = |blocked| BootstrapError::Timeout {
            rank: 3,
            op: OpKind::Alltoall,
            waiting: "send to rank 5 (connect of a message connection)".into(),
            after: std::time::Duration::from_secs(20),
            peer: Some(Culprit::Rank(5)),
            blocked,
        };
        let waited = bootsim_core::Awaited::of_hang::<Completion>(3, 1, &timeout(Blocked::ConnectToSend));
        assert_eq!((waited.connecting_to_send(), waited.peer()), (Some(5), Some(Culprit::Rank(5))));
        let other = bootsim_core::Awaited::of_hang::<Completion>(3, 1, &timeout(Blocked::Other));
        assert_eq!(other.connecting_to_send(), None);
    }
}
