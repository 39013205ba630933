//! Workloads from NCCL's source: the bootstrap traffic of `ncclCommInitRank` in its order
//! (`nccl-init`), and the point-to-point connection setups `ncclSend`/`ncclRecv` trigger
//! (`nccl-p2p`), each lowered into every rank's [`Planned`] steps with NCCL's tags and source lines.

use std::collections::BTreeMap;

use crate::codec::{NCCL_CONNECT_LEN, SOCKADDR_LEN};
use crate::program::{Call, CallKind, Graph, Planned, Step};
use crate::variant::Variant;

/// `sizeof(struct ncclPeerInfo)`, approximately (it depends on the build; only its size matters
/// to the bootstrap, and every rank uses the same one).
pub const PEER_INFO_LEN: usize = 72;
/// `sizeof(*allGather3Data)` (graph information per rank), approximately, as [`PEER_INFO_LEN`].
pub const ALLGATHER3_LEN: usize = 1120;
/// 2.30's `struct bootstrapRingData`: two addresses, the UDS id and `rasRankInit`
/// (28 + 28 + 8 + 56 bytes, src/bootstrap.cc:626-631, src/include/ras.h:14-21).
pub const RING_DATA_LEN: usize = 120;

/// The parameters of `nccl-init`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InitParams {
    /// GPUs (ranks) per node; ranks are numbered node by node.
    pub ranks_per_node: u32,
    /// Channels each ring and tree connects per peer (one 128-byte `ncclConnect` each).
    pub channels: u32,
    /// Whether CollNet is enabled (its two chain setups share one graph and so one tag set).
    pub collnet: bool,
}

impl Default for InitParams {
    /// A common cluster: 8 GPUs per node, 2 channels per peer, CollNet off.
    fn default() -> Self {
        InitParams { ranks_per_node: 8, channels: 2, collnet: false }
    }
}

/// The parameters of `nccl-p2p`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct P2pParams {
    /// Channels connected per peer by each setup (`p2pnChannelsPerPeer`).
    pub channels: u32,
    /// One NULL-graph setup per entry: every rank connects a send to `rank + d` and a receive
    /// from `rank - d` (the first `ncclSend`/`ncclRecv` to a new peer triggers one).
    pub distances: Vec<u32>,
}

impl P2pParams {
    /// Every peer once, nearest first, with init's default channels per peer.
    pub fn every_peer(nranks: u32) -> Self {
        P2pParams { channels: InitParams::default().channels, distances: (1..nranks.max(2)).collect() }
    }
}

/// A workload by name, for case strings: `nccl-init` or `nccl-p2p`, with their parameters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Workload {
    /// `ncclCommInitRank`'s bootstrap traffic.
    Init(InitParams),
    /// NULL-graph transport setups as `ncclSend`/`ncclRecv` to new peers trigger them; `None`
    /// distances: every peer once.
    P2p {
        /// Channels connected per peer by each setup (`p2pnChannelsPerPeer`).
        channels: u32,
        /// The distances of the setups, in order (`None`: every peer once).
        distances: Option<Vec<u32>>,
    },
    /// The hazard map's cell: `bootstrapInit`, then two operations back to back ([`nccl_pair`]).
    Pair(Op, Op),
}

/// A workload name that is not one of [`WORKLOADS`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown NCCL workload '{0}' (expected nccl-init, nccl-p2p or nccl-pair)")]
pub struct UnknownWorkload(pub String);

/// The workloads' names.
pub const WORKLOADS: [&str; 3] = ["nccl-init", "nccl-p2p", "nccl-pair"];

