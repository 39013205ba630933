//! Typed decoding errors: every malformed input names what was wrong.

/// Why bytes from a connection could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum WireError {
    /// The connection preamble carried another session's magic (or garbage). Neither value is
    /// kept: the expected one is the session's secret, and the received one may be another
    /// session's; only a short fingerprint of the received bytes, to tell strangers apart.
    #[error("bad magic (not this session's; received bytes fingerprint {got})")]
    BadMagic {
        /// Fingerprint of the 8 magic bytes received.
        got: Fingerprint,
    },
    /// The connection preamble's socket type was not 1 (bootstrap).
    #[error("bad socket type {got} (expected {expected})")]
    BadType {
        /// The socket type a bootstrap connection carries (1).
        expected: i32,
        /// The socket type received.
        got: i32,
    },
    /// A frame length was negative.
    #[error("negative frame length {len}")]
    NegativeLength {
        /// The length received, in bytes.
        len: i32,
    },
    /// A frame length exceeded the configured maximum: refused before any allocation.
    #[error("frame length {len} exceeds the maximum of {max} bytes")]
    TooLarge {
        /// The length received, in bytes.
        len: usize,
        /// The configured maximum, in bytes.
        max: usize,
    },
    /// A frame that must have a fixed size had another.
    #[error("{what} frame of {got} bytes (expected {expected})")]
    WrongLength {
        /// Which frame it was.
        what: &'static str,
        /// Its fixed size, in bytes.
        expected: usize,
        /// The size received, in bytes.
        got: usize,
    },
    /// A socket address with an address family other than AF_INET or AF_INET6.
    #[error("unknown address family {family}")]
    BadAddressFamily {
        /// The address family received.
        family: u16,
    },
    /// A header named a rank outside the world.
    #[error("header names rank {rank}, outside a world of {nranks}")]
    RankOutOfRange {
        /// The rank the header named.
        rank: i32,
        /// The number of ranks in the world.
        nranks: u32,
    },
    /// A sequenced header repeated a sequence number already taken or queued.
    #[error("duplicate sequence number {seq} from rank {rank}")]
    DuplicateSequence {
        /// The sending rank.
        rank: u32,
        /// The repeated sequence number.
        seq: u64,
    },
    /// A second persistent stream from a rank that already has one.
    #[error("second persistent stream from rank {rank}")]
    DuplicateStream {
        /// The rank that opened a second stream.
        rank: u32,
    },
    /// The peer closed the connection in the middle of an item.
    #[error("connection closed after {have} of {needed} bytes of {what}")]
    Truncated {
        /// The item being read.
        what: &'static str,
        /// The item's size, in bytes.
        needed: usize,
        /// The bytes of it received before the close.
        have: usize,
    },
    /// The connection timed out in the middle of an item: this host's kernel gave up
    /// retransmitting to the peer (`ETIMEDOUT`); the peer did not close it.
    #[error("connection timed out after {have} of {needed} bytes of {what}")]
    TimedOut {
        /// The item being read.
        what: &'static str,
        /// The item's size, in bytes.
        needed: usize,
        /// The bytes of it received before the timeout.
        have: usize,
    },
}

/// A 16-bit fingerprint of 8 received bytes: enough to tell two strangers apart in a log, too
/// short to recover them (a session magic is a secret).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub u16);

impl Fingerprint {
    /// The fingerprint of `v` (splitmix64's finaliser, top 16 bits).
    pub fn of(v: u64) -> Fingerprint {
        let mut z = v.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Fingerprint(((z ^ (z >> 31)) >> 48) as u16)
    }
}

/// A session magic as `Debug` shows it, in every struct that holds one: `fingerprint abcd`,
/// never the value (the magic is the session's secret).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RedactedMagic(pub u64);

impl std::fmt::Debug for RedactedMagic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fingerprint {}", Fingerprint::of(self.0))
    }
}

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04x}", self.0)
    }
}
