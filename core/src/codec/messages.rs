//! The fixed-layout structs NVSHMEM memcpys onto the wire.

use std::net::SocketAddr;

use super::sockaddr::{decode_sockaddr, encode_sockaddr, SOCKADDR_LEN};
use super::{Fingerprint, WireError};

/// `ncclSocketTypeBootstrap`: the only socket type the bootstrap accepts.
pub const SOCKET_TYPE_BOOTSTRAP: i32 = 1;

/// What every connection starts with: `u64 magic` (the unique ID's secret) then `i32 type`.
/// Its `Debug` shows the magic's fingerprint, never the magic.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Preamble {
    /// The session secret from the unique ID.
    pub magic: u64,
    /// Socket type; 1 for bootstrap.
    pub kind: i32,
}

impl std::fmt::Debug for Preamble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preamble").field("magic", &super::RedactedMagic(self.magic)).field("kind", &self.kind).finish()
    }
}

impl Preamble {
    /// Encoded size.
    pub const LEN: usize = 12;

    /// The preamble a bootstrap connection of this session sends.
    pub fn bootstrap(magic: u64) -> Self {
        Preamble { magic, kind: SOCKET_TYPE_BOOTSTRAP }
    }

    /// Raw bytes: magic then type, host order, unframed.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..8].copy_from_slice(&self.magic.to_le_bytes());
        b[8..].copy_from_slice(&self.kind.to_le_bytes());
        b
    }

    /// Parses the raw 12 bytes (no validation).
    pub fn decode(b: &[u8; Self::LEN]) -> Self {
        Preamble {
            magic: u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
            kind: i32::from_le_bytes(b[8..].try_into().expect("4 bytes")),
        }
    }

    /// Checks magic first (a wrong one means a stranger), then type.
    pub fn check(&self, expected_magic: u64) -> Result<(), WireError> {
        if self.magic != expected_magic {
            return Err(WireError::BadMagic { got: Fingerprint::of(self.magic) });
        }
        if self.kind != SOCKET_TYPE_BOOTSTRAP {
            return Err(WireError::BadType { expected: SOCKET_TYPE_BOOTSTRAP, got: self.kind });
        }
        Ok(())
    }
}

/// `struct bootstrap_ext_info {int rank; int nranks; addr listen_root; addr listen}`: 64 bytes
/// a rank sends the root when it checks in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtInfo {
    /// The rank checking in.
    pub rank: i32,
    /// The world size it believes in.
    pub nranks: i32,
    /// Where the root sends this rank its ring successor.
    pub listen_root: SocketAddr,
    /// The rank's peer listener (ring and point-to-point).
    pub listen: SocketAddr,
}

impl ExtInfo {
    /// Encoded size.
    pub const LEN: usize = 8 + 2 * SOCKADDR_LEN;

    /// The struct's 64 bytes.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..4].copy_from_slice(&self.rank.to_le_bytes());
        b[4..8].copy_from_slice(&self.nranks.to_le_bytes());
        b[8..8 + SOCKADDR_LEN].copy_from_slice(&encode_sockaddr(&self.listen_root));
        b[8 + SOCKADDR_LEN..].copy_from_slice(&encode_sockaddr(&self.listen));
        b
    }

    /// Parses the 64 bytes; an unknown address family is an error.
    pub fn decode(b: &[u8; Self::LEN]) -> Result<Self, WireError> {
        Ok(ExtInfo {
            rank: i32::from_le_bytes(b[0..4].try_into().expect("4 bytes")),
            nranks: i32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
            listen_root: decode_sockaddr(b[8..8 + SOCKADDR_LEN].try_into().expect("28 bytes"))?,
            listen: decode_sockaddr(b[8 + SOCKADDR_LEN..].try_into().expect("28 bytes"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preamble_round_trip_and_checks() {
        let p = Preamble::bootstrap(0xdead_beef_0bad_cafe);
        assert_eq!(Preamble::decode(&p.encode()), p);
        assert_eq!(p.check(0xdead_beef_0bad_cafe), Ok(()));
        assert_eq!(p.check(1), Err(WireError::BadMagic { got: Fingerprint::of(0xdead_beef_0bad_cafe) }));
        let shown = p.check(0x4141_4141_4141_4141).unwrap_err().to_string();
        assert!(!shown.contains("dead") && !shown.to_lowercase().contains("4141"), "{shown}");
        let bad = Preamble { magic: 1, kind: 2 };
        assert_eq!(bad.check(1), Err(WireError::BadType { expected: 1, got: 2 }));
    }

    #[test]
    fn ext_info_is_64_bytes_and_round_trips() {
        let info = ExtInfo {
            rank: 3,
            nranks: 16,
            listen_root: "10.0.0.4:41000".parse().unwrap(),
            listen: "[fe80::1]:42000".parse().unwrap(),
        };
        let b = info.encode();
        assert_eq!(b.len(), 64);
        assert_eq!(&b[0..8], &[3, 0, 0, 0, 16, 0, 0, 0]);
        assert_eq!(ExtInfo::decode(&b), Ok(info));
    }
}
