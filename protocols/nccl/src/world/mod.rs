//! An in-memory world for stepping NCCL's root and ranks without sockets (tests only): zero
//! latency, FIFO accept queues, and a test-chosen accept order through [`Hold`]s, which keep one
//! message's connection out of its listener's accept queue until the sender's next connection to
//! that listener is queued (the kernel completing a later handshake first), or until nothing else
//! can happen. Deterministic: ordered maps, a FIFO work queue, no clock.
//!
//! It also judges: every receive must take the message its sender meant for it, the k-th send of
//! (sender, receiver, intended tag) for the k-th such receive (MPI's non-overtaking order).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

pub use bootsim_core::memnet::Node;
use bootsim_core::ConnId;

use crate::codec::message_identity;
use crate::error::{NcclError, RootError};
use crate::io::{Effect, Listener, Observation, Output};
use crate::program::{Planned, Step};
use crate::rank::{Rank, RankConfig};
use crate::root::{Root, RootConfig};
use crate::variant::Variant;

mod oracle;
pub use crate::oracle::Mismatch;
use oracle::Judge;

/// Keep the `nth` message (from 0) from rank `from` to rank `to` whose header carries `tag` (0
/// in 2.8, where no tag is sent) out of `to`'s accept queue, until `from`'s next connection to the
/// same listener is queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hold {
    /// Sender.
    pub from: u32,
    /// Receiver.
    pub to: u32,
    /// The tag on the wire.
    pub tag: i32,
    /// Which of those messages.
    pub nth: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Queue {
    /// Waiting for its first bytes to tell whether a hold applies.
    Pending,
    Held,
    Queued,
}

#[derive(Clone, Debug, Hash)]
struct Link {
    /// Client end (0) and server end (1): node and that node's connection id.
    ends: [(Node, Option<ConnId>); 2],
    server: SocketAddr,
    client_addr: SocketAddr,
    early: Vec<u8>,
    early_eof: bool,
    queue: Queue,
    closed: [bool; 2],
    /// True once the client wrote its first bytes.
    written: bool,
}

/// An input the world queues, owning its bytes.
type Owned = bootsim_core::seam::OwnedInput<Listener>;

/// How a rank ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every step completed.
    Done,
    /// A step failed.
    Failed(NcclError),
    /// Blocked for good on what is named.
    Hung(String),
}

/// The in-memory world (`Clone` so the explorer can fork it).
#[derive(Clone)]
pub struct World {
    variant: Variant,
    programs: Vec<Vec<Planned>>,
    root: Root,
    ranks: Vec<Rank>,
    listeners: BTreeMap<SocketAddr, Node>,
    accept_queue: BTreeMap<SocketAddr, VecDeque<usize>>,
    pending_accept: BTreeMap<SocketAddr, ConnId>,
    waiting_connects: BTreeMap<SocketAddr, Vec<(Node, ConnId)>>,
    injections: BTreeMap<SocketAddr, Vec<(Vec<u8>, bool)>>,
    links: Vec<Link>,
    link_of: BTreeMap<(Node, ConnId), (usize, usize)>,
    holds: Vec<Hold>,
    seen: BTreeMap<(u32, u32, i32), u32>,
    messages: Vec<Hold>,
    work: VecDeque<(Node, Owned)>,
    judge: Judge,
    /// The first error of each rank that failed.
    failures: BTreeMap<u32, NcclError>,
    root_done: Option<Result<(), RootError>>,
    /// False under the explorer: observations are judged, not kept.
    keep_log: bool,
    /// True under the explorer: a pending accept takes only the connection the explorer chooses.
    chosen_accepts: bool,
    /// Under the explorer: listeners that let their queued connections wait until another one
    /// is queued.
    waiting: BTreeSet<SocketAddr>,
    /// Every observation, in order.
    pub log: Vec<(Node, Observation)>,
}

/// The address the world gives a listener.
pub fn listener_addr(node: Node, listener: Listener) -> SocketAddr {
    match node {
        Node::Root => SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), Listener::Root.port())),
        Node::Stranger => SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 1)),
        Node::Rank(r) => {
            let ip = Ipv4Addr::new(10, 1 + (r >> 16) as u8, (r >> 8) as u8, r as u8);
            SocketAddr::V4(SocketAddrV4::new(ip, listener.port()))
        }
    }
}

/// The magic of the world's unique ID.
pub const MAGIC: u64 = 0x5eed_0000_1176_0219;

impl World {
    /// A root and one rank per program, all starting at once.
    pub fn new(variant: Variant, programs: Vec<Vec<Planned>>) -> World {
        World::build(variant, programs, false, true)
    }

