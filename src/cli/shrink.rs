//! `bootsim shrink`: a failing case minimised with its verdict kept, optionally saved to seeds/.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use bootsim_sim::shrink::{seed_entry, shrink as shrink_case};
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
    let case = Case::parse(&a.case).with_context(|| format!("in '{}'", a.case))?;
    if let Some(path) = &a.save {
        if path.extension().is_none_or(|e| e != "toml") {
            bail!("--save {}: a seeds/ entry must be a .toml file", path.display());
        }
        if path.exists() {
            bail!("--save {}: the file exists; choose another name or remove it", path.display());
        }
    }
    let found = match a.found {
        Some(d) if is_date(&d) => d,
        Some(d) => bail!("--found `{d}`: expected a date YYYY-MM-DD"),
        None => today(),
    };
    let s = shrink_case(&case).with_context(|| format!("cannot shrink '{case}'"))?;
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

fn is_date(d: &str) -> bool {
    let b = d.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// Today's UTC date from the system clock (the CLI's only clock read; the sim never sees it).
fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    civil_date((secs / 86_400) as i64)
}

/// Days since 1970-01-01 as YYYY-MM-DD (Howard Hinnant's civil_from_days).
fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(20_000), "2024-10-04");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert!(is_date("2026-11-29") && !is_date("2026-1-29") && !is_date("yesterday"));
    }
}
