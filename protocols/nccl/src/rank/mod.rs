//! A rank as a sans-IO state machine: it runs its program of blocking bootstrap calls one after
//! another, exactly as NCCL's thread would, and fails at the first error as `ncclCommInitRank` does.
//!
//! NCCL takes one connection at a time from its listener and reads its whole header before taking
//! the next; a connection whose (peer, tag) does not match is appended to the unexpected list with
//! its payload still unread, and a later receive scans that list from the head (src/bootstrap.cc
//! `bootstrapRecv`, `unexpectedEnqueue`, `unexpectedDequeue`).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use bootsim_core::codec::{encode_frame, encode_sockaddr, FrameReader, WireError, SOCKADDR_LEN};
use bootsim_core::ConnId;

use crate::bootstrap_op::BootstrapOp;
use crate::codec::{self, ExtInfo, Header, Received};
use crate::error::NcclError;
use crate::io::{Effect, Event, Input, Listener, Outbox, Output};
use crate::program::{payload, Call, Planned, Step};
use crate::seam::{Completion, Failure, Key};
use crate::variant::Variant;

mod gather;
mod init;
mod peers;
mod recv;

/// What a rank is told.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RankConfig {
    /// This rank.
    pub rank: u32,
    /// The world size.
    pub nranks: u32,
    /// Which NCCL.
    pub variant: Variant,
    /// The unique ID's magic (unused by 2.8, which has none).
    pub magic: u64,
    /// The unique ID's address: the root's listener.
    pub root: SocketAddr,
    /// The calls to make, in order (the first is normally [`Step::Init`]).
    pub program: Vec<Planned>,
}

/// An open connection and what has arrived on it.
#[derive(Clone, Debug, Hash)]
struct Conn {
    reader: FrameReader,
    from: Option<SocketAddr>,
    /// True once the connection preamble was read and checked (always, where there is none).
    checked: bool,
}

/// A connection the unexpected list holds, payload unread.
#[derive(Clone, Copy, Debug, Hash)]
struct Unexpected {
    peer: i32,
    tag: i32,
    conn: ConnId,
}

/// The two sockets of a ring: `next` was connected to the successor, `prev` accepted from the
/// predecessor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Pair {
    next: ConnId,
    prev: ConnId,
}

/// What a receive wants and what it does with the connection once matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Want {
    peer: Option<u32>,
    tag: i32,
    size: usize,
    /// Keep the connection as one end of an intra-node ring (2.21) instead of reading a payload.
    stream: Option<ConnId>,
}

/// The ring allgather in progress (`gather.rs`): one slice per direction, not n.
#[derive(Clone, Debug, Hash)]
struct Gather {
    pair: Pair,
    /// This rank's index in the ring, and the ring's size.
    me: usize,
    n: usize,
    size: usize,
    round: usize,
    /// The ring's ranks in order (the intra-node ring's); empty for the ring of all ranks.
    ranks: Vec<u32>,
    /// The slices to write next round: on `next` (the one last taken from `prev`, first this
    /// rank's own) and on `prev` (last taken from `next`; 2.30).
    to_next: Vec<u8>,
    to_prev: Vec<u8>,
    /// The slices taken that are not the ones predicted, by slot.
    odd: BTreeMap<usize, Vec<u8>>,
    /// Init's allgather, whose slices start with their sender's address; where the ranks'
    /// addresses are predicted to be (from this rank's own).
    addresses: bool,
    layout: Option<peers::Layout>,
    /// Slices still to read this round: from `prev` (ring 0) and from `next` (ring 1, 2.30).
    want_prev: Option<usize>,
    want_next: Option<usize>,
    /// Close both sockets at the end (the intra-node ring).
    close: bool,
}

