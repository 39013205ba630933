//! Explicit schedules in case strings: `accept=` (which connection each rank's peer listener
//! accepts next, and, as `root:`, which check-in the root's listener takes next) and `drain_fail=`
//! (which drains give up), the keys `bootsim explore` prints a counterexample with and the fast
//! engine honours.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::world::Choice;

/// A connection as schedules name it: the `k`-th connection (from 0, the ring's included) rank
/// `from` opened to rank `to`'s peer listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnName {
    /// The dialing rank.
    pub from: u32,
    /// The rank whose peer listener it dials.
    pub to: u32,
    /// Its index among `from`'s connections to `to`.
    pub k: u32,
}

impl fmt::Display for ConnName {
    /// `FROM>TO.K`, as `drain_fail=` spells it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}>{}.{}", self.from, self.to, self.k)
    }
}

/// A connection to the root's listener as schedules name it: the `k`-th connection (from 0)
/// rank `from` opened to it (its check-in; a retried connect keeps its name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CheckInName {
    /// The checking-in rank.
    pub from: u32,
    /// Its index among `from`'s connections to the root.
    pub k: u32,
}

impl fmt::Display for CheckInName {
    /// `FROM.K`, as `accept=root:` spells it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.from, self.k)
    }
}

/// The explicit parts of a run's schedule; empty means the kernel model decides everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    /// Per receiving rank, the connections its peer listener's accept() takes, in order; past the
    /// end of a rank's list, accepts take the kernel's queue order.
    pub accept: BTreeMap<u32, Vec<ConnName>>,
    /// The check-ins the root listener's accept() takes, in order (`accept=root:...`); past the
    /// end, the kernel's queue order.
    pub check_in: Vec<CheckInName>,
    /// Drains that give up at their deadline whatever the kernel acknowledged (fail-open).
    pub drain_fail: BTreeSet<ConnName>,
}

impl Schedule {
    /// The schedule an explorer's path of choices stands for: each listener's accepts in order,
    /// and the drains that gave up.
    pub fn of_path(path: &[Choice]) -> Schedule {
        let mut schedule = Schedule::default();
        for choice in path {
            match *choice {
                Choice::Accept { at, conn } => schedule.accept.entry(at).or_default().push(conn),
                Choice::CheckIn { conn } => schedule.check_in.push(conn),
                Choice::Drain { conn, gives_up: true } => {
                    schedule.drain_fail.insert(conn);
                }
                Choice::Drain { gives_up: false, .. } => {}
            }
        }
        schedule
    }

    /// True when nothing is explicit.
    pub fn is_empty(&self) -> bool {
        self.accept.is_empty() && self.check_in.is_empty() && self.drain_fail.is_empty()
    }

    /// The connection rank `to`'s `nth` accept (from 0) on its peer listener must take, if explicit.
    pub fn accept_at(&self, to: u32, nth: usize) -> Option<ConnName> {
        self.accept.get(&to)?.get(nth).copied()
    }

    /// The check-in the root listener's `nth` accept (from 0) must take, if explicit.
    pub fn check_in_at(&self, nth: usize) -> Option<CheckInName> {
        self.check_in.get(nth).copied()
    }

    /// Parses `accept=` (`TO:FROM.K,FROM.K/TO:...`, with `root` as TO for the root's listener).
    pub fn parse_accept(&mut self, value: &str) -> Result<(), String> {
        let example = "e.g. accept=1:0.0,0.2,0.1/0:1.0,1.1 (rank 1 accepts rank 0's connections 0, 2, 1) \
                       or accept=root:2.0,0.0,1.0 (the root takes rank 2's check-in first)";
        for group in value.split('/') {
            let (to, list) =
                group.split_once(':').ok_or_else(|| format!("`{group}` is not TO:FROM.K,...; {example}"))?;
            if to == "root" {
                if !self.check_in.is_empty() {
                    return Err(format!("the root given twice; {example}"));
                }
                for item in list.split(',') {
                    let (from, k) = item.split_once('.').ok_or_else(|| format!("`{item}` is not FROM.K; {example}"))?;
                    let name =
                        CheckInName { from: number(from, "a sending rank")?, k: number(k, "a connection index")? };
                    if self.check_in.contains(&name) {
                        return Err(format!("the root accepts {name} twice"));
                    }
                    self.check_in.push(name);
                }
                continue;
            }
            let to = number(to, "a receiving rank (or root)")?;
            if self.accept.contains_key(&to) {
                return Err(format!("rank {to} given twice; {example}"));
            }
            let mut order = Vec::new();
            for item in list.split(',') {
                let (from, k) = item.split_once('.').ok_or_else(|| format!("`{item}` is not FROM.K; {example}"))?;
                let name = ConnName { from: number(from, "a sending rank")?, to, k: number(k, "a connection index")? };
                if order.contains(&name) {
                    return Err(format!("rank {to} accepts {}.{} twice", name.from, name.k));
                }
                order.push(name);
            }
            self.accept.insert(to, order);
        }
        Ok(())
    }

