//! The step executor: runs the front step of the current operation as far as inputs allow.

use std::time::Duration;

use std::net::{Ipv4Addr, SocketAddr};

use bootsim_core::codec::{
    decode_sockaddr, encode_frame, encode_sockaddr, ExtInfo, FrameReader, Preamble, WireError, SOCKADDR_LEN,
};
use bootsim_core::ids::{ConnId, MsgOrigin};

use super::buffer::{Buffer, Chunks};
use super::conn::{Conn, Role};
use super::peers::PeerAddrs;
use super::plan::{Source, Step};
use super::{Rank, Running, Wait};
use crate::error::{BootstrapError, Culprit};
use crate::io::{Completion, Effect, Event};
use crate::listener::Listener;
use crate::variant::{SizePolicy, Transport};
use crate::OpKind;

/// How a step attempt ended.
pub(super) enum Progress {
    /// Blocked: nothing more until an input arrives.
    Blocked,
    /// The wait state changed: try again.
    Moved,
    /// The front step is complete.
    StepDone,
}

/// A payload read that could not complete.
enum ReadFail {
    /// The message's length differs from the buffer's under the variant's size policy.
    Size { got: usize },
    /// The bytes themselves were bad (or the peer closed early).
    Wire(WireError),
}

/// `bootstrap_net_recv`: one frame into a buffer of `size` bytes under the size policy,
/// borrowed from the connection's receive buffer.
fn read_payload(
    reader: &mut FrameReader,
    max: usize,
    policy: SizePolicy,
    size: usize,
) -> Result<Option<&[u8]>, ReadFail> {
    let Some(len) = reader.peek_frame_len(max).map_err(ReadFail::Wire)? else { return Ok(None) };
    let bad = match policy {
        SizePolicy::Strict => len != size,
        SizePolicy::Lenient => len > size,
    };
    if bad {
        return Err(ReadFail::Size { got: len });
    }
    reader.read_frame_slice("payload", max).map_err(ReadFail::Wire)
}

impl Rank {
    /// [`read_payload`] on `conn`, for a receive into the result's `into`: the bytes go straight
    /// from the connection's buffer to the result (the one place a payload is taken). The
    /// size read, `None` until the whole frame has come.
    #[inline]
    fn recv_payload(&mut self, conn: ConnId, into: &std::ops::Range<usize>) -> Result<Option<usize>, ReadFail> {
        let (max, policy) = (self.cfg.limits.max_message, self.cfg.variant.size);
        let c = self.conns.get_mut(conn).expect("connection being read");
        let Some(bytes) = read_payload(&mut c.reader, max, policy, into.len())? else { return Ok(None) };
        self.op.as_mut().expect("running").result.write(into.start, bytes);
        Ok(Some(bytes.len()))
    }
}

pub(super) fn describe_step(step: &Step, wait: &Wait) -> String {
    match step {
        Step::Listen => "opening listeners".into(),
        Step::Stagger { ms } => format!("staggering {ms} ms before calling the root"),
        Step::CheckIn => "checking in with the root".into(),
        Step::AwaitSuccessor => "waiting for the root to send the ring successor".into(),
        // Who it waits for: the successor while dialing it, else the predecessor's connection.
        Step::RingConnect { succ, .. } if matches!(wait, Wait::Connecting(_) | Wait::Start) => {
            format!("connecting the ring to rank {succ}")
        }
        Step::RingConnect { pred, .. } => format!("connecting the ring from rank {pred}"),
        Step::RingSend { .. } => "sending on the ring".into(),
        Step::RingRecv { .. } => "receiving from the ring predecessor".into(),
        Step::LearnPeers => "decoding peer addresses".into(),
        Step::Send { peer, tag, .. } => format!("send to rank {peer} tag {tag:#x}"),
        Step::Recv { peer, tag, .. } => format!("recv from rank {peer} tag {tag:#x}"),
    }
}

