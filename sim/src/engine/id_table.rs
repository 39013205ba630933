//! A map from numbered things to what the fast engine keeps for each, fitted to how they are
//! numbered: a node's own connections (its sockets by connection) are numbered as they are
//! made, most live briefly, a few (a ring's) for the whole run. The recent ones sit in a window
//! indexed by number (an index where a hash lookup ran on every write); one that stays open
//! while `WINDOW` newer ones are made moves to a hash map, so memory follows what is open, not
//! everything the run ever made. (A socket's owner needs no map: the kernel returns it, the
//! socket's token, with each event.)

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

/// Values `V` by number, the last `WINDOW` numbers in a window.
#[derive(Debug)]
pub(crate) struct IdTable<V, const WINDOW: usize> {
    /// The number of `window[0]`.
    base: u64,
    /// Numbers `base..base + window.len()`, `None` where not held.
    window: VecDeque<Option<V>>,
    /// Numbers below `base` still held (`base` never moves back, so a number once moved here is
    /// looked up here).
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
            // A lower number than the window's start goes to `old`: moving the start back would
            // hide the numbers already there.
            self.base = self.base.max(id);
        }
        let Some(i) = id.checked_sub(self.base) else {
            self.old.insert(id, value);
            return;
        };
        let i = usize::try_from(i).expect("numbers in use fit in memory");
        // The usual case is the next number: one push, where `resize` took its general path.
        // The window's front stays held unless the window slides (an emptied window's new
        // start is `id` itself), so only a slide needs a trim.
        match i.cmp(&self.window.len()) {
            std::cmp::Ordering::Less => self.window[i] = Some(value),
            std::cmp::Ordering::Equal => self.window.push_back(Some(value)),
            std::cmp::Ordering::Greater => {
                self.window.resize(i, None);
                self.window.push_back(Some(value));
            }
        }
        if self.window.len() > WINDOW {
            while self.window.len() > WINDOW {
                if let Some(Some(v)) = self.window.pop_front() {
                    self.old.insert(self.base, v);
                }
                self.base += 1;
            }
            self.trim();
        }
    }

    /// Stops holding `id`; returns what was held.
    pub(crate) fn remove(&mut self, id: u64) -> Option<V> {
        match id.checked_sub(self.base) {
            Some(i) => {
                let held = usize::try_from(i).ok().and_then(|i| self.window.get_mut(i)).and_then(Option::take);
                if i == 0 {
                    // Only the front's removal can leave empty slots leading.
                    self.trim();
                }
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

    #[test]
    fn a_number_below_an_emptied_window_does_not_hide_the_long_held_ones() {
        let mut t: IdTable<u64, 16> = IdTable::default();
        t.insert(2, 22);
        for id in 3..=30 {
            t.insert(id, id);
        }
        for id in 3..=30 {
            assert_eq!(t.remove(id), Some(id));
        }
        // A late number (an accept whose id was set aside before 16 newer ones were made).
        t.insert(1, 11);
        assert_eq!((t.get(2), t.get(1)), (Some(22), Some(11)));
        assert_eq!((t.remove(2), t.remove(1)), (Some(22), Some(11)));
        assert_eq!((t.get(2), t.get(1)), (None, None));
    }

    #[test]
    fn random_inserts_and_removes_agree_with_a_map() {
        use rand_core::{Rng, SeedableRng};
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut t: IdTable<u64, 8> = IdTable::default();
        let mut m = BTreeMap::new();
        let mut next = 0u64;
        for step in 0..10_000u64 {
            let x = r.next_u64();
            if x % 100 < 45 {
                // A new number, or now and then one from well before (a late accept).
                let id = if x % 9 == 0 { next.saturating_sub((x >> 40) % 64) } else { next };
                next += 1;
                t.insert(id, step);
                m.insert(id, step);
            } else if !m.is_empty() {
                // Mostly a recent number; every tenth is long held (rarely closed).
                let recent: Vec<u64> = m.range(next.saturating_sub(12)..).map(|(&k, _)| k).collect();
                let id = match recent.len() {
                    0 => *m.keys().nth((x >> 32) as usize % m.len()).unwrap(),
                    n => recent[(x >> 32) as usize % n],
                };
                if id % 10 != 0 || x % 20 == 0 {
                    assert_eq!(t.remove(id), m.remove(&id), "removing {id} at step {step}");
                }
            }
            assert!(t.window.front().is_none_or(Option::is_some), "the window starts at a held number");
            let probe = (x >> 16) % (next + 1);
            assert_eq!(t.get(probe), m.get(&probe).copied(), "number {probe} at step {step}");
            for (&id, &v) in &m {
                assert_eq!(t.get(id), Some(v), "held number {id} at step {step}");
            }
        }
        for id in 0..next {
            assert_eq!(t.get(id), m.get(&id).copied(), "number {id}");
        }
    }
}