    fn build(variant: Variant, programs: Vec<Vec<Planned>>, chosen_accepts: bool, keep_log: bool) -> World {
        let nranks = programs.len() as u32;
        let root_addr = listener_addr(Node::Root, Listener::Root);
        let root = Root::new(RootConfig { variant, magic: MAGIC });
        let ranks = programs
            .iter()
            .enumerate()
            .map(|(r, program)| {
                Rank::new(RankConfig {
                    rank: r as u32,
                    nranks,
                    variant,
                    magic: MAGIC,
                    root: root_addr,
                    program: program.clone(),
                })
            })
            .collect();
        let judge = Judge::new(&programs);
        let mut w = World {
            variant,
            programs,
            root,
            ranks,
            listeners: BTreeMap::new(),
            accept_queue: BTreeMap::new(),
            pending_accept: BTreeMap::new(),
            waiting_connects: BTreeMap::new(),
            injections: BTreeMap::new(),
            links: Vec::new(),
            link_of: BTreeMap::new(),
            holds: Vec::new(),
            seen: BTreeMap::new(),
            messages: Vec::new(),
            work: VecDeque::new(),
            judge,
            failures: BTreeMap::new(),
            root_done: None,
            keep_log,
            chosen_accepts,
            waiting: BTreeSet::new(),
            log: Vec::new(),
        };
        w.collect(Node::Root);
        for r in 0..nranks {
            w.collect(Node::Rank(r));
        }
        w
    }

    /// Adds a hold (before [`World::run`]).
    pub fn hold(&mut self, hold: Hold) {
        self.holds.push(hold);
    }

    /// Holds the message rank `from` sends in step `step` of its program (a [`Step::Send`]): the
    /// same message whatever tags the variant puts on the wire.
    pub fn hold_step(&mut self, from: u32, step: usize) {
        let prog = &self.programs[from as usize];
        let Step::Send { peer, tag, .. } = prog[step].step else { panic!("step {step} of rank {from} is not a send") };
        let nth = prog[..step]
            .iter()
            .filter(|p| matches!(p.step, Step::Send { peer: q, tag: t, .. } if q == peer && t == tag))
            .count() as u32;
        self.hold(Hold { from, to: peer, tag, nth });
    }

    /// Connects a stranger to rank `to`'s point-to-point listener (the ring listener before 2.23)
    /// ahead of everyone, sends `bytes` and closes: it is the first connection that listener
    /// queues once it exists.
    pub fn inject(&mut self, to: u32, bytes: Vec<u8>) {
        self.inject_with(to, bytes, true);
    }

    /// As [`World::inject`], but the stranger sends nothing and never closes (an idle client:
    /// NVIDIA/nccl#1871, #1808).
    pub fn inject_idle(&mut self, to: u32) {
        self.inject_with(to, Vec::new(), false);
    }

    fn inject_with(&mut self, to: u32, bytes: Vec<u8>, close: bool) {
        let listener = if self.variant.separate_p2p_listener() { Listener::P2p } else { Listener::Ring };
        let addr = listener_addr(Node::Rank(to), listener);
        if self.listeners.contains_key(&addr) {
            self.stranger(addr, bytes, close);
        } else {
            self.injections.entry(addr).or_default().push((bytes, close));
        }
    }

    fn stranger(&mut self, addr: SocketAddr, bytes: Vec<u8>, close: bool) {
        let conn = ConnId(1_000_000 + self.links.len() as u64);
        self.connect(Node::Stranger, conn, addr);
        if !bytes.is_empty() {
            self.execute(Node::Stranger, Effect::Write { conn, bytes });
        }
        if close {
            self.execute(Node::Stranger, Effect::Close { conn });
        }
    }

    /// Runs until nothing can happen any more; a held connection is let go only when nothing
    /// else can happen.
    pub fn run(&mut self) {
        loop {
            while let Some((node, input)) = self.work.pop_front() {
                match node {
                    Node::Root => self.root.handle(input.as_input()),
                    Node::Rank(r) => self.ranks[r as usize].handle(input.as_input()),
                    Node::Stranger => continue,
                }
                self.collect(node);
            }
            let Some(i) = self.links.iter().position(|l| l.queue == Queue::Held) else { return };
            self.enqueue(i);
        }
    }

    /// How rank `r` ended.
    pub fn outcome(&self, r: u32) -> Outcome {
        let rank = &self.ranks[r as usize];
        if rank.is_done() {
            return Outcome::Done;
        }
        match self.failures.get(&r) {
            Some(e) => Outcome::Failed(e.clone()),
            None => Outcome::Hung(rank.waiting_for().map_or("nothing".into(), |w| w.0)),
        }
    }

