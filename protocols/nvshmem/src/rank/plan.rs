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
    RingConnect { succ: u32, pred: u32 },
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

/// The steps an operation has left, in order: explicit ones, then the rest of a collective's
/// regular pattern (ring allgather, pairwise alltoall) made one step at a time, then explicit
/// ones again. A plan costs the same memory at any number of ranks, not two steps per peer for
/// every rank at once, and moving on through the pattern touches no queue.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Steps {
    /// The current step; `None` once none is left.
    front: Option<Step>,
    /// The explicit steps after `front`, before the pattern.
    head: VecDeque<Step>,
    /// The pattern still to be made.
    pattern: Option<Pattern>,
    /// The steps after the pattern.
    tail: VecDeque<Step>,
}

/// A collective's step pattern: step `j` of `0..2(n-1)` is iteration `j / 2` of the loop (ring
/// steps `0..n-1`, pairwise shifts `1..n`), its send when `j` is even, its receive when odd.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Pattern {
    /// Ring allgather of `len`-byte slices.
    Ring { rank: usize, n: usize, len: usize, j: usize },
    /// Pairwise-shift alltoall of `chunk`-byte chunks; step i carries `tag_base + i` or the call's one tag.
    Pairwise { rank: usize, n: usize, chunk: usize, tag_base: i32, call_tag: Option<i32>, j: usize },
}

/// `(a - b) mod n` for `a < n`, `b <= n`, without a division.
fn minus(a: usize, b: usize, n: usize) -> usize {
    if a >= b {
        a - b
    } else {
        a + n - b
    }
}

impl Pattern {
    /// The next step, or `None` when the pattern is done.
    fn next_step(&mut self) -> Option<Step> {
        match self {
            Pattern::Ring { rank, n, len, j } => {
                let (r, n, len, step) = (*rank, *n, *len, *j);
                if step >= 2 * n.saturating_sub(1) {
                    return None;
                }
                *j += 1;
                // Iteration k sends slice r-k and receives slice r-k-1 (mod n).
                let k = step / 2;
                let slice = |s: usize| s * len..(s + 1) * len;
                Some(if step % 2 == 0 {
                    Step::RingSend { slice: slice(minus(r, k, n)) }
                } else {
                    Step::RingRecv { slice: slice(minus(r, k + 1, n)) }
                })
            }
            Pattern::Pairwise { rank, n, chunk, tag_base, call_tag, j } => {
                let (r, n, chunk, step) = (*rank, *n, *chunk, *j);
                if step >= 2 * n.saturating_sub(1) {
                    return None;
                }
                *j += 1;
                let k = step / 2 + 1;
                // NVSHMEM increments the tag before each non-local step: step i carries base + i.
                let tag = call_tag.unwrap_or(*tag_base + k as i32);
                Some(if step % 2 == 0 {
                    let right = if r + k >= n { r + k - n } else { r + k };
                    let range = right * chunk..(right + 1) * chunk;
                    Step::Send { peer: right as u32, tag, step: k as u32, source: Source::Input, range }
                } else {
                    let left = minus(r, k, n);
                    Step::Recv { peer: left as u32, tag, step: k as u32, into: left * chunk..(left + 1) * chunk }
                })
            }
        }
    }
}

impl Steps {
    /// Exactly these steps.
    pub(crate) fn of(steps: impl IntoIterator<Item = Step>) -> Steps {
        Steps::with(steps.into_iter().collect(), None, VecDeque::new())
    }

    fn with(head: VecDeque<Step>, pattern: Option<Pattern>, tail: VecDeque<Step>) -> Steps {
        let mut s = Steps { front: None, head, pattern, tail };
        s.pop_front();
        s
    }

    /// The current step.
    pub(crate) fn front(&self) -> Option<&Step> {
        self.front.as_ref()
    }

    /// True when no step is left.
    pub(crate) fn is_empty(&self) -> bool {
        self.front.is_none()
    }

    /// Done with the current step.
    pub(crate) fn pop_front(&mut self) {
        self.front = match self.head.pop_front() {
            Some(step) => Some(step),
            None => match self.pattern.as_mut().and_then(Pattern::next_step) {
                Some(step) => Some(step),
                None => {
                    self.pattern = None;
                    self.tail.pop_front()
                }
            },
        };
    }

    /// Every step left, in order (for tests).
    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<Step> {
        let mut s = self.clone();
        let mut out = Vec::new();
        while let Some(step) = s.front().cloned() {
            out.push(step);
            s.pop_front();
        }
        out
    }
}

/// The steps of init: rendezvous, ring, and the in-place allgather of 28-byte addresses.
pub(crate) fn init(rank: u32, nranks: u32, addr_len: usize) -> Steps {
    let mut head = VecDeque::from([Step::Listen]);
    if nranks > 128 {
        head.push_back(Step::Stagger { ms: u64::from(rank) });
    }
    let (succ, pred) = ((rank + 1) % nranks.max(1), (rank + nranks.max(1) - 1) % nranks.max(1));
    head.extend([Step::CheckIn, Step::AwaitSuccessor, Step::RingConnect { succ, pred }]);
    let ring = Pattern::Ring { rank: rank as usize, n: nranks as usize, len: addr_len, j: 0 };
    Steps::with(head, Some(ring), VecDeque::from([Step::LearnPeers]))
}