#[derive(Clone, Debug, Hash)]
enum State {
    Idle,
    InitListening,
    InitCheckIn {
        conn: ConnId,
    },
    InitSuccessor {
        conn: ConnId,
        accepted: bool,
    },
    InitRing {
        next: ConnId,
        next_up: bool,
        prev: ConnId,
        prev_up: bool,
    },
    InitP2pListen,
    Gathering(Gather),
    Sending {
        conn: ConnId,
        to: u32,
        tag: i32,
        logical_tag: i32,
        size: usize,
    },
    IntraConnect {
        next: ConnId,
        ranks: Vec<u32>,
        size: usize,
        tag: i32,
    },
    Accepting {
        want: Want,
        conn: ConnId,
    },
    Header {
        want: Want,
        conn: ConnId,
    },
    Payload {
        want: Want,
        conn: ConnId,
        header: Header,
    },
    /// The intra-node ring's sockets are both open: gather next.
    Done,
    Failed,
}

/// An NCCL rank (`Clone` and `Hash` so explorers can fork and deduplicate states).
#[derive(Clone, Debug, Hash)]
pub struct Rank {
    cfg: RankConfig,
    out: Outbox,
    next_conn: u64,
    listeners: BTreeMap<Listener, SocketAddr>,
    conns: BTreeMap<ConnId, Conn>,
    /// The peers' addresses from init's allgather (none before it ends).
    peers: peers::Peers,
    ring: Option<Pair>,
    unexpected: Vec<Unexpected>,
    step: usize,
    state: State,
    /// For the 2.21 intra-node ring: the ranks and size once both sockets are open.
    intra: Option<(Vec<u32>, usize)>,
    /// The address the ring socket being connected dials (for error messages).
    ring_addr: Option<SocketAddr>,
    /// Each step's [`crate::program::nth_of_kind`] (fixed by the program).
    nth: Vec<u32>,
}

impl Rank {
    /// A rank that starts its program at once.
    pub fn new(cfg: RankConfig) -> Rank {
        let mut rank = Rank {
            cfg,
            out: Outbox::default(),
            next_conn: 0,
            listeners: BTreeMap::new(),
            conns: BTreeMap::new(),
            peers: peers::Peers::default(),
            ring: None,
            unexpected: Vec::new(),
            step: 0,
            state: State::Idle,
            intra: None,
            ring_addr: None,
            nth: Vec::new(),
        };
        rank.nth = crate::program::nth_of_kind(&rank.cfg.program);
        rank.start_step();
        rank
    }

    /// Which NCCL.
    pub fn variant(&self) -> Variant {
        self.cfg.variant
    }

    /// This rank's number.
    pub fn rank(&self) -> u32 {
        self.cfg.rank
    }

    /// Hashes what decides this rank's future (its configuration, fixed, left out): for
    /// explorers' state fingerprints.
    pub fn hash_state<H: std::hash::Hasher>(&self, h: &mut H) {
        use std::hash::Hash;
        let Rank {
            cfg: _,
            out,
            next_conn,
            listeners,
            conns,
            peers,
            ring,
            unexpected,
            step,
            state,
            intra,
            ring_addr,
            nth: _,
        } = self;
        (out, next_conn, listeners, conns, peers).hash(h);
        (ring, unexpected, step, state, intra, ring_addr).hash(h);
    }

    /// True once every step completed.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// True once a step failed (the rank does nothing more).
    pub fn has_failed(&self) -> bool {
        matches!(self.state, State::Failed)
    }

    /// Connections held by the unexpected list, oldest first, as (peer, tag).
    pub fn unexpected(&self) -> Vec<(i32, i32)> {
        self.unexpected.iter().map(|u| (u.peer, u.tag)).collect()
    }

