//! bootsim-core: what every bootstrap protocol and every world share — the protocol seam, ids,
//! time, the run record, the connect-retry and drain policies, and the codec helpers the
//! protocols frame their bytes with.
//!
//! Nothing here performs I/O, reads a clock, spawns a thread, draws a random number or
//! iterates a hash map: time comes in as [`Instant`] values and every effect goes out as a
//! [`seam::Output`] the driver carries out. A protocol's nodes ([`seam::Node`]) share one
//! contract: feed [`seam::Input`]s with `handle`, drain `poll_output`, sleep until
//! `poll_timeout`, call `handle_timeout`.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod accept_policy;
pub mod codec;
pub mod culprit;
pub mod drain;
pub mod duration;
pub mod ending;
pub mod ids;
#[cfg(any(test, feature = "testing"))]
pub mod memnet;
pub mod record;
pub mod report;
pub mod retry;
pub mod seam;
pub mod seed;
pub mod time;

pub use culprit::Culprit;
pub use drain::{DrainPoll, DrainStep};
pub use ending::{Awaited, Blocked, RecordedError};
pub use ids::{ConnId, MsgOrigin, OpId, OpName, OpType, OpTypeDef};
pub use record::{DrainGiveUp, MessageLog, RankRecord, RootEnd, RunRecord, SentMsg, TakenMsg};
pub use retry::{ConnectFailure, ConnectRetry, GaveUp, RetryPolicy, RetryStep};
pub use time::Instant;
