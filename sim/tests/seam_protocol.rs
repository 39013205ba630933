//! The fast engine runs any protocol on the seam: the toy check-in protocol
//! (`bootsim_core::seam::checkin`), not NVSHMEM's, through the kernel model under `rss`, traced
//! in the protocol's own words and judged by the protocol's own judge.

use bootsim_core::record::RootEnd;
use bootsim_core::seam::checkin::{CheckIn, Done, Said, ToyNode};
use bootsim_core::seam::{Judge, Nodes, Protocol, Setup};
use bootsim_core::{RunRecord, SentMsg, TakenMsg};
use bootsim_sim::engine::fast;
use bootsim_sim::explore::{Faults, World};
use bootsim_sim::{Case, Finding, Verdict};

/// The toy bound to the engines: its nodes and words, and a judge in the simulator's findings
/// (every rank and the root must end). `short`: the root waits for one rank more than there is.
#[derive(Clone, Copy, Default)]
struct SimCheckIn {
    short: bool,
}

struct Ends;

impl Judge for Ends {
    type Report = (Verdict, Vec<Finding>);
    fn taken(&mut self, _: &TakenMsg, _: Option<&SentMsg>) {}
    fn completed(&mut self, _: u32, _: usize, _: &Result<Vec<u8>, bootsim_core::RecordedError>) {}
    fn init_ended(&mut self, _: u32) {}
    fn finish(&mut self, record: &RunRecord) -> (Verdict, Vec<Finding>) {
        let ended = record.ranks.iter().filter(|r| r.finished_at.is_some()).count();
        let mut findings = Vec::new();
        if ended != record.ranks.len() || record.root != RootEnd::Done {
            let error = format!("{ended} of {} ranks ended; root {:?}", record.ranks.len(), record.root);
            findings.push(Finding::Error { rank: None, error: error.into() });
        }
        (if findings.is_empty() { Verdict::Pass } else { Verdict::Error }, findings)
    }
}

impl Protocol for SimCheckIn {
    type Node = ToyNode;
    type Variant = ();
    type Workload = ();
    type Judge = Ends;
    fn name(&self) -> &'static str {
        CheckIn.name()
    }
    fn nodes(&self, setup: &Setup<'_, (), ()>) -> Nodes<ToyNode> {
        let short = u32::from(self.short);
        let mut nodes = CheckIn.nodes(&Setup { n: setup.n + short, ..*setup });
        nodes.ranks.truncate(setup.n as usize);
        nodes
    }
    fn judge(&self, _: &Setup<'_, (), ()>) -> Ends {
        Ends
    }
    fn event_words(&self, e: &Said, kconn: Option<u64>) -> String {
        CheckIn.event_words(e, kconn)
    }
    fn completion_words(&self, c: &Done) -> String {
        CheckIn.completion_words(c)
    }
}

fn case(seed: u64) -> Case {
    Case::parse(&format!("engine=fast variant=nvshmem-3.7 workload=nvshmem-init ranks=5 adversary=rss seed={seed}"))
        .expect("a case")
}

#[test]
fn the_fast_engine_runs_a_protocol_that_is_not_nvshmem_traced_and_judged_as_it_goes() {
    let case = case(3);
    let mut traced = fast::run(&SimCheckIn::default(), &(), &(), &case, true);
    let lines = &traced.trace.as_ref().expect("traced").lines;
    let said = lines.iter().filter(|l| l.contains("said hello")).count();
    assert_eq!(said, 5, "the root read each rank's hello, in the toy's words: {lines:#?}");
    assert!(lines.iter().any(|l| l.contains("root done: Ok([0, 1, 2, 3, 4])")), "{lines:#?}");
    assert_eq!(traced.record.root, RootEnd::Done);
    assert!(traced.record.ranks.iter().all(|r| r.finished_at.is_some()));
    let setup =
        Setup { variant: &(), workload: &(), seed: case.seed(), n: case.ranks(), root_ip: [10, 0, 0, 1].into() };
    let (verdict, findings) = traced.verdict_by(SimCheckIn::default().judge(&setup));
    assert_eq!((verdict, findings.len()), (Verdict::Pass, 0), "{findings:?}");

    // Untraced, the protocol's own judge is fed as the run goes and gives the verdict.
    let mut streamed = fast::run(&SimCheckIn::default(), &(), &(), &case, false);
    assert_eq!(streamed.verdict_by(SimCheckIn::default().judge(&setup)), (Verdict::Pass, Vec::new()));
    assert_eq!(streamed.end, traced.end, "tracing changes nothing of the run");
}

#[test]
fn a_rank_that_never_comes_is_the_protocols_judges_finding() {
    // One rank short of the root's count: the root waits until the deadline.
    let case = Case::parse(
        "engine=fast variant=nvshmem-3.7 workload=nvshmem-init ranks=3 adversary=rss seed=1 deadline_ms=50",
    )
    .expect("a case");
    let short = SimCheckIn { short: true };
    let setup =
        Setup { variant: &(), workload: &(), seed: case.seed(), n: case.ranks(), root_ip: [10, 0, 0, 1].into() };
    let mut out = fast::run(&short, &(), &(), &case, false);
    let (verdict, findings) = out.verdict_by(short.judge(&setup));
    assert_eq!(verdict, Verdict::Error, "{findings:?}");
    assert!(findings[0].to_string().contains("3 of 3 ranks ended"), "{findings:?}");
    assert!(
        matches!(out.record.root, RootEnd::Waiting(ref w @ bootsim_core::Awaited::Protocol { .. }) if w.text() == "the others"),
        "{:?}",
        out.record.root
    );
}

#[test]
fn explore_runs_a_protocol_that_is_not_nvshmem() {
    // The toy's only listener is the root's, taken in arrival order: one schedule, no choice.
    let case = case(2);
    let world = World::of(SimCheckIn::default(), (), (), &case, Faults::default());
    assert!(world.choices().is_empty());
    let mut out = world.outcome();
    assert_eq!(out.record.root, RootEnd::Done);
    assert!(out.record.ranks.iter().all(|r| r.finished_at.is_some()), "{:?}", out.record.ranks);
    let setup =
        Setup { variant: &(), workload: &(), seed: case.seed(), n: case.ranks(), root_ip: [10, 0, 0, 1].into() };
    assert_eq!(out.verdict_by(SimCheckIn::default().judge(&setup)), (Verdict::Pass, Vec::new()));
    let again = World::of(SimCheckIn::default(), (), (), &case, Faults::default());
    assert_eq!(world.fingerprint(), again.fingerprint(), "the same world, the same fingerprint");
}

/// The judge names no protocol: no file of `sim/src/oracle/` uses a protocol crate (what it
/// needs of a workload's bytes it asks through `oracle::Payloads`), and explain reaches a
/// protocol's words only through `sim/src/protocol/`.
#[test]
fn the_oracle_names_no_protocol_crate() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/oracle");
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for krate in ["bootsim_nvshmem", "bootsim_nccl"] {
            assert!(!text.contains(krate), "{} uses {krate}", path.display());
        }
        files += 1;
    }
    assert!(files >= 10, "{files} files read");
    let explain = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/explain.rs")).unwrap();
    assert!(!explain.contains("nccl()") && !explain.contains("protocol::nccl"), "explain asks protocol/ for words");
}
