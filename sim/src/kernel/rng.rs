//! Seeded random sub-streams: one ChaCha8 stream per purpose and owner, so a draw added in one
//! place (one RX queue, one host's loss process) never shifts the draws anywhere else.

use std::convert::Infallible;

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng, TryRng};

/// What a stream is for; part of the ChaCha stream id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// Per host: RSS key and first ephemeral port.
    Setup = 1,
    /// Per (host, RX queue): the softirq busy/free renewal process.
    Stall = 2,
    /// Per receiving host: the Gilbert–Elliott loss chain.
    Loss = 3,
    /// Per sending host: wire-latency jitter.
    Jitter = 4,
    /// The swarm profile's knob draws.
    Swarm = 5,
    /// Per receiving host: the source ports of the background flood's flows.
    Flood = 6,
}

/// The ChaCha stream id of `purpose`'s stream owned by `(owner, sub)`.
fn stream_id(purpose: Purpose, owner: u32, sub: u16) -> u64 {
    ((purpose as u64) << 48) | (u64::from(owner) << 16) | u64::from(sub)
}

/// The stream for `purpose` owned by `(owner, sub)`, e.g. (host, queue), under `seed`.
pub(crate) fn stream(seed: u64, purpose: Purpose, owner: u32, sub: u16) -> ChaCha8Rng {
    Streams::new(seed).get(purpose, owner, sub)
}

/// Every stream of one seed, its key expanded once: expanding it (`seed_from_u64`) cost as much
/// as the rest of making a stream, and a kernel makes a dozen streams per host.
#[derive(Clone, Debug)]
pub(crate) struct Streams(ChaCha8Rng);

impl Streams {
    /// The streams of `seed`.
    pub(crate) fn new(seed: u64) -> Streams {
        Streams(ChaCha8Rng::seed_from_u64(seed))
    }

    /// The seed's unused generator, from which a [`Cursor`] makes its stream's words.
    pub(crate) fn key(&self) -> &ChaCha8Rng {
        &self.0
    }

    /// The stream for `purpose` owned by `(owner, sub)`: [`stream`]'s, a copy of the seed's
    /// unused generator given its own stream id (nothing was drawn, so nothing is redrawn).
    pub(crate) fn get(&self, purpose: Purpose, owner: u32, sub: u16) -> ChaCha8Rng {
        let mut rng = self.0.clone();
        rng.set_stream(stream_id(purpose, owner, sub));
        rng
    }
}

/// Words of a stream in a [`ChaCha8Rng`]'s output buffer.
const WORDS: usize = 64;

/// The next words of one stream, kept by its owner without a generator: for streams drawn
/// rarely, each by one of thousands of owners (the RX queues' stall processes). A
/// [`ChaCha8Rng`] per owner keeps the same 64 words, its index in the first of them and its
/// 48-byte core after them, so a draw from a cold one read the index's line and the word's, and
/// a refill its core's. Here the owner keeps its position ([`Cursor`]) with its other hot
/// state, and when its words are used up the next 64 are made from the seed's shared generator
/// at the stream's position: the same words, bit for bit, and the same one generation per 64.
/// Which stream it is, (owner, sub) of one purpose, waits in word 0's place once word 0 is
/// drawn (it is read back only to make the next 64).
#[derive(Clone, Debug)]
pub(crate) struct Words([u8; WORDS * 4]);

impl Words {
    /// The words of the stream of `(owner, sub)` (`owner` below 2^16), none made yet.
    pub(crate) fn new(owner: u32, sub: u16) -> Words {
        debug_assert!(owner < 1 << 16, "owner {owner}: a kept stream names it in 16 bits");
        let mut w = Words([0; WORDS * 4]);
        w.set_whose(owner << 16 | u32::from(sub));
        w
    }

    fn word(&self, i: usize) -> u32 {
        let w: [u8; 4] = self.0[i * 4..i * 4 + 4].try_into().unwrap_or_default();
        u32::from_le_bytes(w)
    }

    /// Words `i` and `i + 1` (`i` below 63) as one u64, word `i` the low half: their bytes
    /// read as one little-endian u64.
    #[inline]
    fn pair(&self, i: usize) -> u64 {
        let w: [u8; 8] = self.0[i * 4..i * 4 + 8].try_into().unwrap_or_default();
        u64::from_le_bytes(w)
    }

