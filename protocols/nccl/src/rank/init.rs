//! `bootstrapInit`'s socket part: the listeners, the check-in, the root's answer and the two
//! ring sockets.

use super::*;

impl Rank {
    pub(super) fn init_listening(&mut self) -> bool {
        if !(self.listeners.contains_key(&Listener::Ring) && self.listeners.contains_key(&Listener::FromRoot)) {
            return false;
        }
        let conn = self.conn();
        self.out.effect(Effect::Connect { conn, addr: self.cfg.root });
        self.state = State::InitCheckIn { conn };
        true
    }

    pub(super) fn init_successor(&mut self, conn: ConnId) -> bool {
        match self.check(conn, "the root's answer") {
            Check::Ready => {}
            Check::Wait => return false,
            Check::Discarded => {
                let reply = self.conn();
                self.out.effect(Effect::Accept { listener: self.key(Listener::FromRoot), conn: reply });
                self.state = State::InitSuccessor { conn: reply, accepted: false };
                return true;
            }
            Check::Failed(e) => {
                self.fail(e);
                return true;
            }
        }
        let v = self.cfg.variant;
        let got = recv_frame(self.conns.get_mut(&conn).expect("open"), "successor", codec::successor_len(v));
        let bytes = match self.received(conn, got, -1, -1, "the root's answer") {
            Some(b) => b,
            None => return !matches!(self.state, State::InitSuccessor { .. }),
        };
        let next_addr = match codec::decode_successor(&bytes) {
            Ok(a) => a,
            Err(error) => {
                let (rank, call) = (self.cfg.rank, self.call());
                self.fail(NcclError::Wire { rank, call, from: "the root".into(), error });
                return true;
            }
        };
        self.out.effect(Effect::Close { conn });
        self.conns.remove(&conn);
        self.out.effect(Effect::CloseListener { listener: self.key(Listener::FromRoot) });
        let next = self.conn();
        self.out.effect(Effect::Connect { conn: next, addr: next_addr });
        self.ring_addr = Some(next_addr);
        let prev = self.conn();
        self.out.effect(Effect::Accept { listener: self.key(Listener::Ring), conn: prev });
        self.state = State::InitRing { next, next_up: false, prev, prev_up: false };
        true
    }

    pub(super) fn init_ring(&mut self, next: ConnId, next_up: bool, prev: ConnId, prev_up: bool) -> bool {
        let mut prev_up = prev_up;
        if !prev_up && self.conns.contains_key(&prev) {
            match self.check(prev, "the ring predecessor's connection") {
                Check::Ready => prev_up = true,
                Check::Wait => {}
                Check::Discarded => {
                    let again = self.conn();
                    self.out.effect(Effect::Accept { listener: self.key(Listener::Ring), conn: again });
                    self.state = State::InitRing { next, next_up, prev: again, prev_up: false };
                    return true;
                }
                Check::Failed(e) => {
                    self.fail(e);
                    return true;
                }
            }
        }
        if !(next_up && prev_up) {
            self.state = State::InitRing { next, next_up, prev, prev_up };
            return false;
        }
        self.ring = Some(Pair { next, prev });
        if self.cfg.variant.separate_p2p_listener() {
            self.out.effect(Effect::Listen { listener: self.key(Listener::P2p) });
            self.state = State::InitP2pListen;
        } else {
            self.complete(Ok(Vec::new()));
        }
        true
    }
}
