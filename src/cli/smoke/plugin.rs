//! `bootsim smoke --plugin V|PATH --local N [--plugin-ranks LIST] [--wire POLICY]`: NVSHMEM's
//! real UID bootstrap plugin as some or all of the ranks, bootsim-core as the others, judged by
//! the same oracle as simulation.
//!
//! A plugin rank is a process of its own (`bootsim plugin-rank`): NVSHMEM blocks forever on a
//! lost message and exits on some errors, so the parent bounds each rank by `--op-timeout-ms`
//! and names where it stopped. A bootsim-core rank is a thread running the async driver over
//! tokio sockets. Rendezvous is a unique-ID file in a fresh temporary folder: rank 0, plugin or
//! core, runs the root and writes NVSHMEM's 128-byte ID there. With `--wire`, rank r runs in
//! network namespace r+1 behind the userspace wire (a plugin child inherits its thread's
//! namespace; `NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=wire<host>` picks its interface).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bootsim_adapters::plugin::{supervise_with, Held, PluginSpec, AFTER_PEER_FAILED};
use bootsim_adapters::tokio_sockets::{real_limits, run_blocking_until, Rendezvous, SessionConfig};
use bootsim_adapters::wire::{self, host_addr, Policy, Wire, WireReport};
use bootsim_adapters::wire_run::rank_host;
use bootsim_core::RankRecord;
use bootsim_driver::rank_record;
use bootsim_nvshmem::workload::{build_op, format_ops, OpSpec};
use bootsim_nvshmem::Variant;
use bootsim_sim::{Finding, Verdict};

use super::consequence::{self, lost_the_root, root_addr, Ending};
use super::report::print_iteration;
use crate::cli::core_rank::CoreRankOut;
use crate::cli::scratch::{die_with_parent, ScratchDir};
use crate::cli::shuffle::Interposer;
use bootsim_interposer::LogSummary;

/// One session's make-up.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    /// World size.
    pub n: u32,
    /// The real plugin.
    pub plugin: PluginSpec,
    /// Ranks that run the plugin; the others run bootsim-core.
    pub plugin_ranks: BTreeSet<u32>,
    /// bootsim-core's variant for the other ranks.
    pub core_variant: Variant,
    /// The collectives after init.
    pub specs: Vec<OpSpec>,
    /// Payload seed.
    pub seed: u64,
    /// Bound on each operation (NVSHMEM has none).
    pub op_timeout: Duration,
    /// 3.8.0 only: preset every plugin rank's tag counter after init.
    pub tag_counter: Option<u64>,
    /// Behind the wire: record what every connection's client sent (conformance).
    pub capture: bool,
    /// Without the wire: the accept interposer's policy for the plugin ranks (`None`: none).
    pub accept: Option<String>,
}

/// The accept interposer's log of a session, beside its unique-ID file.
fn accept_log(uid: &Path) -> PathBuf {
    uid.with_file_name("accept.log")
}

/// One rank's end.
pub(crate) struct RankEnd {
    /// What it reported.
    pub record: RankRecord,
    /// The plugin's stderr (plugin ranks).
    pub stderr: Vec<String>,
    /// Its wall time.
    pub took: Duration,
    /// Why it could not run at all (its process did not start, the plugin did not load): not a
    /// protocol verdict.
    pub setup: Option<String>,
    /// When it ended.
    pub ended: Instant,
    /// When it was stopped for making no progress within the op timeout (by bootsim, or its own
    /// driver's timeout): it was stuck on its own, a cause.
    pub stuck_at: Option<Instant>,
    /// What bootsim read of a stopped plugin rank's listeners (who held its root).
    pub held: Vec<Held>,
}

impl RankEnd {
    /// How rank `record.rank` ended, now.
    fn new(record: RankRecord, stderr: Vec<String>, took: Duration) -> RankEnd {
        RankEnd { record, stderr, took, setup: None, ended: Instant::now(), stuck_at: None, held: Vec::new() }
    }

    /// A rank that could not run at all: this machine's problem (exit 3), not a protocol verdict.
    fn cannot_start(r: u32, why: &str, t0: Instant) -> RankEnd {
        let record = RankRecord { rank: r, ..Default::default() };
        RankEnd { setup: Some(format!("cannot start: {why}")), ..RankEnd::new(record, Vec::new(), t0.elapsed()) }
    }
}

