//! A rank: checks in at the root, takes the address table, then runs its exchange rounds. In
//! each round it sends every peer one message on a connection of its own (connect, write,
//! close) and receives one from every peer, matched by (peer, tag) among the connections its
//! peer listener accepted, read one at a time in the order they were accepted.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;

use bootsim_core::codec::{FrameReader, WireError};
use bootsim_core::seam::{CloseReason, Effect, Input};
use bootsim_core::ConnId;

use crate::outbox::{Out, Outbox};
use crate::payload::payload;
use crate::payload::{receives_from, sends_to};
use crate::protocol::{Variant, Workload};
use crate::types::{Completion, Error, Event, Listener};
use crate::wire::{read_table, CheckIn, Msg};

/// What a rank is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RankConfig {
    /// This rank.
    pub rank: u32,
    /// Ranks in the world.
    pub n: u32,
    /// The root's rendezvous address.
    pub root: SocketAddr,
    /// How tags are chosen.
    pub variant: Variant,
    /// Its exchange rounds after init.
    pub workload: Workload,
    /// The case's seed (payloads).
    pub seed: u64,
}

/// A complete message no receive has taken yet; its connection stays open until one does.
#[derive(Clone, Debug, Hash)]
struct Arrived {
    conn: ConnId,
    msg: Msg,
}

/// Where the rank is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// Opening its peer listener.
    Listening,
    /// Connected (or connecting) to the root, waiting for the table.
    CheckingIn,
    /// In round `k` (from 1).
    Round(u32),
    /// Every round done.
    Done,
    /// An operation failed; nothing more happens.
    Failed,
}

/// A rank's state machine.
#[derive(Clone, Debug, Hash)]
pub struct Rank {
    cfg: RankConfig,
    out: Outbox,
    next_conn: u64,
    phase: Phase,
    addr: Option<SocketAddr>,
    root_conn: ConnId,
    root_rx: FrameReader,
    table: Vec<SocketAddr>,
    /// Accepted connections whose message has not been read yet, in accept order: messages
    /// are read one connection at a time, the head first (as a receiver that accepts, then
    /// reads the header, does), so the accept order is the order they reach the receives.
    reading: VecDeque<(ConnId, FrameReader)>,
    /// Complete messages not yet taken, in the order they completed (the unexpected list).
    unexpected: Vec<Arrived>,
    /// This round's connects not yet established: connection -> destination rank.
    sending: BTreeMap<ConnId, u32>,
    /// This round's payload from each peer, once taken (`None` for this rank and pending ones).
    received: Vec<Option<Vec<u8>>>,
}

impl Rank {
    /// A rank at time zero: it opens its peer listener at once.
    pub fn new(cfg: RankConfig) -> Rank {
        let mut out = Outbox::default();
        out.effect(Effect::Listen { listener: Listener::Peer });
        Rank {
            cfg,
            out,
            next_conn: 0,
            phase: Phase::Listening,
            addr: None,
            root_conn: ConnId(u64::MAX),
            root_rx: FrameReader::new(),
            table: Vec::new(),
            reading: VecDeque::new(),
            unexpected: Vec::new(),
            sending: BTreeMap::new(),
            received: Vec::new(),
        }
    }

    /// The tag of round `k`'s messages: the bug is here.
    pub fn tag(variant: Variant, round: u32) -> i32 {
        match variant {
            // One tag for every exchange: a later round's message from a peer matches an
            // earlier round's receive when its connection completes first.
            Variant::ReusedTag => 1,
            // The round in the tag: (peer, tag) names exactly one message.
            Variant::RoundTag => round as i32,
        }
    }

    fn conn(&mut self) -> ConnId {
        let c = ConnId(self.next_conn);
        self.next_conn += 1;
        c
    }

    fn op(&self) -> u32 {
        match self.phase {
            Phase::Round(k) => k,
            _ => 0,
        }
    }