impl std::fmt::Display for Workload {
    /// The workload as a case string gives it: its name, then its parameters that differ from
    /// [`Workload::by_name`]'s defaults (`nccl-p2p channels=4 distances=1,1`,
    /// `nccl-pair pair=ring-setup,barrier`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())?;
        let d = InitParams::default();
        match self {
            Workload::Init(p) => {
                if p.ranks_per_node != d.ranks_per_node {
                    write!(f, " gpus_per_node={}", p.ranks_per_node)?;
                }
                if p.channels != d.channels {
                    write!(f, " channels={}", p.channels)?;
                }
                if p.collnet {
                    f.write_str(" collnet=on")?;
                }
            }
            Workload::P2p { channels, distances } => {
                if *channels != d.channels {
                    write!(f, " channels={channels}")?;
                }
                if let Some(ds) = distances {
                    let ds: Vec<String> = ds.iter().map(u32::to_string).collect();
                    write!(f, " distances={}", ds.join(","))?;
                }
            }
            Workload::Pair(first, second) => write!(f, " pair={},{}", first.name(), second.name())?,
        }
        Ok(())
    }
}

impl Workload {
    /// The workload called `name`, with its defaults (8 GPUs per node, 2 channels per peer,
    /// CollNet off; every peer once).
    pub fn by_name(name: &str) -> Result<Workload, UnknownWorkload> {
        match name {
            "nccl-init" => Ok(Workload::Init(InitParams::default())),
            "nccl-p2p" => Ok(Workload::P2p { channels: InitParams::default().channels, distances: None }),
            "nccl-pair" => Ok(Workload::Pair(Op::RingSetup, Op::Barrier)),
            other => Err(UnknownWorkload(other.to_string())),
        }
    }

    /// Its name.
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Init(_) => WORKLOADS[0],
            Workload::P2p { .. } => WORKLOADS[1],
            Workload::Pair(..) => WORKLOADS[2],
        }
    }

    /// Every rank's program for `nranks` ranks of variant `v`.
    pub fn programs(&self, v: Variant, nranks: u32) -> Vec<Vec<Planned>> {
        match self {
            Workload::Init(p) => nccl_init(v, nranks, *p),
            Workload::P2p { channels, distances } => {
                let distances = distances.clone().unwrap_or_else(|| P2pParams::every_peer(nranks).distances);
                nccl_p2p(v, nranks, &P2pParams { channels: *channels, distances })
            }
            Workload::Pair(first, second) => nccl_pair(v, nranks, *first, *second),
        }
    }
}

/// Builds one rank's program.
struct Builder {
    v: Variant,
    rank: u32,
    nranks: u32,
    steps: Vec<Planned>,
}

impl Builder {
    fn new(v: Variant, rank: u32, nranks: u32) -> Self {
        Builder { v, rank, nranks, steps: Vec::new() }
    }

    fn push(&mut self, step: Step, kind: CallKind, site: &'static str) {
        self.steps.push(Planned { step, call: Call { kind, site } });
    }

    /// `bootstrapInit`: the sockets, then the allgathers it makes.
    fn bootstrap_init(&mut self) {
        let init = match self.v {
            Variant::Nccl28 => "bootstrap.cc:322",
            Variant::Nccl219 => "bootstrap.cc:232",
            Variant::Nccl221 => "bootstrap.cc:243",
            Variant::Nccl230 => "bootstrap.cc:674",
        };
        self.push(Step::Init, CallKind::BootstrapInit, init);
        let gathers: &[(&str, usize, &str)] = match self.v {
            Variant::Nccl28 => &[
                ("peer addresses", SOCKADDR_LEN, "bootstrap.cc:372"),
                ("allocator addresses", SOCKADDR_LEN, "bootstrap.cc:381"),
            ],
            Variant::Nccl219 => &[
                ("peer addresses", SOCKADDR_LEN, "bootstrap.cc:294"),
                ("proxy addresses", SOCKADDR_LEN, "bootstrap.cc:304"),
            ],
            Variant::Nccl221 => &[
                ("peer addresses", SOCKADDR_LEN, "bootstrap.cc:305"),
                ("proxy addresses", SOCKADDR_LEN, "bootstrap.cc:316"),
                ("proxy UDS ids", 8, "bootstrap.cc:322"),
            ],
            Variant::Nccl230 => &[("ring data", RING_DATA_LEN, "bootstrap.cc:641")],
        };
        for (i, &(what, size, site)) in gathers.iter().enumerate() {
            self.push(Step::RingAllgather { size, addresses: i == 0 }, CallKind::AllGather(what), site);
        }
    }

