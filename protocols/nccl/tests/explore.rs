//! Every accept order, not single holds: the explorer over the in-memory world proves nccl-2.21
//! and nccl-2.30 for n = 2, 3, 4 on nccl-init and nccl-p2p, finds #1176 on nccl-2.19 and the
//! wrong-message receive on nccl-2.8, and each counterexample replays. Figures (states, time):
//! `cargo test -p bootsim-nccl --test explore -- --nocapture`.

use std::time::Instant;

use bootsim_nccl::world::{explore, replay, Bounds, Choice, Exploration, Outcome, Violation, World};
use bootsim_nccl::{nccl_init, nccl_p2p, CallKind, InitParams, NcclError, P2pParams, Planned, Variant};

/// Every workload shape explored at `n`: (name, programs). One channel; 2 ranks per node (so
/// nodes have intra-node collectives and inter-node trees) and one node of all ranks; CollNet off
/// and on; point-to-point to every peer, and distance 1 twice.
fn shapes(v: Variant, n: u32) -> Vec<(String, Vec<Vec<Planned>>)> {
    let mut out = Vec::new();
    for (per, collnet) in [(2, false), (2, true), (8, false)] {
        let p = InitParams { ranks_per_node: per, channels: 1, collnet };
        out.push((format!("nccl-init per-node={per} collnet={collnet}"), nccl_init(v, n, p)));
    }
    out.push(("nccl-p2p every peer".into(), nccl_p2p(v, n, &P2pParams { channels: 1, ..P2pParams::every_peer(n) })));
    out.push(("nccl-p2p distance 1 twice".into(), nccl_p2p(v, n, &P2pParams { channels: 1, distances: vec![1, 1] })));
    out
}

/// Explores and prints the figures.
fn run(v: Variant, n: u32, name: &str, progs: Vec<Vec<Planned>>, bounds: Bounds) -> Exploration {
    let t = Instant::now();
    let ex = explore(v, progs, bounds);
    println!(
        "{v} n={n} {name}: {} states, {} terminal, depth {}, complete {}, {:.2?}{}",
        ex.states,
        ex.terminals,
        ex.max_depth,
        ex.complete,
        t.elapsed(),
        ex.counterexample.as_ref().map_or(String::new(), |c| format!(", counterexample: {}", c.violations[0]))
    );
    ex
}

#[test]
fn nccl_2_21_and_2_30_are_proved_for_every_accept_order_up_to_4_ranks() {
    for v in [Variant::Nccl221, Variant::Nccl230] {
        for n in 2..=4 {
            for (name, progs) in shapes(v, n) {
                let ex = run(v, n, &name, progs, Bounds::default());
                assert!(ex.complete, "{v} n={n} {name}: the search did not finish");
                assert!(ex.counterexample.is_none(), "{v} n={n} {name}: {:#?}", ex.counterexample);
                assert!(ex.terminals >= 1 && ex.states > ex.max_depth, "{v} n={n} {name}: {ex:?}");
            }
        }
    }
}

/// A transport setup's sync.
fn is_sync(k: CallKind) -> bool {
    matches!(k, CallKind::SetupSync { .. })
}

/// Takes the first accept left until nothing can happen.
fn settle(w: &mut World) {
    while let Some(&c) = w.choices().first() {
        w.choose(c);
    }
}

