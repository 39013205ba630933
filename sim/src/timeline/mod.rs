//! `bootsim replay --timeline`: one self-contained HTML file (inline CSS and SVG, no scripts, no
//! external assets) with a sequence diagram of a run: a lane per rank and the root, each
//! connection's SYN, accept-queue entry, accept and read, RX-queue stalls in labelled columns,
//! drains, and the mismatched pair highlighted with the expected and received QPN/GID.
//!
//! The page fits a 1400-pixel window, no two texts overlap (a label layout pass moves, shortens
//! or leaves out labels; full text in tooltips), time cuts are marked on the axis, and checkboxes
//! (plain CSS) show or hide the init phase and the events before the failing exchange, which are
//! hidden when the page opens on a failing run so that the violation is on the first screen.
//!
//! Worlds of up to [`model::MAX_LANES`] ranks show every lane; larger ones show only the two
//! ranks of the violation (or the root and the first ranks of a passing run) and the connections
//! between shown lanes. The file is a pure function of the case.

mod axis;
pub mod bands;
mod callouts;
pub mod labels;
pub mod model;
mod rxq;
pub mod scale;
pub mod svg;
pub mod textwidth;

use std::fmt::Write;

use crate::case::CaseError;
use crate::explain::explain;
use crate::run::{run_case, RunReport};
use model::{Model, MAX_LANES};
use svg::{esc, Layout, Picture};
use textwidth::{width, Font};

/// The window the page is laid out for: the page fits its width, and the violation fits in the
/// height a browser of this window size leaves for the page ([`VIEWPORT_H`]).
pub const WINDOW: (f64, f64) = (1400.0, 1000.0);
/// The height of the page's viewport in a [`WINDOW`]-sized browser window (Chromium's tab strip
/// and toolbar take the rest).
pub const VIEWPORT_H: f64 = 860.0;
/// The widest the picture is: the window less the page margins and a vertical scrollbar.
const PICTURE_W: f64 = WINDOW.0 - 2.0 * 16.0 - 20.0;

const STYLE: &str = include_str!("style.css");

/// The timeline HTML of a run; a report without trace-time records is re-run with tracing,
/// refused (naming the MiB) when that run would not fit the case's memory budget.
pub fn render_html(report: &RunReport) -> Result<String, CaseError> {
    if report.trace.is_none() {
        report.case.check_kept_results(true)?;
        return render_html(&run_case(&report.case, true));
    }
    let model = Model::build(report);
    let lines = explain(report);
    let header = header_height(&lines, report.case.ranks() > MAX_LANES);
    let pic = svg::render(&model, Layout { width: PICTURE_W, focus_budget: VIEWPORT_H - header - 170.0 });
    let (form, css) = controls(&pic);
    let mut h = String::new();
    let title = format!("bootsim timeline: {}", report.case);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}{css}</style></head><body>\n",
        esc(&title)
    );
    let verdict = report.verdict;
    let _ = writeln!(
        h,
        "<header><h1>bootsim timeline</h1><p class=\"case\" id=\"case\">{}</p><p><span class=\"verdict {verdict}\" id=\"verdict\">{verdict}</span> bootstrap {:.3} ms simulated, {} messages, {} packets ({} stalled, {} lost, {} retransmitted)</p>",
        esc(&report.case.to_string()),
        report.bootstrap_time.as_secs_f64() * 1e3,
        report.messages,
        report.kernel.packets,
        report.kernel.stalled,
        report.kernel.lost,
        report.kernel.retransmits,
    );
    if !lines.is_empty() {
        h.push_str("<ol id=\"explain\">");
        for l in &lines {
            let _ = write!(h, "<li>{}</li>", esc(l));
        }
        h.push_str("</ol>\n");
    }
    if report.case.ranks() > MAX_LANES {
        let shown = model.lanes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        let _ = writeln!(
            h,
            "<p class=\"filtered\" id=\"filtered\">{} ranks: showing only {shown} and the connections between them.</p>",
            report.case.ranks()
        );
    }
    h.push_str(LEGEND);
    h.push_str("</header>\n");
    h.push_str(&form);
    h.push_str("<main>");
    h.push_str(&pic.svg);
    h.push_str("</main>\n</body></html>\n");
    Ok(h)
}