/// The peer `step` waits for, typed (what [`describe_step`] names, and the ring neighbour it
/// leaves unnamed): the root for the check-in and the successor's address, a ring neighbour,
/// a send's or receive's peer; `None` for a step that waits for no one. A timeout blames it.
pub(super) fn step_peer(step: &Step, wait: &Wait, me: u32, nranks: u32) -> Option<Culprit> {
    let n = nranks.max(1);
    match step {
        Step::CheckIn | Step::AwaitSuccessor => Some(Culprit::Root),
        Step::RingConnect { succ, .. } if matches!(wait, Wait::Connecting(_) | Wait::Start) => {
            Some(Culprit::Rank(*succ))
        }
        Step::RingConnect { pred, .. } => Some(Culprit::Rank(*pred)),
        Step::RingSend { .. } => Some(Culprit::Rank((me + 1) % n)),
        Step::RingRecv { .. } => Some(Culprit::Rank((me + n - 1) % n)),
        Step::Send { peer, .. } | Step::Recv { peer, .. } => Some(Culprit::Rank(*peer)),
        Step::Listen | Step::Stagger { .. } | Step::LearnPeers => None,
    }
}

/// What a rank waits for; its connections by its own ids, spelled `local cN` as the trace
/// spells them beside the kernel's number (an accept's connection has no kernel number yet).
pub(super) fn describe_wait(wait: &Wait) -> String {
    match wait {
        Wait::Start => "about to start".into(),
        Wait::Listening => "listener addresses".into(),
        Wait::Until(t) => format!("timer at {t}"),
        Wait::Connecting(c) => format!("connect of local {c}"),
        Wait::Reading(c) => format!("bytes on local {c}"),
        Wait::Accepting(c) => format!("accept() for local {c}"),
        Wait::Header(c) => format!("header of local {c}"),
        Wait::Payload(c) => format!("payload of local {c}"),
        Wait::Draining(c) => format!("drain of local {c}"),
        Wait::Arrival => "the next message in order".into(),
        Wait::Inbound => "the next connection".into(),
        Wait::Pool => "a connection with the session magic".into(),
    }
}

/// The addresses init's allgather is predicted to gather, given that rank `r` of `n` listens at
/// `mine`: peer p at `mine`'s IPv4 address minus r plus p, on the same port, as in every
/// simulated world. Held as its difference from them (see [`Buffer`]), the allgather's result
/// takes a bit per peer there (n² addresses at once: 470 MB at 4096 ranks); a wrong prediction
/// (a real world's addresses) costs only the memory it would have taken.
fn consecutive_listeners(mine: SocketAddr, r: u32, n: u32) -> Option<Chunks> {
    let SocketAddr::V4(a) = mine else { return None };
    let first = u32::from(*a.ip()).checked_sub(r)?;
    first.checked_add(n.checked_sub(1)?)?;
    let port = a.port();
    Some(Chunks::from_fn(move |p, out| out.put(&encode_sockaddr(&SocketAddr::from((Ipv4Addr::from(first + p), port))))))
}

impl Rank {
    /// Runs steps until the current one blocks; completes the operation when none are left.
    pub(super) fn advance(&mut self) {
        loop {
            let Some(op) = &self.op else { return };
            if op.steps.is_empty() {
                self.complete();
                continue;
            }
            match self.poll_step() {
                Ok(Progress::Blocked) => return,
                Ok(Progress::Moved) => {}
                Ok(Progress::StepDone) => {
                    if let Some(op) = &mut self.op {
                        op.steps.pop_front();
                        op.wait = Wait::Start;
                    }
                    self.last_progress = self.now;
                }
                Err(e) => self.fail(e),
            }
        }
    }

    fn complete(&mut self) {
        let Some(op) = self.op.take() else { return };
        if op.kind == OpKind::Init {
            self.ready = true;
            self.emit(Event::Ready);
            self.out.completed(Completion { op: op.id, kind: op.kind, result: Ok(Vec::new()) });
            self.arm_eager_accept();
        } else {
            self.out.completed(Completion { op: op.id, kind: op.kind, result: Ok(op.result.into_vec()) });
        }
        self.start_queued();
    }