/// Ring allgather: step i sends slice (rank−i) right, then receives slice (rank−i−1) from the left.
pub(crate) fn allgather(rank: u32, nranks: u32, len: usize) -> Steps {
    let ring = Pattern::Ring { rank: rank as usize, n: nranks as usize, len, j: 0 };
    Steps::with(VecDeque::new(), Some(ring), VecDeque::new())
}

/// Pairwise-shift alltoall: step i sends chunk `right` with tag base+i (or the call's one tag),
/// then receives chunk `left`.
pub(crate) fn alltoall(rank: u32, nranks: u32, chunk: usize, variant: &Variant, call_tag: Option<i32>) -> Steps {
    let (rank, n, tag_base) = (rank as usize, nranks as usize, variant.alltoall_tag_base());
    let pairwise = Pattern::Pairwise { rank, n, chunk, tag_base, call_tag, j: 0 };
    Steps::with(VecDeque::new(), Some(pairwise), VecDeque::new())
}

/// Dissemination barrier: round k sends the 4-byte word to rank+2^(k−1) and receives it, in place,
/// from rank−2^(k−1), with tag base+k (or the call's one tag). Nothing at all for one rank.
pub(crate) fn barrier(rank: u32, nranks: u32, variant: &Variant, call_tag: Option<i32>) -> Steps {
    let (r, n) = (rank as usize, nranks as usize);
    let mut tag = variant.barrier_tag_base();
    let mut steps = Vec::new();
    let (mut mask, mut round) = (1usize, 0u32);
    while mask < n {
        tag += 1;
        round += 1;
        steps.push(Step::Send {
            peer: ((r + mask) % n) as u32,
            tag: call_tag.unwrap_or(tag),
            step: round,
            source: Source::Result,
            range: 0..4,
        });
        let tag = call_tag.unwrap_or(tag);
        steps.push(Step::Recv { peer: ((r + n - mask) % n) as u32, tag, step: round, into: 0..4 });
        mask <<= 1;
    }
    Steps::of(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p2p(steps: &Steps) -> Vec<(char, u32, i32)> {
        steps
            .to_vec()
            .into_iter()
            .filter_map(|s| match s {
                Step::Send { peer, tag, .. } => Some(('s', peer, tag)),
                Step::Recv { peer, tag, .. } => Some(('r', peer, tag)),
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
    fn patterns_made_a_step_at_a_time_are_nvshmems_loops() {
        let v = Variant::NVSHMEM_3_4;
        for n in 1..10usize {
            for r in 0..n {
                let (mut ring, mut pairs) = (Vec::new(), Vec::new());
                for i in 1..n {
                    let (k, slice) = (i - 1, |s: usize| s * 3..(s + 1) * 3);
                    ring.push(Step::RingSend { slice: slice((r + n - k) % n) });
                    ring.push(Step::RingRecv { slice: slice((r + 2 * n - k - 1) % n) });
                    let (left, right, tag) = ((r + n - i) % n, (r + i) % n, v.alltoall_tag_base() + i as i32);
                    let range = right * 5..(right + 1) * 5;
                    pairs.push(Step::Send { peer: right as u32, tag, step: i as u32, source: Source::Input, range });
                    pairs.push(Step::Recv { peer: left as u32, tag, step: i as u32, into: left * 5..(left + 1) * 5 });
                }
                assert_eq!(allgather(r as u32, n as u32, 3).to_vec(), ring, "rank {r} of {n}");
                assert_eq!(alltoall(r as u32, n as u32, 5, &v, None).to_vec(), pairs, "rank {r} of {n}");
                let mut init = init(r as u32, n as u32, 3).to_vec();
                assert_eq!(init.pop(), Some(Step::LearnPeers));
                assert!(init.ends_with(&ring) && matches!(init[init.len() - ring.len() - 1], Step::RingConnect { .. }));
            }
        }
    }

    #[test]
    fn allgather_ring_slices() {
        let s = allgather(2, 4, 10).to_vec();
        let expect = [(2, 1), (1, 0), (0, 3)];
        for (i, (send, recv)) in expect.iter().enumerate() {
            assert_eq!(s[2 * i], Step::RingSend { slice: send * 10..send * 10 + 10 });
            assert_eq!(s[2 * i + 1], Step::RingRecv { slice: recv * 10..recv * 10 + 10 });
        }
        assert!(allgather(0, 1, 10).is_empty());
        assert_eq!(s.len(), 6);
        assert!(init(200, 256, 28).to_vec().contains(&Step::Stagger { ms: 200 }));
        assert!(!init(3, 128, 28).to_vec().iter().any(|s| matches!(s, Step::Stagger { .. })));
    }
}
