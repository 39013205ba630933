//! Connection selectors for policies (`select=...`), durations, and the parse error.

use core::fmt;
use core::str::FromStr;
use core::time::Duration;

use super::{ConnKey, MAX_DELAY};

/// A policy string that did not parse; `part` is the offending piece of it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad policy part `{part}`: {reason}")]
pub struct PolicyParseError {
    /// The piece of the string that is wrong.
    pub part: String,
    /// What is wrong with it.
    pub reason: String,
}

impl PolicyParseError {
    /// `part` is wrong because of `reason`.
    pub fn new(part: &str, reason: impl Into<String>) -> Self {
        PolicyParseError { part: part.to_string(), reason: reason.into() }
    }
}

/// Which connections a policy applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Select {
    /// Every connection (`all`).
    All,
    /// Connections whose `pair_conn % k == phase` (`every:K[:P]`, `even`, `odd`).
    Every {
        /// The period, at least 1.
        k: u32,
        /// The phase, below `k`.
        phase: u32,
    },
    /// Connections with these `pair_conn` indices (`nth:0+3`).
    Nth(Vec<u32>),
    /// Connections with these global `conn` indices (`conn:0+3`).
    Conn(Vec<u32>),
    /// Connections whose first bytes are NVSHMEM's message header from rank `from` with tag
    /// `tag` (`msg:FROM:TAG`); only a world that reads the bytes (the accept interposer) sees them.
    Msg {
        /// The sending rank, as its header says.
        from: i32,
        /// The message tag.
        tag: i32,
    },
    /// Connections from host `src` to host `dst`, only the `nth` one if given (`pair:1>2[:N]`).
    Pair {
        /// Connecting host number.
        src: u8,
        /// Accepting host number.
        dst: u8,
        /// Index on that pair.
        nth: Option<u32>,
    },
    /// Any of several selectors (several `select=` parts).
    Any(Vec<Select>),
}

impl Select {
    /// Even `pair_conn` indices.
    pub const EVEN: Select = Select::Every { k: 2, phase: 0 };

    /// Whether the connection `flow` is selected.
    pub fn matches(&self, flow: &ConnKey) -> bool {
        match self {
            Select::All => true,
            Select::Every { k, phase } => *k > 0 && flow.pair_conn % k == *phase,
            Select::Nth(list) => list.contains(&flow.pair_conn),
            Select::Conn(list) => list.contains(&flow.conn),
            Select::Pair { src, dst, nth } => {
                flow.src_host == *src && flow.dst_host == *dst && nth.is_none_or(|n| n == flow.pair_conn)
            }
            Select::Msg { from, tag } => flow.msg == Some((*from, *tag)),
            Select::Any(list) => list.iter().any(|s| s.matches(flow)),
        }
    }

    /// Whether it (or a part of it) needs the connection's first bytes.
    pub fn reads_bytes(&self) -> bool {
        match self {
            Select::Msg { .. } => true,
            Select::Any(list) => list.iter().any(Select::reads_bytes),
            _ => false,
        }
    }
}

fn join(list: &[u32]) -> String {
    list.iter().map(u32::to_string).collect::<Vec<_>>().join("+")
}

impl fmt::Display for Select {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Select::All => f.write_str("all"),
            Select::Every { k: 2, phase: 0 } => f.write_str("even"),
            Select::Every { k: 2, phase: 1 } => f.write_str("odd"),
            Select::Every { k, phase: 0 } => write!(f, "every:{k}"),
            Select::Every { k, phase } => write!(f, "every:{k}:{phase}"),
            Select::Nth(list) => write!(f, "nth:{}", join(list)),
            Select::Conn(list) => write!(f, "conn:{}", join(list)),
            Select::Pair { src, dst, nth: None } => write!(f, "pair:{src}>{dst}"),
            Select::Pair { src, dst, nth: Some(n) } => write!(f, "pair:{src}>{dst}:{n}"),
            Select::Msg { from, tag } => write!(f, "msg:{from}:{tag}"),
            Select::Any(list) => {
                let parts: Vec<String> = list.iter().map(Select::to_string).collect();
                f.write_str(&parts.join(",select="))
            }
        }
    }
}

