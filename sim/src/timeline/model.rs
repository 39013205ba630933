//! What the timeline draws, extracted from a traced run: lanes, connections with their SYN,
//! accept-queue entry, accept and read, RX stalls, drains, completions, and the mismatch.

use bootsim_core::Instant;
use bootsim_nvshmem::OpKind;

use crate::engine::outcome::{DrainNote, Node, Outcome};
use crate::explain::{decisive_stall, find_overtake, Overtake};
use crate::kernel::{Dir, EventKind};
use crate::oracle::Finding;
use crate::run::RunReport;
use crate::words::{seg_name, step_name};

/// Worlds up to this many ranks show every lane; larger ones only the violation's lanes.
pub const MAX_LANES: u32 = 8;

use crate::protocol::{root_ports, RootPorts};

/// A connection's part in the violation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not involved.
    Plain,
    /// Sent first, accepted late: its message was meant for the receive.
    Overtaken,
    /// Sent later, accepted first: the receive took its message.
    Taken,
}

/// A packet that waited in a busy RX queue.
#[derive(Clone, Debug)]
pub struct Stall {
    /// The lane of the node whose host received the packet.
    pub lane: Node,
    /// Host and RX queue.
    pub host: u32,
    /// RX queue number.
    pub queue: u16,
    /// Stall interval.
    pub from: Instant,
    /// End of the stall.
    pub until: Instant,
    /// The packet, in words.
    pub what: String,
    /// The stall that let the violation happen.
    pub decisive: bool,
}

/// One kernel connection as drawn.
#[derive(Clone, Debug)]
pub struct Conn {
    /// Kernel connection number (the trace's cN/sN).
    pub id: u64,
    /// Connecting node and accepting node.
    pub client: Node,
    /// Accepting node.
    pub server: Node,
    /// First SYN, child enqueued, accepted.
    pub syn: Instant,
    /// When the child entered the accept queue.
    pub enq: Option<Instant>,
    /// When accept() took it.
    pub acc: Option<Instant>,
    /// What it carried, e.g. `alltoall #1 step 1 (576 B, tag 0x1)`.
    pub label: String,
    /// When the sender wrote its message.
    pub sent: Option<Instant>,
    /// When a receive took its message, and the receive's step.
    pub taken: Option<(Instant, String)>,
    /// Its part in the violation.
    pub role: Role,
    /// Packet losses and retransmissions: (time, lane, words).
    pub marks: Vec<(Instant, Node, String)>,
    /// Part of the init phase (check-in, peer addresses, init exchange).
    pub init: bool,
}

/// A completed (or failed) operation on a lane.
#[derive(Clone, Debug)]
pub struct Done {
    /// When.
    pub at: Instant,
    /// Which lane.
    pub lane: Node,
    /// `alltoall #1 ok`.
    pub text: String,
    /// Whether it failed.
    pub failed: bool,
    /// The init operation's completion.
    pub init: bool,
}

/// The highlighted violation.
#[derive(Clone, Debug)]
pub struct Mismatch {
    /// The overtaking.
    pub overtake: Overtake,
    /// The receiver's lane and the time of the wrong take (or accept).
    pub at: Instant,
    /// Headline, e.g. `rank 0 alltoall #1 step 1 took barrier #2 round 1 (connection 8)`.
    pub headline: String,
    /// What the receive should have got (QPN/GID when known).
    pub expected: String,
    /// What it got.
    pub received: String,
    /// What follows (verbs or error).
    pub symptom: Option<String>,
}

/// Everything the picture shows.
#[derive(Clone, Debug)]
pub struct Model {
    /// Lanes left to right.
    pub lanes: Vec<Node>,
    /// Connections between shown lanes, in connect order.
    pub conns: Vec<Conn>,
    /// RX stalls of shown connections.
    pub stalls: Vec<Stall>,
    /// Drains of shown connections.
    pub drains: Vec<DrainNote>,
    /// Completions on shown lanes.
    pub done: Vec<Done>,
    /// The violation, if any.
    pub mismatch: Option<Mismatch>,
    /// Total ranks, to say when lanes were left out.
    pub ranks: u32,
}

fn ends(flow_client: u32, flow_server: u32, server_port: u16, ports: Option<RootPorts>) -> (Node, Node) {
    if ports.is_some_and(|p| server_port == p.root) {
        (Node::Rank(flow_client), Node::Root)
    } else if ports.is_some_and(|p| server_port == p.from_root) {
        (Node::Root, Node::Rank(flow_server))
    } else {
        (Node::Rank(flow_client), Node::Rank(flow_server))
    }
}

