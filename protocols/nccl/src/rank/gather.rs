//! The ring allgather over two persistent sockets: one direction up to 2.22, both from 2.28
//! (`socketRingAllGather`), and 2.21's intra-node ring over two tagged sockets.
//!
//! A rank forwards each round the slice it took the round before, so it holds one slice per
//! direction, not the n slices of the result: every slice taken is compared with the one its
//! sender's program makes ([`payload`], with the sender's address first in init's allgather),
//! only a slice that differs is kept, and the result is made whole once, when the allgather
//! completes. The addresses of init's allgather are the one table kept afterwards (NCCL keeps
//! `peerCommAddresses`, n addresses: `peers.rs`); the other allgathers' results are the
//! caller's.

use super::peers::{Layout, Peers};
use super::*;

impl Rank {
    pub(super) fn start_gather(&mut self, pair: Pair, ranks: Vec<u32>, size: usize, addresses: bool, close: bool) {
        let (n, rank) = (if ranks.is_empty() { self.cfg.nranks as usize } else { ranks.len() }, self.cfg.rank);
        let me = if ranks.is_empty() { rank as usize } else { ranks.iter().position(|&r| r == rank).expect("checked") };
        let own = self.listeners.get(&self.p2p_listener()).copied().filter(|_| addresses);
        let mut mine = payload(rank, self.step, size);
        if let (Some(a), true) = (own, size >= SOCKADDR_LEN) {
            mine[..SOCKADDR_LEN].copy_from_slice(&encode_sockaddr(&a));
        }
        let mut g = Gather {
            pair,
            me,
            n,
            size,
            round: 0,
            ranks,
            to_next: mine.clone(),
            to_prev: Vec::new(),
            odd: BTreeMap::new(),
            addresses,
            layout: own.and_then(|a| Layout::around(a, me)),
            want_prev: None,
            want_next: None,
            close,
        };
        if self.cfg.variant.bidirectional_allgather() {
            g.to_prev = mine.clone();
        }
        self.state = State::Gathering(g);
        self.took(me, mine);
        self.gather_round();
    }

    /// Keeps slice `slot` of the allgather (its bytes zero-padded to the slice size, as NCCL's
    /// buffer holds a shorter message) if it is not the one predicted. Gives the padded bytes
    /// back (the slice to forward).
    fn took(&mut self, slot: usize, mut bytes: Vec<u8>) -> Vec<u8> {
        let step = self.step;
        let State::Gathering(g) = &mut self.state else { return bytes };
        bytes.resize(g.size, 0);
        if g.predicted(slot, step) != bytes {
            g.odd.insert(slot, bytes.clone());
        }
        bytes
    }

    /// Writes this round's slices and says which to read; completes the allgather after the last.
    pub(super) fn gather_round(&mut self) {
        let step = self.step;
        let State::Gathering(g) = &mut self.state else { return };
        let (n, me) = (g.n, g.me);
        let bidirectional = self.cfg.variant.bidirectional_allgather();
        let rounds = if bidirectional { n / 2 } else { n.saturating_sub(1) };
        if g.round >= rounds {
            let State::Gathering(g) = std::mem::replace(&mut self.state, State::Idle) else {
                unreachable!("matched above")
            };
            if g.close {
                self.out.effect(Effect::Close { conn: g.pair.next });
                self.out.effect(Effect::Close { conn: g.pair.prev });
                self.conns.remove(&g.pair.next);
                self.conns.remove(&g.pair.prev);
            }
            let result = g.result(step);
            if g.addresses {
                self.peers = Peers::of_slices(&result, g.size, g.layout);
            }
            return self.complete(Ok(result));
        }
        let s = g.round;
        let one_way = !bidirectional || (s == rounds - 1 && n % 2 == 0);
        self.out.write(g.pair.next, |b| encode_frame(b, &g.to_next));
        g.want_prev = Some((me + 2 * n - s - 1) % n);
        g.want_next = None;
        if !one_way {
            self.out.write(g.pair.prev, |b| encode_frame(b, &g.to_prev));
            g.want_next = Some((me + s + 1) % n);
        }
    }

    pub(super) fn gather(&mut self) -> bool {
        // The small fields only: the slices stay where they are.
        let State::Gathering(Gather { pair, size, want_prev, want_next, .. }) = self.state else { return false };
        let mut moved = false;
        for (slot, conn, from_next) in [(want_prev, pair.prev, false), (want_next, pair.next, true)] {
            let Some(slot) = slot else { continue };
            let got = recv_frame(self.conns.get_mut(&conn).expect("ring socket open"), "allgather slice", size);
            let Some(bytes) = self.received(conn, got, -1, -1, "an allgather slice") else {
                if !matches!(self.state, State::Gathering(_)) {
                    return true;
                }
                continue;
            };
            // The slice taken is the one forwarded the next round, zero-padded as kept.
            let forward = self.took(slot, bytes);
            let State::Gathering(g) = &mut self.state else { unreachable!("checked above") };
            if from_next {
                g.to_prev = forward;
                g.want_next = None;
            } else {
                g.to_next = forward;
                g.want_prev = None;
            }
            moved = true;
        }
        if let State::Gathering(g) = &mut self.state {
            if g.want_prev.is_none() && g.want_next.is_none() {
                g.round += 1;
                self.gather_round();
                return true;
            }
        }
        moved
    }
}

impl Gather {
    /// The rank whose slice `slot` is.
    fn rank_of(&self, slot: usize) -> u32 {
        if self.ranks.is_empty() {
            slot as u32
        } else {
            self.ranks[slot]
        }
    }

    /// The bytes slot `slot` holds if its sender sent what its program makes in step `step`
    /// (in init's allgather, with its address first where the layout puts it).
    fn predicted(&self, slot: usize, step: usize) -> Vec<u8> {
        let mut b = payload(self.rank_of(slot), step, self.size);
        if let (Some(a), true) = (self.layout.and_then(|l| l.of(slot)), self.size >= SOCKADDR_LEN) {
            b[..SOCKADDR_LEN].copy_from_slice(&encode_sockaddr(&a));
        }
        b
    }

    /// The whole result, slot by slot.
    fn result(&self, step: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.n * self.size);
        for slot in 0..self.n {
            match self.odd.get(&slot) {
                Some(b) => out.extend_from_slice(b),
                None => out.extend_from_slice(&self.predicted(slot, step)),
            }
        }
        out
    }
}
