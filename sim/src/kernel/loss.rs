//! Bursty packet loss: a Gilbert–Elliott chain per receiving host in continuous time (good and
//! bad spells of exponentially distributed length, each state with its own loss probability).
//! Spells are measured in time, not packets, so a quiet host does not stay in a bad spell for
//! minutes because no packet came to step it.

use std::time::Duration;

use bootsim_core::Instant;
use rand_chacha::ChaCha8Rng;

use super::config::KernelConfig;
use super::rng;

/// After a quiet gap this many mean cycles long the chain has forgotten its state (to within
/// e^-64): the next state is drawn from the stationary distribution instead of stepping.
const MIXED_CYCLES: u64 = 64;

/// The chain's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LossParams {
    good_ns: f64,
    bad_ns: f64,
    in_good: f64,
    in_bad: f64,
    /// No packet can ever be lost: decided once, as every arriving packet asks.
    lossless: bool,
}

impl LossParams {
    /// From the `loss_*` knobs.
    pub(crate) fn new(cfg: &KernelConfig) -> LossParams {
        LossParams::with(
            cfg.loss_good_spell.as_nanos().max(1) as f64,
            cfg.loss_bad_spell.as_nanos().max(1) as f64,
            cfg.loss_good,
            cfg.loss_bad,
        )
    }

    /// Mean good and bad spells (nanoseconds) and the loss probability in each.
    fn with(good_ns: f64, bad_ns: f64, in_good: f64, in_bad: f64) -> LossParams {
        LossParams { good_ns, bad_ns, in_good, in_bad, lossless: in_good <= 0.0 && in_bad <= 0.0 }
    }

    /// True when no packet can ever be lost (then no draws are made at all).
    #[inline]
    pub(crate) fn is_lossless(&self) -> bool {
        self.lossless
    }

    /// Share of time spent in the bad state.
    fn bad_share(&self) -> f64 {
        self.bad_ns / (self.good_ns + self.bad_ns)
    }

    /// Long-run loss rate of packets arriving at a steady rate.
    #[cfg(test)]
    pub(crate) fn mean_loss(&self) -> f64 {
        let bad = self.bad_share();
        (1.0 - bad) * self.in_good + bad * self.in_bad
    }
}

/// One host's loss chain.
#[derive(Clone, Debug)]
pub(crate) struct GilbertElliott {
    bad: bool,
    /// When the current spell ends (`None` until the first packet).
    until: Option<Instant>,
    rng: ChaCha8Rng,
}

impl GilbertElliott {
    /// Starts in the good state at the first packet.
    pub(crate) fn new(rng: ChaCha8Rng) -> GilbertElliott {
        GilbertElliott { bad: false, until: None, rng }
    }

    /// Decides the fate of a packet arriving at `now`.
    pub(crate) fn lose(&mut self, p: &LossParams, now: Instant) -> bool {
        if p.is_lossless() {
            return false;
        }
        self.advance(p, now);
        rng::chance(&mut self.rng, if self.bad { p.in_bad } else { p.in_good })
    }

    /// Brings the chain to `now`: spell after spell, or, after a long quiet gap, a fresh
    /// stationary draw (the chain is memoryless, so the residual spell is a fresh one).
    fn advance(&mut self, p: &LossParams, now: Instant) {
        let mut until = match self.until {
            Some(u) => u,
            None => now + self.spell(p),
        };
        let cycle = Duration::from_nanos((p.good_ns + p.bad_ns) as u64);
        if now.saturating_since(until) > cycle.saturating_mul(MIXED_CYCLES as u32) {
            self.bad = rng::chance(&mut self.rng, p.bad_share());
            until = now + self.spell(p);
        }
        while now >= until {
            self.bad = !self.bad;
            until = until + self.spell(p);
        }
        self.until = Some(until);
    }

    /// A spell of the current state.
    fn spell(&mut self, p: &LossParams) -> Duration {
        let mean = if self.bad { p.bad_ns } else { p.good_ns };
        Duration::from_nanos(rng::exp_ns(&mut self.rng, mean).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::{stream, Purpose};

    fn params() -> LossParams {
        LossParams::with(1_500_000.0, 100_000.0, 0.001, 0.6)
    }

    #[test]
    fn only_zero_loss_in_both_states_is_lossless() {
        assert!(LossParams::with(1.0, 1.0, 0.0, 0.0).is_lossless());
        assert!(!LossParams::with(1.0, 1.0, 0.0, 0.5).is_lossless());
        assert!(!LossParams::with(1.0, 1.0, 0.01, 0.0).is_lossless());
        assert!(!params().is_lossless());
    }

    /// Packets every `gap` from time zero.
    fn at(i: u64, gap: Duration) -> Instant {
        Instant::ZERO + gap * i as u32
    }

    #[test]
    fn lossless_chain_never_loses() {
        let p = LossParams::new(&KernelConfig::default());
        assert!(p.is_lossless());
        let mut ge = GilbertElliott::new(stream(1, Purpose::Loss, 0, 0));
        assert!((0..1000).all(|i| !ge.lose(&p, at(i, Duration::from_micros(10)))));
    }

    #[test]
    fn loss_rate_and_burstiness_match_the_chain() {
        let p = params();
        let mut ge = GilbertElliott::new(stream(2, Purpose::Loss, 0, 0));
        let n = 200_000;
        let outcomes: Vec<bool> = (0..n).map(|i| ge.lose(&p, at(i, Duration::from_micros(10)))).collect();
        let rate = outcomes.iter().filter(|&&l| l).count() as f64 / n as f64;
        assert!((rate - p.mean_loss()).abs() < 0.006, "rate {rate} vs {}", p.mean_loss());
        // Bursty: a loss is far more likely right after a loss than on average.
        let after_loss = outcomes.windows(2).filter(|w| w[0]).count() as f64;
        let pairs = outcomes.windows(2).filter(|w| w[0] && w[1]).count() as f64;
        assert!(pairs / after_loss > 3.0 * rate, "not bursty");
    }

    #[test]
    fn a_bad_spell_ends_in_time_on_a_quiet_host() {
        // One packet a second (a retransmission backing off): the bad spells last 100 us, so
        // consecutive packets are independent, at the stationary rate, never a run of losses.
        let p = params();
        let mut ge = GilbertElliott::new(stream(3, Purpose::Loss, 0, 0));
        let outcomes: Vec<bool> = (0..20_000).map(|i| ge.lose(&p, at(i, Duration::from_secs(1)))).collect();
        let rate = outcomes.iter().filter(|&&l| l).count() as f64 / outcomes.len() as f64;
        assert!((rate - p.mean_loss()).abs() < 0.01, "rate {rate} vs {}", p.mean_loss());
        let longest = outcomes.split(|l| !l).map(<[bool]>::len).max().unwrap();
        assert!(longest <= 4, "a run of {longest} losses one second apart");
    }

    #[test]
    fn the_chain_is_a_function_of_the_seed_and_the_arrival_times() {
        let p = params();
        let run = || {
            let mut ge = GilbertElliott::new(stream(4, Purpose::Loss, 0, 0));
            (0..5000).map(|i| ge.lose(&p, at(i * i % 977, Duration::from_micros(37)))).collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }
}
