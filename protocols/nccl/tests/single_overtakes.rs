//! Every single overtaking, tried one at a time: for each workload, world size and variant, each
//! rank-to-rank connection to a peer listener in an honest run (every point-to-point message,
//! and before 2.23 the ring's connection too) is held in turn in core's in-memory world until
//! its sender's next connection to the same listener is queued, and the run is judged. This is
//! not a proof over every accept order (that is explore's, `sim/tests/nccl_explore.rs`) but it
//! answers, per NCCL version, which single reordering of a sender's connections breaks it and how.

use std::collections::BTreeMap;

use bootsim_nccl::memnet::{Hold, NcclNet, Outcome};
use bootsim_nccl::{nccl_init, nccl_p2p, InitParams, P2pParams, Planned, Variant};

/// How one held connection ended the run.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Verdict {
    /// Every rank done, every receive took its own message.
    Clean,
    /// Every rank done, but a receive took another message (NCCL cannot tell).
    Silent(String),
    /// A rank failed: NCCL's error.
    Error(String),
    /// A rank blocked for good.
    Hang(String),
}

fn judge(w: &NcclNet, n: u32) -> Verdict {
    for r in 0..n {
        match w.outcome(r) {
            Outcome::Done => {}
            Outcome::Failed(e) => return Verdict::Error(e.to_string()),
            Outcome::Hung(why) => {
                // A hang is reported only if no rank failed (a failure explains the others' wait).
                if (0..n).all(|q| !matches!(w.outcome(q), Outcome::Failed(_))) {
                    return Verdict::Hang(format!("rank {r}: {why}"));
                }
            }
        }
    }
    match w.mismatches().first() {
        Some(m) => Verdict::Silent(format!(
            "rank {} {} took rank {}'s step {} (intended tag {:#x}) instead of its step {} (tag {:#x})",
            m.rank, m.call, m.got.0, m.got.1, m.got.2, m.expected.1, m.expected.2
        )),
        None => Verdict::Clean,
    }
}

/// Every workload shape tried: (name, programs).
fn workloads(v: Variant) -> Vec<(String, Vec<Vec<Planned>>)> {
    let mut out = Vec::new();
    for (n, per) in [(2, 8), (3, 8), (4, 2), (4, 8)] {
        for collnet in [false, true] {
            let p = InitParams { ranks_per_node: per, channels: 1, collnet };
            out.push((format!("nccl-init n={n} per-node={per} collnet={collnet}"), nccl_init(v, n, p)));
        }
    }
    for n in 2..=4 {
        out.push((
            format!("nccl-p2p n={n} every peer"),
            nccl_p2p(v, n, &P2pParams { channels: 1, ..P2pParams::every_peer(n) }),
        ));
        out.push((
            format!("nccl-p2p n={n} distance 1 twice"),
            nccl_p2p(v, n, &P2pParams { channels: 1, distances: vec![1, 1] }),
        ));
    }
    out
}

/// For one variant: every workload's verdicts, one per held connection.
fn survey(v: Variant) -> BTreeMap<String, Vec<(Hold, Verdict)>> {
    let mut table = BTreeMap::new();
    for (name, progs) in workloads(v) {
        let n = progs.len() as u32;
        let mut honest = NcclNet::new(v, progs.clone());
        honest.run();
        assert_eq!(judge(&honest, n), Verdict::Clean, "{v} {name}: the honest order");
        let verdicts = honest
            .peer_dials()
            .into_iter()
            .map(|hold| {
                let mut w = NcclNet::new(v, progs.clone());
                w.net.hold(hold);
                w.run();
                (hold, judge(&w, n))
            })
            .collect();
        table.insert(name, verdicts);
    }
    table
}

/// One line per workload (counts per kind), then an example of each kind that is not clean.
fn print(v: Variant, table: &BTreeMap<String, Vec<(Hold, Verdict)>>) {
    for (name, verdicts) in table {
        let mut kinds: BTreeMap<&str, (usize, String)> = BTreeMap::new();
        for (hold, verdict) in verdicts {
            let (kind, text) = match verdict {
                Verdict::Clean => ("clean", String::new()),
                Verdict::Silent(t) => ("silent", t.clone()),
                Verdict::Error(t) => ("error", t.clone()),
                Verdict::Hang(t) => ("hang", t.clone()),
            };
            let e = kinds.entry(kind).or_insert((0, format!("hold {hold:?}: {text}")));
            e.0 += 1;
        }
        let counts: Vec<String> = kinds.iter().map(|(k, (c, _))| format!("{k} {c}")).collect();
        println!("{v} {name}: {}", counts.join(", "));
        for (k, (_, example)) in kinds.iter().filter(|(k, _)| **k != "clean") {
            println!("    {k}: {example}");
        }
    }
}

#[test]
fn one_overtaking_breaks_2_19_with_1176s_message_and_2_8_silently_but_never_2_21_or_2_30() {
    for v in bootsim_nccl::ALL {
        let table = survey(v);
        print(v, &table);
        for (name, verdicts) in &table {
            let bad: Vec<&(Hold, Verdict)> = verdicts.iter().filter(|(_, x)| *x != Verdict::Clean).collect();
            match v {
                Variant::Nccl221 | Variant::Nccl230 => {
                    assert!(bad.is_empty(), "{v} {name}: {bad:?}")
                }
                Variant::Nccl219 => {
                    // Every shape breaks, and always as #1176: a sync's 4-byte receive handed a
                    // connectInfo (128 bytes per channel) of the same (peer, tag).
                    assert!(!bad.is_empty(), "{v} {name}: no single overtaking breaks it");
                    for (hold, x) in bad {
                        let Verdict::Error(t) = x else { panic!("{v} {name} {hold:?}: {x:?}") };
                        assert!(t.contains("sync") && t.contains("bytes instead of 4"), "{v} {name} {hold:?}: {t}");
                        assert!(t.contains("Message truncated : received"), "{t}");
                    }
                }
                Variant::Nccl28 => {
                    // Matching by peer alone: a receive takes another setup's message; NCCL cannot
                    // tell when the sizes agree.
                    let silent = bad.iter().any(|(_, x)| matches!(x, Verdict::Silent(_)));
                    let every_peer_n2 = name == "nccl-p2p n=2 every peer";
                    assert!(silent || every_peer_n2, "{v} {name}: {bad:?}");
                }
            }
        }
    }
}