    fn set_whose(&mut self, whose: u32) {
        self.0[..4].copy_from_slice(&whose.to_le_bytes());
    }
}

/// Draws from a [`Words`] stream of `purpose` under `key` (a seed's unused generator,
/// [`Streams::key`]), of which `drawn` words were drawn so far (`words` holds those from `drawn`
/// rounded down to a multiple of 64, unless that is `drawn` itself).
pub(crate) struct Cursor<'a> {
    key: &'a ChaCha8Rng,
    purpose: Purpose,
    drawn: &'a mut u64,
    words: &'a mut Words,
}

impl<'a> Cursor<'a> {
    /// The stream of `words` for `purpose` under `key`, at `drawn`.
    #[inline]
    pub(crate) fn new(key: &'a ChaCha8Rng, purpose: Purpose, drawn: &'a mut u64, words: &'a mut Words) -> Cursor<'a> {
        Cursor { key, purpose, drawn, words }
    }

    /// The next word.
    #[inline]
    fn word(&mut self) -> u32 {
        let i = (*self.drawn % WORDS as u64) as usize;
        *self.drawn += 1;
        if i == 0 {
            return self.refill();
        }
        self.words.word(i)
    }

    /// Makes the 64 words from `drawn - 1` (a multiple of 64) on and returns the first.
    #[cold]
    fn refill(&mut self) -> u32 {
        let whose = self.words.word(0);
        let mut g = self.key.clone();
        g.set_stream(stream_id(self.purpose, whose >> 16, whose as u16));
        g.set_word_pos(u128::from(*self.drawn - 1));
        // The words little-endian, as a `ChaCha8Rng` gives bytes.
        g.fill_bytes(&mut self.words.0);
        let first = self.words.word(0);
        self.words.set_whose(whose);
        first
    }
}

impl TryRng for Cursor<'_> {
    type Error = Infallible;

    #[inline]
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.word())
    }

    /// Two words, the first the low half (as [`ChaCha8Rng`]'s).
    #[inline]
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let i = (*self.drawn % WORDS as u64) as usize;
        // `i` is 0 or 63 (`i + 1` wraps to 0 or is 64): a refill first or between the two.
        if (i + 1) % WORDS <= 1 {
            let lo = self.word();
            let hi = self.word();
            return Ok(u64::from(hi) << 32 | u64::from(lo));
        }
        *self.drawn += 2;
        Ok(self.words.pair(i))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        for chunk in dst.chunks_mut(4) {
            let w = self.word().to_le_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
        Ok(())
    }
}

const TWO_POW_M53: f64 = 1.0 / (1u64 << 53) as f64;

/// Uniform in `[0, 1)`.
pub(crate) fn unit<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * TWO_POW_M53
}

/// Uniform in `(0, 1)`, safe to take the logarithm of.
pub(crate) fn open_unit<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    ((rng.next_u64() >> 11) as f64 + 0.5) * TWO_POW_M53
}

/// Uniform in `0..n` (`n > 0`), by widening multiplication.
pub(crate) fn below<R: Rng + ?Sized>(rng: &mut R, n: u64) -> u64 {
    ((u128::from(rng.next_u64()) * u128::from(n)) >> 64) as u64
}

/// True with probability `p`; draws nothing when `p` is 0 or 1.
pub(crate) fn chance<R: Rng + ?Sized>(rng: &mut R, p: f64) -> bool {
    if p <= 0.0 {
        false
    } else if p >= 1.0 {
        true
    } else {
        unit(rng) < p
    }
}

/// How far (relatively) a fast estimate ([`ln_estimate`], `quarter_power`, the platform's
/// `powf`) may stray from `libm`'s without [`exact_from`] noticing: each is within a few ulps
/// (1e-15), this is 1e-10.
const SLACK: f64 = 1e-10;

/// 2^62: below it a truncation is one signed conversion.
const TWO_POW_62: f64 = (1u64 << 62) as f64;