/// One iteration's ends, by rank, and the wire's record when there was one.
pub(crate) struct Iteration {
    pub ranks: Vec<RankEnd>,
    pub wire: Option<WireReport>,
    /// The accept interposer's decision log, counted (plugin ranks without the wire).
    pub accept: Option<LogSummary>,
}

impl Iteration {
    /// How each rank ended, as far as causes go.
    fn endings(&self) -> Vec<Ending> {
        let end = |e: &RankEnd| Ending {
            rank: e.record.rank,
            failed: e.record.failed(),
            ended: e.ended,
            stuck_at: e.stuck_at,
        };
        self.ranks.iter().map(end).collect()
    }

    /// `first cause: ...` of a failed iteration (`None` if nothing failed).
    pub fn first_cause(&self, findings: &[Finding]) -> Option<String> {
        let held = |r: u32| self.ranks.iter().find(|e| e.record.rank == r).map_or(Vec::new(), |e| e.held.clone());
        let finding = |r: u32| {
            let mine: Vec<String> = findings.iter().filter(|f| f.rank() == Some(r)).map(ToString::to_string).collect();
            (!mine.is_empty()).then(|| mine.join("; then "))
        };
        consequence::first_cause(&self.endings(), &held, &finding)
    }
}

impl Session {
    /// `n` ranks, `plugin_ranks` of them the plugin and the others bootsim-core speaking like it,
    /// payload seed 0, nothing captured, no adversary yet (set `accept` or pass a wire policy).
    pub fn new(
        n: u32,
        plugin: PluginSpec,
        plugin_ranks: BTreeSet<u32>,
        specs: Vec<OpSpec>,
        op_timeout: Duration,
    ) -> Self {
        let core_variant = Variant::preset(plugin.family.variant()).expect("a preset");
        Session {
            n,
            plugin,
            plugin_ranks,
            core_variant,
            specs,
            seed: 0,
            op_timeout,
            tag_counter: None,
            capture: false,
            accept: None,
        }
    }

    /// Which implementation rank `r` runs, for output lines.
    pub fn label(&self, r: u32) -> String {
        if self.plugin_ranks.contains(&r) {
            match &self.plugin.version {
                Some(v) => format!("NVSHMEM {v}"),
                None => format!("plugin {}", self.plugin.path.display()),
            }
        } else {
            format!("bootsim {}", self.core_variant)
        }
    }

    /// Runs one session; `wire` puts each rank behind the userspace wire with that policy.
    pub fn run(&self, wire: Option<Policy>) -> anyhow::Result<Iteration> {
        let dir = ScratchDir::new("plugin")?;
        let uid = dir.path().join("uid");
        let failed = Arc::new(AtomicBool::new(false));
        match wire {
            None => {
                let mut it = self.run_local(&uid, &failed)?;
                if self.accept.is_some() {
                    let log = std::fs::read_to_string(accept_log(&uid)).unwrap_or_default();
                    it.accept = Some(LogSummary::of(&log));
                }
                Ok(it)
            }
            Some(policy) => self.run_on_wire(&uid, policy, &failed),
        }
    }

    fn run_local(&self, uid: &Path, failed: &Arc<AtomicBool>) -> anyhow::Result<Iteration> {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let tasks: Vec<_> = (0..self.n)
            .map(|r| {
                let job = self.rank_job(r, uid, ip, "lo".to_string(), failed.clone());
                std::thread::Builder::new().name(format!("rank{r}")).spawn(job)
            })
            .collect::<Result<_, _>>()
            .context("starting the rank threads")?;
        let ranks: anyhow::Result<Vec<RankEnd>> =
            tasks.into_iter().map(|t| t.join().map_err(|_| anyhow!("a rank thread panicked"))).collect();
        Ok(Iteration { ranks: ranks?, wire: None, accept: None })
    }

