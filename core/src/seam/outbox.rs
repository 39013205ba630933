//! A node's outputs not yet polled. Frames are encoded once into one byte buffer that is reused
//! from frame to frame (no allocation per frame once it has grown), and copied out into the
//! world's own buffer when the world polls: quinn-proto's `poll_transmit(now, &mut buf)` shape.
//! Every protocol's nodes queue their outputs here.

use std::collections::VecDeque;

use super::io::{Effect, Observation, Output};
use crate::ids::ConnId;

/// Queued outputs (effects over listener keys `L`, completions `C`, events `E`) and the bytes
/// of their writes, in the order made.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Outbox<L, C, E> {
    queue: VecDeque<Output<L, C, E>>,
    /// The bytes of every queued [`Effect::Write`], back to back, from `head` on.
    bytes: Vec<u8>,
    head: usize,
}

impl<L, C, E> Default for Outbox<L, C, E> {
    fn default() -> Self {
        Outbox { queue: VecDeque::new(), bytes: Vec::new(), head: 0 }
    }
}

impl<L, C, E> Outbox<L, C, E> {
    /// An outbox holding the effect `first`.
    pub fn with(first: Effect<L>) -> Self {
        Outbox { queue: VecDeque::from([Output::Effect(first)]), ..Default::default() }
    }

    /// Queues an effect that carries no bytes.
    pub fn effect(&mut self, effect: Effect<L>) {
        debug_assert!(!matches!(effect, Effect::Write { .. }), "writes go through Outbox::write");
        self.queue.push_back(Output::Effect(effect));
    }

    /// Queues a protocol event.
    pub fn event(&mut self, event: E) {
        self.queue.push_back(Output::Observe(Observation::Event(event)));
    }

    /// Queues the end of an operation.
    pub fn completed(&mut self, completion: C) {
        self.queue.push_back(Output::Observe(Observation::Completed(completion)));
    }

    /// Queues a write on `conn` of whatever `encode` appends to the buffer it is given.
    pub fn write(&mut self, conn: ConnId, encode: impl FnOnce(&mut Vec<u8>)) {
        let start = self.bytes.len();
        encode(&mut self.bytes);
        self.queue.push_back(Output::Effect(Effect::Write { conn, len: self.bytes.len() - start }));
    }

    /// Takes the next output; for a write, its bytes replace the contents of `tx`.
    pub fn poll(&mut self, tx: &mut Vec<u8>) -> Option<Output<L, C, E>> {
        let out = self.queue.pop_front()?;
        if let Output::Effect(Effect::Write { len, .. }) = out {
            tx.clear();
            tx.extend_from_slice(&self.bytes[self.head..self.head + len]);
            self.head += len;
        }
        if self.queue.is_empty() {
            // Nothing queued refers to the buffer any more: reuse it from the start. The queue
            // starts over too (`clear` rewinds a VecDeque, `pop_front` does not): once grown, a
            // ring that kept its place would walk its whole capacity, a cold line every output.
            self.queue.clear();
            self.bytes.clear();
            self.head = 0;
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Out = Output<u8, (), &'static str>;

    #[test]
    fn writes_come_out_in_order_with_their_own_bytes_and_the_buffer_is_reused() {
        let mut o: Outbox<u8, (), &'static str> = Outbox::default();
        o.write(ConnId(1), |b| b.extend_from_slice(b"abc"));
        o.effect(Effect::Close { conn: ConnId(1) });
        o.event("sent");
        o.write(ConnId(2), |b| b.extend_from_slice(b"de"));
        o.completed(());
        let mut tx = b"stale".to_vec();
        assert_eq!(o.poll(&mut tx), Some(Out::Effect(Effect::Write { conn: ConnId(1), len: 3 })));
        assert_eq!(tx, b"abc");
        assert_eq!(o.poll(&mut tx), Some(Out::Effect(Effect::Close { conn: ConnId(1) })));
        assert_eq!(o.poll(&mut tx), Some(Out::Observe(Observation::Event("sent"))));
        assert_eq!(o.poll(&mut tx), Some(Out::Effect(Effect::Write { conn: ConnId(2), len: 2 })));
        assert_eq!(tx, b"de");
        assert_eq!(o.poll(&mut tx), Some(Out::Observe(Observation::Completed(()))));
        assert_eq!(o.poll(&mut tx), None);
        let cap = o.bytes.capacity();
        o.write(ConnId(3), |b| b.extend_from_slice(b"fg"));
        assert_eq!((o.head, o.bytes.len(), o.bytes.capacity()), (0, 2, cap), "drained, the buffer starts over");
        (0..3).for_each(|_| o.event("more"));
        assert!(o.queue.as_slices().1.is_empty(), "drained, the queue starts over at its first slot");
    }
}
