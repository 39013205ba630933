//! NCCL's bootstrap wire format, byte for byte: host byte order (little-endian), raw structs, every
//! message an `i32` size then its bytes (`bootstrapNetSend`), connections opened by `u64 magic` then
//! `i32 type` from 2.9 on. The framing, the preamble and the socket address layout are the same as
//! NVSHMEM's (which copied NCCL's socket layer), so they come from `bootsim_core::codec`.

use std::net::SocketAddr;

pub use bootsim_core::codec::ExtInfo;
pub use bootsim_core::codec::SOCKADDR_LEN;
use bootsim_core::codec::{decode_sockaddr, encode_frame, encode_sockaddr, FrameReader, Preamble, WireError};

use crate::variant::Variant;

/// `NCCL_NET_HANDLE_MAXSIZE`: the size of 2.30's `union ringConnectInfo` (src/include/plugin/nccl_net.h:16).
pub const CONNECT_INFO_LEN: usize = 128;

/// `sizeof(struct ncclConnect)`: one channel's connection information in a transport setup.
pub const NCCL_CONNECT_LEN: usize = 128;

/// The size of the `extInfo` a rank sends the root: `{rank, nranks, addrRoot, addr}` (64 bytes)
/// up to 2.22, `{rank, nranks, iroot, nroots, offset, addrRoot, ringConnectInfo}` (176) in 2.30.
pub fn ext_info_len(v: Variant) -> usize {
    match v {
        Variant::Nccl230 => 20 + SOCKADDR_LEN + CONNECT_INFO_LEN,
        _ => 8 + 2 * SOCKADDR_LEN,
    }
}

/// The size of what the root sends each rank: its successor's address (28 bytes), or in 2.30 the
/// successor's `ringConnectInfo` (128 bytes, the address first).
pub fn successor_len(v: Variant) -> usize {
    match v {
        Variant::Nccl230 => CONNECT_INFO_LEN,
        _ => SOCKADDR_LEN,
    }
}

/// The bytes of a rank's check-in for variant `v`: core's 64-byte `extInfo` (the same struct
/// NVSHMEM copied) up to 2.22; in 2.30 `{rank, nranks, iroot 0, nroots 1, offset 0, addrRoot,
/// ringConnectInfo}` (176 bytes, src/bootstrap.cc:264-272).
pub fn encode_ext_info(info: &ExtInfo, v: Variant) -> Vec<u8> {
    if v != Variant::Nccl230 {
        return info.encode().to_vec();
    }
    let mut b = Vec::with_capacity(ext_info_len(v));
    for x in [info.rank, info.nranks, 0, 1, 0] {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b.extend_from_slice(&encode_sockaddr(&info.listen_root));
    b.extend_from_slice(&encode_connect_info(&info.listen));
    b
}

/// Parses a whole check-in of variant `v` (2.30: the ring address is the first 28 bytes of
/// `connectInfo`; `iroot`, `nroots` and `offset` are not kept, the model having one root).
pub fn decode_ext_info(b: &[u8], v: Variant) -> Result<ExtInfo, WireError> {
    if b.len() != ext_info_len(v) {
        return Err(WireError::WrongLength { what: "extInfo", expected: ext_info_len(v), got: b.len() });
    }
    if v != Variant::Nccl230 {
        return ExtInfo::decode(b.try_into().expect("length checked"));
    }
    let int = |at: usize| i32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    let addr = |at: usize| decode_sockaddr(b[at..at + SOCKADDR_LEN].try_into().expect("28 bytes"));
    Ok(ExtInfo { rank: int(0), nranks: int(4), listen_root: addr(20)?, listen: addr(48)? })
}

/// A check-in as the root reads it: integers, and the addresses as raw bytes (NCCL copies and
/// compares them, and reads them as addresses only when it connects).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawCheckIn {
    /// The rank checking in.
    pub rank: i32,
    /// The world size it believes in.
    pub nranks: i32,
    /// `{iroot, nroots, offset}` (2.30; `[0, 1, 0]` before).
    pub roots: [i32; 3],
    /// Where the root must answer.
    pub listen_root: [u8; SOCKADDR_LEN],
    /// What the root forwards to the rank's predecessor: its ring address (28 bytes), or in 2.30
    /// its whole `ringConnectInfo` (128 bytes), verbatim.
    pub ring: Vec<u8>,
}

/// Reads a whole check-in buffer of variant `v` (of [`ext_info_len`] bytes).
pub fn raw_check_in(b: &[u8], v: Variant) -> RawCheckIn {
    let int = |at: usize| i32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    let (roots, root_at, ring) = match v {
        Variant::Nccl230 => ([int(8), int(12), int(16)], 20, b[48..48 + CONNECT_INFO_LEN].to_vec()),
        _ => ([0, 1, 0], 8, b[36..36 + SOCKADDR_LEN].to_vec()),
    };
    let listen_root = b[root_at..root_at + SOCKADDR_LEN].try_into().expect("28 bytes");
    RawCheckIn { rank: int(0), nranks: int(4), roots, listen_root, ring }
}

