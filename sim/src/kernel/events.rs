//! The kernel model's vocabulary: identifiers, flows, segments and the events it reports.

use std::fmt;

use bootsim_core::Instant;

/// A simulated host (one NIC, one kernel), numbered `0..hosts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostId(pub u32);

/// A listening socket, numbered in `listen` order (never reused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ListenerId(pub u32);

/// One end of a connection: `conn * 2` is the connecting end, `conn * 2 + 1` the accepted child.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SockId(pub u64);

impl SockId {
    /// The connecting (client) end of connection `conn`.
    pub const fn client(conn: u64) -> SockId {
        SockId(conn << 1)
    }

    /// The accepted (server child) end of connection `conn`.
    pub const fn child(conn: u64) -> SockId {
        SockId((conn << 1) | 1)
    }

    /// The connection this socket belongs to (connections are numbered in `connect` order).
    pub const fn conn(self) -> u64 {
        self.0 >> 1
    }

    /// Whether this is the connecting end.
    pub const fn is_client(self) -> bool {
        self.0 & 1 == 0
    }

    /// The other end of the same connection.
    pub const fn peer(self) -> SockId {
        SockId(self.0 ^ 1)
    }

    /// 0 for the client end, 1 for the child end (index into per-side state).
    pub(crate) const fn side(self) -> usize {
        (self.0 & 1) as usize
    }
}

impl fmt::Display for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "h{}", self.0)
    }
}

impl fmt::Display for ListenerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "l{}", self.0)
    }
}

impl fmt::Display for SockId {
    /// `c12` for the client end of connection 12, `s12` for its accepted child.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let end = if self.is_client() { 'c' } else { 's' };
        write!(f, "{end}{}", self.conn())
    }
}

/// The application's own value for one of its sockets (epoll's `data`): given at `connect` or
/// after `accept`, returned with each application event about that socket, so a driver finds
/// what the socket is to it without a table of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SockToken(pub u128);

/// A connection's 4-tuple: the connecting host and its ephemeral port, the listening host and port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Flow {
    /// The connecting host.
    pub client: HostId,
    /// Its ephemeral source port.
    pub client_port: u16,
    /// The listening host.
    pub server: HostId,
    /// The listening port.
    pub server_port: u16,
}

impl fmt::Display for Flow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}->{}:{}", self.client, self.client_port, self.server, self.server_port)
    }
}

/// Which way a packet travels on its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    /// Client to server (arrives at the server host's RX queue).
    ToServer,
    /// Server to client (arrives at the client host's RX queue).
    ToClient,
}

impl Dir {
    /// The direction of packets received by `side`.
    pub(crate) const fn towards(side: usize) -> Dir {
        if side == 0 {
            Dir::ToClient
        } else {
            Dir::ToServer
        }
    }
}

/// A TCP segment as the model sees it: each `write` is one data segment, FIN is the segment after
/// the last one, and ACKs of data are cumulative segment counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Seg {
    /// Connection request.
    Syn,
    /// The listener's reply to a SYN.
    SynAck,
    /// The handshake-completing ACK (also sent again in reply to a duplicate SYN-ACK).
    Ack,
    /// The `idx`-th data segment of its direction (it carries the handshake ACK too).
    Data {
        /// Segment number, from 0.
        idx: u32,
    },
    /// End of stream: segment number `idx`, right after the last data segment.
    Fin {
        /// Segment number (= number of data segments written before close).
        idx: u32,
    },
    /// Cumulative acknowledgement: every segment below `upto` was received in order.
    DataAck {
        /// Next expected segment number.
        upto: u32,
    },
    /// Reset.
    Rst,
}

/// Why the listener dropped a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Overflow {
    /// A SYN, because the accept queue was full (`LISTENOVERFLOWS`): the client retransmits it.
    Syn,
    /// The handshake-completing ACK or data, because the accept queue was full: the connection
    /// stays half-open (SYN-ACK and data retransmissions) until there is room.
    Ack,
}

/// Something that happened inside the kernel, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelEvent {
    /// When it happened.
    pub at: Instant,
    /// What happened.
    pub kind: EventKind,
}

