//! One RX queue drained by one CPU's softirq: a FIFO server whose CPU is periodically taken by
//! background load. Free and busy periods alternate (free ~ Exp(mean gap), busy ~ Pareto(xm,
//! alpha) capped), generated lazily from the queue's own random stream as time advances.

use std::cell::Cell;
use std::time::Duration;

use bootsim_core::Instant;
use rand_chacha::ChaCha8Rng;

use std::collections::VecDeque;

use super::config::KernelConfig;
use super::napi::{Loaded, Offer, Via};
use super::rng::{self, Cursor, Pareto, Purpose, Streams, Words};

/// The stall process's parameters, in nanoseconds, precomputed from the config, and the seed's
/// generator the queues' random streams are made from.
#[derive(Clone, Debug)]
pub(crate) struct StallParams {
    /// Median mean free gap; `None` disables stalls.
    mean_gap: Option<f64>,
    /// Each queue's mean gap is `mean_gap * f`, `ln f` uniform in `[-ln skew, ln skew]`.
    skew: f64,
    mean_busy: f64,
    xm: f64,
    alpha: f64,
    cap: u64,
    /// `xm^(1 - alpha)`, `xm^alpha` and `1 / (1 - alpha)`, for [`StallParams::residual_busy`].
    xm_pow_1_minus_a: f64,
    xm_pow_a: f64,
    inv_1_minus_a: f64,
    /// `1 / (1 - alpha)` as a whole number when it is one to within 1.4e-15 (alpha 0.8 gives
    /// 5.000000000000001): the residual's power is then a few multiplications, whose result
    /// differs from `powf`'s by less than [`rng::exact_from`]'s slack.
    residual_powi: Option<i32>,
    /// The busy periods' law.
    busy: Pareto,
    /// A queue unobserved for this many of its mean cycles (free gap and busy period) restarts
    /// in its steady state (8; infinite in tests that walk every cycle).
    skip_cycles: f64,
    /// The seed's unused generator ([`Streams::key`]).
    key: ChaCha8Rng,
    /// Busy periods generated so far by every queue run with these parameters, counted as each
    /// is made: most packets make none, and counting them per packet (a queue's count before
    /// and after) cost every packet.
    periods: Cell<u64>,
}

impl StallParams {
    /// From the `stall_*` knobs, the queues' streams made from `streams`.
    pub(crate) fn new(cfg: &KernelConfig, streams: &Streams) -> StallParams {
        let xm = cfg.stall_xm.as_nanos() as f64;
        let cap = u64::try_from(cfg.stall_cap.as_nanos()).unwrap_or(u64::MAX).max(1);
        StallParams {
            mean_gap: cfg.stall_gap.map(|g| (g.as_nanos() as f64).max(1.0)),
            skew: cfg.stall_skew.max(1.0),
            xm,
            cap,
            alpha: 0.0,
            mean_busy: 0.0,
            xm_pow_1_minus_a: 0.0,
            xm_pow_a: 0.0,
            inv_1_minus_a: 0.0,
            residual_powi: None,
            busy: Pareto::new(xm, 1.0, cap),
            skip_cycles: 8.0,
            key: streams.key().clone(),
            periods: Cell::new(0),
        }
        .with_alpha(cfg.stall_alpha)
    }

    /// The remaining length of the busy period a random instant falls in (the equilibrium
    /// distribution, density `P(X > r) / E[X]`), by inversion of `u` in `[0, 1)`.
    fn residual_busy(&self, u: f64) -> u64 {
        let (xm, a) = (self.xm, self.alpha);
        let target = u * self.mean_busy;
        // On the value's integer part, as `rng::exact_from` takes it.
        let whole = |t: u64| t.clamp(1, self.cap);
        if target <= xm {
            return whole(target as u64);
        }
        // Each power is `libm`'s, estimated first (see `exact_from`).
        if (a - 1.0).abs() < 1e-9 {
            let x = (target - xm) / xm;
            return rng::exact_from(xm * x.exp(), || xm * libm::exp(x), whole);
        }
        let (base, inv) = (self.xm_pow_1_minus_a + (target - xm) * (1.0 - a) / self.xm_pow_a, self.inv_1_minus_a);
        let estimate = match self.residual_powi {
            Some(k) => rng::powi(base, k),
            None => base.powf(inv),
        };
        rng::exact_from(estimate, || libm::pow(base, inv), whole)
    }

