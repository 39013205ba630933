//! The accept-order policy language: which connections an adversary holds back, for how long,
//! and which it lets go first. One grammar for every world that reorders a real program's
//! accepts: the userspace wire (packets, in `bootsim-adapters`) and the accept interposer
//! (`bootsim-interposer`, inside the program).
//!
//! String forms (see [`PolicySpec::from_str`](std::str::FromStr)): `none`, `hold=20ms`,
//! `hold=20ms,select=even`, `release-on-next`, `release-on-next=100ms,select=nth:0`. Durations
//! carry their unit (`us`, `ms`, `s`: [`crate::duration`]).

mod select;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub use select::{fmt_duration, parse_duration, PolicyParseError, Select};

/// The release-on-next fallback delay when the string gives none.
pub const DEFAULT_FALLBACK: Duration = Duration::from_millis(50);

/// The longest delay any policy may ask for; longer model delays are clamped to it.
pub const MAX_DELAY: Duration = Duration::from_secs(3600);

/// What a selector sees of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnKey {
    /// Index over all connections the adversary saw, in arrival order.
    pub conn: u32,
    /// Index among connections from `src_host` to `dst_host`, in arrival order.
    pub pair_conn: u32,
    /// Host number (last address octet) of the connecting side.
    pub src_host: u8,
    /// Host number (last address octet) of the accepting side.
    pub dst_host: u8,
    /// NVSHMEM's message header (sender rank, tag) when the adversary read it.
    pub msg: Option<(i32, i32)>,
}

/// A parsed policy string: what to do to the selected connections.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PolicySpec {
    /// Nothing.
    #[default]
    None,
    /// Hold the selected connections for `delay`.
    Hold {
        /// How long to hold.
        delay: Duration,
        /// Which connections (default: all).
        select: Select,
    },
    /// Hold the selected connections until the next connection on the same
    /// (sender, receiver) pair has arrived, or `fallback` has passed.
    ReleaseOnNext {
        /// The longest hold.
        fallback: Duration,
        /// Which connections (default: even `pair_conn`, so odd ones release them).
        select: Select,
    },
}

/// The plan for one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldPlan {
    /// Let it through at once.
    Pass,
    /// Hold for this long.
    For(Duration),
    /// Hold until a later connection on the pair arrives, at most this long.
    UntilNext(Duration),
}

impl PolicySpec {
    /// The plan for connection `key`.
    pub fn plan(&self, key: &ConnKey) -> HoldPlan {
        match self {
            PolicySpec::Hold { delay, select } if select.matches(key) => HoldPlan::For(*delay),
            PolicySpec::ReleaseOnNext { fallback, select } if select.matches(key) => HoldPlan::UntilNext(*fallback),
            _ => HoldPlan::Pass,
        }
    }

    /// Its selector, if it has one.
    pub fn select(&self) -> Option<&Select> {
        match self {
            PolicySpec::None => None,
            PolicySpec::Hold { select, .. } | PolicySpec::ReleaseOnNext { select, .. } => Some(select),
        }
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicySpec::None => f.write_str("none"),
            PolicySpec::Hold { delay, select } => {
                write!(f, "hold={}", fmt_duration(*delay))?;
                if *select != Select::All {
                    write!(f, ",select={select}")?;
                }
                Ok(())
            }
            PolicySpec::ReleaseOnNext { fallback, select } => {
                f.write_str("release-on-next")?;
                if *fallback != DEFAULT_FALLBACK {
                    write!(f, "={}", fmt_duration(*fallback))?;
                }
                if *select != Select::EVEN {
                    write!(f, ",select={select}")?;
                }
                Ok(())
            }
        }
    }
}

impl FromStr for PolicySpec {
    type Err = PolicyParseError;

