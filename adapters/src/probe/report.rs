//! The probe's report: one line for people, serde for `--json`.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use super::drain::DrainSummary;
use super::receiver::ListenReport;
use super::sender::ConnectReport;
use super::stats::AcceptOrderStats;
use crate::wire::{ReleaseReason, WireEvent, WireReport};

/// Orders longer than this are cut short in the one-line summary.
const ORDER_SHOWN: usize = 12;

/// What the wire did during a local run, in brief.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WireSummary {
    /// Connections the wire saw.
    pub connections: u32,
    /// Connections held.
    pub held: u32,
    /// Held connections released by a later connection's handshake.
    pub released_on_next: u32,
    /// Held connections released when their delay ran out.
    pub released_on_deadline: u32,
    /// Packets read from the hosts.
    pub packets: u64,
}

impl From<&WireReport> for WireSummary {
    fn from(r: &WireReport) -> Self {
        let released = |want_next: bool| {
            r.count(|e| {
                matches!(e, WireEvent::Released { reason, .. }
                    if matches!(reason, ReleaseReason::NextCompleted { .. }) == want_next)
            }) as u32
        };
        WireSummary {
            connections: r.connections,
            held: r.count(|e| matches!(e, WireEvent::Held { .. })) as u32,
            released_on_next: released(true),
            released_on_deadline: released(false),
            packets: r.counters.packets_in,
        }
    }
}

/// The result of one accept-order probe: both halves and, for a local run, the wire.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProbeReport {
    /// Connections asked for.
    pub k: u32,
    /// The wire policy (`none` on a real network).
    pub policy: String,
    /// Connection indices in accept order.
    pub order: Vec<u32>,
    /// That order compared with connect order.
    pub stats: AcceptOrderStats,
    /// Drain waits, when the sender drained.
    pub drain: Option<DrainSummary>,
    /// The sender's burst, in microseconds.
    pub sender_us: u64,
    /// The receiver's accepting, in microseconds.
    pub receiver_us: u64,
    /// The whole run including setup, in microseconds.
    pub total_us: u64,
    /// What the wire did, for a local run.
    pub wire: Option<WireSummary>,
}

impl ProbeReport {
    /// Puts the two halves together.
    pub fn from_halves(
        policy: String,
        heard: ListenReport,
        sent: ConnectReport,
        wire: Option<&WireReport>,
        total: Duration,
    ) -> Self {
        ProbeReport {
            k: sent.connections,
            policy,
            order: heard.order,
            stats: heard.stats,
            drain: sent.drain,
            sender_us: sent.elapsed_us,
            receiver_us: heard.elapsed_us,
            total_us: total.as_micros() as u64,
            wire: wire.map(WireSummary::from),
        }
    }
}

fn ms(us: u64) -> f64 {
    us as f64 / 1e3
}

/// `order [..], misplaced m/n, inversions i, pair swaps p, max displacement d`.
pub(crate) struct StatsLine<'a>(pub &'a AcceptOrderStats, pub &'a [u32]);

impl fmt::Display for StatsLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let StatsLine(s, order) = self;
        let shown: Vec<String> = order.iter().take(ORDER_SHOWN).map(u32::to_string).collect();
        let more = if order.len() > ORDER_SHOWN { ",…" } else { "" };
        write!(
            f,
            "order [{}{more}], misplaced {}/{}, inversions {}, pair swaps {}{}, max displacement {}",
            shown.join(","),
            s.misplaced,
            s.connections,
            s.inversions,
            s.pair_swaps,
            if s.only_pair_swaps { " (exact)" } else { "" },
            s.max_displacement
        )?;
        if s.duplicates > 0 {
            write!(f, ", {} duplicates", s.duplicates)?;
        }
        Ok(())
    }
}

/// `drain mean x ms, max y ms, t timeouts (bound b ms)`.
pub(crate) struct DrainLine<'a>(pub &'a DrainSummary);

impl fmt::Display for DrainLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        write!(
            f,
            "drain mean {:.2} ms, max {:.2} ms, {} timeouts (bound {} ms)",
            ms(d.mean_us),
            ms(d.max_us),
            d.timeouts,
            d.bound_ms
        )
    }
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let drain = self.drain.map_or("off".to_string(), |d| format!("{}ms", d.bound_ms));
        write!(
            f,
            "accept-order k={} policy={} drain={drain}: {}",
            self.k,
            self.policy,
            StatsLine(&self.stats, &self.order)
        )?;
        if let Some(d) = &self.drain {
            write!(f, "; {}", DrainLine(d))?;
        }
        write!(f, "; sender {:.1} ms, total {:.1} ms", ms(self.sender_us), ms(self.total_us))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_and_json() {
        let order = vec![1, 0];
        let r = ProbeReport {
            k: 2,
            policy: "release-on-next".into(),
            stats: AcceptOrderStats::from_order(&order),
            order,
            drain: Some(DrainSummary { bound_ms: 100, drains: 2, mean_us: 1500, max_us: 2500, polls: 9, timeouts: 1 }),
            sender_us: 3000,
            receiver_us: 2000,
            total_us: 90_000,
            wire: None,
        };
        let line = r.to_string();
        assert!(!line.contains('\n'));
        assert_eq!(
            line,
            "accept-order k=2 policy=release-on-next drain=100ms: order [1,0], misplaced 2/2, inversions 1, \
             pair swaps 1 (exact), max displacement 1; drain mean 1.50 ms, max 2.50 ms, 1 timeouts (bound 100 ms); \
             sender 3.0 ms, total 90.0 ms"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["order"], serde_json::json!([1, 0]));
        assert_eq!(json["stats"]["pair_swaps"], 1);
        assert_eq!(json["drain"]["timeouts"], 1);
        let long = ProbeReport { order: (0..20).collect(), ..ProbeReport::default() };
        assert!(long.to_string().contains("order [0,1,2,3,4,5,6,7,8,9,10,11,…]"));
    }
}
