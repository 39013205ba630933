//! NCCL's nodes stepped through bootsim's protocol seam only (`bootsim_core::seam`): a small
//! zero-latency world that knows nothing of NCCL but the seam's traits, the record's message
//! log, and the crate's seam judge. Every variant and workload finishes when accepts are taken
//! oldest first; taking the peer listener's newest connection first breaks 2.19 as #1176 and
//! 2.8 by peer-only matching, while 2.21 and 2.30 still pass.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use bootsim_core::seam::{
    Completed, Effect, Judge as _, ListenerKey, Node as _, Noted, Observation, Observed, Output, OwnedInput,
};
use bootsim_core::{ConnId, Instant, MessageLog, RunRecord, SentMsg, TakenMsg};
use bootsim_nccl::seam::{nodes, Judge, Key, NcclNode};
use bootsim_nccl::{Listener, Mismatch, Variant, Workload, ALL};

fn host(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, (i >> 8) as u8, i as u8))
}

/// Node 0 is the root (on host 0), node r+1 is rank r (on host r).
struct World {
    nodes: Vec<NcclNode>,
    listeners: BTreeMap<SocketAddr, (usize, Key)>,
    queues: BTreeMap<SocketAddr, VecDeque<usize>>,
    pending: BTreeMap<SocketAddr, ConnId>,
    refused: BTreeMap<SocketAddr, Vec<(usize, ConnId)>>,
    /// Links: (node, conn) at each end, once accepted; a world-wide number for the log.
    ends: Vec<[Option<(usize, ConnId)>; 2]>,
    early: Vec<(Vec<u8>, bool)>,
    link_of: BTreeMap<(usize, ConnId), (usize, usize)>,
    work: VecDeque<(usize, OwnedInput<Key>)>,
    newest_first: bool,
    log: MessageLog,
    judge: Judge,
    errors: Vec<String>,
}

impl World {
    fn host_of(node: usize) -> u32 {
        node.saturating_sub(1) as u32
    }

    fn run(variant: Variant, workload: &Workload, n: u32, newest_first: bool) -> World {
        let programs = workload.programs(variant, n);
        let judge = Judge::new(&programs);
        let (root, ranks) = nodes(variant, programs, 0x1176, SocketAddr::new(host(0), Listener::Root.port()));
        let mut w = World {
            nodes: std::iter::once(root).chain(ranks).collect(),
            listeners: BTreeMap::new(),
            queues: BTreeMap::new(),
            pending: BTreeMap::new(),
            refused: BTreeMap::new(),
            ends: Vec::new(),
            early: Vec::new(),
            link_of: BTreeMap::new(),
            work: VecDeque::new(),
            newest_first,
            log: MessageLog::default(),
            judge,
            errors: Vec::new(),
        };
        for i in 0..w.nodes.len() {
            w.collect(i);
        }
        while let Some((i, input)) = w.work.pop_front() {
            w.nodes[i].handle(Instant::ZERO, input.as_input());
            w.collect(i);
        }
        w
    }

    fn collect(&mut self, i: usize) {
        let mut tx = Vec::new();
        while let Some(out) = self.nodes[i].poll_output(&mut tx) {
            match out {
                Output::Effect(e) => self.execute(i, e, &tx),
                Output::Observe(Observation::Completed(c)) => {
                    if let Err(e) = c.result() {
                        self.errors.push(e.to_string());
                    }
                }
                Output::Observe(Observation::Event(e)) => self.observe(i, &e),
            }
        }
    }

    fn observe(&mut self, i: usize, e: &impl Observed) {
        let link = e.conn().and_then(|c| self.link_of.get(&(i, c))).map(|&(l, _)| l as u64);
        let rank = Self::host_of(i);
        match e.noted() {
            Noted::Sent { to, tag, origin, size } => {
                self.log.sent(link, SentMsg { from: rank, to, tag, origin, size, at: Instant::ZERO })
            }
            Noted::Taken { from, tag, origin, size, expected_size } => {
                let t = TakenMsg { at: Instant::ZERO, rank, from, tag, origin, size, expected_size, conn: None };
                let (t, source) = self.log.taken(link, t);
                self.judge.taken(&t, source.as_ref());
            }
            _ => {}
        }
    }

    fn execute(&mut self, i: usize, e: Effect<Key>, tx: &[u8]) {
        match e {
            Effect::Listen { listener } => {
                let addr = SocketAddr::new(host(Self::host_of(i)), listener.port());
                self.listeners.insert(addr, (i, listener));
                self.work.push_back((i, OwnedInput::Listening { listener, addr }));
                for (client, conn) in self.refused.remove(&addr).unwrap_or_default() {
                    self.connect(client, conn, addr);
                }
            }
            Effect::Accept { listener, conn } => {
                let addr = SocketAddr::new(host(Self::host_of(i)), listener.port());
                self.pending.insert(addr, conn);
                self.try_accept(addr);
            }
            Effect::CloseListener { listener } => {
                let addr = SocketAddr::new(host(Self::host_of(i)), listener.port());
                self.listeners.remove(&addr);
                self.pending.remove(&addr);
            }
            Effect::Connect { conn, addr } => self.connect(i, conn, addr),
            Effect::Write { conn, len } => {
                assert_eq!(tx.len(), len, "a write's bytes are in tx");
                let (l, side) = self.link_of[&(i, conn)];
                match self.ends[l][1 - side] {
                    Some((peer, c)) => {
                        self.work.push_back((peer, OwnedInput::Received { conn: c, bytes: tx.to_vec() }))
                    }
                    None => self.early[l].0.extend_from_slice(tx),
                }
            }
            Effect::Close { conn } => {
                let Some(&(l, side)) = self.link_of.get(&(i, conn)) else { return };
                match self.ends[l][1 - side] {
                    Some((peer, c)) => self.work.push_back((peer, OwnedInput::PeerClosed { conn: c })),
                    None => self.early[l].1 = true,
                }
            }
            Effect::Drain { .. } => panic!("NCCL does not drain"),
        }
    }