#[test]
fn nccl_2_19_breaks_as_1176_in_its_first_counterexample_which_replays() {
    let v = Variant::Nccl219;
    let progs = nccl_init(v, 2, InitParams { ranks_per_node: 2, channels: 1, collnet: false });
    let ex = run(v, 2, "nccl-init per-node=2 collnet=false", progs.clone(), Bounds::default());
    let cx = ex.counterexample.expect("2.19 breaks");
    println!("{}", cx.story.join("\n"));
    // A connectInfo receive took the same setup's sync from the same peer (same wire tag):
    // the sync overtook it.
    let Violation::Mismatch(m) = &cx.violations[0] else { panic!("{:?}", cx.violations) };
    assert!(matches!(m.call.kind, CallKind::SetupExchange { .. }), "{m:?}");
    assert!(is_sync(progs[m.got.0 as usize][m.got.1].call.kind), "{m:?}");
    assert!(cx.story.iter().any(|s| s.contains("sync") && s.contains("before")), "{:?}", cx.story);
    let mut w = replay(v, progs.clone(), &cx.schedule).expect("replays");
    assert_eq!(w.mismatches(), vec![m.clone()]);
    // Then the sync's 4-byte receive is handed the connectInfo (256 bytes at n = 2): #1176's
    // error, at the sync's line.
    settle(&mut w);
    let Outcome::Failed(e @ NcclError::Truncated { received: 256, expected: 4, call, .. }) = w.outcome(m.rank) else {
        panic!("{:?}", w.outcome(m.rank))
    };
    assert!(is_sync(call.kind) && call.site == "transport.cc:204", "{call:?}");
    assert!(e.to_string().contains("Message truncated : received 256 bytes instead of 4"), "{e}");
    // Replaying twice gives the same log.
    let again = replay(v, progs, &cx.schedule).unwrap();
    let first = replay(v, nccl_init(v, 2, InitParams { ranks_per_node: 2, channels: 1, collnet: false }), &cx.schedule)
        .unwrap();
    assert_eq!(again.log, first.log);
}

/// 2.19 breaks in every shape, even a single setup (its sync and connectInfo share a tag); 2.8
/// (no sync) in every shape with two setups between a pair, all but `nccl-p2p` to every peer at
/// n = 2. Always as a receive taking another message, and each replays.
#[test]
fn nccl_2_19_and_2_8_break_on_every_shape_and_size() {
    for v in [Variant::Nccl219, Variant::Nccl28] {
        for n in 2..=4 {
            for (name, progs) in shapes(v, n) {
                let ex = run(v, n, &name, progs.clone(), Bounds::default());
                assert!(ex.complete, "{v} n={n} {name}");
                if v == Variant::Nccl28 && name.contains("every peer") && n == 2 {
                    assert!(ex.counterexample.is_none(), "{v}: one setup only, nothing to overtake");
                    continue;
                }
                let cx = ex.counterexample.unwrap_or_else(|| panic!("{v} n={n} {name}: no counterexample"));
                let Violation::Mismatch(m) = &cx.violations[0] else { panic!("{v} n={n} {name}: {:?}", cx.violations) };
                let w = replay(v, progs, &cx.schedule).expect("replays");
                assert_eq!(w.mismatches().first(), Some(m), "{v} n={n} {name}");
            }
        }
    }
}

#[test]
fn nccl_2_8_hands_a_receive_another_setups_message() {
    let v = Variant::Nccl28;
    let progs = nccl_init(v, 2, InitParams { ranks_per_node: 2, channels: 1, collnet: false });
    let ex = run(v, 2, "nccl-init per-node=2 collnet=false", progs.clone(), Bounds::default());
    let cx = ex.counterexample.expect("2.8 breaks");
    println!("{}", cx.story.join("\n"));
    let Violation::Mismatch(m) = &cx.violations[0] else { panic!("{:?}", cx.violations) };
    // Matching by peer alone: a message of another intended tag, same peer.
    assert_eq!(m.got.0, m.expected.0, "{m:?}");
    assert_ne!(m.got.2, m.expected.2, "{m:?}");
    let w = replay(v, progs, &cx.schedule).expect("replays");
    assert_eq!(w.mismatches(), vec![m.clone()]);
}

/// The reductions keep every verdict: with every accept a move, every variant and shape at
/// n = 2 and 3 ends the same (about 40 s of the debug build, most of it 2.21 and 2.30 at n = 3).
#[test]
fn the_reductions_lose_no_verdict_up_to_3_ranks() {
    for v in bootsim_nccl::ALL {
        for n in 2..=3 {
            for (name, progs) in shapes(v, n) {
                let unreduced = Bounds { reduce: false, ..Bounds::default() };
                let full = run(v, n, &format!("{name} (no reduction)"), progs.clone(), unreduced);
                let reduced = explore(v, progs, Bounds::default());
                assert!(full.complete && reduced.complete, "{v} n={n} {name}");
                assert_eq!(full.counterexample.is_some(), reduced.counterexample.is_some(), "{v} n={n} {name}");
            }
        }
    }
}

