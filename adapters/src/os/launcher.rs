//! Rank and world size from the job launcher's environment.
//!
//! Launchers are tried in the order of [`LAUNCHERS`]; the first one whose rank
//! *and* size variables are both set wins. A launcher with only one of its
//! two variables set is skipped (an `sbatch` script without `--ntasks` has
//! `SLURM_PROCID` but no `SLURM_NTASKS`); if no launcher is complete, that
//! half-set pair is reported as an error.

/// One launcher's pair of variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launcher {
    /// Short name, copied into [`LaunchInfo::source`].
    pub name: &'static str,
    /// Variable holding this process's rank.
    pub rank_var: &'static str,
    /// Variable holding the number of ranks.
    pub size_var: &'static str,
}

/// The launchers [`from_env`] knows, in the order it tries them.
pub const LAUNCHERS: [Launcher; 4] = [
    Launcher { name: "slurm", rank_var: "SLURM_PROCID", size_var: "SLURM_NTASKS" },
    Launcher { name: "openmpi", rank_var: "OMPI_COMM_WORLD_RANK", size_var: "OMPI_COMM_WORLD_SIZE" },
    Launcher { name: "pmi", rank_var: "PMI_RANK", size_var: "PMI_SIZE" },
    Launcher { name: "generic", rank_var: "RANK", size_var: "WORLD_SIZE" },
];

/// This process's place in the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchInfo {
    /// 0-based rank, `< size`.
    pub rank: u32,
    /// Number of ranks, `>= 1`.
    pub size: u32,
    /// Which launcher it came from ([`Launcher::name`]).
    pub source: &'static str,
}

/// A launcher environment that is set but unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// A value is not a non-negative integer that fits in `u32`.
    #[error("{var}={value:?} is not a non-negative integer: {reason}")]
    NotANumber {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// The parse error text.
        reason: String,
    },
    /// The world size is 0.
    #[error("{var}=0: the world size must be at least 1")]
    ZeroSize {
        /// The size variable.
        var: &'static str,
    },
    /// The rank is not below the world size.
    #[error("{rank_var}={rank} is out of range for {size_var}={size} (needs rank < size)")]
    RankOutOfRange {
        /// The rank variable.
        rank_var: &'static str,
        /// Its value.
        rank: u32,
        /// The size variable.
        size_var: &'static str,
        /// Its value.
        size: u32,
    },
    /// Only one variable of a pair is set and no other launcher is complete.
    #[error("{present} is set but {missing} is not")]
    Incomplete {
        /// The variable that is set.
        present: &'static str,
        /// Its partner that is not.
        missing: &'static str,
    },
}

fn parse(var: &'static str, value: String) -> Result<u32, LaunchError> {
    value.parse::<u32>().map_err(|e| LaunchError::NotANumber { var, reason: e.to_string(), value })
}

/// Reads rank and size through `get` (e.g. `|k| std::env::var(k).ok()`).
///
/// `Ok(None)`: no launcher variables at all. Values must be plain decimal
/// integers (no sign, no whitespace).
pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Option<LaunchInfo>, LaunchError> {
    let mut half_set = None;
    for l in LAUNCHERS {
        let (rank, size) = match (get(l.rank_var), get(l.size_var)) {
            (Some(rank), Some(size)) => (rank, size),
            (None, None) => continue,
            (Some(_), None) => {
                tracing::debug!(present = l.rank_var, missing = l.size_var, "launcher skipped");
                half_set.get_or_insert((l.rank_var, l.size_var));
                continue;
            }
            (None, Some(_)) => {
                tracing::debug!(present = l.size_var, missing = l.rank_var, "launcher skipped");
                half_set.get_or_insert((l.size_var, l.rank_var));
                continue;
            }
        };
        let rank = parse(l.rank_var, rank)?;
        let size = parse(l.size_var, size)?;
        if size == 0 {
            return Err(LaunchError::ZeroSize { var: l.size_var });
        }
        if rank >= size {
            return Err(LaunchError::RankOutOfRange { rank_var: l.rank_var, rank, size_var: l.size_var, size });
        }
        return Ok(Some(LaunchInfo { rank, size, source: l.name }));
    }
    match half_set {
        Some((present, missing)) => Err(LaunchError::Incomplete { present, missing }),
        None => Ok(None),
    }
}