    fn connect(&mut self, i: usize, conn: ConnId, addr: SocketAddr) {
        if !self.listeners.contains_key(&addr) {
            self.refused.entry(addr).or_default().push((i, conn));
            return;
        }
        let l = self.ends.len();
        self.ends.push([Some((i, conn)), None]);
        self.early.push((Vec::new(), false));
        self.link_of.insert((i, conn), (l, 0));
        self.queues.entry(addr).or_default().push_back(l);
        self.work.push_back((i, OwnedInput::Connected { conn }));
        self.try_accept(addr);
    }

    fn try_accept(&mut self, addr: SocketAddr) {
        let Some(&(server, key)) = self.listeners.get(&addr) else { return };
        let Some(&conn) = self.pending.get(&addr) else { return };
        let q = self.queues.entry(addr).or_default();
        let l = if self.newest_first && key.is_peer() { q.pop_back() } else { q.pop_front() };
        let Some(l) = l else { return };
        self.pending.remove(&addr);
        self.ends[l][1] = Some((server, conn));
        self.link_of.insert((server, conn), (l, 1));
        let (client, _) = self.ends[l][0].expect("client end");
        let from = SocketAddr::new(host(Self::host_of(client)), 40000 + l as u16);
        self.work.push_back((server, OwnedInput::Accepted { conn, from }));
        let (bytes, eof) = std::mem::take(&mut self.early[l]);
        if !bytes.is_empty() {
            self.work.push_back((server, OwnedInput::Received { conn, bytes }));
        }
        if eof {
            self.work.push_back((server, OwnedInput::PeerClosed { conn }));
        }
    }

    fn mismatches(&mut self) -> Vec<Mismatch> {
        self.judge.finish(&RunRecord::default())
    }

    fn all_finished(&self) -> bool {
        self.nodes.iter().all(|n| n.is_finished())
    }
}

fn workloads() -> Vec<Workload> {
    vec![Workload::by_name("nccl-init").unwrap(), Workload::by_name("nccl-p2p").unwrap()]
}

#[test]
fn every_variant_and_workload_finishes_through_the_seam_with_accepts_oldest_first() {
    for v in ALL {
        for wl in workloads() {
            for n in [1, 2, 3, 5] {
                let mut w = World::run(v, &wl, n, false);
                assert!(w.errors.is_empty(), "{v} {} n={n}: {:?}", wl.name(), w.errors);
                assert!(
                    w.all_finished(),
                    "{v} {} n={n}: {:?}",
                    wl.name(),
                    w.nodes.iter().map(|n| n.waiting_for()).collect::<Vec<_>>()
                );
                assert_eq!(w.mismatches(), vec![], "{v} {} n={n}", wl.name());
                assert!(w.nodes.iter().all(|n| n.poll_timeout().is_none()), "NCCL has no timers");
            }
        }
    }
}

#[test]
fn newest_first_on_the_peer_listener_breaks_2_19_and_2_8_only() {
    let p2p = Workload::P2p { channels: 2, distances: Some(vec![1, 1]) };
    for v in ALL {
        let mut w = World::run(v, &p2p, 4, true);
        let truncated = w.errors.iter().any(|e| e.contains("Message truncated : received 256 bytes instead of 4"));
        let mismatches = w.mismatches();
        match v {
            Variant::Nccl219 => assert!(truncated, "{v}: {:?}", w.errors),
            Variant::Nccl28 => {
                assert!(!mismatches.is_empty() && w.errors.is_empty(), "{v}: {mismatches:?} {:?}", w.errors)
            }
            _ => {
                assert!(w.errors.is_empty() && mismatches.is_empty(), "{v}: {:?} {mismatches:?}", w.errors);
                assert!(w.all_finished(), "{v}");
            }
        }
    }
}

#[test]
fn the_peer_listener_is_the_ring_listener_before_2_23_and_the_p2p_listener_after() {
    assert!(Key::of(Variant::Nccl219, Listener::Ring).is_peer());
    assert!(!Key::of(Variant::Nccl230, Listener::Ring).is_peer());
    assert!(Key::of(Variant::Nccl230, Listener::P2p).is_peer());
    assert!(
        !Key::of(Variant::Nccl221, Listener::FromRoot).is_peer() && !Key::of(Variant::Nccl28, Listener::Root).is_peer()
    );
}
