//! The picture's horizontal bands: the init phase, the events before the failing exchange, and
//! the rest. Each band but the last can be hidden from the page (a checkbox per band); then the
//! bands below move up by its height, so that the page opens on the failing exchange.

use bootsim_core::Instant;

use super::model::Model;
use super::scale::Scale;

/// Room above each band for its separator (or, when the band above is hidden, the note saying so).
pub const STRIP: f64 = 34.0;

/// A band that can be hidden.
#[derive(Clone, Debug)]
pub struct Band {
    /// CSS key: `init` or `early`.
    pub key: &'static str,
    /// What the checkbox shows or hides.
    pub label: &'static str,
    /// First instant of the band, and first instant after it.
    pub from: Instant,
    /// First instant after the band.
    pub until: Instant,
    /// Hidden when the page opens.
    pub hidden: bool,
}

/// Splits the run's time into bands: `[init][early][rest]`, each present only when it holds a
/// row. `focus_budget` is the most pixels (on `scale`, drawn without bands) that may lie between
/// the start of the last band and the violation, so that both fit on the first screen.
pub fn bands(m: &Model, scale: &Scale, focus_budget: f64) -> Vec<Band> {
    let first = scale.rows().next().map(|r| r.0);
    let Some(first) = first else { return Vec::new() };
    let first_violation = m.first_violation();
    let failing = first_violation.is_some();
    let mut out = Vec::new();
    let init_end = m.init_end().filter(|&t| t > first);
    if let Some(t) = init_end {
        out.push(Band { key: "init", label: "the init phase", from: first, until: t, hidden: failing });
    }
    let Some((at, ..)) = first_violation else { return out };
    let y_at = scale.y(at);
    // Without a mismatch (an operation failed), what came shortly before the failure.
    let mut focus = m.exchange_start().unwrap_or(at);
    let budget = if m.mismatch.is_some() { focus_budget } else { focus_budget / 2.0 };
    if m.mismatch.is_none() || y_at - scale.y(focus) > budget {
        focus = scale.rows().find(|&(_, y)| y >= y_at - budget).map_or(at, |r| r.0);
    }
    let from = init_end.unwrap_or(first);
    if focus > from && scale.rows().any(|(t, _)| t >= from && t < focus) {
        out.push(Band { key: "early", label: "events before the failing exchange", from, until: focus, hidden: true });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{run_case, Case};

    #[test]
    fn a_failing_run_hides_init_and_the_early_events() {
        let case = Case::parse("engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3").unwrap();
        let m = Model::build(&run_case(&case, true));
        let sc = Scale::new(m.times(), 0.0, &[]);
        let b = bands(&m, &sc, 10_000.0);
        assert_eq!(b.iter().map(|b| b.key).collect::<Vec<_>>(), ["init", "early"]);
        assert!(b.iter().all(|b| b.hidden && b.from < b.until));
        assert_eq!(b[0].until, b[1].from);
        // A small budget moves the start of the last band towards the violation.
        let tight = bands(&m, &sc, 30.0);
        let at = m.mismatch.as_ref().unwrap().at;
        assert!(tight[1].until > b[1].until && tight[1].until <= at);
        assert!(sc.y(at) - sc.y(tight[1].until) <= 30.0);
    }

    #[test]
    fn without_a_mismatch_the_first_failed_operation_is_the_focus() {
        let case = Case::parse("engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3").unwrap();
        let mut m = Model::build(&run_case(&case, true));
        m.mismatch = None;
        let (at, lane, what) = m.first_violation().unwrap();
        assert!(what.contains("failed") && lane == crate::engine::outcome::Node::Rank(0), "{what}");
        let sc = Scale::new(m.times(), 0.0, &[]);
        let b = bands(&m, &sc, 200.0);
        assert_eq!(b.iter().map(|b| b.key).collect::<Vec<_>>(), ["init", "early"]);
        assert!(sc.y(at) - sc.y(b[1].until) <= 100.0 && b[1].until <= at);
    }

    #[test]
    fn a_passing_run_shows_init() {
        let m = Model::build(&run_case(&Case::parse("engine=fast variant=seq seed=3").unwrap(), true));
        let b = bands(&m, &Scale::new(m.times(), 0.0, &[]), 500.0);
        assert_eq!(b.len(), 1);
        assert!(!b[0].hidden && b[0].key == "init");
    }
}
