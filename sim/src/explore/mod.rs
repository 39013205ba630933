//! Exhaustive exploration (`bootsim explore`): every accept order a case's ranks can see, in a
//! zero-latency world where nothing else is left to chance, judged by the one oracle.

pub mod footprint;
pub mod hazard;
pub mod schedule;
pub mod search;
pub mod walk;
pub mod world;

pub use search::{explore, Bounds, Counterexample, Exploration};
pub use world::{start, Choice, Explored, Faults, RootOrder, WithWorld, World};

#[cfg(test)]
mod tests;
