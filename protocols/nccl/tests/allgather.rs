//! The ring allgathers' results: a rank keeps one slice per direction while it forwards them
//! and makes its result whole at the end, so each result is checked here against what every
//! rank sent (its program's payload, init's with the rank's listener address first), for every
//! variant, ring size and the 2.21 intra-node ring.

use bootsim_core::codec::{decode_sockaddr, SOCKADDR_LEN};
use bootsim_nccl::memnet::NcclNet;
use bootsim_nccl::program::payload;
use bootsim_nccl::{InitParams, Step, Workload, ALL};

#[test]
fn every_allgather_result_is_every_rank_s_slice_in_rank_order() {
    for v in ALL {
        for (n, per_node) in [(1, 8), (2, 8), (5, 8), (6, 4), (9, 4)] {
            let wl = Workload::Init(InitParams { ranks_per_node: per_node, ..InitParams::default() });
            let programs = wl.programs(v, n);
            let mut w = NcclNet::new(v, programs.clone());
            w.run();
            let mut checked = 0;
            for r in 0..n {
                for (step, p) in programs[r as usize].iter().enumerate() {
                    let (senders, size, addresses): (Vec<u32>, usize, bool) = match &p.step {
                        Step::RingAllgather { size, addresses } => ((0..n).collect(), *size, *addresses),
                        Step::IntraRingAllgather { ranks, size, .. } => (ranks.clone(), *size, false),
                        _ => continue,
                    };
                    let got = w.result(r, step).unwrap_or_else(|| panic!("{v} n={n}: rank {r} step {step} ended"));
                    let got = got.as_ref().unwrap_or_else(|e| panic!("{v} n={n}: rank {r} step {step}: {e}"));
                    assert_eq!(got.len(), senders.len() * size, "{v} n={n} rank {r} step {step}");
                    let mut addrs = std::collections::BTreeSet::new();
                    for (slot, &from) in senders.iter().enumerate() {
                        let slice = &got[slot * size..(slot + 1) * size];
                        let sent = payload(from, step, size);
                        if addresses && size >= SOCKADDR_LEN {
                            let addr = decode_sockaddr(slice[..SOCKADDR_LEN].try_into().unwrap())
                                .unwrap_or_else(|e| panic!("{v} n={n} rank {r}: slot {slot}'s address: {e}"));
                            assert!(addr.port() != 0, "{v}: rank {from}'s listener port");
                            assert!(addrs.insert(addr), "{v} n={n} rank {r}: slot {slot} repeats {addr}");
                            assert_eq!(&slice[SOCKADDR_LEN..], &sent[SOCKADDR_LEN..], "{v} n={n} rank {r} slot {slot}");
                        } else {
                            assert_eq!(slice, &sent[..], "{v} n={n} rank {r} step {step} slot {slot}");
                        }
                    }
                    // Init's allgather: every rank holds the same table.
                    if addresses {
                        assert_eq!(Some(got), w.result(0, step).and_then(|g| g.as_ref().ok()), "{v} n={n} rank {r}");
                    }
                    checked += 1;
                }
            }
            assert!(checked >= n, "{v} n={n}: each rank ran an allgather at least");
        }
    }
}
