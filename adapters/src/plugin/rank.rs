//! The body of one plugin rank, run in a process of its own: load, pre-init, take or read the
//! unique ID, init, then each operation, reporting every call's start and end as a JSON line.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bootsim_nvshmem::Op;
use serde::{Deserialize, Serialize};

use super::library::{Plugin, PluginRank, UID_LEN};
use super::PluginError;

/// Where this rank gets the 128-byte unique ID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UidSource {
    /// Rank 0: call `get_unique_id` (starts the root here) and publish it at this path.
    Create(PathBuf),
    /// Other ranks: read it from this path, waiting up to the timeout for it to appear.
    Read(PathBuf, Duration),
    /// Every rank the same bytes (NVSHMEM's session mode: the session address and a shared
    /// magic; rank 0's plugin starts the root inside init when NVSHMEM_BOOTSTRAP_UID_SESSION_ID
    /// is set).
    Given(Box<[u8; UID_LEN]>),
}

/// What one plugin rank process runs.
#[derive(Clone, Debug)]
pub struct PluginRankConfig {
    /// The plugin's path.
    pub plugin: PathBuf,
    /// The ABI version presented to it.
    pub abi: i32,
    /// This rank.
    pub rank: u32,
    /// World size.
    pub nranks: u32,
    /// The unique ID.
    pub uid: UidSource,
    /// 3.8.0 only: preset the tag counter after init (to reach its limit).
    pub tag_counter: Option<u64>,
}

/// One line of a rank process's stdout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RankLine {
    /// A call begins: `init`, or workload operation `index` of `kind`.
    Begin {
        /// The call, as the trace names it ("init", "alltoall #2").
        what: String,
        /// The workload operation's index (`None`: init).
        index: Option<u32>,
    },
    /// It returned 0; `bytes` is the received buffer (empty for init and barrier).
    Done {
        /// The received buffer.
        bytes: Vec<u8>,
    },
    /// It failed.
    Failed {
        /// The error, as text.
        error: String,
        /// The call's non-zero return code, when the plugin returned one.
        rc: Option<i32>,
    },
}

/// Runs the rank, writing records to `out`; returns the process exit code (0: every call
/// returned 0; 1: one failed, and the rank stopped there, as an application would).
pub fn run_rank(cfg: &PluginRankConfig, ops: &[Op], out: &mut impl Write) -> i32 {
    let mut emit = |r: RankLine| {
        let _ = serde_json::to_writer(&mut *out, &r);
        let _ = out.write_all(b"\n");
        let _ = out.flush();
    };
    emit(RankLine::Begin { what: "init".into(), index: None });
    let plugin = match Plugin::open(&cfg.plugin, cfg.abi) {
        Ok(p) => p,
        Err(e) => return fail(&mut emit, e),
    };
    let mut handle = match init(&plugin, cfg) {
        Ok(h) => h,
        Err(e) => return fail(&mut emit, e),
    };
    emit(RankLine::Done { bytes: Vec::new() });
    for (i, op) in ops.iter().enumerate() {
        let what = match op {
            Op::Allgather { .. } => "allgather",
            Op::Alltoall { .. } => "alltoall",
            Op::Barrier { .. } => "barrier",
            Op::Send { .. } | Op::Recv { .. } => "p2p",
        };
        // Announced before the call: a call that never returns is named by it.
        emit(RankLine::Begin { what: format!("{what} #{i}"), index: Some(i as u32) });
        let result = match op {
            Op::Allgather { mine } => handle.allgather(mine),
            Op::Alltoall { chunks } => handle.alltoall(chunks),
            Op::Barrier { .. } => handle.barrier().map(|()| Vec::new()),
            Op::Send { .. } | Op::Recv { .. } => Err(PluginError::Usage("the plugin has no point-to-point API".into())),
        };
        match result {
            Ok(bytes) => emit(RankLine::Done { bytes }),
            Err(e) => return fail(&mut emit, e),
        }
    }
    0
}

fn init<'p>(plugin: &'p Plugin, cfg: &PluginRankConfig) -> Result<PluginRank<'p>, PluginError> {
    let mut handle = plugin.pre_init()?;
    let uid = match &cfg.uid {
        UidSource::Create(path) => {
            let uid = handle.unique_id()?;
            crate::tokio_sockets::write_atomically(path, &uid)
                .map_err(|e| PluginError::Usage(format!("writing {}: {e}", path.display())))?;
            uid
        }
        UidSource::Read(path, wait) => read_uid(path, *wait)?,
        UidSource::Given(uid) => **uid,
    };
    handle.init(&uid, cfg.rank, cfg.nranks)?;
    if let Some(v) = cfg.tag_counter {
        handle.set_tag_counter_3_8(v, cfg.rank)?;
    }
    Ok(handle)
}

fn fail(emit: &mut impl FnMut(RankLine), e: PluginError) -> i32 {
    let rc = match e {
        PluginError::Call { rc, .. } => Some(rc),
        _ => None,
    };
    emit(RankLine::Failed { error: e.to_string(), rc });
    1
}

fn read_uid(path: &Path, wait: Duration) -> Result<[u8; UID_LEN], PluginError> {
    let until = Instant::now() + wait;
    loop {
        match std::fs::read(path) {
            Ok(b) if b.len() == UID_LEN => return Ok(b.try_into().expect("checked length")),
            Ok(b) => {
                return Err(PluginError::Usage(format!(
                    "{}: {} bytes, not a 128-byte unique ID",
                    path.display(),
                    b.len()
                )))
            }
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => {
                return Err(PluginError::Usage(format!(
                    "rank 0 did not publish the unique ID at {} within {} ms: {e}",
                    path.display(),
                    wait.as_millis()
                )))
            }
        }
    }
}