    /// `initTransportsRank`'s two allgathers of peer and graph information.
    fn peer_info(&mut self) {
        let (a, b) = match self.v {
            Variant::Nccl28 => ("init.cc:578", "init.cc:717"),
            Variant::Nccl219 => ("init.cc:820", "init.cc:976"),
            Variant::Nccl221 => ("init.cc:938", "init.cc:1108"),
            Variant::Nccl230 => ("init.cc:1037", "init.cc:1283"),
        };
        self.push(Step::RingAllgather { size: PEER_INFO_LEN, addresses: false }, CallKind::AllGather("peer info"), a);
        self.push(Step::RingAllgather { size: ALLGATHER3_LEN, addresses: false }, CallKind::AllGather("graph info"), b);
    }

    /// `ncclTransportP2pSetup(comm, graph, connIndex)` given this rank's `connectRecv` and
    /// `connectSend` channel counts per peer: the connectInfo exchange for every distance, then
    /// (from 2.9) the sync for every distance.
    fn setup(&mut self, graph: Graph, conn_index: u8, recv: &BTreeMap<u32, u32>, send: &BTreeMap<u32, u32>) {
        let (v, r, n) = (self.v, self.rank, self.nranks);
        let ex = exchange_sites(v);
        for i in 1..n {
            let (recv_peer, send_peer) = ((r + n - i) % n, (r + i) % n);
            let rc = recv.get(&recv_peer).copied().unwrap_or(0) as usize;
            let sc = send.get(&send_peer).copied().unwrap_or(0) as usize;
            let tag = v.exchange_tag(i, graph.id());
            let logical = Variant::Nccl221.exchange_tag(i, graph.id());
            let kind = CallKind::SetupExchange { graph, conn_index, i };
            let send_to =
                |p: u32, c: usize| Step::Send { peer: p, tag, logical_tag: logical, size: c * NCCL_CONNECT_LEN };
            let recv_from =
                |p: u32, c: usize| Step::Recv { peer: Some(p), tag, logical_tag: logical, size: c * NCCL_CONNECT_LEN };
            if send_peer == recv_peer {
                if rc + sc > 0 {
                    self.push(send_to(recv_peer, rc + sc), kind, ex[0]);
                    self.push(recv_from(recv_peer, rc + sc), kind, ex[1]);
                }
            } else {
                if rc > 0 {
                    self.push(send_to(recv_peer, rc), kind, ex[2]);
                }
                if sc > 0 {
                    self.push(send_to(send_peer, sc), kind, ex[3]);
                    self.push(recv_from(send_peer, sc), kind, ex[4]);
                }
                if rc > 0 {
                    self.push(recv_from(recv_peer, rc), kind, ex[5]);
                }
            }
        }
        let Some(sy) = sync_sites(v) else { return };
        for i in 1..n {
            let (recv_peer, send_peer) = ((r + n - i) % n, (r + i) % n);
            let has_recv = recv.get(&recv_peer).is_some_and(|&c| c > 0);
            let has_send = send.get(&send_peer).is_some_and(|&c| c > 0);
            let tag = v.sync_tag(i, graph.id());
            let logical = Variant::Nccl221.sync_tag(i, graph.id());
            let size = v.sync_size();
            let kind = CallKind::SetupSync { graph, conn_index, i };
            let send_to = |p: u32| Step::Send { peer: p, tag, logical_tag: logical, size };
            let recv_from = |p: u32| Step::Recv { peer: Some(p), tag, logical_tag: logical, size };
            if recv_peer != send_peer {
                if has_send {
                    self.push(send_to(send_peer), kind, sy[0]);
                }
                if has_recv {
                    self.push(send_to(recv_peer), kind, sy[1]);
                }
                if has_send {
                    self.push(recv_from(send_peer), kind, sy[2]);
                }
                if has_recv {
                    self.push(recv_from(recv_peer), kind, sy[3]);
                }
            } else if has_send || has_recv {
                self.push(send_to(send_peer), kind, sy[4]);
                self.push(recv_from(send_peer), kind, sy[5]);
            }
        }
    }

