//! bootsim-nvshmem: NVSHMEM's UID bootstrap (and its variants) as pure, sans-IO state machines,
//! one protocol on bootsim-core's seam.
//!
//! Nothing here performs I/O, reads a clock, spawns a thread, draws a random number or
//! iterates a hash map: time comes in as [`Instant`](bootsim_core::Instant) values, and every
//! effect and observation goes out as the seam's own [`Output`], which the driver carries out
//! or records. A [`Rank`] and the [`Root`] share one contract: feed [`Input`]s with `handle`,
//! drain `poll_output`, sleep until `poll_timeout`, call `handle_timeout`. [`NvshmemNode`] is
//! both as one seam node.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod error;
pub mod io;
pub mod listener;
#[cfg(any(test, feature = "testing"))]
pub mod memnet;
pub mod op_kind;
pub mod ports;
pub mod qp_handle;
pub mod rank;
pub mod report;
pub mod root;
pub mod seam;
pub mod uid;
pub mod variant;
pub mod workload;

pub use error::BootstrapError;
pub use io::{Completion, Effect, Event, Input, Limits, Observation, Output, OwnedInput};
pub use listener::Listener;
pub use op_kind::OpKind;
pub use qp_handle::{GidDisplay, QpHandle};
pub use rank::{ChunkSink, Chunked, Chunks, MakeChunk, Op, Rank, RankConfig, Waiting};
pub use root::{Root, RootConfig};
pub use seam::NvshmemNode;
pub use uid::{UniqueId, NVSHMEM_UID_VERSION};
pub use variant::{SizePolicy, TagScheme, Transport, Variant, MAX_CALL_TAG, PRESETS};
