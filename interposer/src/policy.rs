//! The interposer's policy string: the wire's grammar ([`PolicySpec`]) for holds, plus two
//! parts only a library inside the program can do:
//!
//! - `permute=SEED[:WINDOW[:WAIT]]`: hand connections over in a ChaCha-seeded permutation of
//!   each window of WINDOW (default 4) consecutive arrivals; a window still short after WAIT
//!   (default 50 ms) is permuted as it is.
//! - `peek=DUR`: how long to wait for a new connection's first bytes (NVSHMEM's header) before
//!   deciding without them (default 100 ms; only policies with `select=msg:` wait).
//!
//! Examples: `release-on-next=500ms,select=pair:1>2:2`, `hold=20ms,select=msg:0:1`, `permute=7:3`,
//! `hold=5ms,select=odd,permute=7`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use bootsim_core::accept_policy::{fmt_duration, parse_duration, PolicyParseError, PolicySpec};

/// The default permutation window.
pub const DEFAULT_WINDOW: u32 = 4;
/// How long a short window waits for more arrivals by default.
pub const DEFAULT_WINDOW_WAIT: Duration = Duration::from_millis(50);
/// How long a `select=msg:` policy waits for a connection's header by default.
pub const DEFAULT_PEEK: Duration = Duration::from_millis(100);

/// A seeded permutation of windows of arrivals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permute {
    /// The ChaCha seed.
    pub seed: u64,
    /// Arrivals per window (at least 1).
    pub window: u32,
    /// How long a short window waits.
    pub wait: Duration,
}

/// A parsed `BOOTSIM_ACCEPT_POLICY`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterposerPolicy {
    /// Holds, in the wire's language.
    pub hold: PolicySpec,
    /// The permutation, if any.
    pub permute: Option<Permute>,
    /// The bounded wait for a header.
    pub peek: Option<Duration>,
}

impl InterposerPolicy {
    /// Whether it changes anything (a run under `none` is no adversary at all).
    pub fn is_adversary(&self) -> bool {
        self.hold != PolicySpec::None || self.permute.is_some_and(|p| p.window > 1)
    }

    /// How long to wait for a new connection's first bytes before planning it.
    pub fn peek_wait(&self) -> Duration {
        match self.hold.select() {
            Some(s) if s.reads_bytes() => self.peek.unwrap_or(DEFAULT_PEEK),
            _ => Duration::ZERO,
        }
    }
}

impl FromStr for InterposerPolicy {
    type Err = PolicyParseError;

    /// `[WIRE-POLICY][,permute=SEED[:WINDOW[:WAIT]]][,peek=DUR]`; an empty string is `none`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut rest = Vec::new();
        let mut out = InterposerPolicy::default();
        for part in s.split(',').map(str::trim) {
            if let Some(v) = part.strip_prefix("permute=") {
                let mut it = v.split(':');
                let num = |x: Option<&str>| -> Result<Option<u64>, PolicyParseError> {
                    x.map(|x| {
                        x.parse::<u64>().map_err(|_| PolicyParseError::new(part, format!("`{x}` is not a number")))
                    })
                    .transpose()
                };
                let seed = num(it.next())?.ok_or_else(|| PolicyParseError::new(part, "needs a seed"))?;
                let window = num(it.next())?.unwrap_or(u64::from(DEFAULT_WINDOW));
                let wait = match it.next() {
                    Some(w) => parse_duration(w).map_err(|why| PolicyParseError::new(part, why))?,
                    None => DEFAULT_WINDOW_WAIT,
                };
                if it.next().is_some() || !(1..=1024).contains(&window) {
                    return Err(PolicyParseError::new(part, "expected permute=SEED[:WINDOW[:WAIT]], WINDOW 1..=1024"));
                }
                out.permute = Some(Permute { seed, window: window as u32, wait });
            } else if let Some(v) = part.strip_prefix("peek=") {
                out.peek = Some(parse_duration(v).map_err(|why| PolicyParseError::new(part, why))?);
            } else {
                rest.push(part);
            }
        }
        let rest = rest.join(",");
        if rest.is_empty() && (out.permute.is_some() || out.peek.is_some() || s.trim().is_empty()) {
            return Ok(out);
        }
        out.hold = rest.parse()?;
        Ok(out)
    }
}

impl fmt::Display for InterposerPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.hold != PolicySpec::None || (self.permute.is_none() && self.peek.is_none()) {
            parts.push(self.hold.to_string());
        }
        if let Some(p) = self.permute {
            parts.push(format!("permute={}:{}:{}", p.seed, p.window, fmt_duration(p.wait)));
        }
        if let Some(p) = self.peek {
            parts.push(format!("peek={}", fmt_duration(p)));
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_grammar_and_the_interposers_parts() {
        for s in [
            "none",
            "release-on-next=500ms,select=pair:1>2:2",
            "hold=20ms,select=msg:0:1,peek=30ms",
            "permute=7:3:20ms",
            "hold=5ms,select=odd,permute=9:4:50ms",
        ] {
            let p: InterposerPolicy = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(p.to_string().parse::<InterposerPolicy>().unwrap(), p, "{s}");
        }
        assert!(!"none".parse::<InterposerPolicy>().unwrap().is_adversary());
        assert!(!"permute=1:1".parse::<InterposerPolicy>().unwrap().is_adversary());
        assert!("permute=1".parse::<InterposerPolicy>().unwrap().is_adversary());
        assert_eq!("hold=20ms,select=msg:0:1".parse::<InterposerPolicy>().unwrap().peek_wait(), DEFAULT_PEEK);
        assert_eq!("hold=20ms".parse::<InterposerPolicy>().unwrap().peek_wait(), Duration::ZERO);
    }

    #[test]
    fn errors_name_the_bad_part() {
        for (s, part) in [
            ("permute=x", "permute=x"),
            ("permute=1:0", "permute=1:0"),
            ("permute=1:2:3:4", "permute=1:2:3:4"),
            ("peek=soon", "peek=soon"),
            ("hold=5ms,select=evn", "evn"),
            ("frob", "frob"),
        ] {
            let e = s.parse::<InterposerPolicy>().expect_err(s);
            assert_eq!(e.part, part, "{s}: {e}");
        }
    }
}
