//! Operations compiled into the exact sequence of blocking steps NVSHMEM performs.

use std::collections::VecDeque;
use std::ops::Range;

use crate::variant::Variant;

/// Which buffer a send step reads from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Source {
    /// The operation's input buffer (alltoall chunks, a plain send).
    Input,
    /// The operation's result buffer (allgather slices, the barrier word NVSHMEM sends and receives in place).
    Result,
}

/// One blocking step, in program order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Step {
    /// Open both listeners and learn their addresses.
    Listen,
    /// Sleep `rank` ms before calling the root (NVSHMEM staggers above 128 ranks).
    Stagger { ms: u64 },
    /// Connect to the root, exchange versions, send the 64-byte ext_info, close.
    CheckIn,
    /// Accept the root's connection on the root listener and read the ring successor's address.
    AwaitSuccessor,
    /// Connect the ring send socket to the successor, then accept the ring receive socket.
    RingConnect,
    /// Frame a slice of the result buffer onto the ring send socket.
    RingSend { slice: Range<usize> },
    /// Read a frame from the ring receive socket into a slice of the result buffer.
    RingRecv { slice: Range<usize> },
    /// Decode the allgathered listener addresses (end of init).
    LearnPeers,
    /// `bootstrap_send(peer, tag, ...)`.
    Send { peer: u32, tag: i32, step: u32, source: Source, range: Range<usize> },
    /// `bootstrap_recv(peer, tag, ...)` into a slice of the result buffer.
    Recv { peer: u32, tag: i32, step: u32, into: Range<usize> },
}

/// The steps of init: rendezvous, ring, and the in-place allgather of 28-byte addresses.
pub(crate) fn init(rank: u32, nranks: u32, addr_len: usize) -> VecDeque<Step> {
    let mut steps = VecDeque::from([Step::Listen]);
    if nranks > 128 {
        steps.push_back(Step::Stagger { ms: u64::from(rank) });
    }
    steps.extend([Step::CheckIn, Step::AwaitSuccessor, Step::RingConnect]);
    steps.extend(allgather(rank, nranks, addr_len));
    steps.push_back(Step::LearnPeers);
    steps
}

/// Ring allgather: step i sends slice (rank−i) right, then receives slice (rank−i−1) from the left.
pub(crate) fn allgather(rank: u32, nranks: u32, len: usize) -> VecDeque<Step> {
    let (r, n) = (rank as usize, nranks as usize);
    let slice = |s: usize| s * len..(s + 1) * len;
    (0..n.saturating_sub(1))
        .flat_map(|i| {
            let sslice = (r + n - i) % n;
            let rslice = (r + 2 * n - i - 1) % n;
            [Step::RingSend { slice: slice(sslice) }, Step::RingRecv { slice: slice(rslice) }]
        })
        .collect()
}

/// Pairwise-shift alltoall: step i sends chunk `right` with tag base+i (or the call's one tag),
/// then receives chunk `left`.
pub(crate) fn alltoall(
    rank: u32,
    nranks: u32,
    chunk: usize,
    variant: &Variant,
    call_tag: Option<i32>,
) -> VecDeque<Step> {
    let (r, n) = (rank as usize, nranks as usize);
    let mut steps = VecDeque::new();
    for i in 1..n {
        let (left, right) = ((r + n - i) % n, (r + i) % n);
        // NVSHMEM increments the tag before each non-local step: step i carries base + i.
        let tag = call_tag.unwrap_or(variant.alltoall_tag_base() + i as i32);
        let step = i as u32;
        steps.push_back(Step::Send {
            peer: right as u32,
            tag,
            step,
            source: Source::Input,
            range: right * chunk..(right + 1) * chunk,
        });
        steps.push_back(Step::Recv { peer: left as u32, tag, step, into: left * chunk..(left + 1) * chunk });
    }
    steps
}