    /// The same with Pareto shape `alpha` (and what depends on it).
    fn with_alpha(self, alpha: f64) -> StallParams {
        StallParams {
            alpha,
            mean_busy: mean_capped_pareto(self.xm, alpha, self.cap as f64),
            xm_pow_1_minus_a: libm::pow(self.xm, 1.0 - alpha),
            xm_pow_a: libm::pow(self.xm, alpha),
            inv_1_minus_a: 1.0 / (1.0 - alpha),
            residual_powi: {
                let inv = 1.0 / (1.0 - alpha);
                let k = inv.round();
                // |inv - k| * ln(f64::MAX) within 1e-12: far inside the slack.
                ((inv - k).abs() <= 1.4e-15 && k.abs() <= 16.0).then_some(k as i32)
            },
            busy: Pareto::new(self.xm, alpha, self.cap),
            ..self
        }
    }

    /// Busy periods generated so far by the queues run with these parameters.
    pub(crate) fn periods(&self) -> u64 {
        self.periods.get()
    }

    /// Long-run fraction of time the CPU of a queue with the median gap is busy.
    #[cfg(test)]
    pub(crate) fn busy_fraction(&self) -> f64 {
        match self.mean_gap {
            None => 0.0,
            Some(g) => self.mean_busy / (g + self.mean_busy),
        }
    }
}

/// `d` in whole nanoseconds, `u64::MAX` past it.
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// E[min(X, cap)] for X ~ Pareto(xm, alpha).
fn mean_capped_pareto(xm: f64, alpha: f64, cap: f64) -> f64 {
    if cap <= xm {
        return cap;
    }
    let tail = if (alpha - 1.0).abs() < 1e-9 {
        xm * libm::log(cap / xm)
    } else {
        libm::pow(xm, alpha) * (libm::pow(cap, 1.0 - alpha) - libm::pow(xm, 1.0 - alpha)) / (1.0 - alpha)
    };
    xm + tail
}

/// When a packet was processed and whether it hit a stall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Admitted {
    /// When the softirq finished with it (the TCP stack sees it then).
    pub(crate) done: Instant,
    /// The busy stretch it waited for, if any: (when it would have started, when it started).
    pub(crate) stall: Option<(Instant, Instant)>,
    /// Its index among the packets that reached this queue (from 0).
    pub(crate) nth: u64,
}

/// The most busy periods one queue generates: past it the queue stalls no more, so a walk
/// over a long cost under near-constant stalls ends; the engine's work guard has given the
/// run up by then (see `Kernel::work`).
const PERIOD_CAP: u64 = 5_000_000;

/// One RX queue: one cache line, which admitting a packet reads (at 1024 ranks 8 192 servers are
/// far more than the cache holds, and that first touch was most of a packet's arrival), and its
/// random stream's next 64 words after it, of which a draw reads one line. The stream is kept as
/// its position ([`Words`]), so no generator's index and
/// core lines are read besides; the rarely used parts (scripts, the load-dependent model, the
/// arrivals' count past 2^32) sit behind one pointer, `None` in most runs.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub(crate) struct RxQueue {
    /// Completion time of the last packet.
    free_at: u64,
    /// The current or next busy period `[busy_start, busy_end)`.
    busy_start: u64,
    busy_end: u64,
    /// If the queue is next looked at this long after its last busy period, restart the
    /// process in its steady state instead of walking every cycle in between.
    skip_after: u64,
    /// Scripted stalls and the load-dependent model, when any is set.
    rare: Option<Box<Rare>>,
    /// This queue's mean free gap (0: no stalls).
    gap: f64,
    /// Words drawn from the random stream so far.
    drawn: u64,
    /// Packets admitted so far, modulo 2^32 ([`Rare::arrivals_hi`] counts the wraps).
    arrivals: u32,
    /// Busy periods generated so far (at most [`PERIOD_CAP`]): the model's work, for the
    /// engine's work guard.
    periods: u32,
    /// The random stream's next words.
    words: Words,
}

