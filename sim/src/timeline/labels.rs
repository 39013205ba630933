//! The label layout pass: every text of the picture is placed through a [`Placer`], which keeps
//! the boxes already placed and moves a new label up or down within its allowance, shortens it
//! with "…", or leaves it out, so that no two texts overlap. The full text stays in a tooltip.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::svg::esc;
use super::textwidth::{elide, width, Font, ASCENT, DESCENT};

/// Clear space kept around every text box, in pixels.
const PAD: f64 = 1.0;
/// Vertical step when looking for a free spot.
const STEP: f64 = 2.0;
/// Height of the buckets of the box index.
const BUCKET: f64 = 32.0;

/// Horizontal anchoring of a label at its x.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// x is the left end.
    Start,
    /// x is the middle.
    Middle,
    /// x is the right end.
    End,
}

/// One text to place.
#[derive(Clone, Debug)]
pub struct Label {
    /// Anchor x and baseline y, as wished.
    pub x: f64,
    /// Baseline.
    pub y: f64,
    /// Font size in pixels.
    pub size: f64,
    /// Face.
    pub font: Font,
    /// Anchoring at x.
    pub anchor: Anchor,
    /// CSS class.
    pub class: String,
    /// Element id, if any.
    pub id: Option<String>,
    /// The text.
    pub text: String,
    /// Widest the text may be; longer text is shortened with "…".
    pub max_w: f64,
    /// How far (pixels) the label may move up or down from y.
    pub slide: f64,
    /// The box must stay within these y bounds (the label's band of the picture).
    pub bounds: (f64, f64),
}

impl Label {
    /// A label with no id, no sliding, unbounded width and bounds.
    pub fn new(x: f64, y: f64, size: f64, font: Font, class: &str, text: impl Into<String>) -> Label {
        Label {
            x,
            y,
            size,
            font,
            anchor: Anchor::Start,
            class: class.to_string(),
            id: None,
            text: text.into(),
            max_w: f64::INFINITY,
            slide: 0.0,
            bounds: (f64::NEG_INFINITY, f64::INFINITY),
        }
    }
}

/// A placed text box: left, top, right, bottom.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    /// Left.
    pub x0: f64,
    /// Top.
    pub y0: f64,
    /// Right.
    pub x1: f64,
    /// Bottom.
    pub y1: f64,
}

impl Rect {
    fn hits(&self, o: &Rect) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }
}

/// Places labels without overlaps and writes them as SVG `<text>` elements.
#[derive(Default)]
pub struct Placer {
    index: BTreeMap<i64, Vec<Rect>>,
    /// Labels shortened to fit.
    pub elided: usize,
    /// Labels left out for want of room.
    pub dropped: usize,
}

impl Placer {
    /// Reserves a box (a callout, a lane header) so that no label is placed over it.
    pub fn reserve(&mut self, r: Rect) {
        for b in bucket(r.y0)..=bucket(r.y1) {
            self.index.entry(b).or_default().push(r);
        }
    }

    /// The x extents of the placed boxes that a horizontal line at `y` would cross, sorted.
    pub fn crossing(&self, y: f64) -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = self
            .index
            .get(&bucket(y))
            .into_iter()
            .flatten()
            .filter(|r| r.y0 <= y && y <= r.y1)
            .map(|r| (r.x0, r.x1))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    }

    fn free(&self, r: &Rect) -> bool {
        (bucket(r.y0)..=bucket(r.y1)).all(|b| self.index.get(&b).is_none_or(|v| v.iter().all(|o| !o.hits(r))))
    }

    /// Places `l` at the nearest free spot within its allowance, shortened if it must be, and
    /// writes it to `out`; returns its box, or `None` when it was left out.
    pub fn place(&mut self, out: &mut String, l: &Label) -> Option<Rect> {
        let full = elide(&l.text, l.size, l.font, l.max_w)?;
        let mut texts = vec![full.clone()];
        let w = width(&full, l.size, l.font);
        for f in [0.6, 0.35] {
            if let Some(t) = elide(&l.text, l.size, l.font, w * f) {
                if !texts.contains(&t) {
                    texts.push(t);
                }
            }
        }
        let steps = (l.slide / STEP).floor() as i32;
        for (n, text) in texts.iter().enumerate() {
            for k in 0..=2 * steps {
                // 0, +1, -1, +2, -2, ... steps: below first, where the eye reads on.
                let dy = f64::from(if k % 2 == 1 { (k + 1) / 2 } else { -(k / 2) }) * STEP;
                let r = self.rect(l, text, l.y + dy);
                if r.y0 < l.bounds.0 || r.y1 > l.bounds.1 || !self.free(&r) {
                    continue;
                }
                self.reserve(r);
                if n > 0 || *text != l.text {
                    self.elided += 1;
                }
                write_text(out, l, text, l.y + dy);
                return Some(r);
            }
        }
        self.dropped += 1;
        None
    }

    fn rect(&self, l: &Label, text: &str, y: f64) -> Rect {
        let w = width(text, l.size, l.font);
        let x0 = match l.anchor {
            Anchor::Start => l.x,
            Anchor::Middle => l.x - w / 2.0,
            Anchor::End => l.x - w,
        };
        Rect { x0: x0 - PAD, y0: y - ASCENT * l.size - PAD, x1: x0 + w + PAD, y1: y + DESCENT * l.size + PAD }
    }
}

fn bucket(y: f64) -> i64 {
    (y / BUCKET).floor() as i64
}

fn write_text(out: &mut String, l: &Label, text: &str, y: f64) {
    let anchor = match l.anchor {
        Anchor::Start => "",
        Anchor::Middle => r#" text-anchor="middle""#,
        Anchor::End => r#" text-anchor="end""#,
    };
    let id = l.id.as_ref().map(|i| format!(r#" id="{i}""#)).unwrap_or_default();
    let _ = write!(out, r#"<text class="{}"{id} x="{:.1}" y="{y:.1}"{anchor}>"#, l.class, l.x);
    if text != l.text {
        let _ = write!(out, "<title>{}</title>", esc(&l.text));
    }
    let _ = write!(out, "{}</text>", esc(text));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colliding_labels_move_shorten_or_drop() {
        let mut p = Placer::default();
        let mut out = String::new();
        let a = Label::new(0.0, 20.0, 10.0, Font::Sans, "n", "first label");
        let ra = p.place(&mut out, &a).unwrap();
        // Same spot, may slide: lands just below.
        let b = Label { slide: 20.0, ..a.clone() };
        let rb = p.place(&mut out, &b).unwrap();
        assert!(rb.y0 >= ra.y1 && rb.y0 - ra.y1 < STEP + 0.01, "{ra:?} {rb:?}");
        // Same spot, may not slide: nothing fits, left out.
        assert!(p.place(&mut out, &a).is_none());
        assert_eq!(p.dropped, 1);
        // Too wide: shortened, with the full text as a tooltip.
        let c = Label { max_w: 40.0, ..Label::new(0.0, 80.0, 10.0, Font::Sans, "n", "a rather long label") };
        let rc = p.place(&mut out, &c).unwrap();
        assert!(rc.x1 - rc.x0 <= 40.0 + 2.0 * PAD);
        assert!(out.contains("<title>a rather long label</title>") && out.contains('…'));
        assert_eq!(p.elided, 1);
        // Bounds are kept.
        let d = Label { bounds: (0.0, 10.0), ..Label::new(0.0, 200.0, 10.0, Font::Sans, "n", "x") };
        assert!(p.place(&mut out, &d).is_none());
    }
}