    /// What the rank is blocked on, in NCCL's terms, or None when done or failed. The rank that
    /// can unblock it is named where there is one (for the world's wait-for graph).
    pub fn waiting_for(&self) -> Option<(String, Option<u32>)> {
        let call = self.cfg.program.get(self.step).map(|p| p.call);
        let n = self.cfg.nranks;
        let (what, who) = match &self.state {
            State::Idle | State::Done | State::Failed => return None,
            State::InitListening => ("its listeners".to_string(), None),
            State::InitCheckIn { .. } => ("a connection to the root".to_string(), None),
            State::InitSuccessor { .. } => ("the root's answer (its ring successor)".to_string(), None),
            State::InitRing { prev, prev_up: false, .. } if self.conns.contains_key(prev) => (
                format!("the preamble of the connection from {}, taken as its ring predecessor's", self.from(*prev)),
                Some((self.cfg.rank + n - 1) % n),
            ),
            State::InitRing { .. } => {
                ("its ring neighbours' connections".to_string(), Some((self.cfg.rank + n - 1) % n))
            }
            State::Header { want, conn } => {
                let peer = want.peer.map_or("any rank".to_string(), |p| format!("rank {p}"));
                let what = format!(
                    "the header of the connection from {} (accepted while waiting for a message from {peer} with tag {:#x})",
                    self.from(*conn),
                    want.tag
                );
                (what, want.peer)
            }
            State::InitP2pListen => ("its point-to-point listener".to_string(), None),
            State::Gathering(g) => (
                format!("allgather round {} from its ring predecessor's socket ({})", g.round, self.from(g.pair.prev)),
                Some((self.cfg.rank + n - 1) % n),
            ),
            State::Sending { to, .. } => (format!("a connection to rank {to}"), Some(*to)),
            State::IntraConnect { ranks, .. } => (format!("a connection to a rank of {ranks:?}"), None),
            State::Accepting { want, .. } | State::Payload { want, .. } => {
                let peer = want.peer.map_or("any rank".to_string(), |p| format!("rank {p}"));
                (format!("a message from {peer} with tag {:#x} ({} bytes)", want.tag, want.size), want.peer)
            }
        };
        let at = call.map_or(String::new(), |c| format!(" in {c}"));
        Some((format!("{what}{at}"), who))
    }

    /// The next output of either kind, in the order made. For an [`Effect::Write`], the bytes
    /// to send replace the contents of `tx`, a buffer the world owns and reuses.
    pub fn poll_output(&mut self, tx: &mut Vec<u8>) -> Option<Output> {
        self.out.poll(tx)
    }

    /// NCCL's bootstrap sets no timer: always None.
    pub fn poll_timeout(&self) -> Option<bootsim_core::Instant> {
        None
    }

    /// Feeds one input.
    pub fn handle(&mut self, input: Input<'_>) {
        match input {
            Input::Listening { listener, addr } => {
                self.listeners.insert(listener.listener, addr);
            }
            Input::ListenFailed { reason, .. } => {
                let rank = self.cfg.rank;
                return self.fail(NcclError::Listen { rank, reason });
            }
            Input::Accepted { conn, from } => {
                let checked = !self.cfg.variant.has_preamble();
                self.conns.insert(conn, Conn { reader: FrameReader::new(), from: Some(from), checked });
                self.accepted(conn);
            }
            Input::Connected { conn } => {
                self.conns.insert(conn, Conn { reader: FrameReader::new(), from: None, checked: true });
                self.connected(conn);
            }
            Input::ConnectFailed { conn, reason } => return self.connect_failed(conn, reason),
            Input::Received { conn, bytes } => {
                let Some(c) = self.conns.get_mut(&conn) else { return };
                c.reader.push(bytes);
            }
            Input::PeerClosed { conn, reason } => {
                let Some(c) = self.conns.get_mut(&conn) else { return };
                c.reader.push_close(reason);
            }
            Input::Drained { .. } | Input::DrainTimedOut { .. } => return,
        }
        self.progress();
    }

    // ---- steps ------------------------------------------------------------------------------

    fn call(&self) -> Call {
        self.cfg.program[self.step].call
    }

    fn conn(&mut self) -> ConnId {
        self.next_conn += 1;
        ConnId(self.next_conn)
    }

    /// `listener`'s key on the seam, under this rank's variant.
    fn key(&self, listener: Listener) -> Key {
        Key::of(self.cfg.variant, listener)
    }

    fn p2p_listener(&self) -> Listener {
        if self.cfg.variant.separate_p2p_listener() {
            Listener::P2p
        } else {
            Listener::Ring
        }
    }

