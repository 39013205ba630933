//! The load-dependent RX queue: one CPU's NAPI polling of one RX ring, shared with a background
//! packet flood, limited by the per-poll budget, with a bounded ring.
//!
//! The flood is modelled as a fluid: a queue whose flood flows arrive at `λ` packets per second
//! of cost `c` receives `ρ = λc` seconds of softirq work per second, continuously. Simulating
//! each flood packet would cost hundreds of thousands of events per simulated second and host;
//! the fluid keeps the cost at one step per busy period or poll, and its error is at most one
//! flood packet's cost (about a microsecond) per real packet. The queue's state is its pending
//! work `w` (nanoseconds of CPU): while the CPU is free for softirq `w` falls at `1 - ρ` (to 0,
//! where the flood is served as it comes), while the CPU is taken (a background stall, or a
//! poll deferred to ksoftirqd) it grows at `ρ`, up to what the ring holds. A real packet
//! arriving at `t` is dropped if the ring is full, else completes once `w(t)` plus its own cost
//! of free CPU has passed (FIFO: the flood arriving after it does not delay it).
//!
//! NAPI's budget is counted in CPU time: a poll that has worked `min(netdev_budget_usecs,
//! netdev_budget x the queue's typical packet cost)` without emptying the ring stops, and the
//! rest waits `ksoftirqd_delay` (ksoftirqd is an ordinary thread that must be scheduled). The
//! typical cost is the flood's on a queue that carries flood, else `service`, so a burst of
//! `service`-cost packets defers exactly its `netdev_budget + 1`-th packet.
//!
//! One [`Loaded`] is one CPU: the RX queues it serves and (with RPS) its backlog share its
//! FIFO, its budget (Linux's `netdev_budget` is per `net_rx_action`, i.e. per CPU) and its
//! time. The application on that CPU runs whenever softirq does not: see [`Loaded::app_done`].

use std::collections::VecDeque;

use super::config::KernelConfig;
use super::softirq::{RxQueue, StallParams};

/// A queue's load parameters, fixed at start.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LoadParams {
    /// Flood CPU share of this queue, in [0, 1).
    rho: f64,
    /// Work one poll may do before deferring, in nanoseconds (infinite: no budget).
    budget: f64,
    /// ksoftirqd's scheduling delay, in nanoseconds.
    delay: u64,
    /// What this CPU's RX rings hold together, in packets (0: unbounded).
    ring: u32,
    /// What this CPU's backlog holds, in packets (0: unbounded).
    backlog: u32,
    /// Where the flood's packets wait: the RX ring, or with RPS the backlog.
    flood_via: Via,
    /// One flood packet's cost, in nanoseconds.
    flood_cost: f64,
}

/// Which of a CPU's queues a packet waits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// One of the RX rings this CPU polls.
    Ring,
    /// This CPU's backlog (`softnet_data.input_pkt_queue`), filled by RPS.
    Backlog,
}

impl LoadParams {
    /// For a CPU serving `rings` RX queues, onto which `flows` of the host's
    /// `cfg.load.flood_flows` flood flows land (through its rings, or with RPS its backlog).
    pub(crate) fn new(cfg: &KernelConfig, flows: u32, rings: u32) -> LoadParams {
        let l = &cfg.load;
        let flood_cost = l.flood_cost.as_nanos() as f64;
        let rate = l.flood_rate as f64 * f64::from(flows) / f64::from(l.flood_flows.max(1));
        let rho = (rate * flood_cost / 1e9).min(0.999);
        let typical = if rho > 0.0 && flood_cost > 0.0 { flood_cost } else { cfg.service.as_nanos() as f64 };
        let by_count = if l.napi_budget > 0 { f64::from(l.napi_budget) * typical.max(1.0) } else { f64::INFINITY };
        let by_time = l.napi_budget_time.map_or(f64::INFINITY, |d| d.as_nanos() as f64);
        LoadParams {
            rho,
            budget: by_count.min(by_time),
            delay: u64::try_from(l.ksoftirqd_delay.as_nanos()).unwrap_or(u64::MAX),
            ring: l.rx_ring.saturating_mul(rings.max(1)),
            backlog: l.cpu.max_backlog,
            flood_via: if l.cpu.rps { Via::Backlog } else { Via::Ring },
            flood_cost,
        }
    }

