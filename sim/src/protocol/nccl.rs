//! NCCL's bootstrap (crate `bootsim-nccl`) as the engines run it: the root and a rank per host
//! running the case's workload's programs, judged by NCCL's non-overtaking oracle
//! ([`bootsim_nccl::oracle`], the one its own test world uses) with every protocol's end
//! checks (errors, hangs, leaks), and worded in NCCL's terms (its call names and source lines).

use std::net::SocketAddr;

use bootsim_core::seam::{self, Nodes, Protocol, Setup};
use bootsim_core::{MsgOrigin, RunRecord, SentMsg, TakenMsg};
use bootsim_nccl::program::Planned;
use bootsim_nccl::seam::{nodes, origin_nth, origin_step, Completion, NcclNode};
use bootsim_nccl::{Event, Listener, Mismatch, Oracle, Variant, Workload};

use crate::case::{Case, NcclCase};
use crate::oracle::{conclude, Finding, OpRef, Provenance, Verdict};
use crate::words::{host_addr, ConnRef};
use bootsim_core::seed::derive;

/// NCCL's TCP bootstrap (variants `nccl-2.8`, `nccl-2.19`, `nccl-2.21`, `nccl-2.30`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Nccl;

/// What the engines tell [`Nccl`] to build a run of `case` (whose NCCL part is `nc`): its
/// variant, workload, seed and ranks, the root on host 0.
pub fn setup<'a>(nc: &'a NcclCase, case: &Case) -> Setup<'a, Variant, Workload> {
    Setup {
        variant: &nc.variant,
        workload: &nc.workload,
        seed: case.seed(),
        n: case.ranks(),
        root_ip: host_addr(0, 0).ip(),
    }
}

/// Every rank's program for a run of `setup`.
fn programs(setup: &Setup<'_, Variant, Workload>) -> Vec<Vec<Planned>> {
    setup.workload.programs(*setup.variant, setup.n)
}

impl Protocol for Nccl {
    type Node = NcclNode;
    type Variant = Variant;
    type Workload = Workload;
    type Judge = Judge;

    fn name(&self) -> &'static str {
        "nccl"
    }

    fn nodes(&self, setup: &Setup<'_, Variant, Workload>) -> Nodes<NcclNode> {
        let root = SocketAddr::new(setup.root_ip, Listener::Root.port());
        let (root, ranks) = nodes(*setup.variant, programs(setup), derive(setup.seed, "magic", 0), root);
        Nodes { root, ranks }
    }

    fn judge(&self, setup: &Setup<'_, Variant, Workload>) -> Judge {
        Judge::new(&programs(setup))
    }

    fn event_words(&self, event: &Event, kconn: Option<u64>) -> String {
        event_line(event, kconn)
    }

    fn completion_words(&self, c: &Completion) -> String {
        completion_line(c)
    }
}

/// A message of the record by its call, as NCCL names it: `rank`'s send to (or receive from)
/// `peer` with this origin, e.g. "ncclTransportP2pSetup(ring graph, connIndex 0) sync, peers
/// at distance 1 at transport.cc:193 (step 7)".
pub fn message_name(nc: &NcclCase, n: u32, rank: u32, peer: u32, origin: &MsgOrigin, sent: bool) -> String {
    let oracle = Oracle::new(&nc.workload.programs(nc.variant, n));
    match origin_step(&oracle, rank, peer, origin, sent) {
        Some(step) => step_words(&oracle, rank, step),
        None => format!("message #{} with intended tag {:#x}", origin_nth(origin), origin.step),
    }
}

/// An NCCL event in the trace's words.
pub fn event_line(event: &Event, kconn: Option<u64>) -> String {
    let on = |local| ConnRef { local, kconn };
    match event {
        Event::Started { step, call } => format!("step {step}: {call}"),
        Event::Sent { conn, step, to, tag, size, .. } => {
            format!("step {step} sent {size} bytes to rank {to}, tag {tag:#x}, on {}", on(*conn))
        }
        Event::Taken { conn, step, from, tag, size, expected, .. } => format!(
            "step {step} took {size} bytes ({expected} expected) from rank {from}, tag {tag:#x}, on {}",
            on(*conn)
        ),
        Event::Queued { conn, from, tag, waiting_for: (peer, want), list_len } => {
            let peer = peer.map_or("any rank".to_string(), |p| format!("rank {p}"));
            format!(
                "unexpected: rank {from} tag {tag:#x} on {} queued while waiting for {peer} tag {want:#x} ({list_len} held)",
                on(*conn)
            )
        }
        Event::Discarded { conn, from, why } => format!("discarded {} from {from}: {why}", on(*conn)),
        Event::CheckedIn { rank, count, nranks } => format!("check-in of rank {rank} ({count} of {nranks})"),
        Event::SuccessorSent { to, successor } => format!("sent rank {to} the address of rank {successor}"),
    }
}