// A packet's admission reads the first cache line only; a draw, one more.
const _: () = assert!(std::mem::offset_of!(RxQueue, words) == 64);
const _: () = assert!(std::mem::size_of::<RxQueue>() == 64 + 256);

/// What few runs give an RX queue: forced stalls and the load-dependent model.
#[derive(Clone, Debug, Default)]
struct Rare {
    /// Forced busy periods `[start, end)` (the `stalls` knob), sorted.
    script: Vec<(u64, u64)>,
    /// Forced stalls of the n-th arriving packet: (n, duration), sorted.
    kicks: Vec<(u64, u64)>,
    /// The load-dependent model (budget, ring, flood), when any of it is on.
    loaded: Option<Loaded>,
    /// Steps the loaded model's walk took over periods already generated (a walk over a long
    /// CPU cost revisits them): work too, which the periods alone do not count.
    walked: u64,
    /// Busy periods generated ahead of the loaded model's clock (it looks ahead to find when a
    /// packet completes, then comes back for the next arrival), oldest first.
    ahead: VecDeque<(u64, u64)>,
    /// Packets admitted so far, divided by 2^32.
    arrivals_hi: u32,
}

impl RxQueue {
    /// A queue in its steady state at time zero: the load may be mid-stall when the
    /// simulation begins.
    /// Its stream is the stall stream of `host`'s CPU `cpu` (`host` below 2^16).
    pub(crate) fn new(p: &StallParams, host: u32, cpu: u16) -> RxQueue {
        let mut q = RxQueue {
            gap: 0.0,
            skip_after: 0,
            free_at: 0,
            busy_start: u64::MAX,
            busy_end: u64::MAX,
            rare: None,
            arrivals: 0,
            periods: 0,
            drawn: 0,
            words: Words::new(host, cpu),
        };
        // Always one draw for the load factor, so skew does not shift the stall draws.
        let f = libm::exp((2.0 * rng::unit(&mut q.draws(p)) - 1.0) * libm::log(p.skew));
        q.gap = p.mean_gap.map_or(0.0, |g| (g * f).max(1.0));
        q.skip_after = (q.cycle(p) * p.skip_cycles) as u64;
        if p.mean_gap.is_some() {
            q.restart(0, p);
        }
        q
    }

    /// Adds forced busy periods `[start, end)` and forced stalls `(n, duration)` of the n-th
    /// arriving packet; they draw nothing from the random stream.
    #[cfg(test)]
    pub(crate) fn with_script(mut self, script: Vec<(u64, u64)>, kicks: Vec<(u64, u64)>) -> RxQueue {
        self.set_script(script, kicks);
        self
    }

    /// [`RxQueue::with_script`] in place (a kernel makes its queues where they stay: moving
    /// one, with its kept stream words, copies 320 bytes).
    pub(crate) fn set_script(&mut self, mut script: Vec<(u64, u64)>, mut kicks: Vec<(u64, u64)>) {
        script.retain(|(s, e)| s < e);
        script.sort_unstable();
        kicks.sort_unstable();
        if !script.is_empty() || !kicks.is_empty() {
            let rare = self.rare.get_or_insert_with(Box::default);
            rare.script = script;
            rare.kicks = kicks;
        }
    }

    /// Runs this queue through the load-dependent model `loaded`.
    pub(crate) fn set_loaded(&mut self, loaded: Loaded) {
        self.rare.get_or_insert_with(Box::default).loaded = Some(loaded);
    }

    /// The forced busy periods, sorted.
    fn script(&self) -> &[(u64, u64)] {
        self.rare.as_ref().map_or(&[], |r| &r.script)
    }

