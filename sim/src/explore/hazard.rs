//! The hazard map: every back-to-back pair of collectives (and each with an allgather between),
//! explored exhaustively per world size, with the worst verdict reachable and a counterexample.

use super::search::{explore, Bounds, Counterexample, Exploration};
use super::walk::walk;
use super::world::Faults;
use crate::case::Case;
use crate::oracle::Verdict;
use bootsim_nvshmem::workload::{OpSpec, Workload};

/// The pairs the map explores, by name, as workload operations.
pub fn pairs() -> Vec<(&'static str, Vec<OpSpec>)> {
    use OpSpec::{Allgather, Alltoall, Barrier};
    let (a, b, g) = (Alltoall(24), Barrier, Allgather(8));
    vec![
        ("alltoall>barrier", vec![a, b]),
        ("barrier>alltoall", vec![b, a]),
        ("alltoall>alltoall", vec![a, a]),
        ("barrier>barrier", vec![b, b]),
        ("alltoall>allgather>barrier", vec![a, g, b]),
        ("barrier>allgather>alltoall", vec![b, g, a]),
        ("alltoall>allgather>alltoall", vec![a, g, a]),
        ("barrier>allgather>barrier", vec![b, g, b]),
    ]
}

/// One cell of the map: a pair at one world size.
#[derive(Clone, Debug)]
pub struct Cell {
    /// The pair's name.
    pub pair: String,
    /// World size.
    pub ranks: u32,
    /// What exploring it found.
    pub exploration: Exploration,
    /// When a bound stopped the exploration short of a corruption: the worst violation random
    /// walks reached, if worse than what the exploration found.
    pub walked: Option<Counterexample>,
}

impl Cell {
    /// True when the cell's worst verdict is final: every schedule explored, or a corruption found.
    pub fn settled(&self) -> bool {
        self.exploration.incomplete.is_none() || self.worst() == Verdict::Corruption
    }

    /// The worst verdict reached, by the exploration or a walk.
    pub fn worst(&self) -> Verdict {
        self.walked.as_ref().map_or(self.exploration.worst(), |w| w.verdict.max(self.exploration.worst()))
    }

    /// A shortest-found schedule of [`Cell::worst`], if it is not pass.
    pub fn example(&self) -> Option<&Counterexample> {
        let worst = self.worst();
        self.exploration.examples.get(&worst).or(self.walked.as_ref().filter(|w| w.verdict == worst))
    }
}

/// Explores `pair` (workload operations) for `variant` (a case string's variant keys, e.g.
/// `variant=pr97`) at `ranks`, within `bounds`, stopping only at a corruption (the worst
/// verdict: nothing reachable can change the cell then); when a bound stops it first, `walks`
/// random walks look deeper.
pub fn cell(
    variant_keys: &str,
    pair: &'static str,
    ops: &[OpSpec],
    ranks: u32,
    faults: Faults,
    bounds: Bounds,
    walks: u32,
) -> Result<Cell, crate::CaseError> {
    let case = Case::parse(&format!("{variant_keys} ranks={ranks} adversary=fifo"))?
        .to_builder()
        .workload(Workload::Custom(ops.to_vec()))
        .build()?;
    Ok(explore_cell(&case, pair, faults, bounds, walks))
}

/// The cell `pair` of `case` (any protocol's case whose workload is the pair, e.g. NCCL's
/// `workload=nccl-pair pair=FIRST,SECOND`): explored, stopping only at a corruption, and walked
/// when a bound stops it first.
pub fn explore_cell(case: &Case, pair: &str, faults: Faults, bounds: Bounds, walks: u32) -> Cell {
    let bounds = Bounds { stop_at: Some(Verdict::Corruption), ..bounds };
    let exploration = explore(case, faults, bounds);
    let walked = match exploration.incomplete {
        Some(_) if exploration.worst() != Verdict::Corruption => {
            walk(case, faults, walks).filter(|w| w.verdict > exploration.worst())
        }
        _ => None,
    };
    Cell { pair: pair.to_string(), ranks: case.ranks(), exploration, walked }
}
