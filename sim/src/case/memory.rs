//! The memory a case's run needs, estimated before it runs so that a case too large for the
//! machine is refused up front ([`PAYLOAD_BUDGET`](super::PAYLOAD_BUDGET)). The figures are
//! fitted to the peak RSS of untraced fast-engine runs of the `bootsim` binary, whose allocator
//! is mimalloc (`/usr/bin/time -v bootsim run`, less the 8.5 MiB the process holds before it
//! starts, on a host whose transparent huge pages are `madvise`): a part per run (the
//! allocator's arenas), a part per rank (its node, its host's kernel state), a part per pair of
//! ranks, what a transport keeps per peer, and the largest operation a rank has in flight. A
//! traced run keeps every result and message besides (its trace is larger still).

use bootsim_nvshmem::workload::OpSpec;
use bootsim_nvshmem::Transport;

use super::{Case, CaseError};

/// Per run, whatever its size: the allocator's arenas, backed by huge pages where the host
/// allows them. Fitted with [`RANK_BYTES`] and [`PAIR_BYTES`] through `nvshmem-init`
/// (`adversary=rss seed=1`) at 256, 1024 and 2048 ranks (35 656, 81 836 and 181 236 KB peak,
/// 2026-12-02: 16.6 MiB, 34 550 bytes a rank and 21.1 a pair), each rounded up: peaks vary by a
/// few MiB from run to run with where huge pages fall (81 552 to 88 736 KB at 1024 ranks).
pub const RUN_BYTES: u128 = 18 << 20;

/// Per rank, whatever its workload: see [`RUN_BYTES`].
pub const RANK_BYTES: u128 = 40_000;

/// Per ordered pair of ranks: what a run holds for the pairs at once (the judge's pending takes
/// of an all-to-all, 12 bytes a message, and the ranks' per-peer tables). The kernel's
/// connections made are no longer in it: its table frees the slots of finished ones (with
/// them it was 42 bytes a pair). See [`RUN_BYTES`].
pub const PAIR_BYTES: u128 = 22;

/// Per pair, besides, under the sequenced transport: its two per-peer sequence tables
/// (`seq` at 256 and 512 ranks: 33 836 and 45 700 KB, within the estimate with 16 more bytes a
/// pair than `nvshmem-3.7`).
pub const SEQUENCED_PAIR_BYTES: u128 = 16;

/// Per pair, besides, under the persistent transport: a connection kept open per ordered pair
/// (`persistent` at 256 and 512 ranks: 93 208 and 323 532 KB, 2026-12-02 after the rank's
/// sorted connection table, a slope between them of 1 200 bytes a pair, less [`PAIR_BYTES`],
/// rounded up).
pub const PERSISTENT_PAIR_BYTES: u128 = 1_200;

/// A rank's largest operation in flight, in copies of its per-peer length: chunks made when
/// sent, the kernel's send and receive queues, an allgather's result made whole when it
/// completes (`custom` at 64 ranks, 64 KiB per peer: an all-to-all 5.3 copies per rank, an
/// allgather 9.2).
const ALLTOALL_COPIES: u128 = 6;
const ALLGATHER_COPIES: u128 = 10;

/// NCCL's ranks, per rank besides [`RUN_BYTES`]: fitted over `nccl-init` (2 channels) at 256,
/// 1024, 2048 and 4096 ranks (35 620, 65 252, 110 764 and 174 440 KB peak, 2026-12-02, the
/// largest 41 800 bytes a rank: 42 500 per rank, nothing per pair, covers all four; through 256
/// to 2048 alone a part per pair of 3 bytes fitted, which the 4096-rank point does not bear
/// out), less the
/// setups counted by [`NCCL_SETUP_BYTES_PER_CHANNEL`] (init's few, over its ring and tree
/// neighbours).
pub const NCCL_RANK_BYTES: u128 = 42_500 - 4 * NCCL_SETUP_BYTES_PER_CHANNEL;

/// Per rank, for each transport setup of its program and each channel it connects: its
/// program steps, the oracle's entries and its connectInfo messages. Fitted over `nccl-p2p`
/// (every peer once, 2 channels) at 128 and 256 ranks (57 476 and 206 104 KB peak under
/// glibc: 3 097 bytes per setup; 74 552 and 219 584 under mimalloc, within the estimate).
pub const NCCL_SETUP_BYTES_PER_CHANNEL: u128 = 1_550;

