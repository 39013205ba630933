//! The two boxes in the right-hand column: why the overtaking could happen (the decisive RX
//! stall) and the mismatch itself (expected and received QPN/GID), each with a leader line to
//! its place in the picture, and the `#first-violation` ring on the wrong receive.

use std::fmt::Write;

use bootsim_core::Instant;

use super::labels::{Label, Rect};
use super::model::Model;
use super::scale::Scale;
use super::svg::{Canvas, Geometry};
use super::textwidth::{wrap, Font};
use crate::engine::outcome::Node;
use crate::words::{ms, ms_d};

const LINE: f64 = 15.0;

/// A leader line from a place in the picture to its callout: along the row, then down or up the
/// gutter left of the box. Drawn once every text is placed, broken where it would cross one.
pub struct Leader {
    class: &'static str,
    t: Instant,
    from: (f64, f64),
    to: (f64, f64),
}

impl Leader {
    /// Draws the leader into the band of its instant.
    pub fn draw(&self, cv: &mut Canvas) {
        let (x0, y0) = self.from;
        let (x1, y1) = self.to;
        let gutter = x1 - 6.0;
        let mut d = String::new();
        let mut x = x0;
        for (a, b) in cv.placer.crossing(y0) {
            if b <= x || a >= gutter {
                continue;
            }
            if a > x {
                let _ = write!(d, "M{x:.1},{y0:.1} H{a:.1} ");
            }
            x = b;
        }
        if x < gutter {
            let _ = write!(d, "M{x:.1},{y0:.1} H{gutter:.1} ");
        }
        let _ = write!(d, "M{gutter:.1},{y0:.1} V{y1:.1} H{x1:.1}");
        let _ = write!(cv.shape(self.t), r#"<g class="callout {}"><path class="leader" d="{d}"/></g>"#, self.class);
    }
}

/// Draws the callouts of `m` into their bands; returns their leader lines, to draw last.
pub fn callouts(cv: &mut Canvas, m: &Model, sc: &Scale, g: &Geometry) -> Vec<Leader> {
    let x = g.callout_x;
    let w = g.width - x - 4.0;
    let mut next_y = f64::NEG_INFINITY;
    let mut leaders = Vec::new();
    if let Some(st) = m.stalls.iter().find(|st| st.decisive) {
        if let Some(lx) = g.x(st.lane) {
            let lines = [
                (format!("RX queue {} on host {} busy for {}", st.queue, st.host, ms_d(st.until - st.from)), true),
                (format!("{} waits {}–{}", st.what, ms(st.from), ms(st.until)), false),
            ];
            // A stall that began in a band hidden on open is explained at the top of the last band.
            let t = st.from.max(cv.splits.last().copied().unwrap_or(st.from));
            let y = sc.y(t).max(cv.ranges[cv.band_of(t)].0 + 4.0);
            next_y = boxed(cv, t, ("callout stall-why", "why"), (x, y, w), &lines);
            let from = (lx - 8.0, sc.y(st.from).max(y));
            leaders.push(Leader { class: "stall-why", t, from, to: (x, y + 6.0) });
        }
    }
    let Some(mm) = &m.mismatch else {
        if let Some((at, lane, what)) = m.first_violation() {
            if let Some(lx) = g.x(lane) {
                let _ = write!(
                    cv.shape(at),
                    r#"<circle class="violation" id="first-violation" cx="{lx:.1}" cy="{:.1}" r="9"><title>the first failure: {}</title></circle>"#,
                    sc.y(at),
                    super::svg::esc(&what)
                );
            }
        }
        return leaders;
    };
    let Some(lx) = g.x(Node::Rank(mm.overtake.receiver)) else { return leaders };
    let ya = sc.y(mm.at);
    let _ = write!(
        cv.shape(mm.at),
        r#"<circle class="violation" id="first-violation" cx="{lx:.1}" cy="{ya:.1}" r="9"><title>the first violation: {}</title></circle>"#,
        super::svg::esc(&mm.headline)
    );
    let mut lines = vec![(mm.headline.clone(), true), (mm.expected.clone(), false), (mm.received.clone(), false)];
    lines.extend(mm.symptom.clone().map(|s| (s, false)));
    let y = (ya - 8.0).max(next_y + 10.0);
    boxed(cv, mm.at, ("callout mismatch", "mismatch"), (x, y, w), &lines);
    leaders.push(Leader { class: "mismatch", t: mm.at, from: (lx + 9.0, ya), to: (x, y + 6.0) });
    leaders
}

/// A box at (x, y) `w` wide, its lines wrapped to fit; returns the y below it.
fn boxed(
    cv: &mut Canvas,
    t: Instant,
    (class, id): (&str, &str),
    (x, y, w): (f64, f64, f64),
    lines: &[(String, bool)],
) -> f64 {
    let mut rows: Vec<(String, Font, &str, Option<&str>)> = Vec::new();
    for (i, (l, head)) in lines.iter().enumerate() {
        let (font, cls, line_id) = match (id, i) {
            (_, _) if *head => (Font::Bold, "head", None),
            ("mismatch", 1) => (Font::Mono, "line mono exp", Some("expected")),
            ("mismatch", 2) => (Font::Mono, "line mono got", Some("received")),
            _ => (Font::Sans, "line", None),
        };
        for (j, part) in wrap(l, 11.0, font, w - 16.0).into_iter().enumerate() {
            rows.push((part, font, cls, line_id.filter(|_| j == 0)));
        }
    }
    let h = 10.0 + LINE * rows.len() as f64;
    let s = cv.shape(t);
    let _ = write!(
        s,
        r#"<g class="{class}" id="{id}"><rect x="{x:.1}" y="{:.1}" width="{w:.1}" height="{h:.1}" rx="4"/>"#,
        y - 4.0
    );
    cv.placer.reserve(Rect { x0: x, y0: y - 4.0, x1: x + w, y1: y - 4.0 + h });
    let mut body = String::new();
    for (i, (text, font, cls, line_id)) in rows.into_iter().enumerate() {
        let mut l = Label::new(x + 8.0, y + 10.0 + LINE * i as f64, 11.0, font, cls, text);
        l.id = line_id.map(str::to_string);
        // Inside the reserved box: placed on a fresh placer so the box does not block its own text.
        super::labels::Placer::default().place(&mut body, &l);
    }
    let s = cv.shape(t);
    s.push_str(&body);
    s.push_str("</g>");
    y + h + 6.0
}
