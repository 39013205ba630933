//! The root as a sans-IO state machine: NCCL's `bootstrapRoot` thread. It takes one check-in at a
//! time (accept, read one framed `extInfo`, close); up to 2.22 it then connects to every rank in
//! rank order and sends it its successor's address (src/bootstrap.cc:101-171 in 2.19.3); from 2.23
//! it answers a rank as soon as both it and its successor have checked in, and the rest at the end
//! (src/bootstrap.cc:288-403 in 2.30.7). Each answer is a blocking connect-send-close made before
//! the next check-in is accepted. On any error the thread closes its listener and returns.

use std::collections::VecDeque;
use std::net::SocketAddr;

use bootsim_core::codec::{decode_sockaddr, encode_frame, FrameReader, WireError};
use bootsim_core::ConnId;

use crate::codec::{self, RawCheckIn, Received, SOCKADDR_LEN};
use crate::error::RootError;
use crate::io::{Effect, Event, Input, Listener, Outbox, Output};
use crate::seam::{Completion, Failure, Key};
use crate::variant::Variant;

/// The largest world a root accepts before allocating (bootsim's bound; NCCL has none).
pub const MAX_RANKS: i32 = 1 << 20;

/// What the root is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RootConfig {
    /// Which NCCL.
    pub variant: Variant,
    /// The unique ID's magic.
    pub magic: u64,
}

#[derive(Clone, Debug, Hash)]
enum Phase {
    Listening,
    Accepting { conn: ConnId },
    Reading { conn: ConnId, reader: FrameReader, from: SocketAddr, checked: bool },
    Answering { conn: ConnId, to: u32, successor: u32, bytes: Vec<u8> },
    Done,
}

/// A raw address for messages: the address if it decodes, else its bytes in hex.
fn show(a: &RawAddr) -> String {
    decode_sockaddr(a).map_or_else(|_| a.iter().map(|b| format!("{b:02x}")).collect(), |a| a.to_string())
}

/// An answer waiting to be sent: to rank `to`, at `addr`, its successor's information.
#[derive(Clone, Debug, Hash)]
struct Answer {
    to: u32,
    successor: u32,
    addr: RawAddr,
    bytes: Vec<u8>,
}

/// A socket address as the rank sent it: NCCL copies and compares the 28 bytes and only reads
/// them as an address when it connects.
type RawAddr = [u8; SOCKADDR_LEN];

/// NCCL's bootstrap root (`Clone` and `Hash` as [`crate::Rank`]'s).
#[derive(Clone, Debug, Hash)]
pub struct Root {
    cfg: RootConfig,
    out: Outbox,
    next_conn: u64,
    addr: Option<SocketAddr>,
    phase: Phase,
    /// The `extInfo` buffer, reused from one check-in to the next as NCCL's is (a short check-in
    /// leaves the previous one's tail in place).
    info: Vec<u8>,
    nranks: Option<i32>,
    /// `rankAddressesRoot`: where each rank waits for its answer (2.30: until answered).
    root_addr: Vec<Option<RawAddr>>,
    /// `rankAddresses` / 2.30's `rankInfo`: each rank's ring information, until sent.
    ring_info: Vec<Option<Vec<u8>>>,
    count: i32,
    answers: VecDeque<Answer>,
    /// What the first check-in said about the roots.
    shape: Option<Shape>,
}

/// The world as the first check-in describes it: 2.30's root serves the ranks of root `iroot` of
/// `nroots` (the ranks from `offset` on are spread over the roots), receiving `nrecv` check-ins
/// and answering `n2send` (src/bootstrap.cc:48-92, 326-329). Up to 2.22: one root, every rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Shape {
    nranks: i32,
    iroot: i32,
    nroots: i32,
    offset: i32,
    n2send: usize,
    nrecv: usize,
}

impl Shape {
    /// None when NCCL would divide by zero or cannot allocate for the sizes.
    fn new(nranks: i32, iroot: i32, nroots: i32, offset: i32) -> Option<Shape> {
        if nranks <= 0 || nranks > MAX_RANKS || nroots == 0 {
            return None;
        }
        let n2send = n_rank_from_root(iroot, nranks, nroots, offset);
        let nrecv = n2send.wrapping_add(i32::from(offset > 0 || nroots > 1));
        if n2send < 0 || !(1..=MAX_RANKS + 1).contains(&nrecv) {
            return None;
        }
        Some(Shape { nranks, iroot, nroots, offset, n2send: n2send as usize, nrecv: nrecv as usize })
    }

