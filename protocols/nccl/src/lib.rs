//! bootsim-nccl: NCCL's TCP bootstrap as pure, sans-IO state machines, per release (2.8, 2.19,
//! 2.21, 2.30), with the workloads `nccl-init` and `nccl-p2p` lowered from NCCL's source.
//!
//! Nothing here performs I/O, reads a clock, spawns a thread, draws a random number or iterates a
//! hash map. A [`Rank`] and the [`Root`] take the seam's [`Input`]s with `handle` and give the
//! seam's [`Output`]s with `poll_output` ([`Effect`]s for the world, [`Observation`]s for the
//! judge: the end of a step as a [`seam::Completion`], anything else as an [`Event`]). NCCL's
//! bootstrap has no timeouts, so neither has this model: a hang is the world's to detect
//! ([`Rank::waiting_for`] names what each rank waits for). Facts and source lines:
//! docs/nccl-protocol.md.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod bootstrap_op;
pub mod codec;
pub mod error;
pub mod io;
#[cfg(any(test, feature = "testing"))]
pub mod memnet;
pub mod oracle;
pub mod program;
pub mod rank;
pub mod root;
pub mod seam;
pub mod variant;
pub mod workload;

pub use bootstrap_op::BootstrapOp;
pub use error::{NcclError, RootError};
pub use io::{Effect, Event, Input, Listener, Observation, Output};
pub use oracle::{Mismatch, Oracle};
pub use program::{Call, CallKind, Graph, Planned, Step};
pub use rank::{Rank, RankConfig};
pub use root::{Root, RootConfig};
pub use variant::{Variant, ALL};
pub use workload::{nccl_init, nccl_p2p, nccl_pair, InitParams, Op, P2pParams, Workload, OPS, WORKLOADS};
