//! Issue 7's RDMA check: do the QP handles the bootstrap delivered actually connect?
//!
//! NVSHMEM's transports alltoall one 24-byte [`QpHandle`](bootsim_nvshmem::QpHandle) per QP and
//! peer, then move each RC QP through INIT → RTR → RTS with the received handle. When the
//! bootstrap hands the alltoall a barrier's payload (PR NVIDIA/nvshmem#97), the handle is zeroed
//! and the RTR `ibv_modify_qp` fails with EINVAL; a handle from the wrong message or peer
//! connects the QP to someone else's. This module reproduces that last step for real and
//! classifies each QP.
//!
//! Layout: everything except `device` is pure logic, always compiled and unit-tested, and
//! usable by the simulator (e.g. [`verdict::predict_world`] to turn a corrupted alltoall into
//! the failures hardware would show):
//!
//! * [`gid`]: choose the local GID from a GID table given as plain data;
//! * [`exchange`]: the NVSHMEM alltoall layout of K handles per peer, and the extra per-rank
//!   record (GID index, MTU, PSN, K) allgathered next to it;
//! * [`canary`]: the 16-byte canary each QP sends, work-request ids and buffer layout;
//! * [`verdict`]: per-QP verdicts, the predictor, the summary and the report;
//! * `device` (cargo feature `rdma`, needs `scripts/install-rdma-deps.sh`): the ibverbs 0.9.2
//!   hardware path that opens the device, creates the QPs, connects them and runs the canary
//!   exchange.

pub mod canary;
pub mod exchange;
pub mod gid;
pub mod verdict;

#[cfg(feature = "rdma")]
pub mod check;
#[cfg(feature = "rdma")]
pub mod device;

pub use canary::{Canary, Side};
pub use exchange::{ExchangeError, ExtraRecord, QpLayout, QpSlot};
pub use gid::{select_gid, GidChoice, GidEntry, GidError, GidType};
pub use verdict::{judge, predict, predict_world, Observation, Predicted, QpFate, QpVerdict, Report, Summary};
