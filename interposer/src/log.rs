//! The decision log: one text line per decision, appended by every process under the
//! interposer to the file `BOOTSIM_ACCEPT_LOG` names, and read back by the parent.
//!
//! `bootsim-accept pid=P at_us=T conn=C EVENT [key=value...]`, e.g.
//! `bootsim-accept pid=41 at_us=1520 conn=2 held until_next=1 max_us=500000`. Every connection
//! ends `delivered` (the program accepted it) or `unaccepted` (the program exited first; it was
//! closed then, as the kernel closes its accept queue).

use std::collections::BTreeMap;
use std::fmt;

/// Why a held connection was let go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// Its delay ran out (or the release-on-next fallback).
    Deadline,
    /// A later connection on the same pair became acceptable (`by` is its number).
    Next {
        /// The later connection.
        by: u32,
    },
}

/// What happened to a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Taken from the kernel's accept queue into the interposer's.
    Arrived {
        /// The listener's address, as text.
        local: String,
        /// The peer's address, as text.
        peer: String,
        /// Connecting host (last octet of the peer's IPv4 address; 0 otherwise).
        src_host: u8,
        /// Accepting host.
        dst_host: u8,
        /// Index on that pair.
        pair_conn: u32,
        /// NVSHMEM's header (sender, tag) when the first bytes were one.
        msg: Option<(i32, i32)>,
    },
    /// Acceptable at once.
    Passed,
    /// Held.
    Held {
        /// At most this long, in microseconds.
        max_us: u64,
        /// Released early by the next connection on its pair.
        until_next: bool,
    },
    /// Let go.
    Released {
        /// Why.
        reason: Release,
        /// How long it was held, in microseconds.
        held_us: u64,
    },
    /// Placed in a permuted window.
    Permuted {
        /// The window's number.
        window: u32,
        /// Its place in the window's hand-over order.
        position: u32,
    },
    /// Returned by the program's accept().
    Delivered,
    /// Still in the interposer's queue when the program exited; closed.
    Unaccepted,
}

/// One line of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Microseconds since the library started in that process.
    pub at_us: u64,
    /// The connection's number in that process, in arrival order.
    pub conn: u32,
    /// What happened.
    pub event: Event,
}

/// The marker every log line starts with.
pub const MARKER: &str = "bootsim-accept";

impl Decision {
    /// The line (without newline) for process `pid`.
    pub fn line(&self, pid: u32) -> String {
        format!("{MARKER} pid={pid} at_us={} conn={} {}", self.at_us, self.conn, self.event)
    }

    /// Parses a line back: the process and the decision.
    pub fn parse(line: &str) -> Option<(u32, Decision)> {
        let mut words = line.split_whitespace();
        if words.next()? != MARKER {
            return None;
        }
        let mut kv = BTreeMap::new();
        let mut name = None;
        for w in words {
            match w.split_once('=') {
                Some((k, v)) => {
                    kv.insert(k, v);
                }
                None => name = Some(w),
            }
        }
        let get = |k: &str| kv.get(k).copied();
        let num = |k: &str| get(k)?.parse::<u64>().ok();
        let event = match name? {
            "arrived" => Event::Arrived {
                local: get("local")?.to_string(),
                peer: get("peer")?.to_string(),
                src_host: num("src")? as u8,
                dst_host: num("dst")? as u8,
                pair_conn: num("pair_conn")? as u32,
                msg: get("msg").and_then(|m| {
                    let (f, t) = m.split_once(':')?;
                    Some((f.parse().ok()?, t.parse().ok()?))
                }),
            },
            "passed" => Event::Passed,
            "held" => Event::Held { max_us: num("max_us")?, until_next: num("until_next")? == 1 },
            "released" => Event::Released {
                reason: match get("reason")? {
                    "deadline" => Release::Deadline,
                    "next" => Release::Next { by: num("by")? as u32 },
                    _ => return None,
                },
                held_us: num("held_us")?,
            },
            "permuted" => Event::Permuted { window: num("window")? as u32, position: num("position")? as u32 },
            "delivered" => Event::Delivered,
            "unaccepted" => Event::Unaccepted,
            _ => return None,
        };
        Some((num("pid")? as u32, Decision { at_us: num("at_us")?, conn: num("conn")? as u32, event }))
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Arrived { local, peer, src_host, dst_host, pair_conn, msg } => {
                write!(f, "arrived local={local} peer={peer} src={src_host} dst={dst_host} pair_conn={pair_conn}")?;
                if let Some((from, tag)) = msg {
                    write!(f, " msg={from}:{tag}")?;
                }
                Ok(())
            }
            Event::Passed => f.write_str("passed"),
            Event::Held { max_us, until_next } => {
                write!(f, "held max_us={max_us} until_next={}", u8::from(*until_next))
            }
            Event::Released { reason: Release::Deadline, held_us } => {
                write!(f, "released reason=deadline held_us={held_us}")
            }
            Event::Released { reason: Release::Next { by }, held_us } => {
                write!(f, "released reason=next by={by} held_us={held_us}")
            }
            Event::Permuted { window, position } => write!(f, "permuted window={window} position={position}"),
            Event::Delivered => f.write_str("delivered"),
            Event::Unaccepted => f.write_str("unaccepted"),
        }
    }
}