    /// `localIdFromRoot`: the rank's index among this root's ranks.
    fn local_id(&self, rank: i32) -> i64 {
        if self.iroot == -1 {
            return i64::from(rank);
        }
        let ir = pid(self.iroot, self.nroots);
        i64::from(rank.wrapping_sub(first_rank_from_root(ir, self.nranks, self.nroots, self.offset)))
    }
}

// 2.30's root arithmetic (src/bootstrap.cc:48-86), in C's 32-bit `int` with its truncating `%`
// and `/` (a garbage check-in can make the sums wrap; the binary's answers then follow these).

/// `BOOTSTRAP_PID(i, n)`.
fn pid(i: i32, n: i32) -> i32 {
    i.wrapping_add(n).wrapping_rem(n)
}

/// `firstRankFromRoot`.
fn first_rank_from_root(root: i32, nranks: i32, nroots: i32, offset: i32) -> i32 {
    if root == -1 {
        return 0;
    }
    let n = nranks.wrapping_sub(offset);
    offset.wrapping_add(root.wrapping_mul(n.wrapping_div(nroots))).wrapping_add(root.min(n.wrapping_rem(nroots)))
}

/// `nRankFromRoot`.
fn n_rank_from_root(root: i32, nranks: i32, nroots: i32, offset: i32) -> i32 {
    if root == -1 {
        return 0;
    }
    let n = nranks.wrapping_sub(offset);
    let ir = pid(root, nroots);
    n.wrapping_div(nroots) + i32::from(ir < n.wrapping_rem(nroots))
}

impl Root {
    /// A root that opens its listener at once.
    pub fn new(cfg: RootConfig) -> Root {
        Root {
            info: vec![0; cfg.variant.ext_info_len()],
            cfg,
            out: Outbox::with(Effect::Listen { listener: Key::of(cfg.variant, Listener::Root) }),
            next_conn: 0,
            addr: None,
            phase: Phase::Listening,
            nranks: None,
            root_addr: Vec::new(),
            ring_info: Vec::new(),
            count: 0,
            answers: VecDeque::new(),
            shape: None,
        }
    }

    /// Which NCCL.
    pub fn variant(&self) -> Variant {
        self.cfg.variant
    }

    /// Where the root listens, once the world said so.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// True once every rank was answered or the root gave up.
    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    /// What the root waits for, or None once done.
    pub fn waiting_for(&self) -> Option<String> {
        let n = self.nranks.map_or("?".into(), |n| n.to_string());
        Some(match &self.phase {
            Phase::Done => return None,
            Phase::Listening => "its listener".into(),
            Phase::Accepting { .. } => format!("check-in {} of {n}", self.count + 1),
            Phase::Reading { from, .. } => format!("the check-in from {from}"),
            Phase::Answering { to, .. } => format!("a connection to rank {to}"),
        })
    }

    /// The next output of either kind, in the order made. For an [`Effect::Write`], the bytes
    /// to send replace the contents of `tx`, a buffer the world owns and reuses.
    pub fn poll_output(&mut self, tx: &mut Vec<u8>) -> Option<Output> {
        self.out.poll(tx)
    }

    /// Feeds one input.
    pub fn handle(&mut self, input: Input<'_>) {
        match (input, &mut self.phase) {
            (Input::Listening { addr, .. }, Phase::Listening) => {
                self.addr = Some(addr);
                self.accept();
            }
            (Input::ListenFailed { reason, .. }, Phase::Listening) => self.finish(Err(RootError::Listen { reason })),
            (Input::Accepted { conn, from }, Phase::Accepting { conn: c }) if conn == *c => {
                let checked = !self.cfg.variant.has_preamble();
                self.phase = Phase::Reading { conn, reader: FrameReader::new(), from, checked };
            }
            (Input::Received { conn, bytes }, Phase::Reading { conn: c, reader, .. }) if conn == *c => {
                reader.push(bytes)
            }
            (Input::PeerClosed { conn, reason }, Phase::Reading { conn: c, reader, .. }) if conn == *c => {
                reader.push_close(reason)
            }
            (Input::Connected { conn }, Phase::Answering { conn: c, to, successor, bytes }) if conn == *c => {
                let (to, successor) = (*to, *successor);
                let (v, magic) = (self.cfg.variant, self.cfg.magic);
                self.out.write(conn, |out| {
                    codec::encode_preamble(out, v, magic);
                    encode_frame(out, bytes);
                });
                self.out.effect(Effect::Close { conn });
                self.out.event(Event::SuccessorSent { to, successor });
                self.next_answer();
            }
            (Input::ConnectFailed { conn, reason }, Phase::Answering { conn: c, to, .. }) if conn == *c => {
                let rank = *to;
                let addr = self.root_addr[rank as usize].map_or(String::new(), |a| show(&a));
                self.finish(Err(RootError::Connect { rank, addr, reason }));
            }
            _ => {}
        }
        self.read();
    }

