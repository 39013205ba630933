//! The oracle: one function, [`judge`], turns the record of a run ([`RunRecord`]), whichever
//! world produced it (the fast or turmoil engine, explore, real sockets, the wire, NVSHMEM's
//! plugin), into findings and a verdict. Each invariant is one small checker in its own file:
//! `integrity.rs`, `mismatches.rs`, `errors.rs`, `liveness.rs`, `leaks.rs`, `drain.rs`. What a
//! protocol's workload says about bytes (each operation's correct result, what wrong bytes
//! are, its detail of a wrong item) it tells through `payloads.rs`' [`Payloads`]: no file here
//! names a protocol. A world that does not observe something (real worlds have no message log
//! or root) leaves it empty, and its checker finds nothing.

use bootsim_core::seam::Judge as _;
use bootsim_core::{RunRecord, SentMsg};

mod drain;
mod errors;
mod finding;
mod integrity;
mod judge;
mod leaks;
mod liveness;
mod mismatches;
mod payloads;

pub use finding::{BytesAre, Detail, Finding, OpRef, Payload, Provenance, Verdict, Who, WrongItem};
pub(crate) use judge::conclude;
pub use judge::Judge;
pub use payloads::{Origins, Payloads};

/// Judges the record of one run of `n` ranks whose workload's bytes `payloads` tells.
/// Findings come in a fixed order: mismatches as taken; then per rank its init error, each
/// operation's error or corruption in order, and its hang, early end or leak; then the root;
/// then drains. It feeds the whole record through [`Judge`], the judge a streaming world feeds
/// as it goes.
pub fn judge(payloads: impl Payloads + 'static, n: u32, record: &RunRecord) -> (Verdict, Vec<Finding>) {
    let mut j = Judge::new(payloads, n);
    j.feed(record);
    Judge::finish(&mut j, record)
}

/// A sent message as the provenance of bytes a receive took: "barrier #2 round 1 from rank 0".
fn provenance_of(s: &SentMsg) -> Provenance {
    Provenance::Message { from: s.from, origin: s.origin }
}
