//! The kernel's connections by number. Numbers are handed out in order from 0 and never reused
//! (a socket's number is in the trace), most connections live briefly and a few (a ring's, a
//! persistent transport's, a late accept's) for the whole run, so a slot per number ever made
//! grew to 17 M slots (137 MB) at 4096 ranks while a few thousand were open. The slots are kept
//! in pages of [`PAGE`] numbers instead: a page whose connections are all gone is freed, so
//! memory follows the pages that still hold an open connection, and a lookup stays two indexes.

use std::collections::VecDeque;

/// Numbers per page (a page is 8 bytes a number: 32 KiB).
pub(crate) const PAGE: usize = 4096;

/// One page: the slots of numbers `page * PAGE..`, filled up to the next number.
#[derive(Debug)]
struct Page<T> {
    /// `None` where the connection is finished; empty (no room) once the page is freed.
    slots: Vec<Option<T>>,
    /// Slots holding a connection.
    live: u32,
}

impl<T> Page<T> {
    fn new(slots: Vec<Option<T>>) -> Page<T> {
        Page { slots, live: 0 }
    }
}

/// Values by number; see the module's notes.
#[derive(Debug)]
pub(crate) struct ConnTable<T> {
    /// The page number of `pages[0]`: leading freed pages are dropped.
    base: u64,
    /// Pages `base..`, the last one being filled.
    pages: VecDeque<Page<T>>,
    /// The next number.
    next: u64,
    /// A freed page's emptied slots, for the next page.
    spare: Vec<Option<T>>,
}

impl<T> Default for ConnTable<T> {
    fn default() -> Self {
        ConnTable { base: 0, pages: VecDeque::new(), next: 0, spare: Vec::new() }
    }
}

impl<T> ConnTable<T> {
    /// The number the next [`ConnTable::push`] gives.
    pub(crate) fn next_id(&self) -> u64 {
        self.next
    }

    /// Holds `value` under the next number; returns that number.
    pub(crate) fn push(&mut self, value: T) -> u64 {
        let id = self.next;
        let slot = (id % PAGE as u64) as usize;
        if slot == 0 || self.pages.is_empty() {
            if self.pages.is_empty() {
                self.base = id / PAGE as u64;
            }
            let mut slots = std::mem::take(&mut self.spare);
            slots.reserve_exact(if id == 0 { 16 } else { PAGE });
            // Only a table whose every page was freed starts a page past its first slot.
            slots.resize_with(slot, || None);
            self.pages.push_back(Page::new(slots));
        }
        let page = self.pages.back_mut().expect("a page being filled");
        if page.slots.len() == page.slots.capacity() {
            // The first page grows as needed (a small run makes a few connections); later ones
            // were made whole.
            page.slots.reserve_exact(page.slots.len().max(16).min(PAGE - page.slots.len()));
        }
        page.slots.push(Some(value));
        page.live += 1;
        self.next += 1;
        id
    }

    /// The page holding `id` and `id`'s slot in it.
    fn locate(&self, id: u64) -> Option<(usize, usize)> {
        let page = usize::try_from((id / PAGE as u64).checked_sub(self.base)?).ok()?;
        Some((page, (id % PAGE as u64) as usize))
    }

    /// The value held for `id`.
    pub(crate) fn get(&self, id: u64) -> Option<&T> {
        let (page, slot) = self.locate(id)?;
        self.pages.get(page)?.slots.get(slot)?.as_ref()
    }

