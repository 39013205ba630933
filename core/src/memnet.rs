//! An in-memory world for stepping a root and N ranks of any protocol on the seam
//! ([`crate::seam::Node`]) without sockets, in the style of
//! quinn-proto's test `Pair`: zero latency, FIFO accept queues, and scripted holds that keep a
//! connection out of its listener's accept queue (the kernel delaying its handshake) until the
//! sender's next connection to the same listener is queued, or a fallback time passes (or, as
//! a scripted accept order, peer listeners taking their newest connection first). It keeps
//! every observation and the message log ([`MessageLog`]) a protocol's judge reads.
//!
//! It is deterministic (ordered maps, FIFO work queue, time only moves to the next timer) and
//! small enough to read: the simulator in `bootsim-sim` is the adversarial version.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use crate::ids::ConnId;
use crate::record::{MessageLog, SentMsg, TakenMsg};
use crate::seam::{
    self, CloseReason, Completed, Effect, ListenerKey, NodeOutput, Nodes, Noted, Observation, Observed, OwnedInput,
    Protocol, Setup,
};
use crate::time::Instant;

/// A participant: the root or a rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Node {
    /// The root.
    Root,
    /// Rank `r`.
    Rank(u32),
    /// A process outside the session (strays injected by tests).
    Stranger,
}

/// Keep one connection out of the accept queue for a while.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hold {
    /// The dialing rank.
    pub from: u32,
    /// The rank whose peer listener it dials.
    pub to: u32,
    /// Which of `from`'s connections to that listener (0-based; the ring connection counts).
    pub nth: u32,
    /// Release it once `from`'s next connection to that listener is queued, or after `fallback`.
    pub fallback: Duration,
}

/// One end of a connection, as seen by the memnet.
#[derive(Debug)]
struct End {
    node: Node,
    conn: Option<ConnId>,
}

#[derive(Debug)]
struct Link {
    ends: [End; 2],
    /// Bytes written by the client before the server accepted (delivered on accept).
    early: Vec<u8>,
    /// The client's end ended before the server accepted (delivered on accept, after `early`).
    early_close: Option<CloseReason>,
    queued: bool,
    hold_until: Option<Instant>,
    client_addr: SocketAddr,
    /// The listener it dialed.
    server_addr: SocketAddr,
    /// For a rank's connection to another rank's peer listener: that rank, and which of the
    /// dialer's connections to that listener it is (what a [`Hold`] names).
    peer_dial: Option<(u32, u32)>,
}

/// The in-memory world, running nodes of type `N`.
pub struct MemNet<N: seam::Node> {
    now: Instant,
    root: N,
    ranks: Vec<N>,
    listeners: BTreeMap<SocketAddr, (Node, N::Listener)>,
    accept_queue: BTreeMap<SocketAddr, VecDeque<usize>>,
    pending_accept: BTreeMap<SocketAddr, ConnId>,
    waiting_connects: BTreeMap<SocketAddr, Vec<(Node, ConnId)>>,
    /// Strangers waiting for a listener to open: their bytes, and whether they close.
    injections: BTreeMap<SocketAddr, Vec<(Vec<u8>, bool)>>,
    links: Vec<Link>,
    by_end: BTreeMap<(Node, ConnId), (usize, usize)>,
    drains: BTreeMap<(Node, ConnId), (Instant, Instant)>,
    holds: Vec<Hold>,
    dialed: BTreeMap<(u32, SocketAddr), u32>,
    /// Peer listeners take their newest queued connection first ([`MemNet::accept_newest_first`]).
    newest_first: bool,
    work: VecDeque<(Node, OwnedInput<N::Listener>)>,
    /// The buffer the state machines write frames into (`poll_output`), reused.
    tx: Vec<u8>,
    /// Every completion, in order.
    pub completions: Vec<(Instant, Node, N::Completion)>,
    /// Every event, in order.
    pub events: Vec<(Instant, Node, N::Event)>,
    /// The ranks' messages, sent and taken, joined by connection ([`Observed::noted`]).
    pub messages: MessageLog,
}

