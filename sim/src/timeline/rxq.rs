//! RX-queue stalls: a column per (host, queue) left of each lane, labelled in the lane header;
//! packets' waits merged into one bar per busy period, with a tooltip listing them; the decisive
//! stall in orange.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::model::{Model, Stall};
use super::scale::Scale;
use super::svg::{esc, Canvas, Geometry};
use crate::words::{ms, ms_d};

/// RX-queue stalls: one column per queue left of the lane, overlapping waits merged into one bar.
pub fn stalls(cv: &mut Canvas, m: &Model, sc: &Scale, g: &Geometry) {
    let mut merged: BTreeMap<(usize, u32, u16), Vec<Vec<&Stall>>> = BTreeMap::new();
    let mut sorted: Vec<&Stall> = m.stalls.iter().filter(|s| !s.decisive).collect();
    sorted.sort_by_key(|s| (s.from, s.until));
    for st in sorted {
        let Some(lane) = m.lanes.iter().position(|&l| l == st.lane) else { continue };
        let runs = merged.entry((lane, st.host, st.queue)).or_default();
        match runs.last_mut() {
            Some(run) if run.iter().map(|s| s.until).max().is_some_and(|u| u >= st.from) => run.push(st),
            _ => runs.push(vec![st]),
        }
    }
    for ((lane, host, queue), runs) in merged {
        let x = g.col_x(lane, host, queue);
        for run in runs {
            let from = run[0].from;
            let until = run.iter().map(|s| s.until).max().unwrap_or(from);
            let (y0, y1) = (sc.y(from), sc.y(until));
            let mut what: Vec<&str> = run.iter().map(|s| s.what.as_str()).take(6).collect();
            let more = run.len().saturating_sub(what.len());
            let tail = if more > 0 { format!("; and {more} more") } else { String::new() };
            what.dedup();
            let _ = write!(
                cv.shape(until),
                r#"<rect class="stall" x="{x:.1}" y="{y0:.1}" width="5" height="{:.1}" data-host="{host}" data-queue="{queue}"><title>RX queue {queue} on host {host}: its softirq CPU was busy, {} packet(s) waited here {}–{}: {}{tail}</title></rect>"#,
                (y1 - y0).max(1.5),
                run.len(),
                ms(from),
                ms(until),
                esc(&what.join("; "))
            );
        }
    }
    for st in m.stalls.iter().filter(|s| s.decisive) {
        let Some(lane) = m.lanes.iter().position(|&l| l == st.lane) else { continue };
        let x = g.col_x(lane, st.host, st.queue) - 1.0;
        let (y0, y1) = (sc.y(st.from), sc.y(st.until));
        let _ = write!(
            cv.shape(st.until),
            r#"<rect class="stall decisive" x="{x:.1}" y="{y0:.1}" width="7" height="{:.1}" data-host="{}" data-queue="{}"><title>RX queue {} on host {} busy {} ({}–{}): {}</title></rect>"#,
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
}
