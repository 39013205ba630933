//! The little the wire needs to know about a packet: IPv4 addresses and, for TCP, the
//! ports, sequence number and flags. Parsing is done by `etherparse`.

use std::fmt;
use std::net::Ipv4Addr;

use etherparse::{IpNumber, Ipv4HeaderSlice, TcpHeaderSlice};

/// TCP fields of a packet that the wire's policies look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpMeta {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number (the ISN on a SYN).
    pub seq: u32,
    /// SYN flag.
    pub syn: bool,
    /// ACK flag.
    pub ack: bool,
    /// FIN flag.
    pub fin: bool,
    /// RST flag.
    pub rst: bool,
    /// Payload bytes carried by the segment.
    pub payload_len: usize,
    /// Where the payload starts in the packet.
    pub payload_offset: usize,
}

/// The parsed view of one IPv4 packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// TCP fields, when the packet is an unfragmented TCP segment.
    pub tcp: Option<TcpMeta>,
}

/// Why a packet could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Not an IPv4 packet (an IPv6 router solicitation, for instance); carries the version nibble.
    NotIpv4(u8),
    /// A malformed IPv4 or TCP header.
    Malformed(String),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::NotIpv4(v) => write!(f, "not IPv4 (version {v})"),
            ParseError::Malformed(why) => write!(f, "malformed packet: {why}"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Parses the IPv4 header and, if present, the TCP header of `packet`.
pub fn parse(packet: &[u8]) -> Result<PacketMeta, ParseError> {
    let version = packet.first().map_or(0, |b| b >> 4);
    if version != 4 {
        return Err(ParseError::NotIpv4(version));
    }
    let ip = Ipv4HeaderSlice::from_slice(packet).map_err(|e| ParseError::Malformed(format!("IPv4 header: {e}")))?;
    let (src, dst) = (ip.source_addr(), ip.destination_addr());
    let fragment = ip.more_fragments() || ip.fragments_offset().value() != 0;
    if ip.protocol() != IpNumber::TCP || fragment {
        return Ok(PacketMeta { src, dst, tcp: None });
    }
    let header_len = ip.slice().len();
    let total = usize::from(ip.total_len()).min(packet.len());
    let segment = packet.get(header_len..total).unwrap_or_default();
    let tcp = TcpHeaderSlice::from_slice(segment).map_err(|e| ParseError::Malformed(format!("TCP header: {e}")))?;
    let tcp = TcpMeta {
        src_port: tcp.source_port(),
        dst_port: tcp.destination_port(),
        seq: tcp.sequence_number(),
        syn: tcp.syn(),
        ack: tcp.ack(),
        fin: tcp.fin(),
        rst: tcp.rst(),
        payload_len: segment.len().saturating_sub(tcp.slice().len()),
        payload_offset: header_len + tcp.slice().len(),
    };
    Ok(PacketMeta { src, dst, tcp: Some(tcp) })
}

/// Builders of synthetic packets for unit tests.
#[cfg(test)]
pub(crate) mod build {
    use etherparse::PacketBuilder;

    /// A TCP segment from `src:sp` to `dst:dp`; `flags` is any of "S", "A", "F", "R", "P".
    pub fn tcp(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16, seq: u32, flags: &str, payload: &[u8]) -> Vec<u8> {
        let mut b = PacketBuilder::ipv4(src, dst, 64).tcp(sp, dp, seq, 65535);
        for flag in flags.chars() {
            b = match flag {
                'S' => b.syn(),
                'A' => b.ack(1),
                'F' => b.fin(),
                'R' => b.rst(),
                'P' => b.psh(),
                other => panic!("unknown test flag {other}"),
            };
        }
        let mut out = Vec::with_capacity(b.size(payload.len()));
        b.write(&mut out, payload).expect("write test packet");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcp_fields() {
        let p = build::tcp([10, 213, 0, 1], 40000, [10, 213, 0, 2], 7000, 77, "AP", &[1, 2, 3]);
        let m = parse(&p).unwrap();
        assert_eq!(m.src, Ipv4Addr::new(10, 213, 0, 1));
        assert_eq!(m.dst, Ipv4Addr::new(10, 213, 0, 2));
        let t = m.tcp.unwrap();
        assert_eq!((t.src_port, t.dst_port, t.seq), (40000, 7000, 77));
        assert!(t.ack && !t.syn && !t.fin && !t.rst);
        assert_eq!(t.payload_len, 3);
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        assert_eq!(parse(&[]), Err(ParseError::NotIpv4(0)));
        assert_eq!(parse(&[0x60, 0, 0, 0]), Err(ParseError::NotIpv4(6)));
        assert!(matches!(parse(&[0x45, 0, 0]), Err(ParseError::Malformed(_))));
        let mut p = build::tcp([10, 213, 0, 1], 1, [10, 213, 0, 2], 2, 0, "S", &[]);
        p.truncate(24);
        assert!(matches!(parse(&p), Err(ParseError::Malformed(_))));
    }
}
