//! The explorer's world: a protocol's root and N ranks (any [`Protocol`] of the seam whose
//! nodes are `Clone + Hash`; NVSHMEM's by default) over zero-latency in-memory connections,
//! where every step is deterministic except the choices an explorer makes: which connection a
//! rank's peer listener accepts next, which check-in the root takes next where its order matters,
//! and, with faults on, whether a drain gives up.
//!
//! The accept-queue model. A connection to a peer listener is *in flight* from its connect until
//! it is accepted, and may be accepted in any order, limited by causality:
//! - it cannot be accepted before its connect was issued (it does not exist before);
//! - a drain that completes proves its connection queued (the peer's kernel acknowledged the
//!   data, so the child is in the accept queue): a connection dialed by a node that *knows* the
//!   drain completed is accepted after it. The sender knows at once; others learn it from bytes,
//!   accepts and closes that carry the knowledge (happens-before), so a concurrent connection
//!   from another rank may still go first;
//! - a drain that gives up (`--faults drain-timeout`) proves nothing (fail-open);
//! - a persistent stream is one connection: its messages keep TCP order.
//!
//! A drain's outcome is decided as soon as it starts, before any other choice: only its sender
//! (blocked in the drain) sees it, so deciding it later adds no behaviour.
//!
//! A rank's root listener is FIFO: it only ever sees the root's one connection. The root's
//! rendezvous is FIFO where the protocol says its check-in order does not matter (NVSHMEM's and
//! NCCL's up to 2.22 answer in rank order once all are in, so each rank's state after its
//! check-in is the same whatever the order); where it says it does
//! ([`seam::ListenerKey::check_in_order_matters`]: NCCL's early replies from 2.23), the root's
//! accepts are choices too ([`Choice::CheckIn`], `accept=root:`), in flight as a peer listener's
//! connections are. [`RootOrder`] overrides the protocol's word, to measure what branching there
//! adds.
//! Time never moves: nothing here waits on a timer (no stagger below 129 ranks, no op or header
//! timeouts, drains answered at once or by a choice).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use bootsim_core::seam::{
    self, CloseReason, Completed, Effect, ListenerKey, Node as _, NodeOutput, Nodes, Noted, Observation, Observed,
    OwnedInput, PeerPorts, Protocol, Setup,
};
use bootsim_core::{ConnId, Instant, MsgOrigin};

use super::footprint::{Footprint, Key, LinkId, Res};
use super::schedule::{CheckInName, ConnName};
use crate::case::Case;
use crate::engine::outcome::{Node, Outcome};
use crate::oracle::{Finding, Verdict};
use crate::protocol::{Nccl, Nvshmem};
use crate::words::host_addr;

/// A protocol's listener key.
type Listener<P> = <<P as Protocol>::Node as seam::Node>::Listener;
use bootsim_core::seam::CompletionOf;

/// A protocol the explorer searches: its nodes, completions and events are cloned and hashed
/// with each state, and its judge (the one the fast engine uses) gives a verdict and findings.
pub trait Explored:
    Protocol<
        Node: Clone + Hash + seam::Node<Completion: Clone + Hash, Event: Clone>,
        Judge: seam::Judge<Report = (Verdict, Vec<Finding>)>,
    > + Clone
{
}

impl<P> Explored for P where
    P: Protocol<
            Node: Clone + Hash + seam::Node<Completion: Clone + Hash, Event: Clone>,
            Judge: seam::Judge<Report = (Verdict, Vec<Finding>)>,
        > + Clone
{
}

/// Something done with the explorer's world of a case, whatever its protocol: [`start`] builds
/// the world and hands it to [`WithWorld::run`].
pub trait WithWorld {
    /// What it gives.
    type Out;
    /// Does it with the case's world at its first choice.
    fn run<P: Explored>(self, start: World<P>) -> Self::Out;
}

/// The world of `case` (its protocol, variant, workload and ranks; the adversary does not
/// apply), run until its first choice, handed to `with`: the one place the explorer reads which
/// protocol a case names.
pub fn start<W: WithWorld>(case: &Case, faults: Faults, with: W) -> W::Out {
    match &case.nccl() {
        Some(nc) => with.run(World::of(Nccl, nc.variant, nc.workload.clone(), case, faults)),
        None => with.run(World::new(case, faults)),
    }
}

/// What an explorer may decide at a quiescent state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Choice {
    /// Rank `at`'s outstanding accept on its peer listener takes this connection.
    Accept {
        /// The accepting rank.
        at: u32,
        /// The connection, as schedules name it.
        conn: ConnName,
    },
    /// The root's outstanding accept takes this check-in (where its order matters).
    CheckIn {
        /// The connection, as schedules name it.
        conn: CheckInName,
    },
    /// A drain of this connection completes (`gives_up: false`) or gives up at its deadline.
    Drain {
        /// The connection, as schedules name it.
        conn: ConnName,
        /// Whether the drain gives up at its deadline instead of completing.
        gives_up: bool,
    },
}

