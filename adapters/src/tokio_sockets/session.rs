//! One rank per process on real sockets: rendezvous through a session address or a unique-ID
//! file, rank 0 also running the root.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bootsim_nvshmem::{BootstrapError, Limits, Op, RankConfig, RootConfig, UniqueId, Variant};
use tokio::sync::oneshot;

use super::TokioNet;
use crate::nvshmem::{run_rank, run_root_notify, DriverError, RankRun, RootRun};
use bootsim_driver::is_stranger_dropped;

/// How the ranks find the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rendezvous {
    /// `NVSHMEM_BOOTSTRAP_UID_SESSION_ID` semantics: the root listens at this address (rank 0
    /// runs it) and knows the world size up front.
    Session(SocketAddr),
    /// Rank 0 runs the root on an ephemeral port and writes the 128-byte unique ID to this path
    /// (atomically); the other ranks poll for it. The root learns the world size at check-in.
    UidFile(PathBuf),
}

/// Everything one rank process needs. Its `Debug` shows the magic's fingerprint, never the
/// magic.
#[derive(Clone)]
pub struct SessionConfig {
    /// This rank.
    pub rank: u32,
    /// World size.
    pub nranks: u32,
    /// Protocol variant.
    pub variant: Variant,
    /// Limits for the rank and, on rank 0, the root (see [`super::real_limits`]).
    pub limits: Limits,
    /// The session magic (with [`Rendezvous::UidFile`], only rank 0's is used: it is in the file).
    pub magic: u64,
    /// The address this rank's listeners bind.
    pub ip: IpAddr,
    /// How to find the root.
    pub rendezvous: Rendezvous,
    /// How long a rank other than 0 waits for the unique-ID file.
    pub uid_wait: Duration,
}

impl std::fmt::Debug for SessionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let SessionConfig { rank, nranks, variant, limits, magic, ip, rendezvous, uid_wait } = self;
        f.debug_struct("SessionConfig")
            .field("rank", rank)
            .field("nranks", nranks)
            .field("variant", variant)
            .field("limits", limits)
            .field("magic", &bootsim_core::codec::RedactedMagic(*magic))
            .field("ip", ip)
            .field("rendezvous", rendezvous)
            .field("uid_wait", uid_wait)
            .finish()
    }
}

/// [`run_process`] on a fresh current-thread tokio runtime.
pub fn run_blocking(cfg: SessionConfig, ops: Vec<Op>) -> Result<RankRun, DriverError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| DriverError::Setup(format!("tokio runtime: {e}")))?;
    rt.block_on(run_process(cfg, ops))
}

/// [`run_blocking`], given up once `stop()` has held for `grace` (another rank of a mixed
/// session failed, and a launcher would end the job): `None` then.
pub fn run_blocking_until(
    cfg: SessionConfig,
    ops: Vec<Op>,
    stop: &dyn Fn() -> bool,
    grace: Duration,
) -> Option<Result<RankRun, DriverError>> {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return Some(Err(DriverError::Setup(format!("tokio runtime: {e}")))),
    };
    rt.block_on(async {
        let stopped = async {
            while !stop() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tokio::time::sleep(grace).await;
        };
        tokio::select! {
            biased;
            r = run_process(cfg, ops) => Some(r),
            () = stopped => None,
        }
    })
}

/// [`run_blocking`], sending the root's address on `listening` once it listens (rank 0 with a
/// session address): whoever starts the other ranks can wait for it, so that no rank dials a
/// root that is not listening yet (a refused, retried connect is one more connection on the wire).
pub fn run_blocking_notify(
    cfg: SessionConfig,
    ops: Vec<Op>,
    listening: std::sync::mpsc::Sender<SocketAddr>,
) -> Result<RankRun, DriverError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| DriverError::Setup(format!("tokio runtime: {e}")))?;
    rt.block_on(run_process_notify(cfg, ops, Some(listening)))
}

/// Runs this process's rank (and on rank 0 the root) through init and `ops`.
pub async fn run_process(cfg: SessionConfig, ops: Vec<Op>) -> Result<RankRun, DriverError> {
    run_process_notify(cfg, ops, None).await
}

