//! Packet policies: which TCP connections the wire holds back, and for how long.
//!
//! A held connection has its handshake-completing packet (the first non-SYN client→server
//! packet, a bare ACK or the ACK merged with data) and everything after it on that flow held
//! back, then released in order. Until then the server's kernel has no established child
//! socket for it, so a later connection can be accepted first.
//!
//! String forms (see [`Policy::from_str`](std::str::FromStr)): `none`, `hold=20`,
//! `hold=20,select=even`, `release-on-next`, `release-on-next=100,select=nth:0`. Durations
//! are milliseconds, or carry a `us`, `ms` or `s` suffix.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::flow::FlowInfo;
use super::select::{fmt_duration, parse_duration, PolicyParseError, Select};

/// The release-on-next fallback delay when the string gives none.
pub const DEFAULT_FALLBACK: Duration = Duration::from_millis(50);

/// The longest delay any policy may ask for; longer model delays are clamped to it.
pub const MAX_DELAY: Duration = Duration::from_secs(3600);

/// A per-connection delay callback, for plugging in the simulator's kernel model.
pub struct DelayModel(Box<dyn FnMut(&FlowInfo) -> Duration + Send>);

impl DelayModel {
    /// Wraps `f`; it is called once per connection, at its first SYN, in first-SYN order.
    pub fn new(f: impl FnMut(&FlowInfo) -> Duration + Send + 'static) -> Self {
        DelayModel(Box::new(f))
    }
}

impl fmt::Debug for DelayModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DelayModel(..)")
    }
}

/// What the wire does to TCP connections between its hosts.
#[derive(Debug, Default)]
pub enum Policy {
    /// Forward every packet at once.
    #[default]
    None,
    /// Hold the selected connections' completing packet and flow for `delay`.
    Hold {
        /// How long to hold.
        delay: Duration,
        /// Which connections (default: all).
        select: Select,
    },
    /// Hold the selected connections until the next connection on the same
    /// (sender, receiver) pair has completed its handshake, or `fallback` has passed.
    ReleaseOnNext {
        /// The longest hold.
        fallback: Duration,
        /// Which connections (default: even `pair_conn`, so odd ones release them).
        select: Select,
    },
    /// Hold each connection for whatever the callback says (zero: forward at once).
    Model(DelayModel),
}

/// The plan for one connection's completing packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HoldPlan {
    /// Forward at once.
    Pass,
    /// Hold for this long.
    For(Duration),
    /// Hold until a later connection on the pair completes, at most this long.
    UntilNext(Duration),
}

impl Policy {
    /// A `Model` policy from a per-connection delay callback.
    pub fn model(f: impl FnMut(&FlowInfo) -> Duration + Send + 'static) -> Self {
        Policy::Model(DelayModel::new(f))
    }

    /// Decides the plan of a newly numbered connection.
    pub(crate) fn plan(&mut self, flow: &FlowInfo) -> HoldPlan {
        match self {
            Policy::None => HoldPlan::Pass,
            Policy::Hold { delay, select } if select.matches(flow) => HoldPlan::For(*delay),
            Policy::ReleaseOnNext { fallback, select } if select.matches(flow) => HoldPlan::UntilNext(*fallback),
            Policy::Hold { .. } | Policy::ReleaseOnNext { .. } => HoldPlan::Pass,
            Policy::Model(DelayModel(f)) => match f(flow).min(MAX_DELAY) {
                d if d.is_zero() => HoldPlan::Pass,
                d => HoldPlan::For(d),
            },
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::None => f.write_str("none"),
            Policy::Hold { delay, select } => {
                write!(f, "hold={}", fmt_duration(*delay))?;
                if *select != Select::All {
                    write!(f, ",select={select}")?;
                }
                Ok(())
            }
            Policy::ReleaseOnNext { fallback, select } => {
                f.write_str("release-on-next")?;
                if *fallback != DEFAULT_FALLBACK {
                    write!(f, "={}", fmt_duration(*fallback))?;
                }
                if *select != Select::EVEN {
                    write!(f, ",select={select}")?;
                }
                Ok(())
            }
            Policy::Model(_) => f.write_str("model"),
        }
    }
}

impl FromStr for Policy {
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
            ("none", None) if selects.is_empty() => Ok(Policy::None),
            ("none", _) => Err(PolicyParseError::new(s, "`none` takes no options")),
            ("hold", Some(v)) => Ok(Policy::Hold {
                delay: parse_duration(v).map_err(|why| PolicyParseError::new(head, why))?,
                select: select(Select::All),
            }),
            ("hold", None) => Err(PolicyParseError::new(head, "needs a delay, e.g. `hold=20`")),
            ("release-on-next", v) => Ok(Policy::ReleaseOnNext {
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
    use std::net::{Ipv4Addr, SocketAddrV4};

    fn flow(conn: u32, pair_conn: u32) -> FlowInfo {
        FlowInfo {
            conn,
            pair_conn,
            src_host: 1,
            dst_host: 2,
            src: SocketAddrV4::new(Ipv4Addr::new(10, 213, 0, 1), 40000),
            dst: SocketAddrV4::new(Ipv4Addr::new(10, 213, 0, 2), 7000),
            isn: 0,
        }
    }

    #[test]
    fn parses_and_round_trips() {
        for s in [
            "none",
            "hold=20",
            "hold=20,select=even",
            "hold=500us,select=odd",
            "release-on-next",
            "release-on-next=100",
            "release-on-next,select=nth:0",
            "hold=1s,select=every:3:1",
            "hold=5,select=pair:1>2:4",
            "hold=5,select=conn:0+3+7",
        ] {
            let p: Policy = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            let back: Policy = p.to_string().parse().unwrap();
            assert_eq!(back.to_string(), p.to_string(), "{s}");
        }
        assert_eq!("hold=1s".parse::<Policy>().unwrap().to_string(), "hold=1000");
    }

    #[test]
    fn errors_name_the_bad_part() {
        for (s, part) in [
            ("", ""),
            ("holdd=20", "holdd=20"),
            ("hold", "hold"),
            ("hold=abc", "hold=abc"),
            ("hold=20,select=evn", "evn"),
            ("hold=20,frob=1", "frob=1"),
            ("hold=20,select=every:0", "every:0"),
            ("release-on-next=-3", "release-on-next=-3"),
            ("none,select=all", "none,select=all"),
            ("model", "model"),
        ] {
            let e = s.parse::<Policy>().expect_err(s);
            assert_eq!(e.part, part, "{s}: {e}");
            assert!(e.to_string().contains(&format!("`{part}`")), "{e}");
        }
    }

    #[test]
    fn plans_follow_selection() {
        let mut p: Policy = "release-on-next".parse().unwrap();
        assert_eq!(p.plan(&flow(0, 0)), HoldPlan::UntilNext(DEFAULT_FALLBACK));
        assert_eq!(p.plan(&flow(1, 1)), HoldPlan::Pass);
        let mut p: Policy = "hold=7".parse().unwrap();
        assert_eq!(p.plan(&flow(5, 5)), HoldPlan::For(Duration::from_millis(7)));
        let mut p = Policy::model(|f| Duration::from_millis(u64::from(f.conn)));
        assert_eq!(p.plan(&flow(0, 0)), HoldPlan::Pass);
        assert_eq!(p.plan(&flow(3, 0)), HoldPlan::For(Duration::from_millis(3)));
        let mut p = Policy::model(|_| Duration::MAX);
        assert_eq!(p.plan(&flow(0, 0)), HoldPlan::For(MAX_DELAY));
    }
}
