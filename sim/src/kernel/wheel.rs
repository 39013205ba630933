//! A timer wheel for the retransmission timers: most are stale when they come due, so they pile
//! up (100 000 at 1024 ranks), and a binary heap that large pays a cache miss per level on each
//! pop. Entries are filed by time into buckets of `2^SHIFT` ns; only the earliest bucket is
//! kept as a (small, cache-resident) heap. Entries come out in exactly the order a single heap
//! would give them: by their key, which is unique.
//!
//! A bucket's entries are kept in chunks of [`CHUNK`] from one pool, linked from the slot, and a
//! drained bucket's chunks go back to the pool's free list, last freed first out: the next
//! entries filed are written where the drain just read (a `Vec` per slot grew from nothing for
//! each bucket, reallocating and copying cold memory, a quarter of a 256-rank run's cache
//! misses).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::spare::{emptied_within, ROOM};

/// Bucket width: 2^20 ns (about 1 ms).
const SHIFT: u32 = 20;
/// Buckets on the wheel (about 4.3 s ahead); later entries wait in the overflow heap.
const SLOTS: usize = 4096;
const WORDS: usize = SLOTS / 64;
/// Entries per chunk.
const CHUNK: usize = 16;
/// No chunk: the end of a slot's list, or of the free list.
const NONE: u32 = u32::MAX;

/// Something filed by time: its bucket is `at_ns() >> SHIFT`.
pub(crate) trait Timed: Ord + Copy {
    /// When it is due, in nanoseconds.
    fn at_ns(&self) -> u64;
}

fn bucket<T: Timed>(e: &T) -> u64 {
    e.at_ns() >> SHIFT
}

/// Up to [`CHUNK`] entries of one bucket, and the chunk filed before them.
#[derive(Clone, Copy, Debug)]
struct Chunk<T> {
    next: u32,
    items: [T; CHUNK],
}

/// A slot's entries: its newest chunk (`NONE` if empty) and how many entries that chunk holds
/// (every older chunk is full).
#[derive(Clone, Copy, Debug)]
struct Slot {
    head: u32,
    len: u32,
}

const EMPTY: Slot = Slot { head: NONE, len: 0 };

/// A min-queue of `T` by `Ord`, fast when most entries are far ahead.
#[derive(Debug)]
pub(crate) struct Wheel<T> {
    /// Every entry whose bucket is below `horizon`; empty only if the whole wheel is.
    near: BinaryHeap<Reverse<T>>,
    horizon: u64,
    /// Entries of buckets `horizon .. horizon + SLOTS`, slot `bucket % SLOTS`, unordered.
    ring: Vec<Slot>,
    /// Which slots of `ring` hold entries.
    full: [u64; WORDS],
    in_ring: usize,
    /// Every chunk made; those on no slot's list are on the free list from `free`.
    chunks: Vec<Chunk<T>>,
    free: u32,
    /// Entries of buckets from `horizon + SLOTS` on.
    overflow: BinaryHeap<Reverse<T>>,
}

impl<T: Timed> Default for Wheel<T> {
    fn default() -> Self {
        Wheel {
            near: BinaryHeap::new(),
            horizon: 0,
            ring: vec![EMPTY; SLOTS],
            full: [0; WORDS],
            in_ring: 0,
            chunks: Vec::new(),
            free: NONE,
            overflow: BinaryHeap::new(),
        }
    }
}

impl<T: Timed> Wheel<T> {
    /// A wheel without its ring, which must not be used: what is left in a kernel being
    /// dropped after its wheel was taken to be reused ([`Wheel::clear`]).
    pub(crate) fn placeholder() -> Self {
        Wheel {
            near: BinaryHeap::new(),
            horizon: 0,
            ring: Vec::new(),
            full: [0; WORDS],
            in_ring: 0,
            chunks: Vec::new(),
            free: NONE,
            overflow: BinaryHeap::new(),
        }
    }