    fn fail(&mut self, error: Error) {
        if matches!(self.phase, Phase::Done | Phase::Failed) {
            return;
        }
        let op = self.op();
        self.phase = Phase::Failed;
        self.out.completed(Completion { op, result: Err(error) });
    }

    /// Feeds one input.
    pub fn handle(&mut self, input: Input<'_, Listener>) {
        if self.phase == Phase::Failed {
            return;
        }
        match input {
            Input::Listening { addr, .. } => {
                self.addr = Some(addr);
                self.phase = Phase::CheckingIn;
                self.root_conn = self.conn();
                self.out.effect(Effect::Connect { conn: self.root_conn, addr: self.cfg.root });
                let conn = self.conn();
                self.out.effect(Effect::Accept { listener: Listener::Peer, conn });
            }
            Input::ListenFailed { listener, reason } => self.fail(Error::Listen { listener, reason }),
            Input::Connected { conn } if conn == self.root_conn => {
                let check_in = CheckIn { rank: self.cfg.rank, addr: self.addr.expect("listening before connecting") };
                self.out.write(conn, |b| check_in.encode(b));
            }
            Input::Connected { conn } => self.send(conn),
            Input::ConnectFailed { conn, reason } => {
                let (whom, addr) = match self.sending.get(&conn) {
                    Some(&to) => (format!("rank {to}"), self.table[to as usize]),
                    None => ("the root".to_string(), self.cfg.root),
                };
                self.fail(Error::Connect { whom, addr, reason });
            }
            Input::Accepted { conn, .. } => {
                self.reading.push_back((conn, FrameReader::new()));
                let next = self.conn();
                self.out.effect(Effect::Accept { listener: Listener::Peer, conn: next });
            }
            Input::Received { conn, bytes } => self.received(conn, bytes, None),
            Input::PeerClosed { conn, reason } => self.received(conn, &[], Some(reason)),
            Input::Drained { .. } | Input::DrainTimedOut { .. } => {}
        }
    }

    /// Bytes on `conn`, or its end (`ended`, with no bytes).
    fn received(&mut self, conn: ConnId, bytes: &[u8], ended: Option<CloseReason>) {
        if conn == self.root_conn && self.phase == Phase::CheckingIn {
            self.root_rx.push(bytes);
            if let Some(reason) = ended {
                self.root_rx.push_close(reason);
            }
            // Once the connection ended, an incomplete table is an error, never `Ok(None)`.
            match read_table(&mut self.root_rx, self.cfg.n) {
                Ok(Some(table)) => self.ready(table),
                Ok(None) => {}
                Err(WireError::TimedOut { .. }) => self.fail(Error::RootTimedOut { root: self.cfg.root }),
                Err(WireError::Truncated { have: 0, .. }) => self.fail(Error::RootClosed),
                Err(e) => self.fail(Error::Table(e)),
            }
            return;
        }
        let Some((_, rx)) = self.reading.iter_mut().find(|(c, _)| *c == conn) else { return };
        rx.push(bytes);
        if let Some(reason) = ended {
            rx.push_close(reason);
        }
        self.read_head();
    }

    /// Reads the messages of the connections at the head of the accept order, as they complete.
    fn read_head(&mut self) {
        while let Some((conn, rx)) = self.reading.front_mut() {
            let conn = *conn;
            match Msg::read(rx) {
                Ok(None) => return,
                Ok(Some(msg)) if msg.from >= self.cfg.n || msg.from == self.cfg.rank => {
                    self.stray(conn, format!("message from rank {} in a world of {}", msg.from, self.cfg.n));
                }
                Ok(Some(msg)) => {
                    self.reading.pop_front();
                    self.out.event(Event::Arrived { conn, from: msg.from, tag: msg.tag });
                    self.unexpected.push(Arrived { conn, msg });
                    self.take();
                }
                Err(e @ WireError::TimedOut { .. }) => self.stray(conn, format!("message cut short: {e}")),
                Err(e) => self.stray(conn, format!("bad message: {e}")),
            }
            if self.phase == Phase::Failed {
                return;
            }
        }
    }

