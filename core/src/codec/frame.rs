//! Incremental framing: bytes arrive in any chunking; items are pulled out as they complete.

use super::messages::Preamble;
use super::WireError;
use crate::seam::CloseReason;

/// Hashes what is left to read (not how the consumed bytes were chunked or compacted): two
/// readers that will decode the same items hash alike.
impl std::hash::Hash for FrameReader {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.unread().hash(state);
        self.eof.hash(state);
        // An end of stream and a reset read alike (the same items, the same errors), so they
        // hash alike, as before close reasons existed; a timeout's errors differ.
        if self.timed_out {
            self.timed_out.hash(state);
        }
    }
}

/// Encodes one frame: `i32` length (host order) then the bytes.
pub fn encode_frame(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = i32::try_from(bytes.len()).expect("frames are bounded by max_message, far below 2 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(bytes);
}

/// A connection's receive buffer with pull-style, strict decoding.
///
/// Each `read_*` returns `Ok(None)` until the item is complete, consumes it when it is, and never
/// allocates for a length it has not validated.
#[derive(Debug, Default, Clone)]
pub struct FrameReader {
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    /// The connection ended by timing out, not by the peer's close: items it cut short are
    /// [`WireError::TimedOut`], not [`WireError::Truncated`].
    timed_out: bool,
}

impl FrameReader {
    /// An empty reader.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes received from the peer.
    pub fn push(&mut self, bytes: &[u8]) {
        // Drop consumed bytes once they are at least half the buffer (amortised O(1) per byte).
        if self.pos > 0 && self.pos * 2 >= self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received and not yet consumed, in order.
    fn unread(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Records that the peer closed its side: incomplete items then fail as truncated
    /// (`push_close(CloseReason::Eof)`).
    pub fn push_eof(&mut self) {
        self.push_close(CloseReason::Eof);
    }

    /// Records that the connection ended for `reason`: incomplete items then fail as
    /// truncated (the peer closed it or reset it) or timed out (this host's kernel gave up).
    /// The first end counts, as a socket reports its error once.
    pub fn push_close(&mut self, reason: CloseReason) {
        if !self.eof {
            self.timed_out = reason == CloseReason::TimedOut;
        }
        self.eof = true;
    }

    /// The error for an item of `needed` bytes, `have` of them here, that the connection's end
    /// cut short: [`WireError::Truncated`], or [`WireError::TimedOut`] if it timed out.
    pub fn cut_short(&self, what: &'static str, needed: usize, have: usize) -> WireError {
        if self.timed_out {
            WireError::TimedOut { what, needed, have }
        } else {
            WireError::Truncated { what, needed, have }
        }
    }

    /// True once the connection ended: the peer closed its side, reset it, or it timed out.
    pub fn is_eof(&self) -> bool {
        self.eof
    }

    /// Bytes received and not yet consumed.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, what: &'static str, n: usize) -> Result<Option<&[u8]>, WireError> {
        let have = self.buffered();
        if have < n {
            return if self.eof { Err(self.cut_short(what, n, have)) } else { Ok(None) };
        }
        let start = self.pos;
        self.pos += n;
        Ok(Some(&self.buf[start..start + n]))
    }

    /// Reads the 12-byte connection preamble and checks magic and type.
    pub fn read_preamble(&mut self, expected_magic: u64) -> Result<Option<Preamble>, WireError> {
        let Some(b) = self.take("connection preamble", Preamble::LEN)? else { return Ok(None) };
        let p = Preamble::decode(b.try_into().expect("12 bytes"));
        p.check(expected_magic)?;
        Ok(Some(p))
    }

    /// The length of the next frame once its 4 bytes are here, validated against `max`.
    pub fn peek_frame_len(&self, max: usize) -> Result<Option<usize>, WireError> {
        self.peek_frame_len_at(0, max)
    }

    /// The length of the frame starting `offset` bytes into the unconsumed input.
    pub fn peek_frame_len_at(&self, offset: usize, max: usize) -> Result<Option<usize>, WireError> {
        let have = self.buffered().saturating_sub(offset);
        if have < 4 {
            return if self.eof { Err(self.cut_short("frame length", 4, have)) } else { Ok(None) };
        }
        let at = self.pos + offset;
        let raw = i32::from_le_bytes(self.buf[at..at + 4].try_into().expect("4 bytes"));
        let len = usize::try_from(raw).map_err(|_| WireError::NegativeLength { len: raw })?;
        if len > max {
            return Err(WireError::TooLarge { len, max });
        }
        Ok(Some(len))
    }

    /// Reads one whole frame of at most `max` bytes.
    pub fn read_frame(&mut self, what: &'static str, max: usize) -> Result<Option<Vec<u8>>, WireError> {
        Ok(self.read_frame_slice(what, max)?.map(<[u8]>::to_vec))
    }

    /// Reads one whole frame of at most `max` bytes, borrowed from the receive buffer (no
    /// allocation per frame: a reader that copies it where it belongs needs no owned copy).
    pub fn read_frame_slice(&mut self, what: &'static str, max: usize) -> Result<Option<&[u8]>, WireError> {
        let Some(len) = self.peek_frame_len(max)? else { return Ok(None) };
        if self.buffered() < 4 + len {
            return if self.eof { Err(self.cut_short(what, 4 + len, self.buffered())) } else { Ok(None) };
        }
        self.pos += 4;
        self.take(what, len)
    }

    /// Reads one frame that must be exactly `N` bytes (a rank, a tag, a version, an address).
    pub fn read_fixed<const N: usize>(&mut self, what: &'static str) -> Result<Option<[u8; N]>, WireError> {
        let Some(len) = self.peek_frame_len(usize::MAX)? else { return Ok(None) };
        if len != N {
            return Err(WireError::WrongLength { what, expected: N, got: len });
        }
        Ok(self.read_frame_slice(what, N)?.map(|v| v.try_into().expect("length checked")))
    }

    /// The `i32` of the next frame without consuming it (the frame must be exactly 4 bytes).
    pub fn peek_i32(&self, what: &'static str) -> Result<Option<i32>, WireError> {
        let Some(len) = self.peek_frame_len(usize::MAX)? else { return Ok(None) };
        if len != 4 {
            return Err(WireError::WrongLength { what, expected: 4, got: len });
        }
        if self.buffered() < 8 {
            return if self.eof { Err(self.cut_short(what, 8, self.buffered())) } else { Ok(None) };
        }
        Ok(Some(i32::from_le_bytes(self.buf[self.pos + 4..self.pos + 8].try_into().expect("4 bytes"))))
    }

    /// Reads one frame holding a single host-order `i32`.
    pub fn read_i32(&mut self, what: &'static str) -> Result<Option<i32>, WireError> {
        Ok(self.read_fixed::<4>(what)?.map(i32::from_le_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(items: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for i in items {
            encode_frame(&mut out, i);
        }
        out
    }

    #[test]
    fn frames_survive_any_chunking() {
        let bytes = frames(&[b"abc", b"", &[7u8; 300]]);
        for chunk in 1..=bytes.len() {
            let mut r = FrameReader::new();
            let mut got = Vec::new();
            for c in bytes.chunks(chunk) {
                r.push(c);
                while let Some(f) = r.read_frame("payload", 1024).unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(got, vec![b"abc".to_vec(), vec![], vec![7u8; 300]], "chunk size {chunk}");
            assert_eq!(r.buffered(), 0);
        }
    }

    #[test]
    fn negative_and_huge_lengths_are_refused_before_allocation() {
        let mut r = FrameReader::new();
        r.push(&(-5i32).to_le_bytes());
        assert_eq!(r.read_frame("payload", 100), Err(WireError::NegativeLength { len: -5 }));
        let mut r = FrameReader::new();
        r.push(&i32::MAX.to_le_bytes());
        assert_eq!(r.read_frame("payload", 1 << 20), Err(WireError::TooLarge { len: i32::MAX as usize, max: 1 << 20 }));
    }

    #[test]
    fn truncation_is_an_error_only_after_eof() {
        let mut r = FrameReader::new();
        r.push(&frames(&[b"hello"])[..6]);
        assert_eq!(r.read_frame("payload", 100), Ok(None));
        r.push_eof();
        assert_eq!(r.read_frame("payload", 100), Err(WireError::Truncated { what: "payload", needed: 9, have: 6 }));
        let mut r = FrameReader::new();
        r.push(&[1, 0]);
        r.push_eof();
        assert_eq!(r.read_i32("rank"), Err(WireError::Truncated { what: "frame length", needed: 4, have: 2 }));
    }

    #[test]
    fn a_timed_out_connection_cuts_an_item_short_as_a_timeout_and_a_reset_as_an_eof() {
        let cut = |reason| {
            let mut r = FrameReader::new();
            r.push(&frames(&[b"hello"])[..6]);
            r.push_close(reason);
            (r.read_frame("payload", 100), r)
        };
        let (timed_out, t) = cut(CloseReason::TimedOut);
        assert_eq!(timed_out, Err(WireError::TimedOut { what: "payload", needed: 9, have: 6 }));
        let (reset, r) = cut(CloseReason::Reset);
        assert_eq!(reset, Err(WireError::Truncated { what: "payload", needed: 9, have: 6 }));
        let (eof, e) = cut(CloseReason::Eof);
        assert_eq!(eof, reset);
        // Whole items still read first, as a read returns the bytes before the error.
        let mut w = FrameReader::new();
        w.push(&frames(&[b"hi"]));
        w.push_close(CloseReason::TimedOut);
        assert_eq!(w.read_frame("payload", 100), Ok(Some(b"hi".to_vec())));
        assert_eq!(w.read_i32("rank"), Err(WireError::TimedOut { what: "frame length", needed: 4, have: 0 }));
        let hash = |r: &FrameReader| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            r.hash(&mut h);
            h.finish()
        };
        assert_eq!(hash(&e), hash(&r), "an end of stream and a reset read alike");
        assert_ne!(hash(&t), hash(&r), "a timeout reads otherwise");
    }

    #[test]
    fn fixed_frames_check_their_length() {
        let mut r = FrameReader::new();
        r.push(&frames(&[&[1, 2, 3]]));
        assert_eq!(r.read_i32("tag"), Err(WireError::WrongLength { what: "tag", expected: 4, got: 3 }));
        let mut r = FrameReader::new();
        r.push(&frames(&[&42i32.to_le_bytes()]));
        assert_eq!(r.read_i32("tag"), Ok(Some(42)));
    }
}
