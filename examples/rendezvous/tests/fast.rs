//! The rendezvous protocol on bootsim's fast engine under the kernel adversaries: a proptest
//! sweep over seeds, adversaries and world sizes finds the reused tag's corruption, its failing
//! case replays to the same verdict and trace, and the fixed variant passes the same sweep.

use std::cell::Cell;

use bootsim_example_rendezvous::{Rendezvous, Variant, Workload};
use bootsim_sim::harness::{replay_line, run, shrink, sweep, world_of};
use bootsim_sim::shrink::ShrinkError;
use bootsim_sim::{Case, Verdict};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// The adversary profiles the sweep draws from (the kernel model's, `fifo` included).
const ADVERSARIES: [&str; 5] = ["fifo", "rss", "lossy", "overflow", "swarm"];

/// A world: (seed, adversary, ranks).
type World = (u64, &'static str, u32);

/// The worlds a sweep draws.
fn worlds() -> impl Strategy<Value = World> {
    (any::<u64>(), proptest::sample::select(&ADVERSARIES[..]), 2u32..=4)
}

fn case((seed, adversary, ranks): World) -> Case {
    Case::parse(&format!("engine=fast ranks={ranks} adversary={adversary} seed={seed}")).expect("a valid case")
}

/// A runner whose draws are the same on every machine and every run (no persisted failures).
fn runner(cases: u32) -> TestRunner {
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]))
}

/// Runs `variant` on each world the runner draws; fails the property on any bad verdict.
/// Also returns how many worlds ran until the first failure (shrinking runs more after it).
fn sweep_variant(variant: Variant, cases: u32) -> (Result<(), TestError<World>>, Option<u32>) {
    let (ran, first) = (Cell::new(0), Cell::new(None));
    let result = runner(cases).run(&worlds(), |w| {
        ran.set(ran.get() + 1);
        let c = case(w);
        let r = run(&Rendezvous, &variant, &Workload::TWO_ROUNDS, &c, false);
        if r.verdict.is_ok() {
            return Ok(());
        }
        first.set(first.get().or(Some(ran.get())));
        let finding = r.findings.iter().find(|f| f.verdict() == r.verdict).expect("a finding of its verdict");
        Err(TestCaseError::fail(format!("{finding}")))
    });
    (result, first.get())
}

#[test]
fn a_proptest_sweep_finds_the_reused_tag_and_its_case_replays_identically() {
    let (Err(TestError::Fail(why, world)), Some(first)) = sweep_variant(Variant::ReusedTag, 256) else {
        panic!("256 drawn worlds never caught the reused tag");
    };
    let failing = case(world);
    let line = replay_line("rendezvous", Variant::ReusedTag, "two-rounds", &failing);
    println!("first failure at drawn world {first} of 256; failing case after shrinking: {line}\n  {why}");
    let a = run(&Rendezvous, &Variant::ReusedTag, &Workload::TWO_ROUNDS, &failing, true);
    let b = run(&Rendezvous, &Variant::ReusedTag, &Workload::TWO_ROUNDS, &failing, true);
    let (ta, tb) = (a.trace.expect("traced"), b.trace.expect("traced"));
    assert_eq!((a.verdict, &a.findings), (b.verdict, &b.findings));
    assert_eq!(ta.digest, tb.digest);
    assert_eq!(ta.lines, tb.lines);
    // The traced replay judges the whole record and agrees with the streaming run the sweep judged.
    let streamed = run(&Rendezvous, &Variant::ReusedTag, &Workload::TWO_ROUNDS, &failing, false);
    assert_eq!((streamed.verdict, &streamed.findings), (a.verdict, &a.findings));
    assert_eq!(a.verdict, Verdict::Corruption, "{:?}", a.findings);
    let text: Vec<String> = a.findings.iter().map(ToString::to_string).collect();
    assert!(text.iter().any(|f| f.contains("took exchange #1 step 1 from rank")), "a mismatch: {text:?}");
    assert!(
        text.iter().any(|f| f.starts_with("corruption: ") && f.contains("holds exchange #1 step 1 from rank")),
        "round 1 holds round 2's bytes: {text:?}"
    );
    assert!(ta.lines.iter().any(|l| l.contains("exchange #0 took message from rank")), "the trace shows the take");
}

#[test]
fn the_round_tag_passes_the_same_sweep() {
    let (result, _) = sweep_variant(Variant::RoundTag, 256);
    if let Err(e) = result {
        panic!("the fixed variant failed: {e}");
    }
}

