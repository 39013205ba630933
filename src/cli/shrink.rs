//! `bootsim shrink`: a failing case minimised with its verdict kept, optionally saved to seeds/.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use bootsim_sim::case::shorten;
use bootsim_sim::shrink::{seed_entry, shrink as shrink_case, ShrinkError};
use bootsim_sim::Case;

/// Arguments of `bootsim shrink`.
#[derive(clap::Args, Debug)]
pub struct ShrinkArgs {
    /// The failing case string.
    case: String,
    /// Write the minimal case as a seeds/ entry (TOML) to this path; refuses to overwrite.
    #[arg(long, value_name = "PATH")]
    save: Option<PathBuf>,
    /// The entry's `shows` line (default: the minimal case's first finding).
    #[arg(long, requires = "save")]
    shows: Option<String>,
    /// The entry's `found` date, YYYY-MM-DD (default: today, UTC).
    #[arg(long, requires = "save", value_name = "DATE")]
    found: Option<String>,
}

/// Shrinks the case and prints the minimal case string and its verdict; exit 2 if it passes.
pub fn shrink(a: ShrinkArgs) -> anyhow::Result<ExitCode> {
    let case = Case::parse(&a.case).with_context(|| format!("in '{}'", shorten(&a.case)))?;
    if let Some(path) = &a.save {
        if path.extension().is_none_or(|e| e != "toml") {
            bail!("--save {}: a seeds/ entry must be a .toml file", path.display());
        }
        if path.exists() {
            bail!("--save {}: the file exists; choose another name or remove it", path.display());
        }
    }
    let found = match a.found {
        Some(d) => parse_date(&d)?,
        None => today(),
    };
    let s = match shrink_case(&case) {
        // Too costly to simulate is the world's limit, not the user's usage: exit 3.
        Err(e @ ShrinkError::Guarded) => {
            return Err(super::RuntimeFailure(anyhow::Error::new(e).context(format!("cannot shrink '{case}'"))).into())
        }
        r => r.with_context(|| format!("cannot shrink '{case}'"))?,
    };
    for step in &s.log {
        eprintln!("  {step}");
    }
    println!("verdict: {}", s.verdict);
    println!("case: {}", s.case);
    if let Some(f) = &s.first_finding {
        println!("  {f}");
    }
    println!("runs: {} (stalls seen: {})", s.runs, s.stalls_seen);
    if let Some(path) = &a.save {
        let shows = a.shows.or_else(|| s.first_finding.clone()).unwrap_or_else(|| format!("a minimal {}", s.verdict));
        let text = seed_entry(&s, &shows, &found);
        std::fs::write(path, text).with_context(|| format!("--save {}", path.display()))?;
        println!("saved: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `YYYY-MM-DD`, a real calendar date (2026-13-45 is refused).
fn parse_date(d: &str) -> anyhow::Result<String> {
    let date: jiff::civil::Date = d.parse().with_context(|| format!("--found `{d}`: expected a date YYYY-MM-DD"))?;
    let text = date.to_string();
    if text != d {
        bail!("--found `{d}`: expected a date YYYY-MM-DD (did you mean {text}?)");
    }
    Ok(text)
}

/// Today's UTC date from the system clock (the CLI's only clock read; the sim never sees it).
fn today() -> String {
    jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).date().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(parse_date("2026-11-29").unwrap(), "2026-11-29");
        assert_eq!(parse_date("2000-02-29").unwrap(), "2000-02-29");
        for bad in ["2026-13-45", "2026-02-30", "2026-1-29", "yesterday", "2026-11-29T00:00"] {
            assert!(parse_date(bad).is_err(), "{bad}");
        }
        assert_eq!(today().len(), 10);
    }
}