    fn run_on_wire(&self, uid: &Path, policy: Policy, failed: &Arc<AtomicBool>) -> anyhow::Result<Iteration> {
        if self.n == 0 || self.n > u32::from(wire::MAX_HOSTS) {
            bail!("--wire needs 1..={} ranks", wire::MAX_HOSTS);
        }
        let hosts = rank_host(self.n - 1);
        let w = if self.capture { Wire::start_capturing(hosts, policy) } else { Wire::start(hosts, policy) }
            .context("starting the wire")?;
        let mut tasks = Vec::new();
        for r in 0..self.n {
            let host = rank_host(r);
            let job = self.rank_job(r, uid, IpAddr::V4(host_addr(host)), format!("wire{host}"), failed.clone());
            tasks.push(w.spawn(host, job).context("starting a rank in its namespace")?);
        }
        let mut ranks = Vec::new();
        for t in tasks {
            ranks.push(t.join().context("a rank's namespace thread")?);
        }
        let report = w.shutdown().context("stopping the wire")?;
        Ok(Iteration { ranks, wire: Some(report), accept: None })
    }

    /// The closure that runs rank `r` (on a thread already in its namespace, if any). A rank
    /// that fails raises `failed`; a plugin rank still blocked then is stopped shortly after,
    /// as a launcher ends a job when one rank exits non-zero.
    fn rank_job(
        &self,
        r: u32,
        uid: &Path,
        ip: IpAddr,
        ifname: String,
        failed: Arc<AtomicBool>,
    ) -> impl FnOnce() -> RankEnd + Send + 'static {
        let s = self.clone();
        let uid = uid.to_path_buf();
        move || {
            let end = s.run_rank(r, &uid, ip, &ifname, &failed);
            if end.record.failed() || end.setup.is_some() {
                failed.store(true, Ordering::SeqCst);
            }
            end
        }
    }

    fn run_rank(&self, r: u32, uid: &Path, ip: IpAddr, ifname: &str, failed: &AtomicBool) -> RankEnd {
        let t0 = Instant::now();
        if let (false, Some(policy), "lo") = (self.plugin_ranks.contains(&r), &self.accept, ifname) {
            return self.run_core_process(r, uid, policy, failed, t0);
        }
        if self.plugin_ranks.contains(&r) {
            let mut cmd = self.plugin_command(r, uid, ifname);
            if let (Some(policy), "lo") = (&self.accept, ifname) {
                match Interposer::locate() {
                    // Host r + 1, as on the wire: `pair:1>2` means rank 0 to rank 1 in both.
                    Ok(lib) => lib.apply(&mut cmd, policy, &accept_log(uid), u8::try_from(r + 1).ok()),
                    Err(e) => return RankEnd::cannot_start(r, &e.to_string(), t0),
                }
            }
            let run = match die_with_parent(&mut cmd).spawn() {
                Ok(child) => supervise_with(r, child, self.op_timeout, &|| failed.load(Ordering::SeqCst)),
                Err(e) => return RankEnd::cannot_start(r, &e.to_string(), t0),
            };
            // A plugin that does not load is this machine's problem, not the protocol's.
            let setup =
                run.record.init.as_ref().map(|e| e.text()).filter(|e| e.contains(CANNOT_LOAD)).map(str::to_string);
            let mut end = RankEnd { setup, stuck_at: run.stopped_at, ..RankEnd::new(run.record, run.stderr, run.took) };
            end.held = run.held;
            if let Some(root) = run.lost.filter(|a| r != 0 && Some(*a) == root_addr(uid)) {
                lost_the_root(&mut end.record, root);
            }
            end
        } else {
            let ops =
                self.specs.iter().enumerate().map(|(i, sp)| build_op(*sp, self.seed, i as u32, r, self.n)).collect();
            let cfg = SessionConfig {
                rank: r,
                nranks: self.n,
                variant: self.core_variant,
                limits: real_limits(self.op_timeout),
                magic: super::random_u64(),
                ip,
                rendezvous: Rendezvous::UidFile(uid.to_path_buf()),
                uid_wait: self.op_timeout,
            };
            let mut stuck = false;
            let report = match run_blocking_until(cfg, ops, &|| failed.load(Ordering::SeqCst), AFTER_PEER_FAILED) {
                Some(result) => {
                    let record = rank_record(r, &result);
                    // Its own op timeout ended it (a timeout is what `unfinished` holds).
                    stuck = record.unfinished.is_some();
                    record
                }
                None => RankRecord {
                    rank: r,
                    unfinished: Some(
                        format!(
                            "still blocked {} ms after another rank failed (stopped as a launcher would)",
                            AFTER_PEER_FAILED.as_millis()
                        )
                        .into(),
                    ),
                    ..Default::default()
                },
            };
            let end = RankEnd::new(report, Vec::new(), t0.elapsed());
            RankEnd { stuck_at: stuck.then_some(end.ended), ..end }
        }
    }

    /// A bootsim-core rank as a process of its own under the accept interposer (host r + 1, as
    /// the plugin ranks), stopped as a launcher would once another rank has failed.
    fn run_core_process(&self, r: u32, uid: &Path, policy: &str, failed: &AtomicBool, t0: Instant) -> RankEnd {
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("bootsim"));
        let mut cmd = Command::new(exe);
        cmd.arg("core-rank").args(["--rank", &r.to_string(), "--ranks", &self.n.to_string()]);
        // A preset, or one with its tag counter moved (--tag-counter).
        let Some(base) = self.core_variant.with_first_tag(1).preset_name() else {
            return RankEnd::cannot_start(r, &format!("{} is not a preset variant", self.core_variant), t0);
        };
        cmd.args(["--variant", base]);
        if let Some(t) = self.core_variant.first_call_tag().filter(|&t| t != 1) {
            cmd.args(["--first-tag", &t.to_string()]);
        }
        cmd.arg("--uid-file").arg(uid).args(["--ops", &format_ops(&self.specs), "--seed", &self.seed.to_string()]);
        cmd.args(["--op-timeout-ms", &self.op_timeout.as_millis().to_string()]);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        match Interposer::locate() {
            Ok(lib) => lib.apply(&mut cmd, policy, &accept_log(uid), u8::try_from(r + 1).ok()),
            Err(e) => return RankEnd::cannot_start(r, &e.to_string(), t0),
        }
        let mut child = match die_with_parent(&mut cmd).spawn() {
            Ok(c) => c,
            Err(e) => return RankEnd::cannot_start(r, &e.to_string(), t0),
        };
        let out =
            child.stdout.take().map(|o| std::thread::spawn(move || std::io::read_to_string(o).unwrap_or_default()));
        let err =
            child.stderr.take().map(|e| std::thread::spawn(move || std::io::read_to_string(e).unwrap_or_default()));
        // Its own op timeout bounds it; this is the safety net, and the launcher's stop.
        let limit = t0 + self.op_timeout * 2 + Duration::from_secs(5);
        let mut failed_at = None;
        let mut after_peer = false;
        let stopped = loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => break None,
                Ok(None) => {}
            }
            let now = Instant::now();
            if failed.load(Ordering::SeqCst) {
                let at = *failed_at.get_or_insert(now);
                if now >= at + AFTER_PEER_FAILED {
                    after_peer = true;
                    break Some(format!(
                        "still blocked {} ms after another rank failed (stopped as a launcher would)",
                        AFTER_PEER_FAILED.as_millis()
                    ));
                }
            }
            if now >= limit {
                break Some(format!("no end within {} ms (the rank process was killed)", (limit - t0).as_millis()));
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        if stopped.is_some() {
            let _ = child.kill();
        }
        let _ = child.wait();
        let stdout = out.and_then(|h| h.join().ok()).unwrap_or_default();
        let stderr: Vec<String> =
            err.and_then(|h| h.join().ok()).unwrap_or_default().lines().map(String::from).collect();
        let record = match (stopped, serde_json::from_str::<CoreRankOut>(stdout.trim())) {
            (Some(u), _) => RankRecord { rank: r, unfinished: Some(u.into()), ..Default::default() },
            (None, Ok(o)) => o.record(r),
            (None, Err(_)) => RankRecord {
                rank: r,
                init: Some(
                    bootsim_core::report::init_text(format!(
                        "the core-rank process ended without its record; its last stderr line: {}",
                        stderr.last().map_or("", String::as_str)
                    ))
                    .into(),
                ),
                ..Default::default()
            },
        };
        // Stopped at the safety net, or ended by its own op timeout: stuck on its own.
        let stuck = !after_peer && record.unfinished.is_some();
        let end = RankEnd::new(record, stderr, t0.elapsed());
        RankEnd { stuck_at: stuck.then_some(end.ended), ..end }
    }

    fn plugin_command(&self, r: u32, uid: &Path, ifname: &str) -> Command {
        let uid = if r == 0 { UidArg::Create(uid.to_path_buf()) } else { UidArg::Read(uid.to_path_buf()) };
        let mut cmd = plugin_rank_command(&self.plugin, r, self.n, &uid, &self.specs, self.seed, self.op_timeout);
        if let Some(t) = self.tag_counter {
            cmd.args(["--tag-counter", &t.to_string()]);
        }
        cmd.env("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME", ifname);
        cmd.env_remove("NVSHMEM_BOOTSTRAP_UID_SESSION_ID");
        cmd
    }

    /// Runs one session and prints its lines; returns the verdict and the findings.
    /// A rank that could not run at all is no verdict: the error, marked could-not-run (exit 3).
    pub fn run_and_print(&self, iter: u32, wire: Option<Policy>) -> anyhow::Result<(Verdict, Vec<Finding>, Iteration)> {
        let it = self.run(wire)?;
        if let Some(e) = it.ranks.iter().find(|e| e.setup.is_some()) {
            let (r, why) = (e.record.rank, e.setup.as_deref().unwrap_or_default());
            return Err(crate::cli::runtime(anyhow!(
                "rank {r}/{} iter {iter} [{}]: could not run (no protocol verdict): {why}",
                self.n,
                self.label(r)
            )));
        }
        let reports: Vec<RankRecord> = it.ranks.iter().map(|e| e.record.clone()).collect();
        let took: Vec<Duration> = it.ranks.iter().map(|e| e.took).collect();
        let gone = consequence::consequences(&it.endings());
        let (verdict, findings) = print_iteration(
            iter,
            &self.specs,
            self.seed,
            &reports,
            &took,
            &|r| format!(" [{}]", self.label(r)),
            &|r| gone.get(&r).map(|&k| consequence::consequence_text(k)),
        );
        if !verdict.is_ok() {
            for e in &it.ranks {
                for line in &e.stderr {
                    println!("  rank {} stderr: {line}", e.record.rank);
                }
            }
        }
        Ok((verdict, findings, it))
    }
}