/// The address the memnet gives a listener: its port on its node's host.
pub fn listener_addr<L: ListenerKey>(node: Node, listener: L) -> SocketAddr {
    match node {
        Node::Stranger => SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 1)),
        _ => SocketAddr::new(host_ip(node), listener.port()),
    }
}

/// A node's host address (a stranger's is outside the session's network).
fn host_ip(node: Node) -> IpAddr {
    IpAddr::V4(match node {
        Node::Root => Ipv4Addr::new(10, 0, 0, 1),
        Node::Stranger => Ipv4Addr::new(192, 0, 2, 1),
        Node::Rank(r) => Ipv4Addr::new(10, 1 + (r >> 16) as u8, (r >> 8) as u8, r as u8),
    })
}

/// Rank `r`'s first rank-to-rank listener (where holds and strangers dial).
fn peer_addr<L: ListenerKey>(r: u32) -> Option<SocketAddr> {
    L::ALL.iter().find(|l| l.is_peer()).map(|&l| listener_addr(Node::Rank(r), l))
}

impl<N: seam::Node> MemNet<N> {
    /// `protocol`'s root and `n` ranks of this variant and workload (the root's host is
    /// 10.0.0.1), all starting at time zero.
    pub fn of<P: Protocol<Node = N>>(
        protocol: &P,
        variant: &P::Variant,
        workload: &P::Workload,
        seed: u64,
        n: u32,
    ) -> Self {
        let setup = Setup { variant, workload, seed, n, root_ip: host_ip(Node::Root) };
        MemNet::from_nodes(protocol.nodes(&setup))
    }

    /// A world of these nodes (the root on 10.0.0.1, rank r on 10.1.r), all starting at time zero.
    pub fn from_nodes(nodes: Nodes<N>) -> MemNet<N> {
        let Nodes { root, ranks } = nodes;
        let nranks = ranks.len() as u32;
        let mut net = MemNet {
            now: Instant::ZERO,
            root,
            ranks,
            listeners: BTreeMap::new(),
            accept_queue: BTreeMap::new(),
            pending_accept: BTreeMap::new(),
            waiting_connects: BTreeMap::new(),
            injections: BTreeMap::new(),
            links: Vec::new(),
            by_end: BTreeMap::new(),
            drains: BTreeMap::new(),
            holds: Vec::new(),
            dialed: BTreeMap::new(),
            newest_first: false,
            work: VecDeque::new(),
            tx: Vec::new(),
            completions: Vec::new(),
            events: Vec::new(),
            messages: MessageLog::default(),
        };
        net.collect(Node::Root);
        for r in 0..nranks {
            net.collect(Node::Rank(r));
        }
        net
    }

    /// Adds a scripted hold.
    pub fn hold(&mut self, hold: Hold) {
        self.holds.push(hold);
    }

    /// From now on every peer listener accepts its newest queued connection first (a scripted
    /// accept order: handshakes completing in reverse).
    pub fn accept_newest_first(&mut self) {
        self.newest_first = true;
    }

    /// Every connection a rank has dialed to another rank's peer listener so far, in dial order:
    /// its connection id and the hold (released after `fallback`) that would keep it queued out.
    pub fn peer_dials(&self, fallback: Duration) -> Vec<(ConnId, Hold)> {
        self.links
            .iter()
            .filter_map(|l| match (l.ends[0].node, l.ends[0].conn, l.peer_dial) {
                (Node::Rank(from), Some(conn), Some((to, nth))) => Some((conn, Hold { from, to, nth, fallback })),
                _ => None,
            })
            .collect()
    }

    /// Connects a stranger to rank `to`'s peer listener, sends `bytes`, and closes if `close`
    /// (otherwise the connection stays half-open). It queues behind what is already queued.
    pub fn inject(&mut self, to: u32, bytes: Vec<u8>, close: bool) {
        let addr = peer_addr::<N::Listener>(to).expect("the protocol has a rank-to-rank listener");
        self.inject_at(addr, bytes, close);
    }