    fn start_step(&mut self) {
        let Some(planned) = self.cfg.program.get(self.step).cloned() else {
            self.state = State::Done;
            return;
        };
        self.out.event(Event::Started { step: self.step, call: planned.call });
        match planned.step {
            Step::Init => {
                self.out.effect(Effect::Listen { listener: self.key(Listener::Ring) });
                self.out.effect(Effect::Listen { listener: self.key(Listener::FromRoot) });
                self.state = State::InitListening;
            }
            Step::RingAllgather { size, addresses } => {
                let Some(pair) = self.ring else {
                    return self.invalid("an allgather before bootstrapInit built the ring".into());
                };
                self.start_gather(pair, Vec::new(), size, addresses, false);
            }
            Step::Send { peer, tag, logical_tag, size } => {
                let Some(addr) = self.peers.get(peer as usize) else {
                    return self.invalid(format!("send to rank {peer}, whose address is not known"));
                };
                let conn = self.conn();
                self.out.effect(Effect::Connect { conn, addr });
                self.state = State::Sending { conn, to: peer, tag, logical_tag, size };
            }
            Step::Recv { peer, tag, size, .. } => {
                if let Some(p) = peer.filter(|&p| p >= self.cfg.nranks) {
                    return self.invalid(format!("recv from rank {p} of {}", self.cfg.nranks));
                }
                self.start_recv(Want { peer, tag, size, stream: None });
            }
            Step::IntraRingAllgather { ranks, size, tag } => {
                let Some(me) = ranks.iter().position(|&r| r == self.cfg.rank) else {
                    return self.invalid(format!("intra-node allgather over {ranks:?} without this rank"));
                };
                if ranks.len() == 1 {
                    // NCCL returns at once for a single rank.
                    return self.complete(Ok(payload(self.cfg.rank, self.step, size)));
                }
                let next = ranks[(me + 1) % ranks.len()];
                let Some(addr) = self.peers.get(next as usize) else {
                    return self.invalid(format!("intra-node allgather to rank {next}, whose address is not known"));
                };
                let conn = self.conn();
                self.out.effect(Effect::Connect { conn, addr });
                self.ring_addr = Some(addr);
                self.state = State::IntraConnect { next: conn, ranks, size, tag };
            }
        }
    }

    fn complete(&mut self, result: Result<Vec<u8>, NcclError>) {
        let call = self.call();
        let failed = result.is_err();
        self.out.completed(Completion { step: self.step, call: Some(call), result: result.map_err(Failure::Rank) });
        if failed {
            self.state = State::Failed;
            return;
        }
        self.step += 1;
        self.state = State::Idle;
        self.start_step();
    }

    fn fail(&mut self, e: NcclError) {
        if matches!(self.state, State::Failed | State::Done) {
            return;
        }
        self.complete(Err(e));
    }

    fn invalid(&mut self, reason: String) {
        let (rank, call) = (self.cfg.rank, self.call());
        self.fail(NcclError::Invalid { rank, call, reason });
    }

    // ---- inputs -----------------------------------------------------------------------------

    fn accepted(&mut self, conn: ConnId) {
        self.state = match std::mem::replace(&mut self.state, State::Idle) {
            State::InitSuccessor { conn: c, .. } if c == conn => State::InitSuccessor { conn, accepted: true },
            State::InitRing { next, next_up, prev, .. } if prev == conn => {
                State::InitRing { next, next_up, prev, prev_up: false }
            }
            State::Accepting { want, conn: c } if c == conn => State::Header { want, conn },
            other => other,
        };
    }

