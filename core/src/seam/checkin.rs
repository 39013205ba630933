//! A toy protocol on the seam, for tests of the worlds (compiled with the `testing` feature):
//! each rank dials the root's listener, writes its number and closes; the root accepts every
//! rank and ends with all their numbers. Nothing NVSHMEM-specific, so a world that runs it
//! runs a protocol it was not written for.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;

use crate::ids::ConnId;
use crate::record::{RunRecord, SentMsg, TakenMsg};
use crate::seam::{
    CloseReason, Completed, Effect, Input, Judge, ListenerKey, Node, NodeOutput, Nodes, Noted, Observation, Observed,
    Output, Protocol, Setup,
};
use crate::time::Instant;

/// The toy's listeners.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Port {
    /// The root's, where ranks check in.
    Root,
    /// A rank's (never opened: only so the key has a peer listener).
    Peer,
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?} listener")
    }
}

impl ListenerKey for Port {
    const ALL: &'static [Port] = &[Port::Root, Port::Peer];
    fn port(self) -> u16 {
        match self {
            Port::Root => 9000,
            Port::Peer => 9001,
        }
    }
    fn is_peer(self) -> bool {
        self == Port::Peer
    }
    fn is_root(self) -> bool {
        self == Port::Root
    }
}

/// A node's only operation ended: a rank's byte, or every rank's at the root (sorted).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Done {
    /// The bytes, or why not.
    pub result: Result<Vec<u8>, String>,
}

impl Completed for Done {
    type Error = String;
    fn op(&self) -> u32 {
        0
    }
    fn result(&self) -> Result<&[u8], &String> {
        self.result.as_deref()
    }
    fn into_result(self) -> Result<Vec<u8>, String> {
        self.result
    }
}

/// The root read a rank's hello on `conn`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Said {
    /// The root's connection.
    pub conn: ConnId,
    /// The rank that said it.
    pub rank: u8,
}

impl Observed for Said {
    fn conn(&self) -> Option<ConnId> {
        Some(self.conn)
    }
    fn noted(&self) -> Noted {
        Noted::Other
    }
}

#[derive(Clone, Debug, Hash)]
enum Toy {
    Root { n: usize, next: u64, got: BTreeMap<ConnId, Vec<u8>>, closed: usize },
    Rank { me: u8, root: SocketAddr },
}

/// A toy node: the root or a rank.
#[derive(Clone, Debug, Hash)]
pub struct ToyNode {
    toy: Toy,
    out: VecDeque<(NodeOutput<ToyNode>, Vec<u8>)>,
    finished: bool,
}

impl ToyNode {
    fn push(&mut self, out: NodeOutput<ToyNode>) {
        self.out.push_back((out, Vec::new()));
    }
}

impl Node for ToyNode {
    type Listener = Port;
    type Completion = Done;
    type Event = Said;

    fn handle(&mut self, _now: Instant, input: Input<'_, Port>) {
        match (&mut self.toy, input) {
            (Toy::Root { next, .. }, Input::Listening { .. } | Input::Accepted { .. }) => {
                let conn = ConnId(*next);
                *next += 1;
                self.push(Output::Effect(Effect::Accept { listener: Port::Root, conn }));
            }
            (Toy::Root { got, .. }, Input::Received { conn, bytes }) => {
                got.entry(conn).or_default().extend_from_slice(bytes);
                let rank = bytes[0];
                self.push(Output::Observe(Observation::Event(Said { conn, rank })));
            }
            (Toy::Root { .. }, Input::PeerClosed { .. }) if self.finished => {}
            (
                Toy::Root { .. },
                Input::PeerClosed { conn, reason: reason @ (CloseReason::Reset | CloseReason::TimedOut) },
            ) => {
                // Only a rank's own close ends its check-in: a reset or timeout may have lost its number.
                self.finished = true;
                let result = Err(format!("the check-in on c{} was {reason} before the rank closed it", conn.0));
                self.push(Output::Observe(Observation::Completed(Done { result })));
            }
            (Toy::Root { n, got, closed, .. }, Input::PeerClosed { reason: CloseReason::Eof, .. }) => {
                *closed += 1;
                if *closed == *n {
                    let mut all: Vec<u8> = got.values().flatten().copied().collect();
                    all.sort();
                    self.finished = true;
                    self.push(Output::Observe(Observation::Completed(Done { result: Ok(all) })));
                }
            }
            (Toy::Rank { me, .. }, Input::Connected { conn }) => {
                let me = *me;
                self.out.push_back((Output::Effect(Effect::Write { conn, len: 1 }), vec![me]));
                self.push(Output::Effect(Effect::Close { conn }));
                self.finished = true;
                self.push(Output::Observe(Observation::Completed(Done { result: Ok(vec![me]) })));
            }
            _ => {}
        }
    }

