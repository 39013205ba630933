//! A driver run as the real-world record ([`RankRecord`]).

use bootsim_core::report::{error_text, init_text};
use bootsim_core::{BootstrapError, RankRecord};

use super::{DriverError, RankRun};

/// The rank's run, finished or failed; `None` when it never started (setup, the root).
pub fn run_of(result: &Result<RankRun, DriverError>) -> Option<&RankRun> {
    match result {
        Ok(run) => Some(run),
        Err(DriverError::Failed { run, .. }) => Some(run),
        Err(_) => None,
    }
}

/// What rank `rank` of a driver run reports. A core timeout is a hang: NVSHMEM has no timeout,
/// so where bootsim gives up, NVSHMEM would wait forever.
pub fn rank_record(rank: u32, result: &Result<RankRun, DriverError>) -> RankRecord {
    let mut report = RankRecord { rank, ..Default::default() };
    let Some(run) = run_of(result) else {
        report.init = result.as_ref().err().map(|e| init_text(e.to_string()));
        return report;
    };
    let mut put = |i: usize, r: &Result<Vec<u8>, BootstrapError>| match (i, r) {
        (_, Err(e @ BootstrapError::Timeout { .. })) => report.unfinished = Some(error_text(rank, i, e)),
        (0, Err(e)) => report.init = Some(init_text(error_text(rank, i, e))),
        (0, Ok(_)) => {}
        (_, r) => report.ops.push(r.clone().map_err(|e| error_text(rank, i, &e))),
    };
    for (i, c) in run.completions.iter().enumerate() {
        put(i, &c.result);
    }
    if let Err(DriverError::Failed { error, .. }) = result {
        let said = run.completions.iter().any(|c| c.result.as_ref().err() == Some(error));
        if !said {
            put(run.completions.len(), &Err(error.clone()));
        }
    }
    // Timings on the driver's clock: each completion but a timeout (that is a wait, not an end).
    let ended = run.completions.iter().zip(&run.completed_at);
    let ended = ended.filter(|(c, _)| !matches!(c.result, Err(BootstrapError::Timeout { .. })));
    report.ended_at = ended.map(|(_, at)| *at).collect();
    if report.unfinished.is_none() {
        report.finished_at = report.ended_at.last().copied();
    }
    report
}
