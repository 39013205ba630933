//! Verdict-rate equivalence (issue #28 item 4): a change to the model's event granularity keeps
//! each case's verdict rates. A table records the verdict counts the model before the change gave
//! over a seed range, one line per case (`sim/tests/data/`); [`compare`] sweeps the same seeds
//! under the model built now and applies a two-proportion z-test to each verdict's share.

use std::collections::BTreeMap;

use crate::case::Case;
use crate::oracle::Verdict;
use crate::sweep::{sweep, verdict_counts};

/// The two-sided 1 % critical value of the standard normal: a verdict's share differs at the
/// 1 % level when its |z| exceeds it. Applied to each verdict of each row, as issue #28 item 4
/// asks, with no correction for the ~80 comparisons a table makes: strict, so a model change
/// that truly keeps every rate can still fail one row by chance; the seeds are the same before
/// and after, so the samples are paired and the unpaired z is lenient for small shifts.
pub const Z_CRIT_1PCT: f64 = 2.575_829;

/// One line of a recorded table: `file<TAB>case<TAB>seeds<TAB>verdict=n ...`, the counts over
/// seeds `0..seeds`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The corpus file the case came from.
    pub file: String,
    /// The case, without its seed.
    pub case: String,
    /// How many seeds, from 0.
    pub seeds: u64,
    /// Runs of each verdict, by name.
    pub counts: BTreeMap<String, u64>,
}

/// The lines of a recorded table (blank lines and `#` comments skipped); `Err` names a bad line.
pub fn parse_table(text: &str) -> Result<Vec<Recorded>, String> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || format!("line {}: {line:?}", i + 1);
        let f: Vec<&str> = line.split('\t').collect();
        let [file, case, seeds, counts] = f[..] else { return Err(bad()) };
        let seeds = seeds.parse().map_err(|_| bad())?;
        let mut map = BTreeMap::new();
        for kv in counts.split_whitespace() {
            let (k, v) = kv.split_once('=').ok_or_else(bad)?;
            Verdict::parse(k).ok_or_else(bad)?;
            map.insert(k.to_string(), v.parse().map_err(|_| bad())?);
        }
        if map.values().sum::<u64>() != seeds {
            return Err(bad());
        }
        rows.push(Recorded { file: file.to_string(), case: case.to_string(), seeds, counts: map });
    }
    Ok(rows)
}

/// The pooled two-proportion z statistic of `x1` of `n1` against `x2` of `n2` (0 when both
/// shares are 0 or both 1: no variance, no difference).
pub fn two_proportion_z(x1: u64, n1: u64, x2: u64, n2: u64) -> f64 {
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let pooled = (x1 + x2) as f64 / (n1f + n2f);
    let var = pooled * (1.0 - pooled) * (1.0 / n1f + 1.0 / n2f);
    if var <= 0.0 {
        return 0.0;
    }
    (x1 as f64 / n1f - x2 as f64 / n2f) / var.sqrt()
}

/// What [`compare`] found for one case: the counts now and the verdict with the largest |z|.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Runs of each verdict now, by name.
    pub now: BTreeMap<String, u64>,
    /// The verdict whose share moved most, and its z (recorded share minus the share now).
    pub largest: (String, f64),
}

impl Comparison {
    /// Whether every verdict's share is the same at the 1 % level.
    pub fn equivalent(&self) -> bool {
        self.largest.1.abs() <= Z_CRIT_1PCT
    }
}

/// The z of each verdict's share between `old` over `n_old` runs and `new` over `n_new`, the
/// largest in size.
pub fn largest_z(old: &BTreeMap<String, u64>, n_old: u64, new: &BTreeMap<String, u64>, n_new: u64) -> (String, f64) {
    let mut worst = (String::new(), 0.0f64);
    for v in Verdict::ALL {
        let name = v.name();
        let at = |m: &BTreeMap<String, u64>| m.get(name).copied().unwrap_or(0);
        let z = two_proportion_z(at(old), n_old, at(new), n_new);
        if worst.0.is_empty() || z.abs() > worst.1.abs() {
            worst = (name.to_string(), z);
        }
    }
    worst
}

/// Sweeps `row`'s case over seeds `0..seeds` with the model built now (`jobs` threads) and
/// compares its verdict shares with the recorded ones (the test passes the row's own seed
/// count: the table records 0..999 and 0..99 separately).
pub fn compare(row: &Recorded, seeds: u64, jobs: usize) -> Result<Comparison, String> {
    let case = Case::parse(&row.case).map_err(|e| format!("{}: {e}", row.case))?;
    let seeds: Vec<u64> = (0..seeds).collect();
    let s = sweep(&case, &seeds, jobs, &|_, _| {}).map_err(|e| format!("{}: {e}", row.case))?;
    let now: BTreeMap<String, u64> = verdict_counts(|v| s.count(v)).into_iter().map(|(k, n)| (k, n as u64)).collect();
    let largest = largest_z(&row.counts, row.seeds, &now, seeds.len() as u64);
    Ok(Comparison { now, largest })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_z_statistic_matches_a_worked_example() {
        // 60 of 1000 against 40 of 1000: pooled 0.05, se sqrt(0.05 * 0.95 * 0.002) = 0.009747.
        let z = two_proportion_z(60, 1000, 40, 1000);
        assert!((z - 2.0519).abs() < 1e-3, "{z}");
        assert_eq!(two_proportion_z(0, 1000, 0, 1000), 0.0);
        assert_eq!(two_proportion_z(1000, 1000, 1000, 1000), 0.0);
        assert!(two_proportion_z(40, 1000, 60, 1000) < 0.0);
        // 1 % two-sided: 72 of 1000 against 40 of 1000 differs, 60 against 40 does not.
        assert!(two_proportion_z(72, 1000, 40, 1000).abs() > Z_CRIT_1PCT);
        assert!(two_proportion_z(60, 1000, 40, 1000).abs() < Z_CRIT_1PCT);
    }

    #[test]
    fn a_table_line_parses_and_its_counts_must_add_up() {
        let t = "# comment\nf.toml\tengine=fast ranks=2\t10\tpass=7 error=3\n";
        let rows = parse_table(t).unwrap();
        assert_eq!(rows[0].seeds, 10);
        assert_eq!(rows[0].counts["error"], 3);
        assert!(parse_table("f\tc\t10\tpass=7 error=2\n").is_err());
        assert!(parse_table("f\tc\t10\tpass=7 nonsense=3\n").is_err());
        assert!(parse_table("f\tc\tten\tpass=10\n").is_err());
    }

    #[test]
    fn the_largest_z_names_the_verdict_that_moved() {
        let m = |p: u64, e: u64| BTreeMap::from([("pass".to_string(), p), ("error".to_string(), e)]);
        let (v, z) = largest_z(&m(900, 100), 1000, &m(850, 150), 1000);
        assert!(v == "pass" || v == "error", "{v}");
        assert!(z.abs() > Z_CRIT_1PCT);
        assert_eq!(largest_z(&m(900, 100), 1000, &m(900, 100), 1000).1, 0.0);
    }
}
