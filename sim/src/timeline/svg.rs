//! Draws a [`Model`] as an inline SVG sequence diagram: lanes left to right, time downwards,
//! at most [`Layout::width`] pixels wide. Every text goes through the label layout pass
//! ([`Placer`]), so none overlaps another.
//!
//! Stable hooks for tests and styling: `g.lane#lane-rank0[data-lane=rank0]`,
//! `path.conn#conn-7[data-conn=7]` (plus `mismatch taken` / `mismatch overtaken`),
//! `circle.syn`, `rect.enqueue`, `line.acceptq`, `circle.accept`, `rect.read`, `rect.stall`
//! (plus `decisive`), `rect.drain` (plus `gaveup`), `g#mismatch.callout`, `#expected`, `#received`,
//! `#first-violation`, `g.cut` (a time cut on the axis), `.ph-init` / `.ph-early` (a band's
//! content), `.init` (init-phase elements).

use std::collections::BTreeMap;
use std::fmt::Write;

use bootsim_core::Instant;

use super::axis::{grid, ticks};
use super::bands::{bands, Band, STRIP};
use super::callouts::callouts;
use super::labels::{Anchor, Label, Placer, Rect};
use super::model::{Model, Role};
use super::rxq::stalls;
use super::scale::Scale;
use super::textwidth::Font;
use crate::engine::outcome::Node;
use crate::words::{ms, ms_d};

/// Width of the time axis, left of the lanes.
pub const AXIS_W: f64 = 84.0;
/// Top of the first band (below the lane headers).
const TOP: f64 = 62.0;
/// Pitch of the RX-queue columns.
pub const COL: f64 = 8.0;
const NOTE: f64 = 10.5;

/// Escapes text for HTML and SVG.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A lane's name as the picture shows it.
pub fn lane_name(n: Node) -> String {
    match n {
        Node::Root => "root".into(),
        Node::Rank(r) => format!("rank {r}"),
    }
}

/// How big the picture may be.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Widest the SVG may be, in pixels.
    pub width: f64,
    /// Most pixels between the top of the shown picture and the violation (see [`bands`]).
    pub focus_budget: f64,
}

/// The drawn picture and what the page needs to hide its bands.
#[derive(Clone, Debug)]
pub struct Picture {
    /// The `<svg>` element.
    pub svg: String,
    /// Its height with every band shown.
    pub height: f64,
    /// The bands that can be hidden, with the height each one takes.
    pub bands: Vec<(Band, f64)>,
}

/// Where things go across the picture.
pub struct Geometry {
    /// Lanes left to right.
    pub lanes: Vec<Node>,
    /// x of each lane's line.
    pub lane_x: Vec<f64>,
    /// Right end of each lane's note space.
    pub note_end: Vec<f64>,
    /// RX-queue columns per lane: queue number to column index.
    pub cols: Vec<BTreeMap<(u32, u16), usize>>,
    /// Most RX-queue columns a lane has; further queues share its last column.
    pub max_cols: usize,
    /// Left of the callout column.
    pub callout_x: f64,
    /// Right edge of the picture.
    pub width: f64,
}

impl Geometry {
    fn new(m: &Model, width: f64) -> Geometry {
        let n = m.lanes.len().max(1);
        let callout_w = match (m.mismatch.is_some(), n <= 3) {
            (false, _) => 0.0,
            (true, true) => 420.0,
            (true, false) => 330.0,
        };
        let pitch = (width - AXIS_W - callout_w - 8.0) / n as f64;
        let max_cols = ((pitch * 0.25) / COL).floor().clamp(2.0, 6.0) as usize;
        let mut cols: Vec<BTreeMap<(u32, u16), usize>> = vec![BTreeMap::new(); n];
        for st in &m.stalls {
            if let Some(i) = m.lanes.iter().position(|&l| l == st.lane) {
                cols[i].insert((st.host, st.queue), 0);
            }
        }
        for c in &mut cols {
            for (i, v) in c.values_mut().enumerate() {
                *v = i.min(max_cols - 1);
            }
        }
        let rx_w = cols.iter().map(|c| c.values().max().map_or(0, |m| m + 1)).max().unwrap_or(0) as f64 * COL;
        let lane_x: Vec<f64> = (0..n).map(|i| AXIS_W + i as f64 * pitch + rx_w + 16.0).collect();
        let note_end = (0..n).map(|i| AXIS_W + (i + 1) as f64 * pitch - 6.0).collect();
        let callout_x = AXIS_W + n as f64 * pitch + 8.0;
        Geometry { lanes: m.lanes.clone(), lane_x, note_end, cols, max_cols, callout_x, width }
    }

