//! The `accept-order` probe: the report's standalone reproducer. A sender makes K
//! short-lived connections in a tight burst (connect → write `[u32 idx][u32 len][64 B]` →
//! optional TX drain → close, TCP_NODELAY); a receiver accepts K and reads each index; the
//! accept order is compared with the connect order.
//!
//! [`run_local`] runs both ends in network namespaces joined by the [`wire`](crate::wire),
//! whose policy decides what the kernel gets to reorder; [`listen`] and [`connect`] are the
//! two halves for two hosts of a real cluster.

mod drain;
mod receiver;
mod report;
mod sender;
mod stats;

#[cfg(test)]
mod tests;

use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use drain::{drain_txq, DrainSummary, DrainWait};
pub use receiver::{listen, ListenReport, ProbeListener, DEFAULT_IDLE_TIMEOUT};
pub use report::{ProbeReport, WireSummary};
pub use sender::{connect, frame, ConnectReport, CONNECT_TIMEOUT, READY_WAIT};
pub use stats::AcceptOrderStats;

use crate::wire::{host_addr, Policy, Wire, WireError, WireReport};

/// Payload bytes after each frame's 8-byte header.
pub const PAYLOAD_LEN: usize = 64;
/// The receiver's port in a local run.
pub const LOCAL_PORT: u16 = 7000;
/// The sending host of a local run (10.213.0.1).
pub const SENDER_HOST: u8 = 1;
/// The receiving host of a local run (10.213.0.2).
pub const RECEIVER_HOST: u8 = 2;

/// What can go wrong in a probe run.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Setting up or running the wire failed.
    #[error("wire: {0}")]
    Wire(#[from] WireError),
    /// A socket call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A peer sent something that is not a probe frame.
    #[error("protocol: {0}")]
    Protocol(String),
    /// Nothing happened for too long.
    #[error("timed out: {0}")]
    Timeout(String),
}

impl ProbeError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        ProbeError::Io { what: what.into(), source }
    }
}

/// Runs the probe between two namespaces joined by a wire under `policy`: `k` connections,
/// drained with that bound when `drain` is `Some`.
pub fn run_local(k: u32, drain: Option<Duration>, policy: Policy) -> Result<ProbeReport, ProbeError> {
    run_local_detailed(k, drain, policy).map(|(report, _)| report)
}

/// [`run_local`], also returning the wire's full decision log.
pub fn run_local_detailed(
    k: u32,
    drain: Option<Duration>,
    policy: Policy,
) -> Result<(ProbeReport, WireReport), ProbeError> {
    let started = Instant::now();
    let name = policy.to_string();
    let idle = DEFAULT_IDLE_TIMEOUT + policy.longest_hold();
    let wire = Wire::start(2, policy)?;
    let addr = SocketAddr::V4(SocketAddrV4::new(host_addr(RECEIVER_HOST), LOCAL_PORT));
    let (ready_tx, ready_rx) = mpsc::channel();
    let receiver = wire.spawn(RECEIVER_HOST, move || {
        let listener = ProbeListener::bind(addr)?;
        let _ = ready_tx.send(());
        listener.accept_k(k, idle)
    })?;
    if ready_rx.recv_timeout(READY_WAIT).is_err() {
        return Err(match receiver.join()? {
            Err(e) => e,
            Ok(_) => ProbeError::Timeout("the receiver never started listening".into()),
        });
    }
    let sent = wire.spawn(SENDER_HOST, move || connect(addr, k, drain))?.join()??;
    let heard = receiver.join()??;
    let wire_report = wire.shutdown()?;
    let report = ProbeReport::from_halves(name, heard, sent, Some(&wire_report), started.elapsed());
    tracing::info!(%report, "accept-order probe");
    Ok((report, wire_report))
}
