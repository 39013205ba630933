//! Every accept order of NCCL's bootstrap through sim's one explorer (`explore::explore`, the
//! world generic over the seam, judged by NCCL's judge): nccl-2.21 and nccl-2.30 proved for
//! n = 2, 3, 4 on five workload shapes; nccl-2.19's #1176 and nccl-2.8's silent wrong-message
//! receive found, each counterexample an `accept=` case the fast engine replays to the same
//! verdict; the reductions keep every verdict; the hazard map's cells of back-to-back
//! operations; the root's check-in order, explored for 2.30 (whose root answers early) and
//! shown to change no final state of any variant. Figures (states, time):
//! `cargo test -p bootsim-sim --test nccl_explore -- --nocapture`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use bootsim_sim::explore::hazard::explore_cell;
use bootsim_sim::explore::search::with_schedule;
use bootsim_sim::explore::{explore, Bounds, Choice, Exploration, Faults, RootOrder, World};
use bootsim_sim::protocol::Nccl;
use bootsim_sim::{run_case, Case, Verdict};

/// Every workload shape explored at `n` as case-string keys: one channel; 2 ranks per node (so
/// nodes have intra-node collectives and inter-node trees) and one node of all ranks; CollNet
/// off and on; point-to-point to every peer, and distance 1 twice.
const SHAPES: [&str; 5] = [
    "workload=nccl-init gpus_per_node=2 channels=1",
    "workload=nccl-init gpus_per_node=2 channels=1 collnet=on",
    "workload=nccl-init gpus_per_node=8 channels=1",
    "workload=nccl-p2p channels=1",
    "workload=nccl-p2p channels=1 distances=1,1",
];

/// Explores `variant` on `shape` at `n` within `bounds` and prints the figures.
fn run(variant: &str, shape: &str, n: u32, bounds: Bounds) -> Exploration {
    let case = Case::parse(&format!("variant={variant} {shape} ranks={n}")).unwrap();
    let t = Instant::now();
    let ex = explore(&case, Faults::default(), bounds);
    println!(
        "{variant} n={n} {shape}{}: {} states, {} final, depth {}, {:?}, {:.2?}",
        if bounds.reduce { "" } else { " (no reduction)" },
        ex.states,
        ex.finals,
        ex.depth,
        ex.worst(),
        t.elapsed()
    );
    ex
}

/// Each counterexample is an `accept=` case the fast engine runs to the same verdict.
fn replays(ex: &Exploration) {
    for c in ex.examples.values() {
        assert!(!c.case.schedule().is_empty(), "{}", c.case);
        let again = Case::parse(&c.case.to_string()).unwrap();
        assert_eq!(run_case(&again, false).verdict, c.verdict, "{}", c.case);
    }
}

#[test]
fn nccl_2_21_and_2_30_are_proved_for_every_accept_order_up_to_4_ranks() {
    for v in ["nccl-2.21", "nccl-2.30"] {
        for n in 2..=4 {
            for shape in SHAPES {
                let ex = run(v, shape, n, Bounds::default());
                assert!(ex.proves_pass(), "{v} n={n} {shape}: {:?} {:?}", ex.incomplete, ex.counterexample());
                assert!(ex.finals >= 1 && ex.states > ex.depth, "{v} n={n} {shape}");
            }
        }
    }
}

#[test]
fn nccl_2_19_breaks_as_1176_and_its_counterexample_replays() {
    let ex = run("nccl-2.19", SHAPES[0], 2, Bounds::default());
    let c = ex.counterexample().expect("2.19 breaks");
    let texts: Vec<String> = c.findings.iter().map(ToString::to_string).collect();
    // The connectInfo receive took the same setup's sync (same wire tag), then the sync's 4-byte
    // receive is handed the connectInfo: #1176's error, at the sync's line.
    assert!(
        texts.iter().any(|t| t.contains("connectInfo exchange") && t.contains("took") && t.contains("sync")),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(
            |t| t.contains("transport.cc:204") && t.contains("Message truncated : received 256 bytes instead of 4")
        ),
        "{texts:?}"
    );
    replays(&ex);
}

