//! One run of a case: engine, then oracles, into a report.

use std::fmt;
use std::time::Duration;

use crate::case::{Case, EngineKind};
use crate::engine::{fast, Outcome, Trace};
use crate::kernel::KernelStats;
use crate::oracle::{Finding, Verdict};
use crate::protocol::{Nccl, Nvshmem};
use bootsim_core::seam::Protocol as _;

/// The result of one run.
#[derive(Debug)]
pub struct RunReport {
    /// The case that ran.
    pub case: Case,
    /// Its verdict.
    pub verdict: Verdict,
    /// What the oracles found, in the order they looked.
    pub findings: Vec<Finding>,
    /// Simulated time until the last rank finished (or the run stopped).
    pub bootstrap_time: Duration,
    /// Point-to-point messages sent.
    pub messages: usize,
    /// Kernel counters.
    pub kernel: KernelStats,
    /// The full trace, when asked for.
    pub trace: Option<Trace>,
    /// The raw outcome, for explanations.
    pub outcome: Outcome,
}

/// Runs a case; `trace` keeps every event line and the digest.
pub fn run_case(case: &Case, trace: bool) -> RunReport {
    let (mut outcome, (verdict, findings)) = match &case.nccl() {
        Some(nc) => {
            let mut outcome = match case.engine() {
                EngineKind::Fast => fast::run(&Nccl, &nc.variant, &nc.workload, case, trace),
                EngineKind::Turmoil => crate::engine::turmoil::run(&Nccl, &nc.variant, &nc.workload, case, trace, None),
            };
            let setup = crate::protocol::nccl::setup(nc, case);
            let judged = outcome.verdict_with(|| Nccl.judge(&setup));
            (outcome, judged)
        }
        None => {
            let mut outcome = match case.engine() {
                EngineKind::Fast => fast::run(&Nvshmem, &case.variant(), case.workload(), case, trace),
                EngineKind::Turmoil => {
                    crate::engine::turmoil::run(&Nvshmem, &case.variant(), case.workload(), case, trace, None)
                }
            };
            let judged = outcome.verdict_with(|| {
                crate::protocol::nvshmem::judge_of(&case.workload().ops(case.seed()), case.seed(), case.ranks())
            });
            (outcome, judged)
        }
    };
    let finished = outcome.record.ranks.iter().filter_map(|r| r.finished_at).max();
    let bootstrap_time = finished.unwrap_or(outcome.end) - bootsim_core::Instant::ZERO;
    RunReport {
        case: case.clone(),
        verdict,
        findings,
        bootstrap_time,
        messages: outcome.record.messages.sent_total(),
        kernel: outcome.kernel,
        trace: outcome.trace.take(),
        outcome,
    }
}

impl RunReport {
    /// Why the engine's work guard ended the run before its deadline, if it did: the case
    /// could not be simulated within bounds (no verdict on the protocol).
    pub fn gave_up(&self) -> Option<&crate::engine::GuardTrip> {
        self.outcome.gave_up.as_ref()
    }

    /// The line that reproduces this run, or, for a case built through the API that no case
    /// string can express, the reason there is none (never a line that would run another case).
    pub fn replay_line(&self) -> String {
        match self.case.case_string() {
            Ok(line) => format!("replay: bootsim replay '{line}'"),
            Err(why) => format!("replay: none ({why})"),
        }
    }
}

impl fmt::Display for RunReport {
    /// The verdict and a short summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "verdict: {}", self.verdict)?;
        writeln!(f, "case: {}", self.case)?;
        let k = &self.kernel;
        writeln!(
            f,
            "bootstrap: {:.3} ms simulated, {} messages, {} packets ({} stalled, {} lost, {} retransmitted, {} backlog drops)",
            self.bootstrap_time.as_secs_f64() * 1e3,
            self.messages,
            k.packets,
            k.stalled,
            k.lost,
            k.retransmits,
            k.backlog_drops
        )?;
        let cfg = self.case.kernel_config();
        if cfg.load.queue_model_on() {
            let delivered = k.packets.saturating_sub(k.lost + k.ring_drops + k.cpu_backlog_drops).max(1);
            let rps = if cfg.load.cpu.rps {
                format!(", {} CPU-backlog drops (RPS)", k.cpu_backlog_drops)
            } else {
                String::new()
            };
            writeln!(
                f,
                "load: {} RX-ring drops{rps}, {} NAPI polls deferred to ksoftirqd, {:.1} us mean RX-queue time",
                k.ring_drops,
                k.napi_deferrals,
                k.rx_wait_ns as f64 / delivered as f64 / 1e3
            )?;
        }
        for finding in &self.findings {
            writeln!(f, "  {finding}")?;
        }
        if !self.verdict.is_ok() {
            writeln!(f, "{}", self.replay_line())?;
        }
        Ok(())
    }
}
