//! NCCL's model ranks run by the async driver over real sockets: did every step complete?

use bootsim_driver::RunResult;
use bootsim_nccl::program::Planned;
use bootsim_nccl::seam::NcclNode;

/// How many steps completed over every rank, or the first rank that did not complete its
/// program (`programs[r]`), with its error or what it waited for.
pub fn every_step_done(ranks: &[Option<RunResult<NcclNode>>], programs: &[Vec<Planned>]) -> Result<usize, String> {
    let mut steps = 0;
    for (r, (end, program)) in ranks.iter().zip(programs).enumerate() {
        let run = match end {
            Some(Ok(run)) => run,
            Some(Err(e)) => return Err(format!("rank {r} failed: {e}")),
            None => return Err(format!("rank {r} was still running at the deadline")),
        };
        if let Some(e) = run.completions.iter().find_map(|c| c.result.as_ref().err()) {
            return Err(format!("rank {r}: {e}"));
        }
        if run.completions.len() != program.len() {
            return Err(format!("rank {r} completed {} of its {} steps", run.completions.len(), program.len()));
        }
        steps += program.len();
    }
    if ranks.len() != programs.len() {
        return Err(format!("{} ranks ran, {} programs", ranks.len(), programs.len()));
    }
    Ok(steps)
}