impl Case {
    /// About the memory this case's run needs, in bytes (untraced; see the module's notes).
    pub fn payload_bytes(&self) -> u128 {
        let n = u128::from(self.ranks);
        if let Some(nc) = &self.nccl {
            let (setups, channels) = self.nccl_setups(nc);
            return RUN_BYTES + n * (NCCL_RANK_BYTES + setups * channels * NCCL_SETUP_BYTES_PER_CHANNEL);
        }
        let per_pair = PAIR_BYTES
            + match self.variant.transport {
                Transport::PerMessage => 0,
                Transport::Sequenced => SEQUENCED_PAIR_BYTES,
                Transport::Persistent => PERSISTENT_PAIR_BYTES,
            };
        let in_flight = self
            .workload
            .ops(self.seed)
            .iter()
            .map(|op| match op {
                // The result's bit per peer, besides.
                OpSpec::Allgather(len) => ALLGATHER_COPIES * *len as u128 + n / 8,
                OpSpec::Alltoall(len) => ALLTOALL_COPIES * *len as u128 + n / 8,
                OpSpec::Barrier => 0,
            })
            .max()
            .unwrap_or(0);
        RUN_BYTES + n * (RANK_BYTES + in_flight) + n * n * per_pair
    }

    /// NCCL's transport setups per rank and the channels each connects.
    fn nccl_setups(&self, nc: &super::NcclCase) -> (u128, u128) {
        let n = u128::from(self.ranks);
        match &nc.workload {
            bootsim_nccl::Workload::Init(p) => (2, u128::from(p.channels)),
            bootsim_nccl::Workload::P2p { channels, distances } => {
                (distances.as_ref().map_or(n.saturating_sub(1), |d| d.len() as u128), u128::from(*channels))
            }
            bootsim_nccl::Workload::Pair(..) => (2, 1),
        }
    }

    /// About the bytes of results a run keeps besides when it keeps every rank's results: a
    /// traced run (`run --trace`, `replay`, explain, the timeline) and every turmoil run. Each
    /// operation's result per rank (an allgather's or all-to-all's `n` chunks; NCCL's
    /// allgathered peer and graph information and its connectInfo), over all ranks.
    pub fn kept_results_bytes(&self) -> u128 {
        let n = u128::from(self.ranks);
        if let Some(nc) = &self.nccl {
            use bootsim_nccl::workload::{ALLGATHER3_LEN, PEER_INFO_LEN};
            // Every rank's allgathers hold one item (and one address) per rank.
            let gathered = (PEER_INFO_LEN + ALLGATHER3_LEN) as u128 + 32;
            let (setups, channels) = self.nccl_setups(nc);
            return n * n * gathered + n * setups * channels * 128;
        }
        let per_rank: u128 = self
            .workload
            .ops(self.seed)
            .iter()
            .map(|op| match op {
                OpSpec::Allgather(len) | OpSpec::Alltoall(len) => n * *len as u128,
                OpSpec::Barrier => 4,
            })
            .sum();
        n * per_rank
    }

    /// About the bytes a traced run's trace and message log hold (its lines are kept as text;
    /// the results it keeps are [`Case::kept_results_bytes`]). For NVSHMEM: a base of
    /// `TRACE_RANK_BYTES` a rank and `TRACE_PAIR_BYTES` a pair, then per operation an allgather
    /// (a ring: a message per pair) `TRACE_ALLGATHER_PAIR_BYTES` a pair, an alltoall (a
    /// connection per message, its handshake's lines too) `TRACE_ALLTOALL_PAIR_BYTES` a pair
    /// plus half its length, a barrier (a dissemination: ⌈log2 n⌉ rounds)
    /// `TRACE_BARRIER_RANK_ROUND_BYTES` a rank and round; all of it an eighth more for the
    /// run-to-run spread of one case's peak and a lossy world's retransmissions. For NCCL per
    /// pair `NCCL_TRACE_PAIR_BYTES` and, per channel of a p2p setup,
    /// `NCCL_TRACE_PAIR_CHANNEL_BYTES`. Fitted above the peak RSS of
    /// `bootsim run --trace` (2026-12-02, mimalloc, the most of two runs) of workloads of one
    /// kind of operation at 64 to 384 ranks, and checked against nvshmem-init at 256 and 446
    /// ranks, deepep (lossy too) and churn, nccl-init and nccl-p2p (the test below).
    pub fn trace_bytes(&self) -> u128 {
        let n = u128::from(self.ranks);
        if let Some(nc) = &self.nccl {
            let per_pair = match &nc.workload {
                bootsim_nccl::Workload::P2p { .. } => {
                    NCCL_TRACE_PAIR_BYTES + self.nccl_setups(nc).1 * NCCL_TRACE_PAIR_CHANNEL_BYTES
                }
                _ => NCCL_TRACE_PAIR_BYTES,
            };
            return n * n * per_pair;
        }
        let rounds = u128::from(self.ranks.max(2).next_power_of_two().trailing_zeros());
        let base = n * TRACE_RANK_BYTES + n * n * TRACE_PAIR_BYTES;
        let ops = self
            .workload
            .ops(self.seed)
            .iter()
            .map(|op| match op {
                OpSpec::Allgather(_) => n * n * TRACE_ALLGATHER_PAIR_BYTES,
                OpSpec::Alltoall(len) => n * n * (TRACE_ALLTOALL_PAIR_BYTES + *len as u128 / 2),
                OpSpec::Barrier => n * rounds * TRACE_BARRIER_RANK_ROUND_BYTES,
            })
            .sum::<u128>();
        // One case's traced peak varies by up to 9 % from run to run (the trace's growth by
        // doubling meets the allocator's arenas differently), and a lossy world retransmits:
        // an eighth more covers both.
        (base + ops) * 9 / 8
    }

