//! A seeds/ corpus entry (format in seeds/README.md) for a shrunk case.

use super::Shrunk;

/// The TOML text of a seeds/ entry: `found` is the date given (`YYYY-MM-DD`), never a clock.
pub fn seed_entry(s: &Shrunk, shows: &str, found: &str) -> String {
    format!(
        "case = {}\nverdict = {}\nshows = {}\nfound = {}\n",
        quote(&s.case.to_string()),
        quote(s.verdict.name()),
        quote(shows),
        quote(found)
    )
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_escape() {
        assert_eq!(quote("a \"b\" \\ c\n"), "\"a \\\"b\\\" \\\\ c\\n\"");
    }
}