    /// `listener`'s key on the seam, under this root's variant.
    fn key(&self, listener: Listener) -> Key {
        Key::of(self.cfg.variant, listener)
    }

    fn conn(&mut self) -> ConnId {
        self.next_conn += 1;
        ConnId(self.next_conn)
    }

    fn accept(&mut self) {
        let conn = self.conn();
        self.out.effect(Effect::Accept { listener: self.key(Listener::Root), conn });
        self.phase = Phase::Accepting { conn };
    }

    fn finish(&mut self, result: Result<(), RootError>) {
        if matches!(self.phase, Phase::Done) {
            return;
        }
        if let Phase::Reading { conn, .. } = self.phase {
            self.out.effect(Effect::Close { conn });
        }
        self.phase = Phase::Done;
        // The thread returns and frees what it kept: a root done is the same whatever order it
        // took the check-ins in (so an explorer merges those orders once it is done).
        self.info.clear();
        self.nranks = None;
        self.root_addr = Vec::new();
        self.ring_info = Vec::new();
        self.count = 0;
        self.answers.clear();
        self.shape = None;
        self.next_conn = 0;
        self.out.effect(Effect::CloseListener { listener: self.key(Listener::Root) });
        let result = result.map(|()| Vec::new()).map_err(Failure::Root);
        self.out.completed(Completion { step: 0, call: None, result });
    }

    /// Reads the current check-in as far as it has arrived.
    fn read(&mut self) {
        let (v, magic) = (self.cfg.variant, self.cfg.magic);
        let Phase::Reading { conn, reader, from, checked } = &mut self.phase else { return };
        let (conn, from) = (*conn, *from);
        if !*checked {
            match reader.read_preamble(magic) {
                Ok(None) => return,
                Ok(Some(_)) => *checked = true,
                Err(e) => {
                    // 2.9-2.26: a wrong magic is skipped; a wrong type or an early close is an
                    // error that ends the root thread. 2.27 on: all three are skipped.
                    let skip = matches!(e, WireError::BadMagic { .. }) || v == Variant::Nccl230;
                    self.out.effect(Effect::Close { conn });
                    if skip {
                        self.out.event(Event::Discarded { conn, from, why: e.to_string() });
                        return self.accept();
                    }
                    let what = match e {
                        WireError::BadType { expected, got } => {
                            format!("socketFinalizeAccept: wrong type {got} != {expected}")
                        }
                        e => ended(&e, from),
                    };
                    self.phase = Phase::Accepting { conn };
                    return self.finish(Err(RootError::BadConnection { from: from.to_string(), what }));
                }
            }
        }
        let got = match codec::recv_frame(reader, "extInfo", self.info.len()) {
            Ok(None) => return,
            Ok(Some(got)) => got,
            Err(e @ (WireError::Truncated { .. } | WireError::TimedOut { .. })) => {
                return self.finish(Err(RootError::BadConnection { from: from.to_string(), what: ended(&e, from) }));
            }
            Err(error) => return self.finish(Err(RootError::Wire { from: from.to_string(), error })),
        };
        self.out.effect(Effect::Close { conn });
        self.phase = Phase::Accepting { conn };
        match got {
            Received::Truncated { received, expected } => {
                self.finish(Err(RootError::Truncated { from: from.to_string(), received, expected }))
            }
            Received::Fits(bytes) => {
                self.info[..bytes.len()].copy_from_slice(&bytes);
                let check_in = codec::raw_check_in(&self.info, v);
                if let Err(e) = self.check_in(check_in) {
                    self.finish(Err(e));
                }
            }
        }
    }

