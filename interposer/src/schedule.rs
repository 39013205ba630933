//! The interposer's queue as a pure state machine: arrivals are numbered (globally and per
//! (sender, receiver) host pair, as the wire numbers them), planned by the policy, held,
//! released, permuted, and handed to the program's accept() in a fixed order. Time is a
//! [`Duration`] since start given by the caller; the same arrivals at the same times give the
//! same order, and the permutation depends only on the seed and the arrival order.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use bootsim_core::accept_policy::{ConnKey, HoldPlan};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use crate::log::{Decision, Event, Release};
use crate::policy::InterposerPolicy;

/// One connection taken from the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// Which listener it came from (the caller's number for it).
    pub listener: u32,
    /// The listener's address, for the log.
    pub local: String,
    /// The peer's address, for the log.
    pub peer: String,
    /// Connecting host.
    pub src_host: u8,
    /// Accepting host.
    pub dst_host: u8,
    /// NVSHMEM's header, when read.
    pub msg: Option<(i32, i32)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Held { since: Duration, until: Duration, until_next: bool },
    Windowed,
    Ready,
    Done,
}

#[derive(Clone, Debug)]
struct Entry {
    key: ConnKey,
    listener: u32,
    state: State,
}

/// The queue of one process.
#[derive(Debug)]
pub struct Schedule {
    policy: InterposerPolicy,
    entries: Vec<Entry>,
    pairs: BTreeMap<(u8, u8), u32>,
    ready: VecDeque<u32>,
    window: Vec<u32>,
    window_since: Duration,
    windows: u32,
    rng: ChaCha8Rng,
    /// Held connections by deadline.
    deadlines: BTreeSet<(Duration, u32)>,
    /// Held-until-next connections by (src, dst) pair.
    waiting: BTreeMap<(u8, u8), BTreeSet<u32>>,
    /// Connections not yet handed over, per listener.
    pending: BTreeMap<u32, usize>,
}

impl Schedule {
    /// An empty queue under `policy`.
    pub fn new(policy: InterposerPolicy) -> Self {
        let seed = policy.permute.map_or(0, |p| p.seed);
        Schedule {
            policy,
            entries: Vec::new(),
            pairs: BTreeMap::new(),
            ready: VecDeque::new(),
            window: Vec::new(),
            window_since: Duration::ZERO,
            windows: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            deadlines: BTreeSet::new(),
            waiting: BTreeMap::new(),
            pending: BTreeMap::new(),
        }
    }

    /// The policy.
    pub fn policy(&self) -> &InterposerPolicy {
        &self.policy
    }

    /// Numbers and plans a new connection; returns its number and the decisions made.
    pub fn arrive(&mut self, now: Duration, a: Arrival) -> (u32, Vec<Decision>) {
        let conn = self.entries.len() as u32;
        let pair = self.pairs.entry((a.src_host, a.dst_host)).or_default();
        let key = ConnKey { conn, pair_conn: *pair, src_host: a.src_host, dst_host: a.dst_host, msg: a.msg };
        *pair += 1;
        let mut out = vec![self.decision(
            now,
            conn,
            Event::Arrived {
                local: a.local,
                peer: a.peer,
                src_host: a.src_host,
                dst_host: a.dst_host,
                pair_conn: key.pair_conn,
                msg: a.msg,
            },
        )];
        let (state, event) = match self.policy.hold.plan(&key) {
            HoldPlan::Pass => (State::Ready, Event::Passed),
            HoldPlan::For(d) => (
                State::Held { since: now, until: now + d, until_next: false },
                Event::Held { max_us: d.as_micros() as u64, until_next: false },
            ),
            HoldPlan::UntilNext(d) => (
                State::Held { since: now, until: now + d, until_next: true },
                Event::Held { max_us: d.as_micros() as u64, until_next: true },
            ),
        };
        self.entries.push(Entry { key, listener: a.listener, state });
        *self.pending.entry(a.listener).or_default() += 1;
        if let State::Held { until, until_next, .. } = state {
            self.deadlines.insert((until, conn));
            if until_next {
                self.waiting.entry((key.src_host, key.dst_host)).or_default().insert(conn);
            }
        }
        out.push(self.decision(now, conn, event));
        if state == State::Ready {
            self.make_ready(now, conn, &mut out);
        }
        (conn, out)
    }

