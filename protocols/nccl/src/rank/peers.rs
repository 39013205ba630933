//! The peers' addresses init's allgather gave a rank (NCCL's `peerCommAddresses`), kept as
//! every simulated world lays them out: rank r at the first rank's IPv4 address plus r, on one
//! port, predicted from the rank's own, with only the addresses that differ stored. A world of
//! n ranks holds n tables, so a plain one is n² addresses: 512 MiB at 4096 ranks.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use bootsim_core::codec::{decode_sockaddr, SOCKADDR_LEN};

/// Rank r's predicted address: `first + r` on `port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Layout {
    first: u32,
    port: u16,
}

impl Layout {
    /// The layout that puts rank `me` at `own`, if `own` is IPv4 and leaves room below it.
    pub(super) fn around(own: SocketAddr, me: usize) -> Option<Layout> {
        let SocketAddr::V4(a) = own else { return None };
        let first = u32::from(*a.ip()).checked_sub(u32::try_from(me).ok()?)?;
        Some(Layout { first, port: a.port() })
    }

    /// Rank `r`'s address under this layout, if it has one.
    pub(super) fn of(self, r: usize) -> Option<SocketAddr> {
        let ip = self.first.checked_add(u32::try_from(r).ok()?)?;
        Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), self.port))
    }
}

/// Every peer's address, or None where its slice held none (an address family NCCL's socket
/// code rejects, or a slice too short).
#[derive(Clone, Debug, Default, Hash)]
pub(super) struct Peers {
    n: usize,
    layout: Option<Layout>,
    /// The addresses the layout does not predict, by rank.
    odd: BTreeMap<usize, Option<SocketAddr>>,
}

impl Peers {
    /// The addresses at the head of each `size`-byte slice of an allgather's `result`.
    pub(super) fn of_slices(result: &[u8], size: usize, layout: Option<Layout>) -> Peers {
        let n = result.len().checked_div(size).unwrap_or(0);
        let mut peers = Peers { n, layout, odd: BTreeMap::new() };
        for r in 0..n {
            let head = result[r * size..(r + 1) * size].get(..SOCKADDR_LEN);
            let addr = head.and_then(|b| decode_sockaddr(b.try_into().ok()?).ok());
            if addr != layout.and_then(|l| l.of(r)) {
                peers.odd.insert(r, addr);
            }
        }
        peers
    }

    /// Rank `r`'s address, if known (None before init's allgather ended).
    pub(super) fn get(&self, r: usize) -> Option<SocketAddr> {
        if r >= self.n {
            return None;
        }
        match self.odd.get(&r) {
            Some(a) => *a,
            None => self.layout.and_then(|l| l.of(r)),
        }
    }
}

#[cfg(test)]
mod tests {
    use bootsim_core::codec::encode_sockaddr;

    use super::*;

    fn slices(addrs: &[Option<SocketAddr>], size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for a in addrs {
            let mut s = vec![7u8; size];
            if let Some(a) = a {
                s[..SOCKADDR_LEN].copy_from_slice(&encode_sockaddr(a));
            }
            out.extend(s);
        }
        out
    }

    #[test]
    fn a_laid_out_world_stores_nothing_per_peer_and_the_rest_reads_back() {
        let at = |ip: u32, port| Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port));
        let laid: Vec<_> = (0..300).map(|r| at(0x0a00_00fe + r, 9000)).collect();
        let layout = Layout::around(laid[5].unwrap(), 5);
        let p = Peers::of_slices(&slices(&laid, 40), 40, layout);
        assert!(p.odd.is_empty());
        assert_eq!((0..300).map(|r| p.get(r)).collect::<Vec<_>>(), laid);
        assert_eq!(p.get(300), None);
        // One moved, one unreadable, one IPv6; and no layout at all.
        let mut mixed = laid[..4].to_vec();
        mixed[1] = at(0x0b00_0000, 9000);
        mixed[2] = None;
        mixed[3] = Some("[::1]:80".parse().unwrap());
        for layout in [layout, None] {
            let p = Peers::of_slices(&slices(&mixed, 28), 28, layout);
            assert_eq!((0..4).map(|r| p.get(r)).collect::<Vec<_>>(), mixed);
        }
        assert_eq!(Peers::of_slices(&slices(&laid[..3], 28)[..60], 20, layout).get(0), None, "too short");
        assert_eq!(Peers::default().get(0), None);
    }
}