/// What happened. The first group is what an application sees; the rest (emitted only when the
/// `trace` knob is on) explain why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The client end reached ESTABLISHED (SYN-ACK processed by the client host).
    Connected {
        /// Client end.
        sock: SockId,
    },
    /// The server answered the SYN with RST (no listener): the caller may retry with a new connect.
    Refused {
        /// Client end.
        sock: SockId,
    },
    /// No SYN-ACK after the initial SYN and every retransmission (`ETIMEDOUT`).
    ConnectTimedOut {
        /// Client end.
        sock: SockId,
    },
    /// The listener's accept queue became non-empty.
    Acceptable {
        /// The listener.
        listener: ListenerId,
    },
    /// New in-order bytes can be read; `unread` is the total now readable on `sock`.
    Readable {
        /// Receiving end (a child may be readable before it is accepted).
        sock: SockId,
        /// Bytes readable now.
        unread: usize,
    },
    /// The peer's FIN arrived in order: after the readable bytes, `read` returns end of stream.
    Eof {
        /// Receiving end.
        sock: SockId,
    },
    /// The peer reset the connection.
    Reset {
        /// The end that received the RST.
        sock: SockId,
    },
    /// Every byte written on `sock` has been acknowledged: SIOCOUTQ dropped to 0.
    AllAcked {
        /// Sending end.
        sock: SockId,
    },
    /// Data went unacknowledged through every retransmission: the kernel gave up (`ETIMEDOUT`).
    Aborted {
        /// Sending end.
        sock: SockId,
    },

    /// Trace: a connect sent its first SYN.
    SynSent {
        /// Client end.
        sock: SockId,
        /// Its 4-tuple.
        flow: Flow,
        /// RSS queue of the flow at the server host.
        server_queue: u16,
        /// RSS queue of the flow at the client host.
        client_queue: u16,
    },
    /// Trace: the handshake completed on the server host and the child joined the accept queue.
    ChildEnqueued {
        /// The listener.
        listener: ListenerId,
        /// The child.
        sock: SockId,
        /// Its 4-tuple.
        flow: Flow,
        /// RSS queue that processed the completing segment.
        queue: u16,
        /// Accept-queue length after the append.
        depth: u32,
    },
    /// Trace: the application took the child from the accept queue.
    Accepted {
        /// The listener.
        listener: ListenerId,
        /// The child.
        sock: SockId,
        /// Its 4-tuple.
        flow: Flow,
    },
    /// Trace: a packet reached an RX queue whose softirq CPU was busy, and waited (stamped when
    /// it was sent where admission is decided then, `Net::transmit`; `from` and `until` say
    /// when it waited).
    RxStall {
        /// Receiving host.
        host: HostId,
        /// RX queue.
        queue: u16,
        /// The packet's connection.
        flow: Flow,
        /// The packet's direction.
        dir: Dir,
        /// The packet.
        seg: Seg,
        /// When it would have been processed.
        from: Instant,
        /// When the stall ended.
        until: Instant,
        /// The packet's index among those that reached this queue (from 0): `stalls=H:Q:pN:D`.
        nth: u64,
    },
    /// Trace: a packet found its RX ring full (`rx_ring`) and was dropped.
    RingDrop {
        /// Receiving host.
        host: HostId,
        /// The full RX queue.
        queue: u16,
        /// The packet's connection.
        flow: Flow,
        /// The packet's direction.
        dir: Dir,
        /// The packet.
        seg: Seg,
    },
    /// Trace: RPS steered a packet to a CPU whose backlog was full (`max_backlog`): dropped.
    CpuBacklogDrop {
        /// Receiving host.
        host: HostId,
        /// The CPU whose backlog was full.
        cpu: u16,
        /// The packet's connection.
        flow: Flow,
        /// The packet's direction.
        dir: Dir,
        /// The packet.
        seg: Seg,
    },
    /// Trace: a packet was lost before reaching the receiving host's RX queue (stamped when it
    /// was sent where admission is decided then).
    PacketLost {
        /// Host it was travelling to.
        host: HostId,
        /// RX queue it would have used.
        queue: u16,
        /// The packet's connection.
        flow: Flow,
        /// The packet's direction.
        dir: Dir,
        /// The packet.
        seg: Seg,
    },
    /// Trace: a segment was sent again after a timeout.
    Retransmit {
        /// The packet's connection.
        flow: Flow,
        /// The packet's direction.
        dir: Dir,
        /// The segment.
        seg: Seg,
        /// 1 for the first retransmission.
        attempt: u8,
    },
    /// Trace: the listener dropped a segment because its accept queue was full.
    BacklogDrop {
        /// The listener.
        listener: ListenerId,
        /// The segment's connection.
        flow: Flow,
        /// RX queue that processed it.
        queue: u16,
        /// What was dropped.
        what: Overflow,
    },
    /// Trace: a half-open connection ran out of SYN-ACK retransmissions and was forgotten.
    SynAckExpired {
        /// Its 4-tuple.
        flow: Flow,
    },
}