    fn check_in(&mut self, info: RawCheckIn) -> Result<(), RootError> {
        let v = self.cfg.variant;
        let [iroot, nroots, offset] = info.roots;
        let shape = match self.shape {
            Some(shape) => shape,
            None => {
                let shape = Shape::new(info.nranks, iroot, nroots, offset)
                    .ok_or(RootError::OutOfRange { rank: info.rank, nranks: info.nranks })?;
                self.nranks = Some(info.nranks);
                self.root_addr = vec![None; shape.nrecv];
                self.ring_info = vec![None; shape.nrecv];
                self.shape = Some(shape);
                shape
            }
        };
        if v.root_early_replies() {
            if (info.nranks, nroots, iroot, offset) != (shape.nranks, shape.nroots, shape.iroot, shape.offset) {
                return Err(RootError::InfoMismatch {
                    ours: [shape.nranks, shape.nroots, shape.iroot, shape.offset],
                    theirs: [info.nranks, nroots, iroot, offset],
                });
            }
        } else if info.nranks != shape.nranks {
            return Err(RootError::NranksMismatch { ours: shape.nranks, theirs: info.nranks });
        }
        let local = shape.local_id(info.rank);
        if local < 0 || local >= shape.nrecv as i64 {
            return Err(match v.root_early_replies() {
                true => RootError::LocalIdOutOfRange { local },
                false => RootError::OutOfRange { rank: info.rank, nranks: shape.nranks },
            });
        }
        let r = local as usize;
        let (nrecv, n2send) = (shape.nrecv, shape.n2send);
        let ring = info.ring.clone();
        if self.root_addr[r].is_some() || (v.root_early_replies() && self.ring_info[r].is_some()) {
            return Err(RootError::Duplicate { rank: info.rank, nranks: shape.nranks });
        }
        self.count += 1;
        self.out.event(Event::CheckedIn {
            rank: info.rank as u32,
            count: self.count as u32,
            nranks: shape.nranks as u32,
        });
        if v.root_early_replies() {
            // src/bootstrap.cc:351-369 (2.30.7): answer the predecessor if it is waiting, else keep
            // this rank's ring information; answer this rank if its successor's is here, else
            // remember where this rank waits. Nothing is cleared once sent.
            let prev = if shape.nroots > 1 { r as i64 - 1 } else { ((r + nrecv - 1) % nrecv) as i64 };
            match (prev >= 0 && (prev as usize) < n2send).then(|| self.root_addr[prev as usize]).flatten() {
                Some(addr) => self.queue(prev as usize, r, addr, ring),
                None => self.ring_info[r] = Some(ring),
            }
            let next = (r + 1) % nrecv;
            match self.ring_info[next].clone().filter(|_| r < n2send) {
                Some(bytes) => self.queue(r, next, info.listen_root, bytes),
                None => self.root_addr[r] = Some(info.listen_root),
            }
        } else {
            self.root_addr[r] = Some(info.listen_root);
            self.ring_info[r] = Some(ring);
        }
        if self.count as usize == nrecv {
            // Up to 2.22 every answer goes out here, in rank order; from 2.23 only those still owed
            // (src/bootstrap.cc:379-387 in 2.30.7).
            for to in 0..n2send {
                let next = (to + 1) % nrecv;
                if let (Some(addr), Some(bytes)) = (self.root_addr[to], self.ring_info[next].clone()) {
                    self.queue(to, next, addr, bytes);
                }
            }
        }
        self.next_answer();
        Ok(())
    }

    fn queue(&mut self, to: usize, successor: usize, addr: RawAddr, bytes: Vec<u8>) {
        self.answers.push_back(Answer { to: to as u32, successor: successor as u32, addr, bytes });
    }

    /// Sends the next queued answer, or takes the next check-in, or finishes.
    fn next_answer(&mut self) {
        if let Some(a) = self.answers.pop_front() {
            let Ok(addr) = decode_sockaddr(&a.addr) else {
                // ncclSocketInit refuses a family other than AF_INET/AF_INET6.
                let reason = "neither AF_INET nor AF_INET6".to_string();
                return self.finish(Err(RootError::Connect { rank: a.to, addr: show(&a.addr), reason }));
            };
            let conn = self.conn();
            self.out.effect(Effect::Connect { conn, addr });
            self.phase = Phase::Answering { conn, to: a.to, successor: a.successor, bytes: a.bytes };
        } else if self.shape.is_some_and(|sh| self.count as usize == sh.nrecv) {
            // 2.30 answers whoever is still waiting once everyone checked in; the queue was
            // filled in check_in, so an empty queue here means everyone was answered.
            self.finish(Ok(()));
        } else {
            self.accept();
        }
    }
}