    /// Parses `drain_fail=` (`FROM>TO.K,...`).
    pub fn parse_drain_fail(&mut self, value: &str) -> Result<(), String> {
        for item in value.split(',') {
            let bad = || format!("`{item}` is not FROM>TO.K, e.g. drain_fail=0>1.2 (rank 0's connection 2 to rank 1)");
            let (from, rest) = item.split_once('>').ok_or_else(bad)?;
            let (to, k) = rest.split_once('.').ok_or_else(bad)?;
            let name = ConnName {
                from: number(from, "a sending rank")?,
                to: number(to, "a receiving rank")?,
                k: number(k, "a connection index")?,
            };
            if !self.drain_fail.insert(name) {
                return Err(format!("drain_fail names {name} twice"));
            }
        }
        Ok(())
    }

    /// Checks every named rank against the world size (a rank never dials itself); each error
    /// names the connection in its own key's syntax (`accept=TO:FROM.K`, `drain_fail=FROM>TO.K`).
    pub fn validate(&self, ranks: u32) -> Result<(), String> {
        let accepts = self.accept.values().flatten().map(|n| (n, format!("accept={}:{}.{}", n.to, n.from, n.k)));
        let drains = self.drain_fail.iter().map(|n| (n, format!("drain_fail={n}")));
        if let Some(n) = self.check_in.iter().find(|n| n.from >= ranks) {
            return Err(format!("accept=root:{n} names a rank outside ranks={ranks}"));
        }
        for (n, shown) in accepts.chain(drains) {
            if n.from >= ranks || n.to >= ranks {
                return Err(format!("{shown} names a rank outside ranks={ranks}"));
            }
            if n.from == n.to {
                return Err(format!("{shown}: a rank never connects to itself"));
            }
        }
        Ok(())
    }

    /// The `accept=` value, if any (the root's group first).
    pub fn accept_value(&self) -> Option<String> {
        let root = (!self.check_in.is_empty()).then(|| {
            let list: Vec<String> = self.check_in.iter().map(CheckInName::to_string).collect();
            format!("root:{}", list.join(","))
        });
        let ranks = self.accept.iter().map(|(to, order)| {
            let list: Vec<String> = order.iter().map(|n| format!("{}.{}", n.from, n.k)).collect();
            format!("{to}:{}", list.join(","))
        });
        let groups: Vec<String> = root.into_iter().chain(ranks).collect();
        (!groups.is_empty()).then(|| groups.join("/"))
    }

    /// The `drain_fail=` value, if any.
    pub fn drain_fail_value(&self) -> Option<String> {
        (!self.drain_fail.is_empty())
            .then(|| self.drain_fail.iter().map(ConnName::to_string).collect::<Vec<_>>().join(","))
    }
}

fn number(s: &str, what: &str) -> Result<u32, String> {
    s.parse::<u32>().map_err(|_| format!("`{s}`: expected {what} (a number)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_malformed_input() {
        let mut s = Schedule::default();
        s.parse_accept("1:0.0,0.2,0.1/0:1.0").unwrap();
        s.parse_drain_fail("0>1.2,1>0.0").unwrap();
        assert_eq!(s.accept_value().unwrap(), "0:1.0/1:0.0,0.2,0.1");
        assert_eq!(s.drain_fail_value().unwrap(), "0>1.2,1>0.0");
        assert_eq!(s.accept_at(1, 1), Some(ConnName { from: 0, to: 1, k: 2 }));
        assert_eq!(s.accept_at(1, 3), None);
        assert!(s.validate(2).is_ok());
        assert!(s.validate(1).unwrap_err().contains("accept=0:1.0 names a rank outside ranks=1"));
        let mut far = Schedule::default();
        far.parse_accept("0:9.9").unwrap();
        assert_eq!(far.validate(2).unwrap_err(), "accept=0:9.9 names a rank outside ranks=2");
        let mut far = Schedule::default();
        far.parse_drain_fail("9>0.9").unwrap();
        assert_eq!(far.validate(2).unwrap_err(), "drain_fail=9>0.9 names a rank outside ranks=2");
        let e = |v: &str| Schedule::default().parse_accept(v).unwrap_err();
        assert!(e("1").contains("not TO:FROM.K"));
        assert!(e("1:0").contains("not FROM.K"));
        assert!(e("x:0.1").contains("expected a receiving rank"));
        assert!(e("1:0.1,0.1").contains("twice"));
        assert!(e("1:0.1/1:0.2").contains("given twice"));
        assert!(e("root:0.0/root:1.0").contains("root given twice"));
        assert!(e("root:0.0,0.0").contains("twice"));
        assert!(e("rot:0.0").contains("a receiving rank (or root)"));
        let mut root = Schedule::default();
        root.parse_accept("1:0.0/root:2.0,0.0,1.0").unwrap();
        assert_eq!(root.accept_value().unwrap(), "root:2.0,0.0,1.0/1:0.0");
        assert_eq!(root.check_in_at(0), Some(CheckInName { from: 2, k: 0 }));
        assert_eq!(root.check_in_at(3), None);
        assert!(root.validate(3).is_ok());
        assert_eq!(root.validate(2).unwrap_err(), "accept=root:2.0 names a rank outside ranks=2");
        assert!(Schedule::default().parse_drain_fail("0.1").unwrap_err().contains("FROM>TO.K"));
        let mut selfie = Schedule::default();
        selfie.parse_accept("1:1.0").unwrap();
        assert_eq!(selfie.validate(2).unwrap_err(), "accept=1:1.0: a rank never connects to itself");
    }
}
