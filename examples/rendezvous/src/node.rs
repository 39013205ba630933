//! The root and the ranks as one [`Node`] type: the seam's contract, dispatched by hand.

use bootsim_core::seam::{Input, Node as SeamNode, NodeOutput};
use bootsim_core::Instant;

use crate::rank::Rank;
use crate::root::Root;
use crate::types::{Completion, Event, Listener};

/// One of the protocol's nodes.
// A world holds n ranks and one root: the enum is a rank's size (boxing ranks would cost n
// allocations for one root's worth of bytes).
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, Hash)]
pub enum Node {
    /// The root.
    Root(Root),
    /// A rank.
    Rank(Rank),
}

impl SeamNode for Node {
    type Listener = Listener;
    type Completion = Completion;
    type Event = Event;

    fn handle(&mut self, _now: Instant, input: Input<'_, Listener>) {
        match self {
            Node::Root(n) => n.handle(input),
            Node::Rank(n) => n.handle(input),
        }
    }

    fn poll_output(&mut self, tx: &mut Vec<u8>) -> Option<NodeOutput<Self>> {
        match self {
            Node::Root(n) => n.poll_output(tx),
            Node::Rank(n) => n.poll_output(tx),
        }
    }

    /// No timers: a peer that never comes is a hang the world sees.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn waiting_for(&self) -> Option<String> {
        match self {
            Node::Root(n) => n.waiting_for(),
            Node::Rank(n) => n.waiting_for(),
        }
    }

    fn culprit(&self) -> Option<u32> {
        match self {
            Node::Root(n) => n.culprit(),
            Node::Rank(n) => n.culprit(),
        }
    }

    fn unexpected(&self) -> Vec<(i32, i32)> {
        match self {
            Node::Root(_) => Vec::new(),
            Node::Rank(n) => n.unexpected(),
        }
    }

    fn is_finished(&self) -> bool {
        match self {
            Node::Root(n) => n.is_done(),
            Node::Rank(n) => n.is_finished(),
        }
    }
}