/// [`run_process`]; with a session address, rank 0 sends the root's address on `listening` once
/// the root listens.
async fn run_process_notify(
    cfg: SessionConfig,
    ops: Vec<Op>,
    listening: Option<std::sync::mpsc::Sender<SocketAddr>>,
) -> Result<RankRun, DriverError> {
    let version = cfg.variant.uid_version();
    let net = TokioNet::new(cfg.ip);
    let rank_cfg =
        |uid| RankConfig { rank: cfg.rank, nranks: cfg.nranks, uid, variant: cfg.variant, limits: cfg.limits };
    match &cfg.rendezvous {
        Rendezvous::Session(addr) => {
            let uid = UniqueId { version, root: *addr, magic: cfg.magic };
            let rank = run_rank(net, rank_cfg(uid), ops);
            if cfg.rank != 0 {
                return rank.await;
            }
            let root_net = TokioNet { rendezvous_port: addr.port(), ..TokioNet::new(addr.ip()) };
            let (tx, rx) = oneshot::channel();
            let root_cfg = RootConfig { uid, nranks: Some(cfg.nranks), limits: cfg.limits };
            let root = run_root_notify(root_net, root_cfg, listening.is_some().then_some(tx));
            let forward = async move {
                if let (Some(to), Ok(addr)) = (listening, rx.await) {
                    let _ = to.send(addr);
                }
            };
            let root = async move { tokio::join!(root, forward).0 };
            let (mut rank, mut root) = (std::pin::pin!(rank), std::pin::pin!(root));
            // A root that cannot listen (the port is in use) ends the session at once, with
            // the address: rank 0 would otherwise wait its whole op timeout for itself.
            tokio::select! {
                biased;
                r = &mut root => match r {
                    Err(DriverError::Root(BootstrapError::RootListen { reason })) => {
                        Err(DriverError::Root(BootstrapError::RootListen { reason: format!("{addr}: {reason}") }))
                    }
                    r => combine(rank.await, r),
                },
                r = &mut rank => combine(r, root.await),
            }
        }
        Rendezvous::UidFile(path) if cfg.rank != 0 => {
            let uid = read_uid_file(path, cfg.uid_wait).await?;
            run_rank(net, rank_cfg(uid), ops).await
        }
        Rendezvous::UidFile(path) => {
            let placeholder = UniqueId { version, root: SocketAddr::new(cfg.ip, 0), magic: cfg.magic };
            let (tx, rx) = oneshot::channel();
            let root_cfg = RootConfig { uid: placeholder, nranks: None, limits: cfg.limits };
            let root = run_root_notify(net.clone(), root_cfg, Some(tx));
            let rank = async {
                let addr = rx.await.map_err(|_| DriverError::Setup("the root did not open its listener".into()))?;
                let uid = UniqueId { root: addr, ..placeholder };
                write_uid_file(path, &uid).map_err(|e| DriverError::Setup(format!("{}: {e}", path.display())))?;
                run_rank(net.clone(), rank_cfg(uid), ops).await
            };
            let (rank, root) = tokio::join!(rank, root);
            combine(rank, root)
        }
    }
}

/// Rank 0's result: its own error first (the root's is logged), else the root's. The root's
/// dropped strangers join rank 0's events (its process ran both), in time order.
fn combine(rank: Result<RankRun, DriverError>, root: Result<RootRun, DriverError>) -> Result<RankRun, DriverError> {
    let mut rank = rank;
    let root = root.map(|root_run| match &mut rank {
        Ok(run) => absorb_strangers(run, &root_run),
        Err(DriverError::Failed { run, .. }) => absorb_strangers(run, &root_run),
        Err(_) => {}
    });
    match (rank, root) {
        (Ok(run), Ok(())) => Ok(run),
        // Both stalled: the root knows the culprit (the ranks that never checked in); say it
        // where rank 0 reports its own wait.
        (
            Err(DriverError::Failed {
                error: BootstrapError::Timeout { rank, op, waiting, after, peer, blocked },
                completed,
                run,
                culprit,
            }),
            Err(DriverError::Root(BootstrapError::RootTimeout { waiting: root_waiting, missing, .. })),
        ) => Err(DriverError::Failed {
            error: BootstrapError::Timeout {
                rank,
                op,
                waiting: format!("{waiting}; the root waits for {root_waiting}"),
                after,
                peer,
                blocked,
            },
            completed,
            run,
            culprit: missing.first().map(|&r| bootsim_core::Culprit::Rank(r)).or(culprit),
        }),
        (Ok(_) | Err(DriverError::Setup(_)), Err(root)) => Err(root),
        (Err(e), root) => {
            if let Err(r) = root {
                tracing::error!("{r}");
            }
            Err(e)
        }
    }
}

/// Adds the root's dropped-stranger events to rank 0's, keeping time order.
fn absorb_strangers(run: &mut RankRun, root: &RootRun) {
    let theirs = root.events_at.iter().zip(&root.events).filter(|(_, e)| is_stranger_dropped(*e));
    let mut all: Vec<_> = run.events_at.iter().copied().zip(run.events.drain(..)).collect();
    all.extend(theirs.map(|(t, e)| (*t, e.clone())));
    all.sort_by_key(|(t, _)| *t);
    (run.events_at, run.events) = all.into_iter().unzip();
}

/// Writes the 128-byte unique ID to `path` atomically (a temporary file, then a rename).
pub fn write_uid_file(path: &Path, uid: &UniqueId) -> std::io::Result<()> {
    write_atomically(path, &uid.encode())
}

/// Writes `bytes` to `path` so that readers see nothing or all of it (a temporary file, then a
/// rename): how rank 0 publishes a unique ID, whichever implementation made it. The file is
/// mode 600: the unique ID holds the session magic.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    f.write_all(bytes)?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// Polls `path` every 10 ms until it holds a unique ID, for at most `wait`.
pub async fn read_uid_file(path: &Path, wait: Duration) -> Result<UniqueId, DriverError> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if let Ok(bytes) = std::fs::read(path) {
            if let Ok(b) = <[u8; UniqueId::LEN]>::try_from(bytes.as_slice()) {
                return UniqueId::decode(&b)
                    .map_err(|e| DriverError::Setup(format!("{}: bad unique ID: {e}", path.display())));
            }
        }
        if tokio::time::Instant::now() >= deadline {
            let ms = wait.as_millis();
            return Err(DriverError::Setup(format!(
                "no unique ID in {} after {ms} ms (is rank 0 running?)",
                path.display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