    fn running(&self) -> &Running {
        self.op.as_ref().expect("an operation is running")
    }

    fn origin(&self, step: u32) -> MsgOrigin {
        let op = self.running();
        MsgOrigin { op: op.id, kind: op.kind.op_type(), step }
    }

    /// `peer`'s bytes that do not decode, `from` naming what they were.
    fn wire_error_in(&self, from: String, peer: Culprit, error: WireError) -> BootstrapError {
        BootstrapError::Wire { rank: self.cfg.rank, op: self.running().kind, from, error, peer }
    }

    /// `peer`'s bytes that do not decode.
    fn wire_error(&self, peer: Culprit, error: WireError) -> BootstrapError {
        self.wire_error_in(peer.to_string(), peer, error)
    }

    fn dial(&mut self, role: Role, addr: std::net::SocketAddr) -> ConnId {
        let conn = self.conns.allocate();
        self.conns.insert(conn, Conn::new(role, Some(addr), self.now));
        self.out.effect(Effect::Connect { conn, addr });
        conn
    }

    fn accept(&mut self, listener: Listener) -> Progress {
        let conn = self.conns.allocate();
        self.out.effect(Effect::Accept { listener, conn });
        self.set_wait(Wait::Accepting(conn));
        Progress::Moved
    }

    /// The next inbound message connection: accepted now (NVSHMEM), or, under `read_ahead`,
    /// the oldest connection accepted ahead of time, in accept order as NVSHMEM takes them;
    /// but one whose header has not come within [`Rank::inbound_grace`] of its accept is
    /// presumed a stranger and passed over (not dropped: the header timeout does that), so
    /// idle strangers ahead of a message delay it by that grace at most.
    fn next_inbound(&mut self) -> Progress {
        if self.cfg.limits.read_ahead.is_none() {
            return self.accept(Listener::Peers);
        }
        let (now, grace) = (self.now, self.inbound_grace());
        let mut pick = None;
        for (i, id) in self.arrivals.iter().enumerate() {
            let Some(c) = self.conns.get(*id) else { continue };
            if !c.header_pending() {
                pick = Some(i);
                break;
            }
            if grace.is_none_or(|g| now < c.opened + g) {
                break;
            }
        }
        let picked = pick.and_then(|i| self.arrivals.remove(i));
        if self.arrivals.is_empty() {
            // Rewound, as `remove` leaves an emptied ring where it was (the next push stays warm).
            self.arrivals.clear();
        }
        match picked {
            Some(conn) => {
                self.set_wait(Wait::Header(conn));
                self.arm_eager_accept();
                Progress::Moved
            }
            None => {
                self.set_wait(Wait::Inbound);
                Progress::Blocked
            }
        }
    }

    /// Queues a write of one frame holding `bytes`.
    fn write_frame(&mut self, conn: ConnId, bytes: &[u8]) {
        self.out.write(conn, |b| encode_frame(b, bytes));
    }

    fn close_conn(&mut self, conn: ConnId) {
        self.conns.remove(conn);
        self.out.effect(Effect::Close { conn });
    }

    fn established(&self, conn: ConnId) -> bool {
        self.conns.get(conn).is_some_and(|c| c.established)
    }