/// 2.19 breaks in every shape, even a single setup (its sync and connectInfo share a tag); 2.8
/// (no sync) in every shape with two setups between a pair, all but `nccl-p2p` to every peer at
/// n = 2, where it is proved. Each counterexample (a corruption, or a mismatch on the way to an
/// error or hang) replays.
#[test]
fn nccl_2_19_and_2_8_break_on_every_shape_and_size() {
    for v in ["nccl-2.19", "nccl-2.8"] {
        for n in 2..=4 {
            for shape in SHAPES {
                let ex = run(v, shape, n, Bounds::default());
                if v == "nccl-2.8" && shape == SHAPES[1] && n == 4 {
                    continue; // 197,646 states, over a minute: `the_slowest_2_8_counterexample`
                }
                if v == "nccl-2.8" && shape == SHAPES[3] && n == 2 {
                    assert!(ex.proves_pass(), "{v}: one setup only, nothing to overtake");
                    continue;
                }
                let c = ex.counterexample().unwrap_or_else(|| panic!("{v} n={n} {shape}: no counterexample"));
                assert!(!c.verdict.is_ok(), "{v} n={n} {shape}: {:?}", c.findings);
                replays(&ex);
            }
        }
    }
}

/// 2.8 with CollNet at n = 4: its first violation is 30 choices deep, 197,646 states of a
/// breadth-first search (over a minute in a debug build, too long for `make test`):
/// `cargo test -p bootsim-sim --test nccl_explore -- --ignored --nocapture`.
#[test]
#[ignore = "over a minute: 2.8's deepest first counterexample, run by hand for the note's figures"]
fn the_slowest_2_8_counterexample() {
    let ex = run("nccl-2.8", SHAPES[1], 4, Bounds::default());
    assert!(ex.counterexample().is_some_and(|c| !c.verdict.is_ok()));
    replays(&ex);
}

#[test]
fn nccl_2_8_hands_a_receive_another_setups_message_silently() {
    let ex = run("nccl-2.8", SHAPES[0], 2, Bounds::default());
    let c = ex.counterexample().expect("2.8 breaks");
    // Matching by peer alone: a receive finished with another setup's message of the same size.
    assert_eq!(c.verdict, Verdict::Corruption, "{:?}", c.findings);
    replays(&ex);
}

/// The reductions (sleep sets, wanted first) keep every verdict: with every order of every
/// accept taken, every variant and shape at n = 2 and 3 ends the same: 2.21's and 2.30's
/// searches reach the same worst verdict (pass, or benign), 2.8's and 2.19's each find a
/// violation (they stop at the first).
#[test]
fn the_reductions_lose_no_verdict_up_to_3_ranks() {
    for v in ["nccl-2.8", "nccl-2.19", "nccl-2.21", "nccl-2.30"] {
        let fixed = matches!(v, "nccl-2.21" | "nccl-2.30");
        for n in 2..=3 {
            for shape in SHAPES {
                let bounds = if fixed { Bounds { stop_at: None, ..Bounds::default() } } else { Bounds::default() };
                let full = run(v, shape, n, Bounds { reduce: false, ..bounds });
                let reduced = run(v, shape, n, bounds);
                if fixed {
                    assert!(full.incomplete.is_none() && reduced.incomplete.is_none(), "{v} n={n} {shape}");
                    assert_eq!(full.worst(), reduced.worst(), "{v} n={n} {shape}");
                } else {
                    assert_eq!(full.worst().is_ok(), reduced.worst().is_ok(), "{v} n={n} {shape}");
                }
            }
        }
    }
}

#[test]
fn a_search_cut_short_says_so() {
    let ex = run(
        "nccl-2.21",
        "workload=nccl-init gpus_per_node=2 channels=1 collnet=on",
        4,
        Bounds { max_states: 50, ..Bounds::default() },
    );
    assert!(ex.incomplete.as_deref().is_some_and(|w| w.contains("--max-states 50")), "{:?}", ex.incomplete);
    assert!(!ex.proves_pass() && ex.counterexample().is_none());
}

