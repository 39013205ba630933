//! The kernel's connections by number. Numbers are handed out in order from 0 and never reused
//! (a socket's number is in the trace), most connections live briefly and a few (a ring's, a
//! persistent transport's, a late accept's) for the whole run, so a slot per number ever made
//! grew to 17 M slots (137 MB) at 4096 ranks while a few thousand were open. The slots are kept
//! in pages of [`PAGE`] numbers instead: a page whose connections are all gone is freed, so
//! memory follows the pages that still hold an open connection (and 16 bytes for each freed page
//! after the first page still held), and a lookup stays two indexes.

/// Numbers per page (a page is 8 bytes a number: 32 KiB).
pub(crate) const PAGE: usize = 4096;

/// The slots of numbers `page * PAGE..`: `None` where not made yet or finished.
type Slots<T> = Box<[Option<T>; PAGE]>;

/// One page of [`ConnTable::pages`].
#[derive(Debug)]
struct Page<T> {
    /// `None` once freed.
    slots: Option<Slots<T>>,
    /// Slots holding a connection.
    live: u32,
}

/// Values by number; see the module's notes.
#[derive(Debug)]
pub(crate) struct ConnTable<T> {
    /// The page number of `pages[0]`: leading freed pages are dropped now and then.
    base: u64,
    /// Pages `base..`, the last one being filled.
    pages: Vec<Page<T>>,
    /// The next number.
    next: u64,
    /// A freed page (all `None`), for the next page.
    spare: Option<Slots<T>>,
}

impl<T> Default for ConnTable<T> {
    fn default() -> Self {
        ConnTable::new()
    }
}

impl<T> ConnTable<T> {
    /// An empty table, numbering from 0.
    pub(crate) const fn new() -> Self {
        ConnTable { base: 0, pages: Vec::new(), next: 0, spare: None }
    }

    /// The number the next [`ConnTable::push`] gives.
    pub(crate) fn next_id(&self) -> u64 {
        self.next
    }

    /// Holds `value` under the next number; returns that number.
    pub(crate) fn push(&mut self, value: T) -> u64 {
        let id = self.next;
        if id.is_multiple_of(PAGE as u64) {
            match self.pages.last_mut() {
                None => self.base = id / PAGE as u64,
                // The page filled last, emptied while being filled.
                Some(last) if last.live == 0 => {
                    self.spare = last.slots.take();
                    self.drop_leading_freed();
                }
                Some(_) => {}
            }
            let slots = self.spare.take().unwrap_or_else(|| {
                let slots: Box<[Option<T>]> = std::iter::repeat_with(|| None).take(PAGE).collect();
                slots.try_into().ok().expect("a page's length")
            });
            self.pages.push(Page { slots: Some(slots), live: 0 });
        }
        let page = self.pages.last_mut().expect("a page being filled");
        page.slots.as_mut().expect("the page being filled is held")[id as usize % PAGE] = Some(value);
        page.live += 1;
        self.next += 1;
        id
    }

    /// The index in `pages` of `id`'s page (past the end if not held).
    fn page(&self, id: u64) -> usize {
        // A number below `base` wraps to far past the end.
        (id / PAGE as u64).wrapping_sub(self.base) as usize
    }

    /// The value held for `id`.
    pub(crate) fn get(&self, id: u64) -> Option<&T> {
        self.pages.get(self.page(id))?.slots.as_ref()?[id as usize % PAGE].as_ref()
    }

    /// The value held for `id`, mutably.
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        let page = self.page(id);
        self.pages.get_mut(page)?.slots.as_mut()?[id as usize % PAGE].as_mut()
    }

    /// Whether a value is held for `id`.
    pub(crate) fn contains(&self, id: u64) -> bool {
        self.get(id).is_some()
    }

    /// Stops holding `id` (its number is not given again); returns what was held. A page whose
    /// numbers are all made and gone is freed (the one being filled, when the next is begun);
    /// once the freed pages leading the table are half of it, they are dropped.
    pub(crate) fn remove(&mut self, id: u64) -> Option<T> {
        let i = self.page(id);
        let page = self.pages.get_mut(i)?;
        let held = page.slots.as_mut()?[id as usize % PAGE].take()?;
        page.live -= 1;
        let emptied = page.live == 0;
        if emptied && i + 1 < self.pages.len() {
            self.spare = self.pages[i].slots.take();
            self.drop_leading_freed();
        }
        Some(held)
    }

    /// Drops the freed pages leading the table once they are half of it.
    fn drop_leading_freed(&mut self) {
        let freed = self.pages.iter().take_while(|p| p.slots.is_none()).count();
        if freed * 2 >= self.pages.len() {
            self.pages.drain(..freed);
            self.base += freed as u64;
        }
    }

    /// Pages held (for the tests: memory follows these, not the numbers made).
    #[cfg(test)]
    fn pages_held(&self) -> usize {
        self.pages.iter().filter(|p| p.slots.is_some()).count()
    }

    /// Every value dropped and numbering restarted from 0, keeping a page (a sweep's next small
    /// run on this thread reuses it) if a page of [`PAGE`] slots is within `max`.
    pub(crate) fn emptied(mut self, max: usize) -> Self {
        let mut spare = self.spare.take();
        if let Some(mut slots) = self.pages.iter_mut().find_map(|p| p.slots.take()) {
            slots.iter_mut().for_each(|s| *s = None);
            spare = Some(slots);
        }
        ConnTable { spare: spare.filter(|_| PAGE <= max), ..ConnTable::default() }
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
        // The third page is being filled: kept though empty.
        assert_eq!(t.pages_held(), 2);
        assert_eq!(t.get(PAGE as u64 + 7), Some(&(PAGE as u64 * 10 + 70)));
        assert_eq!((t.get(0), t.get(3 * PAGE as u64)), (None, None));
        assert_eq!(t.remove(0), None);
        assert_eq!(t.remove(PAGE as u64 + 7), Some(PAGE as u64 * 10 + 70));
        // The leading freed pages are dropped.
        assert_eq!((t.pages_held(), t.pages.len(), t.base), (1, 1, 2));
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
        assert!(t.spare.is_some());
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

    #[test]
    fn connections_each_gone_before_the_next_leave_the_table_small() {
        // Each page is emptied while being filled and freed when the next begins: the entries
        // of freed pages leading the table are dropped then too.
        let mut t: ConnTable<u64> = ConnTable::default();
        for id in 0..50 * PAGE as u64 {
            assert_eq!(t.push(id), id);
            assert_eq!(t.remove(id), Some(id));
            assert!(t.pages.len() <= 2, "{} pages at {id}", t.pages.len());
        }
        assert_eq!(t.get(3), None);
    }
}
