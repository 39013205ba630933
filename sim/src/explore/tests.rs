//! The explorer's proofs and counterexamples, checked against the fast engine and sweeps.

use std::collections::BTreeSet;

use super::*;
use crate::case::Case;
use crate::oracle::Verdict;
use crate::run::run_case;
use crate::sweep::sweep;

fn everything() -> Bounds {
    Bounds { stop_at: None, ..Bounds::default() }
}

fn explored(s: &str, faults: Faults) -> Exploration {
    explore(&Case::parse(s).expect("a valid case"), faults, everything())
}

/// Every example an exploration kept (one per verdict) replays on the fast engine with its verdict.
fn assert_replays(ex: &Exploration) {
    for (verdict, cx) in &ex.examples {
        assert_eq!(Case::parse(&cx.case.to_string()).as_ref(), Ok(&cx.case), "the case string round-trips");
        let fast = run_case(&cx.case, false).verdict;
        assert_eq!(fast, *verdict, "fast engine on '{}'", cx.case);
    }
}

#[test]
fn the_reports_counterexample_is_found_at_n2_and_replays_on_the_fast_engine() {
    let case = Case::parse("variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3").unwrap();
    let ex = explore(&case, Faults::default(), Bounds::default());
    let cx = ex.counterexample().expect("nvshmem-3.4 fails in some accept order");
    assert_eq!(cx.verdict, Verdict::Corruption);
    assert_eq!(cx.depth, 6, "ring, alltoall and barrier accepts at both ranks");
    assert_eq!(cx.case.schedule().accept_value().as_deref(), Some("0:1.0,1.1,1.2/1:0.0,0.2,0.1"));
    let text: Vec<String> = cx.findings.iter().map(|f| f.to_string()).collect();
    assert!(text.iter().any(|f| f.contains("took barrier #2 round 1 from rank 0")), "{text:?}");
    assert!(text.iter().any(|f| f.contains("zero GID: EINVAL")), "{text:?}");
    let fast = run_case(&cx.case, true);
    assert_eq!(fast.verdict, Verdict::Corruption);
    let why = crate::explain(&fast).join("\n");
    assert!(why.contains("the case's accept= order had rank 1 take"), "{why}");
    // The same case without the schedule passes on a FIFO kernel: the schedule is what fails it.
    let fifo = cx.case.to_builder().adversary("fifo").build().unwrap();
    assert_eq!(run_case(&fifo, false).verdict, Verdict::Corruption);
    let plain = fifo.with_schedule(Default::default()).unwrap();
    assert_eq!(run_case(&plain, false).verdict, Verdict::Pass);
}

#[test]
fn seq_and_persistent_take_no_message_for_another_in_any_schedule() {
    // Every workload of issue #16 at n=4; seq on qp-create has a test of its own below (the
    // largest proof, about 69 000 states), so the two run side by side.
    for s in [
        "variant=seq workload=deepep ranks=4",
        "variant=seq workload=churn len=6 ranks=4 seed=5",
        "variant=persistent workload=deepep ranks=4",
        "variant=persistent workload=qp-create k=3 ranks=4",
        "variant=persistent workload=churn len=6 ranks=4 seed=5",
    ] {
        let ex = explored(s, Faults::default());
        assert!(ex.proves_pass(), "{s}: {:?} {:?}", ex.verdicts, ex.incomplete);
        assert!(ex.schedules > ex.states as u128, "{s}: the search did merge schedules");
    }
}

#[test]
fn seq_takes_no_qp_handle_for_another_at_four_ranks_in_any_schedule() {
    // About 69 000 states: some 13 CPU-seconds in a debug build, the price of the proof at n=4.
    let s = "variant=seq workload=qp-create k=3 ranks=4";
    let ex = explored(s, Faults::default());
    assert!(ex.proves_pass(), "{s}: {:?} {:?}", ex.verdicts, ex.incomplete);
    assert!(ex.states > 10_000, "{s}: {} states is not the whole space", ex.states);
}

#[test]
fn the_same_workloads_fail_under_nvshmem_3_7_so_the_proofs_can_fail() {
    let ex = explored("variant=nvshmem-3.7 workload=qp-create k=2 ranks=4", Faults::default());
    assert_eq!(ex.incomplete, None);
    assert!(ex.verdicts.contains_key(&Verdict::Corruption), "cross-wired QPs: {:?}", ex.verdicts);
    assert!(ex.verdicts.contains_key(&Verdict::Pass));
    assert!(!ex.proves_pass());
    assert_replays(&ex);
}