/// The hazard map's cell `first,second` of `variant` at n: its worst verdict.
fn cell(variant: &str, pair: &str, n: u32) -> Verdict {
    let case =
        Case::parse(&format!("variant={variant} workload=nccl-pair pair={pair} ranks={n} adversary=fifo")).unwrap();
    let c = explore_cell(&case, pair, Faults::default(), Bounds::default(), 0);
    assert!(c.settled(), "{variant} n={n} {pair}: incomplete");
    if let Some(x) = c.example() {
        let again = Case::parse(&x.case.to_string()).unwrap();
        assert_eq!(run_case(&again, false).verdict, x.verdict, "{}", x.case);
    }
    c.worst()
}

#[test]
fn the_hazard_map_of_back_to_back_operations() {
    let ops = bootsim_nccl::OPS.map(|o| o.name());
    for v in ["nccl-2.21", "nccl-2.30"] {
        for first in ops {
            for second in ops {
                let got = cell(v, &format!("{first},{second}"), 2);
                let want = match (first, second) {
                    // Two barriers with one tag swap their flags: nobody reads them.
                    ("barrier", "barrier") => Verdict::Benign,
                    // 2.21's intra-node ring uses tag 0, node 0's barrier too: the barrier's
                    // receive can take the ring's connection (not an order ncclCommInitRank makes).
                    ("barrier", "intra-allgather") if v == "nccl-2.21" => Verdict::Hang,
                    _ => Verdict::Pass,
                };
                assert_eq!(got, want, "{v} {first}>{second}");
            }
        }
    }
    // 2.19: every pair with a setup first reuses (peer, tag) between the connectInfo and its sync.
    for second in ops {
        let got = cell("nccl-2.19", &format!("ring-setup,{second}"), 2);
        assert!(!got.is_ok(), "ring-setup>{second}: {got}");
    }
}

/// `case`'s explorer world with the root's check-ins taken as `order` says.
fn world(case: &Case, order: RootOrder) -> World<Nccl> {
    let nc = case.nccl().expect("an NCCL case");
    World::of_ordering(Nccl, nc.variant, nc.workload.clone(), case, Faults::default(), order)
}

/// Everything reachable from a world.
struct Reached {
    /// Distinct states.
    states: usize,
    /// Every final state's fingerprint, with its verdict.
    finals: BTreeMap<u128, Verdict>,
    /// The path to the first (so a shortest) final state judged worse than pass, and its verdict.
    failing: Option<(Vec<Choice>, Verdict)>,
}

/// Everything reachable from `start` (breadth-first, merged by fingerprint, no sleep sets).
fn reachable(start: World<Nccl>) -> Reached {
    let mut seen = BTreeSet::from([start.fingerprint()]);
    let (mut finals, mut failing) = (BTreeMap::new(), None);
    let mut queue = VecDeque::from([start]);
    while let Some(w) = queue.pop_front() {
        if w.choices().is_empty() {
            let verdict = w.judge().0;
            if verdict != Verdict::Pass && failing.is_none() {
                failing = Some((w.path(), verdict));
            }
            finals.insert(w.fingerprint(), verdict);
            continue;
        }
        for &c in w.choices() {
            let next = w.step(c);
            if seen.insert(next.fingerprint()) {
                queue.push_back(next);
            }
        }
    }
    Reached { states: seen.len(), finals, failing }
}

/// The proof that NCCL's check-in order changes nothing the judge or a rank sees, for every
/// variant and shape at n = 2 and 3: with the root's accepts explored in every order, exactly
/// the same final states are reached (each judged the same) as with the root FIFO, and the only
/// states added are those while check-ins are still due (2.30's root answers a rank early whose
/// successor checked in, so which ranks are answered while others have not checked in differs
/// by order; up to 2.22 nobody is answered before everyone checked in). Why: no rank dials a
/// peer listener before its init's ring allgather is over, which needs every rank's ring up, so
/// every check-in precedes every peer accept; each answer's bytes (the successor's address) do
/// not depend on the order; and a root that is done forgets what it kept (`Root::finish`).
#[test]
fn the_roots_check_in_order_changes_no_final_state_of_any_nccl_variant() {
    for v in bootsim_nccl::variant::NAMES {
        for n in 2..=3u32 {
            for shape in SHAPES {
                let c = Case::parse(&format!("variant={v} {shape} ranks={n}")).unwrap();
                let fifo = reachable(world(&c, RootOrder::Fifo));
                let any = reachable(world(&c, RootOrder::Explored));
                assert_eq!(fifo.finals, any.finals, "{v} n={n} {shape}: the same final states, judged the same");
                // The states added are exactly the prefixes of the n! check-in orders (the root
                // waiting with k of the n in): no other choice comes between two check-ins, and
                // every order reaches one state once the last is in.
                let n = n as usize;
                let prefixes: usize = (0..n).map(|k| (n - k + 1..=n).product::<usize>()).sum();
                assert_eq!(any.states, fifo.states + prefixes, "{v} n={n} {shape}: only the orders' prefixes");
                println!("{v} n={n} {shape}: {} -> {} states, {} final", fifo.states, any.states, fifo.finals.len());
            }
        }
    }
}