impl EventKind {
    /// Whether an application (rather than a trace reader) needs this event.
    pub fn is_app(&self) -> bool {
        matches!(
            self,
            EventKind::Connected { .. }
                | EventKind::Refused { .. }
                | EventKind::ConnectTimedOut { .. }
                | EventKind::Acceptable { .. }
                | EventKind::Readable { .. }
                | EventKind::Eof { .. }
                | EventKind::Reset { .. }
                | EventKind::AllAcked { .. }
                | EventKind::Aborted { .. }
        )
    }
}

impl EventKind {
    /// The socket an application event is about (every one but a listener's `Acceptable`).
    pub fn app_sock(&self) -> Option<SockId> {
        match *self {
            EventKind::Readable { sock, .. } | EventKind::Eof { sock } | EventKind::AllAcked { sock } => Some(sock),
            EventKind::Connected { sock } | EventKind::Refused { sock } | EventKind::ConnectTimedOut { sock } => {
                Some(sock)
            }
            EventKind::Reset { sock } | EventKind::Aborted { sock } => Some(sock),
            _ => None,
        }
    }
}

/// Result of [`super::Kernel::read`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// This many bytes were copied.
    Data(usize),
    /// Nothing to read yet.
    WouldBlock,
    /// The peer closed and everything was read.
    Eof,
    /// The connection was reset (or failed) and everything readable was read.
    Reset,
    /// This end's kernel gave up retransmitting its data ([`EventKind::Aborted`]) and
    /// everything readable was read: Linux's first read fails with `ETIMEDOUT`. The model keeps
    /// saying it (Linux's later reads return 0), also after the connection is forgotten, until
    /// the application closes the socket.
    TimedOut,
}

/// Counters, cheap to keep even when tracing is off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Packets put on the wire.
    pub packets: u64,
    /// Non-empty application writes (each one segment): every frame of the bootstrap, the ring's and
    /// the root's included, where `messages` counts only point-to-point messages.
    pub writes: u64,
    /// Packets lost on the way (counted when sent: one still in flight at the end counts).
    pub lost: u64,
    /// Packets that waited behind an RX-queue stall (counted as `lost` is).
    pub stalled: u64,
    /// Segments retransmitted after a timeout.
    pub retransmits: u64,
    /// Segments dropped because an accept queue was full.
    pub backlog_drops: u64,
    /// Children that entered an accept queue.
    pub enqueued: u64,
    /// Packets that arrived for a connection the model had already forgotten.
    pub orphans: u64,
    /// Packets dropped because their RX ring was full (`rx_ring`); TCP retransmits them.
    pub ring_drops: u64,
    /// Packets dropped because the CPU RPS chose had a full backlog (`max_backlog`).
    pub cpu_backlog_drops: u64,
    /// NAPI polls that exhausted their budget and left the rest to ksoftirqd.
    pub napi_deferrals: u64,
    /// Total time packets spent in RX queues before TCP saw them (waiting and service), in ns,
    /// counted as `lost` is.
    pub rx_wait_ns: u64,
    /// Agenda entries processed: packet deliveries, timer firings, and packet arrivals where
    /// the RX queue decides on arrival (RPS, the `load` and `cpu` profiles).
    pub agenda_events: u64,
    /// Retransmission-timer firings that found nothing to do (disarmed or superseded).
    pub stale_timers: u64,
    /// Calls to `handle_timeout` that had work due (the driver's wake-ups for the kernel).
    pub wakeups: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sock_ids_pair_up() {
        let c = SockId::client(7);
        let s = SockId::child(7);
        assert!(c.is_client() && !s.is_client());
        assert_eq!((c.conn(), s.conn()), (7, 7));
        assert_eq!(c.peer(), s);
        assert_eq!(s.peer(), c);
        assert_eq!((c.side(), s.side()), (0, 1));
        assert_eq!(format!("{c} {s}"), "c7 s7");
    }

    #[test]
    fn directions_name_their_receiver() {
        assert_eq!(Dir::towards(1), Dir::ToServer);
        assert_eq!(Dir::towards(0), Dir::ToClient);
    }
}