/// `whole(exact() as u64)` without computing `exact` (`libm`'s portable, slow result) when the
/// fast `estimate` of it already decides. `whole` maps the value's integer part
/// (`as u64`: truncated, saturating, NaN 0) to the draw, non-decreasing, so if the whole
/// interval `estimate * (1 ± SLACK)` has one integer part, or `whole` maps its ends' to one
/// value, the exact result (inside that interval) maps to it too. Otherwise (an integer
/// boundary within 1e-10: about one draw in 10^5) `exact` is computed. The draws stay
/// bit-for-bit libm's on every machine.
pub(crate) fn exact_from(estimate: f64, exact: impl FnOnce() -> f64, whole: impl Fn(u64) -> u64) -> u64 {
    // Positive and finite, in one comparison of its bits (zero, negatives, infinities and NaN
    // fall outside).
    if estimate.to_bits().wrapping_sub(1) < f64::INFINITY.to_bits() - 1 {
        let (lo, hi) = (estimate * (1.0 - SLACK), estimate * (1.0 + SLACK));
        // Nearly every draw: both ends truncate alike, each in one signed conversion (below
        // 2^62 nothing saturates).
        if hi < TWO_POW_62 {
            let t = lo as i64;
            if t == hi as i64 {
                return whole(t as u64);
            }
        }
        let w = whole(lo as u64);
        if w == whole(hi as u64) {
            return w;
        }
    }
    whole(exact() as u64)
}

/// Exponential with the given mean (nanoseconds, rounded down).
pub(crate) fn exp_ns<R: Rng + ?Sized>(rng: &mut R, mean_ns: f64) -> u64 {
    let u = open_unit(rng);
    exact_from(-mean_ns * ln_estimate(u), || -mean_ns * libm::log(u), |t| t)
}

/// `ln 2`, rounded to the nearest double.
const LN_2: f64 = std::f64::consts::LN_2;

/// `ln u` for `u` in `[2^-1022, 1]` to within a few ulps (relative error below 1e-14, far inside
/// [`exact_from`]'s slack), inline: `u = 2^e m` with `m` in `[√2/2, √2)`, and
/// `ln m = 2 atanh(s)`, `s = (m - 1) / (m + 1)`, `|s| <= 0.1716`, by its series to `s^17` (the
/// next term is below 1e-15 of the sum). Nothing near 1 cancels: there `e` is 0. A call of the
/// platform's `ln` cost twice its instructions, on every free gap a queue draws.
#[inline]
fn ln_estimate(u: f64) -> f64 {
    const SQRT_2_BITS: u64 = 0x3ff6_a09e_667f_3bcd;
    let bits = u.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m_bits = (bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000;
    if m_bits > SQRT_2_BITS {
        // Halve m, count it in the exponent.
        m_bits -= 1 << 52;
        e += 1;
    }
    let f = f64::from_bits(m_bits) - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let p = 1.0
        + z * (1.0 / 3.0
            + z * (1.0 / 5.0
                + z * (1.0 / 7.0
                    + z * (1.0 / 9.0 + z * (1.0 / 11.0 + z * (1.0 / 13.0 + z * (1.0 / 15.0 + z * (1.0 / 17.0))))))));
    e as f64 * LN_2 + 2.0 * s * p
}

/// Pareto(`xm`, `alpha`) capped at `cap` (nanoseconds), its exponent worked out once: a
/// queue's busy periods draw from it on every cycle.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pareto {
    xm_ns: f64,
    /// `-1 / alpha`.
    e: f64,
    /// `4 e` when it is a whole number of quarters (the profiles' alpha 0.8 makes -1.25), so
    /// `u^e` is two square roots and a few multiplications.
    quarters: Option<i32>,
    cap_ns: u64,
    /// The least integer part of a value at or above `cap_ns as f64` (that float itself, a
    /// whole number): a draw at or past it is capped, as `x >= cap_ns as f64` decides.
    cap_from: u64,
}

impl Pareto {
    /// The law with scale `xm_ns`, shape `alpha`, capped at `cap_ns`.
    pub(crate) fn new(xm_ns: f64, alpha: f64, cap_ns: u64) -> Pareto {
        let e = -1.0 / alpha;
        let q = e * 4.0;
        let quarters = (q == q.round() && q.abs() <= 16.0).then_some(q as i32);
        Pareto { xm_ns, e, quarters, cap_ns, cap_from: cap_ns as f64 as u64 }
    }