    fn poll_step(&mut self) -> Result<Progress, BootstrapError> {
        let op = self.running();
        let step = op.steps.front().expect("a step").clone();
        let wait = op.wait;
        match step {
            Step::Listen => self.step_listen(wait),
            Step::Stagger { ms } => Ok(match wait {
                Wait::Start => {
                    let until = self.now + Duration::from_millis(ms);
                    self.set_wait(Wait::Until(until));
                    Progress::Moved
                }
                Wait::Until(t) if self.now >= t => Progress::StepDone,
                _ => Progress::Blocked,
            }),
            Step::CheckIn => self.step_check_in(wait),
            Step::AwaitSuccessor => self.step_await_successor(wait),
            Step::RingConnect { .. } => self.step_ring_connect(wait),
            Step::RingSend { slice } => {
                let conn = self.ring_send.expect("ring connected during init");
                let op = self.op.as_ref().expect("a running operation");
                let bytes = op.result.read(slice);
                self.out.write(conn, |b| encode_frame(b, &bytes));
                Ok(Progress::StepDone)
            }
            Step::RingRecv { slice } => self.step_ring_recv(slice),
            Step::LearnPeers => {
                let result = self.running().result.read(0..self.running().result.len());
                let mut peers = Vec::with_capacity(self.cfg.nranks as usize);
                for (i, chunk) in result.chunks_exact(SOCKADDR_LEN).enumerate() {
                    let addr = decode_sockaddr(chunk.try_into().expect("28 bytes")).map_err(|e| {
                        self.wire_error_in(format!("the allgathered address of rank {i}"), Culprit::Rank(i as u32), e)
                    })?;
                    peers.push(addr);
                }
                self.peers = PeerAddrs::new(peers);
                Ok(Progress::StepDone)
            }
            Step::Send { peer, tag, step, source, range } => self.step_send(wait, peer, tag, step, source, range),
            Step::Recv { peer, tag, step, into } => match self.cfg.variant.transport {
                Transport::PerMessage => self.step_recv_tagged(wait, peer, tag, step, into),
                Transport::Sequenced | Transport::Persistent => self.step_recv_ordered(wait, peer, tag, step, into),
            },
        }
    }

    fn step_listen(&mut self, wait: Wait) -> Result<Progress, BootstrapError> {
        if wait == Wait::Start {
            self.out.effect(Effect::Listen { listener: Listener::Peers });
            self.out.effect(Effect::Listen { listener: Listener::FromRoot });
            self.set_wait(Wait::Listening);
            return Ok(Progress::Moved);
        }
        let (Some(&peers), Some(_)) = (self.listeners.get(&Listener::Peers), self.listeners.get(&Listener::FromRoot))
        else {
            return Ok(Progress::Blocked);
        };
        let (r, n) = (self.cfg.rank, self.cfg.nranks);
        let op = self.op.as_mut().expect("init running");
        if let Some(predict) = consecutive_listeners(peers, r, n) {
            op.result = Buffer::predicted(SOCKADDR_LEN, n, predict);
        }
        op.result.write(r as usize * SOCKADDR_LEN, &encode_sockaddr(&peers));
        Ok(Progress::StepDone)
    }

    fn step_check_in(&mut self, wait: Wait) -> Result<Progress, BootstrapError> {
        match wait {
            Wait::Start => {
                let conn = self.dial(Role::ToRoot, self.cfg.uid.root);
                self.set_wait(Wait::Connecting(conn));
                Ok(Progress::Moved)
            }
            Wait::Connecting(conn) if self.established(conn) => {
                let (preamble, version) = (Preamble::bootstrap(self.cfg.uid.magic).encode(), self.cfg.uid.version);
                self.out.write(conn, |b| {
                    b.extend_from_slice(&preamble);
                    encode_frame(b, &version.to_le_bytes());
                });
                self.set_wait(Wait::Reading(conn));
                Ok(Progress::Moved)
            }
            Wait::Reading(conn) => {
                let c = self.conns.get_mut(conn).expect("root connection");
                let root = match c.reader.read_i32("root version") {
                    Ok(Some(v)) => v,
                    Ok(None) => return Ok(Progress::Blocked),
                    Err(WireError::Truncated { have: 0, .. }) => {
                        return Err(BootstrapError::CheckInRefused { rank: self.cfg.rank, root: self.cfg.uid.root })
                    }
                    Err(WireError::TimedOut { have: 0, .. }) => {
                        return Err(BootstrapError::CheckInTimedOut { rank: self.cfg.rank, root: self.cfg.uid.root })
                    }
                    Err(e) => return Err(self.wire_error(Culprit::Root, e)),
                };
                let ours = self.cfg.uid.version;
                if root != ours {
                    self.close_conn(conn);
                    return Err(BootstrapError::VersionMismatch { rank: self.cfg.rank, ours, root });
                }
                let info = ExtInfo {
                    rank: self.cfg.rank as i32,
                    nranks: self.cfg.nranks as i32,
                    listen_root: self.listeners[&Listener::FromRoot],
                    listen: self.listeners[&Listener::Peers],
                };
                self.write_frame(conn, &info.encode());
                self.close_conn(conn);
                Ok(Progress::StepDone)
            }
            _ => Ok(Progress::Blocked),
        }
    }

