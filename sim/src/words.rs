//! The one vocabulary every person-facing output shares (trace, explain, timeline): times in
//! milliseconds, segments, operations as the workload numbers them (`alltoall #1 step 1`), and
//! connections by the kernel's global number (`connection 7`), with a node's own id for it shown
//! apart (`local c5`). Trace lines are written here from our own words, never from `Debug`, so
//! the trace digest depends only on this file's wording.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use bootsim_core::{ConnId, Instant, MsgOrigin, OpName};
use bootsim_nvshmem::{Completion, Event};

use crate::kernel::{Dir, EventKind, Flow, HostId, Overflow, Seg, SockId};

/// The simulated address of host `h`: 10.0.0.1 for host 0, and so on.
pub fn host_addr(h: u32, port: u16) -> SocketAddr {
    let x = h + 1;
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, (x >> 16) as u8, (x >> 8) as u8, x as u8), port))
}

/// `alltoall #1 step 1`, `barrier #2 round 1`: a message's operation and step.
pub fn step_name(origin: &MsgOrigin) -> String {
    origin.to_string()
}

/// Milliseconds with three decimals, truncated to the microsecond like the trace's times.
pub fn ms(t: Instant) -> String {
    ms_d(Duration::from_nanos(t.as_nanos()))
}

/// A duration as milliseconds with three decimals (truncated to the microsecond).
pub fn ms_d(d: Duration) -> String {
    let us = d.as_micros();
    format!("{}.{:03} ms", us / 1000, us % 1000)
}

/// A segment in words.
pub fn seg_name(seg: Seg, dir: Dir) -> Cow<'static, str> {
    match seg {
        Seg::Syn => "SYN".into(),
        Seg::SynAck => "SYN-ACK".into(),
        Seg::Ack => "handshake-completing ACK".into(),
        Seg::Data { idx: 0 } if dir == Dir::ToServer => "first data segment (it completes the handshake)".into(),
        Seg::Data { idx } => format!("data segment {idx}").into(),
        Seg::Fin { .. } => "FIN".into(),
        Seg::DataAck { upto } => format!("ACK of {upto} segment(s)").into(),
        Seg::Rst => "RST".into(),
    }
}

/// An unexpected list in words: `rank 1 tag 0x1, rank 2 tag 0x3`, head first.
pub fn peer_tags(entries: &[(i32, i32)]) -> String {
    entries.iter().map(|(p, t)| format!("rank {p} tag {t:#x}")).collect::<Vec<_>>().join(", ")
}

/// A flow as addresses: `10.0.0.2:36848 -> 10.0.0.1:5000`.
pub fn flow_name(flow: &Flow) -> String {
    format!("{} -> {}", host_addr(flow.client.0, flow.client_port), host_addr(flow.server.0, flow.server_port))
}

/// A node's connection: the kernel's number first (`connection 7`), the node's own id after
/// (`local c5`), so a reader matches it with explain and the timeline.
#[derive(Clone, Copy, Debug)]
pub struct ConnRef {
    /// The node's own id.
    pub local: ConnId,
    /// The kernel connection, once there is one.
    pub kconn: Option<u64>,
}

impl fmt::Display for ConnRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kconn {
            Some(k) => write!(f, "connection {k} (local {})", self.local),
            None => write!(f, "local {} (no connection)", self.local),
        }
    }
}

/// A kernel socket as `connection N`, naming its end.
fn sock_name(sock: SockId) -> String {
    let end = if sock.is_client() { "connecting" } else { "accepting" };
    format!("connection {} ({end} end)", sock.conn())
}

/// `connection 7` for a known kernel connection, else the flow's addresses.
fn conn_or_flow(conn: Option<u64>, flow: &Flow) -> String {
    match conn {
        Some(k) => format!("connection {k}"),
        None => format!("the connection {}", flow_name(flow)),
    }
}

/// Which kernel connection a kernel event is about: sockets name theirs, packet events name a
/// 4-tuple, filed under the latest connection that used it (`flows` remembers SYNs sent).
pub fn kernel_conn(kind: &EventKind, flows: &mut BTreeMap<Flow, u64>) -> Option<u64> {
    match *kind {
        EventKind::SynSent { sock, flow, .. } => {
            flows.insert(flow, sock.conn());
            Some(sock.conn())
        }
        EventKind::ChildEnqueued { sock, .. }
        | EventKind::Accepted { sock, .. }
        | EventKind::Connected { sock }
        | EventKind::Refused { sock }
        | EventKind::ConnectTimedOut { sock }
        | EventKind::Readable { sock, .. }
        | EventKind::Eof { sock }
        | EventKind::Reset { sock }
        | EventKind::AllAcked { sock }
        | EventKind::Aborted { sock } => Some(sock.conn()),
        EventKind::RxStall { flow, .. }
        | EventKind::PacketLost { flow, .. }
        | EventKind::RingDrop { flow, .. }
        | EventKind::CpuBacklogDrop { flow, .. }
        | EventKind::Retransmit { flow, .. }
        | EventKind::BacklogDrop { flow, .. }
        | EventKind::SynAckExpired { flow } => flows.get(&flow).copied(),
        EventKind::Acceptable { .. } => None,
    }
}

