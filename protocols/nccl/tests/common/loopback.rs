//! A small single-threaded driver for NCCL's model over real loopback sockets (non-blocking std
//! sockets, polled): the real kernel chooses the chunking and the accept order. Shared by the
//! loopback and real-root tests. It speaks the seam's types, as every world does.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use bootsim_core::memnet::Node;
use bootsim_core::ConnId;
use bootsim_nccl::seam::Key;
use bootsim_nccl::{
    Effect, Input, Listener, Observation, Output, Planned, Rank, RankConfig, Root, RootConfig, Variant,
};

/// One open connection of one node.
struct Sock {
    stream: TcpStream,
    out: Vec<u8>,
    /// Close once `out` is written.
    closing: bool,
    eof: bool,
}

/// The driver: the nodes and their sockets.
pub struct Loopback {
    root: Option<Root>,
    ranks: Vec<Rank>,
    listeners: BTreeMap<(Node, Key), TcpListener>,
    accepts: BTreeMap<(Node, Key), ConnId>,
    socks: BTreeMap<(Node, ConnId), Sock>,
    connects: Vec<(Node, ConnId, SocketAddr, Instant)>,
    done: Vec<(Node, Observation)>,
}

impl Loopback {
    /// Ranks running `programs`; with `real_root` (magic, address) they check in to it, else to
    /// a model root this driver runs too.
    pub fn new(v: Variant, programs: Vec<Vec<Planned>>, real_root: Option<(u64, SocketAddr)>) -> Loopback {
        let magic = real_root.map_or(0x1176_2219_0000_beef, |(m, _)| m);
        let n = programs.len() as u32;
        let root_listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let root_addr = real_root.map_or_else(|| root_listener.local_addr().expect("bound"), |(_, a)| a);
        let mut lb = Loopback {
            root: real_root.is_none().then(|| Root::new(RootConfig { variant: v, magic })),
            ranks: programs
                .into_iter()
                .enumerate()
                .map(|(r, program)| {
                    Rank::new(RankConfig { rank: r as u32, nranks: n, variant: v, magic, root: root_addr, program })
                })
                .collect(),
            listeners: BTreeMap::new(),
            accepts: BTreeMap::new(),
            socks: BTreeMap::new(),
            connects: Vec::new(),
            done: Vec::new(),
        };
        if lb.root.is_some() {
            root_listener.set_nonblocking(true).expect("nonblocking");
            let key = Key::of(v, Listener::Root);
            lb.listeners.insert((Node::Root, key), root_listener);
            // The root's Listen effect is answered with this listener.
            lb.handle(Node::Root, Input::Listening { listener: key, addr: root_addr });
        }
        lb
    }

    fn handle(&mut self, node: Node, input: Input<'_>) {
        match node {
            Node::Root => self.root.as_mut().expect("a model root").handle(input),
            Node::Rank(r) => self.ranks[r as usize].handle(input),
            Node::Stranger => {}
        }
    }

    fn nodes(&self) -> Vec<Node> {
        let root = self.root.is_some().then_some(Node::Root);
        root.into_iter().chain((0..self.ranks.len() as u32).map(Node::Rank)).collect()
    }

    /// Carries out every effect the nodes have, in order, and keeps their observations; true if
    /// there was any output.
    fn drain(&mut self) -> bool {
        let mut any = false;
        let mut tx = Vec::new();
        for node in self.nodes() {
            loop {
                let out = match node {
                    Node::Root => self.root.as_mut().expect("a model root").poll_output(&mut tx),
                    Node::Rank(r) => self.ranks[r as usize].poll_output(&mut tx),
                    Node::Stranger => None,
                };
                let Some(out) = out else { break };
                any = true;
                match out {
                    Output::Observe(o) => self.done.push((node, o)),
                    Output::Effect(e) => self.execute(node, e, &tx),
                }
            }
        }
        any
    }

    /// Carries out one effect; a write's bytes are `tx`.
    fn execute(&mut self, node: Node, effect: Effect, tx: &[u8]) {
        match effect {
            Effect::Listen { listener } => {
                if node == Node::Root {
                    return; // opened in new()
                }
                let l = TcpListener::bind("127.0.0.1:0").expect("bind");
                l.set_nonblocking(true).expect("nonblocking");
                let addr = l.local_addr().expect("bound");
                self.listeners.insert((node, listener), l);
                self.handle(node, Input::Listening { listener, addr });
            }
            Effect::Accept { listener, conn } => {
                self.accepts.insert((node, listener), conn);
            }
            Effect::CloseListener { listener } => {
                self.listeners.remove(&(node, listener));
                self.accepts.remove(&(node, listener));
            }
            Effect::Connect { conn, addr } => self.connects.push((node, conn, addr, Instant::now())),
            Effect::Write { conn, len } => {
                if let Some(s) = self.socks.get_mut(&(node, conn)) {
                    s.out.extend_from_slice(&tx[..len]);
                }
            }
            // NCCL never drains before close.
            Effect::Drain { .. } => {}
            Effect::Close { conn } => {
                if let Some(s) = self.socks.get_mut(&(node, conn)) {
                    s.closing = true;
                }
            }
        }
    }

