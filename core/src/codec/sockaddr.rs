//! `union ncclSocketAddress`: a Linux `sockaddr_in` or `sockaddr_in6` in 28 bytes.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use super::WireError;

/// Size of the address union on the wire.
pub const SOCKADDR_LEN: usize = 28;
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// Lays an address out as Linux does: family in host order, port and flow info in network order,
/// scope id in host order, the rest zero.
pub fn encode_sockaddr(addr: &SocketAddr) -> [u8; SOCKADDR_LEN] {
    let mut b = [0u8; SOCKADDR_LEN];
    match addr {
        SocketAddr::V4(a) => {
            b[0..2].copy_from_slice(&AF_INET.to_le_bytes());
            b[2..4].copy_from_slice(&a.port().to_be_bytes());
            b[4..8].copy_from_slice(&a.ip().octets());
        }
        SocketAddr::V6(a) => {
            b[0..2].copy_from_slice(&AF_INET6.to_le_bytes());
            b[2..4].copy_from_slice(&a.port().to_be_bytes());
            b[4..8].copy_from_slice(&a.flowinfo().to_be_bytes());
            b[8..24].copy_from_slice(&a.ip().octets());
            b[24..28].copy_from_slice(&a.scope_id().to_le_bytes());
        }
    }
    b
}

/// Reads an address back; any family but AF_INET/AF_INET6 is an error.
pub fn decode_sockaddr(b: &[u8; SOCKADDR_LEN]) -> Result<SocketAddr, WireError> {
    let family = u16::from_le_bytes([b[0], b[1]]);
    let port = u16::from_be_bytes([b[2], b[3]]);
    match family {
        AF_INET => Ok(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(b[4], b[5], b[6], b[7]), port))),
        AF_INET6 => {
            let ip: [u8; 16] = b[8..24].try_into().expect("16 bytes");
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(ip),
                port,
                u32::from_be_bytes(b[4..8].try_into().expect("4 bytes")),
                u32::from_le_bytes(b[24..28].try_into().expect("4 bytes")),
            )))
        }
        family => Err(WireError::BadAddressFamily { family }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_layout_is_linux_sockaddr_in() {
        let b = encode_sockaddr(&"192.168.1.2:9000".parse().unwrap());
        assert_eq!(&b[..8], &[2, 0, 0x23, 0x28, 192, 168, 1, 2]);
        assert!(b[8..].iter().all(|&x| x == 0));
    }

    #[test]
    fn round_trips_and_rejects_unknown_family() {
        for a in ["10.1.2.3:1", "[::1]:65535", "[fe80::2%7]:80"] {
            let addr: SocketAddr = a.parse().unwrap();
            assert_eq!(decode_sockaddr(&encode_sockaddr(&addr)), Ok(addr), "{a}");
        }
        let mut b = [0u8; SOCKADDR_LEN];
        b[0] = 1;
        assert_eq!(decode_sockaddr(&b), Err(WireError::BadAddressFamily { family: 1 }));
    }
}