fn host(h: HostId) -> String {
    format!("host {}", h.0)
}

/// A kernel event as a trace line; `conn` is its connection from [`kernel_conn`].
pub fn kernel_line(kind: &EventKind, conn: Option<u64>) -> String {
    match *kind {
        EventKind::Connected { sock } => format!("{} established", sock_name(sock)),
        EventKind::Refused { sock } => format!("{} refused (no listener)", sock_name(sock)),
        EventKind::ConnectTimedOut { sock } => format!("{} timed out in connect (no SYN-ACK)", sock_name(sock)),
        EventKind::Acceptable { listener } => format!("listener {} has a connection to accept", listener.0),
        EventKind::Readable { sock, unread } => format!("{} has {unread} bytes to read", sock_name(sock)),
        EventKind::Eof { sock } => format!("{} reached end of stream", sock_name(sock)),
        EventKind::Reset { sock } => format!("{} was reset by its peer", sock_name(sock)),
        EventKind::AllAcked { sock } => format!("{}: every byte written is acknowledged", sock_name(sock)),
        EventKind::Aborted { sock } => {
            format!("{} aborted: data unacknowledged through every retransmission", sock_name(sock))
        }
        EventKind::SynSent { sock, flow, server_queue, client_queue } => format!(
            "connection {} sent its SYN, {} (RX queue {server_queue} on {}, RX queue {client_queue} on {})",
            sock.conn(),
            flow_name(&flow),
            host(flow.server),
            host(flow.client)
        ),
        EventKind::ChildEnqueued { listener, sock, queue, depth, .. } => format!(
            "connection {} entered listener {}'s accept queue (depth {depth}) through RX queue {queue}",
            sock.conn(),
            listener.0
        ),
        EventKind::Accepted { listener, sock, .. } => {
            format!("connection {} left listener {}'s accept queue (accepted)", sock.conn(), listener.0)
        }
        EventKind::RxStall { host: h, queue, flow, dir, seg, from, until, nth } => format!(
            "{}'s {} waited {} ({}–{}) in RX queue {queue} on {}, whose softirq CPU was busy (packet {nth} of that queue)",
            conn_or_flow(conn, &flow),
            seg_name(seg, dir),
            ms_d(until - from),
            ms(from),
            ms(until),
            host(h)
        ),
        EventKind::PacketLost { host: h, queue, flow, dir, seg } => format!(
            "{}'s {} was lost on the way to {} (RX queue {queue})",
            conn_or_flow(conn, &flow),
            seg_name(seg, dir),
            host(h)
        ),
        EventKind::RingDrop { host: h, queue, flow, dir, seg } => format!(
            "{}'s {} was dropped at {}: RX queue {queue}'s ring was full",
            conn_or_flow(conn, &flow),
            seg_name(seg, dir),
            host(h)
        ),
        EventKind::CpuBacklogDrop { host: h, cpu, flow, dir, seg } => format!(
            "{}'s {} was dropped at {}: RPS steered it to CPU {cpu}, whose backlog was full",
            conn_or_flow(conn, &flow),
            seg_name(seg, dir),
            host(h)
        ),
        EventKind::Retransmit { flow, dir, seg, attempt } => format!(
            "{}'s {} was retransmitted (attempt {attempt})",
            conn_or_flow(conn, &flow),
            seg_name(seg, dir)
        ),
        EventKind::BacklogDrop { listener, flow, queue, what } => {
            let what = match what {
                Overflow::Syn => "SYN",
                Overflow::Ack => "handshake-completing segment",
            };
            format!(
                "listener {}'s accept queue on {} was full and dropped {}'s {what} (backlog, RX queue {queue})",
                listener.0,
                host(flow.server),
                conn_or_flow(conn, &flow)
            )
        }
        EventKind::SynAckExpired { flow } => {
            format!("{} ran out of SYN-ACK retransmissions and was forgotten", conn_or_flow(conn, &flow))
        }
    }
}

