//! Independent, named sub-seeds of a case seed: adding a draw in one place never shifts another.

/// Derives the seed of the stream `purpose` number `index` from the case seed (FNV-1a of the
/// name, mixed with splitmix64).
pub fn derive(seed: u64, purpose: &str, index: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in purpose.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut x = seed ^ h ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
