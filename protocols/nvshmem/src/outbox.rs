//! The outputs a state machine has produced and its driver has not yet taken. Frames are
//! encoded once into one byte buffer that is reused from frame to frame (no allocation per
//! frame once it has grown), and copied out into the driver's own buffer when the driver polls:
//! quinn-proto's `poll_transmit(now, &mut buf)` shape.

use std::collections::VecDeque;

use bootsim_core::ids::ConnId;

use crate::io::{Completion, Effect, Event, Observation, Output};

/// Queued outputs and the bytes of their writes, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Outbox {
    queue: VecDeque<Output>,
    /// The bytes of every queued [`Effect::Write`], back to back, from `head` on.
    bytes: Vec<u8>,
    head: usize,
}

impl Outbox {
    /// An outbox holding the effect `first`.
    pub(crate) fn with(first: Effect) -> Self {
        Outbox { queue: VecDeque::from([Output::Effect(first)]), ..Default::default() }
    }

    /// Queues an effect that carries no bytes.
    pub(crate) fn effect(&mut self, effect: Effect) {
        debug_assert!(!matches!(effect, Effect::Write { .. }), "writes go through Outbox::write");
        self.queue.push_back(Output::Effect(effect));
    }

    /// Queues a protocol event.
    pub(crate) fn event(&mut self, event: Event) {
        self.queue.push_back(Output::Observe(Observation::Event(event)));
    }

    /// Queues the end of an operation.
    pub(crate) fn completed(&mut self, completion: Completion) {
        self.queue.push_back(Output::Observe(Observation::Completed(completion)));
    }

    /// Queues a write on `conn` of whatever `encode` appends to the buffer it is given.
    pub(crate) fn write(&mut self, conn: ConnId, encode: impl FnOnce(&mut Vec<u8>)) {
        let start = self.bytes.len();
        encode(&mut self.bytes);
        self.queue.push_back(Output::Effect(Effect::Write { conn, len: self.bytes.len() - start }));
    }

    /// Takes the next output; for a write, its bytes replace the contents of `tx`.
    pub(crate) fn poll(&mut self, tx: &mut Vec<u8>) -> Option<Output> {
        let out = self.queue.pop_front()?;
        if let Output::Effect(Effect::Write { len, .. }) = out {
            tx.clear();
            tx.extend_from_slice(&self.bytes[self.head..self.head + len]);
            self.head += len;
        }
        if self.queue.is_empty() {
            // Nothing queued refers to the buffer any more: reuse it from the start.
            self.bytes.clear();
            self.head = 0;
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use bootsim_core::ids::ConnId;

    use super::*;

    #[test]
    fn writes_come_out_in_order_with_their_own_bytes_and_the_buffer_is_reused() {
        let mut o = Outbox::default();
        o.write(ConnId(1), |b| b.extend_from_slice(b"abc"));
        o.effect(Effect::Close { conn: ConnId(1) });
        o.write(ConnId(2), |b| b.extend_from_slice(b"de"));
        let mut tx = b"stale".to_vec();
        assert_eq!(o.poll(&mut tx), Some(Output::Effect(Effect::Write { conn: ConnId(1), len: 3 })));
        assert_eq!(tx, b"abc");
        assert_eq!(o.poll(&mut tx), Some(Output::Effect(Effect::Close { conn: ConnId(1) })));
        assert_eq!(o.poll(&mut tx), Some(Output::Effect(Effect::Write { conn: ConnId(2), len: 2 })));
        assert_eq!(tx, b"de");
        assert_eq!(o.poll(&mut tx), None);
        let cap = o.bytes.capacity();
        o.write(ConnId(3), |b| b.extend_from_slice(b"fg"));
        assert_eq!((o.head, o.bytes.len(), o.bytes.capacity()), (0, 2, cap), "drained, the buffer starts over");
    }
}