impl Model {
    /// Extracts the model from a traced report (kernel notes present).
    pub fn build(report: &RunReport) -> Model {
        let out = &report.outcome;
        let n = report.case.ranks();
        let ports = root_ports(&report.case);
        let overtake = if report.verdict.is_ok() { None } else { find_overtake(out) };
        let lanes: Vec<Node> = match &overtake {
            _ if n <= MAX_LANES => std::iter::once(Node::Root).chain((0..n).map(Node::Rank)).collect(),
            Some(o) => {
                let mut v = vec![Node::Rank(o.peer.min(o.receiver)), Node::Rank(o.peer.max(o.receiver))];
                v.dedup();
                v
            }
            None => std::iter::once(Node::Root).chain((0..MAX_LANES).map(Node::Rank)).collect(),
        };
        let mut m = Model {
            conns: Vec::new(),
            stalls: Vec::new(),
            drains: Vec::new(),
            done: Vec::new(),
            mismatch: None,
            ranks: n,
            lanes,
        };
        for (&k, notes) in &out.kernel_notes {
            m.add_conn(out, k, notes, overtake.as_ref(), ports);
        }
        m.drains =
            out.drains.iter().filter(|d| d.kconn.is_some_and(|k| m.conns.iter().any(|c| c.id == k))).copied().collect();
        let specs = report.case.workload().ops(report.case.seed());
        for end in &out.record.ranks {
            let lane = Node::Rank(end.rank);
            if !m.lanes.contains(&lane) {
                continue;
            }
            let failures = std::iter::once(end.init.is_some()).chain(end.ops.iter().map(Result::is_err));
            for (i, (at, failed)) in end.ended_at.iter().zip(failures).enumerate() {
                let init = i == 0;
                let kind = if init { OpKind::Init } else { specs.get(i - 1).map_or(OpKind::Init, |s| s.kind()) };
                let name = bootsim_core::OpName(kind.op_type(), bootsim_core::OpId(i as u32)).to_string();
                let text = format!("{name} {}", if failed { "failed" } else { "ok" });
                m.done.push(Done { at: *at, lane, text, failed, init });
            }
        }
        m.mismatch = overtake.map(|o| mismatch(report, o));
        m
    }

    fn add_conn(
        &mut self,
        out: &Outcome,
        k: u64,
        notes: &[(Instant, EventKind)],
        o: Option<&Overtake>,
        ports: Option<RootPorts>,
    ) {
        let Some((syn, flow)) = notes.iter().find_map(|(t, e)| match e {
            EventKind::SynSent { flow, .. } => Some((*t, *flow)),
            _ => None,
        }) else {
            return;
        };
        let (client, server) = ends(flow.client.0, flow.server.0, flow.server_port, ports);
        if !self.lanes.contains(&client) || !self.lanes.contains(&server) {
            return;
        }
        let role = match o {
            Some(o) if o.taken.0 == k => Role::Taken,
            Some(o) if o.expected.is_some_and(|e| e.0 == k) => Role::Overtaken,
            _ => Role::Plain,
        };
        let decisive = match (role, o) {
            (Role::Overtaken, Some(o)) => decisive_stall(out, k, o.taken.0).map(|(i, _)| i),
            _ => None,
        };
        let sent = out.record.messages.sent.range((k, 0)..(k, u32::MAX)).next().map(|(_, s)| s);
        let label = match (sent, flow.server_port) {
            (Some(s), _) => format!("{} ({} B, tag {:#x})", step_name(&s.origin), s.size, s.tag),
            (None, p) if ports.is_some_and(|r| p == r.root) => "check-in".to_string(),
            (None, p) if ports.is_some_and(|r| p == r.from_root) => "peer addresses from root".to_string(),
            (None, _) => "init exchange".to_string(),
        };
        let taken = out.record.messages.taken.iter().find(|t| t.conn.is_some_and(|(c, _)| c == k));
        let mut conn = Conn {
            id: k,
            client,
            server,
            syn,
            enq: None,
            acc: None,
            label,
            sent: sent.map(|s| s.at),
            taken: taken.map(|t| (t.at, step_name(&t.origin))),
            role,
            marks: Vec::new(),
            init: sent.is_none() && role == Role::Plain,
        };
        for (i, (at, e)) in notes.iter().enumerate() {
            let lane_of = |dir: Dir| if dir == Dir::ToServer { server } else { client };
            match *e {
                EventKind::ChildEnqueued { .. } if conn.enq.is_none() => conn.enq = Some(*at),
                EventKind::Accepted { .. } if conn.acc.is_none() => conn.acc = Some(*at),
                EventKind::RxStall { host, queue, dir, seg, from, until, .. } => self.stalls.push(Stall {
                    lane: lane_of(dir),
                    host: host.0,
                    queue,
                    from,
                    until,
                    what: format!("connection {k}: {}", seg_name(seg, dir)),
                    decisive: decisive == Some(i),
                }),
                EventKind::PacketLost { seg, dir, .. } => {
                    conn.marks.push((*at, lane_of(dir), format!("lost {}", seg_name(seg, dir))))
                }
                EventKind::RingDrop { seg, dir, .. } => {
                    conn.marks.push((*at, lane_of(dir), format!("RX ring full: dropped {}", seg_name(seg, dir))))
                }
                EventKind::CpuBacklogDrop { seg, dir, .. } => {
                    conn.marks.push((*at, lane_of(dir), format!("CPU backlog full: dropped {}", seg_name(seg, dir))))
                }
                EventKind::Retransmit { seg, dir, attempt, .. } => {
                    let sender = if dir == Dir::ToServer { client } else { server };
                    conn.marks.push((*at, sender, format!("retransmit {} ({attempt})", seg_name(seg, dir))))
                }
                EventKind::BacklogDrop { .. } => conn.marks.push((*at, server, "accept queue full: dropped".into())),
                _ => {}
            }
        }
        self.conns.push(conn);
    }