    /// The forced stalls of the n-th arriving packet.
    fn kicks(&self) -> &[(u64, u64)] {
        self.rare.as_ref().map_or(&[], |r| &r.kicks)
    }

    /// The load-dependent model, taken out while it runs on this queue.
    fn take_loaded(&mut self) -> Option<Loaded> {
        self.rare.as_mut().and_then(|r| r.loaded.take())
    }

    /// The end of a forced busy period covering `t`, if any.
    fn scripted_until(&self, t: u64) -> Option<u64> {
        self.script().iter().take_while(|(s, _)| *s <= t).filter(|(_, e)| t < *e).map(|(_, e)| *e).max()
    }

    /// Its random stream.
    #[inline]
    fn draws<'a>(&'a mut self, p: &'a StallParams) -> Cursor<'a> {
        Cursor::new(&p.key, Purpose::Stall, &mut self.drawn, &mut self.words)
    }

    /// Its mean cycle: a free gap and a busy period.
    fn cycle(&self, p: &StallParams) -> f64 {
        self.gap + p.mean_busy
    }

    /// After this long unobserved the stall process restarts in its steady state.
    pub(crate) fn skip_after(&self) -> u64 {
        self.skip_after
    }

    /// The index of the next arriving packet among those that reached this queue, counting it.
    #[inline]
    fn count_arrival(&mut self) -> u64 {
        let nth = u64::from(self.rare.as_ref().map_or(0, |r| r.arrivals_hi)) << 32 | u64::from(self.arrivals);
        self.arrivals = self.arrivals.wrapping_add(1);
        if self.arrivals == 0 {
            self.rare.get_or_insert_with(Box::default).arrivals_hi += 1;
        }
        nth
    }

    /// Busy periods generated and walk steps taken so far: the model's work.
    #[cfg(test)]
    pub(crate) fn work(&self) -> u64 {
        u64::from(self.periods) + self.walk_steps().unwrap_or(0)
    }

    /// Steps the loaded model's walk took so far, if the queue has anything rare (else none).
    #[inline]
    pub(crate) fn walk_steps(&self) -> Option<u64> {
        self.rare.as_ref().map(|r| r.walked)
    }

    /// Counts a step of the loaded model's walk.
    pub(crate) fn walked(&mut self) {
        self.rare.get_or_insert_with(Box::default).walked += 1;
    }

    /// The busy periods looked ahead.
    fn ahead(&mut self) -> &mut VecDeque<(u64, u64)> {
        &mut self.rare.get_or_insert_with(Box::default).ahead
    }

    /// Offer a packet costing `cost_ns` arriving at `arrival` in `via`: through the
    /// load-dependent model when it is on, else [`RxQueue::admit`]. `None`: its ring or backlog
    /// was full and it was dropped.
    #[inline]
    pub(crate) fn offer_ns(&mut self, arrival: Instant, cost_ns: u64, p: &StallParams, via: Via) -> Option<Admitted> {
        if self.rare.is_none() {
            return Some(self.admit_plain(arrival, cost_ns, p));
        }
        self.offer_rare(arrival, cost_ns, p, via)
    }

    /// [`RxQueue::offer_ns`] of a cost given as a [`Duration`].
    #[cfg(test)]
    pub(crate) fn offer(&mut self, arrival: Instant, cost: Duration, p: &StallParams, via: Via) -> Option<Admitted> {
        self.offer_ns(arrival, nanos(cost), p, via)
    }

    /// [`RxQueue::offer_ns`] to a queue with scripts, kicks, the load-dependent model or 2^32
    /// arrivals behind it.
    #[inline(never)]
    fn offer_rare(&mut self, arrival: Instant, cost_ns: u64, p: &StallParams, via: Via) -> Option<Admitted> {
        let Some(mut l) = self.take_loaded() else {
            return Some(self.admit_ns(arrival, cost_ns, p));
        };
        let offer = l.offer(self, p, arrival.as_nanos(), cost_ns, via);
        self.set_loaded(l);
        match offer {
            Offer::Dropped => None,
            Offer::Done { done, blocked, nth } => Some(Admitted {
                done: Instant::from_nanos(done),
                stall: blocked.map(|(a, b)| (Instant::from_nanos(a), Instant::from_nanos(b))),
                nth,
            }),
        }
    }

