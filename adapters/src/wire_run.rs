//! N real ranks (rank 0 also the root) on the userspace [`wire`](crate::wire): rank `k` runs
//! the real tokio adapter in its own network namespace as host `k + 1` (10.213.0.`k+1`), so
//! every connection between ranks crosses the wire and its [`Policy`].
//!
//! The ranks are threads of this process, each with its own current-thread tokio runtime,
//! inside its host's namespace ([`Wire::spawn`]). Rendezvous is by session address: the root
//! listens on host 1 at [`ROOT_PORT`]. Connections of rank 0 to its own root stay inside host
//! 1's namespace and never reach the wire; the root's connections to the other ranks do, and
//! share the `pair_conn` numbering of host 1's connections to them.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use bootsim_nvshmem::{Limits, Op, Variant};

use crate::nvshmem::{DriverError, RankRun};
use crate::tokio_sockets::{run_blocking, run_blocking_notify, Rendezvous, SessionConfig};
use crate::wire::{host_addr, Policy, Wire, WireError, WireReport, MAX_HOSTS};

/// The port of the root's listener on host 1.
pub const ROOT_PORT: u16 = 7000;

/// The longest the other ranks wait for rank 0's root to listen before starting anyway.
const ROOT_LISTEN_WAIT: Duration = Duration::from_secs(10);

/// The wire host (1-based) that runs rank `rank`.
pub fn rank_host(rank: u32) -> u8 {
    u8::try_from(rank + 1).unwrap_or(u8::MAX)
}

/// The rank (0-based) that runs on wire host `host`.
pub fn host_rank(host: u8) -> u32 {
    u32::from(host).saturating_sub(1)
}

/// What every rank of a wire run shares. Its `Debug` shows the magic's fingerprint, never the
/// magic.
#[derive(Clone, Copy)]
pub struct WireRunConfig {
    /// World size, 1..=254.
    pub nranks: u32,
    /// Protocol variant of every rank and the root.
    pub variant: Variant,
    /// Limits of every rank and the root.
    pub limits: Limits,
    /// The session magic.
    pub magic: u64,
}

impl std::fmt::Debug for WireRunConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let WireRunConfig { nranks, variant, limits, magic } = self;
        f.debug_struct("WireRunConfig")
            .field("nranks", nranks)
            .field("variant", variant)
            .field("limits", limits)
            .field("magic", &bootsim_core::codec::RedactedMagic(*magic))
            .finish()
    }
}

/// What a wire run produced.
#[derive(Debug)]
pub struct WireRun {
    /// Each rank's run or error, by rank.
    pub ranks: Vec<Result<RankRun, DriverError>>,
    /// Each rank's wall time from its start to its end, by rank.
    pub rank_times: Vec<Duration>,
    /// The wire's decisions and counters.
    pub wire: WireReport,
    /// Wall time of the whole run, namespaces included.
    pub elapsed: Duration,
}

/// Runs `cfg.nranks` ranks, rank `r` issuing `ops[r]` after init, behind a wire with `policy`.
/// Fails only when the wire itself does (setup, a panicked thread); a rank's failure is in
/// [`WireRun::ranks`].
pub fn run_ranks(cfg: WireRunConfig, ops: Vec<Vec<Op>>, policy: Policy) -> Result<WireRun, WireError> {
    let started = Instant::now();
    if cfg.nranks == 0 || cfg.nranks > u32::from(MAX_HOSTS) {
        return Err(WireError::Config(format!("{} ranks: need 1..={MAX_HOSTS}", cfg.nranks)));
    }
    if ops.len() != cfg.nranks as usize {
        return Err(WireError::Config(format!("{} op lists for {} ranks", ops.len(), cfg.nranks)));
    }
    let wire = Wire::start(rank_host(cfg.nranks - 1), policy)?;
    let root = SocketAddr::new(IpAddr::V4(host_addr(rank_host(0))), ROOT_PORT);
    let mut tasks = Vec::with_capacity(ops.len());
    for (rank, ops) in (0..cfg.nranks).zip(ops) {
        let session = SessionConfig {
            rank,
            nranks: cfg.nranks,
            variant: cfg.variant,
            limits: cfg.limits,
            magic: cfg.magic,
            ip: IpAddr::V4(host_addr(rank_host(rank))),
            rendezvous: Rendezvous::Session(root),
            uid_wait: Duration::ZERO,
        };
        if rank == 0 {
            // The root listens before any other rank starts: a rank that dialled it earlier
            // would be refused and retry, one more connection on the wire, shifting every
            // `select=pair:...:N` ordinal on that host pair (seen under CPU load).
            let (tx, listening) = std::sync::mpsc::channel();
            tasks.push(wire.spawn(rank_host(rank), move || {
                let t0 = Instant::now();
                let result = run_blocking_notify(session, ops, tx);
                (result, t0.elapsed())
            })?);
            // Disconnected: rank 0 failed before listening; the others then report the root missing.
            let _ = listening.recv_timeout(ROOT_LISTEN_WAIT);
            continue;
        }
        tasks.push(wire.spawn(rank_host(rank), move || {
            let t0 = Instant::now();
            let result = run_blocking(session, ops);
            (result, t0.elapsed())
        })?);
    }
    let mut ranks = Vec::with_capacity(tasks.len());
    let mut rank_times = Vec::with_capacity(tasks.len());
    for task in tasks {
        let (result, took) = task.join()?;
        ranks.push(result);
        rank_times.push(took);
    }
    let wire = wire.shutdown()?;
    Ok(WireRun { ranks, rank_times, wire, elapsed: started.elapsed() })
}