    /// The first instant of anything outside the init phase, when there was an init phase.
    pub fn init_end(&self) -> Option<Instant> {
        let any_init = self.conns.iter().any(|c| c.init) || self.done.iter().any(|d| d.init);
        let after = self.conns.iter().filter(|c| !c.init).flat_map(|c| [Some(c.syn), c.sent]).flatten();
        let first = after.chain(self.done.iter().filter(|d| !d.init).map(|d| d.at)).min();
        first.filter(|_| any_init)
    }

    /// The first violation: the wrong receive of the mismatch, else the first failed operation
    /// on a shown lane; its instant, lane and what it was.
    pub fn first_violation(&self) -> Option<(Instant, Node, String)> {
        if let Some(mm) = &self.mismatch {
            return Some((mm.at, Node::Rank(mm.overtake.receiver), mm.headline.clone()));
        }
        let failed = self.done.iter().filter(|d| d.failed).min_by_key(|d| (d.at, d.lane));
        failed.map(|d| (d.at, d.lane, format!("{} {}", super::svg::lane_name(d.lane), d.text)))
    }

    /// Where the failing exchange begins: the first SYN of the two connections of the
    /// violation, or the start of the stall that let one overtake the other.
    pub fn exchange_start(&self) -> Option<Instant> {
        self.mismatch.as_ref()?;
        let conns = self.conns.iter().filter(|c| c.role != Role::Plain).map(|c| c.syn);
        conns.chain(self.stalls.iter().filter(|s| s.decisive).map(|s| s.from)).min()
    }

    /// Every instant the picture places, unsorted.
    pub fn times(&self) -> Vec<Instant> {
        let mut t = Vec::new();
        for c in &self.conns {
            t.push(c.syn);
            t.extend(c.enq);
            t.extend(c.acc);
            t.extend(c.sent);
            t.extend(c.taken.as_ref().map(|x| x.0));
            t.extend(c.marks.iter().map(|m| m.0));
        }
        t.extend(self.drains.iter().flat_map(|d| [d.start, d.end]));
        t.extend(self.done.iter().map(|d| d.at));
        t.extend(self.stalls.iter().filter(|s| s.decisive).flat_map(|s| [s.from, s.until]));
        t
    }
}

fn mismatch(report: &RunReport, o: Overtake) -> Mismatch {
    let out = &report.outcome;
    let taken = &out.record.messages.sent[&o.taken];
    let expected = o.expected.and_then(|k| out.record.messages.sent.get(&k));
    let take = out.record.messages.taken.iter().find(|t| t.conn == Some(o.taken));
    let at = take.map(|t| t.at).or_else(|| crate::explain::accepted_at(out, o.taken.0)).unwrap_or(taken.at);
    let wanted = take.map(|t| step_name(&t.origin)).or(expected.map(|e| step_name(&e.origin))).unwrap_or_default();
    let headline = format!(
        "rank {} {wanted} took {} from rank {} (connection {})",
        o.receiver,
        step_name(&taken.origin),
        o.peer,
        o.taken.0
    );
    let qp = report.findings.iter().find_map(|f| match f {
        Finding::Corruption { rank, peer, detail: Some(d), .. } if *rank == o.receiver && *peer == o.peer => {
            d.expected_received().map(|(e, g)| (e, g, d.consequence()))
        }
        _ => None,
    });
    let error = report.findings.iter().find_map(|f| match f {
        Finding::Error { rank: Some(r), error } if *r == o.receiver => Some(error.to_string()),
        _ => None,
    });
    let exp_msg =
        expected.map_or("its own message".to_string(), |e| format!("{} ({} B)", step_name(&e.origin), e.size));
    let got_msg = format!("{} ({} B)", step_name(&taken.origin), take.map_or(taken.size, |t| t.size));
    match qp {
        Some((e, g, verbs)) => Mismatch {
            overtake: o,
            at,
            headline,
            expected: format!("expected {e} ({exp_msg})"),
            received: format!("received {g} ({got_msg})"),
            symptom: verbs,
        },
        None => Mismatch {
            overtake: o,
            at,
            headline,
            expected: format!("expected {exp_msg}"),
            received: format!("received {got_msg}"),
            symptom: error,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{run_case, Case};

    #[test]
    fn each_protocol_s_check_ins_join_a_rank_to_the_root() {
        for line in [
            "engine=fast workload=deepep ranks=2 seed=1",
            "engine=fast protocol=nccl workload=nccl-init ranks=2 seed=1",
        ] {
            let m = Model::build(&run_case(&Case::parse(line).unwrap(), true));
            let check_ins = m.conns.iter().filter(|c| c.server == Node::Root && c.label == "check-in").count();
            assert_eq!(
                check_ins,
                2,
                "{line}: {:?}",
                m.conns.iter().map(|c| (&c.client, &c.server, &c.label)).collect::<Vec<_>>()
            );
        }
    }
}
