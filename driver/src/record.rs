//! A driver run as the real-world record ([`RankRecord`]).

use bootsim_core::report::init_text;
use bootsim_core::seam::{Completed, Node};
use bootsim_core::{Awaited, RankRecord, RecordedError};

use super::{DriverError, ErrorOf, NodeRun};

/// The rank's run, finished or failed; `None` when it never started (setup, the root).
pub fn run_of<N: Node>(result: &Result<NodeRun<N>, DriverError<N>>) -> Option<&NodeRun<N>> {
    match result {
        Ok(run) => Some(run),
        Err(DriverError::Failed { run, .. }) => Some(run),
        Err(_) => None,
    }
}

/// The root's failure as a record states it ([`bootsim_core::RootEnd::Failed`]): its typed
/// error, or the words of a run that never started.
pub fn root_error<N: Node>(error: &DriverError<N>) -> RecordedError {
    match error {
        DriverError::Root(e) => RecordedError::of_root::<N::Completion>(e),
        other => RecordedError::Text(other.to_string()),
    }
}

/// What rank `rank` of a driver run reports. A protocol's timeout ([`Completed::is_hang`]) is
/// a hang: the protocol has no timeout (NVSHMEM's none), so where bootsim gives up, it would
/// wait forever.
pub fn rank_record<N: Node>(rank: u32, result: &Result<NodeRun<N>, DriverError<N>>) -> RankRecord
where
    ErrorOf<N>: PartialEq,
{
    let mut report = RankRecord { rank, ..Default::default() };
    let Some(run) = run_of(result) else {
        report.init = result.as_ref().err().map(|e| RecordedError::Text(init_text(e.to_string())));
        return report;
    };
    let typed = |i: usize, e: &ErrorOf<N>| RecordedError::of::<N::Completion>(rank, i as u32, e);
    let mut put = |i: usize, r: Result<&[u8], &ErrorOf<N>>| match (i, r) {
        (_, Err(e)) if N::Completion::is_hang(e) => {
            report.unfinished = Some(Awaited::of_hang::<N::Completion>(rank, i as u32, e));
        }
        (0, Err(e)) => report.init = Some(typed(i, e).map_text(init_text)),
        (0, Ok(_)) => {}
        (_, r) => report.ops.push(r.map(<[u8]>::to_vec).map_err(|e| typed(i, e))),
    };
    for (i, c) in run.completions.iter().enumerate() {
        put(i, c.result());
    }
    if let Err(DriverError::Failed { error, .. }) = result {
        let said = run.completions.iter().any(|c| c.result().err() == Some(error));
        if !said {
            put(run.completions.len(), Err(error));
        }
    }
    // Timings on the driver's clock: each completion but a timeout (that is a wait, not an end).
    let ended = run.completions.iter().zip(&run.completed_at);
    let ended = ended.filter(|(c, _)| !c.result().is_err_and(N::Completion::is_hang));
    report.ended_at = ended.map(|(_, at)| *at).collect();
    if report.unfinished.is_none() {
        report.finished_at = report.ended_at.last().copied();
    }
    report
}