/// A step's (or the root's) end in the trace's words.
pub fn completion_line(c: &Completion) -> String {
    let what = c.call.map_or("root".to_string(), |call| format!("step {} {call}", c.step));
    match &c.result {
        Ok(bytes) if c.call.is_none() => format!("{what} done"),
        Ok(bytes) => format!("{what} done ({} bytes)", bytes.len()),
        Err(e) => format!("{what} failed: {e}"),
    }
}

/// NCCL's judge on the seam: the crate's non-overtaking oracle for every take, then the end
/// checks every protocol shares. A receive that took another message is a corruption when its
/// rank finished with it (its buffer holds another call's bytes, or a 4-byte flag and stale
/// bytes after it), a mismatch before the error or hang that stopped its rank, and benign when
/// both are sync or barrier flags, whose bytes NCCL never reads.
#[derive(Debug)]
pub struct Judge {
    inner: bootsim_nccl::seam::Judge,
}

impl Judge {
    /// A judge of these programs.
    pub fn new(programs: &[Vec<Planned>]) -> Judge {
        Judge { inner: bootsim_nccl::seam::Judge::new(programs) }
    }
}

/// A program step in findings: "ncclTransportP2pSetup(...) sync, peers at distance 1 at
/// transport.cc:204 (step 9)".
fn step_ref(oracle: &Oracle, rank: u32, step: usize) -> OpRef {
    OpRef::Call { call: oracle.planned(rank, step).map(|p| p.call.to_string()), step }
}

/// A program step in words (see [`step_ref`]).
fn step_words(oracle: &Oracle, rank: u32, step: usize) -> String {
    step_ref(oracle, rank, step).to_string()
}

/// A mismatch as a finding, in NCCL's words: benign between flags; a corruption when the
/// receiving rank went on as if nothing happened (`rank_failed` false: it finished its
/// bootstrap with another call's bytes); otherwise a mismatch on the way to the error or hang
/// that stopped that rank (NCCL aborts init, so the wrong bytes are never used).
pub fn mismatch_finding(oracle: &Oracle, m: &Mismatch, rank_failed: bool) -> Finding {
    let taken_for = step_ref(oracle, m.rank, m.step);
    let source = Provenance::Sent { from: m.got.0, step: step_ref(oracle, m.got.0, m.got.1) };
    let benign = m.flags_only(oracle);
    if benign || rank_failed {
        return Finding::Mismatch { rank: m.rank, taken_for, source, benign };
    }
    Finding::Corruption { rank: m.rank, op: taken_for, peer: m.got.0, source, detail: None }
}

impl seam::Judge for Judge {
    type Report = (Verdict, Vec<Finding>);

    fn taken(&mut self, taken: &TakenMsg, source: Option<&SentMsg>) {
        self.inner.taken(taken, source);
    }

    fn completed(&mut self, rank: u32, index: usize, result: &Result<Vec<u8>, bootsim_core::RecordedError>) {
        self.inner.completed(rank, index, result);
    }

    fn init_ended(&mut self, rank: u32) {
        self.inner.init_ended(rank);
    }

    fn finish(&mut self, record: &RunRecord) -> (Verdict, Vec<Finding>) {
        let oracle = self.inner.oracle().clone();
        let failed = |r: u32| record.ranks.iter().find(|x| x.rank == r).is_some_and(|x| x.failed());
        let mismatches =
            self.inner.finish(record).iter().map(|m| mismatch_finding(&oracle, m, failed(m.rank))).collect();
        // Step 0 is bootstrapInit (the record's init); the rest are its operations.
        let ops = |r: u32| oracle.programs().get(r as usize).map_or(0, |p| p.len().saturating_sub(1));
        let errors = |r: u32| {
            let rank = record.ranks.iter().find(|x| x.rank == r);
            let errors = rank.into_iter().flat_map(|x| x.ops.iter().filter_map(|o| o.as_ref().err()));
            errors.map(|e| Finding::Error { rank: Some(r), error: e.clone() }).collect()
        };
        conclude(mismatches, record, ops, errors)
    }
}
