//! A map from numbered things to what the fast engine keeps for each, fitted to how they are
//! numbered: kernel sockets (two per connection) and a node's own connections are numbered as
//! they are made, most live briefly, a few (a ring's) for the whole run. The recent ones sit in
//! a window indexed by number (an index where a hash lookup ran on every packet's read and every
//! write); one that stays open while `WINDOW` newer ones are made moves to a hash map, so memory
//! follows what is open, not everything the run ever made (2.2 M sockets at 1024 ranks).

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

/// Values `V` by number, the last `WINDOW` numbers in a window.
#[derive(Debug)]
pub(crate) struct IdTable<V, const WINDOW: usize> {
    /// The number of `window[0]`.
    base: u64,
    /// Numbers `base..base + window.len()`, `None` where not held.
    window: VecDeque<Option<V>>,
    /// Numbers below `base` still held.
    old: FxHashMap<u64, V>,
}

impl<V, const WINDOW: usize> Default for IdTable<V, WINDOW> {
    fn default() -> Self {
        IdTable { base: 0, window: VecDeque::new(), old: FxHashMap::default() }
    }
}

impl<V: Copy, const WINDOW: usize> IdTable<V, WINDOW> {
    /// The value held for `id`.
    pub(crate) fn get(&self, id: u64) -> Option<V> {
        match id.checked_sub(self.base) {
            Some(i) => usize::try_from(i).ok().and_then(|i| self.window.get(i)).copied().flatten(),
            None => self.old.get(&id).copied(),
        }
    }

    /// Holds `value` for `id`, replacing what was held.
    pub(crate) fn insert(&mut self, id: u64, value: V) {
        if self.window.is_empty() {
            self.base = id;
        }
        let Some(i) = id.checked_sub(self.base) else {
            self.old.insert(id, value);
            return;
        };
        let i = usize::try_from(i).expect("numbers in use fit in memory");
        if i >= self.window.len() {
            self.window.resize(i + 1, None);
        }
        self.window[i] = Some(value);
        while self.window.len() > WINDOW {
            if let Some(Some(v)) = self.window.pop_front() {
                self.old.insert(self.base, v);
            }
            self.base += 1;
        }
        self.trim();
    }

    /// Stops holding `id`; returns what was held.
    pub(crate) fn remove(&mut self, id: u64) -> Option<V> {
        match id.checked_sub(self.base) {
            Some(i) => {
                let held = usize::try_from(i).ok().and_then(|i| self.window.get_mut(i)).and_then(Option::take);
                self.trim();
                held
            }
            None => self.old.remove(&id),
        }
    }

    /// Drops the window's leading empty slots.
    fn trim(&mut self) {
        while let Some(None) = self.window.front() {
            self.window.pop_front();
            self.base += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn it_agrees_with_a_map_whether_numbers_are_recent_or_long_held() {
        const W: usize = 64;
        let mut t: IdTable<u64, W> = IdTable::default();
        let mut m = BTreeMap::new();
        // A long-held number, then many short-lived ones around it, some made out of order.
        t.insert(3, 33);
        m.insert(3, 33);
        let mut x = 1u64;
        for id in 4..(40 * W as u64) {
            t.insert(id, id);
            m.insert(id, id);
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let gone = id.saturating_sub(x >> 58);
            if gone != 3 && x & 1 == 0 {
                assert_eq!(t.remove(gone), m.remove(&gone), "removing {gone}");
            }
        }
        t.insert(5, 55);
        m.insert(5, 55);
        for id in 0..(40 * W as u64 + 2) {
            assert_eq!(t.get(id), m.get(&id).copied(), "number {id}");
        }
        assert_eq!(t.remove(3), Some(33));
        assert_eq!((t.get(3), t.remove(3)), (None, None));
        assert!(t.window.len() <= W);
    }
}