    /// At `now`: when an application thread on this CPU, runnable from `start`, has had `cost`
    /// of CPU ([`Loaded::app_done`]); without the load-dependent model the CPU is its own.
    pub(crate) fn app_done(&mut self, now: Instant, start: Instant, cost: Duration, p: &StallParams) -> Instant {
        let cost_ns = nanos(cost);
        let Some(mut l) = self.take_loaded() else {
            return start.max(now) + cost;
        };
        let done = l.app_done(self, p, now.as_nanos(), start.as_nanos(), cost_ns);
        self.set_loaded(l);
        Instant::from_nanos(done)
    }

    /// Polls of this queue deferred to ksoftirqd so far.
    pub(crate) fn deferrals(&self) -> u64 {
        self.rare.as_ref().and_then(|r| r.loaded.as_ref()).map_or(0, |l| l.deferrals)
    }

    /// The end of the forced busy period covering `t`, or the start of the next one.
    pub(crate) fn scripted_at_or_after(&self, t: u64) -> Option<(u64, u64)> {
        self.script().iter().filter(|(_, e)| t < *e).min().copied()
    }

    /// The forced stall of the next arriving packet (counting it), in nanoseconds.
    pub(crate) fn next_kick(&mut self) -> (u64, u64) {
        let nth = self.count_arrival();
        (nth, self.kicks().iter().filter(|(n, _)| *n == nth).map(|(_, d)| *d).max().unwrap_or(0))
    }

    /// The random busy period covering `t`, or the next one after it, generated on demand and
    /// kept until [`RxQueue::forget_before`]; `None` when stalls are off. Looking ahead and
    /// back again is allowed: `t` need not increase between calls.
    pub(crate) fn busy_at_or_after(&mut self, t: u64, p: &StallParams) -> Option<(u64, u64)> {
        p.mean_gap?;
        if u64::from(self.periods) >= PERIOD_CAP {
            return None;
        }
        // Busy periods are kept in time order and never overlap, so their ends increase: the
        // first ending after `t` is found by bisection (a walk over a long CPU cost looks far
        // ahead, and a linear search made it quadratic).
        let ahead = self.ahead();
        if let Some(&hit) = ahead.get(ahead.partition_point(|(_, e)| *e <= t)) {
            return Some(hit);
        }
        if ahead.is_empty() && t > self.busy_end.saturating_add(self.skip_after) {
            self.restart(t, p);
        }
        while u64::from(self.periods) < PERIOD_CAP {
            let busy = (self.busy_start, self.busy_end);
            let ahead = self.ahead();
            if busy.0 < busy.1 && ahead.back() != Some(&busy) {
                ahead.push_back(busy);
                if t < busy.1 {
                    return Some(busy);
                }
            }
            self.next_period(p);
        }
        None
    }

    /// Drop looked-ahead busy periods that ended at or before `t` (the model's clock).
    pub(crate) fn forget_before(&mut self, t: u64) {
        let Some(rare) = self.rare.as_mut() else { return };
        while rare.ahead.front().is_some_and(|(_, e)| *e <= t) {
            rare.ahead.pop_front();
        }
    }

    /// Put the process in its steady state at `t`: busy with probability `rho`, the queue's
    /// long-run busy share (for the equilibrium residual of a busy period), else free (the gap
    /// is memoryless).
    fn restart(&mut self, t: u64, p: &StallParams) {
        self.busy_start = t;
        self.busy_end = t;
        let rho = p.mean_busy / self.cycle(p);
        let mut r = self.draws(p);
        if rng::unit(&mut r) < rho {
            let residual = p.residual_busy(rng::unit(&mut r));
            self.busy_end = t + residual;
        }
    }