/// NCCL's words for a check-in connection from `from` that ended (`e`) before its frame was
/// read: a timeout as `socketProgressOpt`'s failed recv, any other end as the peer's close.
fn ended(e: &WireError, from: std::net::SocketAddr) -> String {
    match e {
        WireError::TimedOut { .. } => format!(
            "socketProgressOpt: Call to recv from {from} failed : Connection timed out (the root's kernel gave up \
             retransmitting to it)"
        ),
        _ => "socketProgress: Connection closed by remote peer".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::Observation;
    use bootsim_core::codec::Preamble;
    use bootsim_core::seam::CloseReason;

    const MAGIC: u64 = 0xabcd;

    fn root(v: Variant) -> Root {
        let mut r = Root::new(RootConfig { variant: v, magic: MAGIC });
        let key = Key::of(v, Listener::Root);
        assert_eq!(r.poll_output(&mut Vec::new()), Some(Output::Effect(Effect::Listen { listener: key })));
        r.handle(Input::Listening { listener: key, addr: "10.0.0.1:29500".parse().unwrap() });
        r
    }

    /// Accepts the next connection and feeds it `bytes` then EOF; returns the root's outputs.
    fn feed(r: &mut Root, bytes: &[u8]) -> (Vec<Effect>, Vec<Observation>) {
        feed_ending(r, bytes, CloseReason::Eof)
    }

    /// [`feed`], the connection ending for `reason`.
    fn feed_ending(r: &mut Root, bytes: &[u8], reason: CloseReason) -> (Vec<Effect>, Vec<Observation>) {
        let mut tx = Vec::new();
        while r.poll_output(&mut tx).is_some() {}
        let Phase::Accepting { conn } = r.phase else { panic!("the root is not accepting: {:?}", r.phase) };
        r.handle(Input::Accepted { conn, from: "10.9.9.9:1234".parse().unwrap() });
        r.handle(Input::Received { conn, bytes });
        r.handle(Input::PeerClosed { conn, reason });
        let (mut effects, mut obs) = (Vec::new(), Vec::new());
        while let Some(out) = r.poll_output(&mut tx) {
            match out {
                Output::Effect(e) => effects.push(e),
                Output::Observe(o) => obs.push(o),
            }
        }
        (effects, obs)
    }

    fn check_in(v: Variant, magic: u64, kind: i32, rank: i32, nranks: i32) -> Vec<u8> {
        let info = codec::ExtInfo {
            rank,
            nranks,
            listen_root: format!("10.1.0.{rank}:20002").parse().unwrap(),
            listen: format!("10.1.0.{rank}:20000").parse().unwrap(),
        };
        let mut b = Vec::new();
        if v.has_preamble() {
            b.extend_from_slice(&Preamble { magic, kind }.encode());
        }
        encode_frame(&mut b, &codec::encode_ext_info(&info, v));
        b
    }

    /// How the root's session ended, if it did, in the root's own error type.
    fn done(obs: &[Observation]) -> Option<Result<(), RootError>> {
        obs.iter().find_map(|o| match o {
            Observation::Completed(c) => Some(match &c.result {
                Ok(_) => Ok(()),
                Err(Failure::Root(e)) => Err(e.clone()),
                Err(other) => panic!("the root failed as a rank: {other}"),
            }),
            _ => None,
        })
    }

    #[test]
    fn a_duplicate_check_in_ends_the_root_with_ncc_ls_words() {
        let mut r = root(Variant::Nccl219);
        feed(&mut r, &check_in(Variant::Nccl219, MAGIC, 1, 0, 3));
        let (effects, obs) = feed(&mut r, &check_in(Variant::Nccl219, MAGIC, 1, 0, 3));
        let err = done(&obs).expect("the root gave up").unwrap_err();
        assert_eq!(err.to_string(), "root: Bootstrap Root : rank 0 of 3 ranks has already checked in");
        assert!(effects.contains(&Effect::CloseListener { listener: Key::of(Variant::Nccl219, Listener::Root) }));
        let mut r = root(Variant::Nccl219);
        feed(&mut r, &check_in(Variant::Nccl219, MAGIC, 1, 0, 3));
        let (_, obs) = feed(&mut r, &check_in(Variant::Nccl219, MAGIC, 1, 1, 4));
        let err = done(&obs).unwrap().unwrap_err();
        assert_eq!(err.to_string(), "root: Bootstrap Root : mismatch in rank count from procs 3 : 4");
    }

    #[test]
    fn a_check_in_cut_short_by_a_timeout_says_recv_timed_out_not_that_the_rank_closed() {
        let whole = check_in(Variant::Nccl219, MAGIC, 1, 0, 3);
        let cut = &whole[..whole.len() - 3];
        let ended = |reason| {
            let mut r = root(Variant::Nccl219);
            let (_, obs) = feed_ending(&mut r, cut, reason);
            done(&obs).expect("the root gave up").unwrap_err().to_string()
        };
        let closed = "root: check-in from 10.9.9.9:1234: socketProgress: Connection closed by remote peer";
        assert_eq!(ended(CloseReason::Eof), closed);
        assert_eq!(ended(CloseReason::Reset), closed);
        assert_eq!(
            ended(CloseReason::TimedOut),
            "root: check-in from 10.9.9.9:1234: socketProgressOpt: Call to recv from 10.9.9.9:1234 failed : \
             Connection timed out (the root's kernel gave up retransmitting to it)"
        );
    }

    #[test]
    fn strangers_on_the_root_per_version() {
        // A wrong magic is skipped by every version with a preamble.
        for v in [Variant::Nccl219, Variant::Nccl230] {
            let mut r = root(v);
            let (_, obs) = feed(&mut r, &check_in(v, 0xbad, 1, 0, 2));
            assert!(obs.iter().any(|o| matches!(o, Observation::Event(Event::Discarded { .. }))), "{v}");
            assert!(!r.is_done(), "{v}: the root goes on");
            let (_, obs) = feed(&mut r, &check_in(v, MAGIC, 1, 0, 2));
            assert!(obs.iter().any(|o| matches!(o, Observation::Event(Event::CheckedIn { rank: 0, .. }))), "{v}");
        }
        // A wrong socket type or a connection closed before its magic: fatal up to 2.26, skipped
        // from 2.27 (modelled by 2.30).
        for bytes in [check_in(Variant::Nccl219, MAGIC, 2, 0, 2), Vec::new()] {
            let mut r = root(Variant::Nccl219);
            let (_, obs) = feed(&mut r, &bytes);
            assert!(matches!(done(&obs), Some(Err(RootError::BadConnection { .. }))), "{obs:?}");
            let mut r = root(Variant::Nccl230);
            let (_, obs) = feed(&mut r, &bytes);
            assert_eq!(done(&obs), None, "2.30 discards it: {obs:?}");
            assert!(!r.is_done());
        }
    }

    #[test]
    fn a_longer_check_in_is_truncated_and_a_shorter_one_keeps_the_previous_tail() {
        let v = Variant::Nccl219;
        let mut r = root(v);
        let mut b = Preamble::bootstrap(MAGIC).encode().to_vec();
        encode_frame(&mut b, &[0u8; 65]);
        let (_, obs) = feed(&mut r, &b);
        let err = done(&obs).unwrap().unwrap_err();
        assert!(err.to_string().contains("Message truncated : received 65 bytes instead of 64"), "{err}");
        // A check-in of only {rank, nranks} reuses the addresses of the one before it: NCCL's
        // `info` buffer is not cleared between check-ins.
        let mut r = root(v);
        feed(&mut r, &check_in(v, MAGIC, 1, 0, 2));
        let mut b = Preamble::bootstrap(MAGIC).encode().to_vec();
        encode_frame(&mut b, &[1, 0, 0, 0, 2, 0, 0, 0]);
        let (effects, obs) = feed(&mut r, &b);
        assert!(
            obs.iter().any(|o| matches!(o, Observation::Event(Event::CheckedIn { rank: 1, count: 2, .. }))),
            "{obs:?}"
        );
        let answers: Vec<_> = effects.iter().filter(|e| matches!(e, Effect::Connect { .. })).collect();
        assert_eq!(answers, vec![&Effect::Connect { conn: ConnId(3), addr: "10.1.0.0:20002".parse().unwrap() }]);
    }
}