/// 2.30's `union ringConnectInfo` for a socket ring: the address, then zeros to 128 bytes.
pub fn encode_connect_info(addr: &SocketAddr) -> Vec<u8> {
    let mut b = encode_sockaddr(addr).to_vec();
    b.resize(CONNECT_INFO_LEN, 0);
    b
}

/// The successor message the root sends a rank, unframed.
pub fn encode_successor(v: Variant, next: &SocketAddr) -> Vec<u8> {
    match v {
        Variant::Nccl230 => encode_connect_info(next),
        _ => encode_sockaddr(next).to_vec(),
    }
}

/// Reads the successor's address out of the root's message (its first 28 bytes).
pub fn decode_successor(b: &[u8]) -> Result<SocketAddr, WireError> {
    let Some(head) = b.get(..SOCKADDR_LEN) else {
        return Err(WireError::WrongLength { what: "successor address", expected: SOCKADDR_LEN, got: b.len() });
    };
    decode_sockaddr(head.try_into().expect("28 bytes"))
}

/// Appends the connection preamble (magic, then socket type 1) where the variant has one.
pub fn encode_preamble(out: &mut Vec<u8>, v: Variant, magic: u64) {
    if v.has_preamble() {
        out.extend_from_slice(&Preamble::bootstrap(magic).encode());
    }
}

/// Appends a point-to-point message's header: `[rank]` (2.8), `[rank][tag]` (2.9-2.22) or one
/// framed `socketAckInfo {rank, tag}` (2.23 on).
pub fn encode_header(out: &mut Vec<u8>, v: Variant, rank: u32, tag: i32) {
    let rank = rank as i32;
    if v.ack_header() {
        let mut ack = [0u8; 8];
        ack[..4].copy_from_slice(&rank.to_le_bytes());
        ack[4..].copy_from_slice(&tag.to_le_bytes());
        encode_frame(out, &ack);
    } else {
        encode_frame(out, &rank.to_le_bytes());
        if v.tagged() {
            encode_frame(out, &tag.to_le_bytes());
        }
    }
}

/// One whole point-to-point message as `bootstrapSend` writes it: preamble, header, framed data.
pub fn encode_message(v: Variant, magic: u64, rank: u32, tag: i32, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + 16 + 4 + data.len());
    encode_preamble(&mut out, v, magic);
    encode_header(&mut out, v, rank, tag);
    encode_frame(&mut out, data);
    out
}

/// The outcome of NCCL's `bootstrapNetRecv` / `socketRecv` on one frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Received {
    /// The frame fitted: its bytes (possibly fewer than expected; the rest of the caller's buffer
    /// is left as it was, and NCCL reports success).
    Fits(Vec<u8>),
    /// The frame was larger than the buffer: NCCL's "Message truncated : received X bytes
    /// instead of Y" and `ncclInternalError`, before reading any of it.
    Truncated {
        /// The size the sender announced.
        received: usize,
        /// The size of the receive buffer.
        expected: usize,
    },
}

/// NCCL's size rule on the next frame of `r`: `Ok(None)` until it is complete; a larger frame is
/// [`Received::Truncated`] as soon as its size is read (nothing is allocated for it).
pub fn recv_frame(r: &mut FrameReader, what: &'static str, expected: usize) -> Result<Option<Received>, WireError> {
    let Some(len) = r.peek_frame_len(usize::MAX)? else { return Ok(None) };
    if len > expected {
        return Ok(Some(Received::Truncated { received: len, expected }));
    }
    Ok(r.read_frame(what, expected)?.map(Received::Fits))
}

/// What a header said: the sender's rank and its tag (0 where messages carry none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// The sender's rank.
    pub rank: i32,
    /// The tag (0 in 2.8).
    pub tag: i32,
}

