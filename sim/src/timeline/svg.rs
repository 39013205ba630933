//! Draws a [`Model`] as an inline SVG sequence diagram: lanes left to right, time downwards.
//!
//! Stable hooks for tests and styling: `g.lane#lane-rank0[data-lane=rank0]`,
//! `path.conn#conn-7[data-conn=7]` (plus `mismatch taken` / `mismatch overtaken`),
//! `circle.syn`, `rect.enqueue`, `line.acceptq`, `circle.accept`, `rect.read`, `rect.stall`
//! (plus `decisive`), `rect.drain` (plus `gaveup`), `g#mismatch.callout`, `#expected`, `#received`.

use std::collections::BTreeMap;
use std::fmt::Write;

use bootsim_core::Instant;

use super::model::{Model, Role};
use super::scale::Scale;
use crate::engine::outcome::Node;
use crate::explain::{ms, ms_d};

const AXIS_W: f64 = 96.0;
const LANE_GAP: f64 = 270.0;
const TOP: f64 = 78.0;
const NOTE_DX: f64 = 50.0;
const CALLOUT_W: f64 = 580.0;

/// Escapes text for HTML and SVG.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn lane_name(n: Node) -> String {
    match n {
        Node::Root => "root".into(),
        Node::Rank(r) => format!("rank {r}"),
    }
}