/// A core event as a trace line; `kconn` is the kernel connection of the event's connection.
pub fn event_line(e: &Event, kconn: Option<u64>) -> String {
    let on = |local: &ConnId| ConnRef { local: *local, kconn };
    match e {
        Event::MessageSent { conn, to, tag, origin, size } => {
            format!("sent {origin} ({size} bytes, tag {tag:#x}) to rank {to} on {}", on(conn))
        }
        Event::MessageTaken { conn, from, tag, origin, size, expected_size } => format!(
            "{origin} took {size} bytes ({expected_size} expected) from rank {from}, tag {tag:#x}, on {}",
            on(conn)
        ),
        Event::UnexpectedQueued { conn, from, tag, waiting_for: (wp, wt), list_len } => format!(
            "queued {} from rank {from}, tag {tag:#x}, as unexpected while waiting for rank {wp}, tag {wt:#x} \
             ({list_len} unexpected)",
            on(conn)
        ),
        Event::ShortMessageAccepted { conn, from, tag, got, expected } => format!(
            "accepted a short message from rank {from}, tag {tag:#x}, on {}: {got} bytes where {expected} were expected",
            on(conn)
        ),
        Event::DrainGaveUp { conn, to, tag, waited, unacked } => format!(
            "drain of {} to rank {to} (tag {tag:#x}) gave up after {} with {unacked} bytes unacknowledged",
            on(conn),
            ms_d(*waited)
        ),
        Event::DrainCompleted { conn, to, waited } => {
            format!("drain of {} to rank {to} completed after {}", on(conn), ms_d(*waited))
        }
        Event::StrayDropped { conn, from, error } => format!("dropped stray {} from {from}: {error}", on(conn)),
        Event::StalledDropped { conn, from, after } => {
            format!("dropped {} from {from}: its header stalled for {}", on(conn), ms_d(*after))
        }
        Event::Ready => "init ready: every peer's listener is known".to_string(),
        Event::CheckedIn { rank, count, nranks } => format!("took rank {rank}'s check-in ({count} of {nranks})"),
    }
}

/// An operation's end as a trace line: `alltoall #1 ok (1152 bytes)`, `barrier #2 failed: recv
/// from rank 1 ...` (the line already names the rank and the operation: the error's own
/// "rank 0: barrier" prefix is not repeated).
pub fn completion_line(c: &Completion) -> String {
    match &c.result {
        Ok(bytes) => format!("{} ok ({} bytes)", OpName(c.kind.op_type(), c.op), bytes.len()),
        Err(e) => {
            let text = e.to_string();
            let text = strip_rank(&text);
            let kind = c.kind.to_string();
            let text = text.strip_prefix(kind.as_str()).map_or(text, |t| t.trim_start_matches([':', ' ']));
            format!("{} failed: {text}", OpName(c.kind.op_type(), c.op))
        }
    }
}

/// `text` without a leading "rank N: ".
fn strip_rank(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("rank ") else { return text };
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    match rest[digits..].strip_prefix(": ") {
        Some(after) if digits > 0 => after,
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_failed_operation_names_its_rank_and_kind_once() {
        use bootsim_core::OpId;
        use bootsim_nvshmem::{BootstrapError, Completion, OpKind};
        let error = BootstrapError::Timeout {
            rank: 0,
            op: OpKind::Barrier,
            waiting: "recv from rank 1".into(),
            after: std::time::Duration::from_secs(1),
            peer: Some(bootsim_core::Culprit::Rank(1)),
            blocked: bootsim_core::Blocked::Other,
        };
        let line = super::completion_line(&Completion { op: OpId(3), kind: OpKind::Barrier, result: Err(error) });
        assert!(line.starts_with("barrier #2 failed: "), "{line}");
        assert!(!line.contains("rank 0:") && line.matches("barrier").count() == 1, "{line}");
    }

    use super::*;

    #[test]
    fn connections_read_kernel_number_first() {
        let c = ConnRef { local: ConnId(5), kconn: Some(7) };
        assert_eq!(c.to_string(), "connection 7 (local c5)");
        assert_eq!(ConnRef { local: ConnId(5), kconn: None }.to_string(), "local c5 (no connection)");
    }

    #[test]
    fn unexpected_lists_read_as_ranks_and_tags() {
        assert_eq!(peer_tags(&[(1, 1), (2, 0x13)]), "rank 1 tag 0x1, rank 2 tag 0x13");
    }

    #[test]
    fn packet_events_name_the_connection_of_their_flow() {
        let flow = Flow { client: HostId(1), client_port: 40000, server: HostId(0), server_port: 7000 };
        let mut flows = BTreeMap::new();
        let syn = EventKind::SynSent { sock: SockId::client(7), flow, server_queue: 1, client_queue: 2 };
        assert_eq!(kernel_conn(&syn, &mut flows), Some(7));
        let lost = EventKind::PacketLost { host: HostId(0), queue: 1, flow, dir: Dir::ToServer, seg: Seg::Syn };
        assert_eq!(kernel_conn(&lost, &mut flows), Some(7));
        assert_eq!(kernel_line(&lost, Some(7)), "connection 7's SYN was lost on the way to host 0 (RX queue 1)");
    }
}