    /// The x of lane `n`'s line, if shown.
    pub fn x(&self, n: Node) -> Option<f64> {
        self.lanes.iter().position(|&l| l == n).map(|i| self.lane_x[i])
    }

    /// How many RX-queue columns lane `lane` has.
    pub fn ncols(&self, lane: usize) -> usize {
        self.cols[lane].len().min(self.max_cols)
    }

    /// The x of the RX-queue column of (host, queue) left of lane `lane`.
    pub fn col_x(&self, lane: usize, host: u32, queue: u16) -> f64 {
        let c = self.cols[lane].get(&(host, queue)).copied().unwrap_or(0);
        self.lane_x[lane] - 12.0 - (self.ncols(lane) - c) as f64 * COL
    }
}

/// The picture's content, band by band; texts are placed through one [`Placer`].
pub struct Canvas {
    /// Shapes and texts per band.
    pub band: Vec<String>,
    /// Each band's separator strip (index 0 unused).
    pub strip: Vec<String>,
    /// Band starts (instants) after the first.
    pub splits: Vec<Instant>,
    /// Each band's y range for texts.
    pub ranges: Vec<(f64, f64)>,
    /// The label layout pass.
    pub placer: Placer,
}

impl Canvas {
    /// The band of instant `t`.
    pub fn band_of(&self, t: Instant) -> usize {
        self.splits.partition_point(|&s| s <= t)
    }

    /// Places a label in the band of `t`, kept within that band's range.
    pub fn text(&mut self, t: Instant, mut l: Label) -> Option<Rect> {
        let b = self.band_of(t);
        l.bounds = self.ranges[b];
        self.placer.place(&mut self.band[b], &l)
    }

    /// Draws a shape in the band of `t`.
    pub fn shape(&mut self, t: Instant) -> &mut String {
        let b = self.band_of(t);
        &mut self.band[b]
    }
}

