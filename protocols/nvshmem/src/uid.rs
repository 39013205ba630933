//! The 128-byte unique ID the application shares: version, root address, session magic.

use std::net::SocketAddr;

use bootsim_core::codec::{decode_sockaddr, encode_sockaddr, WireError, SOCKADDR_LEN};

/// `NVSHMEMX_UNIQUEID_INITIALIZER`'s version, `(1 << 16) + 128`: every NVSHMEM-compatible variant.
pub const NVSHMEM_UID_VERSION: i32 = (1 << 16) + 128;

/// `nvshmemx_uniqueid_t` as the UID plugin fills it. Its `Debug` shows the magic's
/// fingerprint only: the magic is the session's secret.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueId {
    /// Wire-compatibility version, checked at the root.
    pub version: i32,
    /// Where the root listens.
    pub root: SocketAddr,
    /// The session secret every connection's preamble must carry.
    pub magic: u64,
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UniqueId")
            .field("version", &self.version)
            .field("root", &self.root)
            .field("magic", &bootsim_core::codec::RedactedMagic(self.magic))
            .finish()
    }
}

impl UniqueId {
    /// Encoded size of `nvshmemx_uniqueid_t`.
    pub const LEN: usize = 128;

    /// The 128 bytes: version at 0, address at 4, magic at 32, zeros after.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..4].copy_from_slice(&self.version.to_le_bytes());
        b[4..4 + SOCKADDR_LEN].copy_from_slice(&encode_sockaddr(&self.root));
        b[32..40].copy_from_slice(&self.magic.to_le_bytes());
        b
    }

    /// Parses the 128 bytes.
    pub fn decode(b: &[u8; Self::LEN]) -> Result<Self, WireError> {
        Ok(UniqueId {
            version: i32::from_le_bytes(b[0..4].try_into().expect("4 bytes")),
            root: decode_sockaddr(b[4..4 + SOCKADDR_LEN].try_into().expect("28 bytes"))?,
            magic: u64::from_le_bytes(b[32..40].try_into().expect("8 bytes")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_round_trips() {
        let uid = UniqueId {
            version: NVSHMEM_UID_VERSION,
            root: "10.0.0.1:5000".parse().unwrap(),
            magic: 0x1122_3344_5566_7788,
        };
        let b = uid.encode();
        assert_eq!(NVSHMEM_UID_VERSION, 65664);
        assert_eq!(&b[0..4], &65664i32.to_le_bytes());
        assert_eq!(b[32], 0x88);
        assert!(b[40..].iter().all(|&x| x == 0));
        assert_eq!(UniqueId::decode(&b), Ok(uid));
    }
}
