//! The vertical time axis: one row per distinct instant, gaps drawn on a log scale so that
//! microsecond races and 30 ms stalls both stay readable. Instants between rows interpolate.

use bootsim_core::Instant;

/// Pixels for a zero-length step between two rows (distinct instants) and per doubling of a gap.
const MIN_STEP: f64 = 14.0;
const PER_DOUBLING: f64 = 11.0;
const UNIT_NS: f64 = 100_000.0;
const MAX_STEP: f64 = 130.0;

/// Maps simulated instants to y coordinates, monotonically.
#[derive(Clone, Debug)]
pub struct Scale {
    rows: Vec<(u64, f64)>,
}

impl Scale {
    /// A scale whose first row is at `top` and holds every instant of `times`.
    pub fn new(mut times: Vec<Instant>, top: f64) -> Scale {
        times.sort();
        times.dedup();
        let mut rows: Vec<(u64, f64)> = Vec::with_capacity(times.len());
        for t in times {
            let t = t.as_nanos();
            let y = match rows.last() {
                None => top,
                Some(&(prev, y)) => y + step(t - prev),
            };
            rows.push((t, y));
        }
        Scale { rows }
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

    /// The y of the last row.
    pub fn bottom(&self) -> f64 {
        self.rows.last().map_or(0.0, |r| r.1)
    }
}

fn step(gap_ns: u64) -> f64 {
    (MIN_STEP + PER_DOUBLING * (1.0 + gap_ns as f64 / UNIT_NS).log2()).min(MAX_STEP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotone_and_interpolating() {
        let t = |ns| Instant::from_nanos(ns);
        let s = Scale::new(vec![t(5_000_000), t(0), t(1_000), t(1_000)], 10.0);
        assert_eq!(s.rows().count(), 3);
        assert_eq!(s.y(t(0)), 10.0);
        let (a, b, c) = (s.y(t(1_000)), s.y(t(3_000_000)), s.y(t(5_000_000)));
        assert!(10.0 < a && a < b && b < c);
        assert_eq!(s.y(t(9_000_000)), c);
        assert_eq!(Scale::new(Vec::new(), 0.0).y(t(1)), 0.0);
    }
}
