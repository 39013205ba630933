//! Text widths for the label layout: the advance widths of DejaVu Sans (the first font the
//! timeline's CSS names; most other sans-serif fonts are narrower, so the estimate errs wide).
//! Values are thousandths of an em, read from DejaVuSans.ttf / DejaVuSans-Bold.ttf (`hmtx`).

/// Advance widths of U+0020..=U+007E, regular.
const BOOK: [u16; 95] = [
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636, 636, 636, 636, 636, 636, 636,
    636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632, 575, 775, 752, 295, 295, 656, 557, 863,
    748, 787, 603, 787, 695, 635, 611, 732, 684, 989, 685, 611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635,
    615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636,
    337, 636, 838,
];

/// Advance widths of U+0020..=U+007E, bold.
const BOLD: [u16; 95] = [
    348, 456, 521, 838, 696, 1002, 872, 306, 457, 457, 523, 838, 380, 415, 380, 365, 696, 696, 696, 696, 696, 696, 696,
    696, 696, 696, 400, 400, 838, 838, 838, 580, 1000, 774, 762, 734, 830, 683, 683, 821, 837, 372, 372, 775, 637, 995,
    837, 850, 733, 850, 770, 720, 682, 812, 774, 1103, 771, 724, 725, 457, 365, 457, 838, 500, 500, 675, 716, 593, 716,
    678, 435, 716, 712, 343, 343, 665, 343, 1042, 712, 687, 716, 716, 493, 595, 478, 712, 652, 924, 645, 652, 582, 712,
    365, 712, 838,
];

/// Font ascent and descent in ems (DejaVu Sans `hhea`): a text box spans baseline - ASCENT ..
/// baseline + DESCENT.
pub const ASCENT: f64 = 0.93;
/// See [`ASCENT`].
pub const DESCENT: f64 = 0.24;

/// The faces the timeline uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Font {
    /// DejaVu Sans.
    Sans,
    /// DejaVu Sans Bold.
    Bold,
    /// DejaVu Sans Mono (every glyph 0.602 em).
    Mono,
}

fn advance(c: char, font: Font) -> u16 {
    let bold = font == Font::Bold;
    match c {
        _ if font == Font::Mono => 602,
        ' '..='~' => (if bold { BOLD } else { BOOK })[c as usize - 32],
        '·' => {
            if bold {
                380
            } else {
                318
            }
        }
        '–' => 500,
        '⚠' => 896,
        // Arrows, math, dashes, ellipsis and anything else: an em is the widest DejaVu advance
        // outside the CJK blocks that the timeline never prints.
        _ => 1000,
    }
}

/// The width in pixels of `text` at `size` pixels.
pub fn width(text: &str, size: f64, font: Font) -> f64 {
    text.chars().map(|c| f64::from(advance(c, font))).sum::<f64>() * size / 1000.0
}

/// `text`, cut at a character boundary and ended with "…" so that it fits in `max` pixels;
/// `None` when not even one character and the ellipsis fit.
pub fn elide(text: &str, size: f64, font: Font, max: f64) -> Option<String> {
    if width(text, size, font) <= max {
        return Some(text.to_string());
    }
    let budget = max - width("…", size, font);
    let mut used = 0.0;
    let mut end = 0;
    for (i, c) in text.char_indices() {
        let w = f64::from(advance(c, font)) * size / 1000.0;
        if used + w > budget {
            break;
        }
        used += w;
        end = i + c.len_utf8();
    }
    let kept = text[..end].trim_end();
    (!kept.is_empty()).then(|| format!("{kept}…"))
}

/// Splits `text` at spaces into lines of at most `max` pixels (a word wider than `max` is elided).
pub fn wrap(text: &str, size: f64, font: Font, max: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split(' ') {
        let candidate = if cur.is_empty() { word.to_string() } else { format!("{cur} {word}") };
        if width(&candidate, size, font) <= max || cur.is_empty() {
            cur = candidate;
        } else {
            lines.push(std::mem::take(&mut cur));
            cur = word.to_string();
        }
    }
    lines.push(cur);
    lines.into_iter().map(|l| elide(&l, size, font, max).unwrap_or_default()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_and_elision() {
        assert_eq!(width("", 10.0, Font::Sans), 0.0);
        assert!((width("m", 10.0, Font::Sans) - 9.74).abs() < 1e-9);
        assert!(width("read", 10.0, Font::Bold) > width("read", 10.0, Font::Sans));
        let s = "read #8 took for alltoall #1 step 1";
        assert_eq!(elide(s, 10.0, Font::Sans, 1000.0).as_deref(), Some(s));
        let e = elide(s, 10.0, Font::Sans, 60.0).unwrap();
        assert!(e.ends_with('…') && width(&e, 10.0, Font::Sans) <= 60.0, "{e}");
        assert_eq!(elide(s, 10.0, Font::Sans, 5.0), None);
        let w = wrap(s, 10.0, Font::Sans, 80.0);
        assert!(w.len() > 1 && w.iter().all(|l| width(l, 10.0, Font::Sans) <= 80.0), "{w:?}");
        assert_eq!(w.join(" "), s);
    }
}