#[test]
fn drain_timeouts_break_the_proposed_fix_and_replay_with_drain_fail() {
    let s = "variant=pr97 workload=qp-create k=2 ranks=2";
    assert!(explored(s, Faults::default()).proves_pass(), "a drain that completes keeps order");
    let ex = explored(s, Faults { drain_timeout: true });
    let cx = ex.counterexample().expect("fail-open loses order");
    assert_eq!(cx.verdict, Verdict::Corruption);
    assert!(!cx.case.schedule().drain_fail.is_empty(), "{}", cx.case);
    assert_replays(&ex);
}

#[test]
fn counterexamples_of_every_verdict_replay_on_the_fast_engine() {
    for s in [
        "variant=nvshmem-3.4 workload=deepep ranks=2",
        "variant=nvshmem-3.7 workload=deepep ranks=2",
        "variant=nvshmem-3.4 workload=custom ops=barrier,barrier ranks=2",
        "variant=disjoint workload=qp-create k=2 ranks=4",
    ] {
        let ex = explored(s, Faults::default());
        assert!(!ex.examples.is_empty(), "{s}: something other than pass is reachable");
        assert_replays(&ex);
    }
}

#[test]
fn failures_a_sweep_finds_at_small_n_are_reachable_by_explore() {
    let mut failures = 0;
    for s in [
        "variant=nvshmem-3.4 workload=deepep ranks=2",
        "variant=nvshmem-3.7 workload=deepep ranks=2",
        "variant=nvshmem-3.4 workload=qp-create k=2 ranks=3",
        "variant=nvshmem-3.7 workload=qp-create k=2 ranks=4",
    ] {
        let case = Case::parse(&format!("{s} adversary=rss")).unwrap();
        let seeds: Vec<u64> = (0..24).collect();
        let swept = sweep(&case, &seeds, 1, &|_, _| {}).unwrap();
        let seen: BTreeSet<Verdict> = swept.results.iter().map(|r| r.verdict).filter(|v| !v.is_ok()).collect();
        failures += seen.len();
        let ex = explored(s, Faults::default());
        assert_eq!(ex.incomplete, None, "{s}");
        for v in seen {
            assert!(ex.verdicts.contains_key(&v), "{s}: a sweep found {v}, explore reached only {:?}", ex.verdicts);
        }
    }
    assert!(failures > 0, "the sample has failures to check");
}

#[test]
fn bounds_report_incomplete_never_proved() {
    let case = Case::parse("variant=seq workload=deepep ranks=3").unwrap();
    let few = explore(&case, Faults::default(), Bounds { max_states: 10, ..everything() });
    assert!(few.incomplete.as_deref().is_some_and(|w| w.contains("--max-states 10")), "{:?}", few.incomplete);
    assert!(!few.proves_pass() && !few.schedules_exact);
    let shallow = explore(&case, Faults::default(), Bounds { max_depth: 3, ..everything() });
    assert!(shallow.incomplete.as_deref().is_some_and(|w| w.contains("--max-depth 3")));
    assert!(!shallow.proves_pass());
    let full = explore(&case, Faults::default(), everything());
    assert!(full.proves_pass() && full.schedules_exact);
    assert!(full.states > few.states);
}

#[test]
fn the_hazard_map_names_the_reports_pair() {
    let pairs = hazard::pairs();
    let (name, ops) = &pairs[0];
    assert_eq!(*name, "alltoall>barrier");
    let cell = |variant: &str, ranks: u32, max_states: usize, walks: u32| {
        let bounds = Bounds { max_states, ..everything() };
        hazard::cell(variant, name, ops, ranks, Faults::default(), bounds, walks).unwrap()
    };
    let c = cell("variant=nvshmem-3.4", 2, 100_000, 0);
    assert_eq!(c.worst(), Verdict::Corruption);
    assert!(c.settled() && c.walked.is_none());
    assert!(cell("variant=nvshmem-3.8", 2, 100_000, 0).exploration.proves_pass());
    // A bound far too small for n=4: the search stops at shallow levels, walks go deep.
    let shallow = cell("variant=nvshmem-3.4", 4, 50, 0);
    assert_eq!(shallow.worst(), Verdict::Pass);
    assert!(!shallow.settled(), "a bounded pass is not settled");
    let walked = cell("variant=nvshmem-3.4", 4, 50, 200);
    let cx = walked.example().expect("walks reach the violation the search was too shallow for");
    assert!(!walked.worst().is_ok());
    assert_eq!(run_case(&cx.case, false).verdict, walked.worst(), "'{}'", cx.case);
}

#[test]
fn an_accept_naming_a_connection_never_opened_is_a_hang_not_a_panic() {
    let case = Case::parse("variant=nvshmem-3.4 workload=deepep ranks=2 accept=1:0.5").unwrap();
    let r = run_case(&case, false);
    assert_eq!(r.verdict, Verdict::Hang);
    assert!(r.findings.iter().any(|f| f.to_string().contains("rank 1 waits for init: connecting the ring")));
}