    /// `bootstrapIntraNodeBarrier(ranks, tag)`: dissemination, one tag for every round (none in 2.8).
    fn barrier(&mut self, ranks: &[u32], tag: i32) {
        let (send_site, recv_site) = match self.v {
            Variant::Nccl28 => return,
            Variant::Nccl219 => ("bootstrap.cc:437", "bootstrap.cc:438"),
            Variant::Nccl221 => ("bootstrap.cc:572", "bootstrap.cc:573"),
            Variant::Nccl230 => ("bootstrap.cc:1232", "bootstrap.cc:1233"),
        };
        let m = ranks.len();
        let Some(l) = ranks.iter().position(|&x| x == self.rank) else { return };
        let kind = CallKind::Barrier { tag };
        let mut mask = 1;
        while mask < m {
            let (src, dst) = (ranks[(l + m - mask) % m], ranks[(l + mask) % m]);
            self.push(Step::Send { peer: dst, tag, logical_tag: tag, size: 4 }, kind, send_site);
            self.push(Step::Recv { peer: Some(src), tag, logical_tag: tag, size: 4 }, kind, recv_site);
            mask <<= 1;
        }
    }

    /// `bootstrapIntraNodeAllGather(ranks, size)`: messages tagged by distance (2.19), a ring
    /// over two new sockets (2.21 on).
    fn intra_allgather(&mut self, ranks: &[u32], size: usize, what: &'static str) {
        let kind = CallKind::IntraNodeAllGather(what);
        match self.v {
            Variant::Nccl28 => {}
            Variant::Nccl219 => {
                let m = ranks.len();
                let Some(l) = ranks.iter().position(|&x| x == self.rank) else { return };
                for i in 1..m {
                    let (src, dst) = (ranks[(l + m - i) % m], ranks[(l + i) % m]);
                    let tag = i as i32;
                    self.push(Step::Send { peer: dst, tag, logical_tag: tag, size }, kind, "bootstrap.cc:453");
                    self.push(Step::Recv { peer: Some(src), tag, logical_tag: tag, size }, kind, "bootstrap.cc:454");
                }
            }
            v => {
                let tag = v.intra_ring_tag().expect("2.21 on has an intra-node ring");
                let site = if v == Variant::Nccl221 { "bootstrap.cc:591" } else { "bootstrap.cc:1264" };
                self.push(Step::IntraRingAllgather { ranks: ranks.to_vec(), size, tag }, kind, site);
            }
        }
    }
}

/// Source lines of the connectInfo exchange: same-peer send and recv, then the other branch's
/// send to recvPeer, send to sendPeer, recv from sendPeer, recv from recvPeer (src/transport.cc).
fn exchange_sites(v: Variant) -> [&'static str; 6] {
    match v {
        Variant::Nccl28 => [
            "transport.cc:89",
            "transport.cc:90",
            "transport.cc:95",
            "transport.cc:96",
            "transport.cc:97",
            "transport.cc:98",
        ],
        Variant::Nccl219 => [
            "transport.cc:115",
            "transport.cc:116",
            "transport.cc:121",
            "transport.cc:122",
            "transport.cc:123",
            "transport.cc:124",
        ],
        Variant::Nccl221 => [
            "transport.cc:131",
            "transport.cc:132",
            "transport.cc:137",
            "transport.cc:138",
            "transport.cc:139",
            "transport.cc:140",
        ],
        Variant::Nccl230 => [
            "transport.cc:191",
            "transport.cc:194",
            "transport.cc:202",
            "transport.cc:207",
            "transport.cc:212",
            "transport.cc:217",
        ],
    }
}

/// Source lines of the sync: send to sendPeer, send to recvPeer, recv from sendPeer, recv from
/// recvPeer, then the same-peer send and recv (`transport.cc:204` is NVIDIA/nccl#1176's line).
fn sync_sites(v: Variant) -> Option<[&'static str; 6]> {
    Some(match v {
        Variant::Nccl28 => return None,
        Variant::Nccl219 => [
            "transport.cc:193",
            "transport.cc:195",
            "transport.cc:198",
            "transport.cc:200",
            "transport.cc:203",
            "transport.cc:204",
        ],
        Variant::Nccl221 => [
            "transport.cc:239",
            "transport.cc:241",
            "transport.cc:244",
            "transport.cc:246",
            "transport.cc:249",
            "transport.cc:250",
        ],
        Variant::Nccl230 => [
            "transport.cc:330",
            "transport.cc:333",
            "transport.cc:336",
            "transport.cc:339",
            "transport.cc:343",
            "transport.cc:344",
        ],
    })
}

