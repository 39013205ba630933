//! Every table the CLI prints (compare, bench): one look, fitted to the terminal, or to a fixed
//! width when stdout is not one (pipes, files, tests), so the output is the same everywhere.

use std::io::IsTerminal;

use comfy_table::{presets, CellAlignment, ContentArrangement, Table};

/// The width when stdout is not a terminal.
pub const PIPE_WIDTH: u16 = 120;

/// A table with `header`; columns listed in `right` are right-aligned (numbers).
pub fn new(header: &[&str], right: &[usize]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::ASCII_MARKDOWN).set_content_arrangement(ContentArrangement::Dynamic).set_header(header);
    let width = match std::io::stdout().is_terminal() {
        true => terminal_size::terminal_size().map_or(PIPE_WIDTH, |(w, _)| w.0),
        false => PIPE_WIDTH,
    };
    t.set_width(width);
    for &i in right {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_rows_wrap_within_the_width() {
        let mut t = new(&["case", "figure"], &[1]);
        t.add_row(vec!["x".repeat(200), "1".to_string()]);
        let text = t.to_string();
        assert!(text.lines().count() > 3, "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= PIPE_WIDTH as usize), "{text}");
    }
}
