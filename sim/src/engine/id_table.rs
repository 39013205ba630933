//! A map from kernel sockets to what the fast engine keeps for each, fitted to how sockets are
//! numbered: `SockId`s grow with the connections made (two per connection), most connections
//! live briefly, a few (a ring's) for the whole run. The recent ones sit in a window indexed by
//! id (an index instead of a hash lookup on every packet's read); one that stays open while
//! [`WINDOW`] newer sockets are made moves to a hash map, so memory follows the sockets open,
//! not every socket the run ever made (2.2 M at 1024 ranks).

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::kernel::SockId;

/// How many consecutive socket ids the window spans.
const WINDOW: usize = 1 << 14;

/// Values `V` by open socket.
#[derive(Debug)]
pub(crate) struct SockTable<V> {
    /// The id of `window[0]`.
    base: u64,
    /// Sockets `base..base + window.len()`, `None` where not held.
    window: VecDeque<Option<V>>,
    /// Sockets below `base` still held.
    old: FxHashMap<u64, V>,
}

impl<V> Default for SockTable<V> {
    fn default() -> Self {
        SockTable { base: 0, window: VecDeque::new(), old: FxHashMap::default() }
    }
}

impl<V: Copy> SockTable<V> {
    /// The value held for `sock`.
    pub(crate) fn get(&self, sock: SockId) -> Option<V> {
        match sock.0.checked_sub(self.base) {
            Some(i) => usize::try_from(i).ok().and_then(|i| self.window.get(i)).copied().flatten(),
            None => self.old.get(&sock.0).copied(),
        }
    }

    /// Holds `value` for `sock`, replacing what was held.
    pub(crate) fn insert(&mut self, sock: SockId, value: V) {
        if self.window.is_empty() {
            self.base = sock.0;
        }
        let Some(i) = sock.0.checked_sub(self.base) else {
            self.old.insert(sock.0, value);
            return;
        };
        let i = usize::try_from(i).expect("socket ids fit in memory");
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

    /// Stops holding `sock`.
    pub(crate) fn remove(&mut self, sock: SockId) {
        match sock.0.checked_sub(self.base) {
            Some(i) => {
                if let Some(slot) = usize::try_from(i).ok().and_then(|i| self.window.get_mut(i)) {
                    *slot = None;
                }
                self.trim();
            }
            None => {
                self.old.remove(&sock.0);
            }
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
    fn it_agrees_with_a_map_whether_sockets_are_recent_or_long_open() {
        let mut t = SockTable::default();
        let mut m = BTreeMap::new();
        // A long-lived socket, then many short ones around it, some accepted out of order.
        t.insert(SockId(3), 33);
        m.insert(3, 33);
        let mut x = 1u64;
        for id in 4..(3 * WINDOW as u64) {
            t.insert(SockId(id), id);
            m.insert(id, id);
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let gone = id.saturating_sub(x >> 60);
            if gone != 3 && x & 1 == 0 {
                t.remove(SockId(gone));
                m.remove(&gone);
            }
        }
        t.insert(SockId(5), 55);
        m.insert(5, 55);
        for id in 0..(3 * WINDOW as u64 + 2) {
            assert_eq!(t.get(SockId(id)), m.get(&id).copied(), "socket {id}");
        }
        t.remove(SockId(3));
        assert_eq!(t.get(SockId(3)), None);
        assert!(t.window.len() <= WINDOW);
    }
}
