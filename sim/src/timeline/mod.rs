//! `bootsim replay --timeline`: one self-contained HTML file (inline CSS and SVG, no scripts, no
//! external assets) with a sequence diagram of a run: a lane per rank and the root, each
//! connection's SYN, accept-queue entry, accept and read, RX-queue stalls shaded, drains, and the
//! mismatched pair highlighted with the expected and received QPN/GID.
//!
//! Worlds of up to [`model::MAX_LANES`] ranks show every lane; larger ones show only the two
//! ranks of the violation (or the root and the first ranks of a passing run) and the connections
//! between shown lanes. The file is a pure function of the case.

pub mod model;
pub mod scale;
pub mod svg;

use std::fmt::Write;

use crate::explain::explain;
use crate::run::{run_case, RunReport};
use model::{Model, MAX_LANES};
use svg::esc;

const STYLE: &str = include_str!("style.css");

/// The timeline HTML of a run; a report without trace-time records is re-run with tracing.
pub fn render_html(report: &RunReport) -> String {
    if report.trace.is_none() {
        return render_html(&run_case(&report.case, true));
    }
    let model = Model::build(report);
    let mut h = String::new();
    let title = format!("bootsim timeline: {}", report.case);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n",
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
    let lines = explain(report);
    if !lines.is_empty() {
        h.push_str("<ol id=\"explain\">");
        for l in &lines {
            let _ = write!(h, "<li>{}</li>", esc(l));
        }
        h.push_str("</ol>\n");
    }
    if report.case.ranks > MAX_LANES {
        let shown = model.lanes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        let _ = writeln!(
            h,
            "<p class=\"filtered\" id=\"filtered\">{} ranks: showing only {shown} and the connections between them.</p>",
            report.case.ranks
        );
    }
    h.push_str(LEGEND);
    h.push_str("</header>\n<main>");
    h.push_str(&svg::render(&model));
    h.push_str("</main>\n</body></html>\n");
    h
}

const LEGEND: &str = concat!(
    "<ul class=\"legend\" id=\"legend\">",
    "<li><i class=\"sw sw-conn\"></i>connection: SYN (dot) to accept-queue entry (arrowhead)</li>",
    "<li><i class=\"sw sw-acceptq\"></i>waiting in the accept queue, then accept() (circle)</li>",
    "<li><i class=\"sw sw-read\"></i>read: a receive took the message</li>",
    "<li><i class=\"sw sw-stall\"></i>RX-queue stall (one thin column per queue)</li>",
    "<li><i class=\"sw sw-decisive\"></i>the stall that let a later message overtake</li>",
    "<li><i class=\"sw sw-drain\"></i>drain before close</li>",
    "<li><i class=\"sw sw-taken\"></i>taken by the wrong receive</li>",
    "<li><i class=\"sw sw-overtaken\"></i>the message it overtook</li>",
    "</ul>\n"
);