    /// One draw (nanoseconds).
    #[inline]
    pub(crate) fn draw<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let (u, e, cap_ns, cap_from) = (open_unit(rng), self.e, self.cap_ns, self.cap_from);
        // `if x >= cap_ns as f64 { cap_ns } else { x as u64 }`, from `x`'s integer part.
        let capped = |t: u64| if t >= cap_from { cap_ns } else { t };
        // `u^e` within a few ulps for the estimate; `libm`'s when it does not decide.
        let estimate = match self.quarters {
            Some(q) => quarter_power(u, q),
            None => u.powf(e),
        };
        exact_from(self.xm_ns * estimate, || self.xm_ns * libm::pow(u, e), capped)
    }
}

/// `u^(q / 4)` within a few ulps, `u` in `(0, 1]`, `|q| <= 16`: `u` to the whole part of
/// `|q| / 4` times the quarter powers left (square roots), inverted if `q < 0` (alpha 0.8's
/// `q = -5` is `1 / (u * u^(1/4))`, without a loop).
#[inline]
fn quarter_power(u: f64, q: i32) -> f64 {
    let n = q.unsigned_abs();
    let half = u.sqrt();
    let rest = match n & 3 {
        0 => 1.0,
        1 => half.sqrt(),
        2 => half,
        _ => half * half.sqrt(),
    };
    let y = match n >> 2 {
        0 => rest,
        1 => u * rest,
        k => powi(u, k as i32) * rest,
    };
    if q < 0 {
        1.0 / y
    } else {
        y
    }
}

/// `x^n` by squaring (what the platform's `powi` does, without its call).
#[inline]
pub(crate) fn powi(mut x: f64, n: i32) -> f64 {
    let mut k = n.unsigned_abs();
    let mut y = if k & 1 == 1 { x } else { 1.0 };
    k >>= 1;
    while k > 0 {
        x *= x;
        if k & 1 == 1 {
            y *= x;
        }
        k >>= 1;
    }
    if n < 0 {
        1.0 / y
    } else {
        y
    }
}

