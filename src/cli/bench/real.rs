//! Real sockets: `bootsim smoke --local N --workload nvshmem-init` per variant (wall time of
//! the whole command, processes included), and the drain's wait per message from an in-process
//! run of the same world (one thread and tokio runtime per rank, the library's `run_blocking`).

use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use bootsim_adapters::tokio_sockets::{real_limits, run_blocking, Rendezvous, SessionConfig};
use bootsim_nvshmem::workload::{build_op, Workload};
use bootsim_nvshmem::{Event, Variant};

/// One `bootsim smoke --local n` of `variant`: its wall time and the slowest rank's bootstrap
/// time as the ranks print it (`ok: ... verified in X ms`).
pub fn smoke_local(n: u32, variant: &str) -> anyhow::Result<(Duration, Option<u64>)> {
    let exe = std::env::current_exe().context("locating the bootsim binary")?;
    let start = Instant::now();
    let out = Command::new(exe)
        .args(["smoke", "--local", &n.to_string(), "--workload", "nvshmem-init", "--variant", variant])
        .stderr(Stdio::inherit())
        .output()
        .context("spawning bootsim smoke")?;
    let wall = start.elapsed();
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(out.status.success(), "bootsim smoke --local {n} --variant {variant} failed:\n{text}");
    let slowest =
        text.lines().filter_map(|l| l.split(" verified in ").nth(1)?.strip_suffix(" ms")?.parse::<u64>().ok()).max();
    Ok((wall, slowest))
}

/// The drain over one in-process run.
#[derive(Clone, Copy, Debug, Default)]
pub struct DrainStats {
    /// Messages sent by every rank.
    pub messages: u64,
    /// Drains that completed or gave up.
    pub drains: u64,
    /// Drains that gave up (fail-open).
    pub gave_up: u64,
    /// Total time spent waiting in drains.
    pub waited: Duration,
    /// Wall time of the in-process world.
    pub wall: Duration,
}

impl DrainStats {
    /// Mean drain wait per message sent.
    pub fn per_message(&self) -> Duration {
        if self.messages == 0 {
            Duration::ZERO
        } else {
            self.waited / self.messages as u32
        }
    }
}

/// `nvshmem-init` with `n` ranks on 127.0.0.1 in this process, through a unique-ID file.
pub fn drain_in_process(n: u32, variant_name: &str, seed: u64) -> anyhow::Result<DrainStats> {
    let variant = Variant::preset(variant_name).ok_or_else(|| anyhow!("unknown variant {variant_name}"))?;
    let dir = std::env::temp_dir().join(format!("bootsim-bench-{}-{variant_name}-{seed}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let uid = dir.join("uid");
    let specs = (Workload::NvshmemInit { qps: 2 }).ops(seed);
    let magic = 0x6265_6e63_6800_0000 ^ seed;
    let start = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|rank| {
            let ops = specs.iter().enumerate().map(|(i, s)| build_op(*s, seed, i as u32, rank, n)).collect();
            let cfg = SessionConfig {
                rank,
                nranks: n,
                variant,
                limits: real_limits(Duration::from_secs(30)),
                magic,
                ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
                rendezvous: Rendezvous::UidFile(uid.clone()),
                uid_wait: Duration::from_secs(30),
            };
            std::thread::spawn(move || run_blocking(cfg, ops))
        })
        .collect();
    let mut stats = DrainStats::default();
    let mut failure = None;
    for (rank, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(run)) => {
                for e in &run.events {
                    match e {
                        Event::MessageSent { .. } => stats.messages += 1,
                        Event::DrainCompleted { waited, .. } => {
                            stats.drains += 1;
                            stats.waited += *waited;
                        }
                        Event::DrainGaveUp { waited, .. } => {
                            stats.drains += 1;
                            stats.gave_up += 1;
                            stats.waited += *waited;
                        }
                        _ => {}
                    }
                }
            }
            Ok(Err(e)) => failure = failure.or(Some(format!("rank {rank}: {e}"))),
            Err(_) => failure = failure.or(Some(format!("rank {rank} panicked"))),
        }
    }
    stats.wall = start.elapsed();
    let _ = std::fs::remove_dir_all(&dir);
    match failure {
        Some(f) => Err(anyhow!("in-process nvshmem-init, {n} ranks, {variant_name}: {f}")),
        None => Ok(stats),
    }
}