/// The choices along one complete schedule of `case`'s world (every schedule of a variant that
/// passes takes every connection once, so all have this length).
fn schedule_length(case: &Case, order: RootOrder) -> usize {
    let mut w = world(case, order);
    while let Some(&c) = w.choices().first() {
        w = w.step(c);
    }
    w.path().len()
}

/// The explorer branches on the root only where the protocol says its order matters: 2.30's
/// schedules take one more choice per rank (its check-in) than with the root FIFO, 2.21's none;
/// NVSHMEM's root stays FIFO.
#[test]
fn only_2_30s_root_is_explored_by_default() {
    let p2p = |v: &str| Case::parse(&format!("variant={v} workload=nccl-p2p channels=1 ranks=3")).unwrap();
    let (v230, v221) = (p2p("nccl-2.30"), p2p("nccl-2.21"));
    assert_eq!(schedule_length(&v230, RootOrder::AsProtocolSays), schedule_length(&v230, RootOrder::Fifo) + 3);
    assert_eq!(schedule_length(&v221, RootOrder::AsProtocolSays), schedule_length(&v221, RootOrder::Fifo));
    assert_eq!(schedule_length(&v221, RootOrder::Explored), schedule_length(&v221, RootOrder::Fifo) + 3);
    assert!(matches!(world(&v230, RootOrder::AsProtocolSays).choices()[0], Choice::CheckIn { .. }));
    let nvshmem = Case::parse("variant=nvshmem-3.7 workload=deepep ranks=3").unwrap();
    let first = World::new(&nvshmem, Faults::default());
    assert!(!first.choices().is_empty() && first.choices().iter().all(|c| matches!(c, Choice::Accept { .. })));
}

/// A counterexample found with the root's accepts explored names them (`accept=root:...`) and
/// replays on the fast engine to the same verdict; a root order given by hand is the one the
/// fast engine's root takes.
#[test]
fn root_accepts_are_scheduled_by_accept_root_and_replay() {
    let c = Case::parse(&format!("variant=nccl-2.19 {} ranks=2", SHAPES[0])).unwrap();
    let (path, verdict) =
        reachable(world(&c, RootOrder::Explored)).failing.expect("2.19 breaks whatever the root's order");
    let cx = with_schedule(&c.on_fast_engine_unscheduled(), &path).unwrap();
    let line = cx.to_string();
    assert!(line.contains("accept=root:0.0,1.0/") || line.contains("accept=root:1.0,0.0/"), "{line}");
    let again = Case::parse(&line).unwrap();
    assert_eq!(again, cx);
    assert_eq!(run_case(&again, false).verdict, verdict, "{line}");
    // The fast engine's root takes the check-ins in the order named, and 2.30's answers follow
    // it: rank 1 as soon as it checked in (its successor, rank 2, was in), then rank 2 and rank 0
    // once rank 0 checked in.
    let reversed = "variant=nccl-2.30 workload=nccl-p2p channels=1 ranks=3 accept=root:2.0,1.0,0.0";
    let report = run_case(&Case::parse(reversed).unwrap(), true);
    assert_eq!(report.verdict, Verdict::Pass);
    let lines = report.trace.expect("traced").lines;
    let took = lines.iter().filter_map(|l| l.split_once("check-in of rank ").map(|(_, r)| &r[..1]));
    let answered = lines.iter().filter_map(|l| l.split_once("sent rank ").map(|(_, r)| &r[..1]));
    assert_eq!(took.chain(answered).collect::<Vec<_>>(), ["2", "1", "0", "1", "2", "0"], "{lines:#?}");
}
