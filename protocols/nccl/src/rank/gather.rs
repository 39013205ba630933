//! The ring allgather over two persistent sockets: one direction up to 2.22, both from 2.28
//! (`socketRingAllGather`), and 2.21's intra-node ring over two tagged sockets.

use super::*;

impl Rank {
    pub(super) fn start_gather(&mut self, pair: Pair, me: usize, n: usize, size: usize, addresses: bool, close: bool) {
        let mut buf = vec![0u8; n * size];
        let mine = if addresses {
            let mut b = payload(self.cfg.rank, self.step, size);
            let addr = self.listeners.get(&self.p2p_listener()).copied();
            if let (Some(a), true) = (addr, size >= SOCKADDR_LEN) {
                b[..SOCKADDR_LEN].copy_from_slice(&encode_sockaddr(&a));
            }
            b
        } else {
            payload(self.cfg.rank, self.step, size)
        };
        buf[me * size..(me + 1) * size].copy_from_slice(&mine);
        let g = Gather { pair, me, n, size, round: 0, buf, want_prev: None, want_next: None, close, addresses };
        self.state = State::Gathering(g);
        self.gather_round();
    }

    /// Writes this round's slices and says which to read; completes the allgather after the last.
    pub(super) fn gather_round(&mut self) {
        let State::Gathering(g) = &mut self.state else { return };
        let (n, me, size) = (g.n, g.me, g.size);
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
            if g.addresses {
                for r in 0..n {
                    let slice = &g.buf[r * size..r * size + SOCKADDR_LEN.min(size)];
                    self.peers[r] = slice.try_into().ok().and_then(|b| decode_sockaddr(b).ok());
                }
            }
            return self.complete(Ok(g.buf));
        }
        let s = g.round;
        let one_way = !bidirectional || (s == rounds - 1 && n % 2 == 0);
        let send0 = (me + n - s % n) % n;
        self.out.write(g.pair.next, |b| encode_frame(b, &g.buf[send0 * size..(send0 + 1) * size]));
        g.want_prev = Some((me + 2 * n - s - 1) % n);
        g.want_next = None;
        if !one_way {
            let send1 = (me + s) % n;
            self.out.write(g.pair.prev, |b| encode_frame(b, &g.buf[send1 * size..(send1 + 1) * size]));
            g.want_next = Some((me + s + 1) % n);
        }
    }

    pub(super) fn gather(&mut self) -> bool {
        // The small fields only: the buffer stays where it is.
        let State::Gathering(Gather { pair, size, want_prev, want_next, .. }) = self.state else { return false };
        let mut moved = false;
        for (slot, conn, from_next) in [(want_prev, pair.prev, false), (want_next, pair.next, true)] {
            let Some(slice) = slot else { continue };
            let got = recv_frame(self.conns.get_mut(&conn).expect("ring socket open"), "allgather slice", size);
            let Some(bytes) = self.received(conn, got, -1, -1, "an allgather slice") else {
                if !matches!(self.state, State::Gathering(_)) {
                    return true;
                }
                continue;
            };
            let State::Gathering(g) = &mut self.state else { unreachable!("checked above") };
            g.buf[slice * g.size..slice * g.size + bytes.len()].copy_from_slice(&bytes);
            if from_next {
                g.want_next = None;
            } else {
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
