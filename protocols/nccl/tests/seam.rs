//! NCCL's nodes stepped through bootsim's protocol seam only: core's in-memory world
//! (`bootsim_core::memnet`), which knows NCCL only through the seam's traits, its message log,
//! and the crate's seam judge. Every variant and workload finishes when accepts are taken
//! oldest first; taking the peer listener's newest connection first breaks 2.19 as #1176 and
//! 2.8 by peer-only matching, while 2.21 and 2.30 still pass.

use bootsim_core::seam::{Completed, ListenerKey, Node as _};
use bootsim_nccl::memnet::NcclNet;
use bootsim_nccl::seam::Key;
use bootsim_nccl::{Listener, Variant, Workload, ALL};

/// `n` ranks running `workload`, run to the end; with `newest_first`, every peer listener
/// accepts its newest queued connection first.
fn run(variant: Variant, workload: &Workload, n: u32, newest_first: bool) -> NcclNet {
    let mut w = NcclNet::new(variant, workload.programs(variant, n));
    if newest_first {
        w.net.accept_newest_first();
    }
    w.run();
    w
}

/// Every error a node ended with, in order.
fn errors(w: &NcclNet) -> Vec<String> {
    w.net.completions.iter().filter_map(|(_, _, c)| c.result().err().map(|e| e.to_string())).collect()
}

/// Whether the root and all `n` ranks finished.
fn all_finished(w: &NcclNet, n: u32) -> bool {
    w.net.root().is_finished() && (0..n).all(|r| w.net.node(r).is_finished())
}

fn workloads() -> Vec<Workload> {
    vec![Workload::by_name("nccl-init").unwrap(), Workload::by_name("nccl-p2p").unwrap()]
}

#[test]
fn every_variant_and_workload_finishes_through_the_seam_with_accepts_oldest_first() {
    for v in ALL {
        for wl in workloads() {
            for n in [1, 2, 3, 5] {
                let w = run(v, &wl, n, false);
                assert!(errors(&w).is_empty(), "{v} {} n={n}: {:?}", wl.name(), errors(&w));
                assert!(
                    all_finished(&w, n),
                    "{v} {} n={n}: {:?}",
                    wl.name(),
                    (0..n).map(|r| w.net.node(r).waiting_for()).collect::<Vec<_>>()
                );
                assert_eq!(w.mismatches(), vec![], "{v} {} n={n}", wl.name());
                let mut timers = std::iter::once(w.net.root()).chain((0..n).map(|r| w.net.node(r)));
                assert!(timers.all(|n| n.poll_timeout().is_none()), "NCCL has no timers");
            }
        }
    }
}

#[test]
fn newest_first_on_the_peer_listener_breaks_2_19_and_2_8_only() {
    let p2p = Workload::P2p { channels: 2, distances: Some(vec![1, 1]) };
    for v in ALL {
        let w = run(v, &p2p, 4, true);
        let errors = errors(&w);
        let truncated = errors.iter().any(|e| e.contains("Message truncated : received 256 bytes instead of 4"));
        let mismatches = w.mismatches();
        match v {
            Variant::Nccl219 => assert!(truncated, "{v}: {errors:?}"),
            Variant::Nccl28 => {
                assert!(!mismatches.is_empty() && errors.is_empty(), "{v}: {mismatches:?} {errors:?}")
            }
            _ => {
                assert!(errors.is_empty() && mismatches.is_empty(), "{v}: {errors:?} {mismatches:?}");
                assert!(all_finished(&w, 4), "{v}");
            }
        }
    }
}

#[test]
fn the_peer_listener_is_the_ring_listener_before_2_23_and_the_p2p_listener_after() {
    assert!(Key::of(Variant::Nccl219, Listener::Ring).is_peer());
    assert!(!Key::of(Variant::Nccl230, Listener::Ring).is_peer());
    assert!(Key::of(Variant::Nccl230, Listener::P2p).is_peer());
    assert!(
        !Key::of(Variant::Nccl221, Listener::FromRoot).is_peer() && !Key::of(Variant::Nccl28, Listener::Root).is_peer()
    );
}
