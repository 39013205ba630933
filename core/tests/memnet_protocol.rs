//! The in-memory world runs any protocol on the seam, not only NVSHMEM's: a toy check-in
//! protocol (each rank dials the root and says its number; the root completes once every rank
//! closed) built through `Protocol` and run by `MemNet::of`.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use bootsim_core::memnet::{MemNet, Node as Who};
use bootsim_core::seam::{
    Completed, Effect, Input, Judge, ListenerKey, Node, NodeOutput, Nodes, Noted, Observation, Observed, Output,
    Protocol, Setup,
};
use bootsim_core::{ConnId, Instant, RunRecord, SentMsg, TakenMsg};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Port {
    Root,
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

#[derive(Clone, Debug, PartialEq, Eq)]
struct Done {
    result: Result<Vec<u8>, String>,
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

#[derive(Clone, Debug, PartialEq, Eq)]
struct Said {
    conn: ConnId,
    rank: u8,
}

impl Observed for Said {
    fn conn(&self) -> Option<ConnId> {
        Some(self.conn)
    }
    fn noted(&self) -> Noted {
        Noted::Other
    }
}

enum Toy {
    Root { n: usize, next: u64, got: BTreeMap<ConnId, Vec<u8>>, closed: usize },
    Rank { me: u8, root: SocketAddr },
}

struct ToyNode {
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
            (Toy::Root { n, got, closed, .. }, Input::PeerClosed { .. }) => {
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

struct CheckIn;

struct Counts(usize);

impl Judge for Counts {
    type Report = usize;
    fn taken(&mut self, _: &TakenMsg, _: Option<&SentMsg>) {}
    fn completed(&mut self, _: u32, _: usize, _: &Result<Vec<u8>, String>) {
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

#[test]
fn memnet_runs_a_protocol_that_is_not_nvshmem() {
    let mut net = MemNet::of(&CheckIn, &(), &(), 1, 4);
    net.run(Duration::from_secs(1));
    let root_end: Vec<_> = net.completions.iter().filter(|(_, who, _)| *who == Who::Root).collect();
    assert_eq!(root_end.len(), 1, "{:?}", net.completions);
    assert_eq!(root_end[0].2.result, Ok(vec![0, 1, 2, 3]));
    let said: Vec<u8> = net.events.iter().map(|(_, _, e)| e.rank).collect();
    assert_eq!(said, vec![0, 1, 2, 3], "each rank's hello, in dial order");
    assert!((0..4).all(|r| net.node(r).is_finished() && net.results(r).is_empty()));
    let mut judge = CheckIn.judge(&Setup { variant: &(), workload: &(), seed: 1, n: 4, root_ip: [10, 0, 0, 1].into() });
    judge.completed(0, 0, &Ok(vec![]));
    assert_eq!(judge.finish(&RunRecord::new(4)), 1);
}