/// What a plugin rank reports when the plugin does not load (`PluginError::Load`'s words).
const CANNOT_LOAD: &str = "cannot load the plugin ";

/// How a plugin rank process gets the unique ID.
pub(crate) enum UidArg {
    /// Rank 0 calls get_unique_id (starting the root) and writes it here.
    Create(PathBuf),
    /// Read it from here once rank 0 has written it.
    Read(PathBuf),
    /// These 128 bytes (session mode: every rank builds the same ID from the session address
    /// and the shared magic; rank 0's plugin starts the root inside init).
    Given([u8; 128]),
}

/// The `bootsim plugin-rank` command for rank `r` of `n`, its stdout and stderr piped.
pub(crate) fn plugin_rank_command(
    plugin: &PluginSpec,
    r: u32,
    n: u32,
    uid: &UidArg,
    specs: &[OpSpec],
    seed: u64,
    uid_wait: Duration,
) -> Command {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("bootsim"));
    let mut cmd = Command::new(exe);
    cmd.arg("plugin-rank").arg("--plugin").arg(&plugin.path);
    cmd.args(["--abi", &plugin.abi.to_string(), "--rank", &r.to_string(), "--ranks", &n.to_string()]);
    match uid {
        UidArg::Create(p) => {
            cmd.arg("--uid-file").arg(p).arg("--create");
        }
        UidArg::Read(p) => {
            cmd.arg("--uid-file").arg(p);
        }
        UidArg::Given(_) => {
            cmd.arg("--uid-stdin");
        }
    }
    cmd.args(["--uid-wait-ms", &uid_wait.as_millis().to_string()]);
    cmd.args(["--ops", &format_ops(specs), "--seed", &seed.to_string()]);
    cmd.stdin(uid_stdin(uid)).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// The child's stdin: a given unique ID (it holds the session magic, a secret) goes through a
/// pipe, never the command line every local user can read in /proc. The 257 bytes fit the
/// pipe's buffer, so the writer is closed before the child starts.
fn uid_stdin(uid: &UidArg) -> Stdio {
    let UidArg::Given(b) = uid else { return Stdio::null() };
    let hex: String = b.iter().map(|x| format!("{x:02x}")).chain(["\n".to_string()]).collect();
    let piped = std::io::pipe().and_then(|(reader, mut writer)| {
        std::io::Write::write_all(&mut writer, hex.as_bytes())?;
        Ok(reader)
    });
    match piped {
        Ok(reader) => Stdio::from(reader),
        // The child then says it found no unique ID on stdin.
        Err(e) => {
            tracing::error!(error = %e, "no pipe for the unique ID");
            Stdio::null()
        }
    }
}