    /// The free gap and busy period after the current one.
    #[inline(always)]
    fn next_period(&mut self, p: &StallParams) {
        let gap = self.gap;
        let mut r = self.draws(p);
        let free = rng::exp_ns(&mut r, gap).max(1);
        let busy = p.busy.draw(&mut r);
        self.busy_start = self.busy_end + free;
        self.busy_end = self.busy_start + busy;
        self.periods += 1;
        p.periods.set(p.periods.get() + 1);
    }

    /// Generate busy periods until the current one ends after `t`.
    #[inline(always)]
    fn advance(&mut self, t: u64, p: &StallParams) {
        // Most packets land before the current busy period ends (or stalls are off: it never
        // does), where there is nothing to generate: the loop's set-up is then not paid.
        if t < self.busy_end {
            return;
        }
        self.advance_past(t, p);
    }

    /// [`RxQueue::advance`] when `t` is at or after the current busy period's end.
    #[inline(never)]
    fn advance_past(&mut self, t: u64, p: &StallParams) {
        if p.mean_gap.is_none() {
            return;
        }
        if t > self.busy_end.saturating_add(self.skip_after) {
            // Long unobserved: restart in the steady state rather than walk every cycle.
            self.restart(t, p);
        }
        while self.busy_end <= t && u64::from(self.periods) < PERIOD_CAP {
            self.next_period(p);
        }
    }

    /// [`RxQueue::admit`] for a queue with nothing rare (no scripts, no kicks, arrivals below
    /// 2^32 - 1): the same result without looking for them (most runs, every packet).
    #[inline(always)]
    fn admit_plain(&mut self, arrival: Instant, service_ns: u64, p: &StallParams) -> Admitted {
        debug_assert!(self.rare.is_none());
        if self.arrivals == u32::MAX {
            // The count wraps: it needs `rare`.
            return self.admit_ns(arrival, service_ns, p);
        }
        let nth = u64::from(self.arrivals);
        self.arrivals += 1;
        let ready = arrival.as_nanos().max(self.free_at);
        let mut t = ready;
        loop {
            self.advance(t, p);
            if self.busy_start <= t && t < self.busy_end {
                t = self.busy_end;
            } else {
                break;
            }
        }
        self.served(ready, t, service_ns, nth)
    }

    /// The packet `nth`, ready at `ready`, starts at `t` and takes `service_ns`: the queue is
    /// busy with it until it is done.
    #[inline(always)]
    fn served(&mut self, ready: u64, t: u64, service_ns: u64, nth: u64) -> Admitted {
        let done = t.saturating_add(service_ns);
        self.free_at = done;
        Admitted {
            done: Instant::from_nanos(done),
            stall: (t > ready).then(|| (Instant::from_nanos(ready), Instant::from_nanos(t))),
            nth,
        }
    }

    /// [`RxQueue::admit_ns`] of a service time given as a [`Duration`].
    #[cfg(test)]
    pub(crate) fn admit(&mut self, arrival: Instant, service: Duration, p: &StallParams) -> Admitted {
        self.admit_ns(arrival, nanos(service), p)
    }