    fn stray(&mut self, conn: ConnId, error: String) {
        self.reading.retain(|(c, _)| *c != conn);
        self.out.event(Event::Stray { conn, error });
        self.out.effect(Effect::Close { conn });
    }

    fn ready(&mut self, table: Vec<SocketAddr>) {
        self.table = table;
        self.out.effect(Effect::Close { conn: self.root_conn });
        self.out.event(Event::Ready);
        self.out.completed(Completion { op: 0, result: Ok(Vec::new()) });
        self.start(1);
    }

    /// Starts round `k`, or ends the workload.
    fn start(&mut self, k: u32) {
        if k > self.cfg.workload.rounds {
            self.phase = Phase::Done;
            return;
        }
        self.phase = Phase::Round(k);
        self.received = vec![None; self.cfg.n as usize];
        for to in sends_to(self.cfg.workload.peers, self.cfg.rank, self.cfg.n) {
            let conn = self.conn();
            self.sending.insert(conn, to);
            self.out.effect(Effect::Connect { conn, addr: self.table[to as usize] });
        }
        self.take();
    }

    /// A connection of this round's is up: write the message and close.
    fn send(&mut self, conn: ConnId) {
        let Phase::Round(round) = self.phase else { return };
        let Some(to) = self.sending.remove(&conn) else { return };
        let tag = Self::tag(self.cfg.variant, round);
        let msg = Msg {
            from: self.cfg.rank,
            tag,
            payload: payload(self.cfg.seed, self.cfg.rank, to, round, self.cfg.workload.len),
        };
        self.out.write(conn, |b| msg.encode(b));
        self.out.event(Event::Sent { conn, to, tag, round, size: self.cfg.workload.len });
        self.out.effect(Effect::Close { conn });
        self.try_complete();
    }

    /// The ranks each round receives from.
    fn from(&self) -> Vec<u32> {
        receives_from(self.cfg.workload.peers, self.cfg.rank, self.cfg.n)
    }

    /// Lets this round's receives take what they match, first come first taken.
    fn take(&mut self) {
        let Phase::Round(round) = self.phase else { return };
        let tag = Self::tag(self.cfg.variant, round);
        for from in self.from() {
            if self.received[from as usize].is_some() {
                continue;
            }
            let Some(i) = self.unexpected.iter().position(|a| a.msg.from == from && a.msg.tag == tag) else { continue };
            let Arrived { conn, msg } = self.unexpected.remove(i);
            let size = msg.payload.len();
            self.out.event(Event::Taken { conn, from, tag, round, size, expected_size: self.cfg.workload.len });
            self.out.effect(Effect::Close { conn });
            if size != self.cfg.workload.len {
                return self.fail(Error::Size { from, tag, got: size, expected: self.cfg.workload.len });
            }
            self.received[from as usize] = Some(msg.payload);
        }
        self.try_complete();
    }

    fn try_complete(&mut self) {
        let Phase::Round(round) = self.phase else { return };
        let from = self.from();
        if !self.sending.is_empty() || from.iter().any(|&p| self.received[p as usize].is_none()) {
            return;
        }
        let bytes: Vec<u8> = from.iter().flat_map(|&p| self.received[p as usize].take().unwrap_or_default()).collect();
        self.out.completed(Completion { op: round, result: Ok(bytes) });
        self.start(round + 1);
    }

    /// The next output.
    pub fn poll_output(&mut self, tx: &mut Vec<u8>) -> Option<Out> {
        self.out.poll(tx)
    }

    /// The first receive of this round still pending: (peer, tag).
    fn pending_recv(&self) -> Option<(u32, i32)> {
        let Phase::Round(round) = self.phase else { return None };
        let from = self.from().into_iter().find(|&p| self.received[p as usize].is_none())?;
        Some((from, Self::tag(self.cfg.variant, round)))
    }