    /// Releases holds and flushes a short window whose time has come.
    pub fn tick(&mut self, now: Duration) -> Vec<Decision> {
        let mut out = Vec::new();
        while let Some(&(until, c)) = self.deadlines.first() {
            if until > now {
                break;
            }
            if let State::Held { since, .. } = self.unhold(c) {
                let held_us = now.saturating_sub(since).as_micros() as u64;
                out.push(self.decision(now, c, Event::Released { reason: Release::Deadline, held_us }));
                self.make_ready(now, c, &mut out);
            }
        }
        if let Some(p) = self.policy.permute {
            if !self.window.is_empty() && self.window_since + p.wait <= now {
                self.flush_window(now, &mut out);
            }
        }
        out
    }

    /// When [`Schedule::tick`] next has something to do.
    pub fn next_deadline(&self) -> Option<Duration> {
        let holds = self.deadlines.first().map(|d| d.0).into_iter();
        let window = match (self.policy.permute, self.window.is_empty()) {
            (Some(p), false) => Some(self.window_since + p.wait),
            _ => None,
        };
        holds.chain(window).min()
    }

    /// Whether a connection of `listener` can be handed over now.
    pub fn has_ready(&self, listener: u32) -> bool {
        self.ready.iter().any(|&c| self.entries[c as usize].listener == listener)
    }

    /// Takes `conn` out of the hold indexes; its state before.
    fn unhold(&mut self, conn: u32) -> State {
        let e = &self.entries[conn as usize];
        if let State::Held { until, until_next, .. } = e.state {
            self.deadlines.remove(&(until, conn));
            if until_next {
                if let Some(w) = self.waiting.get_mut(&(e.key.src_host, e.key.dst_host)) {
                    w.remove(&conn);
                }
            }
        }
        e.state
    }

    /// `conn` leaves the queue for good.
    fn finish(&mut self, conn: u32) {
        self.unhold(conn);
        let e = &mut self.entries[conn as usize];
        if e.state != State::Done {
            e.state = State::Done;
            if let Some(n) = self.pending.get_mut(&e.listener) {
                *n -= 1;
            }
        }
    }

    /// Whether `listener` has connections in the queue (held, windowed or ready).
    pub fn has_pending(&self, listener: u32) -> bool {
        self.pending.get(&listener).is_some_and(|&n| n > 0)
    }

    /// Whether any connection is in the queue.
    pub fn any_pending(&self) -> bool {
        self.pending.values().any(|&n| n > 0)
    }

    /// The next connection of `listener` for the program, and its `delivered` decision.
    pub fn take(&mut self, now: Duration, listener: u32) -> Option<(u32, Decision)> {
        let at = self.ready.iter().position(|&c| self.entries[c as usize].listener == listener)?;
        let conn = self.ready.remove(at)?;
        self.finish(conn);
        Some((conn, self.decision(now, conn, Event::Delivered)))
    }

    /// Every connection not handed over (the program is exiting): each is `unaccepted`.
    pub fn abandon_all(&mut self, now: Duration) -> Vec<(u32, Decision)> {
        let mut out = Vec::new();
        for c in 0..self.entries.len() as u32 {
            if self.entries[c as usize].state != State::Done {
                self.finish(c);
                out.push((c, self.decision(now, c, Event::Unaccepted)));
            }
        }
        self.ready.clear();
        self.window.clear();
        out
    }

    /// Abandons the connections of one listener (it was closed or its number reused).
    pub fn abandon_listener(&mut self, now: Duration, listener: u32) -> Vec<(u32, Decision)> {
        let mut out = Vec::new();
        for c in 0..self.entries.len() as u32 {
            let e = &self.entries[c as usize];
            if e.listener == listener && e.state != State::Done {
                self.finish(c);
                out.push((c, self.decision(now, c, Event::Unaccepted)));
            }
        }
        let entries = &self.entries;
        self.ready.retain(|&c| entries[c as usize].state != State::Done);
        self.window.retain(|&c| entries[c as usize].state != State::Done);
        out
    }

