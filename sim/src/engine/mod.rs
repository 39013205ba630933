//! Engines that run a case: they differ in how the world is simulated, not in the protocol.

pub mod fast;
mod id_table;
pub mod outcome;
pub mod turmoil;
mod work_guard;

#[cfg(test)]
mod retry_script;

pub use outcome::{Node, Outcome, Trace};
pub use work_guard::GuardTrip;