    fn step_await_successor(&mut self, wait: Wait) -> Result<Progress, BootstrapError> {
        match wait {
            Wait::Start | Wait::Pool if self.cfg.limits.read_ahead.is_some() => Ok(match self.pooled(Role::FromRoot) {
                Some(conn) => {
                    self.set_wait(Wait::Reading(conn));
                    Progress::Moved
                }
                None => self.block_on_pool(),
            }),
            Wait::Start => Ok(self.accept(Listener::FromRoot)),
            Wait::Reading(conn) => {
                let magic = self.cfg.uid.magic;
                let c = self.conns.get_mut(conn).expect("root's connection");
                let from = c.remote;
                match c.parse_header(magic, self.cfg.variant.transport) {
                    Ok(None) => return Ok(Progress::Blocked),
                    Ok(Some(_)) => {}
                    Err(error) => {
                        self.drop_stray(conn, from, error);
                        return Ok(self.accept(Listener::FromRoot));
                    }
                }
                let c = self.conns.get_mut(conn).expect("root's connection");
                let addr = match c.reader.read_fixed::<SOCKADDR_LEN>("successor address") {
                    Ok(None) => return Ok(Progress::Blocked),
                    Ok(Some(b)) => decode_sockaddr(&b),
                    Err(e) => Err(e),
                }
                .map_err(|e| self.wire_error(Culprit::Root, e))?;
                self.successor = Some(addr);
                self.close_conn(conn);
                self.listeners.remove(&Listener::FromRoot);
                self.out.effect(Effect::CloseListener { listener: Listener::FromRoot });
                self.root_accept = None;
                self.drop_pool(Role::FromRoot);
                Ok(Progress::StepDone)
            }
            _ => Ok(Progress::Blocked),
        }
    }

    fn step_ring_connect(&mut self, wait: Wait) -> Result<Progress, BootstrapError> {
        match wait {
            // Back to Start after a stalled stranger was dropped: the ring send side is already
            // connected, so only accept again.
            Wait::Start | Wait::Pool if self.ring_send.is_some() && self.cfg.limits.read_ahead.is_some() => {
                Ok(self.take_ring_from_pool())
            }
            Wait::Start if self.ring_send.is_some() => Ok(self.accept(Listener::Peers)),
            Wait::Start => {
                let succ = self.successor.expect("successor known before the ring");
                let conn = self.dial(Role::RingSend, succ);
                self.set_wait(Wait::Connecting(conn));
                Ok(Progress::Moved)
            }
            Wait::Connecting(conn) if self.established(conn) => {
                let preamble = Preamble::bootstrap(self.cfg.uid.magic).encode();
                self.out.write(conn, |b| b.extend_from_slice(&preamble));
                self.ring_send = Some(conn);
                if self.cfg.limits.read_ahead.is_some() {
                    return Ok(self.take_ring_from_pool());
                }
                Ok(self.accept(Listener::Peers))
            }
            Wait::Reading(conn) => {
                let magic = self.cfg.uid.magic;
                let c = self.conns.get_mut(conn).expect("ring connection");
                let from = c.remote;
                match c.parse_header(magic, self.cfg.variant.transport) {
                    Ok(None) => Ok(Progress::Blocked),
                    Ok(Some(_)) => {
                        self.ring_recv = Some(conn);
                        Ok(Progress::StepDone)
                    }
                    Err(error) => {
                        self.drop_stray(conn, from, error);
                        Ok(self.accept(Listener::Peers))
                    }
                }
            }
            _ => Ok(Progress::Blocked),
        }
    }

