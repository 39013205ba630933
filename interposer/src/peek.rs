//! What a connection's first bytes say about it: NVSHMEM's point-to-point header, read with
//! bootsim-core's codec (`[u64 magic][i32 1]` then the framed `i32 rank` and `i32 tag`).

use bootsim_core::codec::{Preamble, SOCKET_TYPE_BOOTSTRAP};

/// Bytes to peek at: the preamble and two framed i32s.
pub const HEADER_LEN: usize = Preamble::LEN + 2 * 8;

/// The (sender rank, tag) of an NVSHMEM point-to-point message whose first bytes are `b`, or
/// `None` when they are too short or not such a header (a ring or root connection, another
/// program's protocol).
pub fn nvshmem_header(b: &[u8]) -> Option<(i32, i32)> {
    let head: &[u8; HEADER_LEN] = b.get(..HEADER_LEN)?.try_into().ok()?;
    let pre = Preamble::decode(head[..Preamble::LEN].try_into().ok()?);
    let i32_at = |at: usize| i32::from_le_bytes(head[at..at + 4].try_into().expect("4 bytes"));
    let l = Preamble::LEN;
    (pre.kind == SOCKET_TYPE_BOOTSTRAP && i32_at(l) == 4 && i32_at(l + 8) == 4).then(|| (i32_at(l + 4), i32_at(l + 12)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bootsim_core::codec::encode_frame;

    #[test]
    fn reads_sender_and_tag_of_a_p2p_message_only() {
        let mut b = Preamble::bootstrap(0xfeed).encode().to_vec();
        encode_frame(&mut b, &3i32.to_le_bytes());
        encode_frame(&mut b, &0x0100_0001i32.to_le_bytes());
        encode_frame(&mut b, &[7; 24]);
        assert_eq!(nvshmem_header(&b), Some((3, 0x0100_0001)));
        assert_eq!(nvshmem_header(&b[..HEADER_LEN - 1]), None, "too short");
        // A ring connection: the preamble then a framed 28-byte address.
        let mut ring = Preamble::bootstrap(0xfeed).encode().to_vec();
        encode_frame(&mut ring, &[0; 28]);
        assert_eq!(nvshmem_header(&ring), None);
        assert_eq!(nvshmem_header(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n...."), None);
    }
}