    fn poll_output(&mut self, tx: &mut Vec<u8>) -> Option<NodeOutput<ToyNode>> {
        let (out, bytes) = self.out.pop_front()?;
        tx.clear();
        tx.extend_from_slice(&bytes);
        Some(out)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn waiting_for(&self) -> Option<String> {
        (!self.finished).then(|| "the others".to_string())
    }

    fn is_finished(&self) -> bool {
        self.finished
    }
}

/// The toy protocol: each rank dials the root and says its number; the root ends once every
/// rank closed.
#[derive(Clone, Copy, Debug, Default)]
pub struct CheckIn;

/// The toy's judge: counts the operations that ended.
#[derive(Debug, Default)]
pub struct Counts(pub usize);

impl Judge for Counts {
    type Report = usize;
    fn taken(&mut self, _: &TakenMsg, _: Option<&SentMsg>) {}
    fn completed(&mut self, _: u32, _: usize, _: &Result<Vec<u8>, crate::RecordedError>) {
        self.0 += 1;
    }
    fn init_ended(&mut self, _: u32) {}
    fn finish(&mut self, _: &RunRecord) -> usize {
        self.0
    }
}

impl Protocol for CheckIn {
    type Node = ToyNode;
    type Variant = ();
    type Workload = ();
    type Judge = Counts;

    fn name(&self) -> &'static str {
        "check-in"
    }

    fn nodes(&self, setup: &Setup<'_, (), ()>) -> Nodes<ToyNode> {
        let node = |toy| ToyNode { toy, out: VecDeque::new(), finished: false };
        let root_addr = SocketAddr::new(setup.root_ip, Port::Root.port());
        let mut root = node(Toy::Root { n: setup.n as usize, next: 0, got: BTreeMap::new(), closed: 0 });
        root.push(Output::Effect(Effect::Listen { listener: Port::Root }));
        let ranks = (0..setup.n)
            .map(|r| {
                let mut rank = node(Toy::Rank { me: r as u8, root: root_addr });
                if let Toy::Rank { root, .. } = rank.toy {
                    rank.push(Output::Effect(Effect::Connect { conn: ConnId(0), addr: root }));
                }
                rank
            })
            .collect();
        Nodes { root, ranks }
    }

    fn judge(&self, _: &Setup<'_, (), ()>) -> Counts {
        Counts(0)
    }

    fn event_words(&self, e: &Said, _: Option<u64>) -> String {
        format!("rank {} said hello", e.rank)
    }

    fn completion_words(&self, c: &Done) -> String {
        format!("done: {:?}", c.result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a root of two ranks completed with, in order, after `ends`.
    fn root_after(ends: &[(u64, CloseReason)]) -> Vec<Result<Vec<u8>, String>> {
        let root = Toy::Root { n: 2, next: 0, got: BTreeMap::new(), closed: 0 };
        let mut node = ToyNode { toy: root, out: VecDeque::new(), finished: false };
        let now = Instant::from_nanos(0);
        for (c, rank) in [(0, 7u8), (1, 9)] {
            node.handle(now, Input::Received { conn: ConnId(c), bytes: &[rank] });
        }
        for &(c, reason) in ends {
            node.handle(now, Input::PeerClosed { conn: ConnId(c), reason });
        }
        let mut tx = Vec::new();
        std::iter::from_fn(|| node.poll_output(&mut tx))
            .filter_map(|out| match out {
                Output::Observe(Observation::Completed(done)) => Some(done.result),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn only_the_ranks_own_closes_end_the_check_in_and_a_reset_or_timeout_fails_it() {
        assert_eq!(root_after(&[(0, CloseReason::Eof), (1, CloseReason::Eof)]), [Ok(vec![7, 9])]);
        assert_eq!(root_after(&[(0, CloseReason::Eof)]), [], "one rank is still open");
        for (reason, words) in [(CloseReason::Reset, "reset"), (CloseReason::TimedOut, "timed out")] {
            let failed = format!("the check-in on c1 was {words} before the rank closed it");
            assert_eq!(root_after(&[(0, CloseReason::Eof), (1, reason)]), [Err(failed.clone())]);
            // It ends once: the other rank's close afterwards completes nothing more.
            assert_eq!(root_after(&[(1, reason), (0, CloseReason::Eof)]), [Err(failed)]);
        }
    }
}