    fn step_ring_recv(&mut self, slice: std::ops::Range<usize>) -> Result<Progress, BootstrapError> {
        let conn = self.ring_recv.expect("ring connected during init");
        match self.recv_payload(conn, &slice) {
            Ok(None) => Ok(Progress::Blocked),
            Ok(Some(_)) => Ok(Progress::StepDone),
            Err(fail) => {
                let (n, r) = (self.cfg.nranks, self.cfg.rank);
                Err(self.read_error(fail, (r + n - 1) % n, 0, slice.len()))
            }
        }
    }

    fn read_error(&self, fail: ReadFail, peer: u32, tag: i32, expected: usize) -> BootstrapError {
        let (rank, op) = (self.cfg.rank, self.running().kind);
        match (fail, self.cfg.variant.size) {
            (ReadFail::Size { got }, SizePolicy::Strict) => {
                BootstrapError::SizeMismatch { rank, peer, op, tag, expected, got }
            }
            (ReadFail::Size { got }, SizePolicy::Lenient) => {
                BootstrapError::Truncated { rank, peer, op, tag, expected, got }
            }
            (ReadFail::Wire(e), _) => self.wire_error(Culprit::Rank(peer), e),
        }
    }

    fn step_send(
        &mut self,
        wait: Wait,
        peer: u32,
        tag: i32,
        step: u32,
        source: Source,
        range: std::ops::Range<usize>,
    ) -> Result<Progress, BootstrapError> {
        let transport = self.cfg.variant.transport;
        match wait {
            Wait::Start => {
                if transport == Transport::Persistent {
                    if let Some(conn) = self.stream_out.get(peer as usize) {
                        return Ok(self.send_message(conn, peer, tag, step, source, range));
                    }
                }
                let conn = self.dial(Role::MessageOut, self.peers.get(peer as usize));
                self.set_wait(Wait::Connecting(conn));
                Ok(Progress::Moved)
            }
            Wait::Connecting(conn) if self.established(conn) => {
                let (preamble, me) = (Preamble::bootstrap(self.cfg.uid.magic).encode(), self.cfg.rank as i32);
                let persistent = transport == Transport::Persistent;
                self.out.write(conn, |b| {
                    b.extend_from_slice(&preamble);
                    if persistent {
                        encode_frame(b, &me.to_le_bytes());
                    }
                });
                if persistent {
                    *self.stream_out.get_mut(peer as usize) = Some(conn);
                }
                Ok(self.send_message(conn, peer, tag, step, source, range))
            }
            Wait::Draining(conn) => {
                let Some((waited, unacked)) = self.conns.get(conn).and_then(|c| c.drained) else {
                    return Ok(Progress::Blocked);
                };
                if let Some(c) = self.conns.get_mut(conn) {
                    c.drained = None;
                }
                match unacked {
                    Some(unacked) => self.emit(Event::DrainGaveUp { conn, to: peer, tag, waited, unacked }),
                    None => self.emit(Event::DrainCompleted { conn, to: peer, waited }),
                }
                if transport != Transport::Persistent {
                    self.close_conn(conn);
                }
                Ok(Progress::StepDone)
            }
            _ => Ok(Progress::Blocked),
        }
    }

    /// Writes the message frames on an established connection, then drains or closes.
    fn send_message(
        &mut self,
        conn: ConnId,
        peer: u32,
        tag: i32,
        step: u32,
        source: Source,
        range: std::ops::Range<usize>,
    ) -> Progress {
        let transport = self.cfg.variant.transport;
        let seq = self.seq_out.get(peer as usize);
        if transport == Transport::Sequenced {
            *self.seq_out.get_mut(peer as usize) += 1;
        }
        let op = self.op.as_ref().expect("a running operation");
        let data = match source {
            Source::Input => op.input.read(range),
            Source::Result => op.result.read(range),
        };
        let (size, me) = (data.len(), self.cfg.rank as i32);
        self.out.write(conn, |b| {
            if transport != Transport::Persistent {
                encode_frame(b, &me.to_le_bytes());
            }
            encode_frame(b, &tag.to_le_bytes());
            if transport == Transport::Sequenced {
                encode_frame(b, &seq.to_le_bytes());
            }
            encode_frame(b, &data);
        });
        let origin = self.origin(step);
        self.emit(Event::MessageSent { conn, to: peer, tag, origin, size });
        if let Some(bound) = self.cfg.variant.drain {
            let deadline = self.now + bound;
            self.out.effect(Effect::Drain { conn, deadline });
            self.set_wait(Wait::Draining(conn));
            return Progress::Moved;
        }
        if transport != Transport::Persistent {
            self.close_conn(conn);
        }
        Progress::StepDone
    }