    fn connected(&mut self, conn: ConnId) {
        let (v, magic, rank) = (self.cfg.variant, self.cfg.magic, self.cfg.rank);
        match std::mem::replace(&mut self.state, State::Idle) {
            State::InitCheckIn { conn: c } if c == conn => {
                let listen = self.listeners[&Listener::Ring];
                let listen_root = self.listeners[&Listener::FromRoot];
                let info = ExtInfo { rank: rank as i32, nranks: self.cfg.nranks as i32, listen_root, listen };
                let mut bytes = Vec::new();
                codec::encode_preamble(&mut bytes, v, magic);
                encode_frame(&mut bytes, &codec::encode_ext_info(&info, v));
                self.out.write(conn, |b| b.extend_from_slice(&bytes));
                self.out.effect(Effect::Close { conn });
                self.conns.remove(&conn);
                let reply = self.conn();
                self.out.effect(Effect::Accept { listener: self.key(Listener::FromRoot), conn: reply });
                self.state = State::InitSuccessor { conn: reply, accepted: false };
            }
            State::InitRing { next, prev, prev_up, .. } if next == conn => {
                let mut bytes = Vec::new();
                codec::encode_preamble(&mut bytes, v, magic);
                if !bytes.is_empty() {
                    self.out.write(conn, |b| b.extend_from_slice(&bytes));
                }
                self.state = State::InitRing { next, next_up: true, prev, prev_up };
            }
            State::Sending { conn: c, to, tag, logical_tag, size } if c == conn => {
                let data = payload(rank, self.step, size);
                let bytes = codec::encode_message(v, magic, rank, tag, &data);
                self.out.write(conn, |b| b.extend_from_slice(&bytes));
                // Said before the close, while the world still knows the connection.
                let step = self.step;
                let (nth, op) = (self.nth[step], BootstrapOp::of(self.call().kind));
                self.out.event(Event::Sent { conn, step, to, tag, logical_tag, nth, op, size });
                self.out.effect(Effect::Close { conn });
                self.conns.remove(&conn);
                self.complete(Ok(Vec::new()));
            }
            State::IntraConnect { next, ranks, size, tag } if next == conn => {
                let mut bytes = Vec::new();
                codec::encode_preamble(&mut bytes, v, magic);
                codec::encode_header(&mut bytes, v, rank, tag);
                self.out.write(conn, |b| b.extend_from_slice(&bytes));
                let prev =
                    ranks[(ranks.iter().position(|&r| r == rank).expect("checked") + ranks.len() - 1) % ranks.len()];
                self.intra = Some((ranks, size));
                self.start_recv(Want { peer: Some(prev), tag, size: 0, stream: Some(next) });
            }
            other => self.state = other,
        }
    }

    fn connect_failed(&mut self, conn: ConnId, reason: String) {
        let to = match &self.state {
            State::InitCheckIn { conn: c } if *c == conn => ("the root".to_string(), self.cfg.root),
            State::Sending { conn: c, to, .. } if *c == conn => {
                (format!("rank {to}"), self.peers.get(*to as usize).expect("known at start"))
            }
            State::InitRing { next, .. } | State::IntraConnect { next, .. } if *next == conn => {
                ("its ring successor".to_string(), self.ring_addr.unwrap_or(self.cfg.root))
            }
            _ => return,
        };
        let (rank, call) = (self.cfg.rank, self.call());
        self.fail(NcclError::Connect { rank, call, to: to.0, addr: to.1, reason });
    }

    // ---- reading ----------------------------------------------------------------------------

    /// Advances the current step as far as the bytes received allow.
    fn progress(&mut self) {
        loop {
            let before = self.step;
            // Matched by reference, fields copied out: cloning an allgather's state per input
            // (its whole buffer of n slices, then) once made a run cubic in n.
            let moved = match &self.state {
                State::InitListening => self.init_listening(),
                &State::InitSuccessor { conn, accepted: true } => self.init_successor(conn),
                &State::InitRing { next, next_up, prev, prev_up } => self.init_ring(next, next_up, prev, prev_up),
                State::InitP2pListen if self.listeners.contains_key(&Listener::P2p) => {
                    self.complete(Ok(Vec::new()));
                    true
                }
                State::Gathering(_) => self.gather(),
                &State::Header { want, conn } => self.header(want, conn),
                &State::Payload { want, conn, header } => self.payload(want, conn, header),
                _ => false,
            };
            if !moved && self.step == before {
                return;
            }
        }
    }
}

/// How an accepted connection's preamble check went.
enum Check {
    Ready,
    Wait,
    Discarded,
    Failed(NcclError),
}

/// NCCL's size rule on the next frame of a connection.
fn recv_frame(c: &mut Conn, what: &'static str, expected: usize) -> Result<Option<Received>, WireError> {
    codec::recv_frame(&mut c.reader, what, expected)
}