/// The first failing seed of a 4-rank world, shrunk by the facade: two ranks and the one or two
/// forced stalls that matter, a line that replays to the same corruption, the same result
/// every time; the fix has nothing to shrink.
#[test]
fn a_failing_case_shrinks_to_two_ranks_and_the_stalls_that_matter() {
    let (variant, workload) = (Variant::ReusedTag, Workload::TWO_ROUNDS);
    for adversary in ["rss", "lossy", "swarm"] {
        let world = case((0, adversary, 4));
        let first = sweep(&Rendezvous, &variant, &workload, &world, 0..50, 1).unwrap();
        let failing = world.with_seed(first.first_failure().expect("a corruption within 50 seeds").seed).unwrap();
        // The sweep's case, at the failing seed, prints the protocol's line, which replays.
        let swept = first.case.with_seed(failing.seed()).unwrap().to_string();
        assert_eq!(swept, replay_line("rendezvous", variant, workload, &failing));
        let again = run(&Rendezvous, &variant, &workload, &world_of(&swept).expect("the line parses"), false);
        assert_eq!(again.verdict, Verdict::Corruption, "{swept}");
        let s = shrink(&Rendezvous, &variant, &workload, &failing).expect("a failing case shrinks");
        // The shrunk case prints the line that replays it (not NVSHMEM's words), and reads back.
        let line = s.case.to_string();
        assert_eq!(line, replay_line("rendezvous", variant, workload, &s.case));
        assert!(
            line.starts_with("protocol=rendezvous variant=reused-tag workload=two-rounds engine=fast ranks=2 "),
            "{line}"
        );
        assert_eq!(world_of(&line).expect("the line parses"), s.case, "the line reads back as the case");
        assert_eq!(s.case.case_string().expect("a line that reproduces it"), line);
        println!("{adversary}: {} runs, {:?}: {line}", s.runs, s.log);
        assert_eq!(s.verdict, Verdict::Corruption);
        assert_eq!(s.case.ranks(), 2, "{line}");
        let stalls = s.case.kernel_config().stalls.len();
        assert!((1..=2).contains(&stalls) && s.case.kernel_config().stall_gap.is_none(), "{line}");
        let replay = run(&Rendezvous, &variant, &workload, &world_of(&line).expect("the line parses"), false);
        assert_eq!(replay.verdict, Verdict::Corruption, "{line}");
        assert_eq!(shrink(&Rendezvous, &variant, &workload, &failing).unwrap().case, s.case, "deterministic");
        let fixed = shrink(&Rendezvous, &Variant::RoundTag, &workload, &failing);
        assert!(matches!(fixed, Err(ShrinkError::DoesNotFail(Verdict::Pass))), "{fixed:?}");
    }
}

/// The figures the README quotes: seeds 0..100 of each adversary at 2 ranks.
#[test]
fn a_seed_sweep_counts_the_bugs_hits_per_adversary_and_none_for_the_fix() {
    let mut hits = Vec::new();
    for adversary in ADVERSARIES {
        let c = case((0, adversary, 2));
        let buggy = sweep(&Rendezvous, &Variant::ReusedTag, &Workload::TWO_ROUNDS, &c, 0..100, 2).unwrap();
        let fixed = sweep(&Rendezvous, &Variant::RoundTag, &Workload::TWO_ROUNDS, &c, 0..100, 2).unwrap();
        assert_eq!(fixed.failures(), 0, "{adversary}: {:?}", fixed.first_failure());
        assert_eq!(buggy.failures(), buggy.count(Verdict::Corruption), "{adversary}: only corruptions");
        println!("{adversary}: reused-tag {} of 100 seeds corrupt, round-tag 0", buggy.failures());
        hits.push((adversary, buggy.failures()));
    }
    assert_eq!(hits[0], ("fifo", 0), "in-order handshakes never overtake");
    assert!(hits[1..].iter().all(|&(_, h)| h > 0), "every reordering adversary finds it: {hits:?}");
}

/// A deadline too short for the bootstrap: every unfinished node is a hang naming what it waits
/// for, judged by the checks bootsim's oracle shares with every protocol.
#[test]
fn a_run_stopped_at_its_deadline_names_what_each_node_waits_for() {
    let c = Case::parse("engine=fast ranks=3 adversary=rss seed=1 deadline_ms=20").unwrap();
    let r = run(&Rendezvous, &Variant::RoundTag, &Workload::TWO_ROUNDS, &c, false);
    let text: Vec<String> = r.findings.iter().map(ToString::to_string).collect();
    assert_eq!(r.verdict, Verdict::Hang, "{text:?}");
    assert_eq!(text.len(), 3, "one hang per rank: {text:?}");
    for (rank, line) in text.iter().enumerate() {
        assert!(line.starts_with(&format!("hang: rank {rank} waits for exchange #")), "{text:?}");
    }
    // A peer's later round waits in the unexpected list, and the hang shows it.
    assert!(text.iter().any(|l| l.contains("; unexpected list: rank ")), "{text:?}");
}
