//! Typed decoding errors: every malformed input names what was wrong.

/// Why bytes from a connection could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum WireError {
    /// The connection preamble carried another session's magic (or garbage).
    #[error("bad magic 0x{got:016x} (expected 0x{expected:016x})")]
    BadMagic { expected: u64, got: u64 },
    /// The connection preamble's socket type was not 1 (bootstrap).
    #[error("bad socket type {got} (expected {expected})")]
    BadType { expected: i32, got: i32 },
    /// A frame length was negative.
    #[error("negative frame length {len}")]
    NegativeLength { len: i32 },
    /// A frame length exceeded the configured maximum: refused before any allocation.
    #[error("frame length {len} exceeds the maximum of {max} bytes")]
    TooLarge { len: usize, max: usize },
    /// A frame that must have a fixed size had another.
    #[error("{what} frame of {got} bytes (expected {expected})")]
    WrongLength { what: &'static str, expected: usize, got: usize },
    /// A socket address with an address family other than AF_INET or AF_INET6.
    #[error("unknown address family {family}")]
    BadAddressFamily { family: u16 },
    /// A header named a rank outside the world.
    #[error("header names rank {rank}, outside a world of {nranks}")]
    RankOutOfRange { rank: i32, nranks: u32 },
    /// A sequenced header repeated a sequence number already taken or queued.
    #[error("duplicate sequence number {seq} from rank {rank}")]
    DuplicateSequence { rank: u32, seq: u64 },
    /// A second persistent stream from a rank that already has one.
    #[error("second persistent stream from rank {rank}")]
    DuplicateStream { rank: u32 },
    /// The peer closed the connection in the middle of an item.
    #[error("connection closed after {have} of {needed} bytes of {what}")]
    Truncated { what: &'static str, needed: usize, have: usize },
}