    /// A packet arrives at `arrival`: it starts once the queue is free of earlier packets and
    /// outside any busy period, and takes `service_ns` (non-preemptive). Arrivals are offered in
    /// sending order (issue #28 item 4), so one can be up to the jitter earlier than the last:
    /// it then starts at `free_at`, which never goes back, so the queue stays a FIFO server.
    pub(crate) fn admit_ns(&mut self, arrival: Instant, service_ns: u64, p: &StallParams) -> Admitted {
        let mut t = arrival.as_nanos().max(self.free_at);
        let ready = t;
        let nth = self.count_arrival();
        let kick: u64 = self.kicks().iter().filter(|(n, _)| *n == nth).map(|(_, d)| *d).max().unwrap_or(0);
        t = t.saturating_add(kick);
        loop {
            self.advance(t, p);
            if self.busy_start <= t && t < self.busy_end {
                t = self.busy_end;
            } else if let Some(end) = self.scripted_until(t) {
                t = end;
            } else {
                break;
            }
        }
        self.served(ready, t, service_ns, nth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::Streams;

    fn params(gap_us: u64) -> StallParams {
        seeded(
            &KernelConfig {
                stall_gap: Some(Duration::from_micros(gap_us)),
                stall_xm: Duration::from_micros(50),
                stall_alpha: 1.2,
                stall_cap: Duration::from_millis(20),
                ..KernelConfig::default()
            },
            1,
        )
    }

    /// The parameters of `cfg`, the streams those of `seed`.
    fn seeded(cfg: &KernelConfig, seed: u64) -> StallParams {
        StallParams::new(cfg, &Streams::new(seed))
    }

    /// `p` with the streams of `seed`.
    fn reseeded(p: StallParams, seed: u64) -> StallParams {
        StallParams { key: Streams::new(seed).key().clone(), ..p }
    }

    #[test]
    fn the_residuals_whole_power_gives_powfs_draws() {
        let p = params(400).with_alpha(0.8);
        assert_eq!(p.residual_powi, Some(5));
        let slow = StallParams { residual_powi: None, ..p.clone() };
        for i in 0..200_000u32 {
            let u = (f64::from(i) + 0.5) / 200_000.0;
            assert_eq!(p.residual_busy(u), slow.residual_busy(u), "u {u}");
        }
        assert_eq!(params(400).with_alpha(0.7).residual_powi, None);
    }

    #[test]
    fn no_stalls_means_plain_fifo() {
        let p = seeded(&KernelConfig::default(), 1);
        let mut q = RxQueue::new(&p, 0, 0);
        let s = Duration::from_micros(2);
        let a = q.admit(Instant::from_nanos(1000), s, &p);
        let b = q.admit(Instant::from_nanos(1500), s, &p);
        assert_eq!(a.done.as_nanos(), 3000);
        assert_eq!(b.done.as_nanos(), 5000);
        assert!(a.stall.is_none() && b.stall.is_none());
        assert_eq!(p.busy_fraction(), 0.0);
    }

    #[test]
    fn measured_busy_fraction_matches_the_formula() {
        // Walking every cycle, and restarting in the steady state between sparse probes.
        for walk in [true, false] {
            let mut p = reseeded(params(400), 2);
            if walk {
                p.skip_cycles = f64::INFINITY;
            }
            let mut q = RxQueue::new(&p, 0, 0);
            let (mut stalled, n) = (0u32, 20_000u64);
            for i in 0..n {
                // Sparse probes (10 ms apart) so each one samples the process, not the backlog.
                let a = q.admit(Instant::from_nanos(i * 10_000_000), Duration::ZERO, &p);
                stalled += u32::from(a.stall.is_some());
            }
            let measured = f64::from(stalled) / n as f64;
            let expected = p.busy_fraction();
            assert!((measured - expected).abs() < 0.03, "walk {walk}: measured {measured}, expected {expected}");
        }
    }

    #[test]
    fn equilibrium_residual_matches_sampled_residuals() {
        // Mean residual of a busy period seen at a random instant is E[X^2] / (2 E[X]);
        // compare the inversion sampler with residuals measured on the walked process.
        for alpha in [0.8, 1.0, 1.5] {
            let p = StallParams { skip_cycles: f64::INFINITY, ..reseeded(params(400), 4).with_alpha(alpha) };
            let n = 20_000;
            let inv: f64 =
                (0..n).map(|i| p.residual_busy((f64::from(i) + 0.5) / f64::from(n)) as f64).sum::<f64>() / f64::from(n);
            let mut q = RxQueue::new(&p, 0, 0);
            let (mut sum, mut hits) = (0.0, 0u32);
            for i in 0..200_000u64 {
                let t = 1_000_000 + i * 997_000;
                q.advance(t, &p);
                if q.busy_start <= t && t < q.busy_end {
                    sum += (q.busy_end - t) as f64;
                    hits += 1;
                }
            }
            let walked = sum / f64::from(hits);
            assert!((inv / walked - 1.0).abs() < 0.15, "alpha {alpha}: inversion {inv}, walked {walked}");
        }
    }

    #[test]
    fn scripted_stalls_delay_exactly_the_packets_inside_them() {
        let p = seeded(&KernelConfig::default(), 1);
        let mut q = RxQueue::new(&p, 0, 0).with_script(vec![(5_000, 9_000), (8_000, 12_000)], vec![(3, 4_000)]);
        let s = Duration::from_micros(1);
        let a = q.admit(Instant::from_nanos(1_000), s, &p);
        assert_eq!((a.done.as_nanos(), a.stall), (2_000, None));
        let b = q.admit(Instant::from_nanos(6_000), s, &p);
        assert_eq!(b.stall, Some((Instant::from_nanos(6_000), Instant::from_nanos(12_000))));
        assert_eq!(b.done.as_nanos(), 13_000);
        let c = q.admit(Instant::from_nanos(20_000), s, &p);
        assert_eq!((c.stall, c.nth), (None, 2));
        let d = q.admit(Instant::from_nanos(30_000), s, &p);
        assert_eq!(d.stall, Some((Instant::from_nanos(30_000), Instant::from_nanos(34_000))));
        assert_eq!(d.nth, 3);
    }

    #[test]
    fn arrivals_are_counted_past_two_to_the_32() {
        let p = seeded(&KernelConfig::default(), 1);
        let mut q = RxQueue::new(&p, 0, 0);
        q.arrivals = u32::MAX;
        let s = Duration::from_micros(1);
        let nth: Vec<u64> = (0..3).map(|i| q.admit(Instant::from_nanos(i * 10_000), s, &p).nth).collect();
        assert_eq!(nth, [u64::from(u32::MAX), 1 << 32, (1 << 32) + 1]);
    }

    proptest::proptest! {
        /// A queue with nothing rare admits through the plain path exactly as through the
        /// general one: the same completions, stalls, indexes and state after, under stalls
        /// frequent or not, and across the arrival count's wrap past 2^32.
        #[test]
        fn the_plain_admission_is_the_general_one(
            gap_us in 20u64..2_000,
            seed in 0u64..1_000,
            near_wrap in proptest::bool::ANY,
            steps in proptest::collection::vec((0u64..400_000, 0u64..30_000), 1..200),
        ) {
            let p = reseeded(params(gap_us), seed);
            let (mut plain, mut general) = (RxQueue::new(&p, 3, 1), RxQueue::new(&p, 3, 1));
            if near_wrap {
                plain.arrivals = u32::MAX - 3;
                general.arrivals = u32::MAX - 3;
            }
            let mut at = 0u64;
            for (step, cost) in steps {
                at += step;
                let (arrival, service) = (Instant::from_nanos(at), Duration::from_nanos(cost));
                let a = plain.offer(arrival, service, &p, Via::Ring).expect("no ring to overflow");
                let b = general.admit(arrival, service, &p);
                proptest::prop_assert_eq!(a, b);
                let state = |q: &RxQueue| (q.free_at, q.busy_start, q.busy_end, q.drawn, q.arrivals, q.periods);
                proptest::prop_assert_eq!(state(&plain), state(&general));
            }
        }
    }

    #[test]
    fn completions_are_fifo_and_outside_busy_periods() {
        let p = reseeded(params(100), 3);
        let mut q = RxQueue::new(&p, 0, 0);
        let mut last = 0;
        for i in 0..5_000u64 {
            let a = q.admit(Instant::from_nanos(i * 3_000), Duration::from_micros(2), &p);
            assert!(a.done.as_nanos() >= last + 2_000);
            last = a.done.as_nanos();
            if let Some((from, until)) = a.stall {
                assert!(from < until);
            }
        }
    }
}
