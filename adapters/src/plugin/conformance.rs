//! What a sender put on the wire, connection by connection, in a form two implementations can
//! be compared by: NVSHMEM's shipped plugin against bootsim-core's matching variant. Addresses,
//! ports and the session magic differ from run to run and are masked; everything else (socket
//! type, frame lengths, versions, ranks, world size, tags, payloads) must be equal byte for byte.

use std::collections::BTreeMap;
use std::fmt;

use bootsim_core::codec::{ExtInfo, Preamble, SOCKADDR_LEN};
use bootsim_nvshmem::NVSHMEM_UID_VERSION;

use crate::wire::CapturedStream;

/// What a connection was for, told by its frames.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConnKind {
    /// A rank's check-in with the root: version, then the 64-byte ext_info.
    CheckIn,
    /// The root telling a rank its ring successor: one 28-byte address.
    Successor,
    /// The persistent ring: the init allgather of addresses, then allgather payloads.
    Ring,
    /// A point-to-point message: rank, tag, payload.
    Message {
        /// The sender's rank, as sent.
        rank: i32,
        /// The tag, as sent.
        tag: i32,
        /// The payload's length.
        size: usize,
    },
}

/// One connection's client bytes, masked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnTranscript {
    /// Wire host of the sender (rank + 1).
    pub from_host: u8,
    /// Wire host of the receiver.
    pub to_host: u8,
    /// What it was for.
    pub kind: ConnKind,
    /// The socket type of the preamble (1, bootstrap).
    pub socket_type: i32,
    /// The frames, masked, as hex.
    pub frames: Vec<String>,
}

impl fmt::Display for ConnTranscript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            ConnKind::Message { rank, tag, size } => format!("message rank {rank} tag {tag:#x} {size} bytes"),
            k => format!("{k:?}").to_lowercase(),
        };
        write!(f, "host {} > host {}: {kind} ({} frames)", self.from_host, self.to_host, self.frames.len())
    }
}

/// Parses and masks one captured connection of a world of `nranks`. `mask_word` masks 4-byte
/// message payloads (a barrier's word: uninitialised stack bytes before NVSHMEM 3.8).
pub fn transcript(stream: &CapturedStream, nranks: u32, mask_word: bool) -> Result<ConnTranscript, String> {
    let b = &stream.bytes;
    let (from_host, to_host) = (stream.flow.src_host, stream.flow.dst_host);
    let head: &[u8; Preamble::LEN] = b
        .get(..Preamble::LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| format!("{} bytes: no preamble", b.len()))?;
    let socket_type = Preamble::decode(head).kind;
    let mut frames = Vec::new();
    let mut at = Preamble::LEN;
    while at < b.len() {
        let len = b.get(at..at + 4).ok_or("a truncated frame length")?;
        let len =
            usize::try_from(i32::from_le_bytes(len.try_into().expect("4"))).map_err(|_| "a negative frame length")?;
        let body = b.get(at + 4..at + 4 + len).ok_or_else(|| format!("a frame of {len} bytes cut short"))?;
        frames.push(body.to_vec());
        at += 4 + len;
    }
    let int = |f: &Vec<u8>| f.get(..4).map(|x| i32::from_le_bytes(x.try_into().expect("4")));
    let kind = match frames.as_slice() {
        [v, ext] if v.len() == 4 && int(v) == Some(NVSHMEM_UID_VERSION) && ext.len() == ExtInfo::LEN => {
            ConnKind::CheckIn
        }
        [a] if a.len() == SOCKADDR_LEN => ConnKind::Successor,
        [r, t, p] if r.len() == 4 && t.len() == 4 => {
            ConnKind::Message { rank: int(r).unwrap_or(-1), tag: int(t).unwrap_or(-1), size: p.len() }
        }
        _ => ConnKind::Ring,
    };
    let masked: Vec<String> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let f = match (&kind, i) {
                (ConnKind::CheckIn, 1) => mask_ext_info(f),
                (ConnKind::Successor, _) => mask_sockaddr(f),
                (ConnKind::Ring, i) if i + 1 < nranks as usize => mask_sockaddr(f),
                (ConnKind::Message { size: 4, .. }, 2) if mask_word => vec![0xee; 4],
                _ => f.clone(),
            };
            hex(&f)
        })
        .collect();
    Ok(ConnTranscript { from_host, to_host, kind, socket_type, frames: masked })
}

/// Keeps the address family (a 28-byte `ncclSocketAddress`), zeroes port and address.
fn mask_sockaddr(f: &[u8]) -> Vec<u8> {
    let mut m = vec![0u8; f.len()];
    m[..2.min(f.len())].copy_from_slice(&f[..2.min(f.len())]);
    m
}

