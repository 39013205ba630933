//! The time axis: grid lines, each row's instant, and the cuts where a gap is drawn shorter than
//! to scale (a mark across the axis and the gap's real length).

use std::fmt::Write;

use bootsim_core::Instant;

use super::labels::{Anchor, Label};
use super::scale::Scale;
use super::svg::{Canvas, AXIS_W};
use super::textwidth::Font;
use crate::words::{ms, ms_d};

/// The grid lines and the cut marks, under everything else.
pub fn grid(cv: &mut Canvas, sc: &Scale, width: f64) {
    for (t, y) in sc.rows() {
        let b = cv.band_of(t);
        let _ = write!(cv.band[b], r#"<line class="grid" x1="{AXIS_W}" y1="{y:.1}" x2="{width:.0}" y2="{y:.1}"/>"#);
    }
    for c in sc.cuts() {
        let mid = (c.y0 + c.y1) / 2.0;
        // The cut belongs to the band of the row below it.
        let t = sc.rows().find(|&(_, y)| y >= c.y1).map_or(Instant::ZERO, |r| r.0);
        let b = cv.band_of(t);
        let gap = ms_d(c.gap);
        let _ = write!(
            cv.band[b],
            r#"<g class="cut"><title>{gap} between these rows, drawn shorter: time is to scale only between cuts</title><line class="cut-line" x1="{AXIS_W}" y1="{mid:.1}" x2="{width:.0}" y2="{mid:.1}"/><path class="cut-mark" d="M{:.1},{:.1} l10,-5 M{:.1},{:.1} l10,-5"/></g>"#,
            AXIS_W - 5.0,
            mid + 1.0,
            AXIS_W - 5.0,
            mid + 5.0,
        );
    }
}

/// The axis labels: each row's instant, and each cut's real length.
pub fn ticks(cv: &mut Canvas, sc: &Scale) {
    for (t, y) in sc.rows() {
        let mut l = Label::new(AXIS_W - 6.0, y + 3.5, 10.0, Font::Sans, "tick", ms(t));
        l.anchor = Anchor::End;
        cv.text(t, l);
    }
    for c in sc.cuts() {
        let t = sc.rows().find(|&(_, y)| y >= c.y1).map_or(Instant::ZERO, |r| r.0);
        let mid = (c.y0 + c.y1) / 2.0;
        let mut l = Label::new(AXIS_W - 8.0, mid + 3.5, 9.5, Font::Bold, "cut-label", format!("+{}", ms_d(c.gap)));
        l.anchor = Anchor::End;
        cv.text(t, l);
    }
}
