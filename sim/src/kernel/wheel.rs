//! A timer wheel for the retransmission timers: most are stale when they come due, so they pile
//! up (100 000 at 1024 ranks), and a binary heap that large pays a cache miss per level on each
//! pop. Entries are filed by time into buckets of `2^SHIFT` ns; only the earliest bucket is
//! kept as a (small, cache-resident) heap. Entries come out in exactly the order a single heap
//! would give them: by their key, which is unique.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Bucket width: 2^20 ns (about 1 ms).
const SHIFT: u32 = 20;
/// Buckets on the wheel (about 4.3 s ahead); later entries wait in the overflow heap.
const SLOTS: usize = 4096;
const WORDS: usize = SLOTS / 64;

/// Something filed by time: its bucket is `at_ns() >> SHIFT`.
pub(crate) trait Timed: Ord + Copy {
    /// When it is due, in nanoseconds.
    fn at_ns(&self) -> u64;
}

fn bucket<T: Timed>(e: &T) -> u64 {
    e.at_ns() >> SHIFT
}

/// A min-queue of `T` by `Ord`, fast when most entries are far ahead.
#[derive(Debug)]
pub(crate) struct Wheel<T> {
    /// Every entry whose bucket is below `horizon`; empty only if the whole wheel is.
    near: BinaryHeap<Reverse<T>>,
    horizon: u64,
    /// Entries of buckets `horizon .. horizon + SLOTS`, slot `bucket % SLOTS`, unordered.
    ring: Vec<Vec<Reverse<T>>>,
    /// Which slots of `ring` hold entries.
    full: [u64; WORDS],
    in_ring: usize,
    /// Entries of buckets from `horizon + SLOTS` on.
    overflow: BinaryHeap<Reverse<T>>,
}

impl<T: Timed> Default for Wheel<T> {
    fn default() -> Self {
        Wheel {
            near: BinaryHeap::new(),
            horizon: 0,
            ring: (0..SLOTS).map(|_| Vec::new()).collect(),
            full: [0; WORDS],
            in_ring: 0,
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
            overflow: BinaryHeap::new(),
        }
    }

    /// Empties the wheel into the state `default` makes, keeping the ring's 4 096 slots
    /// (making and dropping them was an eighth of a 2-rank run). Only the slots marked full
    /// hold entries, and those give up their buffers, as a drained slot does.
    pub(crate) fn clear(&mut self) {
        for (w, bits) in self.full.iter_mut().enumerate() {
            while *bits != 0 {
                let slot = w * 64 + bits.trailing_zeros() as usize;
                self.ring[slot] = Vec::new();
                *bits &= *bits - 1;
            }
        }
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
            self.ring[slot].push(Reverse(e));
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
        // The slot gives up its buffer (and the drained heap its own): slots that kept their
        // buffers would each hold the largest bucket they ever had, megabytes in all.
        let entries = std::mem::take(&mut self.ring[slot]);
        self.in_ring -= entries.len();
        self.near = BinaryHeap::from(entries);
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
    fn a_cleared_wheel_is_a_new_one() {
        let mut w = Wheel::default();
        for (i, at) in [5u64, 1 << 22, 1 << 31, 1 << 36, 3 << 25].into_iter().enumerate() {
            w.push(E(at, i as u64));
        }
        w.pop();
        w.clear();
        let new = Wheel::<E>::default();
        assert!(w.has_ring() && w.ring.iter().all(|s| s.capacity() == 0));
        assert_eq!((w.horizon, w.in_ring, w.full, w.near.len(), w.overflow.len()), (0, 0, new.full, 0, 0));
        assert_eq!(w.peek(), None);
        w.push(E(7, 9));
        assert_eq!(w.pop(), Some(E(7, 9)));
        assert!(!Wheel::<E>::placeholder().has_ring());
    }
}