    /// `bootstrap_recv`: the unexpected list first (head to tail), then accept until a match.
    fn step_recv_tagged(
        &mut self,
        wait: Wait,
        peer: u32,
        tag: i32,
        step: u32,
        into: std::ops::Range<usize>,
    ) -> Result<Progress, BootstrapError> {
        match wait {
            Wait::Start => {
                let pos = self.unexpected.iter().position(|&(p, t, _)| p == peer as i32 && t == tag);
                if let Some(pos) = pos {
                    let (_, _, conn) = self.unexpected.remove(pos).expect("position found");
                    if self.unexpected.is_empty() {
                        self.unexpected.clear(); // rewound, as for `arrivals`
                    }
                    self.set_wait(Wait::Payload(conn));
                    return Ok(Progress::Moved);
                }
                Ok(self.next_inbound())
            }
            Wait::Inbound => Ok(self.next_inbound()),
            Wait::Header(conn) => {
                let magic = self.cfg.uid.magic;
                let c = self.conns.get_mut(conn).expect("accepted connection");
                let from = c.remote;
                match c.parse_header(magic, Transport::PerMessage) {
                    Ok(None) => Ok(Progress::Blocked),
                    Err(error) => {
                        self.drop_stray(conn, from, error);
                        Ok(self.next_inbound())
                    }
                    Ok(Some(h)) if h.rank == peer as i32 && h.tag == tag => {
                        self.set_wait(Wait::Payload(conn));
                        Ok(Progress::Moved)
                    }
                    Ok(Some(h)) => {
                        self.unexpected.push_back((h.rank, h.tag, conn));
                        self.check_unexpected()?;
                        let list_len = self.unexpected.len();
                        let from = u32::try_from(h.rank).unwrap_or(u32::MAX);
                        self.emit(Event::UnexpectedQueued {
                            conn,
                            from,
                            tag: h.tag,
                            waiting_for: (peer, tag),
                            list_len,
                        });
                        Ok(self.next_inbound())
                    }
                }
            }
            Wait::Payload(conn) => {
                let expected = into.len();
                match self.recv_payload(conn, &into) {
                    Ok(None) => Ok(Progress::Blocked),
                    Ok(Some(size)) => {
                        self.took(conn, peer, tag, step, expected, size);
                        self.close_conn(conn);
                        Ok(Progress::StepDone)
                    }
                    Err(fail) => Err(self.read_error(fail, peer, tag, expected)),
                }
            }
            _ => Ok(Progress::Blocked),
        }
    }

    /// Records what was taken: a message of `size` bytes for a receive of `expected`, already
    /// copied into the result buffer (straight from the connection's, no copy of its own).
    fn took(&mut self, conn: ConnId, peer: u32, tag: i32, step: u32, expected: usize, size: usize) {
        let origin = self.origin(step);
        self.emit(Event::MessageTaken { conn, from: peer, tag, origin, size, expected_size: expected });
        if size < expected {
            self.emit(Event::ShortMessageAccepted { conn, from: peer, tag, got: size, expected });
        }
    }