/// The n = 4 proofs without the reductions, for the figures in docs/nccl-protocol.md (minutes
/// per variant in a debug build, too long for `make test`, where the reduced proofs above run):
/// `cargo test -p bootsim-nccl --test explore -- --ignored --nocapture`.
#[test]
#[ignore = "minutes: the unreduced n = 4 proofs, run by hand for the note's figures"]
fn nccl_2_21_and_2_30_are_proved_at_4_ranks_without_the_reductions() {
    for v in [Variant::Nccl221, Variant::Nccl230] {
        for (name, progs) in shapes(v, 4) {
            let unreduced = Bounds { reduce: false, ..Bounds::default() };
            let ex = run(v, 4, &format!("{name} (no reduction)"), progs, unreduced);
            assert!(ex.complete, "{v} n=4 {name}: the search did not finish");
            assert!(ex.counterexample.is_none(), "{v} n=4 {name}: {:#?}", ex.counterexample);
        }
    }
}

#[test]
fn a_search_cut_short_says_so() {
    let v = Variant::Nccl221;
    let progs = nccl_init(v, 4, InitParams { ranks_per_node: 2, channels: 1, collnet: true });
    let ex = explore(v, progs, Bounds { max_states: 50, ..Bounds::default() });
    assert!(!ex.complete);
    assert_eq!(ex.states, 50);
    assert!(ex.counterexample.is_none());
}

#[test]
fn a_schedule_that_does_not_fit_is_refused_by_name() {
    let v = Variant::Nccl221;
    let progs = nccl_init(v, 2, InitParams { ranks_per_node: 2, channels: 1, collnet: false });
    let bogus = Choice::Accept { listener: "10.9.9.9:1".parse().unwrap(), link: 7 };
    let err = replay(v, progs, &[bogus]).err().expect("refused");
    assert!(err.contains("choice 0") && err.contains("10.9.9.9:1"), "{err}");
}

/// The hazard map's cell `first>second` at n: None when proved, else the first violation.
fn cell(v: Variant, n: u32, first: bootsim_nccl::Op, second: bootsim_nccl::Op) -> Option<Violation> {
    let ex = explore(v, bootsim_nccl::nccl_pair(v, n, first, second), Bounds::default());
    assert!(ex.complete || ex.counterexample.is_some(), "{v} n={n} {}>{}: incomplete", first.name(), second.name());
    ex.counterexample.map(|c| c.violations[0].clone())
}

#[test]
fn the_hazard_map_of_back_to_back_operations() {
    use bootsim_nccl::{Op, OPS};
    for v in [Variant::Nccl221, Variant::Nccl230] {
        for first in OPS {
            for second in OPS {
                let found = cell(v, 2, first, second);
                match (first, second, found) {
                    (_, _, None) => {}
                    // Two barriers with one tag swap their flags: nobody reads them.
                    (Op::Barrier, Op::Barrier, Some(Violation::Mismatch(m))) => {
                        assert!(matches!(m.call.kind, CallKind::Barrier { .. }), "{v}: {m:?}")
                    }
                    // 2.21's intra-node ring uses tag 0, node 0's barrier too: the barrier's
                    // receive can take the ring's connection (not an order ncclCommInitRank makes).
                    (Op::Barrier, Op::IntraAllgather, Some(Violation::Hung { .. })) if v == Variant::Nccl221 => {}
                    (a, b, Some(x)) => panic!("{v} {}>{}: {x}", a.name(), b.name()),
                }
            }
        }
    }
    // 2.19: every pair with a setup first reuses (peer, tag) between the connectInfo and its sync.
    for second in OPS {
        assert!(
            matches!(cell(Variant::Nccl219, 2, Op::RingSetup, second), Some(Violation::Mismatch(_))),
            "{}",
            second.name()
        );
    }
}