    /// Whether a run that keeps every result fits the budget this case was checked against:
    /// on the turmoil engine (`traced` false), or traced (its trace besides); refused naming
    /// the bytes and what to do. The parser asks it of every `engine=turmoil` case of
    /// bootsim's own protocols (a protocol of the user's own has no estimate); `run --trace`,
    /// `replay`, explain, shrink (before its traced stall pass) and the timeline ask it traced.
    pub fn check_kept_results(&self, traced: bool) -> Result<(), CaseError> {
        let trace = if traced { self.trace_bytes() } else { 0 };
        let bytes = self.payload_bytes() + self.kept_results_bytes() + self.engine_bytes() + trace;
        let budget = self.budget.0;
        if bytes <= budget {
            return Ok(());
        }
        let how = if traced {
            "a traced run keeps every rank's results and its trace"
        } else {
            "a turmoil run keeps every rank's results, its message log and a link per pair of hosts"
        };
        Err(CaseError(format!(
            "ranks={} with protocol={}: {how}, about {} MiB, over the {} MiB budget: run it untraced on the \
             fast engine (`bootsim run` without --trace), or with fewer ranks",
            self.ranks,
            self.protocol(),
            bytes >> 20,
            budget >> 20
        )))
    }
}

/// The turmoil engine's own memory per rank (a simulated host with its runtime and sockets) and
/// per ordered pair of ranks (the links and connections it keeps between hosts, and the run's
/// message log, which it keeps whole): fitted over untraced `nvshmem-init` at 64 and 128 ranks
/// (65 044 and 138 588 KB peak less the estimate's other parts, 2026-12-02: about 280 kB a rank
/// and 3 980 bytes a pair), rounded up to cover `deepep` and `nccl-init` at 64 and 128 ranks.
pub const TURMOIL_RANK_BYTES: u128 = 300_000;

/// See [`TURMOIL_RANK_BYTES`].
pub const TURMOIL_PAIR_BYTES: u128 = 4_100;

impl Case {
    /// About the bytes its engine holds besides the ranks' (nothing on the fast engine).
    pub fn engine_bytes(&self) -> u128 {
        let n = u128::from(self.ranks);
        match self.engine {
            super::EngineKind::Fast => 0,
            super::EngineKind::Turmoil => n * TURMOIL_RANK_BYTES + n * n * TURMOIL_PAIR_BYTES,
        }
    }
}

/// A traced NVSHMEM run's bytes per rank before its operations: its check-in with the root,
/// its listeners and the trace's own growth by doubling ([`Case::trace_bytes`]).
pub const TRACE_RANK_BYTES: u128 = 150_000;

/// A traced NVSHMEM run's bytes per pair of ranks before its operations ([`Case::trace_bytes`]).
/// With [`TRACE_RANK_BYTES`], fitted to one barrier's traced runs at 64 to 384 ranks, less their
/// untraced peaks and the barrier: 0.9 to 2.8 KB a pair, the most at the fewest ranks.
pub const TRACE_PAIR_BYTES: u128 = 600;

/// A traced NVSHMEM allgather's bytes per pair of ranks ([`Case::trace_bytes`]): eight
/// `allgather:8` less one barrier's run, per operation and pair: 645 at 128 ranks and 606 at
/// 256 in the test's data (at 512 bytes a peer the results kept account for the length).
pub const TRACE_ALLGATHER_PAIR_BYTES: u128 = 700;