    /// Sequenced and persistent receives: the peer's next message in order, whose tag and size must agree.
    fn step_recv_ordered(
        &mut self,
        wait: Wait,
        peer: u32,
        tag: i32,
        step: u32,
        into: std::ops::Range<usize>,
    ) -> Result<Progress, BootstrapError> {
        if wait == Wait::Start {
            self.set_wait(Wait::Arrival);
            return Ok(Progress::Moved);
        }
        let expected = into.len();
        let max = self.cfg.limits.max_message;
        let (rank, kind) = (self.cfg.rank, self.running().kind);
        let p = peer as usize;
        let (conn, seq, got_tag) = match self.cfg.variant.transport {
            Transport::Sequenced => {
                let seq = self.seq_in.get(p);
                let Some(&conn) = self.arrived.get(&(peer, seq)) else { return Ok(Progress::Blocked) };
                let header = self.conns.get(conn).and_then(Conn::header).expect("indexed on a complete header");
                (conn, seq, header.tag)
            }
            _ => {
                let Some(conn) = self.stream_in.get(p) else { return Ok(Progress::Blocked) };
                let c = self.conns.get(conn).expect("stream");
                let got_tag = match c.reader.peek_i32("tag") {
                    Ok(Some(t)) => t,
                    Ok(None) => return Ok(Progress::Blocked),
                    Err(e) => return Err(self.wire_error(Culprit::Rank(peer), e)),
                };
                (conn, c.taken, got_tag)
            }
        };
        let persistent = self.cfg.variant.transport == Transport::Persistent;
        // On a persistent stream the payload frame follows the 8-byte tag frame.
        let offset = if persistent { 8 } else { 0 };
        let c = self.conns.get_mut(conn).expect("connection");
        let len = match c.reader.peek_frame_len_at(offset, max) {
            Ok(Some(len)) => len,
            Ok(None) => return Ok(Progress::Blocked),
            Err(e) => return Err(self.wire_error(Culprit::Rank(peer), e)),
        };
        if got_tag != tag || len != expected {
            return Err(BootstrapError::OutOfStep {
                rank,
                peer,
                op: kind,
                seq,
                expected_tag: tag,
                got_tag,
                expected_size: expected,
                got_size: len,
            });
        }
        if c.reader.buffered() < offset + 4 + len {
            if c.reader.is_eof() {
                let error = c.reader.cut_short("payload", offset + 4 + len, c.reader.buffered());
                return Err(self.wire_error(Culprit::Rank(peer), error));
            }
            return Ok(Progress::Blocked);
        }
        if persistent {
            c.reader.read_i32("tag").map_err(|e| self.wire_error(Culprit::Rank(peer), e))?;
        }
        // The whole frame is there and its length is the one expected: it is taken now.
        let size = match self.recv_payload(conn, &into) {
            Ok(Some(size)) => size,
            Ok(None) => return Ok(Progress::Blocked),
            Err(fail) => return Err(self.read_error(fail, peer, tag, expected)),
        };
        self.conns.get_mut(conn).expect("connection").taken += 1;
        self.took(conn, peer, tag, step, expected, size);
        if persistent {
            return Ok(Progress::StepDone);
        }
        *self.seq_in.get_mut(p) += 1;
        self.arrived.remove(&(peer, seq));
        self.close_conn(conn);
        Ok(Progress::StepDone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_predicts_peers_on_consecutive_addresses_around_its_own() {
        let mine: SocketAddr = "10.0.0.5:7000".parse().unwrap();
        let predict = consecutive_listeners(mine, 4, 300).expect("IPv4 with room");
        let at = |p| {
            let mut b = Vec::new();
            predict.make(p, &mut b);
            decode_sockaddr(b.as_slice().try_into().unwrap()).unwrap()
        };
        assert_eq!(
            (at(0), at(4), at(299)),
            ("10.0.0.1:7000".parse().unwrap(), mine, "10.0.1.44:7000".parse().unwrap())
        );
        assert!(consecutive_listeners("0.0.0.3:7000".parse().unwrap(), 4, 8).is_none(), "below 0.0.0.0");
        assert!(consecutive_listeners("255.255.255.254:1".parse().unwrap(), 0, 3).is_none(), "past the last address");
        assert!(consecutive_listeners("[::1]:7000".parse().unwrap(), 0, 2).is_none());
    }
}