#[test]
fn sleep_sets_reach_the_same_verdicts_and_shortest_counterexamples_with_fewer_transitions() {
    let mut pruned = 0;
    for s in [
        "variant=nvshmem-3.4 workload=deepep ranks=2",
        "variant=nvshmem-3.4 workload=deepep ranks=3",
        "variant=nvshmem-3.7 workload=qp-create k=2 ranks=3",
        "variant=disjoint workload=qp-create k=2 ranks=3",
        "variant=seq workload=deepep ranks=3",
        "variant=persistent workload=qp-create k=2 ranks=3",
        "variant=nvshmem-3.4 workload=custom ops=barrier,alltoall:24 ranks=4",
        "variant=drain workload=qp-create k=2 ranks=3",
    ] {
        let case = Case::parse(s).unwrap();
        let full = explore(&case, Faults::default(), Bounds { reduce: false, ..everything() });
        let por = explore(&case, Faults::default(), everything());
        assert_eq!(full.incomplete, None, "{s}");
        assert_eq!(por.incomplete, None, "{s}");
        let kinds = |ex: &Exploration| ex.verdicts.keys().copied().collect::<Vec<_>>();
        assert_eq!(kinds(&por), kinds(&full), "{s}: the same verdicts are reachable");
        assert_eq!(por.finals, full.finals, "{s}: sleep sets prune transitions, not final states");
        for (v, cx) in &full.examples {
            assert_eq!(por.examples[v].depth, cx.depth, "{s}: the shortest {v} is as short");
        }
        assert_replays(&por);
        assert!(por.transitions <= full.transitions && por.schedules <= full.schedules, "{s}");
        pruned += full.transitions - por.transitions;
    }
    assert!(pruned > 0, "independent accepts were pruned somewhere");
}

#[test]
fn sleep_sets_find_the_same_drain_fault_counterexample() {
    let case = Case::parse("variant=pr97 workload=qp-create k=2 ranks=2").unwrap();
    let faults = Faults { drain_timeout: true };
    let full = explore(&case, faults, Bounds { reduce: false, ..Bounds::default() });
    let por = explore(&case, faults, Bounds::default());
    let (a, b) = (full.counterexample().unwrap(), por.counterexample().unwrap());
    assert_eq!((a.verdict, a.depth), (b.verdict, b.depth));
    assert_eq!(run_case(&b.case, false).verdict, b.verdict);
}

#[test]
fn walks_reach_real_violations_that_replay_and_none_where_explore_proved_none() {
    let case = Case::parse("variant=nvshmem-3.4 workload=deepep ranks=2").unwrap();
    let cx = walk::walk(&case, Faults::default(), 50).expect("random orders hit the report's bug at n=2");
    assert!(!cx.verdict.is_ok());
    assert_eq!(run_case(&cx.case, false).verdict, cx.verdict, "'{}'", cx.case);
    let proved = Case::parse("variant=seq workload=deepep ranks=3").unwrap();
    assert!(walk::walk(&proved, Faults::default(), 50).is_none());
}

#[test]
fn steps_measured_independent_commute_to_the_same_state() {
    // Along a few schedules, every pair of enabled steps with disjoint footprints must reach the
    // same fingerprint in either order, each staying enabled after the other.
    let mut checked = 0;
    for s in [
        "variant=seq workload=deepep ranks=4",
        "variant=nvshmem-3.7 workload=qp-create k=2 ranks=4",
        "variant=drain workload=qp-create k=2 ranks=4",
        "variant=persistent workload=churn len=6 ranks=4 seed=5",
    ] {
        let case = Case::parse(s).unwrap();
        let mut world = World::new(&case, Faults::default());
        let mut turn = 0usize;
        while !world.choices().is_empty() {
            let steps: Vec<_> = world.choices().iter().map(|&c| (c, world.step_traced(c))).collect();
            for (i, (a, (wa, fa))) in steps.iter().enumerate() {
                for (b, (wb, fb)) in &steps[i + 1..] {
                    if !fa.independent(fb) {
                        continue;
                    }
                    assert!(wa.choices().contains(b) && wb.choices().contains(a), "{s}: {a:?} {b:?} stay enabled");
                    let (ab, fb_after) = wa.step_traced(*b);
                    assert_eq!(&fb_after, fb, "{s}: {b:?}'s footprint is the same after {a:?}");
                    assert_eq!(ab.fingerprint(), wb.step(*a).fingerprint(), "{s}: {a:?} and {b:?} commute");
                    checked += 1;
                }
            }
            turn += 1;
            world = steps[turn % steps.len()].1 .0.clone();
        }
    }
    assert!(checked > 100, "many steps were independent ({checked})");
}
