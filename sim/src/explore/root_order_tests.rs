//! Does the root's check-in order matter? The explorer branches on it where the protocol's root
//! listener says so (NCCL from 2.23, whose root answers early); here every NCCL variant is
//! explored both ways ([`RootOrder::Fifo`] and [`RootOrder::Explored`]) and the final states are
//! compared, and the `accept=root:` schedules of root-branching counterexamples replay.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::search::{replay_base, search};
use super::world::{Explored, RootOrder};
use super::*;
use crate::case::Case;
use crate::oracle::Verdict;
use crate::protocol::Nccl;
use crate::run::run_case;

/// The shapes of `sim/tests/nccl_explore.rs`.
const SHAPES: [&str; 5] = [
    "workload=nccl-init gpus_per_node=2 channels=1",
    "workload=nccl-init gpus_per_node=2 channels=1 collnet=on",
    "workload=nccl-init gpus_per_node=8 channels=1",
    "workload=nccl-p2p channels=1",
    "workload=nccl-p2p channels=1 distances=1,1",
];

fn case(variant: &str, shape: &str, n: u32) -> Case {
    Case::parse(&format!("variant={variant} {shape} ranks={n}")).unwrap()
}

fn world(case: &Case, order: RootOrder) -> World<Nccl> {
    let nc = case.nccl().expect("an NCCL case");
    World::of_ordering(Nccl, nc.variant, nc.workload.clone(), case, Faults::default(), order)
}

/// Every state reachable from `start` (breadth-first, merged by fingerprint, no sleep sets):
/// how many, and every final state's fingerprint with its verdict.
fn reachable<P: Explored>(start: World<P>) -> (usize, BTreeMap<u128, Verdict>) {
    let mut seen = BTreeSet::from([start.fingerprint()]);
    let mut finals = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(w) = queue.pop_front() {
        if w.choices().is_empty() {
            finals.insert(w.fingerprint(), w.judge().0);
            continue;
        }
        for &c in w.choices() {
            let next = w.step(c);
            if seen.insert(next.fingerprint()) {
                queue.push_back(next);
            }
        }
    }
    (seen.len(), finals)
}

/// The proof that NCCL's check-in order changes nothing the judge or a rank sees, for every
/// variant and shape at n = 2 and 3: with the root's accepts explored in every order, exactly
/// the same final states are reached (each judged the same) as with the root FIFO, and the only
/// states added are those while check-ins are still due (2.30's root answers a rank early whose successor checked in, so the
/// ranks answered while others have not checked in differ by order; up to 2.22 nobody is
/// answered before everyone checked in). Why: no rank dials a peer listener before its init's
/// ring allgather is over, which needs every rank's ring up, so every check-in precedes every
/// peer accept; each answer's bytes (the successor's address) do not depend on the order; and
/// a root that is done forgets what it kept (`Root::finish`).
#[test]
fn the_roots_check_in_order_changes_no_final_state_of_any_nccl_variant() {
    let mut lines = Vec::new();
    for v in bootsim_nccl::variant::NAMES {
        for n in 2..=3u32 {
            for shape in SHAPES {
                let c = case(v, shape, n);
                let (fifo_states, fifo) = reachable(world(&c, RootOrder::Fifo));
                let (any_states, any) = reachable(world(&c, RootOrder::Explored));
                assert_eq!(fifo, any, "{v} n={n} {shape}: the same final states, judged the same");
                // The states added are exactly the prefixes of the n! check-in orders (the root
                // waiting with k of the n in): no other choice comes between two check-ins, and
                // every order reaches one state once the last is in.
                let prefixes: usize =
                    (0..n as usize).map(|k| (n as usize - k + 1..=n as usize).product::<usize>()).sum();
                assert_eq!(any_states, fifo_states + prefixes, "{v} n={n} {shape}: only the check-in orders' prefixes");
                lines.push(format!("{v} n={n} {shape}: {fifo_states} -> {any_states} states, {} final", fifo.len()));
            }
        }
    }
    println!("{}", lines.join("\n"));
}

/// The explorer branches on the root only where the protocol says its order matters: NCCL 2.30's
/// search has one more choice per rank along every schedule (its check-in), 2.21's none; NVSHMEM's
/// root stays FIFO.
#[test]
fn only_2_30s_root_is_explored_by_default() {
    let depth = |s: &str, order| {
        let c = Case::parse(s).unwrap();
        let ex = match c.nccl() {
            Some(_) => search(&replay_base(&c), world(&c, order), Bounds { stop_at: None, ..Bounds::default() }),
            None => explore(&c, Faults::default(), Bounds { stop_at: None, ..Bounds::default() }),
        };
        assert!(ex.incomplete.is_none(), "{s}");
        ex.depth
    };
    let p2p = |v: &str| format!("variant={v} workload=nccl-p2p channels=1 ranks=3");
    let (v230, v221) = (p2p("nccl-2.30"), p2p("nccl-2.21"));
    assert_eq!(depth(&v230, RootOrder::AsProtocolSays), depth(&v230, RootOrder::Fifo) + 3);
    assert_eq!(depth(&v221, RootOrder::AsProtocolSays), depth(&v221, RootOrder::Fifo));
    assert_eq!(depth(&v221, RootOrder::Explored), depth(&v221, RootOrder::Fifo) + 3);
    let nvshmem = Case::parse("variant=nvshmem-3.7 workload=deepep ranks=3").unwrap();
    let first = World::new(&nvshmem, Faults::default());
    assert!(first.choices().iter().all(|c| !matches!(c, Choice::CheckIn { .. })), "{:?}", first.choices());
}

/// A counterexample found with the root's accepts explored names them (`accept=root:...`) and
/// replays on the fast engine to the same verdict; a root order given by hand is the one the
/// fast engine's root takes.
#[test]
fn root_accepts_are_scheduled_by_accept_root_and_replay() {
    let c = case("nccl-2.19", SHAPES[0], 2);
    let ex = search(&replay_base(&c), world(&c, RootOrder::Explored), Bounds::default());
    let cx = ex.counterexample().expect("2.19 breaks whatever the root's order");
    let line = cx.case.to_string();
    assert!(line.contains("accept=root:0.0,1.0/") || line.contains("accept=root:1.0,0.0/"), "{line}");
    let again = Case::parse(&line).unwrap();
    assert_eq!(again, cx.case);
    assert_eq!(run_case(&again, false).verdict, cx.verdict, "{line}");
    // The fast engine's root takes the check-ins in the order named, and 2.30's answers follow
    // it: rank 1 as soon as it checked in (its successor, rank 2, was in), then rank 2 and rank 0
    // once rank 0 checked in.
    let reversed = "variant=nccl-2.30 workload=nccl-p2p channels=1 ranks=3 accept=root:2.0,1.0,0.0";
    let report = run_case(&Case::parse(reversed).unwrap(), true);
    assert_eq!(report.verdict, Verdict::Pass);
    let lines = report.trace.expect("traced").lines;
    let took: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.split_once("check-in of rank ").map(|(_, r)| &r[..1]))
        .chain(lines.iter().filter_map(|l| l.split_once("sent rank ").map(|(_, r)| &r[..1])))
        .collect();
    assert_eq!(took, ["2", "1", "0", "1", "2", "0"], "{lines:#?}");
}