    /// Empties the wheel into the state `default` makes, keeping the ring's 4 096 slots
    /// (making and dropping them was an eighth of a 2-rank run) and the chunks' room while it
    /// is small (the rule of `crate::spare`).
    pub(crate) fn clear(&mut self) {
        for (w, bits) in self.full.iter_mut().enumerate() {
            while *bits != 0 {
                self.ring[w * 64 + bits.trailing_zeros() as usize] = EMPTY;
                *bits &= *bits - 1;
            }
        }
        self.chunks = emptied_within(std::mem::take(&mut self.chunks), ROOM / CHUNK);
        self.free = NONE;
        (self.near, self.horizon, self.in_ring, self.overflow) = (BinaryHeap::new(), 0, 0, BinaryHeap::new());
    }

    /// Whether this is a whole wheel (not a [`Wheel::placeholder`]).
    pub(crate) fn has_ring(&self) -> bool {
        self.ring.len() == SLOTS
    }

    /// The earliest entry.
    pub(crate) fn peek(&self) -> Option<&T> {
        self.near.peek().map(|Reverse(e)| e)
    }

    /// Add `e`.
    pub(crate) fn push(&mut self, e: T) {
        let b = bucket(&e);
        if b < self.horizon {
            self.near.push(Reverse(e));
            return;
        }
        self.file(e, b);
        if self.near.is_empty() {
            self.refill();
        }
    }

