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
    /// from `start` (at or after `t`), has had `cost` nanoseconds of CPU. Softirq preempts
    /// it: it runs only while this CPU has no softirq work pending, at the share the flood
    /// leaves, and while a poll waits for ksoftirqd (that wait is the scheduler letting it
    /// finish its slice). A random or scripted stall takes the CPU from it too. Packets
    /// arriving after `t` are not foreseen: their softirq would preempt it as well, so this
    /// is a lower bound.
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
        let (cap, occupied) = (f64::from(self.p.cap(via)), self.occupancy(via));
        // A ring has `rx_ring` descriptors; `enqueue_to_backlog` drops only when the backlog
        // already holds more than `netdev_max_backlog` (`qlen > max_backlog`): one more fits.
        let full = match via {
            Via::Ring => occupied >= cap,
            Via::Backlog => occupied > cap,
        };
        if cap > 0.0 && full {
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
        q.walked();
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
#[path = "napi_tests.rs"]
mod tests;
