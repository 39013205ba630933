//! The 16-byte canary every connected QP sends to its peer, the work-request ids that tag the
//! completions, and the layout of the registered buffer they live in.
//!
//! A QP connected to the wrong remote QP (a cross-wired handle) can still deliver data: an RC
//! responder accepts any packet addressed to its QPN that carries the expected PSN, and with
//! ibverbs 0.9.2 every QP starts at PSN 0. The canary therefore names its sender, receiver and
//! QP index, so the receiver can tell that it came from the wrong place.

use std::fmt;
use std::ops::Range;

/// `{sender rank u32, receiver rank u32, qp index u32, magic u32}`, little-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Canary {
    /// Rank that sent it.
    pub sender: u32,
    /// Rank it was meant for.
    pub receiver: u32,
    /// Index of the sending QP among the sender's K QPs toward `receiver`.
    pub qp: u32,
    /// [`Canary::MAGIC`] for a real canary.
    pub magic: u32,
}

impl Canary {
    /// Encoded size.
    pub const SIZE: usize = 16;
    /// `"BSC1"` read as a little-endian u32.
    pub const MAGIC: u32 = u32::from_le_bytes(*b"BSC1");

    /// The canary `sender` sends on its `qp`-th QP toward `receiver`.
    pub fn new(sender: u32, receiver: u32, qp: u32) -> Canary {
        Canary { sender, receiver, qp, magic: Self::MAGIC }
    }

    /// The canary's bytes.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        for (i, v) in [self.sender, self.receiver, self.qp, self.magic].into_iter().enumerate() {
            b[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// Reads 16 bytes; the magic is not checked (see [`Canary::is_valid`]).
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Canary {
        let at = |i: usize| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().expect("4 bytes"));
        Canary { sender: at(0), receiver: at(1), qp: at(2), magic: at(3) }
    }

    /// True when the magic is right.
    pub fn is_valid(&self) -> bool {
        self.magic == Self::MAGIC
    }
}

impl fmt::Display for Canary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "canary rank {} -> rank {} qp {}", self.sender, self.receiver, self.qp)?;
        if !self.is_valid() {
            write!(f, " (bad magic {:#010x})", self.magic)?;
        }
        Ok(())
    }
}

/// Which queue a work request (and its completion) belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The send queue: the canary going out.
    Send,
    /// The receive queue: the peer's canary coming in.
    Recv,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Send => "send",
            Side::Recv => "recv",
        })
    }
}

/// `wr_id` of the work request for QP `index` (flat layout index) on `side`:
/// `index << 1 | (side == Recv)`.
pub fn wr_id(index: usize, side: Side) -> u64 {
    ((index as u64) << 1) | u64::from(side == Side::Recv)
}

/// Inverse of [`wr_id`].
pub fn parse_wr_id(wr_id: u64) -> (usize, Side) {
    let side = if wr_id & 1 == 1 { Side::Recv } else { Side::Send };
    ((wr_id >> 1) as usize, side)
}

/// Bytes of the registered buffer per QP: a receive slot and a send slot of 16 bytes each.
pub const SLOT_STRIDE: usize = 2 * Canary::SIZE;

/// Size of the registered buffer for `nqps` QPs.
pub fn buffer_len(nqps: usize) -> usize {
    nqps * SLOT_STRIDE
}

/// Where QP `index`'s incoming canary lands.
pub fn recv_range(index: usize) -> Range<usize> {
    index * SLOT_STRIDE..index * SLOT_STRIDE + Canary::SIZE
}

/// Where QP `index`'s outgoing canary is written.
pub fn send_range(index: usize) -> Range<usize> {
    index * SLOT_STRIDE + Canary::SIZE..(index + 1) * SLOT_STRIDE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canary_layout() {
        let c = Canary::new(3, 1, 7);
        let b = c.to_bytes();
        assert_eq!(&b[0..4], &[3, 0, 0, 0]);
        assert_eq!(&b[4..8], &[1, 0, 0, 0]);
        assert_eq!(&b[8..12], &[7, 0, 0, 0]);
        assert_eq!(&b[12..16], b"BSC1");
        assert_eq!(Canary::from_bytes(&b), c);
        assert!(c.is_valid());
        assert_eq!(c.to_string(), "canary rank 3 -> rank 1 qp 7");
        let zero = Canary::from_bytes(&[0; 16]);
        assert!(!zero.is_valid());
        assert_eq!(zero.to_string(), "canary rank 0 -> rank 0 qp 0 (bad magic 0x00000000)");
    }

    #[test]
    fn wr_ids_roundtrip() {
        for i in [0usize, 1, 2, 47, 1 << 20] {
            for side in [Side::Send, Side::Recv] {
                assert_eq!(parse_wr_id(wr_id(i, side)), (i, side));
            }
        }
        assert_ne!(wr_id(1, Side::Send), wr_id(0, Side::Recv));
    }

    #[test]
    fn buffer_slots_are_disjoint() {
        assert_eq!(buffer_len(3), 96);
        let mut seen = vec![false; buffer_len(3)];
        for i in 0..3 {
            for r in [recv_range(i), send_range(i)] {
                assert_eq!(r.len(), 16);
                for b in r {
                    assert!(!seen[b]);
                    seen[b] = true;
                }
            }
        }
        assert!(seen.into_iter().all(|s| s));
    }
}
