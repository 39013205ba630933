//! `bootstrapRecv`: the unexpected list scanned from the head, one accepted connection at a time
//! with its preamble checked and its header read whole, the payload under NCCL's size rule.

use super::*;

impl Rank {
    pub(super) fn start_recv(&mut self, want: Want) {
        let found = self.unexpected.iter().position(|u| self.matches(&want, u.peer, u.tag));
        if let Some(i) = found {
            let u = self.unexpected.remove(i);
            self.matched(want, u.conn, Header { rank: u.peer, tag: u.tag });
        } else {
            self.accept_next(want);
        }
    }

    /// NCCL's matching: by peer, and by tag from 2.9 on.
    fn matches(&self, want: &Want, peer: i32, tag: i32) -> bool {
        let peer_ok = want.peer.is_none_or(|p| peer == p as i32);
        peer_ok && (!self.cfg.variant.tagged() || tag == want.tag)
    }

    /// Whether the receive whose accept is pending would keep a message with `header`; `None`
    /// when no receive's accept is pending (the ring's, the root's answer's). A message it would
    /// not keep only joins the unexpected list.
    pub fn would_match(&self, header: Header) -> Option<bool> {
        let State::Accepting { want, .. } = &self.state else { return None };
        Some(self.matches(want, header.rank, header.tag))
    }

    pub(super) fn accept_next(&mut self, want: Want) {
        let conn = self.conn();
        self.out.effect(Effect::Accept { listener: self.key(self.p2p_listener()), conn });
        self.state = State::Accepting { want, conn };
    }

    pub(super) fn matched(&mut self, want: Want, conn: ConnId, header: Header) {
        match want.stream {
            Some(next) => {
                let (ranks, size) = self.intra.take().expect("an intra-node ring is being built");
                self.start_gather(Pair { next, prev: conn }, ranks, size, false, true);
            }
            None => self.state = State::Payload { want, conn, header },
        }
    }

    pub(super) fn header(&mut self, want: Want, conn: ConnId) -> bool {
        match self.check(conn, "a message's preamble") {
            Check::Ready => {}
            Check::Wait => return false,
            Check::Discarded => {
                self.accept_next(want);
                return true;
            }
            Check::Failed(e) => {
                self.fail(e);
                return true;
            }
        }
        let v = self.cfg.variant;
        let c = self.conns.get_mut(&conn).expect("accepted");
        let header = match codec::read_header(&mut c.reader, v) {
            Ok(None) => return false,
            Ok(Some(Ok(h))) => h,
            Ok(Some(Err(Received::Truncated { received, expected }))) => {
                let (rank, call) = (self.cfg.rank, self.call());
                let peer = want.peer.map_or(-1, |p| p as i32);
                self.fail(NcclError::Truncated { rank, call, peer, tag: want.tag, received, expected });
                return true;
            }
            Ok(Some(Err(Received::Fits(_)))) => unreachable!("read_header returns a header or a truncation"),
            Err(error) => {
                self.fail_wire(conn, error, "a message's header");
                return true;
            }
        };
        if self.matches(&want, header.rank, header.tag) {
            self.matched(want, conn, header);
            return true;
        }
        self.unexpected.push(Unexpected { peer: header.rank, tag: header.tag, conn });
        let list_len = self.unexpected.len();
        self.out.event(Event::Queued {
            conn,
            from: header.rank,
            tag: header.tag,
            waiting_for: (want.peer, want.tag),
            list_len,
        });
        self.accept_next(want);
        true
    }

    pub(super) fn payload(&mut self, want: Want, conn: ConnId, header: Header) -> bool {
        let got = recv_frame(self.conns.get_mut(&conn).expect("matched"), "message data", want.size);
        let peer = header.rank;
        let Some(bytes) = self.received(conn, got, peer, want.tag, "a message's data") else {
            return !matches!(self.state, State::Payload { .. });
        };
        let step = self.step;
        let (size, expected) = (bytes.len(), want.size);
        let (nth, op) = (self.nth[step], BootstrapOp::of(self.call().kind));
        let logical_tag = match self.cfg.program[step].step {
            Step::Recv { logical_tag, .. } => logical_tag,
            _ => want.tag,
        };
        self.out.event(Event::Taken { conn, step, from: peer, tag: header.tag, logical_tag, nth, op, size, expected });
        self.out.effect(Effect::Close { conn });
        self.conns.remove(&conn);
        self.complete(Ok(bytes));
        true
    }