    /// Rank `r`'s state machine.
    pub fn rank(&self, r: u32) -> &Rank {
        &self.ranks[r as usize]
    }

    /// How the root ended, if it did.
    pub fn root_result(&self) -> Option<Result<(), RootError>> {
        self.root_done.clone()
    }

    /// The bytes rank `r`'s step `step` completed with.
    pub fn result(&self, r: u32, step: usize) -> Option<&Result<Vec<u8>, NcclError>> {
        self.log.iter().find_map(|(n, o)| match o {
            Observation::Completed { step: s, result, .. } if *n == Node::Rank(r) && *s == step => Some(result),
            _ => None,
        })
    }

    fn collect(&mut self, node: Node) {
        loop {
            let out = match node {
                Node::Root => self.root.poll_output(),
                Node::Rank(r) => self.ranks[r as usize].poll_output(),
                Node::Stranger => return,
            };
            match out {
                None => return,
                Some(Output::Observe(o)) => self.observe(node, o),
                Some(Output::Effect(e)) => self.execute(node, e),
            }
        }
    }

    /// Judges an observation, remembers how nodes ended, and logs it unless exploring.
    fn observe(&mut self, node: Node, o: Observation) {
        let link_of = &self.link_of;
        self.judge.observe(node, &o, |c| link_of.get(&(node, c)).map(|&(i, _)| i));
        match (&node, &o) {
            (Node::Rank(r), Observation::Completed { result: Err(e), .. }) => {
                self.failures.entry(*r).or_insert_with(|| e.clone());
            }
            (_, Observation::RootDone { result }) if self.root_done.is_none() => self.root_done = Some(result.clone()),
            _ => {}
        }
        if self.keep_log {
            self.log.push((node, o));
        }
    }

    fn execute(&mut self, node: Node, effect: Effect) {
        match effect {
            Effect::Listen { listener } => {
                let addr = listener_addr(node, listener);
                self.listeners.insert(addr, node);
                self.work.push_back((node, Owned::Listening { listener, addr }));
                for (bytes, close) in self.injections.remove(&addr).unwrap_or_default() {
                    self.stranger(addr, bytes, close);
                }
                for (client, conn) in self.waiting_connects.remove(&addr).unwrap_or_default() {
                    self.connect(client, conn, addr);
                }
            }
            Effect::Accept { listener, conn } => {
                let addr = listener_addr(node, listener);
                self.pending_accept.insert(addr, conn);
                self.try_accept(addr);
            }
            Effect::CloseListener { listener } => {
                let addr = listener_addr(node, listener);
                self.listeners.remove(&addr);
                self.pending_accept.remove(&addr);
                self.waiting.remove(&addr);
                for i in self.accept_queue.remove(&addr).unwrap_or_default() {
                    self.close_side(i, 0);
                }
            }
            Effect::Connect { conn, addr } => self.connect(node, conn, addr),
            Effect::Write { conn, bytes } => {
                let Some(&(i, side)) = self.link_of.get(&(node, conn)) else { return };
                if self.links[i].closed[side] {
                    return;
                }
                if side == 0 && !self.links[i].written {
                    self.links[i].written = true;
                    self.first_write(i, &bytes);
                }
                let (peer_node, peer_conn) = self.links[i].ends[1 - side];
                match peer_conn {
                    Some(c) if !self.links[i].closed[1 - side] => {
                        self.work.push_back((peer_node, Owned::Received { conn: c, bytes }))
                    }
                    Some(_) => {}
                    None => self.links[i].early.extend_from_slice(&bytes),
                }
            }
            Effect::Close { conn } => {
                let Some(&(i, side)) = self.link_of.get(&(node, conn)) else { return };
                if self.links[i].closed[side] {
                    return;
                }
                self.links[i].closed[side] = true;
                if side == 0 && self.links[i].queue == Queue::Pending {
                    self.enqueue(i);
                }
                self.close_side(i, 1 - side);
            }
        }
    }

    /// Tells the end on `side` of link `i` that its peer closed.
    fn close_side(&mut self, i: usize, side: usize) {
        let (node, conn) = self.links[i].ends[side];
        match conn {
            Some(c) if !self.links[i].closed[side] => self.work.push_back((node, Owned::PeerClosed { conn: c })),
            Some(_) => {}
            None => self.links[i].early_eof = true,
        }
    }