    /// Capacity in packets of `via` (0: unbounded).
    fn cap(&self, via: Via) -> u32 {
        match via {
            Via::Ring => self.ring,
            Via::Backlog => self.backlog,
        }
    }

    /// The most flood work its queue holds (infinite when unbounded or without flood).
    fn flood_cap(&self) -> f64 {
        let cap = self.cap(self.flood_via);
        if cap == 0 || self.flood_cost <= 0.0 {
            f64::INFINITY
        } else {
            f64::from(cap) * self.flood_cost
        }
    }
}

/// The fluid state at one instant.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Fluid {
    /// The state's time, in nanoseconds.
    at: u64,
    /// Pending work, in nanoseconds of CPU.
    w: f64,
    /// Work done by the current poll.
    run: f64,
    /// A deferred poll resumes (ksoftirqd runs) at this time.
    resume: u64,
}

/// What [`Loaded`] keeps between packets.
#[derive(Clone, Debug)]
pub(crate) struct Loaded {
    p: LoadParams,
    now: Fluid,
    /// Real packets not yet completed: (completion time, cost, where they wait).
    pending: VecDeque<(u64, f64, Via)>,
    /// Polls that exhausted their budget and were deferred to ksoftirqd.
    pub(crate) deferrals: u64,
}

/// The result of offering a packet to a loaded queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Offer {
    /// The ring was full: the packet is gone.
    Dropped,
    /// Completed at `done`; `blocked` is the first and last instant its wait was blocked by
    /// a stall or a deferred poll, if it was.
    Done { done: u64, blocked: Option<(u64, u64)>, nth: u64 },
}

/// Where a walk stops.
#[derive(Clone, Copy)]
enum Goal {
    /// At this time, with the flood arriving all along.
    Time(u64),
    /// When the pending work is done (the flood behind it does not matter).
    Drained,
    /// When an application runnable from `start` has had `cost` ns of CPU free of softirq
    /// and stalls.
    App { start: u64, cost: f64 },
}

impl Loaded {
    /// An empty queue at time zero.
    pub(crate) fn new(p: LoadParams) -> Loaded {
        Loaded { p, now: Fluid { at: 0, w: 0.0, run: 0.0, resume: 0 }, pending: VecDeque::new(), deferrals: 0 }
    }

    /// Packets in `via` at the state's time: the real ones waiting there, and the flood's
    /// share of the pending work in packets if the flood waits there.
    fn occupancy(&self, via: Via) -> f64 {
        let real: f64 = self.pending.iter().map(|(_, c, _)| *c).sum();
        let here = self.pending.iter().filter(|(_, _, v)| *v == via).count() as f64;
        if via != self.p.flood_via || self.p.flood_cost <= 0.0 {
            return here;
        }
        here + (self.now.w - real).max(0.0) / self.p.flood_cost
    }

    /// Move the state to `t` (nondecreasing across calls) and forget what completed by then.
    fn advance(&mut self, q: &mut RxQueue, sp: &StallParams, t: u64) -> u64 {
        let t = t.max(self.now.at);
        let mut s = self.now;
        let mut deferrals = 0;
        walk(q, sp, &self.p, &mut s, Goal::Time(t), &mut deferrals);
        q.forget_before(t);
        self.now = s;
        self.deferrals += deferrals;
        while self.pending.front().is_some_and(|(d, _, _)| *d <= t) {
            self.pending.pop_front();
        }
        t
    }