struct Notes {
    /// (lane index, row y in tenths of a pixel) -> (class, text)
    at: BTreeMap<(usize, i64), Vec<(&'static str, String)>>,
}

impl Notes {
    fn add(&mut self, lane: usize, y: f64, class: &'static str, text: String) {
        self.at.entry((lane, (y * 10.0).round() as i64)).or_default().push((class, text));
    }
}

/// The SVG element for `m`.
pub fn render(m: &Model) -> String {
    let mut times = m.times();
    if times.is_empty() {
        times.push(Instant::ZERO);
    }
    let sc = Scale::new(times, TOP);
    let bottom = sc.bottom() + 40.0;
    let lane_x = |n: Node| m.lanes.iter().position(|&l| l == n).map(|i| AXIS_W + 70.0 + i as f64 * LANE_GAP);
    let lane_i = |n: Node| m.lanes.iter().position(|&l| l == n).unwrap_or(0);
    let callout_x = AXIS_W + 70.0 + m.lanes.len() as f64 * LANE_GAP;
    let width = callout_x + CALLOUT_W;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" id="timeline" width="{width:.0}" height="{bottom:.0}" viewBox="0 0 {width:.0} {bottom:.0}">"#
    );
    s.push_str(concat!(
        r#"<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">"#,
        r#"<path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker></defs>"#
    ));
    axis(&mut s, &sc, width);
    for (i, &l) in m.lanes.iter().enumerate() {
        let x = AXIS_W + 70.0 + i as f64 * LANE_GAP;
        let host = match l {
            Node::Root => 0,
            Node::Rank(r) => r,
        };
        let _ = write!(
            s,
            r#"<g class="lane" id="lane-{l}" data-lane="{l}"><line x1="{x:.1}" y1="48" x2="{x:.1}" y2="{bottom:.1}"/><text class="lane-name" x="{x:.1}" y="30">{}</text><text class="lane-host" x="{x:.1}" y="44">host {host}</text></g>"#,
            lane_name(l)
        );
    }
    let mut notes = Notes { at: BTreeMap::new() };
    for st in &m.stalls {
        let Some(x) = lane_x(st.lane) else { continue };
        let (y0, y1) = (sc.y(st.from), sc.y(st.until));
        let (class, x, w) = if st.decisive {
            ("stall decisive", x - 16.0, 12.0)
        } else {
            ("stall", x + 6.0 + f64::from(st.queue % 8) * 5.0, 4.0)
        };
        let _ = write!(
            s,
            r#"<rect class="{class}" x="{x:.1}" y="{y0:.1}" width="{w}" height="{:.1}" data-host="{}" data-queue="{}"><title>RX queue {} on host {} busy {} ({}–{}): {}</title></rect>"#,
            (y1 - y0).max(1.5),
            st.host,
            st.queue,
            st.queue,
            st.host,
            ms_d(st.until - st.from),
            ms(st.from),
            ms(st.until),
            esc(&st.what)
        );
    }
    for d in &m.drains {
        let Some(x) = lane_x(Node::Rank(d.rank)) else { continue };
        let (y0, y1) = (sc.y(d.start), sc.y(d.end));
        let class = if d.gave_up { "drain gaveup" } else { "drain" };
        let k = d.kconn.unwrap_or_default();
        let _ = write!(
            s,
            r#"<rect class="{class}" data-conn="{k}" x="{:.1}" y="{y0:.1}" width="6" height="{:.1}"/>"#,
            x - 8.0,
            (y1 - y0).max(1.5)
        );
        let what = if d.gave_up { format!(", gave up with {} B unacked", d.unacked) } else { String::new() };
        notes.add(lane_i(Node::Rank(d.rank)), y1, "note-drain", format!("drain #{k} {}{what}", ms_d(d.end - d.start)));
    }
    for c in &m.conns {
        let (Some(xc), Some(xs)) = (lane_x(c.client), lane_x(c.server)) else { continue };
        let y0 = sc.y(c.syn);
        let end = c.enq.or(c.acc);
        let y1 = end.map_or(y0 + 24.0, |t| sc.y(t));
        let role = match c.role {
            Role::Plain => "",
            Role::Taken => " mismatch taken",
            Role::Overtaken => " mismatch overtaken",
        };
        let dash = if end.is_none() { r#" stroke-dasharray="3 3""# } else { "" };
        let (from, to) = (c.client, c.server);
        let xe = if xs > xc { xs - 2.0 } else { xs + 2.0 };
        let _ = write!(
            s,
            r#"<path class="conn{role}" id="conn-{id}" data-conn="{id}" data-from="{from}" data-to="{to}" d="M{xc:.1},{y0:.1} L{xe:.1},{y1:.1}" marker-end="url(#arrow)"{dash}><title>connection {id}: {}</title></path>"#,
            esc(&c.label),
            id = c.id
        );
        let _ = write!(s, r#"<circle class="syn" data-conn="{}" cx="{xc:.1}" cy="{y0:.1}" r="3"/>"#, c.id);
        // Where the label sits along the arrow: the two arrows of a mismatch cross, keep them apart.
        let f = match c.role {
            Role::Plain => 0.5,
            Role::Taken => 0.3,
            Role::Overtaken => 0.7,
        };
        let (mx, my) = (xc + (xs - xc) * f, y0 + (y1 - y0) * f - 4.0);
        let _ = write!(s, r#"<text class="conn-id{role}" x="{mx:.1}" y="{my:.1}">#{}</text>"#, c.id);
        let arrow = if c.role == Role::Plain { "" } else { "⚠ " };
        notes.add(lane_i(c.client), y0, "note-syn", format!("{arrow}SYN #{} → {}: {}", c.id, lane_name(to), c.label));
        if let Some(t) = c.enq {
            let _ = write!(
                s,
                r#"<rect class="enqueue" data-conn="{}" x="{:.1}" y="{:.1}" width="5" height="5"/>"#,
                c.id,
                xs - 2.5,
                sc.y(t) - 2.5
            );
        }
        if let (Some(e), Some(a)) = (c.enq, c.acc) {
            let _ = write!(
                s,
                r#"<line class="acceptq" data-conn="{}" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"><title>connection {} waited {} in the accept queue</title></line>"#,
                c.id,
                xs + 3.0,
                sc.y(e),
                xs + 3.0,
                sc.y(a),
                c.id,
                ms_d(a - e)
            );
        }
        if let Some(a) = c.acc {
            let ya = sc.y(a);
            let _ = write!(s, r#"<circle class="accept" data-conn="{}" cx="{xs:.1}" cy="{ya:.1}" r="3.5"/>"#, c.id);
            notes.add(lane_i(c.server), ya, "note-accept", format!("accept #{}", c.id));
        }
        if let Some(t) = c.sent {
            let yw = sc.y(t);
            let _ = write!(
                s,
                r#"<line class="write" data-conn="{}" x1="{:.1}" y1="{yw:.1}" x2="{:.1}" y2="{yw:.1}"/>"#,
                c.id,
                xc - 5.0,
                xc + 5.0
            );
        }
        if let Some((t, what)) = &c.taken {
            let yr = sc.y(*t);
            let _ = write!(
                s,
                r#"<rect class="read{role}" data-conn="{}" x="{:.1}" y="{:.1}" width="8" height="8"/>"#,
                c.id,
                xs - 4.0,
                yr - 4.0
            );
            notes.add(lane_i(c.server), yr, "note-read", format!("read #{} {what}", c.id));
        }
        for (t, lane, what) in &c.marks {
            let (Some(x), y) = (lane_x(*lane), sc.y(*t)) else { continue };
            let _ =
                write!(s, r#"<text class="mark" data-conn="{}" x="{:.1}" y="{:.1}">✕</text>"#, c.id, x - 4.0, y + 4.0);
            notes.add(lane_i(*lane), y, "note-mark", format!("#{} {what}", c.id));
        }
    }
    for d in &m.done {
        let (Some(x), y) = (lane_x(d.lane), sc.y(d.at)) else { continue };
        let class = if d.failed { "op failed" } else { "op" };
        let _ = write!(s, r#"<line class="{class}" x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}"/>"#, x - 9.0, x + 9.0);
        notes.add(lane_i(d.lane), y, if d.failed { "note-failed" } else { "note-op" }, d.text.clone());
    }
    for ((lane, y10), items) in &notes.at {
        let x = AXIS_W + 70.0 + *lane as f64 * LANE_GAP + NOTE_DX;
        let _ = write!(s, r#"<text class="note" x="{x:.1}" y="{:.1}">"#, *y10 as f64 / 10.0 + 3.5);
        for (i, (class, text)) in items.iter().enumerate() {
            let sep = if i > 0 { " · " } else { "" };
            let _ = write!(s, r#"<tspan class="{class}">{sep}{}</tspan>"#, esc(text));
        }
        s.push_str("</text>");
    }
    callouts(&mut s, m, &sc, callout_x, &lane_x);
    s.push_str("</svg>");
    s
}

fn axis(s: &mut String, sc: &Scale, width: f64) {
    let mut last = f64::NEG_INFINITY;
    for (t, y) in sc.rows() {
        if y - last < 14.0 {
            continue;
        }
        last = y;
        let _ = write!(
            s,
            r#"<line class="grid" x1="{AXIS_W}" y1="{y:.1}" x2="{width:.0}" y2="{y:.1}"/><text class="tick" x="{:.1}" y="{:.1}">{}</text>"#,
            AXIS_W - 6.0,
            y + 3.5,
            ms(t)
        );
    }
}

fn callouts(s: &mut String, m: &Model, sc: &Scale, x: f64, lane_x: &dyn Fn(Node) -> Option<f64>) {
    let mut next_y = TOP;
    if let Some(st) = m.stalls.iter().find(|st| st.decisive) {
        if let Some(lx) = lane_x(st.lane) {
            let y = sc.y(st.from).max(next_y);
            let lines = [
                format!("RX queue {} on host {} busy for {}", st.queue, st.host, ms_d(st.until - st.from)),
                format!("{} waits {}–{}", st.what, ms(st.from), ms(st.until)),
            ];
            next_y = boxed(s, "callout stall-why", "why", x, y, &lines, (lx - 10.0, sc.y(st.from)));
        }
    }
    if let Some(mm) = &m.mismatch {
        let receiver = Node::Rank(mm.overtake.receiver);
        let Some(lx) = lane_x(receiver) else { return };
        let ya = sc.y(mm.at);
        let y = ya.max(next_y + 10.0);
        let mut lines = vec![mm.headline.clone(), mm.expected.clone(), mm.received.clone()];
        lines.extend(mm.symptom.clone());
        boxed(s, "callout mismatch", "mismatch", x, y, &lines, (lx, ya));
    }
}

/// A callout box with a leader line to `to`; returns the y below it.
fn boxed(s: &mut String, class: &str, id: &str, x: f64, y: f64, lines: &[String], to: (f64, f64)) -> f64 {
    let h = 10.0 + 15.0 * lines.len() as f64;
    let w = CALLOUT_W - 30.0;
    let _ = write!(
        s,
        r#"<g class="{class}" id="{id}"><line class="leader" x1="{:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}"/><rect x="{x:.1}" y="{:.1}" width="{w}" height="{h:.1}" rx="4"/>"#,
        to.0,
        to.1,
        y + 8.0,
        y - 4.0
    );
    for (i, l) in lines.iter().enumerate() {
        let line_id = match (id, i) {
            ("mismatch", 1) => r#" id="expected""#,
            ("mismatch", 2) => r#" id="received""#,
            _ => "",
        };
        let cls = if i == 0 { "head" } else { "line" };
        let _ = write!(
            s,
            r#"<text class="{cls}"{line_id} x="{:.1}" y="{:.1}">{}</text>"#,
            x + 8.0,
            y + 10.0 + 15.0 * i as f64,
            esc(l)
        );
    }
    s.push_str("</g>");
    y + h + 6.0
}