/// [`from_env`] on this process's environment (non-UTF-8 values count as
/// unset).
pub fn from_process_env() -> Result<Option<LaunchInfo>, LaunchError> {
    from_env(|k| std::env::var(k).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        let map: HashMap<&str, &str> = pairs.iter().copied().collect();
        move |k| map.get(k).map(|v| (*v).to_owned())
    }

    fn info(rank: u32, size: u32, source: &'static str) -> Option<LaunchInfo> {
        Some(LaunchInfo { rank, size, source })
    }

    #[test]
    fn each_launcher_is_recognised() {
        for (l, want) in LAUNCHERS.iter().zip(["slurm", "openmpi", "pmi", "generic"]) {
            let got = from_env(env(&[(l.rank_var, "3"), (l.size_var, "8")])).unwrap();
            assert_eq!(got, info(3, 8, want), "{l:?}");
        }
    }

    #[test]
    fn nothing_set_is_none() {
        assert_eq!(from_env(env(&[])).unwrap(), None);
        assert_eq!(from_env(env(&[("LOCAL_RANK", "1")])).unwrap(), None);
    }

    #[test]
    fn order_is_slurm_ompi_pmi_generic() {
        let all = [
            ("RANK", "4"),
            ("WORLD_SIZE", "5"),
            ("PMI_RANK", "3"),
            ("PMI_SIZE", "5"),
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "5"),
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "5"),
        ];
        for skip in 0..4 {
            let got = from_env(env(&all[..8 - 2 * skip])).unwrap();
            assert_eq!(got, info(1 + skip as u32, 5, LAUNCHERS[skip].name));
        }
    }

    #[test]
    fn rank_must_be_below_size() {
        let err = from_env(env(&[("PMI_RANK", "4"), ("PMI_SIZE", "4")])).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("PMI_RANK=4") && msg.contains("PMI_SIZE=4"), "{msg}");
        assert_eq!(from_env(env(&[("PMI_RANK", "3"), ("PMI_SIZE", "4")])).unwrap(), info(3, 4, "pmi"));
    }

    #[test]
    fn zero_size_is_an_error() {
        let err = from_env(env(&[("RANK", "0"), ("WORLD_SIZE", "0")])).unwrap_err();
        assert_eq!(err, LaunchError::ZeroSize { var: "WORLD_SIZE" });
        assert!(err.to_string().contains("WORLD_SIZE=0"));
    }

    #[test]
    fn bad_numbers_name_the_variable_and_value() {
        for (rank, size, var, value) in [
            ("abc", "4", "SLURM_PROCID", "abc"),
            ("-1", "4", "SLURM_PROCID", "-1"),
            ("", "4", "SLURM_PROCID", ""),
            ("1", " 4", "SLURM_NTASKS", " 4"),
            ("1", "99999999999", "SLURM_NTASKS", "99999999999"),
        ] {
            let err = from_env(env(&[("SLURM_PROCID", rank), ("SLURM_NTASKS", size)])).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(&format!("{var}={value:?}")), "{msg}");
            assert!(matches!(err, LaunchError::NotANumber { var: v, .. } if v == var));
        }
    }

    #[test]
    fn a_bad_first_launcher_is_not_skipped() {
        let err = from_env(env(&[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "2"), ("RANK", "0"), ("WORLD_SIZE", "2")]))
            .unwrap_err();
        assert!(err.to_string().contains("SLURM_PROCID"));
    }

    #[test]
    fn half_set_pairs() {
        // Skipped when a later launcher is complete.
        let got = from_env(env(&[("SLURM_PROCID", "0"), ("RANK", "2"), ("WORLD_SIZE", "4")]));
        assert_eq!(got.unwrap(), info(2, 4, "generic"));
        // Reported when nothing is complete: the first half-set pair.
        let err = from_env(env(&[("SLURM_PROCID", "0"), ("WORLD_SIZE", "4")])).unwrap_err();
        assert_eq!(err, LaunchError::Incomplete { present: "SLURM_PROCID", missing: "SLURM_NTASKS" });
        let err = from_env(env(&[("OMPI_COMM_WORLD_SIZE", "4")])).unwrap_err();
        assert_eq!(err.to_string(), "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not");
    }
}
