//! bootsim-core: NVSHMEM's UID bootstrap (and its variants) as pure, sans-IO state machines.
//!
//! Nothing here performs I/O, reads a clock, spawns a thread, draws a random number or
//! iterates a hash map: time comes in as [`Instant`] values and every effect goes out as an
//! [`Output`] the driver carries out. A [`Rank`] and the [`Root`] share one contract: feed
//! [`Input`]s with `handle`, drain `poll_output`, sleep until `poll_timeout`, call
//! `handle_timeout`.

#![forbid(unsafe_code)]

pub mod accept_policy;
pub mod codec;
pub mod drain;
pub mod error;
pub mod ids;
pub mod io;
#[cfg(any(test, feature = "testing"))]
pub mod memnet;
pub mod nvshmem;
mod outbox;
pub mod ports;
pub mod qp_handle;
pub mod rank;
pub mod record;
pub mod report;
pub mod retry;
pub mod root;
pub mod seam;
pub mod time;
pub mod uid;
pub mod variant;

pub use drain::{DrainPoll, DrainStep};
pub use error::{BootstrapError, Culprit};
pub use ids::{ConnId, Listener, MsgOrigin, OpId, OpKind, OpName};
pub use io::{Completion, Event, Input, Limits, Output, OwnedInput};
pub use qp_handle::{GidDisplay, QpHandle};
pub use rank::{Op, Rank, RankConfig, Waiting};
pub use record::{DrainGiveUp, MessageLog, RankRecord, RootEnd, RunRecord, SentMsg, TakenMsg};
pub use retry::{ConnectFailure, ConnectRetry, GaveUp, RetryPolicy, RetryStep};
pub use root::{Root, RootConfig};
pub use time::Instant;
pub use uid::{UniqueId, NVSHMEM_UID_VERSION};
pub use variant::{SizePolicy, TagScheme, Transport, Variant, MAX_CALL_TAG, PRESETS};
