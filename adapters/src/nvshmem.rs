//! NVSHMEM's UID bootstrap in the real worlds: its rank and root built from their configs
//! (operations queued) and handed to the protocol-blind async driver (`bootsim_driver`), as
//! `sim/src/protocol/nvshmem/` builds them for the engines; and the driver's run types for
//! NVSHMEM's nodes.

use std::net::SocketAddr;

use bootsim_core::Instant;
use bootsim_driver::{Backend, NodeRun};
use bootsim_nvshmem::seam::NvshmemNode;
use bootsim_nvshmem::{Op, Rank, RankConfig, Root, RootConfig};
use tokio::sync::oneshot;

/// What an NVSHMEM rank did under the driver: its completions (init first) and events.
pub type RankRun = NodeRun<NvshmemNode>;
/// What NVSHMEM's root did under the driver: its events (check-ins, dropped strangers) and
/// its session's end.
pub type RootRun = NodeRun<NvshmemNode>;
/// Why a driver run of an NVSHMEM node failed.
pub type DriverError = bootsim_driver::DriverError<NvshmemNode>;

/// A rank at the driver's start (time zero on its clock), `ops` queued after init.
pub fn rank_node(cfg: RankConfig, ops: Vec<Op>) -> NvshmemNode {
    let mut rank = Rank::new(cfg, Instant::ZERO);
    for op in ops {
        rank.push(Instant::ZERO, op);
    }
    NvshmemNode::Rank(rank)
}

/// The root at the driver's start.
pub fn root_node(cfg: RootConfig) -> NvshmemNode {
    NvshmemNode::Root(Root::new(cfg, Instant::ZERO))
}

/// Runs one rank over `backend`: init, then `ops` ([`bootsim_driver::run_rank`]).
pub async fn run_rank<B: Backend>(backend: B, cfg: RankConfig, ops: Vec<Op>) -> Result<RankRun, DriverError> {
    let rank = cfg.rank;
    bootsim_driver::run_rank(backend, rank, rank_node(cfg, ops)).await
}

/// Runs the root over `backend`, sending its address on `notify` once it listens
/// ([`bootsim_driver::run_root_notify`]).
pub async fn run_root_notify<B: Backend>(
    backend: B,
    cfg: RootConfig,
    notify: Option<oneshot::Sender<SocketAddr>>,
) -> Result<RootRun, DriverError> {
    bootsim_driver::run_root_notify(backend, root_node(cfg), notify).await
}
