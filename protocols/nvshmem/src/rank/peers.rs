//! A rank's per-peer tables, kept compact: a world of n ranks holds n of each, so at 1024
//! ranks a table of 32-byte entries is 32 MiB across the world.
//!
//! Both types hash exactly as the `Vec` they stand for, so an explorer's fingerprints of rank
//! states are unchanged by the compact form.

use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// A per-peer table that takes no memory until an entry is written: the per-message transport
/// never writes the sequenced and persistent transports' tables.
#[derive(Clone, Debug)]
pub(crate) struct PeerVec<T> {
    n: usize,
    /// Empty while every entry is `T::default()`, else all `n` entries.
    v: Vec<T>,
}

impl<T: Copy + Default> PeerVec<T> {
    /// `n` entries, all `T::default()`.
    pub(crate) fn new(n: usize) -> PeerVec<T> {
        PeerVec { n, v: Vec::new() }
    }

    /// Entry `i`.
    ///
    /// # Panics
    /// If `i` is not below `n`, as indexing would.
    pub(crate) fn get(&self, i: usize) -> T {
        if self.v.is_empty() {
            assert!(i < self.n, "peer {i} of {}", self.n);
            T::default()
        } else {
            self.v[i]
        }
    }

    /// Entry `i`, to write (the table takes its memory now).
    pub(crate) fn get_mut(&mut self, i: usize) -> &mut T {
        if self.v.is_empty() {
            self.v = vec![T::default(); self.n];
        }
        &mut self.v[i]
    }
}

impl<T: Copy + Default + Hash> Hash for PeerVec<T> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        if self.v.is_empty() {
            vec![T::default(); self.n].hash(h);
        } else {
            self.v.hash(h);
        }
    }
}

/// Every peer's listener address: nothing per peer while peer p listens at the first one's IPv4
/// address plus p on the same port (as in every simulated world: n² entries at once, 100 MB at
/// 4096 ranks even at 6 bytes), else 6 bytes each while all are IPv4, else the full
/// `SocketAddr` (32 bytes).
#[derive(Clone, Debug)]
pub(crate) enum PeerAddrs {
    /// `n` peers, peer p at `first + p`, port `port`.
    Consecutive {
        first: u32,
        port: u16,
        n: usize,
    },
    V4(Vec<([u8; 4], u16)>),
    Any(Vec<SocketAddr>),
}

impl Default for PeerAddrs {
    fn default() -> Self {
        PeerAddrs::V4(Vec::new())
    }
}

impl PeerAddrs {
    /// The table of `addrs`, compact if they are all IPv4.
    pub(crate) fn new(addrs: Vec<SocketAddr>) -> PeerAddrs {
        let v4: Option<Vec<_>> = addrs
            .iter()
            .map(|a| match a {
                SocketAddr::V4(a) => Some((a.ip().octets(), a.port())),
                SocketAddr::V6(_) => None,
            })
            .collect();
        let consecutive = |v4: &[([u8; 4], u16)]| {
            let &(ip, port) = v4.first()?;
            let first = u32::from_be_bytes(ip);
            let at = |p: usize| first.checked_add(u32::try_from(p).ok()?).map(|ip| (ip.to_be_bytes(), port));
            v4.iter().enumerate().all(|(p, a)| at(p) == Some(*a)).then_some(PeerAddrs::Consecutive {
                first,
                port,
                n: v4.len(),
            })
        };
        match v4 {
            Some(v4) => consecutive(&v4).unwrap_or(PeerAddrs::V4(v4)),
            None => PeerAddrs::Any(addrs),
        }
    }

    /// Peer `i`'s address.
    ///
    /// # Panics
    /// If there is no peer `i`, as indexing would.
    pub(crate) fn get(&self, i: usize) -> SocketAddr {
        match self {
            PeerAddrs::Consecutive { first, port, n } => {
                assert!(i < *n, "peer {i} of {n}");
                SocketAddr::new(IpAddr::V4(Ipv4Addr::from(first + i as u32)), *port)
            }
            PeerAddrs::V4(v) => {
                let (ip, port) = v[i];
                SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port)
            }
            PeerAddrs::Any(v) => v[i],
        }
    }

    /// All of them, in rank order.
    pub(crate) fn to_vec(&self) -> Vec<SocketAddr> {
        match self {
            PeerAddrs::Consecutive { n, .. } => (0..*n).map(|i| self.get(i)).collect(),
            PeerAddrs::V4(v) => (0..v.len()).map(|i| self.get(i)).collect(),
            PeerAddrs::Any(v) => v.clone(),
        }
    }
}

impl Hash for PeerAddrs {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.to_vec().hash(h);
    }
}

#[cfg(test)]
mod tests {
    use std::hash::DefaultHasher;

    use super::*;

    fn bytes_of(x: &impl Hash) -> u64 {
        let mut h = DefaultHasher::new();
        x.hash(&mut h);
        h.finish()
    }

    #[test]
    fn a_peer_vec_reads_and_hashes_as_the_vec_it_stands_for() {
        let mut p = PeerVec::<u64>::new(4);
        let mut v = vec![0u64; 4];
        assert_eq!(bytes_of(&p), bytes_of(&v));
        assert_eq!(p.get(3), 0);
        *p.get_mut(2) += 5;
        v[2] += 5;
        assert_eq!((p.get(2), p.get(1)), (5, 0));
        assert_eq!(bytes_of(&p), bytes_of(&v));
        let q = PeerVec::<Option<u64>>::new(3);
        assert_eq!(bytes_of(&q), bytes_of(&vec![None::<u64>; 3]));
    }

    #[test]
    fn addresses_round_trip_compact_or_not() {
        // Consecutive addresses on one port (across an octet): nothing per peer.
        let run: Vec<SocketAddr> =
            (0..300u32).map(|p| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0x0a00_00ff + p)), 7000)).collect();
        let p = PeerAddrs::new(run.clone());
        assert!(matches!(p, PeerAddrs::Consecutive { n: 300, .. }), "{p:?}");
        assert_eq!((p.get(299), p.to_vec(), bytes_of(&p)), (run[299], run.clone(), bytes_of(&run)));
        let v4: Vec<SocketAddr> = vec!["10.0.0.1:4000".parse().unwrap(), "10.0.0.2:65535".parse().unwrap()];
        let p = PeerAddrs::new(v4.clone());
        assert!(matches!(p, PeerAddrs::V4(_)));
        assert_eq!((p.get(1), p.to_vec()), (v4[1], v4.clone()));
        assert_eq!(bytes_of(&p), bytes_of(&v4));
        let mixed: Vec<SocketAddr> = vec![v4[0], "[::1]:80".parse().unwrap()];
        let p = PeerAddrs::new(mixed.clone());
        assert!(matches!(p, PeerAddrs::Any(_)));
        assert_eq!((p.get(1), bytes_of(&p)), (mixed[1], bytes_of(&mixed)));
    }
}