    /// As [`MemNet::inject`], to rank `to`'s `listener` (which may open later: the stranger
    /// connects, ahead of anyone else waiting, once it does).
    pub fn inject_to(&mut self, to: u32, listener: N::Listener, bytes: Vec<u8>, close: bool) {
        self.inject_at(listener_addr(Node::Rank(to), listener), bytes, close);
    }

    /// As [`MemNet::inject`], to the root's listener.
    pub fn inject_root(&mut self, bytes: Vec<u8>, close: bool) {
        let root = N::Listener::ALL.iter().find(|l| l.is_root()).expect("the protocol has a root listener");
        self.inject_at(listener_addr(Node::Root, *root), bytes, close);
    }

    /// Runs `f` on rank `r`'s node at the current time, then takes the outputs it made (a test
    /// queueing operations on a rank, say).
    pub fn with_rank<T>(&mut self, r: u32, f: impl FnOnce(&mut N, Instant) -> T) -> T {
        let now = self.now;
        let out = f(&mut self.ranks[r as usize], now);
        self.collect(Node::Rank(r));
        out
    }

    fn inject_at(&mut self, addr: SocketAddr, bytes: Vec<u8>, close: bool) {
        if !self.listeners.contains_key(&addr) {
            return self.injections.entry(addr).or_default().push((bytes, close));
        }
        let conn = ConnId(1_000_000 + self.links.len() as u64);
        self.connect(Node::Stranger, conn, addr);
        if !bytes.is_empty() {
            self.execute(Node::Stranger, seam::Output::Effect(Effect::Write { conn, len: bytes.len() }), &bytes);
        }
        if close {
            self.execute(Node::Stranger, seam::Output::Effect(Effect::Close { conn }), &[]);
        }
    }

    /// Rank `r`'s node.
    pub fn node(&self, r: u32) -> &N {
        &self.ranks[r as usize]
    }

    /// The root's node.
    pub fn root(&self) -> &N {
        &self.root
    }

    /// Current time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Completions of rank `r`, in order, init excluded.
    pub fn results(&self, r: u32) -> Vec<&N::Completion> {
        self.completions.iter().filter(|(_, n, c)| *n == Node::Rank(r) && c.op() != 0).map(|(_, _, c)| c).collect()
    }

    /// Runs until nothing can happen any more, or until `limit` of simulated time.
    pub fn run(&mut self, limit: Duration) {
        let end = Instant::ZERO + limit;
        loop {
            while let Some((node, d)) = self.work.pop_front() {
                self.deliver(node, d);
            }
            let Some(t) = self.next_timer() else { return };
            if t > end {
                return;
            }
            self.now = self.now.max(t);
            self.fire_timers();
        }
    }

    fn next_timer(&self) -> Option<Instant> {
        let ranks = self.ranks.iter().filter_map(N::poll_timeout);
        let holds = self.links.iter().filter_map(|l| l.hold_until);
        let drains = self.drains.values().map(|&(_, deadline)| deadline);
        ranks.chain(self.root.poll_timeout()).chain(holds).chain(drains).min()
    }

    fn fire_timers(&mut self) {
        let now = self.now;
        for i in 0..self.links.len() {
            if self.links[i].hold_until.is_some_and(|t| t <= now) {
                self.release(i);
            }
        }
        let expired: Vec<_> = self.drains.iter().filter(|(_, &(_, d))| d <= now).map(|(k, &(s, _))| (*k, s)).collect();
        for ((node, conn), started) in expired {
            self.drains.remove(&(node, conn));
            self.work.push_back((node, OwnedInput::DrainTimedOut { conn, waited: now - started, unacked: 1 }));
        }
        self.root.handle_timeout(now);
        self.collect(Node::Root);
        for r in 0..self.ranks.len() {
            self.ranks[r].handle_timeout(now);
            self.collect(Node::Rank(r as u32));
        }
    }