/// A traced NVSHMEM alltoall's bytes per pair of ranks, besides half its length
/// ([`Case::trace_bytes`]): eight `alltoall:24` less one barrier's run, per operation and pair,
/// 8 278 at 128 ranks and 7 253 at 256 in the test's data; a lossy world's retransmissions add
/// lines (deepep at 128 ranks, adversary=lossy), which the estimate's eighth more covers.
pub const TRACE_ALLTOALL_PAIR_BYTES: u128 = 8_300;

/// A traced NVSHMEM barrier's bytes per rank and round ([`Case::trace_bytes`]): eight barriers
/// less one, per barrier, rank and round: 7 073 at 128 ranks and 6 032 at 256 in the test's
/// data.
pub const TRACE_BARRIER_RANK_ROUND_BYTES: u128 = 8_000;

/// A traced NCCL run's bytes per pair of ranks ([`Case::trace_bytes`]).
pub const NCCL_TRACE_PAIR_BYTES: u128 = 5_000;

/// A traced NCCL p2p run's bytes per pair of ranks and channel, besides ([`Case::trace_bytes`]).
pub const NCCL_TRACE_PAIR_CHANNEL_BYTES: u128 = 18_000;

#[cfg(test)]
mod tests {
    use super::*;

    /// Eight times the operation `op`, comma-separated.
    macro_rules! ops8 {
        ($op:literal) => {
            concat!($op, ",", $op, ",", $op, ",", $op, ",", $op, ",", $op, ",", $op, ",", $op)
        };
    }

    /// Each case's `estimate` is at or above its measured peak RSS (`kb`, less the 8.5 MiB a
    /// process holds before it starts) and below `most` times it.
    fn estimates_cover(peaks: &[(&str, u128)], most: f64, estimate: impl Fn(&Case) -> u128) {
        for (line, kb) in peaks {
            let line =
                if line.contains("adversary=") { line.to_string() } else { format!("{line} adversary=rss seed=1") };
            let c = Case::parse_within(&line, u128::MAX).unwrap();
            let (estimate, measured) = (estimate(&c), (kb - 8_704) * 1024);
            assert!(estimate >= measured, "{line}: estimated {estimate}, measured {measured}");
            assert!((estimate as f64) < most * measured as f64, "{line}: estimated {estimate}, {most} x {measured}");
        }
    }

    /// The estimate stays above what was measured (peak RSS of an untraced `bootsim run`), and
    /// within a third more.
    #[test]
    fn an_untraced_run_s_estimate_is_above_its_measured_peak() {
        let peaks = [
            ("variant=nvshmem-3.7 workload=nvshmem-init ranks=256", 33_456),
            ("variant=nvshmem-3.7 workload=nvshmem-init ranks=1024", 73_440),
            ("variant=nvshmem-3.7 workload=nvshmem-init ranks=2048", 169_488),
            // `make bench-scale`'s scale child (its peak RSS), 2026-12-02.
            ("variant=nvshmem-3.7 workload=nvshmem-init ranks=4096 deadline_ms=3600000", 480_904),
            ("variant=seq workload=nvshmem-init ranks=256", 33_836),
            ("variant=seq workload=nvshmem-init ranks=512", 45_700),
            ("variant=persistent workload=nvshmem-init ranks=256", 93_208),
            ("variant=persistent workload=nvshmem-init ranks=512", 323_532),
            ("protocol=nccl workload=nccl-init ranks=256", 35_620),
            ("protocol=nccl workload=nccl-init ranks=1024", 65_252),
            ("protocol=nccl workload=nccl-init ranks=2048", 110_764),
            ("protocol=nccl workload=nccl-init ranks=4096 deadline_ms=3600000", 174_440),
            ("protocol=nccl workload=nccl-p2p ranks=128", 74_552),
            ("protocol=nccl workload=nccl-p2p ranks=256", 219_584),
        ];
        estimates_cover(&peaks, 4.0 / 3.0, Case::payload_bytes);
    }