    /// Remove and return the earliest entry.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let Reverse(e) = self.near.pop()?;
        if self.near.is_empty() {
            self.refill();
        }
        Some(e)
    }

    /// File `e` (of bucket `b >= horizon`) on the ring or in the overflow heap.
    fn file(&mut self, e: T, b: u64) {
        if b - self.horizon < SLOTS as u64 {
            let slot = (b % SLOTS as u64) as usize;
            let s = &mut self.ring[slot];
            if s.head != NONE && (s.len as usize) < CHUNK {
                self.chunks[s.head as usize].items[s.len as usize] = e;
                s.len += 1;
            } else {
                let next = s.head;
                let c = if self.free != NONE {
                    let c = self.free;
                    let chunk = &mut self.chunks[c as usize];
                    self.free = chunk.next;
                    chunk.next = next;
                    chunk.items[0] = e;
                    c
                } else {
                    self.chunks.push(Chunk { next, items: [e; CHUNK] });
                    (self.chunks.len() - 1) as u32
                };
                *s = Slot { head: c, len: 1 };
            }
            self.full[slot / 64] |= 1 << (slot % 64);
            self.in_ring += 1;
        } else {
            self.overflow.push(Reverse(e));
        }
    }

    /// With `near` empty: make the earliest non-empty bucket the near heap.
    fn refill(&mut self) {
        if self.in_ring == 0 {
            let Some(Reverse(first)) = self.overflow.peek() else {
                return;
            };
            self.horizon = bucket(first);
            self.migrate();
        }
        let b = self.horizon + self.next_full();
        let slot = (b % SLOTS as u64) as usize;
        self.full[slot / 64] &= !(1 << (slot % 64));
        // The bucket's chunks are copied into the (empty) near heap's buffer and freed, newest
        // first, so the one read last is the next taken.
        let Slot { mut head, mut len } = std::mem::replace(&mut self.ring[slot], EMPTY);
        let mut near = std::mem::take(&mut self.near).into_vec();
        while head != NONE {
            let chunk = &mut self.chunks[head as usize];
            near.extend(chunk.items[..len as usize].iter().map(|&e| Reverse(e)));
            let next = std::mem::replace(&mut chunk.next, self.free);
            self.free = head;
            (head, len) = (next, CHUNK as u32);
        }
        self.in_ring -= near.len();
        self.near = BinaryHeap::from(near);
        self.horizon = b + 1;
        self.migrate();
    }

    /// Buckets from `horizon` to the first non-empty slot (the ring must hold an entry).
    fn next_full(&self) -> u64 {
        let start = (self.horizon % SLOTS as u64) as usize;
        for step in 0..=WORDS {
            let w = (start / 64 + step) % WORDS;
            let mut bits = self.full[w];
            if step == 0 {
                bits &= u64::MAX << (start % 64);
            } else if step == WORDS {
                bits &= !(u64::MAX << (start % 64));
            }
            if bits != 0 {
                let slot = w * 64 + bits.trailing_zeros() as usize;
                return ((slot + SLOTS - start) % SLOTS) as u64;
            }
        }
        unreachable!("next_full called on an empty ring")
    }

    /// Move overflow entries that now fall on the ring onto it.
    fn migrate(&mut self) {
        while let Some(Reverse(e)) = self.overflow.peek().copied() {
            let b = bucket(&e);
            if b - self.horizon >= SLOTS as u64 {
                return;
            }
            self.overflow.pop();
            self.file(e, b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::{Rng, SeedableRng};

    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct E(u64, u64);
    impl Timed for E {
        fn at_ns(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn gives_entries_in_the_order_a_heap_does() {
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let (mut w, mut h) = (Wheel::default(), BinaryHeap::new());
        let (mut now, mut seq) = (0u64, 0u64);
        for _ in 0..200_000 {
            if r.next_u64() % 100 < 55 {
                // Near, on the ring, and far past it (overflow), all at or after now.
                let ahead = match r.next_u64() % 3 {
                    0 => r.next_u64() % (1 << 22),
                    1 => r.next_u64() % (1 << 31),
                    _ => r.next_u64() % (1 << 36),
                };
                seq += 1;
                w.push(E(now + ahead, seq));
                h.push(Reverse(E(now + ahead, seq)));
            } else {
                let got = w.pop();
                assert_eq!(got, h.pop().map(|Reverse(e)| e));
                if let Some(e) = got {
                    now = e.0;
                }
            }
            assert_eq!(w.peek(), h.peek().map(|Reverse(e)| e));
        }
        while let Some(Reverse(e)) = h.pop() {
            assert_eq!(w.pop(), Some(e));
        }
        assert_eq!(w.pop(), None);
    }

    #[test]
    fn drained_chunks_are_filed_into_again() {
        // A steady state: each bucket gets 40 entries (three chunks) while the one 100 buckets
        // earlier drains; the pool holds what is live, not every bucket ever filed.
        let mut w = Wheel::default();
        let (mut seq, width) = (0u64, 1u64 << SHIFT);
        for b in 0..2_000u64 {
            for i in 0..40 {
                seq += 1;
                w.push(E((b + 100) * width + i, seq));
            }
            while w.peek().is_some_and(|e| e.0 < (b + 1) * width) {
                w.pop();
            }
        }
        assert!(w.chunks.len() <= 101 * 3 + 3, "{} chunks", w.chunks.len());
        let mut last = 0;
        while let Some(e) = w.pop() {
            assert!(e.0 >= last);
            last = e.0;
        }
        assert_eq!(w.in_ring, 0);
    }

    #[test]
    fn a_cleared_wheel_is_a_new_one() {
        let mut w = Wheel::default();
        for (i, at) in [5u64, 1 << 22, 1 << 31, 1 << 36, 3 << 25].into_iter().enumerate() {
            w.push(E(at, i as u64));
        }
        w.pop();
        w.clear();
        let new = Wheel::<E>::default();
        assert!(w.has_ring() && w.ring.iter().all(|s| s.head == NONE));
        assert_eq!((w.horizon, w.in_ring, w.full, w.near.len(), w.overflow.len()), (0, 0, new.full, 0, 0));
        assert_eq!((w.chunks.len(), w.free), (0, NONE));
        assert_eq!(w.peek(), None);
        w.push(E(7, 9));
        assert_eq!(w.pop(), Some(E(7, 9)));
        assert!(!Wheel::<E>::placeholder().has_ring());
    }
}