    /// Parses `none`, `hold=D[,select=S]...` or `release-on-next[=D][,select=S]...`;
    /// several `select=` parts mean any of them.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.split(',').map(str::trim);
        let head = parts.next().unwrap_or_default();
        let (name, value) = match head.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (head, None),
        };
        let mut selects = Vec::new();
        for part in parts {
            match part.split_once('=') {
                Some(("select", v)) => selects.push(v.trim().parse::<Select>()?),
                _ => return Err(PolicyParseError::new(part, "expected `select=...`")),
            }
        }
        let select = |default: Select| match selects.len() {
            0 => default,
            1 => selects[0].clone(),
            _ => Select::Any(selects.clone()),
        };
        match (name, value) {
            ("none", None) if selects.is_empty() => Ok(PolicySpec::None),
            ("none", _) => Err(PolicyParseError::new(s, "`none` takes no options")),
            ("hold", Some(v)) => Ok(PolicySpec::Hold {
                delay: parse_duration(v).map_err(|why| PolicyParseError::new(head, why))?,
                select: select(Select::All),
            }),
            ("hold", None) => Err(PolicyParseError::new(head, "needs a delay, e.g. `hold=20ms`")),
            ("release-on-next", v) => Ok(PolicySpec::ReleaseOnNext {
                fallback: match v {
                    Some(v) => parse_duration(v).map_err(|why| PolicyParseError::new(head, why))?,
                    None => DEFAULT_FALLBACK,
                },
                select: select(Select::EVEN),
            }),
            ("model", _) => Err(PolicyParseError::new(head, "a model policy is built in code, not parsed")),
            _ => Err(PolicyParseError::new(head, "unknown policy (expected none, hold=MS or release-on-next[=MS])")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(conn: u32, pair_conn: u32) -> ConnKey {
        ConnKey { conn, pair_conn, src_host: 1, dst_host: 2, msg: None }
    }

    #[test]
    fn parses_and_round_trips() {
        for s in [
            "none",
            "hold=20ms",
            "hold=20ms,select=even",
            "hold=500us,select=odd",
            "release-on-next",
            "release-on-next=100ms",
            "release-on-next,select=nth:0",
            "hold=1s,select=every:3:1",
            "hold=5ms,select=pair:1>2:4",
            "hold=5ms,select=conn:0+3+7",
            "release-on-next=500ms,select=msg:0:1",
        ] {
            let p: PolicySpec = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            let back: PolicySpec = p.to_string().parse().unwrap();
            assert_eq!(back, p, "{s}");
        }
        assert_eq!("hold=1s".parse::<PolicySpec>().unwrap().to_string(), "hold=1s");
    }

    #[test]
    fn errors_name_the_bad_part() {
        for (s, part) in [
            ("", ""),
            ("holdd=20", "holdd=20"),
            ("hold", "hold"),
            ("hold=abc", "hold=abc"),
            ("hold=20ms,select=evn", "evn"),
            ("hold=20ms,frob=1", "frob=1"),
            ("hold=20ms,select=every:0", "every:0"),
            ("release-on-next=-3", "release-on-next=-3"),
            ("none,select=all", "none,select=all"),
            ("model", "model"),
        ] {
            let e = s.parse::<PolicySpec>().expect_err(s);
            assert_eq!(e.part, part, "{s}: {e}");
            assert!(e.to_string().contains(&format!("`{part}`")), "{e}");
        }
    }

    #[test]
    fn plans_follow_selection() {
        let p: PolicySpec = "release-on-next".parse().unwrap();
        assert_eq!(p.plan(&key(0, 0)), HoldPlan::UntilNext(DEFAULT_FALLBACK));
        assert_eq!(p.plan(&key(1, 1)), HoldPlan::Pass);
        let p: PolicySpec = "hold=7ms".parse().unwrap();
        assert_eq!(p.plan(&key(5, 5)), HoldPlan::For(Duration::from_millis(7)));
        let p: PolicySpec = "hold=7ms,select=msg:1:2".parse().unwrap();
        assert_eq!(p.plan(&key(0, 0)), HoldPlan::Pass);
        assert_eq!(p.plan(&ConnKey { msg: Some((1, 2)), ..key(0, 0) }), HoldPlan::For(Duration::from_millis(7)));
        assert!(p.select().unwrap().reads_bytes());
    }
}