fn mask_ext_info(f: &[u8]) -> Vec<u8> {
    let mut m = f[..8].to_vec();
    m.extend(mask_sockaddr(&f[8..8 + SOCKADDR_LEN]));
    m.extend(mask_sockaddr(&f[8 + SOCKADDR_LEN..]));
    m
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Transcripts per ordered pair of hosts: init connections (which may race, e.g. the root's
/// successor message against the predecessor's ring connect) sorted by kind and bytes, then
/// the point-to-point messages in the order their connections opened.
pub fn by_pair(ts: &[ConnTranscript]) -> BTreeMap<(u8, u8), Vec<ConnTranscript>> {
    let mut pairs: BTreeMap<(u8, u8), Vec<ConnTranscript>> = BTreeMap::new();
    for t in ts {
        pairs.entry((t.from_host, t.to_host)).or_default().push(t.clone());
    }
    for list in pairs.values_mut() {
        let (mut init, msgs): (Vec<_>, Vec<_>) =
            list.drain(..).partition(|t| !matches!(t.kind, ConnKind::Message { .. }));
        init.sort_by(|a, b| (&a.kind, &a.frames).cmp(&(&b.kind, &b.frames)));
        list.extend(init);
        list.extend(msgs);
    }
    pairs
}

/// The differences between two worlds' transcripts, pair by pair, connection by connection.
pub fn differences(a: &[ConnTranscript], b: &[ConnTranscript]) -> Vec<String> {
    let (pa, pb) = (by_pair(a), by_pair(b));
    let mut out = Vec::new();
    let keys: std::collections::BTreeSet<_> = pa.keys().chain(pb.keys()).collect();
    for k in keys {
        let (x, y) = (pa.get(k).map_or(&[][..], Vec::as_slice), pb.get(k).map_or(&[][..], Vec::as_slice));
        if x.len() != y.len() {
            out.push(format!("host {} > host {}: {} connections vs {}", k.0, k.1, x.len(), y.len()));
        }
        for (i, (s, t)) in x.iter().zip(y).enumerate() {
            if s != t {
                let frame = s.frames.iter().zip(&t.frames).position(|(p, q)| p != q);
                out.push(format!(
                    "host {} > host {} connection #{i}: {s} vs {t}{}",
                    k.0,
                    k.1,
                    frame.map_or(String::new(), |f| format!(": frame {f} {} vs {}", s.frames[f], t.frames[f]))
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::FlowInfo;
    use bootsim_core::codec::{encode_frame, encode_sockaddr};
    use std::net::{SocketAddr, SocketAddrV4};

    fn stream(src: u8, dst: u8, frames: &[Vec<u8>], magic: u64) -> CapturedStream {
        let mut bytes = Preamble::bootstrap(magic).encode().to_vec();
        for f in frames {
            encode_frame(&mut bytes, f);
        }
        let a = SocketAddrV4::new([10, 213, 0, src].into(), 1);
        let flow = FlowInfo { conn: 0, pair_conn: 0, src_host: src, dst_host: dst, src: a, dst: a, isn: 0 };
        CapturedStream { flow, bytes }
    }

    #[test]
    fn messages_are_compared_by_bytes_and_addresses_and_magic_are_masked() {
        let msg = |tag: i32, magic| {
            stream(1, 2, &[0i32.to_le_bytes().to_vec(), tag.to_le_bytes().to_vec(), vec![7; 576]], magic)
        };
        let a = transcript(&msg(1, 5), 2, true).unwrap();
        assert_eq!(a.kind, ConnKind::Message { rank: 0, tag: 1, size: 576 });
        assert_eq!(a, transcript(&msg(1, 99), 2, true).unwrap(), "the magic is masked");
        assert_ne!(a, transcript(&msg(2, 5), 2, true).unwrap(), "tags are compared");
        let addr = |p| encode_sockaddr(&SocketAddr::from(([10, 213, 0, 2], p))).to_vec();
        let s1 = transcript(&stream(1, 2, &[addr(4000)], 1), 2, true).unwrap();
        assert_eq!(s1.kind, ConnKind::Successor);
        assert_eq!(s1, transcript(&stream(1, 2, &[addr(5000)], 2), 2, true).unwrap(), "ports are masked");
        let diffs = differences(std::slice::from_ref(&a), &[transcript(&msg(2, 5), 2, true).unwrap()]);
        assert_eq!(diffs.len(), 1);
        assert!(diffs[0].contains("tag 0x1") && diffs[0].contains("tag 0x2"), "{diffs:?}");
        assert!(transcript(&CapturedStream { bytes: vec![1, 2], ..msg(1, 1) }, 2, true).is_err());
    }
}