fn num<T: FromStr>(s: &str, whole: &str) -> Result<T, PolicyParseError> {
    s.trim().parse().map_err(|_| PolicyParseError::new(whole, format!("`{s}` is not a valid number")))
}

impl FromStr for Select {
    type Err = PolicyParseError;

    /// Parses `all`, `even`, `odd`, `every:K[:P]`, `nth:N[+N..]`, `conn:N[+N..]`, `pair:S>D[:N]`,
    /// `msg:FROM:TAG` (the tag decimal or `0x` hex).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, args) = s.split_once(':').unwrap_or((s, ""));
        let list = |args: &str| -> Result<Vec<u32>, PolicyParseError> { args.split('+').map(|n| num(n, s)).collect() };
        match (kind, args) {
            ("all", "") => Ok(Select::All),
            ("even", "") => Ok(Select::EVEN),
            ("odd", "") => Ok(Select::Every { k: 2, phase: 1 }),
            ("every", a) => {
                let (k, phase) = match a.split_once(':') {
                    Some((k, p)) => (num(k, s)?, num(p, s)?),
                    None => (num(a, s)?, 0),
                };
                if k == 0 || phase >= k {
                    return Err(PolicyParseError::new(s, "needs K >= 1 and phase P < K"));
                }
                Ok(Select::Every { k, phase })
            }
            ("nth", a) => Ok(Select::Nth(list(a)?)),
            ("conn", a) => Ok(Select::Conn(list(a)?)),
            ("pair", a) => {
                let (hosts, nth) = match a.split_once(':') {
                    Some((h, n)) => (h, Some(num(n, s)?)),
                    None => (a, None),
                };
                let (src, dst) =
                    hosts.split_once('>').ok_or_else(|| PolicyParseError::new(s, "expected `pair:SRC>DST[:N]`"))?;
                Ok(Select::Pair { src: num(src, s)?, dst: num(dst, s)?, nth })
            }
            ("msg", a) => {
                let (from, tag) =
                    a.split_once(':').ok_or_else(|| PolicyParseError::new(s, "expected `msg:FROM:TAG`"))?;
                let tag = match tag.strip_prefix("0x") {
                    Some(hex) => i32::from_str_radix(hex, 16)
                        .map_err(|_| PolicyParseError::new(s, format!("`{tag}` is not a valid number")))?,
                    None => num(tag, s)?,
                };
                Ok(Select::Msg { from: num(from, s)?, tag })
            }
            _ => Err(PolicyParseError::new(
                s,
                "unknown selector (expected all, even, odd, every:K[:P], nth:N[+N..], conn:N[+N..], pair:S>D[:N] or msg:FROM:TAG)",
            )),
        }
    }
}

/// Parses a policy's duration (`20ms`, `500us`, `1s`: [`crate::duration`]'s grammar); at most
/// [`MAX_DELAY`].
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::duration::parse(s, MAX_DELAY)
}

/// Formats a duration as [`parse_duration`] reads it.
pub fn fmt_duration(d: Duration) -> String {
    crate::duration::show(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert!(parse_duration("20").unwrap_err().contains("no unit"));
        assert_eq!(parse_duration("20ms"), Ok(Duration::from_millis(20)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("99999999999999999999").is_err());
        assert!(parse_duration("7200s").is_err());
        assert_eq!(fmt_duration(Duration::from_micros(1500)), "1500us");
        assert_eq!(fmt_duration(Duration::from_millis(3)), "3ms");
    }

    #[test]
    fn selectors() {
        assert_eq!("every:3:1".parse(), Ok(Select::Every { k: 3, phase: 1 }));
        assert_eq!("nth:0+2".parse(), Ok(Select::Nth(vec![0, 2])));
        assert_eq!("pair:1>2:4".parse(), Ok(Select::Pair { src: 1, dst: 2, nth: Some(4) }));
        assert_eq!("msg:0:0x1000001".parse(), Ok(Select::Msg { from: 0, tag: 0x100_0001 }));
        assert_eq!("msg:1:2".parse::<Select>().unwrap().to_string(), "msg:1:2");
        for bad in ["every:2:2", "nth:", "nth:1+x", "pair:1-2", "pair:1>300", "evens", "all:1", "msg:1", "msg:1:0xz"] {
            let e = bad.parse::<Select>().expect_err(bad);
            assert_eq!(e.part, bad);
        }
    }
}