/// Log-uniform in `[lo, hi]`.
pub(crate) fn log_uniform<R: Rng + ?Sized>(rng: &mut R, lo: f64, hi: f64) -> f64 {
    libm::exp(libm::log(lo) + unit(rng) * (libm::log(hi) - libm::log(lo)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seeds_streams_are_the_streams_made_one_by_one() {
        let streams = Streams::new(42);
        for (purpose, owner, sub) in [(Purpose::Setup, 0, 0), (Purpose::Stall, 3, 7), (Purpose::Jitter, 65_535, 0)] {
            let (mut a, mut b) = (streams.get(purpose, owner, sub), stream(42, purpose, owner, sub));
            let mut fresh = ChaCha8Rng::seed_from_u64(42);
            fresh.set_stream(((purpose as u64) << 48) | (u64::from(owner) << 16) | u64::from(sub));
            for _ in 0..100 {
                let x = a.next_u64();
                assert_eq!(x, b.next_u64());
                assert_eq!(x, fresh.next_u64());
            }
        }
        // A copy is not the generator it was copied from: each stream starts at its beginning.
        let mut first = streams.get(Purpose::Stall, 0, 0);
        first.next_u64();
        assert_eq!(streams.get(Purpose::Stall, 0, 0).next_u64(), stream(42, Purpose::Stall, 0, 0).next_u64());
    }

    #[test]
    fn a_streams_kept_words_are_its_generators() {
        let streams = Streams::new(7);
        for (owner, sub) in [(0, 0), (3, 5), (65_535, 1_024)] {
            let mut g = streams.get(Purpose::Stall, owner, sub);
            let (mut drawn, mut words) = (0u64, Words::new(owner, sub));
            // Mixed widths, across many 64-word refills and with a u64 straddling each boundary.
            for i in 0..2_000u32 {
                let mut c = Cursor::new(streams.key(), Purpose::Stall, &mut drawn, &mut words);
                match i % 3 {
                    0 => assert_eq!(c.next_u64(), g.next_u64(), "draw {i}"),
                    1 => assert_eq!(c.next_u32(), g.next_u32(), "draw {i}"),
                    _ => {
                        let (mut a, mut b) = ([0u8; 7], [0u8; 7]);
                        c.fill_bytes(&mut a);
                        g.fill_bytes(&mut b);
                        assert_eq!(a, b, "draw {i}");
                    }
                }
            }
            assert_eq!(u128::from(drawn), g.get_word_pos());
        }
    }

    #[test]
    fn streams_are_reproducible_and_independent() {
        let a1: Vec<u64> = (0..4)
            .map({
                let mut r = stream(9, Purpose::Stall, 3, 1);
                move |_| r.next_u64()
            })
            .collect();
        let a2: Vec<u64> = (0..4)
            .map({
                let mut r = stream(9, Purpose::Stall, 3, 1);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..4)
            .map({
                let mut r = stream(9, Purpose::Stall, 3, 2);
                move |_| r.next_u64()
            })
            .collect();
        let c: Vec<u64> = (0..4)
            .map({
                let mut r = stream(9, Purpose::Loss, 3, 1);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a1, a2);
        assert_ne!(a1, b);
        assert_ne!(a1, c);
    }

    #[test]
    fn fast_draws_are_libms_bit_for_bit() {
        let mut r = stream(5, Purpose::Stall, 0, 0);
        let cases =
            [(50_000.0, 0.8, 30_000_000), (5_000.0, 2.5, 20_000_000), (200_000.0, 1.2, 1 << 40), (9e3, 0.25, 1 << 50)];
        for (xm, alpha, cap) in cases {
            let (mut a, mut b) = (r.clone(), r.clone());
            for _ in 0..300_000 {
                let slow_p = {
                    let x = xm * libm::pow(open_unit(&mut a), -1.0 / alpha);
                    if x >= cap as f64 {
                        cap
                    } else {
                        x as u64
                    }
                };
                assert_eq!(Pareto::new(xm, alpha, cap).draw(&mut b), slow_p);
                let slow_e = (-xm * libm::log(open_unit(&mut a))) as u64;
                assert_eq!(exp_ns(&mut b, xm), slow_e);
            }
            r = a;
        }
        // The inline logarithm: edges, the halving boundary and the draws' whole range.
        let mut v = stream(11, Purpose::Stall, 0, 0);
        let sqrt2 = std::f64::consts::SQRT_2;
        let edges = [1.0, 0.5, 0.25, 1.0 - 1e-16, f64::MIN_POSITIVE, 2f64.powi(-54), sqrt2 / 2.0, sqrt2 / 4.0];
        let near = (-60..0).flat_map(|k| {
            let b = sqrt2 * 2f64.powi(k);
            [b, f64::from_bits(b.to_bits() - 1), f64::from_bits(b.to_bits() + 1)]
        });
        // Uniform draws, and their powers to reach down to 2^-54 as often as near 1.
        let draws: Vec<f64> = (0..1_000_000).map(|i| open_unit(&mut v).powi(1 + i % 8)).collect();
        for u in edges.into_iter().chain(near).chain(draws) {
            let (fast, slow) = (ln_estimate(u), libm::log(u));
            let err = if slow == 0.0 { fast.abs() } else { (fast / slow - 1.0).abs() };
            // Measured worst: 1.1e-15.
            assert!(err < 1e-14, "ln {u}: {fast} against {slow}");
        }
        for q in -16..=16 {
            for i in 1..=1_000u32 {
                let u = f64::from(i) / 1_000.0 * if i % 2 == 0 { 1.0 } else { 1e-15 };
                let (fast, slow) = (quarter_power(u, q), libm::pow(u, f64::from(q) / 4.0));
                assert!((fast / slow - 1.0).abs() < 1e-14, "{u}^({q}/4): {fast} against {slow}");
            }
        }
        // At an integer boundary the estimate cannot decide: the exact value is used.
        assert_eq!(exact_from(7.0, || 6.999_999_999_999_999, |t| t), 6);
        assert_eq!(exact_from(f64::NAN, || 3.5, |t| t), 3);
        for (x, n) in [(0.7f64, -5), (1.3, 4), (0.9, 0), (2.0, -16), (0.5, 7)] {
            assert!((powi(x, n) / x.powi(n) - 1.0).abs() < 1e-14, "{x}^{n}");
        }
    }

    /// The first `exact_from`: the ends of the interval through `whole`, the finite check in
    /// full, both conversions saturating.
    fn exact_from_by_ends(estimate: f64, exact: impl FnOnce() -> f64, whole: impl Fn(f64) -> u64) -> u64 {
        if estimate.is_finite() && estimate > 0.0 {
            let lo = whole(estimate * (1.0 - SLACK));
            if lo == whole(estimate * (1.0 + SLACK)) {
                return lo;
            }
        }
        whole(exact())
    }

    /// The shapes of `whole` the callers use, on the value (as they were written) and on its
    /// integer part (as `exact_from` takes them): truncation, a cap (`Pareto::draw`), a clamp
    /// (`residual_busy`).
    fn shapes(pick: u8, cap: u64) -> (impl Fn(f64) -> u64, impl Fn(u64) -> u64) {
        let cap_from = Pareto::new(1.0, 1.0, cap).cap_from;
        let on_value = move |x: f64| match pick {
            0 => x as u64,
            1 => {
                if x >= cap as f64 {
                    cap
                } else {
                    x as u64
                }
            }
            _ => (x as u64).clamp(1, cap),
        };
        let on_part = move |t: u64| match pick {
            0 => t,
            1 => {
                if t >= cap_from {
                    cap
                } else {
                    t
                }
            }
            _ => t.clamp(1, cap),
        };
        (on_value, on_part)
    }

    proptest::proptest! {
        /// `exact_from` decides as the interval's ends through `whole` on the value do, for
        /// every shape of `whole` its callers use, caps a float holds exactly and caps it rounds
        /// up or down, estimates from tiny to past 2^64, near integers and not, and exact values
        /// anywhere in the interval.
        #[test]
        fn exact_from_decides_as_the_ends_do(
            mantissa in 0.0f64..1.0,
            scale in -20i32..70,
            near in proptest::bool::ANY,
            off in -2.0f64..2.0,
            pick in 0u8..3,
            cap_pick in 0usize..5,
        ) {
            let cap = [1 << 40, (1 << 53) + 1, (1 << 54) + 3, (1 << 62) + 1, u64::MAX][cap_pick];
            let mut estimate = mantissa * 2f64.powi(scale);
            if near {
                // Within the slack of an integer, where the estimate cannot decide.
                estimate = estimate.round() * (1.0 + off * SLACK);
            }
            let exact = estimate * (1.0 + off * 0.4 * SLACK);
            let (on_value, on_part) = shapes(pick, cap);
            proptest::prop_assert_eq!(
                exact_from(estimate, || exact, &on_part),
                exact_from_by_ends(estimate, || exact, &on_value)
            );
            // At the cap itself and the floats around it.
            let c = cap as f64;
            for x in [c, f64::from_bits(c.to_bits() - 1), f64::from_bits(c.to_bits() + 1)] {
                proptest::prop_assert_eq!(exact_from(f64::NAN, || x, &on_part), on_value(x));
            }
        }
    }

    #[test]
    fn exact_from_handles_what_is_not_a_positive_finite_estimate() {
        for estimate in [0.0, -0.0, -3.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, f64::MIN_POSITIVE / 2.0] {
            let x = exact_from(estimate, || 9.5, |t| t);
            assert_eq!(x, exact_from_by_ends(estimate, || 9.5, |x| x as u64), "{estimate}");
        }
        assert_eq!(exact_from(2f64.powi(70), || 2f64.powi(70), |t| t), u64::MAX);
        assert_eq!(exact_from(f64::NAN, || f64::NAN, |t| t), 0);
    }

    #[test]
    fn distributions_stay_in_range() {
        let mut r = stream(1, Purpose::Setup, 0, 0);
        for _ in 0..10_000 {
            let u = unit(&mut r);
            assert!((0.0..1.0).contains(&u));
            assert!(below(&mut r, 7) < 7);
            let p = Pareto::new(50_000.0, 1.2, 20_000_000).draw(&mut r);
            assert!((50_000..=20_000_000).contains(&p));
            let l = log_uniform(&mut r, 2.0, 8.0);
            assert!((2.0..=8.0 + 1e-9).contains(&l));
        }
        let mean = (0..20_000).map(|_| exp_ns(&mut r, 1000.0)).sum::<u64>() as f64 / 20_000.0;
        assert!((900.0..1100.0).contains(&mean), "exp mean {mean}");
        assert!(!chance(&mut r, 0.0) && chance(&mut r, 1.0));
    }
}