/// Whether the explorer branches on the order the root takes check-ins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RootOrder {
    /// As the protocol's root listener says ([`seam::ListenerKey::check_in_order_matters`]).
    #[default]
    AsProtocolSays,
    /// FIFO: check-ins are taken in the order their connects were made.
    Fifo,
    /// Every order causality allows, whatever the protocol says.
    Explored,
}

/// Which faults the explorer may choose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// A drain may give up (fail-open) instead of completing.
    pub drain_timeout: bool,
}

#[derive(Clone, Debug, Hash)]
struct Link {
    listener: Key,
    name: Option<ConnName>,
    /// Its name as a connection to the root's listener.
    check_in: Option<CheckInName>,
    /// The accepted end, once accepted.
    server: Option<ConnId>,
    /// Bytes the client wrote before the accept (delivered with it).
    early: Vec<u8>,
    early_eof: bool,
    /// Completed drains the client knew of when it wrote the early bytes (delivered with them).
    early_know: BTreeSet<LinkId>,
    client_open: bool,
    server_open: bool,
    /// Origins of the messages sent on it, in order, and how many were taken.
    sent: Vec<MsgOrigin>,
    taken: usize,
}

/// What the oracle needs that the state machines forget: the run's history, shared between
/// worlds (a persistent list, newest first).
enum Entry<N: seam::Node> {
    Event(Node, N::Event, Option<u64>),
    Completed(Node, N::Completion),
}

/// A `Hasher` that keeps the bytes it is fed, for one cryptographic digest of them (derived
/// `Hash` impls make many tiny writes, which a streaming hasher pays for one by one).
struct ByteSink(Vec<u8>);

impl Hasher for ByteSink {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        0 // unused: the bytes are digested
    }
}

/// The first 128 bits of the SHA-256 of `bytes`.
fn digest128(bytes: &[u8]) -> u128 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(bytes);
    u128::from_le_bytes(digest[..16].try_into().expect("16 bytes"))
}

/// The choices that led to a world (a persistent list, newest first).
struct Trail {
    choice: Choice,
    prev: Option<Rc<Trail>>,
}

struct LogNode<N: seam::Node> {
    entry: Entry<N>,
    prev: Option<Rc<LogNode<N>>>,
}

/// What every world of one exploration shares: the protocol and the case's variant, workload,
/// seed and size.
struct Run<P: Protocol> {
    protocol: P,
    variant: P::Variant,
    workload: P::Workload,
    seed: u64,
    n: u32,
}

impl<P: Protocol> Run<P> {
    fn setup(&self) -> Setup<'_, P::Variant, P::Workload> {
        Setup {
            variant: &self.variant,
            workload: &self.workload,
            seed: self.seed,
            n: self.n,
            root_ip: host_addr(0, 0).ip(),
        }
    }
}

/// One state of the explored world, running protocol `P`.
#[derive(Clone)]
pub struct World<P: Protocol = Nvshmem>
where
    P::Node: Clone + Hash,
    <P::Node as seam::Node>::Completion: Clone + Hash,
    <P::Node as seam::Node>::Event: Clone,
{
    run: Rc<Run<P>>,
    addrs: Rc<BTreeMap<SocketAddr, Key>>,
    /// The ports of the protocol's rank-to-rank listeners (accepted in any order), and whether
    /// the root's check-in order matters.
    peer_ports: Rc<PeerPorts>,
    root_order: RootOrder,
    faults: Faults,
    /// A peer listener takes only the connections its pending accept would keep
    /// ([`seam::Node::would_keep`]; on unless [`World::reducing`] turned it off).
    wanted_first: bool,
    root: P::Node,
    ranks: Vec<P::Node>,
    /// Per rank: the next workload operation to start, whether the workload has none left,
    /// and whether it stopped on an error.
    next_op: Vec<u32>,
    exhausted: Vec<bool>,
    stopped: Vec<bool>,
    open: BTreeSet<Key>,
    pending_accept: BTreeMap<Key, ConnId>,
    links: BTreeMap<LinkId, Link>,
    server_end: BTreeMap<(Node, ConnId), LinkId>,
    /// The root's and root listeners' queues (FIFO).
    fifo: BTreeMap<Key, VecDeque<LinkId>>,
    /// In-flight connections to peer listeners, each with the drained connections it must follow.
    inflight: BTreeMap<Key, BTreeMap<LinkId, BTreeSet<LinkId>>>,
    /// Per node, the completed drains of connections still in flight it knows of.
    know: BTreeMap<Node, BTreeSet<LinkId>>,
    /// Connects to a listener not yet open (NVSHMEM retries "refused").
    waiting_connects: BTreeMap<Key, Vec<LinkId>>,
    dials: BTreeMap<(u32, u32), u32>,
    /// Connections each rank opened to the root's listener.
    check_in_dials: BTreeMap<u32, u32>,
    /// Drains awaiting the explorer's decision (faults on), with their bound; decided first,
    /// lowest first.
    drains: BTreeMap<LinkId, Duration>,
    /// Per rank, a digest of what the oracle judges that the rank's state forgets: its
    /// completions and, for every message it took, the message that was sent, as a multiset
    /// (their order is not kept: see `World::observe`). (Drains that gave up are findings that
    /// never change a verdict: worlds differing only there are merged.)
    observed: Vec<u128>,
    /// Root completion, when it came.
    root_done: Option<<P::Node as seam::Node>::Completion>,
    work: VecDeque<(Node, OwnedInput<Listener<P>>)>,
    log: Option<Rc<LogNode<P::Node>>>,
    /// Choices taken so far, newest first.
    trail: Option<Rc<Trail>>,
    choices: Vec<Choice>,
    /// What the current step has read and written (empty between steps).
    trace: Footprint,
}

