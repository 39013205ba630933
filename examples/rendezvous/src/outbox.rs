//! A node's queue of outputs, drained by the world through `poll_output`.

use std::collections::VecDeque;

use bootsim_core::seam::{Effect, Observation, Output};
use bootsim_core::ConnId;

use crate::types::{Completion, Event, Listener};

/// One of the nodes' outputs.
pub(crate) type Out = Output<Listener, Completion, Event>;

/// Outputs in the order they were made; a write keeps its bytes until it is polled.
#[derive(Clone, Debug, Default, Hash)]
pub(crate) struct Outbox {
    queue: VecDeque<(Out, Vec<u8>)>,
}

impl Outbox {
    /// Queues an effect without bytes.
    pub(crate) fn effect(&mut self, e: Effect<Listener>) {
        self.queue.push_back((Output::Effect(e), Vec::new()));
    }

    /// Queues a write of `bytes` on `conn`.
    pub(crate) fn write(&mut self, conn: ConnId, bytes: Vec<u8>) {
        self.queue.push_back((Output::Effect(Effect::Write { conn, len: bytes.len() }), bytes));
    }

    /// Queues a protocol event.
    pub(crate) fn event(&mut self, e: Event) {
        self.queue.push_back((Output::Observe(Observation::Event(e)), Vec::new()));
    }

    /// Queues an operation's end.
    pub(crate) fn completed(&mut self, c: Completion) {
        self.queue.push_back((Output::Observe(Observation::Completed(c)), Vec::new()));
    }

    /// The next output; a write's bytes go to `tx` (cleared first).
    pub(crate) fn poll(&mut self, tx: &mut Vec<u8>) -> Option<Out> {
        let (out, bytes) = self.queue.pop_front()?;
        if let Output::Effect(Effect::Write { .. }) = out {
            tx.clear();
            tx.extend_from_slice(&bytes);
        }
        Some(out)
    }
}
