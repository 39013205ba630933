//! Message payloads, derived from (seed, from, to, round): the judge knows every correct result
//! without seeing a message, and a wrong chunk tells where it came from.

use bootsim_core::seed::derive;

use crate::protocol::Peers;

/// The ranks rank `r` of `n` sends to in each round, in order.
pub fn sends_to(peers: Peers, r: u32, n: u32) -> Vec<u32> {
    match peers {
        Peers::All => (0..n).filter(|&p| p != r).collect(),
        Peers::Ring => Some((r + 1) % n.max(1)).filter(|&p| p != r).into_iter().collect(),
        Peers::Neighbours => {
            let n = n.max(1);
            let mut p: Vec<u32> = [(r + n - 1) % n, (r + 1) % n].into_iter().filter(|&p| p != r).collect();
            p.sort_unstable();
            p.dedup();
            p
        }
    }
}

/// The ranks rank `r` of `n` receives from in each round, in rank order (its result's order).
pub fn receives_from(peers: Peers, r: u32, n: u32) -> Vec<u32> {
    match peers {
        Peers::All | Peers::Neighbours => sends_to(peers, r, n),
        Peers::Ring => Some((r + n.max(1) - 1) % n.max(1)).filter(|&p| p != r).into_iter().collect(),
    }
}

/// The payload rank `from` sends rank `to` in round `round` (from 1): `len` bytes.
pub fn payload(seed: u64, from: u32, to: u32, round: u32, len: usize) -> Vec<u8> {
    let stream = (u64::from(round) << 40) | (u64::from(from) << 20) | u64::from(to);
    (0..len.div_ceil(8) as u64)
        .flat_map(|word| derive(seed ^ stream, "rendezvous payload", word).to_le_bytes())
        .take(len)
        .collect()
}

/// What rank `r` of `n` must receive in round `round`: the payload of each rank it receives
/// from, in rank order.
pub fn expected(seed: u64, peers: Peers, r: u32, n: u32, round: u32, len: usize) -> Vec<u8> {
    receives_from(peers, r, n).into_iter().flat_map(|p| payload(seed, p, r, round, len)).collect()
}

/// The (from, to, round) whose payload `chunk` is, among `rounds` rounds of `n` ranks.
pub fn provenance(seed: u64, n: u32, rounds: u32, chunk: &[u8]) -> Option<(u32, u32, u32)> {
    (1..=rounds)
        .flat_map(|k| (0..n).flat_map(move |f| (0..n).map(move |t| (f, t, k))))
        .find(|&(f, t, k)| f != t && payload(seed, f, t, k, chunk.len()) == chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_differ_by_every_coordinate_and_name_their_origin() {
        let base = payload(7, 0, 1, 1, 16);
        assert_eq!(base.len(), 16);
        for other in
            [payload(8, 0, 1, 1, 16), payload(7, 2, 1, 1, 16), payload(7, 0, 2, 1, 16), payload(7, 0, 1, 2, 16)]
        {
            assert_ne!(base, other);
        }
        assert_eq!(expected(7, Peers::All, 1, 3, 1, 16)[..16], base[..]);
        assert_eq!(expected(7, Peers::Ring, 1, 3, 1, 16), base);
        assert_eq!((sends_to(Peers::Ring, 2, 3), receives_from(Peers::Ring, 0, 3)), (vec![0], vec![2]));
        assert_eq!((sends_to(Peers::Ring, 0, 1), sends_to(Peers::All, 1, 3)), (vec![], vec![0, 2]));
        // Both neighbours: two peers from 4 ranks up, everyone else below.
        assert_eq!(
            (sends_to(Peers::Neighbours, 0, 4), receives_from(Peers::Neighbours, 2, 4)),
            (vec![1, 3], vec![1, 3])
        );
        assert_eq!((sends_to(Peers::Neighbours, 1, 3), sends_to(Peers::Neighbours, 1, 2)), (vec![0, 2], vec![0]));
        assert_eq!(sends_to(Peers::Neighbours, 0, 1), Vec::<u32>::new());
        assert_eq!(provenance(7, 3, 2, &payload(7, 2, 0, 2, 16)), Some((2, 0, 2)));
        assert_eq!(provenance(7, 3, 2, &[0; 16]), None);
    }
}
