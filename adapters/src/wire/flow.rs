//! What the wire records: connections ([`FlowInfo`]), its decisions about them
//! ([`WireDecision`]) and packet counters ([`WireCounters`]).

use std::net::SocketAddrV4;

use serde::Serialize;

/// One TCP connection seen by the wire, numbered in first-SYN order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FlowInfo {
    /// Index over all connections through the wire, in first-SYN order.
    pub conn: u32,
    /// Index among connections from `src_host` to `dst_host`, in first-SYN order.
    pub pair_conn: u32,
    /// Host number (last address octet) of the connecting side.
    pub src_host: u8,
    /// Host number (last address octet) of the accepting side.
    pub dst_host: u8,
    /// Client address and port.
    pub src: SocketAddrV4,
    /// Server address and port.
    pub dst: SocketAddrV4,
    /// The client's initial sequence number (tells a reused port from a retransmitted SYN).
    pub isn: u32,
}

impl FlowInfo {
    /// What a policy's selector sees of it.
    pub fn key(&self) -> bootsim_core::accept_policy::ConnKey {
        bootsim_core::accept_policy::ConnKey {
            conn: self.conn,
            pair_conn: self.pair_conn,
            src_host: self.src_host,
            dst_host: self.dst_host,
            msg: None,
        }
    }
}

/// Why a held connection was let go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseReason {
    /// Its delay (or the release-on-next fallback) ran out.
    Deadline,
    /// A later connection on the same (sender, receiver) pair completed its handshake.
    NextCompleted {
        /// The global index of that later connection.
        by_conn: u32,
    },
}

/// What the wire did about a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum WireEvent {
    /// Its first SYN was seen and it was numbered.
    Opened,
    /// Its handshake-completing packet was forwarded at once.
    Passed,
    /// Its handshake-completing packet (and the rest of the flow) is being held.
    Held {
        /// How long at most, in microseconds.
        delay_us: u64,
        /// Whether a later connection's handshake releases it earlier.
        until_next: bool,
    },
    /// Its held packets were forwarded, in order.
    Released {
        /// Why.
        reason: ReleaseReason,
        /// Packets forwarded.
        packets: u32,
        /// How long it was held, in microseconds.
        held_us: u64,
    },
    /// The wire shut down while it was held; its packets were dropped.
    DroppedAtShutdown {
        /// Packets dropped.
        packets: u32,
    },
}

/// One entry of the wire's decision log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct WireDecision {
    /// Microseconds since the wire started.
    pub at_us: u64,
    /// The connection concerned.
    pub flow: FlowInfo,
    /// What happened.
    pub event: WireEvent,
}

/// Packet counters of one wire run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WireCounters {
    /// Packets read from the hosts' TUN devices.
    pub packets_in: u64,
    /// Packets written to a host's TUN device.
    pub forwarded: u64,
    /// Packets that were held at some point.
    pub held: u64,
    /// Non-IPv4 packets dropped (IPv6 neighbour discovery and the like).
    pub dropped_not_ipv4: u64,
    /// Packets dropped because no host has their destination address.
    pub dropped_unroutable: u64,
    /// Packets dropped because their headers did not parse.
    pub dropped_malformed: u64,
    /// Held packets dropped at shutdown.
    pub dropped_at_shutdown: u64,
    /// Writes to a TUN device that failed (the host had already gone).
    pub write_errors: u64,
}

/// Everything a wire run recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WireReport {
    /// Connections seen.
    pub connections: u32,
    /// The decision log, in time order.
    pub decisions: Vec<WireDecision>,
    /// Packet counters.
    pub counters: WireCounters,
    /// With capture on ([`super::Wire::start_capturing`]): each connection's client-to-server
    /// bytes, in connection order.
    pub streams: Vec<CapturedStream>,
}

/// The bytes a connection's client sent, reassembled by sequence number.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CapturedStream {
    /// The connection.
    pub flow: FlowInfo,
    /// Its client-to-server payload.
    pub bytes: Vec<u8>,
}

impl WireReport {
    /// How many decisions match `pred`.
    pub fn count(&self, pred: impl Fn(&WireEvent) -> bool) -> usize {
        self.decisions.iter().filter(|d| pred(&d.event)).count()
    }
}