    /// At `t` (nondecreasing across calls): when an application thread on this CPU, runnable
    /// from `start` (at or after `t`), has had `cost` nanoseconds of CPU. Softirq preempts it: it runs only while
    /// this CPU has no softirq work pending, at the share the flood leaves, and while a poll
    /// waits for ksoftirqd (that wait is the scheduler letting it finish its slice). A random
    /// or scripted stall takes the CPU from it too. Packets arriving after `t` are not
    /// foreseen: their softirq would preempt it as well, so this is a lower bound.
    pub(crate) fn app_done(&mut self, q: &mut RxQueue, sp: &StallParams, t: u64, start: u64, cost: u64) -> u64 {
        let t = self.advance(q, sp, t);
        let start = start.max(t);
        if cost == 0 {
            return start;
        }
        let mut ahead = self.now;
        let mut scratch = 0;
        walk(q, sp, &self.p, &mut ahead, Goal::App { start, cost: cost as f64 }, &mut scratch);
        ahead.at
    }

    /// A packet of `cost` nanoseconds arrives at `t` (nondecreasing across calls) in `via`.
    pub(crate) fn offer(&mut self, q: &mut RxQueue, sp: &StallParams, t: u64, cost: u64, via: Via) -> Offer {
        let t = self.advance(q, sp, t);
        let cap = self.p.cap(via);
        if cap > 0 && self.occupancy(via) >= f64::from(cap) {
            return Offer::Dropped;
        }
        let (nth, kick) = q.next_kick();
        if kick > 0 {
            self.now.resume = self.now.resume.max(t.saturating_add(kick));
        }
        self.now.w += cost as f64;
        let mut ahead = self.now;
        let mut scratch = 0;
        let blocked = walk(q, sp, &self.p, &mut ahead, Goal::Drained, &mut scratch);
        self.pending.push_back((ahead.at, cost as f64, via));
        Offer::Done { done: ahead.at, blocked, nth }
    }
}