/// Dissemination barrier: round k sends the 4-byte word to rank+2^(k−1) and receives it, in place,
/// from rank−2^(k−1), with tag base+k (or the call's one tag). Nothing at all for one rank.
pub(crate) fn barrier(rank: u32, nranks: u32, variant: &Variant, call_tag: Option<i32>) -> VecDeque<Step> {
    let (r, n) = (rank as usize, nranks as usize);
    let mut tag = variant.barrier_tag_base();
    let mut steps = VecDeque::new();
    let (mut mask, mut round) = (1usize, 0u32);
    while mask < n {
        tag += 1;
        round += 1;
        steps.push_back(Step::Send {
            peer: ((r + mask) % n) as u32,
            tag: call_tag.unwrap_or(tag),
            step: round,
            source: Source::Result,
            range: 0..4,
        });
        let tag = call_tag.unwrap_or(tag);
        steps.push_back(Step::Recv { peer: ((r + n - mask) % n) as u32, tag, step: round, into: 0..4 });
        mask <<= 1;
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p2p(steps: &VecDeque<Step>) -> Vec<(char, u32, i32)> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Send { peer, tag, .. } => Some(('s', *peer, *tag)),
                Step::Recv { peer, tag, .. } => Some(('r', *peer, *tag)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn alltoall_tags_follow_nvshmem() {
        // Rank 1 of 4: i=1 send to 2, recv from 0 (tag 1); i=2 send 3 recv 3 (tag 2); i=3 send 0 recv 2 (tag 3).
        let s = alltoall(1, 4, 8, &Variant::NVSHMEM_3_4, None);
        assert_eq!(p2p(&s), vec![('s', 2, 1), ('r', 0, 1), ('s', 3, 2), ('r', 3, 2), ('s', 0, 3), ('r', 2, 3)]);
        let d = alltoall(0, 2, 8, &Variant::PR97, None);
        assert_eq!(p2p(&d), vec![('s', 1, (1 << 24) + 1), ('r', 1, (1 << 24) + 1)]);
        // The message p -> r carries tag (r - p) mod n.
        for r in 0..5u32 {
            for (dir, peer, tag) in p2p(&alltoall(r, 5, 1, &Variant::NVSHMEM_3_7, None)) {
                let (from, to) = if dir == 's' { (r, peer) } else { (peer, r) };
                assert_eq!(tag as u32, (to + 5 - from) % 5);
            }
        }
    }

    #[test]
    fn barrier_rounds_follow_dissemination() {
        assert!(barrier(0, 1, &Variant::NVSHMEM_3_4, None).is_empty());
        let s = barrier(0, 5, &Variant::NVSHMEM_3_4, None);
        assert_eq!(p2p(&s), vec![('s', 1, 1), ('r', 4, 1), ('s', 2, 2), ('r', 3, 2), ('s', 4, 3), ('r', 1, 3)]);
        assert_eq!(
            p2p(&barrier(1, 2, &Variant::DISJOINT, None)),
            vec![('s', 0, (1 << 25) + 1), ('r', 0, (1 << 25) + 1)]
        );
    }

    #[test]
    fn one_tag_per_call_marks_every_message_of_the_call() {
        let v = Variant::NVSHMEM_3_8;
        assert_eq!(p2p(&alltoall(0, 3, 8, &v, Some(7))), vec![('s', 1, 7), ('r', 2, 7), ('s', 2, 7), ('r', 1, 7)]);
        assert_eq!(p2p(&barrier(0, 3, &v, Some(8))), vec![('s', 1, 8), ('r', 2, 8), ('s', 2, 8), ('r', 1, 8)]);
    }

    #[test]
    fn allgather_ring_slices() {
        let s = allgather(2, 4, 10);
        let expect = [(2, 1), (1, 0), (0, 3)];
        for (i, (send, recv)) in expect.iter().enumerate() {
            assert_eq!(s[2 * i], Step::RingSend { slice: send * 10..send * 10 + 10 });
            assert_eq!(s[2 * i + 1], Step::RingRecv { slice: recv * 10..recv * 10 + 10 });
        }
        assert!(allgather(0, 1, 10).is_empty());
        assert!(init(200, 256, 28).contains(&Step::Stagger { ms: 200 }));
        assert!(!init(3, 128, 28).iter().any(|s| matches!(s, Step::Stagger { .. })));
    }
}