impl World<Nvshmem> {
    /// The world of `case` (its variant, workload and ranks; the adversary does not apply), run
    /// until its first choice.
    pub fn new(case: &Case, faults: Faults) -> World {
        World::of(Nvshmem, case.variant(), case.workload().clone(), case, faults)
    }
}

impl<P: Protocol + Clone> World<P>
where
    P::Node: Clone + Hash,
    <P::Node as seam::Node>::Completion: Clone + Hash,
    <P::Node as seam::Node>::Event: Clone,
{
    /// The world of `protocol` with this variant and workload over `case`'s ranks and seed,
    /// run until its first choice.
    pub fn of(protocol: P, variant: P::Variant, workload: P::Workload, case: &Case, faults: Faults) -> World<P> {
        World::of_ordering(protocol, variant, workload, case, faults, RootOrder::AsProtocolSays)
    }

    /// [`World::of`], branching on the root's check-in order as `root_order` says.
    pub fn of_ordering(
        protocol: P,
        variant: P::Variant,
        workload: P::Workload,
        case: &Case,
        faults: Faults,
        root_order: RootOrder,
    ) -> World<P> {
        let n = case.ranks();
        let run = Rc::new(Run { protocol, variant, workload, seed: case.seed(), n });
        let Nodes { root, ranks } = run.protocol.unqueued(&run.setup());
        let mut addrs = BTreeMap::new();
        for &l in <Listener<P> as ListenerKey>::ALL {
            if l.is_root() {
                addrs.insert(host_addr(0, l.port()), (Node::Root, l.port()));
            } else {
                for r in 0..n {
                    addrs.insert(host_addr(r, l.port()), (Node::Rank(r), l.port()));
                }
            }
        }
        let mut w = World {
            run,
            addrs: Rc::new(addrs),
            peer_ports: Rc::new(PeerPorts::of::<Listener<P>>()),
            root_order,
            faults,
            wanted_first: true,
            root,
            ranks,
            next_op: vec![0; n as usize],
            exhausted: vec![false; n as usize],
            stopped: vec![false; n as usize],
            open: BTreeSet::new(),
            pending_accept: BTreeMap::new(),
            links: BTreeMap::new(),
            server_end: BTreeMap::new(),
            fifo: BTreeMap::new(),
            inflight: BTreeMap::new(),
            know: BTreeMap::new(),
            waiting_connects: BTreeMap::new(),
            dials: BTreeMap::new(),
            check_in_dials: BTreeMap::new(),
            drains: BTreeMap::new(),
            observed: vec![0; n as usize],
            root_done: None,
            work: VecDeque::new(),
            log: None,
            trail: None,
            choices: Vec::new(),
            trace: Footprint::default(),
        };
        w.collect(Node::Root);
        for r in 0..n {
            w.collect(Node::Rank(r));
        }
        w.settle();
        w.trace = Footprint::default();
        w
    }

    /// The world with the wanted-first reduction on or off (its choices listed again).
    pub fn reducing(mut self, on: bool) -> World<P> {
        self.wanted_first = on;
        self.settle();
        self.trace = Footprint::default();
        self
    }

    /// The protocol's peer listener whose port `key` has.
    fn listener_at(&self, key: Key) -> Listener<P> {
        *<Listener<P> as ListenerKey>::ALL
            .iter()
            .find(|l| l.is_peer() && l.port() == key.1)
            .expect("a peer listener of the protocol")
    }

    /// Whether `key` is a rank-to-rank listener (accepted in any order).
    fn is_peer(&self, key: Key) -> bool {
        matches!(key.0, Node::Rank(_)) && self.peer_ports.contains(key.1)
    }

    /// Whether `key` is the root's listener and its accept order is explored.
    fn is_ordered_root(&self, key: Key) -> bool {
        key.0 == Node::Root
            && match self.root_order {
                RootOrder::AsProtocolSays => self.peer_ports.root_ordered(key.1),
                RootOrder::Fifo => false,
                RootOrder::Explored => true,
            }
    }

    /// Whether `key`'s connections are in flight until a choice takes them (else FIFO).
    fn is_ordered(&self, key: Key) -> bool {
        self.is_peer(key) || self.is_ordered_root(key)
    }

    /// The node's state machine.
    fn node(&mut self, node: Node) -> &mut P::Node {
        match node {
            Node::Root => &mut self.root,
            Node::Rank(r) => &mut self.ranks[r as usize],
        }
    }

    /// The choices open here, in a fixed order; none means the run is over.
    pub fn choices(&self) -> &[Choice] {
        &self.choices
    }

    /// The world after `choice` (one of [`World::choices`]), run until its next choice.
    pub fn step(&self, choice: Choice) -> World<P> {
        self.step_traced(choice).0
    }

    /// [`World::step`], and the resources the step read and wrote (see [`super::footprint`]).
    pub fn step_traced(&self, choice: Choice) -> (World<P>, Footprint) {
        let mut w = self.clone();
        w.trail = Some(Rc::new(Trail { choice, prev: w.trail.take() }));
        match choice {
            Choice::Accept { at, conn } => {
                let link = w.link_named(conn).expect("a chosen connection exists");
                debug_assert_eq!(w.links[&link].listener.0, Node::Rank(at), "a rank's peer listener");
                w.take_inflight(link);
            }
            Choice::CheckIn { conn } => {
                let link = w.link_checking_in(conn).expect("a chosen check-in exists");
                debug_assert_eq!(w.links[&link].listener.0, Node::Root, "the root's listener");
                w.take_inflight(link);
            }
            Choice::Drain { conn, gives_up } => {
                w.trace.global();
                let link = w.link_named(conn).expect("a draining connection exists");
                let bound = w.drains.remove(&link).unwrap_or_default();
                let (node, c) = link;
                if gives_up {
                    w.work.push_back((node, OwnedInput::DrainTimedOut { conn: c, waited: bound, unacked: 1 }));
                } else {
                    w.drained(link);
                }
            }
        }
        w.settle();
        let mut footprint = std::mem::take(&mut w.trace);
        footprint.seal();
        (w, footprint)
    }

    /// A 128-bit fingerprint of everything that decides what can still happen and what the
    /// oracle will say: two worlds with the same fingerprint have the same futures and verdicts.
    pub fn fingerprint(&self) -> u128 {
        let mut bytes = ByteSink(Vec::with_capacity(4096));
        self.hash_state(&mut bytes);
        digest128(&bytes.0)
    }

    fn hash_state<H: Hasher>(&self, h: &mut H) {
        self.root.hash(h);
        self.ranks.hash(h);
        self.next_op.hash(h);
        self.exhausted.hash(h);
        self.stopped.hash(h);
        self.open.hash(h);
        self.pending_accept.hash(h);
        self.links.hash(h);
        self.server_end.hash(h);
        self.fifo.hash(h);
        self.inflight.hash(h);
        self.know.hash(h);
        self.waiting_connects.hash(h);
        self.dials.hash(h);
        self.check_in_dials.hash(h);
        self.drains.hash(h);
        self.observed.hash(h);
        self.root_done.hash(h);
    }

    /// The run so far as an engine outcome, for the oracle (a hang where ranks are unfinished).
    pub fn outcome(&self) -> Outcome {
        let n = self.ranks.len();
        let mut out = Outcome::new(n);
        let mut entries = Vec::new();
        let mut cur = self.log.as_deref();
        while let Some(node) = cur {
            entries.push(&node.entry);
            cur = node.prev.as_deref();
        }
        for e in entries.into_iter().rev() {
            match e {
                Entry::Event(node, ev, kconn) => out.record_event(Instant::ZERO, *node, ev.clone(), *kconn),
                Entry::Completed(Node::Rank(r), c) => out.completed(*r, Instant::ZERO, c.clone()),
                Entry::Completed(Node::Root, c) => {
                    out.root_finished(c.result().err().map(bootsim_core::RecordedError::of_root::<CompletionOf<P>>));
                }
            }
        }
        for (r, rank) in self.ranks.iter().enumerate() {
            if self.stopped[r] || (self.exhausted[r] && rank.is_finished()) {
                out.rank_ended(r as u32, Instant::ZERO);
            }
            out.rank_stopped(r as u32, rank.awaited(), rank.unexpected());
        }
        out.root_stopped(self.root.awaited());
        out
    }

    fn link_named(&self, name: ConnName) -> Option<LinkId> {
        self.links.iter().find(|(_, l)| l.name == Some(name)).map(|(id, _)| *id)
    }

    fn link_checking_in(&self, name: CheckInName) -> Option<LinkId> {
        self.links.iter().find(|(_, l)| l.check_in == Some(name)).map(|(id, _)| *id)
    }

    /// The chosen in-flight connection `link` is accepted by its listener's outstanding accept.
    fn take_inflight(&mut self, link: LinkId) {
        let key = self.links[&link].listener;
        self.trace.write(Res::Entry(link));
        if let Some(q) = self.inflight.get_mut(&key) {
            // The guard: what it had to follow is no longer in flight.
            for &a in q.get(&link).into_iter().flatten() {
                self.trace.read(Res::Entry(a));
            }
            q.remove(&link);
            // Nothing has to follow it any more: forget it everywhere.
            for (&e, after) in q.iter_mut() {
                if after.remove(&link) {
                    self.trace.write(Res::Entry(e));
                }
            }
        }
        // Knowledge of its drain is part of its entry (written above): every reader of a
        // node's knowledge reads the entries it holds (`World::known_by`).
        for known in self.know.values_mut() {
            known.remove(&link);
        }
        self.know.retain(|_, k| !k.is_empty());
        self.accept(key, link);
    }

    fn kconn(link: LinkId) -> u64 {
        let (node, conn) = link;
        let owner = match node {
            Node::Root => 0,
            Node::Rank(r) => u64::from(r) + 1,
        };
        owner << 40 | conn.0
    }

    fn log(&mut self, entry: Entry<P::Node>) {
        self.log = Some(Rc::new(LogNode { entry, prev: self.log.take() }));
    }

    /// Runs every deterministic consequence, then lists the choices.
    fn settle(&mut self) {
        while let Some((node, input)) = self.work.pop_front() {
            let i = input.as_input();
            self.trace.write(Res::Node(node));
            self.node(node).handle(Instant::ZERO, i);
            self.collect(node);
        }
        let mut choices = Vec::new();
        if let Some(conn) = self.drains.keys().find_map(|l| self.links.get(l).and_then(|l| l.name)) {
            choices.push(Choice::Drain { conn, gives_up: false });
            choices.push(Choice::Drain { conn, gives_up: true });
            self.choices = choices;
            return;
        }
        for &key in self.pending_accept.keys() {
            if !self.is_ordered(key) {
                continue;
            }
            let Some(inflight) = self.inflight.get(&key) else { continue };
            let open =
                inflight.iter().filter(|(_, after)| after.iter().all(|a| !inflight.contains_key(a))).map(|(l, _)| *l);
            let Node::Rank(at) = key.0 else {
                // The root's check-ins: it keeps every one.
                choices.extend(open.map(|l| Choice::CheckIn {
                    conn: self.links[&l].check_in.expect("check-ins in flight are named"),
                }));
                continue;
            };
            // Wanted first: the connections the pending accept would keep, none while it has none
            // of those (taking another only sets it aside, which taking it later also does).
            let listener = self.listener_at(key);
            let node = &self.ranks[at as usize];
            let kept = |l: &LinkId| !self.wanted_first || node.would_keep(listener, &self.links[l].early);
            for l in open.filter(|l| kept(l)) {
                let conn = self.links[&l].name.expect("peer-listener connections are named");
                choices.push(Choice::Accept { at, conn });
            }
        }
        choices.sort();
        self.choices = choices;
    }

    fn collect(&mut self, node: Node) {
        let mut tx = Vec::new();
        loop {
            let Some(out) = self.node(node).poll_output(&mut tx) else { return };
            self.execute(node, out, &tx);
        }
    }

    fn start_next(&mut self, r: u32) {
        let ri = r as usize;
        let index = self.next_op[ri];
        // Queued one at a time (the rank's queue stays empty, so states do not carry the rest
        // of the workload); one that cannot start completes with its error like any other.
        let run = Rc::clone(&self.run);
        if !run.protocol.queue(&run.setup(), &mut self.ranks[ri], r, index) {
            self.exhausted[ri] = true;
            return;
        }
        self.next_op[ri] += 1;
        self.collect(Node::Rank(r));
    }

    /// Adds `item` to rank `r`'s multiset digest: the sum, modulo 2^128, of each item's 128-bit
    /// SHA-256 of its `Hash` bytes (stable across Rust releases, unlike std's `DefaultHasher`).
    ///
    /// A sum, not a chain, so the order a rank took its messages in is forgotten: worlds whose
    /// ranks took the same messages for the same receives and completed with the same bytes, in
    /// another order, are one state. That is sound because every judge's verdict is a function
    /// of that multiset: a take is judged on its own (the receive it was for against the message
    /// it was), a completion on its own bytes, and the rest comes from the nodes' states. Only
    /// which take a finding's words name, and the findings' order, may differ; an example's
    /// findings are always its own schedule's. Two different multisets get one digest with
    /// probability at most m·2^-128 (m the most copies of one item), as the fingerprint's bound.
    /// It is what lets a rank's receives from different peers, accepted in any order, meet again
    /// (the rendezvous example's proofs at 4 ranks, `examples/rendezvous/tests/explore.rs`).
    /// `kind` tells a take (0) from a completion (1), so that no two items of different kinds
    /// hash to the same bytes.
    fn observe(&mut self, r: u32, kind: u8, item: &impl Hash) {
        let mut bytes = ByteSink(Vec::new());
        kind.hash(&mut bytes);
        item.hash(&mut bytes);
        self.observed[r as usize] = self.observed[r as usize].wrapping_add(digest128(&bytes.0));
    }

    fn link_of(&self, node: Node, conn: ConnId) -> Option<LinkId> {
        if self.links.contains_key(&(node, conn)) {
            return Some((node, conn));
        }
        self.server_end.get(&(node, conn)).copied()
    }

    /// Carries out one output; `tx` holds a write's bytes.
    fn execute(&mut self, node: Node, out: NodeOutput<P::Node>, tx: &[u8]) {
        self.trace.write(Res::Node(node));
        let effect = match out {
            seam::Output::Effect(e) => e,
            seam::Output::Observe(Observation::Completed(c)) => return self.completed(node, c),
            seam::Output::Observe(Observation::Event(e)) => return self.observed(node, e),
        };
        match effect {
            Effect::Listen { listener } => {
                let port = listener.port();
                Rc::make_mut(&mut self.peer_ports).listened(listener);
                let key = (node, port);
                let host = match node {
                    Node::Root => 0,
                    Node::Rank(r) => r,
                };
                self.trace.write(Res::Open(key));
                self.trace.write(Res::Queue(key));
                self.open.insert(key);
                self.work.push_back((node, OwnedInput::Listening { listener, addr: host_addr(host, port) }));
                for link in self.waiting_connects.remove(&key).unwrap_or_default() {
                    self.connect(link, key);
                }
            }
            Effect::Accept { listener, conn } => {
                let key = (node, listener.port());
                self.trace.write(Res::Pending(key));
                self.pending_accept.insert(key, conn);
                self.accept_fifo(key);
            }
            Effect::CloseListener { listener } => {
                let key = (node, listener.port());
                for r in [Res::Open(key), Res::Pending(key), Res::Queue(key)] {
                    self.trace.write(r);
                }
                self.open.remove(&key);
                self.pending_accept.remove(&key);
                let queued: Vec<LinkId> = self
                    .fifo
                    .remove(&key)
                    .unwrap_or_default()
                    .into_iter()
                    .chain(self.inflight.remove(&key).unwrap_or_default().into_keys())
                    .collect();
                for link in queued {
                    self.trace.write(Res::Entry(link));
                    self.trace.write(Res::Link(link));
                    if let Some(l) = self.links.get_mut(&link) {
                        l.server_open = false;
                        // Linux resets the connections a closed listener still queued.
                        let reason = CloseReason::Reset;
                        self.work.push_back((link.0, OwnedInput::PeerClosed { conn: link.1, reason }));
                    }
                }
            }
            Effect::Connect { conn, addr } => {
                let Some(&key) = self.addrs.get(&addr) else {
                    let reason = format!("no route to {addr}");
                    self.work.push_back((node, OwnedInput::ConnectFailed { conn, reason }));
                    return;
                };
                let name = match (node, key) {
                    (Node::Rank(from), (Node::Rank(to), _)) if self.is_peer(key) => {
                        let k = self.dials.entry((from, to)).or_insert(0);
                        *k += 1;
                        Some(ConnName { from, to, k: *k - 1 })
                    }
                    _ => None,
                };
                // Named whatever the root's order, so that a world explored both ways ends in
                // the same states.
                let check_in = match node {
                    Node::Rank(from) if key.0 == Node::Root => {
                        let k = self.check_in_dials.entry(from).or_insert(0);
                        *k += 1;
                        Some(CheckInName { from, k: *k - 1 })
                    }
                    _ => None,
                };
                let link = Link {
                    listener: key,
                    name,
                    check_in,
                    server: None,
                    early: Vec::new(),
                    early_eof: false,
                    early_know: self.known_by(node),
                    client_open: true,
                    server_open: true,
                    sent: Vec::new(),
                    taken: 0,
                };
                self.links.insert((node, conn), link);
                self.trace.write(Res::Link((node, conn)));
                self.trace.read(Res::Open(key));
                if self.open.contains(&key) {
                    self.connect((node, conn), key);
                } else {
                    self.trace.write(Res::Queue(key));
                    self.waiting_connects.entry(key).or_default().push((node, conn));
                }
            }
            Effect::Write { conn, .. } => {
                let bytes = tx.to_vec();
                let Some(link) = self.link_of(node, conn) else { return };
                self.trace.write(Res::Link(link));
                let known = self.known_by(node);
                let l = self.links.get_mut(&link).expect("linked");
                if link.0 == node && link.1 == conn {
                    match l.server {
                        Some(s) if l.server_open => {
                            let server = l.listener.0;
                            self.work.push_back((server, OwnedInput::Received { conn: s, bytes }));
                            self.learn(server, &known);
                        }
                        Some(_) => {}
                        None => {
                            l.early.extend_from_slice(&bytes);
                            l.early_know.extend(known);
                        }
                    }
                } else if l.client_open {
                    self.work.push_back((link.0, OwnedInput::Received { conn: link.1, bytes }));
                    self.learn(link.0, &known);
                }
            }
            Effect::Drain { conn, deadline } => {
                let link = (node, conn);
                if self.faults.drain_timeout && self.links.get(&link).is_some_and(|l| l.name.is_some()) {
                    // A drain awaiting its outcome pre-empts every accept; time never moves, so
                    // its deadline is its bound.
                    self.trace.global();
                    self.drains.insert(link, deadline - Instant::ZERO);
                } else {
                    self.drained(link);
                }
            }
            Effect::Close { conn } => self.close(node, conn),
        }
    }

    /// Records a protocol event: the messages on each link, what the rank took, the log.
    fn observed(&mut self, node: Node, e: <P::Node as seam::Node>::Event) {
        let link = e.conn().and_then(|c| self.link_of(node, c));
        if let Some(link) = link {
            self.trace.write(Res::Link(link));
        }
        match (e.noted(), link) {
            (Noted::Sent { origin, .. }, Some(link)) => {
                self.links.get_mut(&link).expect("linked").sent.push(origin);
            }
            (Noted::Taken { origin, from, .. }, Some(link)) => {
                let l = self.links.get_mut(&link).expect("linked");
                let sent = l.sent.get(l.taken).copied();
                l.taken += 1;
                if let Node::Rank(r) = node {
                    self.observe(r, 0, &(&origin, &from, sent));
                }
            }
            _ => {}
        }
        self.log(Entry::Event(node, e, link.map(Self::kconn)));
    }

    fn completed(&mut self, node: Node, c: <P::Node as seam::Node>::Completion) {
        match node {
            Node::Root => {
                self.root_done = Some(c.clone());
                self.log(Entry::Completed(node, c));
            }
            Node::Rank(r) => {
                let ok = c.result().is_ok();
                self.observe(r, 1, &c);
                self.log(Entry::Completed(node, c));
                if ok {
                    self.start_next(r);
                } else {
                    self.stopped[r as usize] = true;
                }
            }
        }
    }

    /// A connect to an open listener: the client is connected at once; the connection joins
    /// the listener's queue (FIFO listeners) or its in-flight set (peer listeners, an ordered
    /// root's), after every drained connection to that listener its dialer knows of.
    fn connect(&mut self, link: LinkId, key: Key) {
        self.trace.write(Res::Node(link.0));
        self.work.push_back((link.0, OwnedInput::Connected { conn: link.1 }));
        if self.is_ordered(key) {
            self.trace.write(Res::Entry(link));
            for &d in self.know.get(&link.0).into_iter().flatten() {
                self.trace.read(Res::Entry(d));
            }
            let inflight = self.inflight.entry(key).or_default();
            let known = self.know.get(&link.0);
            let after: BTreeSet<LinkId> =
                known.into_iter().flatten().filter(|d| inflight.contains_key(d)).copied().collect();
            inflight.insert(link, after);
        } else {
            self.trace.write(Res::Queue(key));
            self.fifo.entry(key).or_default().push_back(link);
            self.accept_fifo(key);
        }
    }

    /// The completed drains `node` knows of; reading them reads their entries.
    fn known_by(&mut self, node: Node) -> BTreeSet<LinkId> {
        let known = self.know.get(&node).cloned().unwrap_or_default();
        for &d in &known {
            self.trace.read(Res::Entry(d));
        }
        known
    }

    /// A completed drain: its connection is queued, and its sender knows it.
    fn drained(&mut self, link: LinkId) {
        self.trace.read(Res::Link(link));
        self.trace.read(Res::Entry(link));
        self.trace.write(Res::Node(link.0));
        let key = self.links.get(&link).map(|l| l.listener);
        if key.is_some_and(|k| self.inflight.get(&k).is_some_and(|q| q.contains_key(&link))) {
            self.know.entry(link.0).or_default().insert(link);
        }
        self.work.push_back((link.0, OwnedInput::Drained { conn: link.1, waited: Duration::ZERO }));
    }

    /// `node` receives something sent by a node that knew `known`.
    fn learn(&mut self, node: Node, known: &BTreeSet<LinkId>) {
        self.trace.write(Res::Node(node));
        for &d in known {
            self.trace.read(Res::Link(d));
            self.trace.read(Res::Entry(d));
        }
        let live: Vec<LinkId> = known
            .iter()
            .filter(|d| {
                self.links.get(d).is_some_and(|l| self.inflight.get(&l.listener).is_some_and(|q| q.contains_key(d)))
            })
            .copied()
            .collect();
        if !live.is_empty() {
            self.know.entry(node).or_default().extend(live);
        }
    }

    /// FIFO listeners take their queue's head as soon as an accept is outstanding.
    fn accept_fifo(&mut self, key: Key) {
        if self.is_ordered(key) || !self.pending_accept.contains_key(&key) {
            return;
        }
        self.trace.write(Res::Pending(key));
        self.trace.write(Res::Queue(key));
        let Some(link) = self.fifo.get_mut(&key).and_then(VecDeque::pop_front) else { return };
        self.accept(key, link);
    }

    fn accept(&mut self, key: Key, link: LinkId) {
        let conn = self.pending_accept.remove(&key).expect("an accept is outstanding");
        let (server, _) = key;
        for r in [Res::Pending(key), Res::Node(server), Res::Link(link)] {
            self.trace.write(r);
        }
        let client_host = match link.0 {
            Node::Root => 0,
            Node::Rank(r) => r,
        };
        let from = host_addr(client_host, 40000u16.wrapping_add(link.1 .0 as u16));
        self.server_end.insert((server, conn), link);
        let l = self.links.get_mut(&link).expect("accepted link exists");
        l.server = Some(conn);
        let early = std::mem::take(&mut l.early);
        let early_know = std::mem::take(&mut l.early_know);
        let eof = l.early_eof;
        // The connect and any early bytes carry what the client knew when it sent them.
        self.learn(server, &early_know);
        self.work.push_back((server, OwnedInput::Accepted { conn, from }));
        if !early.is_empty() {
            self.work.push_back((server, OwnedInput::Received { conn, bytes: early }));
        }
        if eof {
            self.work.push_back((server, OwnedInput::PeerClosed { conn, reason: CloseReason::Eof }));
        }
    }

    fn close(&mut self, node: Node, conn: ConnId) {
        let Some(link) = self.link_of(node, conn) else { return };
        self.trace.write(Res::Link(link));
        let known = self.known_by(node);
        let l = self.links.get_mut(&link).expect("linked");
        let client_side = link == (node, conn) && l.client_open;
        if client_side {
            l.client_open = false;
            match l.server {
                Some(s) if l.server_open => {
                    let server = l.listener.0;
                    self.work.push_back((server, OwnedInput::PeerClosed { conn: s, reason: CloseReason::Eof }));
                    self.learn(server, &known);
                }
                Some(_) => {}
                None => {
                    l.early_eof = true;
                    l.early_know.extend(known);
                }
            }
        } else {
            l.server_open = false;
            if l.client_open {
                let reason = CloseReason::Eof;
                self.work.push_back((link.0, OwnedInput::PeerClosed { conn: link.1, reason }));
                self.learn(link.0, &known);
            }
        }
        let l = &self.links[&link];
        if !l.client_open && !l.server_open {
            if let Some(s) = l.server {
                // The accepted end is its server's state.
                self.trace.write(Res::Node(l.listener.0));
                self.server_end.remove(&(l.listener.0, s));
            }
            self.links.remove(&link);
            if self.drains.remove(&link).is_some() {
                self.trace.global();
            }
        }
    }

    /// The run so far judged by the protocol's judge (a hang where ranks are unfinished).
    pub fn judge(&self) -> (Verdict, Vec<Finding>)
    where
        P: Explored,
    {
        let record = self.outcome().record;
        let mut judge = self.run.protocol.judge(&self.run.setup());
        seam::Judge::feed(&mut judge, &record);
        seam::Judge::finish(&mut judge, &record)
    }

    /// The choices taken to reach this world, oldest first.
    pub fn path(&self) -> Vec<Choice> {
        let mut out = Vec::new();
        let mut cur = self.trail.as_deref();
        while let Some(t) = cur {
            out.push(t.choice);
            cur = t.prev.as_deref();
        }
        out.reverse();
        out
    }
}