    fn connect(&mut self, client: Node, conn: ConnId, addr: SocketAddr) {
        let Some(&server) = self.listeners.get(&addr) else {
            // NCCL retries "connection refused": here, until the listener exists.
            self.waiting_connects.entry(addr).or_default().push((client, conn));
            return;
        };
        let i = self.links.len();
        // The client's port comes from its own connection number, not from the order of
        // connects across nodes: the explorer's states then do not depend on that order.
        let client_addr = match client {
            Node::Root => SocketAddr::from(([10, 0, 0, 1], 40000u16.wrapping_add(conn.0 as u16))),
            Node::Stranger => SocketAddr::from(([192, 0, 2, 1], 40000u16.wrapping_add(i as u16))),
            Node::Rank(_) => {
                SocketAddr::new(listener_addr(client, Listener::Ring).ip(), 40000u16.wrapping_add(conn.0 as u16))
            }
        };
        let watched = match (client, server) {
            (Node::Rank(from), Node::Rank(to)) => self.holds.iter().any(|h| h.from == from && h.to == to),
            _ => false,
        };
        self.links.push(Link {
            ends: [(client, Some(conn)), (server, None)],
            server: addr,
            client_addr,
            early: Vec::new(),
            early_eof: false,
            queue: Queue::Pending,
            closed: [false, false],
            written: false,
        });
        self.link_of.insert((client, conn), (i, 0));
        self.work.push_back((client, Owned::Connected { conn }));
        if !watched {
            self.enqueue(i);
        }
    }

    /// A connection's first bytes say which message it is: count it and, if it is watched, hold
    /// it or queue it.
    fn first_write(&mut self, i: usize, bytes: &[u8]) {
        let pending = self.links[i].queue == Queue::Pending;
        let identity = match (self.links[i].ends[0].0, self.links[i].ends[1].0) {
            (Node::Rank(from), Node::Rank(to)) => message_identity(self.variant, bytes).map(|h| (from, to, h)),
            _ => None,
        };
        let Some((from, to, h)) = identity else {
            if pending {
                self.enqueue(i);
            }
            return;
        };
        let nth = self.seen.entry((from, to, h.tag)).or_insert(0);
        let this = *nth;
        *nth += 1;
        let key = Hold { from, to, tag: h.tag, nth: this };
        self.messages.push(key);
        if !pending {
            return;
        }
        if self.holds.contains(&key) {
            self.links[i].queue = Queue::Held;
        } else {
            self.enqueue(i);
        }
    }

    /// Every point-to-point connection between ranks so far, in the order its first bytes were
    /// written, as the [`Hold`] that would hold it.
    pub fn messages(&self) -> &[Hold] {
        &self.messages
    }

    fn enqueue(&mut self, i: usize) {
        let link = &mut self.links[i];
        let was_held = link.queue == Queue::Held;
        link.queue = Queue::Queued;
        let addr = link.server;
        let client = link.ends[0].0;
        self.accept_queue.entry(addr).or_default().push_back(i);
        self.waiting.remove(&addr);
        if !was_held {
            // Release on next: a held connection from the same sender to the same listener goes
            // right after this one.
            let held: Vec<usize> = (0..self.links.len())
                .filter(|&j| {
                    self.links[j].queue == Queue::Held
                        && self.links[j].ends[0].0 == client
                        && self.links[j].server == addr
                })
                .collect();
            for j in held {
                self.links[j].queue = Queue::Queued;
                self.accept_queue.entry(addr).or_default().push_back(j);
            }
        }
        self.try_accept(addr);
    }

    fn try_accept(&mut self, addr: SocketAddr) {
        if self.chosen_accepts {
            return;
        }
        let Some(i) = self.accept_queue.get(&addr).and_then(|q| q.front()).copied() else { return };
        self.accept_link(addr, i);
    }

    /// Hands the listener at `addr`, which has an accept pending, the queued link `i`.
    fn accept_link(&mut self, addr: SocketAddr, i: usize) {
        let Some(&conn) = self.pending_accept.get(&addr) else { return };
        let Some(q) = self.accept_queue.get_mut(&addr) else { return };
        let Some(at) = q.iter().position(|&j| j == i) else { return };
        q.remove(at);
        self.pending_accept.remove(&addr);
        let server = self.listeners[&addr];
        let link = &mut self.links[i];
        link.ends[1].1 = Some(conn);
        self.link_of.insert((server, conn), (i, 1));
        self.work.push_back((server, Owned::Accepted { conn, from: link.client_addr }));
        let early = std::mem::take(&mut link.early);
        if !early.is_empty() {
            self.work.push_back((server, Owned::Received { conn, bytes: early }));
        }
        if link.early_eof {
            self.work.push_back((server, Owned::PeerClosed { conn }));
        }
    }
}
