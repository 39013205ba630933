//! NIC receive-side scaling: the Toeplitz hash of a flow's 4-tuple under a per-host random key,
//! through a 128-entry indirection table, picks the RX queue every packet of the flow uses.

use rand_chacha::ChaCha8Rng;
use rand_core::Rng;

/// Indirection-table size (what most NICs and `ethtool -x` show).
const RETA_SIZE: usize = 128;

/// One host's RSS state: its 40-byte Toeplitz key and queue count.
#[derive(Clone, Debug)]
pub(crate) struct Rss {
    key: [u8; 40],
    queues: u16,
}

impl Rss {
    /// A random key from `rng` (Linux fills it randomly at boot), spreading over `queues` queues.
    pub(crate) fn new(rng: &mut ChaCha8Rng, queues: u16) -> Rss {
        let mut key = [0u8; 40];
        rng.fill_bytes(&mut key);
        Rss { key, queues: queues.max(1) }
    }

    /// The RX queue for a packet from `src:src_port` to `dst:dst_port` (hosts stand for IPv4
    /// addresses `10.x.y.z`). The default indirection table maps entry `i` to queue `i % queues`.
    pub(crate) fn queue(&self, src: u32, src_port: u16, dst: u32, dst_port: u16) -> u16 {
        if self.queues == 1 {
            return 0;
        }
        let entry = self.hash(src, src_port, dst, dst_port) as usize % RETA_SIZE;
        (entry % usize::from(self.queues)) as u16
    }

    /// The flow's 32-bit RSS hash (the NIC hands it to the kernel as `skb->hash`).
    pub(crate) fn hash(&self, src: u32, src_port: u16, dst: u32, dst_port: u16) -> u32 {
        let ip = |h: u32| 0x0a00_0000u32 | (h & 0x00ff_ffff);
        toeplitz_words(&self.key, [ip(src), ip(dst), u32::from(src_port) << 16 | u32::from(dst_port)])
    }
}

/// The Toeplitz hash of the 12-byte input whose big-endian 32-bit words are `words`: what
/// [`toeplitz`] gives for those bytes, a word at a time (one step per set input bit, against a
/// step per set bit and per byte, twice as many instructions; it is linear in the input bits).
fn toeplitz_words(key: &[u8; 40], words: [u32; 3]) -> u32 {
    let mut result = 0u32;
    for (j, word) in words.into_iter().enumerate() {
        // Input bit `k` of word `j` (from the most significant) takes key bits
        // `32 j + k .. 32 j + k + 32`: the top half of this window shifted left by `k`.
        let at = 4 * j;
        let window = u64::from_be_bytes([
            key[at],
            key[at + 1],
            key[at + 2],
            key[at + 3],
            key[at + 4],
            key[at + 5],
            key[at + 6],
            key[at + 7],
        ]);
        let mut bits = word;
        while bits != 0 {
            let k = 31 - bits.trailing_zeros();
            result ^= ((window << k) >> 32) as u32;
            bits &= bits - 1;
        }
    }
    result
}

/// The Toeplitz hash (Microsoft RSS specification) of `input` under `key`, a byte at a time:
/// the reference [`toeplitz_words`] is checked against.
#[cfg(test)]
fn toeplitz(key: &[u8; 40], input: &[u8]) -> u32 {
    let mut result = 0u32;
    // The 32-bit key window slides left one bit per input bit; keep 64 bits loaded.
    let mut window = u64::from_be_bytes(key[0..8].try_into().expect("8 bytes"));
    let mut next_key_byte = 8;
    for &byte in input {
        // Each set bit, from the most significant, takes the window shifted by its position.
        let mut bits = byte;
        while bits != 0 {
            let at = bits.leading_zeros();
            result ^= ((window << at) >> 32) as u32;
            bits &= !(0x80 >> at);
        }
        window <<= 8;
        // After each input byte, 8 key bits were consumed: refill the low byte.
        if next_key_byte < key.len() {
            window |= u64::from(key[next_key_byte]);
            next_key_byte += 1;
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::{stream, Purpose};

    /// The Microsoft RSS verification key and one of its published IPv4/TCP vectors.
    #[test]
    fn toeplitz_matches_the_specification_vector() {
        let key: [u8; 40] = [
            0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca,
            0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b,
            0xbe, 0xac, 0x01, 0xfa,
        ];
        // Destination 161.142.100.80:1766, source 66.9.149.187:2794 -> 0x51ccc178.
        let mut input = Vec::new();
        input.extend_from_slice(&[66, 9, 149, 187]);
        input.extend_from_slice(&[161, 142, 100, 80]);
        input.extend_from_slice(&2794u16.to_be_bytes());
        input.extend_from_slice(&1766u16.to_be_bytes());
        assert_eq!(toeplitz(&key, &input), 0x51cc_c178);
        let word = |b: &[u8]| u32::from_be_bytes(b.try_into().unwrap());
        assert_eq!(toeplitz_words(&key, [word(&input[0..4]), word(&input[4..8]), word(&input[8..12])]), 0x51cc_c178);
    }

    proptest::proptest! {
        /// The word-at-a-time hash is the byte-at-a-time one, for any key and 4-tuple.
        #[test]
        fn the_hash_by_words_is_the_hash_by_bytes(
            key in proptest::array::uniform32(proptest::num::u8::ANY),
            tail in proptest::array::uniform8(proptest::num::u8::ANY),
            src: u32, dst: u32, src_port: u16, dst_port: u16,
        ) {
            let mut k = [0u8; 40];
            k[..32].copy_from_slice(&key);
            k[32..].copy_from_slice(&tail);
            let rss = Rss { key: k, queues: 8 };
            let ip = |h: u32| (0x0a00_0000u32 | (h & 0x00ff_ffff)).to_be_bytes();
            let mut input = Vec::new();
            input.extend_from_slice(&ip(src));
            input.extend_from_slice(&ip(dst));
            input.extend_from_slice(&src_port.to_be_bytes());
            input.extend_from_slice(&dst_port.to_be_bytes());
            proptest::prop_assert_eq!(rss.hash(src, src_port, dst, dst_port), toeplitz(&k, &input));
            // Any words, not only the 10.x.y.z addresses the hosts stand for.
            let raw = [src.to_be_bytes(), dst.to_be_bytes(), (u32::from(src_port) << 16 | u32::from(dst_port)).to_be_bytes()];
            let ports = u32::from(src_port) << 16 | u32::from(dst_port);
            proptest::prop_assert_eq!(toeplitz_words(&k, [src, dst, ports]), toeplitz(&k, &raw.concat()));
        }
    }

    #[test]
    fn flows_spread_over_every_queue_and_stick_to_one() {
        let rss = Rss::new(&mut stream(5, Purpose::Setup, 0, 0), 8);
        let mut seen = [0u32; 8];
        for port in 40_000..40_800u16 {
            let q = rss.queue(1, port, 0, 5000);
            assert_eq!(q, rss.queue(1, port, 0, 5000));
            seen[usize::from(q)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
        let one = Rss::new(&mut stream(5, Purpose::Setup, 0, 0), 1);
        assert_eq!(one.queue(1, 40_000, 0, 5000), 0);
    }
}