    /// An untraced turmoil run's estimate stays above its measured peak (`/usr/bin/time -v bootsim
    /// run`), and within half as much again.
    #[test]
    fn a_turmoil_run_s_estimate_is_above_its_measured_peak() {
        let peaks = [
            ("engine=turmoil variant=nvshmem-3.7 workload=nvshmem-init ranks=64", 65_044),
            ("engine=turmoil variant=nvshmem-3.7 workload=nvshmem-init ranks=128", 138_588),
            ("engine=turmoil variant=nvshmem-3.7 workload=deepep ranks=64", 53_168),
            ("engine=turmoil variant=nvshmem-3.7 workload=deepep ranks=128", 130_588),
            ("engine=turmoil protocol=nccl workload=nccl-init ranks=64", 63_036),
            ("engine=turmoil protocol=nccl workload=nccl-init ranks=128", 135_076),
        ];
        estimates_cover(&peaks, 1.5, |c| c.payload_bytes() + c.kept_results_bytes() + c.engine_bytes());
    }

    /// The estimate stays above what was measured (peak RSS of `bootsim run --trace`), so a
    /// traced case it lets through fits, and within half as much again, so one that would fit
    /// is not refused.
    #[test]
    fn a_traced_run_s_estimate_is_above_its_measured_peak() {
        let peaks = [
            ("variant=nvshmem-3.7 workload=nvshmem-init ranks=256", 1_330_740),
            // Near README's bound for a traced run (426 ranks of nvshmem-init in the 4 GiB budget).
            ("variant=nvshmem-3.7 workload=nvshmem-init ranks=446", 3_776_580),
            ("variant=nvshmem-3.4 workload=nvshmem-init ranks=446 adversary=rss seed=2", 3_847_308),
            // One kind of operation each (`workload=custom ops=...`), the fit's data, 2026-12-02
            // (the most of two runs; eight alltoall:24 at 256 ranks from 883ad01's binary, which
            // let it through).
            ("variant=nvshmem-3.7 workload=custom ops=barrier ranks=64", 36_096),
            ("variant=nvshmem-3.7 workload=custom ops=barrier ranks=128", 58_204),
            ("variant=nvshmem-3.7 workload=custom ops=barrier ranks=192", 76_844),
            ("variant=nvshmem-3.7 workload=custom ops=barrier ranks=256", 117_832),
            ("variant=nvshmem-3.7 workload=custom ops=barrier ranks=320", 138_392),
            ("variant=nvshmem-3.7 workload=custom ops=barrier ranks=384", 189_896),
            (concat!("variant=nvshmem-3.7 workload=custom ranks=128 ops=", ops8!("barrier")), 101_528),
            (concat!("variant=nvshmem-3.7 workload=custom ranks=256 ops=", ops8!("barrier")), 202_276),
            (concat!("variant=nvshmem-3.7 workload=custom ranks=128 ops=", ops8!("allgather:8")), 140_708),
            (concat!("variant=nvshmem-3.7 workload=custom ranks=256 ops=", ops8!("allgather:8")), 427_948),
            ("variant=nvshmem-3.7 workload=custom ranks=128 ops=allgather:512,allgather:512,allgather:512,allgather:512", 138_316),
            ("variant=nvshmem-3.7 workload=custom ranks=256 ops=allgather:512,allgather:512,allgather:512,allgather:512", 417_976),
            (concat!("variant=nvshmem-3.7 workload=custom ranks=128 ops=", ops8!("alltoall:24")), 1_119_368),
            (concat!("variant=nvshmem-3.7 workload=custom ranks=256 ops=", ops8!("alltoall:24")), 3_837_344),
            ("variant=nvshmem-3.7 workload=custom ranks=128 ops=alltoall:576,alltoall:576,alltoall:576,alltoall:576", 599_732),
            ("variant=nvshmem-3.7 workload=custom ranks=256 ops=alltoall:576,alltoall:576,alltoall:576,alltoall:576", 2_178_220),
            // The most of several runs: one case's peak varies by up to 9 %.
            ("variant=nvshmem-3.7 workload=deepep ranks=256", 745_052),
            // A lossy world's retransmissions add trace lines.
            ("variant=nvshmem-3.7 workload=deepep ranks=128 adversary=lossy seed=2", 238_384),
            ("variant=nvshmem-3.4 workload=deepep ranks=128 adversary=lossy seed=2", 230_944),
            ("variant=seq workload=deepep ranks=128 adversary=lossy seed=2", 226_904),
            ("variant=nvshmem-3.7 workload=churn ranks=256", 2_862_940),
            ("protocol=nccl workload=nccl-init ranks=256", 342_932),
            ("protocol=nccl workload=nccl-p2p ranks=128", 726_280),
        ];
        estimates_cover(&peaks, 1.5, |c| c.payload_bytes() + c.kept_results_bytes() + c.trace_bytes());
    }
}