    /// The value held for `id`, mutably.
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        let (page, slot) = self.locate(id)?;
        self.pages.get_mut(page)?.slots.get_mut(slot)?.as_mut()
    }

    /// Whether a value is held for `id`.
    pub(crate) fn contains(&self, id: u64) -> bool {
        self.get(id).is_some()
    }

    /// Stops holding `id` (its number is not given again); returns what was held. A full page
    /// left with nothing is freed, and the pages before the first one holding anything dropped.
    pub(crate) fn remove(&mut self, id: u64) -> Option<T> {
        let (i, slot) = self.locate(id)?;
        let page = self.pages.get_mut(i)?;
        let held = page.slots.get_mut(slot)?.take()?;
        page.live -= 1;
        let full = page.slots.len() == PAGE;
        if page.live == 0 && full {
            let mut slots = std::mem::take(&mut page.slots);
            if self.spare.capacity() == 0 {
                slots.clear();
                self.spare = slots;
            }
            while self.pages.front().is_some_and(|p| p.live == 0 && p.slots.capacity() == 0) {
                self.pages.pop_front();
                self.base += 1;
            }
        }
        Some(held)
    }

    /// Pages held (for the tests: memory follows these, not the numbers made).
    #[cfg(test)]
    fn pages_held(&self) -> usize {
        self.pages.iter().filter(|p| p.slots.capacity() > 0).count()
    }

    /// Every value dropped and numbering restarted from 0, keeping the first page's room when
    /// it has no more than `max` slots (a sweep's next small run on this thread reuses it).
    pub(crate) fn emptied(mut self, max: usize) -> Self {
        let mut slots = self.pages.pop_front().map_or(std::mem::take(&mut self.spare), |p| p.slots);
        if slots.capacity() > max {
            slots = Vec::new();
        }
        slots.clear();
        ConnTable { base: 0, pages: VecDeque::new(), next: 0, spare: slots }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn numbers_are_dense_from_zero_and_a_page_is_freed_when_its_last_connection_goes() {
        let mut t: ConnTable<u64> = ConnTable::default();
        for id in 0..3 * PAGE as u64 {
            assert_eq!((t.next_id(), t.push(id * 10)), (id, id));
        }
        // A long-lived connection in the second page keeps only that page.
        for id in 0..3 * PAGE as u64 {
            if id != PAGE as u64 + 7 {
                assert_eq!(t.remove(id), Some(id * 10));
            }
        }
        // The third page is full (its last number handed out) and empty: freed.
        assert_eq!(t.pages_held(), 1);
        assert_eq!(t.get(PAGE as u64 + 7), Some(&(PAGE as u64 * 10 + 70)));
        assert_eq!((t.get(0), t.get(3 * PAGE as u64)), (None, None));
        assert_eq!(t.remove(0), None);
        assert_eq!(t.remove(PAGE as u64 + 7), Some(PAGE as u64 * 10 + 70));
        assert_eq!((t.pages_held(), t.pages.len()), (0, 0));
        // Numbers go on from where they were, never reused.
        assert_eq!(t.push(1), 3 * PAGE as u64);
        assert_eq!(t.get(3 * PAGE as u64), Some(&1));
        let t = t.emptied(PAGE);
        assert_eq!((t.next_id(), t.get(0)), (0, None));
    }

    #[test]
    fn a_page_being_filled_is_kept_when_emptied() {
        let mut t: ConnTable<u32> = ConnTable::default();
        for i in 0..10 {
            t.push(i);
        }
        for i in 0..10 {
            assert_eq!(t.remove(u64::from(i)), Some(i));
        }
        assert_eq!(t.push(99), 10);
        assert_eq!(t.get(10), Some(&99));
        let mut t = t.emptied(PAGE);
        assert!(t.spare.capacity() >= 11);
        assert_eq!(t.push(5), 0);
        assert_eq!(t.get(0), Some(&5));
    }

    #[test]
    fn random_connections_agree_with_a_map_and_memory_follows_the_open_ones() {
        use std::collections::BTreeSet;

        use rand_core::{Rng, SeedableRng};
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut t: ConnTable<u64> = ConnTable::default();
        let mut m = BTreeMap::new();
        // When each open connection ends: (step, number).
        let mut ends = BTreeSet::new();
        for step in 0..200_000u64 {
            let x = r.next_u64();
            if x % 100 < 60 {
                let id = t.push(step);
                m.insert(id, step);
                // Most live a few steps, in any order; one in 30 000 for the whole run.
                if x % 30_000 != 7 {
                    ends.insert((step + (x >> 32) % 200, id));
                }
            }
            while let Some(&(at, id)) = ends.first() {
                if at > step {
                    break;
                }
                ends.pop_first();
                assert_eq!(t.remove(id), m.remove(&id), "removing {id} at step {step}");
                assert_eq!(t.remove(id), None, "removing {id} again at step {step}");
            }
            let probe = (x >> 8) % (t.next_id() + 2);
            assert_eq!(t.get(probe), m.get(&probe), "number {probe} at step {step}");
            assert_eq!(t.contains(probe), m.contains_key(&probe));
            if let Some(v) = t.get_mut(probe) {
                *v += 1;
                *m.get_mut(&probe).unwrap() += 1;
            }
            if step % 1000 == 0 {
                for (&id, v) in &m {
                    assert_eq!(t.get(id), Some(v), "held number {id} at step {step}");
                }
                // Only pages with an open connection (and the one being filled) are held.
                let open_pages = m.keys().map(|id| id / PAGE as u64).collect::<BTreeSet<_>>();
                assert!(t.pages_held() <= open_pages.len() + 1, "{} pages at step {step}", t.pages_held());
            }
        }
        // About 120 000 numbers made (30 pages), a few long held: a few pages held.
        assert!(t.next_id() > 100_000);
        assert!(t.pages_held() <= 8, "{} pages held", t.pages_held());
        for id in 0..t.next_id() + 2 {
            assert_eq!(t.get(id), m.get(&id), "number {id}");
        }
    }
}