/// The ranks of `rank`'s node.
fn local_ranks(rank: u32, nranks: u32, per_node: u32) -> Vec<u32> {
    let per = per_node.max(1);
    let first = rank / per * per;
    (first..(first + per).min(nranks)).collect()
}

fn add(map: &mut BTreeMap<u32, u32>, peer: Option<u32>, rank: u32, channels: u32) {
    if let Some(p) = peer.filter(|&p| p != rank) {
        *map.entry(p).or_insert(0) += channels;
    }
}

/// Every rank's program for `nccl-init`: `ncclCommInitRank`'s bootstrap traffic, in order.
///
/// bootstrapInit (check-in, ring, address allgathers); initTransportsRank's peer-info and
/// graph-info allgathers; the ring setup (prev/next per channel); the tree setup (a chain inside
/// each node, a binary tree of node heads, both directions); with CollNet, the chain's two setups
/// with the collNet graph (connIndex 0: recv from up, send to down; connIndex 1: the reverse) and
/// the intra-node allgather of transport types; finally the intra-node barrier tagged with the
/// node's first rank. NVLS, CollNet Direct and the proxy connections are left out.
pub fn nccl_init(v: Variant, nranks: u32, p: InitParams) -> Vec<Vec<Planned>> {
    (0..nranks)
        .map(|rank| {
            let mut b = Builder::new(v, rank, nranks);
            b.bootstrap_init();
            b.peer_info();
            let locals = local_ranks(rank, nranks, p.ranks_per_node);
            if nranks > 1 {
                b.ring_setup(p.channels);
                b.tree_setup(p.ranks_per_node, p.channels);
            }
            if p.collnet {
                b.collnet_setups(&locals, p.channels);
                b.intra_allgather(&locals, 4, "highest transport types");
            }
            b.barrier(&locals, locals[0] as i32);
            b.steps
        })
        .collect()
}

impl Builder {
    /// The ring graph's setup: receive from the previous rank, send to the next, `c` channels.
    fn ring_setup(&mut self, c: u32) {
        let (rank, n) = (self.rank, self.nranks);
        let (mut recv, mut send) = (BTreeMap::new(), BTreeMap::new());
        add(&mut recv, Some((rank + n - 1) % n), rank, c);
        add(&mut send, Some((rank + 1) % n), rank, c);
        self.setup(Graph::Ring, 0, &recv, &send);
    }

    /// The tree graph's setup (a chain inside each node of `per_node` ranks, a binary tree of
    /// node heads), both directions, `c` channels.
    fn tree_setup(&mut self, per_node: u32, c: u32) {
        let rank = self.rank;
        let (up, downs) = tree_links(rank, self.nranks, per_node);
        let (mut recv, mut send) = (BTreeMap::new(), BTreeMap::new());
        for peer in downs.iter().copied().map(Some).chain([up]) {
            add(&mut recv, peer, rank, c);
            add(&mut send, peer, rank, c);
        }
        self.setup(Graph::Tree, 0, &recv, &send);
    }

    /// CollNet's chain: two setups with the collNet graph over the node's `locals`
    /// (connIndex 0: receive from up, send to down; connIndex 1: the reverse).
    fn collnet_setups(&mut self, locals: &[u32], c: u32) {
        let rank = self.rank;
        let l = locals.iter().position(|&x| x == rank).expect("in its node");
        let up = (l > 0).then(|| locals[l - 1]);
        let down = locals.get(l + 1).copied();
        let (mut recv, mut send) = (BTreeMap::new(), BTreeMap::new());
        add(&mut recv, up, rank, c);
        add(&mut send, down, rank, c);
        self.setup(Graph::CollNet, 0, &recv, &send);
        let (mut recv, mut send) = (BTreeMap::new(), BTreeMap::new());
        add(&mut recv, down, rank, c);
        add(&mut send, up, rank, c);
        self.setup(Graph::CollNet, 1, &recv, &send);
    }