    /// What it waits for, unless finished.
    pub fn waiting_for(&self) -> Option<String> {
        match self.phase {
            Phase::Listening => Some("init: its peer listener".into()),
            Phase::CheckingIn => Some("init: the address table from the root".into()),
            Phase::Round(k) => Some(match (self.sending.keys().next(), self.pending_recv()) {
                (Some(c), _) => format!("exchange #{}: connect to rank {}", k - 1, self.sending[c]),
                (None, Some((from, tag))) => format!("exchange #{}: recv from rank {from} tag {tag:#x}", k - 1),
                (None, None) => format!("exchange #{}", k - 1),
            }),
            Phase::Done | Phase::Failed => None,
        }
    }

    /// The rank it waits on, if any.
    pub fn culprit(&self) -> Option<u32> {
        match self.phase {
            Phase::Round(_) => self.sending.values().next().copied().or(self.pending_recv().map(|(p, _)| p)),
            _ => None,
        }
    }

    /// The unexpected list, head first, as (peer, tag).
    pub fn unexpected(&self) -> Vec<(i32, i32)> {
        self.unexpected.iter().map(|a| (a.msg.from as i32, a.msg.tag)).collect()
    }

    /// True once every round is done or one failed.
    pub fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Done | Phase::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Peers;
    use bootsim_core::seam::{Observation, Output};

    /// Rank 1 of 2 checks in, gets `part` of the root's table, then the root's connection ends
    /// for `reason`: the error it fails with.
    fn table_ends(part: &[u8], reason: CloseReason) -> String {
        let workload = Workload { rounds: 0, len: 0, peers: Peers::Ring };
        let root = "10.0.0.1:9000".parse().unwrap();
        let cfg = RankConfig { rank: 1, n: 2, root, variant: Variant::RoundTag, workload, seed: 1 };
        let mut rank = Rank::new(cfg);
        rank.handle(Input::Listening { listener: Listener::Peer, addr: "10.0.0.2:9001".parse().unwrap() });
        let conn = rank.root_conn;
        rank.handle(Input::Connected { conn });
        rank.handle(Input::Received { conn, bytes: part });
        rank.handle(Input::PeerClosed { conn, reason });
        let mut tx = Vec::new();
        let mut failed = None;
        while let Some(out) = rank.poll_output(&mut tx) {
            if let Output::Observe(Observation::Completed(c)) = out {
                failed = c.result.err().map(|e| e.to_string());
            }
        }
        failed.expect("the rank fails")
    }

    #[test]
    fn a_table_the_ranks_kernel_gave_up_on_is_a_timeout_not_a_bad_table() {
        // The table's frame length (two addresses), then 3 of its bytes.
        let mut part = 56i32.to_le_bytes().to_vec();
        part.extend_from_slice(&[2, 0, 0]);
        let bad = "bad address table from the root: connection closed after 7 of 60 bytes of address table";
        assert_eq!(table_ends(&part, CloseReason::Eof), bad);
        assert_eq!(table_ends(&part, CloseReason::Reset), bad);
        let timed_out = "the connection to the root at 10.0.0.1:9000 timed out before the address table came: this \
                         rank's kernel gave up retransmitting to it (ETIMEDOUT), so the root's host, or the path \
                         between them, is down";
        assert_eq!(table_ends(&part, CloseReason::TimedOut), timed_out);
        assert_eq!(table_ends(&[], CloseReason::TimedOut), timed_out);
        // No byte of the table before the end: the root closed (or reset) it, not a bad table.
        let closed = "the root closed the connection before sending the address table";
        assert_eq!(table_ends(&[], CloseReason::Eof), closed);
        assert_eq!(table_ends(&[], CloseReason::Reset), closed);
    }
}
