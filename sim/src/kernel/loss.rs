//! Bursty packet loss: a Gilbert–Elliott chain per receiving host, stepped once per arriving
//! packet (good/bad state, each with its own loss probability).

use rand_chacha::ChaCha8Rng;

use super::config::KernelConfig;
use super::rng;

/// The chain's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LossParams {
    good_to_bad: f64,
    bad_to_good: f64,
    in_good: f64,
    in_bad: f64,
}

impl LossParams {
    /// From the `loss_*` knobs.
    pub(crate) fn new(cfg: &KernelConfig) -> LossParams {
        LossParams { good_to_bad: cfg.loss_gb, bad_to_good: cfg.loss_bg, in_good: cfg.loss_good, in_bad: cfg.loss_bad }
    }

    /// True when no packet can ever be lost (then no draws are made at all).
    pub(crate) fn is_lossless(&self) -> bool {
        self.in_good <= 0.0 && (self.in_bad <= 0.0 || self.good_to_bad <= 0.0)
    }

    /// Long-run loss rate.
    #[cfg(test)]
    pub(crate) fn mean_loss(&self) -> f64 {
        let (gb, bg) = (self.good_to_bad, self.bad_to_good);
        if gb + bg <= 0.0 {
            return self.in_good;
        }
        let bad = gb / (gb + bg);
        (1.0 - bad) * self.in_good + bad * self.in_bad
    }
}

/// One host's loss chain.
#[derive(Clone, Debug)]
pub(crate) struct GilbertElliott {
    bad: bool,
    rng: ChaCha8Rng,
}

impl GilbertElliott {
    /// Starts in the good state.
    pub(crate) fn new(rng: ChaCha8Rng) -> GilbertElliott {
        GilbertElliott { bad: false, rng }
    }

    /// Decide the fate of one packet, then step the chain.
    pub(crate) fn lose(&mut self, p: &LossParams) -> bool {
        if p.is_lossless() {
            return false;
        }
        let lost = rng::chance(&mut self.rng, if self.bad { p.in_bad } else { p.in_good });
        let flip = rng::chance(&mut self.rng, if self.bad { p.bad_to_good } else { p.good_to_bad });
        self.bad ^= flip;
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::{stream, Purpose};

    fn params() -> LossParams {
        LossParams { good_to_bad: 0.02, bad_to_good: 0.3, in_good: 0.001, in_bad: 0.6 }
    }

    #[test]
    fn lossless_chain_never_loses() {
        let p = LossParams::new(&KernelConfig::default());
        assert!(p.is_lossless());
        let mut ge = GilbertElliott::new(stream(1, Purpose::Loss, 0, 0));
        assert!((0..1000).all(|_| !ge.lose(&p)));
    }

    #[test]
    fn loss_rate_and_burstiness_match_the_chain() {
        let p = params();
        let mut ge = GilbertElliott::new(stream(2, Purpose::Loss, 0, 0));
        let n = 200_000;
        let outcomes: Vec<bool> = (0..n).map(|_| ge.lose(&p)).collect();
        let rate = outcomes.iter().filter(|&&l| l).count() as f64 / n as f64;
        assert!((rate - p.mean_loss()).abs() < 0.006, "rate {rate} vs {}", p.mean_loss());
        // Bursty: a loss is far more likely right after a loss than on average.
        let after_loss = outcomes.windows(2).filter(|w| w[0]).count() as f64;
        let pairs = outcomes.windows(2).filter(|w| w[0] && w[1]).count() as f64;
        assert!(pairs / after_loss > 3.0 * rate, "not bursty");
    }
}