/// What a log says, counted: every connection should end delivered or unaccepted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogSummary {
    /// Processes that wrote to it.
    pub processes: usize,
    /// Connections that arrived.
    pub arrived: usize,
    /// Of those, held at some point.
    pub held: usize,
    /// Delivered to the program.
    pub delivered: usize,
    /// Closed at exit without the program accepting them.
    pub unaccepted: usize,
    /// Connections with no end (the process was killed, or the log is cut): (pid, conn).
    pub unaccounted: Vec<(u32, u32)>,
    /// Lines that did not parse.
    pub bad_lines: usize,
    /// Every decision, by process, in log order.
    pub decisions: BTreeMap<u32, Vec<Decision>>,
}

impl LogSummary {
    /// Reads a whole log.
    pub fn of(text: &str) -> LogSummary {
        let mut s = LogSummary::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match Decision::parse(line) {
                Some((pid, d)) => s.decisions.entry(pid).or_default().push(d),
                None => s.bad_lines += 1,
            }
        }
        s.processes = s.decisions.len();
        for (pid, ds) in &s.decisions {
            let mut ends: BTreeMap<u32, bool> = BTreeMap::new();
            for d in ds {
                match d.event {
                    Event::Arrived { .. } => {
                        s.arrived += 1;
                        ends.insert(d.conn, false);
                    }
                    Event::Held { .. } => s.held += 1,
                    Event::Delivered => {
                        s.delivered += 1;
                        ends.insert(d.conn, true);
                    }
                    Event::Unaccepted => {
                        s.unaccepted += 1;
                        ends.insert(d.conn, true);
                    }
                    _ => {}
                }
            }
            s.unaccounted.extend(ends.into_iter().filter(|(_, ended)| !ended).map(|(c, _)| (*pid, c)));
        }
        s
    }

    /// Whether every connection that arrived has an end.
    pub fn complete(&self) -> bool {
        self.unaccounted.is_empty() && self.bad_lines == 0
    }

    /// One line per held connection, for people: where it went, what held it, what let it go.
    pub fn holds(&self) -> Vec<String> {
        let mut out = Vec::new();
        for ds in self.decisions.values() {
            let mut arrived = BTreeMap::new();
            let mut line: BTreeMap<u32, String> = BTreeMap::new();
            for d in ds {
                match &d.event {
                    Event::Arrived { src_host, dst_host, pair_conn, msg, .. } => {
                        let m = msg.map_or(String::new(), |(f, t)| format!(", message from rank {f} tag {t}"));
                        arrived.insert(d.conn, format!("host {src_host} > host {dst_host} #{pair_conn}{m}"));
                    }
                    Event::Held { max_us, until_next } => {
                        let what = arrived.get(&d.conn).cloned().unwrap_or_default();
                        let until = if *until_next { "until the next on its pair, " } else { "" };
                        line.insert(
                            d.conn,
                            format!("connection {} ({what}) held {until}at most {} ms", d.conn, max_us / 1000),
                        );
                    }
                    Event::Released { reason, held_us } => {
                        if let Some(l) = line.get_mut(&d.conn) {
                            match reason {
                                Release::Next { by } => {
                                    l.push_str(&format!(", released by connection {by} after {held_us} µs"))
                                }
                                Release::Deadline => {
                                    l.push_str(&format!(", released at its deadline after {held_us} µs"))
                                }
                            }
                        }
                    }
                    Event::Delivered | Event::Unaccepted => {
                        if let Some(l) = line.get_mut(&d.conn) {
                            l.push_str(if d.event == Event::Delivered { ", accepted" } else { ", never accepted" });
                        }
                    }
                    _ => {}
                }
            }
            out.extend(line.into_values());
        }
        out
    }

    /// One line for people.
    pub fn headline(&self) -> String {
        let mut s = format!(
            "{} connections in {} processes: {} held, {} delivered, {} unaccepted at exit",
            self.arrived, self.processes, self.held, self.delivered, self.unaccepted
        );
        if !self.unaccounted.is_empty() {
            s += &format!(", {} without an end (a process killed?)", self.unaccounted.len());
        }
        if self.bad_lines > 0 {
            s += &format!(", {} unreadable lines", self.bad_lines);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_are_counted() {
        let events = [
            Event::Arrived {
                local: "127.0.0.1:7000".into(),
                peer: "127.0.0.2:5000".into(),
                src_host: 2,
                dst_host: 1,
                pair_conn: 3,
                msg: Some((1, 16777217)),
            },
            Event::Held { max_us: 500_000, until_next: true },
            Event::Released { reason: Release::Next { by: 4 }, held_us: 12 },
            Event::Released { reason: Release::Deadline, held_us: 500_000 },
            Event::Permuted { window: 2, position: 1 },
            Event::Passed,
            Event::Delivered,
            Event::Unaccepted,
        ];
        for e in events {
            let d = Decision { at_us: 5, conn: 3, event: e };
            assert_eq!(Decision::parse(&d.line(77)), Some((77, d.clone())), "{}", d.line(77));
        }
        let a = |c| Decision { at_us: 0, conn: c, event: events_arrived() }.line(1);
        let log =
            [a(0), a(1), Decision { at_us: 1, conn: 0, event: Event::Delivered }.line(1), "junk".into()].join("\n");
        let s = LogSummary::of(&log);
        assert_eq!((s.arrived, s.delivered, s.unaccounted.clone(), s.bad_lines), (2, 1, vec![(1, 1)], 1));
        assert!(!s.complete());
        assert!(s.headline().contains("1 without an end"), "{}", s.headline());
        let held = [
            a(0),
            Decision { at_us: 0, conn: 0, event: Event::Held { max_us: 500_000, until_next: true } }.line(1),
            Decision { at_us: 9, conn: 0, event: Event::Released { reason: Release::Next { by: 1 }, held_us: 9 } }
                .line(1),
            Decision { at_us: 9, conn: 0, event: Event::Delivered }.line(1),
        ]
        .join("\n");
        assert_eq!(
            LogSummary::of(&held).holds(),
            vec![
                "connection 0 (host 0 > host 0 #0) held until the next on its pair, at most 500 ms, released by \
                 connection 1 after 9 µs, accepted"
            ]
        );
    }

    fn events_arrived() -> Event {
        Event::Arrived { local: "l".into(), peer: "p".into(), src_host: 0, dst_host: 0, pair_conn: 0, msg: None }
    }
}