/// Draws `m`.
pub fn render(m: &Model, layout: Layout) -> Picture {
    let mut times = m.times();
    if times.is_empty() {
        times.push(Instant::ZERO);
    }
    let flat = Scale::new(times.clone(), 0.0, &[]);
    let bands = bands(m, &flat, layout.focus_budget);
    let splits: Vec<Instant> = bands.iter().map(|b| b.until).collect();
    let first = flat.rows().next().map_or(Instant::ZERO, |r| r.0);
    let room: Vec<(Instant, f64)> = std::iter::once(first).chain(splits.iter().copied()).map(|t| (t, STRIP)).collect();
    let sc = Scale::new(times, TOP, &room);
    let bottom = sc.bottom() + 40.0;
    // Band k spans [tops[k], tops[k+1]); its first STRIP pixels are its separator strip.
    let tops: Vec<f64> = std::iter::once(TOP).chain(splits.iter().map(|&t| sc.y(t) - STRIP)).chain([bottom]).collect();
    let g = Geometry::new(m, layout.width);
    let mut cv = Canvas {
        band: vec![String::new(); splits.len() + 1],
        strip: vec![String::new(); splits.len() + 1],
        ranges: tops.windows(2).map(|w| (w[0] + 20.0, w[1])).collect(),
        splits,
        placer: Placer::default(),
    };
    let width = g.width;
    for (k, b) in bands.iter().enumerate() {
        strip(&mut cv, k + 1, tops[k + 1], b, width);
    }
    // The header (lane names, RX-queue columns) is reserved first: nothing goes under it.
    let mut head = String::new();
    lanes_head(&mut head, &mut cv.placer, m, &g);
    grid(&mut cv, &sc, width);
    let leaders = callouts(&mut cv, m, &sc, &g);
    ticks(&mut cv, &sc);
    stalls(&mut cv, m, &sc, &g);
    body(&mut cv, m, &sc, &g);
    for l in leaders {
        l.draw(&mut cv);
    }

    let mut s = String::new();
    let _ =
        write!(s, r#"<svg xmlns="http://www.w3.org/2000/svg" id="timeline" width="{width:.0}" height="{bottom:.0}">"#);
    s.push_str(concat!(
        r#"<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">"#,
        r#"<path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker></defs>"#
    ));
    for x in &g.lane_x {
        let _ = write!(s, r#"<line class="lane-line" x1="{x:.1}" y1="{TOP:.1}" x2="{x:.1}" y2="{bottom:.1}"/>"#);
    }
    // Nested groups: hiding band k moves everything after it up by its height.
    let mut heights = Vec::new();
    for (k, b) in bands.iter().enumerate() {
        let _ = write!(s, r#"<g class="ph-{}">{}</g><g class="after-{}">"#, b.key, cv.band[k], b.key);
        heights.push((b.clone(), tops[k + 1] - tops[k]));
    }
    s.push_str(&cv.band[bands.len()]);
    for k in (0..bands.len()).rev() {
        // The separator of band k+1 belongs to it, drawn over the band's shapes.
        let class = bands.get(k + 1).map_or(String::new(), |n| format!(" ph-{}", n.key));
        let _ = write!(s, r#"<g class="strip{class}">{}</g></g>"#, cv.strip[k + 1]);
    }
    s.push_str(&head);
    s.push_str("</svg>");
    Picture { svg: s, height: bottom, bands: heights }
}

/// The separator above band `k`: a line with what the band above holds, or, when that band is
/// hidden, a note saying so (the page's CSS shows one of the two).
fn strip(cv: &mut Canvas, k: usize, y: f64, above: &Band, width: f64) {
    let s = &mut cv.strip[k];
    let (from, until) = (ms(above.from), ms(above.until));
    let shown = format!("▴ {} ({from} – {until}) above; ▾ from {until}", above.label);
    let hidden = format!("▸ {} hidden ({from} – {until}): tick the box above to show", above.label);
    let _ = write!(
        s,
        r#"<rect class="strip-bg hidden-{key}" x="0" y="{y:.1}" width="{width:.0}" height="{:.1}"/><line class="strip-line" x1="{AXIS_W}" y1="{:.1}" x2="{width:.0}" y2="{:.1}"/>"#,
        20.0,
        y + 17.0,
        y + 17.0,
        key = above.key
    );
    let _ = write!(
        s,
        r#"<text class="strip-note shown-{key}" x="{:.1}" y="{:.1}">{}</text><text class="strip-note hidden-{key}" x="{:.1}" y="{:.1}">{}</text>"#,
        AXIS_W + 8.0,
        y + 13.0,
        esc(&shown),
        AXIS_W + 8.0,
        y + 13.0,
        esc(&hidden),
        key = above.key
    );
    let w = super::textwidth::width(&shown, NOTE, Font::Sans).max(super::textwidth::width(&hidden, NOTE, Font::Sans));
    cv.placer.reserve(Rect { x0: AXIS_W + 7.0, y0: y, x1: AXIS_W + 9.0 + w, y1: y + 20.0 });
}

fn lanes_head(s: &mut String, p: &mut Placer, m: &Model, g: &Geometry) {
    let _ = write!(s, r#"<rect class="head-bg" x="0" y="0" width="{:.0}" height="{:.1}"/>"#, g.width, TOP - 2.0);
    p.reserve(Rect { x0: 0.0, y0: 0.0, x1: g.width, y1: TOP - 2.0 });
    for (i, &l) in m.lanes.iter().enumerate() {
        let x = g.lane_x[i];
        let host = match l {
            Node::Root => 0,
            Node::Rank(r) => r,
        };
        let _ = write!(
            s,
            r#"<g class="lane" id="lane-{l}" data-lane="{l}"><line x1="{x:.1}" y1="38" x2="{x:.1}" y2="{TOP:.1}"/><text class="lane-name" x="{x:.1}" y="18">{}</text><text class="lane-host" x="{x:.1}" y="31">host {host}</text></g>"#,
            lane_name(l)
        );
        for (&(h, q), &c) in &g.cols[i] {
            let cx = g.col_x(i, h, q) + 2.5;
            let shared = g.cols[i].values().filter(|&&v| v == c).count() > 1;
            let label = if shared { "+".to_string() } else { q.to_string() };
            if g.cols[i].iter().any(|(k, &v)| v == c && *k < (h, q)) {
                continue;
            }
            let _ = write!(
                s,
                r#"<g class="rxq-head"><title>RX queue {q}{} of host {h}: the grey bars below are packets to {} that waited in it while its softirq CPU was busy</title><text class="rxq" x="{cx:.1}" y="{:.1}" text-anchor="middle">{label}</text></g>"#,
                if shared { " and higher" } else { "" },
                lane_name(l),
                TOP - 6.0,
            );
        }
        if !g.cols[i].is_empty() {
            let x0 = x - 12.0 - COL * g.ncols(i) as f64;
            let xm = (x0 + x - 12.0) / 2.0;
            let _ = write!(
                s,
                r#"<text class="rxq-cap" x="{xm:.1}" y="{:.1}" text-anchor="middle">RX queues</text>"#,
                TOP - 17.0
            );
        }
    }
}

/// A note beside lane `lane` at instant `t`: after the notes already on that row if there is
/// room, else on the lines below.
struct Notes {
    at: BTreeMap<(Instant, usize), Vec<Note>>,
}

/// A note's CSS class, text, and whether it belongs to the init phase.
type Note = (&'static str, String, bool);

impl Notes {
    fn add(&mut self, t: Instant, lane: usize, class: &'static str, text: String, init: bool) {
        self.at.entry((t, lane)).or_default().push((class, text, init));
    }
}

fn body(cv: &mut Canvas, m: &Model, sc: &Scale, g: &Geometry) {
    let mut notes = Notes { at: BTreeMap::new() };
    let lane_i = |n: Node| m.lanes.iter().position(|&l| l == n).unwrap_or(0);
    for d in &m.drains {
        let Some(x) = g.x(Node::Rank(d.rank)) else { continue };
        let (y0, y1) = (sc.y(d.start), sc.y(d.end));
        let class = if d.gave_up { "drain gaveup" } else { "drain" };
        let k = d.kconn.unwrap_or_default();
        let _ = write!(
            cv.shape(d.end),
            r#"<rect class="{class}" data-conn="{k}" x="{:.1}" y="{y0:.1}" width="5" height="{:.1}"><title>drain of connection {k}: {}</title></rect>"#,
            x - 9.0,
            (y1 - y0).max(1.5),
            ms_d(d.end - d.start)
        );
        let what = if d.gave_up { format!(", gave up with {} B unacked", d.unacked) } else { String::new() };
        notes.add(
            d.end,
            lane_i(Node::Rank(d.rank)),
            "note-drain",
            format!("drain {k}: {}{what}", ms_d(d.end - d.start)),
            false,
        );
    }
    let mut ids = Vec::new();
    for c in &m.conns {
        let (Some(xc), Some(xs)) = (g.x(c.client), g.x(c.server)) else { continue };
        let y0 = sc.y(c.syn);
        let end = c.enq.or(c.acc);
        let y1 = end.map_or(y0 + 24.0, |t| sc.y(t));
        let last =
            [Some(c.syn), c.enq, c.acc, c.taken.as_ref().map(|t| t.0)].into_iter().flatten().max().unwrap_or(c.syn);
        let role = match c.role {
            Role::Plain => "",
            Role::Taken => " mismatch taken",
            Role::Overtaken => " mismatch overtaken",
        };
        let init = if c.init { " init" } else { "" };
        let dash = if end.is_none() { r#" stroke-dasharray="3 3""# } else { "" };
        let (from, to) = (c.client, c.server);
        let xe = if xs > xc { xs - 2.0 } else { xs + 2.0 };
        let s = cv.shape(last);
        let _ = write!(s, r#"<g class="c{init}" data-conn="{}">"#, c.id);
        let _ = write!(
            s,
            r#"<path class="conn{role}" id="conn-{id}" data-conn="{id}" data-from="{from}" data-to="{to}" d="M{xc:.1},{y0:.1} L{xe:.1},{y1:.1}" marker-end="url(#arrow)"{dash}><title>connection {id}: {}</title></path>"#,
            esc(&c.label),
            id = c.id
        );
        let _ = write!(s, r#"<circle class="syn" data-conn="{}" cx="{xc:.1}" cy="{y0:.1}" r="3"/>"#, c.id);
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
            let _ =
                write!(s, r#"<circle class="accept" data-conn="{}" cx="{xs:.1}" cy="{:.1}" r="3.5"/>"#, c.id, sc.y(a));
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
        if let Some((t, _)) = &c.taken {
            let yr = sc.y(*t);
            let _ = write!(
                s,
                r#"<rect class="read{role}" data-conn="{}" x="{:.1}" y="{:.1}" width="8" height="8"/>"#,
                c.id,
                xs - 4.0,
                yr - 4.0
            );
        }
        for (t, lane, what) in &c.marks {
            let Some(x) = g.x(*lane) else { continue };
            let y = sc.y(*t);
            let _ = write!(
                s,
                r#"<path class="mark" data-conn="{}" d="M{:.1},{:.1} l8,8 M{:.1},{:.1} l-8,8"><title>connection {}: {what}</title></path>"#,
                c.id,
                x - 4.0,
                y - 4.0,
                x + 4.0,
                y - 4.0,
                c.id
            );
            notes.add(*t, lane_i(*lane), "note-mark", format!("connection {} {what}", c.id), c.init);
        }
        s.push_str("</g>");
        let warn = if c.role == Role::Plain { "" } else { "⚠ " };
        notes.add(c.syn, lane_i(c.client), "note-syn", format!("{warn}SYN conn {}: {}", c.id, c.label), c.init);
        if let Some(a) = c.acc {
            notes.add(a, lane_i(c.server), "note-accept", format!("accept conn {}", c.id), c.init);
        }
        if let Some((t, what)) = &c.taken {
            notes.add(*t, lane_i(c.server), "note-read", format!("read conn {} for {what}", c.id), c.init);
        }
        // Where the id sits along the arrow: the two arrows of a mismatch cross, keep them apart.
        let f = match c.role {
            Role::Plain => 0.5,
            Role::Taken => 0.3,
            Role::Overtaken => 0.7,
        };
        let t_mid = Instant::from_nanos(
            c.syn.as_nanos() + ((end.unwrap_or(c.syn).as_nanos() - c.syn.as_nanos()) as f64 * f) as u64,
        );
        ids.push((c.role != Role::Plain, t_mid, xc + (xs - xc) * f, y0 + (y1 - y0) * f - 4.0, c.id, role, c.init));
    }
    for d in &m.done {
        let Some(x) = g.x(d.lane) else { continue };
        let y = sc.y(d.at);
        let class = if d.failed { "op failed" } else { "op" };
        let init = if d.init { " init" } else { "" };
        let _ = write!(
            cv.shape(d.at),
            r#"<line class="{class}{init}" x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}"/>"#,
            x - 9.0,
            x + 9.0
        );
        notes.add(d.at, lane_i(d.lane), if d.failed { "note-failed" } else { "note-op" }, d.text.clone(), d.init);
    }
    // The violation's ids first, then the notes in time order, then the other ids.
    let place_id = |cv: &mut Canvas, &(key, t, x, y, id, role, init): &(bool, Instant, f64, f64, u64, &str, bool)| {
        let (size, font) = if key { (12.0, Font::Bold) } else { (9.0, Font::Sans) };
        let mut l = Label::new(
            x,
            y,
            size,
            font,
            &format!("conn-id{role}{}", if init { " init" } else { "" }),
            format!("conn {id}"),
        );
        l.anchor = Anchor::Middle;
        l.slide = 10.0;
        cv.text(t, l);
    };
    for id in ids.iter().filter(|i| i.0) {
        place_id(cv, id);
    }
    for ((t, lane), items) in &notes.at {
        let x0 = g.lane_x[*lane] + 9.0;
        let right = g.note_end[*lane];
        let (mut x, mut y) = (x0, sc.y(*t) + 3.5);
        for (class, text, init) in items {
            let bold = matches!(*class, "note-read" | "note-failed");
            let font = if bold { Font::Bold } else { Font::Sans };
            let w = super::textwidth::width(text, NOTE, font);
            if x > x0 && x + w > right {
                (x, y) = (x0, y + 13.0);
            }
            let class = if *init { format!("note {class} init") } else { format!("note {class}") };
            let mut l = Label::new(x, y, NOTE, font, &class, text.clone());
            l.max_w = right - x;
            l.slide = 12.0;
            if let Some(r) = cv.text(*t, l) {
                (x, y) = (r.x1 + 7.0, r.y1 - 1.0 - 0.24 * NOTE);
            }
        }
    }
    for id in ids.iter().filter(|i| !i.0) {
        place_id(cv, id);
    }
}