    fn deliver(&mut self, node: Node, d: OwnedInput<N::Listener>) {
        let now = self.now;
        let Some(n) = self.node_mut(node) else { return };
        n.handle(now, d.as_input());
        self.collect(node);
    }

    /// The node's state machine (a stranger has none).
    fn node_mut(&mut self, node: Node) -> Option<&mut N> {
        match node {
            Node::Root => Some(&mut self.root),
            Node::Rank(r) => Some(&mut self.ranks[r as usize]),
            Node::Stranger => None,
        }
    }

    /// Drains a node's outputs and carries them out.
    fn collect(&mut self, node: Node) {
        let mut tx = std::mem::take(&mut self.tx);
        loop {
            let Some(out) = self.node_mut(node).and_then(|n| n.poll_output(&mut tx)) else { break };
            self.execute(node, out, &tx);
        }
        self.tx = tx;
    }

    /// Carries out one output; `tx` holds a write's bytes.
    fn execute(&mut self, node: Node, out: NodeOutput<N>, tx: &[u8]) {
        let now = self.now;
        let effect = match out {
            seam::Output::Effect(e) => e,
            seam::Output::Observe(Observation::Completed(c)) => return self.completions.push((now, node, c)),
            seam::Output::Observe(Observation::Event(e)) => {
                self.note(node, &e);
                return self.events.push((now, node, e));
            }
        };
        match effect {
            Effect::Listen { listener } => {
                let addr = listener_addr(node, listener);
                self.listeners.insert(addr, (node, listener));
                self.work.push_back((node, OwnedInput::Listening { listener, addr }));
                for (bytes, close) in self.injections.remove(&addr).unwrap_or_default() {
                    self.inject_at(addr, bytes, close);
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
                for i in self.accept_queue.remove(&addr).unwrap_or_default() {
                    // Linux resets the connections a closed listener still queued: their
                    // clients (side 0) hear it.
                    self.close_end(i, 0, CloseReason::Reset);
                }
            }
            Effect::Connect { conn, addr } => self.connect(node, conn, addr),
            Effect::Write { conn, .. } => {
                let Some(&(i, side)) = self.by_end.get(&(node, conn)) else { return };
                let other = &self.links[i].ends[1 - side];
                match other.conn {
                    Some(c) => self.work.push_back((other.node, OwnedInput::Received { conn: c, bytes: tx.to_vec() })),
                    None => self.links[i].early.extend_from_slice(tx),
                }
            }
            Effect::Drain { conn, deadline } => {
                let Some(&(i, _)) = self.by_end.get(&(node, conn)) else { return };
                if self.links[i].queued {
                    self.work.push_back((node, OwnedInput::Drained { conn, waited: Duration::ZERO }));
                } else {
                    self.drains.insert((node, conn), (now, deadline));
                }
            }
            Effect::Close { conn } => {
                let Some((i, side)) = self.by_end.remove(&(node, conn)) else { return };
                self.close_end(i, 1 - side, CloseReason::Eof);
            }
        }
    }

    /// Adds a rank's sent or taken message to the log, joined by the link of its connection.
    fn note(&mut self, node: Node, e: &N::Event) {
        let Node::Rank(rank) = node else { return };
        let link = e.conn().and_then(|c| self.by_end.get(&(node, c))).map(|&(i, _)| i as u64);
        let at = self.now;
        match e.noted() {
            Noted::Sent { to, tag, origin, size } => {
                self.messages.sent(link, SentMsg { from: rank, to, tag, origin, size, at })
            }
            Noted::Taken { from, tag, origin, size, expected_size } => {
                let taken = TakenMsg { at, rank, from, tag, origin, size, expected_size, conn: None };
                self.messages.taken(link, taken);
            }
            _ => {}
        }
    }

    /// Tells `side` of link `i` its connection ended for `reason` (on accept if not accepted yet).
    fn close_end(&mut self, i: usize, side: usize, reason: CloseReason) {
        let end = &self.links[i].ends[side];
        match end.conn {
            Some(c) => self.work.push_back((end.node, OwnedInput::PeerClosed { conn: c, reason })),
            None => self.links[i].early_close = Some(reason),
        }
    }

    fn connect(&mut self, client: Node, conn: ConnId, addr: SocketAddr) {
        if !self.listeners.contains_key(&addr) {
            // NVSHMEM retries "connection refused" every millisecond; here: once the listener exists.
            self.waiting_connects.entry(addr).or_default().push((client, conn));
            return;
        }
        let (server, key) = self.listeners[&addr];
        let i = self.links.len();
        let client_addr = SocketAddr::new(host_ip(client), 40000u16.wrapping_add(i as u16));
        let peer_dial = match (client, server) {
            (Node::Rank(from), Node::Rank(to)) if key.is_peer() => {
                let nth = self.dialed.entry((from, addr)).or_insert(0);
                *nth += 1;
                Some((to, *nth - 1))
            }
            _ => None,
        };
        self.links.push(Link {
            ends: [End { node: client, conn: Some(conn) }, End { node: server, conn: None }],
            early: Vec::new(),
            early_close: None,
            queued: false,
            hold_until: None,
            client_addr,
            server_addr: addr,
            peer_dial,
        });
        self.by_end.insert((client, conn), (i, 0));
        self.work.push_back((client, OwnedInput::Connected { conn }));
        let held = match (client, peer_dial) {
            (Node::Rank(from), Some((to, nth))) => {
                self.holds.iter().find(|h| (h.from, h.to, h.nth) == (from, to, nth)).copied()
            }
            _ => None,
        };
        if let Some(h) = held {
            self.links[i].hold_until = Some(self.now + h.fallback);
        } else {
            self.enqueue(i, addr);
            // Release-on-next: a held connection from the same sender to the same listener follows.
            let held_before: Vec<usize> = (0..i)
                .filter(|&j| {
                    self.links[j].hold_until.is_some()
                        && self.links[j].ends[0].node == client
                        && self.server_addr(j) == addr
                })
                .collect();
            for j in held_before {
                self.release(j);
            }
        }
    }

    fn server_addr(&self, i: usize) -> SocketAddr {
        self.links[i].server_addr
    }

    fn release(&mut self, i: usize) {
        if self.links[i].hold_until.take().is_some() {
            let addr = self.server_addr(i);
            self.enqueue(i, addr);
        }
    }

    fn enqueue(&mut self, i: usize, addr: SocketAddr) {
        self.links[i].queued = true;
        let client = &self.links[i].ends[0];
        if let Some(conn) = client.conn {
            if let Some((started, _)) = self.drains.remove(&(client.node, conn)) {
                self.work.push_back((client.node, OwnedInput::Drained { conn, waited: self.now - started }));
            }
        }
        self.accept_queue.entry(addr).or_default().push_back(i);
        self.try_accept(addr);
    }

    fn try_accept(&mut self, addr: SocketAddr) {
        let Some(&conn) = self.pending_accept.get(&addr) else { return };
        let newest = self.newest_first && self.listeners.get(&addr).is_some_and(|(_, l)| l.is_peer());
        let queue = self.accept_queue.get_mut(&addr);
        let Some(i) = queue.and_then(|q| if newest { q.pop_back() } else { q.pop_front() }) else { return };
        self.pending_accept.remove(&addr);
        let (server, _) = self.listeners[&addr];
        let link = &mut self.links[i];
        link.ends[1].conn = Some(conn);
        self.by_end.insert((server, conn), (i, 1));
        self.work.push_back((server, OwnedInput::Accepted { conn, from: link.client_addr }));
        let early = std::mem::take(&mut link.early);
        if !early.is_empty() {
            self.work.push_back((server, OwnedInput::Received { conn, bytes: early }));
        }
        if let Some(reason) = link.early_close {
            self.work.push_back((server, OwnedInput::PeerClosed { conn, reason }));
        }
    }
}
