//! bootsim-sim: the adversarial world around the sans-IO bootstrap core.
//!
//! A seeded model of the Linux kernel path from SYN to accept() ([`kernel`]), workloads with
//! checkable payloads ([`bootsim_nvshmem::workload`]), case strings ([`case`]), engines ([`engine`]), the
//! oracles that judge a run ([`oracle`]) and the sweep runner ([`sweep`]).

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod case;
pub mod engine;
pub mod equivalence;
pub mod explain;
pub mod explore;
pub mod harness;
pub mod kernel;
pub mod oracle;
pub mod protocol;
pub mod run;
pub mod shrink;
mod spare;
pub mod sweep;
pub mod timeline;
pub mod words;

pub use case::{Case, CaseBuilder, CaseError};
pub use explain::explain;
pub use oracle::{Detail, Finding, Provenance, Verdict, Who, WrongItem};
pub use run::{run_case, RunReport};
