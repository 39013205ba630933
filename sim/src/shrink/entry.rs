//! A seeds/ corpus entry (format in seeds/README.md): written for a shrunk case, read by the
//! corpus replay, both through serde and `toml`.

use serde::{Deserialize, Serialize};

use super::Shrunk;

/// One recorded case: its case string, expected verdict, what it shows and when it was found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedEntry {
    /// The case string.
    pub case: String,
    /// The verdict it must keep.
    pub verdict: String,
    /// What it shows, in one sentence.
    pub shows: String,
    /// When it was found (`YYYY-MM-DD`).
    pub found: String,
}

impl SeedEntry {
    /// Reads an entry; unknown keys are an error.
    pub fn parse(text: &str) -> Result<SeedEntry, toml::de::Error> {
        toml::from_str(text)
    }

    /// The entry as TOML, one `key = "value"` line per field.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("four strings always serialise")
    }
}

/// The TOML text of a seeds/ entry: `found` is the date given (`YYYY-MM-DD`), never a clock.
pub fn seed_entry(s: &Shrunk, shows: &str, found: &str) -> String {
    SeedEntry {
        case: s.case.to_string(),
        verdict: s.verdict.name().to_string(),
        shows: shows.to_string(),
        found: found.to_string(),
    }
    .to_toml()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_with_quotes_and_newlines() {
        let e = SeedEntry {
            case: "variant=seq seed=1".into(),
            verdict: "pass".into(),
            shows: "a \"quoted\" \\ word\nand a second line".into(),
            found: "2026-11-29".into(),
        };
        let text = e.to_toml();
        assert!(text.starts_with("case = \"variant=seq seed=1\"\nverdict = \"pass\"\n"), "{text}");
        assert_eq!(SeedEntry::parse(&text).unwrap(), e);
    }

    #[test]
    fn unknown_keys_are_refused() {
        let text = "case = \"x\"\nverdict = \"pass\"\nshows = \"s\"\nfound = \"2026-11-29\"\ndigest = \"ab\"\n";
        assert!(SeedEntry::parse(text).unwrap_err().to_string().contains("digest"));
    }
}
