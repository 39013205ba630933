//! The rendezvous protocol's three messages, each one frame of core's codec (an `i32` length,
//! then the bytes; little-endian fields).

use std::net::SocketAddr;

use bootsim_core::codec::{decode_sockaddr, encode_frame, encode_sockaddr, FrameReader, WireError, SOCKADDR_LEN};

/// The largest frame a node accepts (a table of 65 536 addresses, or a payload of 1 MiB).
pub const MAX_FRAME: usize = 2 << 20;

/// A point-to-point message's header: sender rank and tag, before the payload.
pub const MSG_HEADER: usize = 8;

/// A rank's check-in at the root: its rank and the address of its peer listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckIn {
    /// The rank checking in.
    pub rank: u32,
    /// Where its peers dial it.
    pub addr: SocketAddr,
}

impl CheckIn {
    /// Appends its frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut body = self.rank.to_le_bytes().to_vec();
        body.extend_from_slice(&encode_sockaddr(&self.addr));
        encode_frame(out, &body);
    }

    /// Reads one from `rx`, once it is all there.
    pub fn read(rx: &mut FrameReader) -> Result<Option<CheckIn>, WireError> {
        let Some(b) = rx.read_fixed::<{ 4 + SOCKADDR_LEN }>("check-in")? else { return Ok(None) };
        let rank = u32::from_le_bytes(b[..4].try_into().expect("4 bytes"));
        let addr = decode_sockaddr(b[4..].try_into().expect("an address"))?;
        Ok(Some(CheckIn { rank, addr }))
    }
}

/// Appends the root's table frame (every rank's address, in rank order) to `out`.
pub fn encode_table(out: &mut Vec<u8>, addrs: &[SocketAddr]) {
    let body: Vec<u8> = addrs.iter().flat_map(encode_sockaddr).collect();
    encode_frame(out, &body);
}

/// Reads the root's table of `n` addresses from `rx`, once it is all there.
pub fn read_table(rx: &mut FrameReader, n: u32) -> Result<Option<Vec<SocketAddr>>, WireError> {
    let Some(body) = rx.read_frame("address table", MAX_FRAME)? else { return Ok(None) };
    let expected = n as usize * SOCKADDR_LEN;
    if body.len() != expected {
        return Err(WireError::WrongLength { what: "address table", expected, got: body.len() });
    }
    body.chunks_exact(SOCKADDR_LEN)
        .map(|c| decode_sockaddr(c.try_into().expect("an address")))
        .collect::<Result<_, _>>()
        .map(Some)
}

/// A point-to-point message: who sent it, its tag, its payload.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Msg {
    /// The sending rank.
    pub from: u32,
    /// Its tag (what the receiver matches on, with `from`).
    pub tag: i32,
    /// Its bytes.
    pub payload: Vec<u8>,
}

impl Msg {
    /// Appends its frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut body = Vec::with_capacity(MSG_HEADER + self.payload.len());
        body.extend_from_slice(&self.from.to_le_bytes());
        body.extend_from_slice(&self.tag.to_le_bytes());
        body.extend_from_slice(&self.payload);
        encode_frame(out, &body);
    }

    /// Reads one from `rx`, once it is all there.
    pub fn read(rx: &mut FrameReader) -> Result<Option<Msg>, WireError> {
        let Some(body) = rx.read_frame("message", MAX_FRAME)? else { return Ok(None) };
        if body.len() < MSG_HEADER {
            return Err(WireError::Truncated { what: "message header", needed: MSG_HEADER, have: body.len() });
        }
        let from = u32::from_le_bytes(body[..4].try_into().expect("4 bytes"));
        let tag = i32::from_le_bytes(body[4..8].try_into().expect("4 bytes"));
        Ok(Some(Msg { from, tag, payload: body[MSG_HEADER..].to_vec() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_reads_back_in_any_chunking_and_a_cut_one_is_named() {
        let addr: SocketAddr = "10.0.0.3:6001".parse().unwrap();
        let mut out = Vec::new();
        CheckIn { rank: 2, addr }.encode(&mut out);
        encode_table(&mut out, &[addr, addr]);
        Msg { from: 1, tag: -3, payload: vec![9; 5] }.encode(&mut out);
        let mut rx = FrameReader::new();
        let mut got = (None, None, None);
        for b in &out {
            rx.push(std::slice::from_ref(b));
            if got.0.is_none() {
                got.0 = CheckIn::read(&mut rx).unwrap();
            } else if got.1.is_none() {
                got.1 = read_table(&mut rx, 2).unwrap();
            } else if got.2.is_none() {
                got.2 = Msg::read(&mut rx).unwrap();
            }
        }
        assert_eq!(got.0, Some(CheckIn { rank: 2, addr }));
        assert_eq!(got.1, Some(vec![addr, addr]));
        assert_eq!(got.2, Some(Msg { from: 1, tag: -3, payload: vec![9; 5] }));
        let mut cut = FrameReader::new();
        cut.push(&out[..10]);
        cut.push_eof();
        assert!(matches!(CheckIn::read(&mut cut), Err(WireError::Truncated { what: "check-in", .. })));
    }
}