    /// One NULL-graph setup (connIndex 1) with the peers at distance `d`, `c` channels.
    fn p2p_setup(&mut self, d: u32, c: u32) {
        let (rank, n) = (self.rank, self.nranks);
        let d = d % n.max(1);
        let (mut recv, mut send) = (BTreeMap::new(), BTreeMap::new());
        add(&mut send, Some((rank + d) % n), rank, c);
        add(&mut recv, Some((rank + n - d) % n), rank, c);
        self.setup(Graph::Null, 1, &recv, &send);
    }

    /// One operation of the hazard map, every rank on one node, one channel.
    fn op(&mut self, op: Op) {
        let every: Vec<u32> = (0..self.nranks).collect();
        match op {
            Op::RingSetup => self.ring_setup(1),
            Op::TreeSetup => self.tree_setup(self.nranks, 1),
            Op::CollNetSetups => self.collnet_setups(&every, 1),
            Op::P2pSetup => self.p2p_setup(1, 1),
            Op::Barrier => self.barrier(&every, 0),
            Op::IntraAllgather => self.intra_allgather(&every, 4, "highest transport types"),
        }
    }
}

/// One of NCCL's bootstrap operations after `bootstrapInit`, for the hazard map of two in a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `ncclTransportP2pSetup(ringGraph)`.
    RingSetup,
    /// `ncclTransportP2pSetup(treeGraph)`.
    TreeSetup,
    /// CollNet's chain: two setups with one graph.
    CollNetSetups,
    /// `ncclTransportP2pSetup(NULL)` to the peers at distance 1 (`ncclSend`/`ncclRecv`).
    P2pSetup,
    /// `bootstrapIntraNodeBarrier` (one tag for every round).
    Barrier,
    /// `bootstrapIntraNodeAllGather`.
    IntraAllgather,
}

/// Every operation of the hazard map.
pub const OPS: [Op; 6] =
    [Op::RingSetup, Op::TreeSetup, Op::CollNetSetups, Op::P2pSetup, Op::Barrier, Op::IntraAllgather];

impl Op {
    /// The operation called `name` (as [`Op::name`] gives it).
    pub fn by_name(name: &str) -> Option<Op> {
        OPS.into_iter().find(|o| o.name() == name)
    }

    /// Its name in the hazard map.
    pub fn name(self) -> &'static str {
        match self {
            Op::RingSetup => "ring-setup",
            Op::TreeSetup => "tree-setup",
            Op::CollNetSetups => "collnet-setups",
            Op::P2pSetup => "p2p-setup",
            Op::Barrier => "barrier",
            Op::IntraAllgather => "intra-allgather",
        }
    }
}

/// Every rank's program for the hazard map's cell `first>second`: `bootstrapInit`, then the two
/// operations, every rank on one node, one channel per peer.
pub fn nccl_pair(v: Variant, nranks: u32, first: Op, second: Op) -> Vec<Vec<Planned>> {
    (0..nranks)
        .map(|rank| {
            let mut b = Builder::new(v, rank, nranks);
            b.bootstrap_init();
            b.op(first);
            b.op(second);
            b.steps
        })
        .collect()
}

/// The tree links of `rank`: its parent (a node's first rank's parent is the first rank of the
/// parent node in a binary tree of nodes) and its children.
fn tree_links(rank: u32, nranks: u32, per_node: u32) -> (Option<u32>, Vec<u32>) {
    let per = per_node.max(1);
    let nodes = nranks.div_ceil(per);
    let (node, local) = (rank / per, rank % per);
    let head = |k: u32| k * per;
    let mut downs = Vec::new();
    if rank + 1 < nranks && (rank + 1) / per == node {
        downs.push(rank + 1);
    }
    let up = if local > 0 {
        Some(rank - 1)
    } else if node > 0 {
        Some(head((node - 1) / 2))
    } else {
        None
    };
    if local == 0 {
        for child in [2 * node + 1, 2 * node + 2] {
            if child < nodes {
                downs.push(head(child));
            }
        }
    }
    (up, downs)
}