/// A checkbox per band that can be hidden, and the CSS that hides it: its content disappears and
/// everything below moves up by its height.
fn controls(pic: &Picture) -> (String, String) {
    if pic.bands.is_empty() {
        return (String::new(), String::new());
    }
    let mut h = String::from("<form class=\"controls\" id=\"controls\">Show:");
    let mut css = String::new();
    for (b, shift) in &pic.bands {
        let checked = if b.hidden { "" } else { " checked" };
        let k = b.key;
        let _ = write!(
            h,
            "<label><input type=\"checkbox\" id=\"show-{k}\"{checked}> {} ({}–{})</label>",
            b.label,
            crate::words::ms(b.from),
            crate::words::ms(b.until)
        );
        let off = format!("body:has(#show-{k}:not(:checked))");
        let on = format!("body:has(#show-{k}:checked)");
        let _ = write!(
            css,
            "{off} .ph-{k}, {off} .{k}, {on} .hidden-{k}, {off} .shown-{k} {{ display: none; }}\n{off} .after-{k} {{ transform: translateY(-{shift:.1}px); }}\n"
        );
    }
    // The picture's height for each combination of hidden bands.
    let n = pic.bands.len();
    for mask in 0..(1u32 << n) {
        let mut sel = String::from("body");
        let mut height = pic.height;
        for (i, (b, shift)) in pic.bands.iter().enumerate() {
            let hidden = mask & (1 << i) != 0;
            let _ = write!(sel, ":has(#show-{}:{})", b.key, if hidden { "not(:checked)" } else { "checked" });
            if hidden {
                height -= shift;
            }
        }
        let _ = writeln!(css, "{sel} #timeline {{ height: {height:.0}px; }}");
    }
    h.push_str("</form>\n");
    (h, css)
}

/// About how tall the header is at [`WINDOW`]'s width, for the violation to fit below it.
fn header_height(explain: &[String], filtered: bool) -> f64 {
    let text_w = 1100.0 - 22.0;
    let explain_lines: f64 = explain.iter().map(|l| (width(l, 13.0, Font::Sans) / text_w).ceil().max(1.0)).sum();
    16.0 + 30.0 + 22.0 + 28.0 + explain_lines * 18.2 + 12.0 + 4.0 * 21.0 + if filtered { 20.0 } else { 0.0 } + 30.0
}

const LEGEND: &str = concat!(
    "<ul class=\"legend\" id=\"legend\">",
    "<li><i class=\"sw sw-conn\"></i>connection: SYN (dot) to accept-queue entry (arrowhead)</li>",
    "<li><i class=\"sw sw-acceptq\"></i>waiting in the accept queue, then accept() (circle)</li>",
    "<li><i class=\"sw sw-read\"></i>read: a receive took the message</li>",
    "<li><i class=\"sw sw-stall\"></i>RX-queue stall: packets to this lane's node waited in an RX queue of its host (the numbered <i>RX queues</i> columns left of the lane) while that queue's softirq CPU was busy; hover for which</li>",
    "<li><i class=\"sw sw-decisive\"></i>the stall that let a later message overtake</li>",
    "<li><i class=\"sw sw-drain\"></i>drain before close</li>",
    "<li><i class=\"sw sw-taken\"></i>taken by the wrong receive</li>",
    "<li><i class=\"sw sw-overtaken\"></i>the message it overtook</li>",
    "<li><i class=\"sw sw-cut\"></i>time cut: the gap (+duration on the axis) is longer than drawn; elsewhere 1 ms is 24 px, rows at least 15 px apart</li>",
    "</ul>\n"
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Case;

    #[test]
    fn an_untraced_report_too_large_to_re_run_traced_is_refused_naming_the_mib() {
        let line = "engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3";
        let probe = Case::parse(line).unwrap();
        let tight = Case::parse_within(line, probe.payload_bytes() + probe.kept_results_bytes()).unwrap();
        let err = render_html(&run_case(&tight, false)).unwrap_err();
        assert!(err.to_string().contains("MiB") && err.to_string().contains("traced"), "{err}");
        // Within the default budget the same untraced report is re-run traced and drawn.
        assert!(render_html(&run_case(&probe, false)).unwrap().contains("<svg"));
    }
}