/// Move `s` forward to `goal`; returns the first and last instant it was blocked (a stall or
/// a deferred poll) while work was pending, and counts deferrals.
fn walk(
    q: &mut RxQueue,
    sp: &StallParams,
    p: &LoadParams,
    s: &mut Fluid,
    goal: Goal,
    deferrals: &mut u64,
) -> Option<(u64, u64)> {
    let (until, rho) = match goal {
        Goal::Time(t) => (t, p.rho),
        Goal::Drained => (u64::MAX, 0.0),
        Goal::App { .. } => (u64::MAX, p.rho),
    };
    // The application's CPU time still to run (none for the other goals), from when.
    let (mut app, start) = match goal {
        Goal::App { start, cost } => (cost, start),
        _ => (0.0, 0),
    };
    let mut blocked: Option<(u64, u64)> = None;
    loop {
        if s.at >= until
            || (matches!(goal, Goal::Drained) && s.w <= 0.0)
            || (matches!(goal, Goal::App { .. }) && app <= 0.0)
        {
            return blocked;
        }
        let random = q.busy_at_or_after(s.at, sp);
        let scripted = q.scripted_at_or_after(s.at);
        let covering = |b: Option<(u64, u64)>| b.filter(|(st, _)| *st <= s.at).map(|(_, e)| e);
        let stall_end = [covering(random), covering(scripted)].into_iter().flatten().max();
        let block_end = [stall_end, (s.resume > s.at).then_some(s.resume)].into_iter().flatten().max();
        if let Some(mut end) = block_end {
            if app > 0.0 && stall_end.is_none() && end > start {
                // A poll waits for ksoftirqd: the application has the CPU meanwhile.
                let from = s.at.max(start);
                if app <= (end - from) as f64 {
                    end = from + app.ceil() as u64;
                }
                app -= (end - from) as f64;
            }
            let end = end.min(until);
            let dt = (end - s.at) as f64;
            if s.w > 0.0 {
                blocked = Some((blocked.map_or(s.at, |b| b.0), end));
            }
            s.w = (s.w + rho * dt).min(s.w.max(p.flood_cap()));
            s.run = 0.0;
            s.at = end;
            continue;
        }
        let next_block = [random, scripted]
            .into_iter()
            .flatten()
            .map(|(st, _)| st)
            .filter(|st| *st > s.at)
            .min()
            .unwrap_or(u64::MAX);
        let limit = next_block.min(until);
        if s.w <= 0.0 {
            // Caught up: the flood is served as it comes. After a long quiet stretch, jump
            // there and let the stall process restart in its steady state.
            s.w = 0.0;
            s.run = 0.0;
            if app > 0.0 {
                // The application runs in what the flood leaves of the CPU, once runnable.
                if s.at < start {
                    s.at = start.min(limit);
                    continue;
                }
                let need = (app / (1.0 - rho)).ceil().max(1.0);
                let dt = need.min((limit - s.at) as f64);
                app -= dt * (1.0 - rho);
                s.at = s.at.saturating_add(dt as u64);
                continue;
            }
            if until != u64::MAX && until - s.at > q.skip_after() {
                q.forget_before(until);
                s.at = until;
            } else {
                s.at = limit;
            }
            continue;
        }
        if s.run >= p.budget {
            *deferrals += 1;
            s.run = 0.0;
            s.resume = s.at.saturating_add(p.delay);
            continue;
        }
        let to_empty = (s.w / (1.0 - rho)).ceil();
        let to_budget = (p.budget - s.run).ceil();
        let dt = to_empty.min(to_budget).min((limit - s.at) as f64).max(1.0);
        let dt_ns = dt as u64;
        s.w = if dt >= to_empty { 0.0 } else { (s.w - (1.0 - rho) * dt).max(0.0) };
        s.run += dt;
        s.at = s.at.saturating_add(dt_ns);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bootsim_core::Instant;

    use super::*;
    use crate::kernel::rng::{stream, Purpose};
    use crate::kernel::softirq::Admitted;

    const US: u64 = 1_000;

    /// A queue without random stalls, forced busy during `script`, carrying `flows` flood flows.
    fn queue(words: &str, flows: u32, script: Vec<(u64, u64)>) -> (RxQueue, StallParams) {
        let mut cfg = KernelConfig::default();
        cfg.apply_words(words).unwrap();
        let sp = StallParams::new(&cfg);
        let mut q = RxQueue::new(stream(1, Purpose::Stall, 0, 0), &sp).with_script(script, Vec::new());
        q.loaded = Some(Loaded::new(LoadParams::new(&cfg, flows, 1)));
        (q, sp)
    }

    fn offer(q: &mut RxQueue, sp: &StallParams, at: u64, cost_us: u64) -> Option<Admitted> {
        q.offer(Instant::from_nanos(at), Duration::from_micros(cost_us), sp, Via::Ring)
    }

    #[test]
    fn budget_deferral_delays_the_301st_packet_of_a_burst() {
        let words = "service=2us napi_budget=300 ksoftirqd_delay=1ms";
        let (mut q, sp) = queue(words, 0, Vec::new());
        let done: Vec<_> = (0..302).map(|_| offer(&mut q, &sp, 0, 2).unwrap()).collect();
        for (i, a) in done.iter().take(300).enumerate() {
            assert_eq!(a.done.as_nanos(), (i as u64 + 1) * 2 * US, "packet {i}");
            assert!(a.stall.is_none(), "packet {i}");
        }
        // The poll stops after 300 packets (600 us); ksoftirqd picks the rest up 1 ms later.
        assert_eq!(done[300].done.as_nanos(), 600 * US + 1_000 * US + 2 * US);
        assert_eq!(done[300].stall, Some((Instant::from_nanos(600 * US), Instant::from_nanos(1_600 * US))));
        assert_eq!(done[301].done.as_nanos(), 1_604 * US);
        assert_eq!(q.deferrals(), 0, "the looked-ahead deferral is counted when the clock passes it");
        offer(&mut q, &sp, 5_000 * US, 2).unwrap();
        assert_eq!(q.deferrals(), 1);

        // Without a budget the 301st packet follows at once; a time budget works the same way.
        let (mut q, sp) = queue("service=2us", 0, Vec::new());
        q.loaded = Some(Loaded::new(LoadParams::new(&KernelConfig { rx_queues: 1, ..KernelConfig::default() }, 0, 1)));
        let last = (0..301).map(|_| offer(&mut q, &sp, 0, 2).unwrap()).last().unwrap();
        assert_eq!(last.done.as_nanos(), 602 * US);
        let (mut q, sp) = queue("service=2us napi_budget_time=100us ksoftirqd_delay=1ms", 0, Vec::new());
        let d: Vec<_> = (0..51).map(|_| offer(&mut q, &sp, 0, 2).unwrap().done.as_nanos()).collect();
        assert_eq!((d[49], d[50]), (100 * US, 1_102 * US));
    }

    #[test]
    fn flood_work_piles_up_during_a_stall_and_delays_the_next_packet() {
        // 200k packets/s of 1 us: 20% of the CPU. A 1 ms stall leaves 200 us of flood queued.
        let words = "flood_rate=200000 flood_flows=1 flood_cost=1us";
        let (mut q, sp) = queue(words, 1, vec![(0, 1_000 * US)]);
        let a = offer(&mut q, &sp, 1_000 * US, 2).unwrap();
        assert_eq!(a.done.as_nanos(), 1_000 * US + 200 * US + 2 * US);
        // With no flood on this queue (its flows hashed elsewhere) only the stall delays.
        let (mut q, sp) = queue(words, 0, vec![(0, 1_000 * US)]);
        let a = offer(&mut q, &sp, 500 * US, 2).unwrap();
        assert_eq!(a.done.as_nanos(), 1_002 * US);
        assert_eq!(a.stall, Some((Instant::from_nanos(500 * US), Instant::from_nanos(1_000 * US))));
    }

    #[test]
    fn ring_drops_only_when_the_ring_is_short_and_the_flood_heavy() {
        let stall = vec![(0, 2_000 * US)];
        let drops = |words: &str, flows: u32| {
            let (mut q, sp) = queue(words, flows, stall.clone());
            (0..20).filter(|i| offer(&mut q, &sp, 1_000 * US + i * 20 * US, 2).is_none()).count()
        };
        // 400 flood packets pile up in the 2 ms stall: a 64-slot ring is full from 320 us on.
        assert_eq!(drops("rx_ring=64 flood_rate=200000 flood_cost=1us", 1), 20);
        assert_eq!(drops("rx_ring=1024 flood_rate=200000 flood_cost=1us", 1), 0);
        assert_eq!(drops("rx_ring=64 flood_rate=200000 flood_cost=1us", 0), 0);
        assert_eq!(drops("rx_ring=64 flood_rate=10000 flood_cost=1us", 1), 0);
        // Real packets alone fill a short ring too: 8 slots, the 9th packet of a stalled burst drops.
        let (mut q, sp) = queue("rx_ring=8", 0, stall.clone());
        let fates: Vec<bool> = (0..10).map(|_| offer(&mut q, &sp, 100 * US, 2).is_some()).collect();
        assert_eq!(fates, [true, true, true, true, true, true, true, true, false, false]);
    }

    #[test]
    fn the_same_offers_give_the_same_completions_with_random_stalls() {
        let run = || {
            let mut cfg = KernelConfig::profile("load").unwrap();
            cfg.set("stall_gap", "50us").unwrap();
            let sp = StallParams::new(&cfg);
            let mut q = RxQueue::new(stream(7, Purpose::Stall, 0, 3), &sp);
            q.loaded = Some(Loaded::new(LoadParams::new(&cfg, 2, 1)));
            (0..3000u64)
                .map(|i| {
                    q.offer(
                        Instant::from_nanos(i * i % 7919 * 300 + i * 1000),
                        Duration::from_micros(3),
                        &sp,
                        Via::Ring,
                    )
                })
                .collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        let done: Vec<u64> = a.iter().flatten().map(|x| x.done.as_nanos()).collect();
        assert!(done.windows(2).all(|w| w[0] <= w[1]), "completions are FIFO");
        assert!(a.iter().flatten().any(|x| x.stall.is_some()));
    }
}