    /// One pass over the sockets; true if anything moved.
    fn poll(&mut self) -> bool {
        let mut moved = false;
        // Connects (NCCL retries "refused"; here until the listener exists).
        let pending = std::mem::take(&mut self.connects);
        for (node, conn, addr, since) in pending {
            match TcpStream::connect(addr) {
                Ok(stream) => {
                    stream.set_nonblocking(true).expect("nonblocking");
                    stream.set_nodelay(true).ok();
                    self.socks.insert((node, conn), Sock { stream, out: Vec::new(), closing: false, eof: false });
                    self.handle(node, Input::Connected { conn });
                    moved = true;
                }
                Err(e) if e.kind() == ErrorKind::ConnectionRefused && since.elapsed() < Duration::from_secs(20) => {
                    self.connects.push((node, conn, addr, since))
                }
                Err(e) => {
                    self.handle(node, Input::ConnectFailed { conn, reason: e.to_string() });
                    moved = true;
                }
            }
        }
        // Accepts: one outstanding per listener.
        let asked: Vec<((Node, Key), ConnId)> = self.accepts.iter().map(|(k, c)| (*k, *c)).collect();
        for ((node, listener), conn) in asked {
            let Some(l) = self.listeners.get(&(node, listener)) else { continue };
            if let Ok((stream, from)) = l.accept() {
                stream.set_nonblocking(true).expect("nonblocking");
                stream.set_nodelay(true).ok();
                self.accepts.remove(&(node, listener));
                self.socks.insert((node, conn), Sock { stream, out: Vec::new(), closing: false, eof: false });
                self.handle(node, Input::Accepted { conn, from });
                moved = true;
            }
        }
        // Writes, closes and reads.
        let keys: Vec<(Node, ConnId)> = self.socks.keys().copied().collect();
        let mut buf = vec![0u8; 64 << 10];
        for key in keys {
            let Some(s) = self.socks.get_mut(&key) else { continue };
            while !s.out.is_empty() {
                match s.stream.write(&s.out) {
                    Ok(k) => {
                        s.out.drain(..k);
                        moved = true;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => {
                        s.out.clear();
                        break;
                    }
                }
            }
            if s.closing && s.out.is_empty() {
                s.stream.shutdown(Shutdown::Both).ok();
                self.socks.remove(&key);
                moved = true;
                continue;
            }
            if s.eof {
                continue;
            }
            match s.stream.read(&mut buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {}
                Ok(0) | Err(_) => {
                    // EOF, or the peer reset the connection.
                    s.eof = true;
                    self.handle(key.0, Input::PeerClosed { conn: key.1 });
                    moved = true;
                }
                Ok(k) => {
                    let bytes = buf[..k].to_vec();
                    self.handle(key.0, Input::Received { conn: key.1, bytes: &bytes });
                    moved = true;
                }
            }
        }
        moved
    }

    /// Runs until every rank is done or failed, or nothing moves for `idle`.
    pub fn run(&mut self, idle: Duration) {
        let mut last = Instant::now();
        loop {
            let moved = self.drain() | self.poll();
            if self.ranks.iter().all(|r| r.is_done() || r.has_failed()) && !self.drain() {
                // Let the last writes reach their peers.
                for _ in 0..100 {
                    if !self.poll() {
                        break;
                    }
                }
                return;
            }
            if moved {
                last = Instant::now();
            } else if last.elapsed() > idle {
                return;
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    /// Panics unless every rank completed every step, naming the first that did not and why.
    pub fn assert_all_done(&self, what: &str) {
        for (r, rank) in self.ranks.iter().enumerate() {
            let err = self.done.iter().find_map(|(n, o)| match o {
                Observation::Completed(c) if *n == Node::Rank(r as u32) => {
                    c.result.as_ref().err().map(|e| e.to_string())
                }
                _ => None,
            });
            assert!(rank.is_done(), "{what}: rank {r} is not done: {err:?} / {:?}", rank.waiting_for());
        }
    }

    /// How many steps completed, over every rank (the root's session is not a step).
    pub fn completed(&self) -> usize {
        self.done
            .iter()
            .filter(|(_, o)| matches!(o, Observation::Completed(c) if c.call.is_some() && c.result.is_ok()))
            .count()
    }
}
