//! The vertical time axis: one row per distinct instant. A gap between rows is drawn at
//! [`PX_PER_MS`] but never shorter than [`MIN_STEP`] (so that microsecond races stay readable);
//! a gap that would be taller than [`CUT_STEP`] is cut to that height and reported as a
//! [`Cut`], which the picture marks on the axis with the gap's length. Extra room can be asked
//! for before chosen instants (the picture's band separators). Instants between rows interpolate.

use std::time::Duration;

use bootsim_core::Instant;

/// Pixels per simulated millisecond where time is drawn to scale.
pub const PX_PER_MS: f64 = 24.0;
/// Pixels between two rows at least.
pub const MIN_STEP: f64 = 15.0;
/// Height of a cut gap; gaps longer than this at [`PX_PER_MS`] are cut.
pub const CUT_STEP: f64 = 44.0;

/// A gap drawn shorter than [`PX_PER_MS`] would make it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cut {
    /// The y of the row above and of the row below (without extra room).
    pub y0: f64,
    /// The y of the row below.
    pub y1: f64,
    /// The gap's real length.
    pub gap: Duration,
}

/// Maps simulated instants to y coordinates, monotonically.
#[derive(Clone, Debug)]
pub struct Scale {
    rows: Vec<(u64, f64)>,
    cuts: Vec<Cut>,
}

impl Scale {
    /// A scale whose first row is at `top` and holds every instant of `times`; `room` adds
    /// pixels just above the first row at or after each of its instants.
    pub fn new(mut times: Vec<Instant>, top: f64, room: &[(Instant, f64)]) -> Scale {
        times.sort();
        times.dedup();
        let mut rows: Vec<(u64, f64)> = Vec::with_capacity(times.len());
        let mut cuts = Vec::new();
        for t in times {
            let extra: f64 = room
                .iter()
                .filter(|(r, _)| rows.last().is_none_or(|&(p, _)| p < r.as_nanos()) && r.as_nanos() <= t.as_nanos())
                .map(|r| r.1)
                .sum();
            let t = t.as_nanos();
            let y = match rows.last() {
                None => top + extra,
                Some(&(prev, y)) => {
                    let natural = (t - prev) as f64 / 1e6 * PX_PER_MS;
                    if natural > CUT_STEP {
                        cuts.push(Cut { y0: y, y1: y + CUT_STEP, gap: Duration::from_nanos(t - prev) });
                    }
                    y + natural.clamp(MIN_STEP, CUT_STEP) + extra
                }
            };
            rows.push((t, y));
        }
        Scale { rows, cuts }
    }

    /// The y of instant `t` (interpolated between rows, clamped at both ends).
    pub fn y(&self, t: Instant) -> f64 {
        let t = t.as_nanos();
        let i = self.rows.partition_point(|&(r, _)| r < t);
        match (self.rows.get(i.wrapping_sub(1)), self.rows.get(i)) {
            (_, Some(&(r, y))) if r == t => y,
            (Some(&(t0, y0)), Some(&(t1, y1))) => y0 + (y1 - y0) * (t - t0) as f64 / (t1 - t0) as f64,
            (None, Some(&(_, y))) | (Some(&(_, y)), None) => y,
            (None, None) => 0.0,
        }
    }

    /// The rows: (instant, y), top to bottom.
    pub fn rows(&self) -> impl Iterator<Item = (Instant, f64)> + '_ {
        self.rows.iter().map(|&(t, y)| (Instant::from_nanos(t), y))
    }

    /// The gaps drawn shorter than to scale, top to bottom.
    pub fn cuts(&self) -> &[Cut] {
        &self.cuts
    }

    /// The y of the last row.
    pub fn bottom(&self) -> f64 {
        self.rows.last().map_or(0.0, |r| r.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotone_to_scale_and_cut() {
        let t = |ns| Instant::from_nanos(ns);
        let s = Scale::new(vec![t(5_000_000), t(0), t(1_000), t(1_000), t(6_000_000)], 10.0, &[]);
        assert_eq!(s.rows().count(), 4);
        assert_eq!(s.y(t(0)), 10.0);
        // A microsecond apart: the minimum step; a millisecond: to scale.
        assert_eq!(s.y(t(1_000)), 10.0 + MIN_STEP);
        assert_eq!(s.y(t(6_000_000)) - s.y(t(5_000_000)), PX_PER_MS);
        // Five milliseconds: cut, and reported.
        assert_eq!(s.y(t(5_000_000)) - s.y(t(1_000)), CUT_STEP);
        assert_eq!(s.cuts(), &[Cut { y0: 25.0, y1: 25.0 + CUT_STEP, gap: Duration::from_nanos(4_999_000) }]);
        let (a, b) = (s.y(t(2_000_000)), s.y(t(3_000_000)));
        assert!(s.y(t(1_000)) < a && a < b && b < s.y(t(5_000_000)));
        assert_eq!(s.y(t(9_000_000)), s.bottom());
        assert_eq!(Scale::new(Vec::new(), 0.0, &[]).y(t(1)), 0.0);
    }

    #[test]
    fn room_goes_above_its_instant() {
        let t = |ns| Instant::from_nanos(ns);
        let plain = Scale::new(vec![t(0), t(100), t(200)], 0.0, &[]);
        let roomy = Scale::new(vec![t(0), t(100), t(200)], 0.0, &[(t(50), 30.0)]);
        assert_eq!(roomy.y(t(0)), plain.y(t(0)));
        assert_eq!(roomy.y(t(100)), plain.y(t(100)) + 30.0);
        assert_eq!(roomy.y(t(200)), plain.y(t(200)) + 30.0);
    }
}