    /// Turns a frame read into its bytes, or fails the step (truncation, early close, bad bytes).
    pub(super) fn received(
        &mut self,
        conn: ConnId,
        got: Result<Option<Received>, WireError>,
        peer: i32,
        tag: i32,
        what: &'static str,
    ) -> Option<Vec<u8>> {
        let (rank, call) = (self.cfg.rank, self.call());
        match got {
            Ok(Some(Received::Fits(b))) => Some(b),
            Ok(None) => None,
            Ok(Some(Received::Truncated { received, expected })) => {
                self.fail(NcclError::Truncated { rank, call, peer, tag, received, expected });
                None
            }
            Err(error) => {
                self.fail_wire(conn, error, what);
                None
            }
        }
    }

    /// Fails on `conn`'s wire error: its end (closed, reset or timed out) in NCCL's words.
    pub(super) fn fail_wire(&mut self, conn: ConnId, error: WireError, what: &'static str) {
        let from = self.from(conn);
        let e = match error {
            WireError::Truncated { .. } | WireError::TimedOut { .. } => self.ended(from, &error, what),
            error => NcclError::Wire { rank: self.cfg.rank, call: self.call(), from, error },
        };
        self.fail(e);
    }

    /// The error for a connection from `from` that ended (`error`) before `what` was read:
    /// timed out in NCCL's timeout words, any other end as the peer's close.
    fn ended(&self, from: String, error: &WireError, what: &'static str) -> NcclError {
        let (rank, call) = (self.cfg.rank, self.call());
        match error {
            WireError::TimedOut { .. } => NcclError::TimedOut { rank, call, from, what },
            _ => NcclError::Closed { rank, call, from, what },
        }
    }

    pub(super) fn from(&self, conn: ConnId) -> String {
        self.conns.get(&conn).and_then(|c| c.from).map_or_else(|| conn.to_string(), |a| a.to_string())
    }

    /// Reads and checks an accepted connection's preamble as `socketFinalizeAccept` does.
    pub(super) fn check(&mut self, conn: ConnId, what: &'static str) -> Check {
        let (v, magic) = (self.cfg.variant, self.cfg.magic);
        let Some(c) = self.conns.get_mut(&conn) else { return Check::Wait };
        if c.checked {
            return Check::Ready;
        }
        let from = c.from.expect("accepted connections know their peer");
        let discard = |me: &mut Rank, why: String| {
            me.out.effect(Effect::Close { conn });
            me.conns.remove(&conn);
            me.out.event(Event::Discarded { conn, from, why });
            Check::Discarded
        };
        match c.reader.read_preamble(magic) {
            Ok(None) => Check::Wait,
            Ok(Some(_)) => {
                c.checked = true;
                Check::Ready
            }
            Err(e @ WireError::BadMagic { .. }) => discard(self, e.to_string()),
            Err(WireError::BadType { expected, got }) if v == Variant::Nccl230 => {
                discard(self, format!("wrong socket type (peer {got} != expected {expected})"))
            }
            Err(WireError::BadType { expected, got }) => {
                let (rank, call) = (self.cfg.rank, self.call());
                Check::Failed(NcclError::WrongType { rank, call, from: from.to_string(), got, expected })
            }
            Err(WireError::TimedOut { .. }) if v == Variant::Nccl230 => {
                discard(self, "connection timed out before the magic handshake".into())
            }
            Err(_) if v == Variant::Nccl230 => discard(self, "peer closed before the magic handshake".into()),
            Err(e) => Check::Failed(self.ended(from.to_string(), &e, what)),
        }
    }
}