    /// `conn` became acceptable: queue it (or put it in the window), then release earlier
    /// connections on its pair waiting for a next one, as the wire does when a later
    /// handshake completes.
    fn make_ready(&mut self, now: Duration, conn: u32, out: &mut Vec<Decision>) {
        self.enqueue(now, conn, out);
        let key = self.entries[conn as usize].key;
        let waiting: Vec<u32> = self
            .waiting
            .get(&(key.src_host, key.dst_host))
            .map(|w| w.range(..conn).copied().collect())
            .unwrap_or_default();
        for c in waiting {
            if let State::Held { since, .. } = self.unhold(c) {
                let held_us = now.saturating_sub(since).as_micros() as u64;
                out.push(self.decision(now, c, Event::Released { reason: Release::Next { by: conn }, held_us }));
                self.enqueue(now, c, out);
            }
        }
    }

    fn enqueue(&mut self, now: Duration, conn: u32, out: &mut Vec<Decision>) {
        match self.policy.permute {
            Some(p) if p.window > 1 => {
                self.entries[conn as usize].state = State::Windowed;
                if self.window.is_empty() {
                    self.window_since = now;
                }
                self.window.push(conn);
                if self.window.len() >= p.window as usize {
                    self.flush_window(now, out);
                }
            }
            _ => {
                self.entries[conn as usize].state = State::Ready;
                self.ready.push_back(conn);
            }
        }
    }

    /// Fisher-Yates over the window with the seeded stream, then queue in that order.
    fn flush_window(&mut self, now: Duration, out: &mut Vec<Decision>) {
        let mut w = std::mem::take(&mut self.window);
        for i in (1..w.len()).rev() {
            let j = (self.rng.next_u64() % (i as u64 + 1)) as usize;
            w.swap(i, j);
        }
        for (position, &c) in w.iter().enumerate() {
            self.entries[c as usize].state = State::Ready;
            self.ready.push_back(c);
            out.push(self.decision(now, c, Event::Permuted { window: self.windows, position: position as u32 }));
        }
        self.windows += 1;
    }