/// Reads a point-to-point header with NCCL's size rule on each of its frames (a shorter frame
/// leaves the rest of the `int` as it was: zero here). `Err(Received::Truncated)` inside `Ok`
/// means NCCL's truncation error on the header itself.
pub fn read_header(r: &mut FrameReader, v: Variant) -> Result<Option<Result<Header, Received>>, WireError> {
    let int = |b: &[u8]| {
        let mut x = [0u8; 4];
        x[..b.len()].copy_from_slice(b);
        i32::from_le_bytes(x)
    };
    if v.ack_header() {
        return Ok(recv_frame(r, "socketAckInfo", 8)?.map(|got| match got {
            Received::Fits(b) => {
                let mut x = [0u8; 8];
                x[..b.len()].copy_from_slice(&b);
                Ok(Header { rank: int(&x[..4]), tag: int(&x[4..]) })
            }
            t => Err(t),
        }));
    }
    // Both frames must be here before either is consumed: the header is read as one unit.
    let Some(first) = r.peek_frame_len(usize::MAX)? else { return Ok(None) };
    if first > 4 {
        return Ok(Some(Err(Received::Truncated { received: first, expected: 4 })));
    }
    if v.tagged() {
        let Some(second) = r.peek_frame_len_at(4 + first, usize::MAX)? else { return Ok(None) };
        if r.buffered() < 8 + first + second.min(4) {
            return Ok(None);
        }
    }
    let Some(Received::Fits(rank)) = recv_frame(r, "rank", 4)? else { return Ok(None) };
    if !v.tagged() {
        return Ok(Some(Ok(Header { rank: int(&rank), tag: 0 })));
    }
    match recv_frame(r, "tag", 4)? {
        Some(Received::Fits(tag)) => Ok(Some(Ok(Header { rank: int(&rank), tag: int(&tag) }))),
        Some(t) => Ok(Some(Err(t))),
        None => Ok(None),
    }
}

/// The identity of a message from its first bytes (preamble, header), for provenance: the
/// sender's rank and tag, or `None` while they have not all arrived.
pub fn message_identity(v: Variant, bytes: &[u8]) -> Option<Header> {
    let mut r = FrameReader::new();
    r.push(if v.has_preamble() { bytes.get(Preamble::LEN..)? } else { bytes });
    match read_header(&mut r, v) {
        Ok(Some(Ok(h))) => Some(h),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ext_info_sizes_and_round_trip() {
        let info = ExtInfo { rank: 3, nranks: 8, listen_root: addr("10.0.0.3:4000"), listen: addr("10.0.0.3:5000") };
        for (v, len) in [(Variant::Nccl219, 64), (Variant::Nccl230, 176)] {
            let b = encode_ext_info(&info, v);
            assert_eq!(b.len(), len, "{v}");
            assert_eq!(decode_ext_info(&b, v), Ok(info), "{v}");
        }
        assert_eq!(&encode_ext_info(&info, Variant::Nccl230)[8..20], &[0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn messages_are_laid_out_per_version() {
        let m = encode_message(Variant::Nccl28, 7, 2, 99, b"abcd");
        assert_eq!(m, [&4i32.to_le_bytes()[..], &2i32.to_le_bytes(), &4i32.to_le_bytes(), b"abcd"].concat());
        let m = encode_message(Variant::Nccl219, 7, 2, 0x101, b"");
        assert_eq!(m.len(), 12 + 8 + 8 + 4);
        assert_eq!(&m[..8], &7u64.to_le_bytes());
        assert_eq!(&m[8..12], &1i32.to_le_bytes());
        let m = encode_message(Variant::Nccl230, 7, 2, 0x101, b"");
        assert_eq!(m.len(), 12 + 12 + 4);
        assert_eq!(message_identity(Variant::Nccl230, &m), Some(Header { rank: 2, tag: 0x101 }));
        assert_eq!(
            message_identity(Variant::Nccl219, &encode_message(Variant::Nccl219, 7, 5, 9, b"x")).unwrap().tag,
            9
        );
    }

    #[test]
    fn truncation_rule_fails_larger_and_accepts_smaller() {
        let mut r = FrameReader::new();
        let mut b = Vec::new();
        encode_frame(&mut b, &[1u8; 256]);
        r.push(&b[..4]);
        assert_eq!(recv_frame(&mut r, "flag", 4), Ok(Some(Received::Truncated { received: 256, expected: 4 })));
        let mut r = FrameReader::new();
        let mut b = Vec::new();
        encode_frame(&mut b, &[9u8; 2]);
        r.push(&b);
        assert_eq!(recv_frame(&mut r, "flag", 4), Ok(Some(Received::Fits(vec![9, 9]))));
    }

    #[test]
    fn header_waits_for_both_frames_in_any_chunking() {
        let m = encode_message(Variant::Nccl219, 1, 3, 0x181, b"zz");
        let body = &m[12..];
        for cut in 0..body.len() {
            let mut r = FrameReader::new();
            r.push(&body[..cut]);
            let first = read_header(&mut r, Variant::Nccl219).unwrap();
            if cut < 16 {
                assert_eq!(first, None, "cut {cut}");
                r.push(&body[cut..]);
                assert_eq!(read_header(&mut r, Variant::Nccl219), Ok(Some(Ok(Header { rank: 3, tag: 0x181 }))));
            }
        }
    }
}