/// Every rank's program for `nccl-p2p`: bootstrapInit, then one NULL-graph transport setup
/// (connIndex 1, src/group.cc) per entry of `distances`.
pub fn nccl_p2p(v: Variant, nranks: u32, p: &P2pParams) -> Vec<Vec<Planned>> {
    (0..nranks)
        .map(|rank| {
            let mut b = Builder::new(v, rank, nranks);
            b.bootstrap_init();
            for &d in &p.distances {
                b.p2p_setup(d, p.channels);
            }
            b.steps
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_and_receives_pair_up_for_every_variant_and_shape() {
        // Every (from, to, logical tag) has as many sends as receives: the programs are matched.
        for v in crate::variant::ALL {
            for (n, per) in [(2, 8), (3, 8), (4, 2), (8, 8), (16, 8), (6, 4)] {
                for collnet in [false, true] {
                    let progs = nccl_init(v, n, InitParams { ranks_per_node: per, channels: 1, collnet });
                    assert_balanced(&progs, &format!("{v} n={n} per={per} collnet={collnet}"));
                }
                assert_balanced(&nccl_p2p(v, n, &P2pParams::every_peer(n)), &format!("{v} p2p n={n}"));
                for a in OPS {
                    for b in OPS {
                        assert_balanced(&nccl_pair(v, n, a, b), &format!("{v} {}>{} n={n}", a.name(), b.name()));
                    }
                }
            }
        }
    }

    fn assert_balanced(progs: &[Vec<Planned>], what: &str) {
        let mut count: BTreeMap<(u32, u32, i32, usize), i64> = BTreeMap::new();
        for (r, prog) in progs.iter().enumerate() {
            for p in prog {
                match p.step {
                    Step::Send { peer, logical_tag, size, .. } => {
                        *count.entry((r as u32, peer, logical_tag, size)).or_default() += 1
                    }
                    Step::Recv { peer: Some(peer), logical_tag, size, .. } => {
                        *count.entry((peer, r as u32, logical_tag, size)).or_default() -= 1
                    }
                    _ => {}
                }
            }
        }
        let bad: Vec<_> = count.iter().filter(|(_, &c)| c != 0).collect();
        assert!(bad.is_empty(), "{what}: unmatched (from, to, tag, size): {bad:?}");
    }

    #[test]
    fn workloads_by_name() {
        for name in WORKLOADS {
            let w = Workload::by_name(name).unwrap();
            assert_eq!(w.name(), name);
            assert_eq!(w.programs(Variant::Nccl221, 4).len(), 4);
        }
        assert_eq!(Workload::by_name("deepep"), Err(UnknownWorkload("deepep".into())));
        assert_eq!(Workload::by_name("nccl-init"), Ok(Workload::Init(InitParams::default())));
    }

    #[test]
    fn the_setup_follows_transport_cc() {
        // n=2, one channel each way: one 256-byte exchange and one 4-byte sync with the same tag
        // on 2.19 (transport.cc:115/116, 203/204), distinct tags on 2.21.
        let progs = nccl_p2p(Variant::Nccl219, 2, &P2pParams { channels: 1, distances: vec![1] });
        let steps: Vec<_> = progs[0][3..].iter().map(|p| (p.step.clone(), p.call.site)).collect();
        assert_eq!(
            steps,
            vec![
                (Step::Send { peer: 1, tag: 0x100, logical_tag: 0x100, size: 256 }, "transport.cc:115"),
                (Step::Recv { peer: Some(1), tag: 0x100, logical_tag: 0x100, size: 256 }, "transport.cc:116"),
                (Step::Send { peer: 1, tag: 0x100, logical_tag: 0x180, size: 4 }, "transport.cc:203"),
                (Step::Recv { peer: Some(1), tag: 0x100, logical_tag: 0x180, size: 4 }, "transport.cc:204"),
            ]
        );
    }
}
