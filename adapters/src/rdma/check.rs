//! The whole hardware check of one rank, with the bootstrap supplied by the caller: open the
//! device, create K RC QPs per peer, exchange their handles through the bootstrap's alltoall
//! (NVSHMEM's layout) and the extra records through an allgather, connect every QP to the
//! handle it received, run a bootstrap barrier, then send canaries and judge each QP.

use std::time::Duration;

use bootsim_nvshmem::Op;

use super::device::{open, QpConfig, RdmaError, DEFAULT_CANARY_DEADLINE};
use super::exchange::{ExtraRecord, QpLayout};
use super::verdict::Report;

/// What the check needs from the command line.
#[derive(Clone, Debug, Default)]
pub struct CheckOptions {
    /// Device name (`mlx5_0`); the first device when `None`.
    pub device: Option<String>,
    /// GID index; the port's RoCE v2 GID (IPv4-mapped preferred) when `None`.
    pub gid_index: Option<u32>,
    /// RC QPs per peer.
    pub qps_per_peer: u32,
}

/// Why the check could not produce a per-QP report.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The hardware side failed (no device is the common case on a machine without RDMA).
    #[error(transparent)]
    Rdma(#[from] RdmaError),
    /// The bootstrap failed (its error names rank, op and step).
    #[error("bootstrap {step}: {error}")]
    Bootstrap {
        /// Which exchange.
        step: &'static str,
        /// The bootstrap's error text.
        error: String,
    },
}

/// Runs the check on rank `rank` of `nranks`. `bootstrap(ops, step)` runs `ops` through a
/// bootstrap session and returns each op's result bytes (one session per call).
pub fn run_check(
    rank: u32,
    nranks: u32,
    opts: &CheckOptions,
    bootstrap: &mut dyn FnMut(Vec<Op>, &'static str) -> Result<Vec<Vec<u8>>, String>,
) -> Result<Report, CheckError> {
    let ctx = open(opts.device.as_deref())?;
    let gid = ctx.choose_gid(opts.gid_index)?;
    let layout = QpLayout::new(nranks, rank, opts.qps_per_peer).map_err(RdmaError::from)?;
    let resources = ctx.resources(QpConfig::new(layout, &gid))?;
    let qps = resources.create_qps()?;
    let extra = qps.extra_record();
    let exchange = vec![Op::Allgather { mine: extra.encode().to_vec() }, Op::Alltoall { chunks: qps.send_payload() }];
    let results = bootstrap(exchange, "handle exchange")
        .map_err(|error| CheckError::Bootstrap { step: "handle exchange", error })?;
    let [extras, handles] = results.as_slice() else {
        return Err(CheckError::Bootstrap {
            step: "handle exchange",
            error: format!("{} results for 2 operations", results.len()),
        });
    };
    ExtraRecord::decode_all(extras, &extra).map_err(RdmaError::from)?;
    let received = layout.decode(handles).map_err(RdmaError::from)?;
    let connected = qps.connect(&received)?;
    bootstrap(vec![Op::Barrier { word: [0; 4] }], "barrier")
        .map_err(|error| CheckError::Bootstrap { step: "barrier", error })?;
    Ok(connected.exchange_canaries(DEFAULT_CANARY_DEADLINE)?)
}

/// The canary deadline, for messages.
pub const CANARY_DEADLINE: Duration = DEFAULT_CANARY_DEADLINE;
