//! Containers a run hands, emptied, to the next run on its thread: a small run grew them from
//! nothing, and a sweep's thousands of small runs paid for that every time. Only containers with
//! room for at most [`ROOM`] entries are kept (entries, not bytes: a few MiB a thread at most),
//! so a thread holds little after a large run; a kept container is never iterated for its order
//! (a kept hash map's order would depend on its room).

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;

/// The most entries a container kept for the next run may have room for.
pub(crate) const ROOM: usize = 4096;

/// A container that can be emptied and kept.
pub(crate) trait Reusable: Default {
    /// Entries it has room for.
    fn room(&self) -> usize;
    /// Removes every entry, keeping the room.
    fn empty(&mut self);
}

impl<T> Reusable for Vec<T> {
    fn room(&self) -> usize {
        self.capacity()
    }
    fn empty(&mut self) {
        self.clear();
    }
}

impl<T> Reusable for VecDeque<T> {
    fn room(&self) -> usize {
        self.capacity()
    }
    fn empty(&mut self) {
        self.clear();
    }
}

impl<K, V, S: BuildHasher + Default> Reusable for HashMap<K, V, S> {
    fn room(&self) -> usize {
        self.capacity()
    }
    fn empty(&mut self) {
        self.clear();
    }
}

/// `c` emptied, or a new one if it has room for more than `max` entries.
pub(crate) fn emptied_within<C: Reusable>(mut c: C, max: usize) -> C {
    if c.room() > max {
        return C::default();
    }
    c.empty();
    c
}

/// `c` emptied, or a new one if it has room for more than [`ROOM`] entries.
pub(crate) fn emptied<C: Reusable>(c: C) -> C {
    emptied_within(c, ROOM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_container_is_kept_empty_and_a_large_one_is_dropped() {
        let mut v: Vec<u32> = Vec::with_capacity(16);
        v.extend(0..10);
        let v = emptied(v);
        assert!(v.is_empty() && v.capacity() >= 16);
        let big: Vec<u32> = (0..ROOM as u32 + 1).collect();
        assert_eq!(emptied(big).capacity(), 0);
        let mut m: rustc_hash::FxHashMap<u32, u32> = Default::default();
        m.insert(1, 2);
        let m = emptied(m);
        assert!(m.is_empty() && m.capacity() > 0);
        assert_eq!(emptied_within(vec![0u8; 100], 64).capacity(), 0);
    }
}