    fn decision(&self, now: Duration, conn: u32, event: Event) -> Decision {
        Decision { at_us: now.as_micros() as u64, conn, event }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn arrival(src: u8, dst: u8) -> Arrival {
        Arrival { listener: 0, local: "l".into(), peer: "p".into(), src_host: src, dst_host: dst, msg: None }
    }

    fn schedule(p: &str) -> Schedule {
        Schedule::new(p.parse().unwrap())
    }

    /// Delivers everything ready now, in order.
    fn drain(s: &mut Schedule, now: Duration) -> Vec<u32> {
        std::iter::from_fn(|| s.take(now, 0).map(|(c, _)| c)).collect()
    }

    #[test]
    fn no_policy_is_arrival_order() {
        let mut s = schedule("none");
        for _ in 0..3 {
            s.arrive(ms(0), arrival(1, 2));
        }
        assert_eq!(drain(&mut s, ms(0)), vec![0, 1, 2]);
        assert!(!s.any_pending());
    }

    #[test]
    fn release_on_next_inverts_the_selected_pair_connection() {
        // The report's policy: the third connection host 1 > host 2 waits for the fourth.
        let mut s = schedule("release-on-next=500ms,select=pair:1>2:2");
        for _ in 0..2 {
            s.arrive(ms(0), arrival(1, 2));
        }
        s.arrive(ms(0), arrival(3, 2));
        assert_eq!(drain(&mut s, ms(0)), vec![0, 1, 2]);
        let (held, d) = s.arrive(ms(1), arrival(1, 2));
        assert_eq!(held, 3);
        assert!(matches!(d[1].event, Event::Held { until_next: true, max_us: 500_000 }));
        assert!(drain(&mut s, ms(1)).is_empty(), "held");
        assert_eq!(s.next_deadline(), Some(ms(501)));
        let (next, d) = s.arrive(ms(2), arrival(1, 2));
        assert_eq!(d.last().unwrap().event, Event::Released { reason: Release::Next { by: next }, held_us: 1000 });
        assert_eq!(drain(&mut s, ms(2)), vec![4, 3], "the later one first, then the held one");
    }

    #[test]
    fn a_hold_ends_at_its_deadline_and_nothing_is_lost() {
        let mut s = schedule("hold=20ms,select=nth:0");
        s.arrive(ms(0), arrival(1, 2));
        s.arrive(ms(5), arrival(1, 2));
        assert_eq!(drain(&mut s, ms(5)), vec![1]);
        assert!(s.tick(ms(19)).is_empty());
        let d = s.tick(ms(20));
        assert_eq!(d[0].event, Event::Released { reason: Release::Deadline, held_us: 20_000 });
        assert_eq!(drain(&mut s, ms(20)), vec![0]);
        // At exit, whatever is still queued is accounted for.
        s.arrive(ms(30), arrival(1, 2));
        s.arrive(ms(30), arrival(1, 3));
        let ends = s.abandon_all(ms(31));
        assert_eq!(ends.iter().map(|(c, _)| *c).collect::<Vec<_>>(), vec![2, 3]);
        assert!(!s.any_pending());
    }

    #[test]
    fn msg_selects_by_the_header() {
        let mut s = schedule("hold=10ms,select=msg:0:1");
        let mut a = arrival(1, 2);
        a.msg = Some((0, 1));
        s.arrive(ms(0), a);
        let mut b = arrival(1, 2);
        b.msg = Some((0, 2));
        s.arrive(ms(0), b);
        assert_eq!(drain(&mut s, ms(0)), vec![1]);
    }

    #[test]
    fn permutation_is_seeded_and_windowed() {
        let order = |seed: u64| {
            let mut s = schedule(&format!("permute={seed}:4:50ms"));
            for _ in 0..6 {
                s.arrive(ms(0), arrival(1, 2));
            }
            let mut got = drain(&mut s, ms(0));
            assert_eq!(got.len(), 4, "one full window");
            assert_eq!(s.next_deadline(), Some(ms(50)));
            s.tick(ms(50));
            got.extend(drain(&mut s, ms(50)));
            got
        };
        let a = order(7);
        assert_eq!(a, order(7), "same seed, same order");
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..6).collect::<Vec<_>>(), "a permutation: every connection once");
        assert!((a[..4].iter().all(|&c| c < 4)) && a[4..].iter().all(|&c| c >= 4), "within windows: {a:?}");
        assert!((0..20).map(order).any(|o| o != a), "seeds differ");
    }

    #[test]
    fn listeners_are_served_separately() {
        let mut s = schedule("none");
        s.arrive(ms(0), Arrival { listener: 1, ..arrival(1, 2) });
        s.arrive(ms(0), arrival(1, 2));
        assert!(s.has_ready(1) && s.has_ready(0));
        assert_eq!(s.take(ms(0), 0).map(|(c, _)| c), Some(1));
        assert_eq!(s.abandon_listener(ms(0), 1).len(), 1);
        assert!(!s.any_pending());
    }

    proptest::proptest! {
        /// Whatever the policy and arrival times, every connection is delivered exactly once
        /// once time passes every deadline.
        #[test]
        fn every_connection_is_delivered_once(
            times in proptest::collection::vec((0u64..100, 1u8..4), 0..40),
            policy in proptest::sample::select(vec![
                "none", "hold=30ms,select=odd", "release-on-next=40ms", "release-on-next=40ms,select=all",
                "permute=3:5:10ms", "hold=7ms,permute=1:3:9ms", "release-on-next=25ms,select=pair:1>2:1,permute=2",
            ]),
        ) {
            let mut s = schedule(policy);
            let mut times = times;
            times.sort();
            let mut got = Vec::new();
            for (t, src) in &times {
                s.tick(ms(*t));
                s.arrive(ms(*t), arrival(*src, 9));
                got.extend(drain(&mut s, ms(*t)));
            }
            // Every deadline passes (a release can start a short window, which has its own).
            while let Some(d) = s.next_deadline() {
                s.tick(d);
                got.extend(drain(&mut s, d));
            }
            got.sort();
            proptest::prop_assert_eq!(got, (0..times.len() as u32).collect::<Vec<_>>());
            proptest::prop_assert!(!s.any_pending());
        }
    }
}
