//! The RX-queue stalls a traced run actually suffered, as an explicit `stalls=` list.

use crate::kernel::{ScriptedStall, StallAt};

/// Every `RxStall` of a trace as a forced stall of that packet (`HOST:QUEUE:pN:DUR`), in the
/// order they happened. Replaying them with random stalls off delays exactly the packets the
/// random ones delayed; anchored to packets rather than times, each keeps hitting its packet
/// when others are removed.
pub fn stalls_from_trace(lines: &[String]) -> Vec<ScriptedStall> {
    lines.iter().filter_map(|l| parse_rx_stall(l)).collect()
}

/// Reads `... kernel RxStall { host: HostId(H), queue: Q, ..., from: Instant(A), until: Instant(B), nth: N }`.
fn parse_rx_stall(line: &str) -> Option<ScriptedStall> {
    let body = line.split_once(" kernel RxStall { ")?.1;
    let host = field(body, "host: HostId(", ")")?;
    let queue = field(body, "queue: ", ",")?;
    let from = field(body, "from: Instant(", ")")?;
    let until = field(body, "until: Instant(", ")")?;
    let nth = field(body, "nth: ", " ")?;
    let (host, queue) = (u32::try_from(host).ok()?, u16::try_from(queue).ok()?);
    (until > from).then_some(ScriptedStall { host, queue, at: StallAt::Packet(nth), dur: until - from })
}

fn field(body: &str, open: &str, close: &str) -> Option<u64> {
    let rest = &body[body.find(open)? + open.len()..];
    rest[..rest.find(close)?].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_stalls_of_a_trace() {
        let l = |h: u32, q: u16, a: u64, b: u64, n: u64| {
            format!(
                "0.000010s kernel RxStall {{ host: HostId({h}), queue: {q}, flow: Flow {{ client: HostId(0), \
                 client_port: 1, server: HostId(0), server_port: 5000 }}, dir: ToServer, seg: Syn, \
                 from: Instant({a}), until: Instant({b}), nth: {n} }}"
            )
        };
        let lines =
            vec![l(0, 4, 10_153, 58_724, 0), "0.000073s rank0 connected c1 (c0)".to_string(), l(1, 7, 600, 900, 12)];
        let got = stalls_from_trace(&lines);
        let p = |host, queue, n, dur| ScriptedStall { host, queue, at: StallAt::Packet(n), dur };
        assert_eq!(got, vec![p(0, 4, 0, 48_571), p(1, 7, 12, 300)]);
    }
}
