//! How far an accept order is from the connect order.

use serde::Serialize;

/// Accept order compared with connect order (the sorted indices).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AcceptOrderStats {
    /// Connections accepted.
    pub connections: u32,
    /// Positions holding a different index than in connect order.
    pub misplaced: u32,
    /// Pairs accepted in the opposite order to their connects.
    pub inversions: u64,
    /// Disjoint adjacent positions whose two indices are exactly swapped (`1,0`).
    pub pair_swaps: u32,
    /// Whether the order is out of order and every misplaced position is in such a swap.
    pub only_pair_swaps: bool,
    /// Largest distance between where an index was accepted and where it was connected.
    pub max_displacement: u32,
    /// Indices accepted more than once (counted beyond their first time).
    pub duplicates: u32,
}

impl AcceptOrderStats {
    /// Compares `order` (indices in accept order) with the same indices sorted.
    pub fn from_order(order: &[u32]) -> Self {
        let mut sorted = order.to_vec();
        sorted.sort_unstable();
        let misplaced = order.iter().zip(&sorted).filter(|(a, b)| a != b).count() as u32;
        let mut pair_swaps = 0;
        let mut i = 0;
        while i + 1 < order.len() {
            if order[i] != sorted[i] && order[i] == sorted[i + 1] && order[i + 1] == sorted[i] {
                pair_swaps += 1;
                i += 2;
            } else {
                i += 1;
            }
        }
        let max_displacement = order
            .iter()
            .enumerate()
            .map(|(pos, v)| pos.abs_diff(sorted.partition_point(|s| s < v)) as u32)
            .max()
            .unwrap_or(0);
        let mut distinct = sorted.clone();
        distinct.dedup();
        AcceptOrderStats {
            connections: order.len() as u32,
            misplaced,
            inversions: count_inversions(&mut order.to_vec()),
            pair_swaps,
            only_pair_swaps: misplaced > 0 && misplaced == 2 * pair_swaps,
            max_displacement,
            duplicates: (sorted.len() - distinct.len()) as u32,
        }
    }

    /// Whether every connection was accepted in connect order.
    pub fn in_order(&self) -> bool {
        self.misplaced == 0
    }
}

/// Pairs `i < j` with `v[i] > v[j]`, by merge sort (sorts `v`).
fn count_inversions(v: &mut [u32]) -> u64 {
    if v.len() < 2 {
        return 0;
    }
    let mid = v.len() / 2;
    let mut n = count_inversions(&mut v[..mid]) + count_inversions(&mut v[mid..]);
    let (left, right) = (v[..mid].to_vec(), v[mid..].to_vec());
    let (mut i, mut j) = (0, 0);
    for slot in v.iter_mut() {
        if j >= right.len() || (i < left.len() && left[i] <= right[j]) {
            *slot = left[i];
            i += 1;
        } else {
            *slot = right[j];
            j += 1;
            n += (left.len() - i) as u64;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute_inversions(v: &[u32]) -> u64 {
        let mut n = 0;
        for i in 0..v.len() {
            for j in i + 1..v.len() {
                n += u64::from(v[i] > v[j]);
            }
        }
        n
    }

    #[test]
    fn in_order_and_empty() {
        for order in [&[][..], &[0], &[0, 1, 2, 3]] {
            let s = AcceptOrderStats::from_order(order);
            assert!(s.in_order());
            assert_eq!((s.inversions, s.pair_swaps, s.max_displacement), (0, 0, 0));
            assert!(!s.only_pair_swaps);
        }
    }

    #[test]
    fn exact_pair_swaps() {
        let s = AcceptOrderStats::from_order(&[1, 0, 3, 2, 5, 4]);
        assert_eq!(s.connections, 6);
        assert_eq!(s.misplaced, 6);
        assert_eq!(s.inversions, 3);
        assert_eq!(s.pair_swaps, 3);
        assert!(s.only_pair_swaps);
        assert_eq!(s.max_displacement, 1);
        let s = AcceptOrderStats::from_order(&[1, 0, 2, 3]);
        assert_eq!((s.misplaced, s.pair_swaps, s.only_pair_swaps), (2, 1, true));
    }

    #[test]
    fn odd_first_then_evens() {
        // Every even connection held 20 ms: 1,3,5,0,2,4.
        let s = AcceptOrderStats::from_order(&[1, 3, 5, 0, 2, 4]);
        assert_eq!(s.misplaced, 6);
        assert_eq!(s.inversions, 6);
        assert_eq!(s.pair_swaps, 0);
        assert!(!s.only_pair_swaps);
        assert_eq!(s.max_displacement, 3);
    }

    #[test]
    fn rotation_is_not_a_pair_swap() {
        let s = AcceptOrderStats::from_order(&[1, 2, 0]);
        assert_eq!((s.misplaced, s.inversions, s.pair_swaps, s.max_displacement), (3, 2, 0, 2));
    }

    #[test]
    fn missing_and_duplicate_indices_do_not_panic() {
        let s = AcceptOrderStats::from_order(&[5, 2, 2, 9]);
        assert_eq!(s.duplicates, 1);
        assert_eq!(s.connections, 4);
        assert_eq!(s.inversions, 2);
        let s = AcceptOrderStats::from_order(&[0, 2, 3]);
        assert!(s.in_order());
    }

    #[test]
    fn inversions_match_brute_force() {
        let mut x: u32 = 12345;
        for len in 0..40 {
            let v: Vec<u32> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    (x >> 16) % 17
                })
                .collect();
            assert_eq!(AcceptOrderStats::from_order(&v).inversions, brute_inversions(&v), "{v:?}");
        }
    }
}
