//! `bootsim smoke`: the bootstrap over real TCP sockets, one rank per process, with the
//! integrity oracle on every rank's results.
//!
//! Rendezvous, one of:
//! - `--session host:port` (NVSHMEM_BOOTSTRAP_UID_SESSION_ID semantics): rank 0 also runs the
//!   root at that address, every rank dials it. The session magic is `--magic`, else a SHA-256
//!   mix of the shared secret (`BOOTSIM_SESSION_SECRET` or `--secret-file`), the launcher's job
//!   id and `host:port`, else (with a warning: anyone can compute it) of `host:port` alone; see
//!   [`secret`]. Iteration `i` uses port `port + i`.
//! - `--uid-file PATH`: rank 0 runs the root on an ephemeral port and writes the 128-byte unique
//!   ID to PATH (tmp file + rename); the others poll for it for up to `--op-timeout-ms`.
//!   Iteration `i > 0` uses `PATH.i`. Rank 0 removes the file once its iteration is over.
//! - `--local N`: spawns N copies of this program as ranks 0..N-1 on 127.0.0.1 with a uid file
//!   in a fresh temporary directory, and prints their lines.
//! - `--local N --in-process`: the root and N ranks as tasks of this process on a loopback
//!   address of the run's own, the protocol's nodes over the protocol-blind driver (see
//!   `in_process.rs`): how any protocol on the seam runs on real sockets.
//! - `--local N --wire POLICY`: the N ranks run as threads of this process, rank k in its own
//!   network namespace as host k+1 (10.213.0.k+1) behind the userspace wire, which applies
//!   POLICY to the connections between them (see `wire.rs`). Needs CAP_NET_ADMIN and
//!   /dev/net/tun.
//!
//! Each rank stops at its first failed iteration (`--keep-going`: runs them all). Exit 0: every iteration verified; 1: an
//! error, timeout or wrong bytes; 2: bad usage; 3: could not run (a port in use, nothing
//! listening at the root's address), with the address.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bootsim_adapters::os;
use bootsim_adapters::tokio_sockets::{real_limits, run_blocking, Rendezvous, SessionConfig};
use bootsim_core::{Culprit, RunRecord};
use bootsim_nvshmem::workload::{build_op, Workload};
use bootsim_nvshmem::{UniqueId, Variant};
use bootsim_sim::protocol::nvshmem::judge;

pub(crate) mod plugin;
pub(crate) mod plugin_smoke;
use plugin::UidArg;
mod blame;
mod consequence;
mod could_not_run;
mod in_process;
mod report;
mod secret;
mod wire;

/// The most rank processes `--local` starts on one host.
const LOCAL_MAX: u32 = 1024;

/// Arguments of `bootsim smoke`.
#[derive(clap::Args, Debug)]
pub struct SmokeArgs {
    /// This process's rank (default: SLURM/OpenMPI/PMI/RANK launcher variables).
    #[arg(long, requires = "ranks")]
    rank: Option<u32>,
    /// World size (default: from the launcher variables).
    #[arg(long, requires = "rank")]
    ranks: Option<u32>,
    /// Root address `host:port`; rank 0 runs the root there (iteration i: port + i).
    #[arg(long, conflicts_with = "uid_file")]
    session: Option<String>,
    /// Unique-ID file: rank 0 writes it, the others read it (iteration i > 0: PATH.i).
    #[arg(long)]
    uid_file: Option<PathBuf>,
    /// Session magic, decimal or 0x-hex (default: from BOOTSIM_SESSION_SECRET or --secret-file
    /// with the job id; else derived from the session address, with a warning; random for a
    /// uid file). Also read from BOOTSIM_SESSION_MAGIC (how --local hands it to its ranks:
    /// the environment of a process is readable by its user alone, a command line by everyone).
    #[arg(long, env = "BOOTSIM_SESSION_MAGIC", hide_env_values = true)]
    magic: Option<String>,
    /// A file (mode 600) holding the session secret every rank shares; mixed with the launcher's
    /// job id and the session address into the magic. With --session only: a uid-file session
    /// (--uid-file, --local) has a random magic that travels in the mode-600 unique-ID file.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["magic", "uid_file", "local"])]
    secret_file: Option<PathBuf>,
    /// Protocol variant (a preset name) [default: nvshmem-3.7; with --plugin, the variant that
    /// speaks like the plugin, for the ranks that run bootsim-core]; NCCL's versions
    /// (nccl-2.8, nccl-2.19, nccl-2.21, nccl-2.30) with --local N --in-process.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(smoke_variants()))]
    variant: Option<String>,
    /// Workload (default parameters): deepep, nvshmem-init, qp-create, churn; with an NCCL
    /// variant (--in-process): nccl-init or nccl-p2p [default: nccl-init there].
    #[arg(long, value_parser = ["deepep", "nvshmem-init", "qp-create", "churn", "nccl-init", "nccl-p2p"])]
    workload: Option<String>,
    /// Seed of the payloads (and of churn's sequence).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Run the whole bootstrap this many times, each with a fresh session.
    #[arg(long, default_value_t = 1)]
    iterations: u32,
    /// Run every iteration even after one fails (to measure a failure rate); without it a
    /// rank stops at its first failed iteration. In a multi-process session give it to every rank.
    #[arg(long)]
    keep_going: bool,
    /// Fail an operation after this long without progress from the peer it waits for
    /// (strangers do not count). A failing rank exits within this plus 5 s, the bound for its
    /// queued bytes to flush.
    #[arg(long, default_value_t = 30_000)]
    op_timeout_ms: u64,
    /// Address this rank's listeners bind (default: NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME selection,
    /// or loopback when the session is on loopback).
    #[arg(long)]
    ip: Option<IpAddr>,
    /// Spawn this many ranks of this program on 127.0.0.1 and report them all.
    #[arg(long, conflicts_with_all = ["rank", "ranks", "session", "uid_file", "ip"])]
    local: Option<u32>,
    /// With --local: the root and the N ranks as tasks of this process on a loopback address of
    /// the run's own (127.x.y.z), built by the protocol's binding and run by the protocol-blind
    /// driver, instead of one process per rank; the session magic comes from --seed. Each
    /// iteration is bounded as a whole by --op-timeout-ms (a rank still running then is a hang).
    #[arg(long, requires = "local", conflicts_with_all = ["wire", "plugin", "rdma"])]
    in_process: bool,
    /// With --local: each rank in its own network namespace behind the userspace wire with this
    /// packet policy: none, hold=DUR[,select=S], release-on-next[=DUR][,select=S], model[=SEED]
    /// (select: all, even, odd, every:K[:P], nth:N, conn:N, pair:SRC>DST[:N] with host = rank+1).
    #[arg(long, requires = "local", conflicts_with = "rdma", value_name = "POLICY")]
    wire: Option<String>,
    /// Override the variant's drain bound (NVSHMEM_BOOTSTRAP_UID_SEND_DRAIN_MS; <= 0 disables).
    #[arg(long, value_name = "MS", allow_hyphen_values = true)]
    drain_ms: Option<i64>,
    /// NVSHMEM's real UID bootstrap plugin as the rank(s): a version (3.4.5, 3.7.1, 3.8.0:
    /// fetched into the cache by scripts/fetch-nvshmem.sh when missing) or the path of a
    /// nvshmem_bootstrap_uid.so* of your own build. With --local, the N ranks; on a cluster
    /// (--session or --uid-file, launcher variables), this process's rank, in a child process.
    #[arg(long, conflicts_with = "rdma", value_name = "VERSION|PATH")]
    plugin: Option<String>,
    /// With --plugin: only these ranks run the plugin (e.g. 0,2); the others run bootsim-core
    /// with --variant (default: the variant that speaks like the plugin).
    #[arg(long, requires = "plugin", value_delimiter = ',', value_name = "LIST")]
    plugin_ranks: Option<Vec<u32>>,
    /// With --plugin 3.8.x: start every plugin rank's per-call tag counter here (and bootsim-core
    /// ranks' with `first_tag`), to reach the 2^31-1 limit.
    #[arg(long, requires = "plugin", value_name = "TAG")]
    tag_counter: Option<u64>,
    /// With --local --plugin and no --wire: the accept interposer's policy for every rank, each a
    /// process (no root needed; the wire's language, host = rank+1, plus permute=SEED[:WINDOW] and
    /// select=msg:FROM:TAG) [default: the report's release-on-next=500ms,select=pair:1>2:2;
    /// `none` is no adversary].
    #[arg(long, requires_all = ["plugin", "local"], conflicts_with = "wire", value_name = "POLICY")]
    accept: Option<String>,
    /// Write a typed blame line on stderr beside each FAIL line (how --local's ranks tell it
    /// whom they lost).
    #[arg(long, hide = true)]
    blame_lines: bool,
    #[command(flatten)]
    rdma: super::rdma::RdmaArgs,
}

/// Every variant smoke can run: NVSHMEM's presets, then NCCL's versions.
fn smoke_variants() -> Vec<&'static str> {
    bootsim_nvshmem::PRESETS.iter().copied().chain(bootsim_nccl::ALL.iter().map(|v| v.name())).collect()
}

/// NCCL's variant and workload when `--variant` or `--workload` names one of NCCL's
/// (nccl-init with NVSHMEM's default workload).
fn nccl_case(args: &SmokeArgs) -> anyhow::Result<Option<bootsim_sim::case::NcclCase>> {
    let variant = args.variant.as_deref().unwrap_or("");
    let nccl_workload = args.workload.as_deref().filter(|w| w.starts_with("nccl-"));
    if !variant.starts_with("nccl-") && nccl_workload.is_none() {
        return Ok(None);
    }
    if let Some(w) = args.workload.as_deref().filter(|w| !w.starts_with("nccl-")) {
        bail!("--workload {w} is NVSHMEM's; NCCL's are nccl-init and nccl-p2p");
    }
    if args.drain_ms.is_some() {
        bail!("--drain-ms is NVSHMEM's drain bound; NCCL's bootstrap has no drain");
    }
    let workload = nccl_workload.unwrap_or("nccl-init");
    let mut text = format!("protocol=nccl workload={workload}");
    if !variant.is_empty() {
        text.push_str(&format!(" variant={variant}"));
    }
    if let Some(n) = args.local {
        text.push_str(&format!(" ranks={n}"));
    }
    let case = bootsim_sim::case::Case::parse(&text).map_err(|e| anyhow!("{e}"))?;
    Ok(case.nccl().cloned())
}

impl SmokeArgs {
    /// The workload's name [default: deepep].
    fn workload_name(&self) -> &str {
        self.workload.as_deref().unwrap_or("deepep")
    }

    fn variant_name(&self) -> &str {
        self.variant.as_deref().unwrap_or("nvshmem-3.7")
    }
}

/// Runs `bootsim smoke`.
pub fn smoke(args: SmokeArgs) -> anyhow::Result<ExitCode> {
    if args.iterations == 0 {
        bail!("--iterations must be at least 1");
    }
    if args.in_process && args.local.is_none() {
        bail!("--in-process needs --local N (the root and N ranks as tasks of this process)");
    }
    let preset = |name: &str| {
        Variant::preset(name)
            .ok_or_else(|| anyhow!("unknown variant {name:?}; presets: {}", bootsim_nvshmem::PRESETS.join(", ")))
    };
    if let Some(nc) = nccl_case(&args)? {
        let Some(n) = args.local.filter(|_| args.in_process) else {
            bail!(
                "NCCL's bootstrap runs in smoke with --local N --in-process only (its real ranks need GPUs: \
                 docs/nccl-protocol.md section 12)"
            );
        };
        let what = format!("protocol nccl variant {} workload {}", nc.variant, nc.workload.name());
        return in_process::run(&args, n, &bootsim_sim::protocol::Nccl, &nc.variant, &nc.workload, &what);
    }
    // bootsim-core ranks beside a plugin speak like it unless told otherwise.
    let mut variant = match (&args.variant, &args.plugin) {
        (None, Some(plugin)) => plugin_variant(plugin)?,
        _ => preset(args.variant_name())?,
    };
    if let Some(ms) = args.drain_ms {
        variant = variant.with_drain_ms(ms);
    }
    let workload = parse_workload(args.workload_name())?;
    if let (Some(n), Some(plugin)) = (args.local, &args.plugin) {
        return plugin_smoke::run(&args, n, plugin, variant, &workload);
    }
    if let (Some(n), Some(policy)) = (args.local, &args.wire) {
        return wire::run(&args, n, policy, variant, &workload);
    }
    if let (Some(n), true) = (args.local, args.in_process) {
        // The protocol by name: NVSHMEM's is the only one smoke's flags name so far.
        let name = variant.preset_name().map_or_else(|| variant.to_string(), str::to_string);
        let what = format!("protocol nvshmem variant {name} workload {}", workload.name());
        return in_process::run(&args, n, &bootsim_sim::protocol::Nvshmem, &variant, &workload, &what);
    }
    if let Some(n) = args.local {
        return local(&args, n);
    }
    let (rank, nranks) = match (args.rank, args.ranks) {
        (Some(r), Some(n)) => (r, n),
        _ => os::from_process_env()?
            .map(|l| (l.rank, l.size))
            .ok_or_else(|| anyhow!("no --rank/--ranks and no launcher variables (SLURM_PROCID, RANK, ...)"))?,
    };
    if nranks > bootsim_nvshmem::root::MAX_RANKS {
        bail!("--ranks {nranks}: at most {} ranks", bootsim_nvshmem::root::MAX_RANKS);
    }
    if rank >= nranks {
        bail!("rank {rank} is outside a world of {nranks} ranks");
    }
    let session = args.session.as_deref().map(resolve).transpose()?;
    if session.is_none() && args.uid_file.is_none() {
        bail!("give --session host:port, --uid-file PATH or --local N");
    }
    if let (Some(s), Some((lo, hi))) = (session, ephemeral_ports()) {
        let last = u32::from(s.port()) + args.iterations.saturating_sub(1);
        if u32::from(s.port()) <= hi && last >= lo {
            eprintln!(
                "bootsim: warning: session ports {}..={last} overlap the ephemeral range {lo}..={hi} (net.ipv4.ip_local_port_range): \
                 an outgoing connection can hold the port before the root binds it (NVSHMEM's root then fails 'Address already \
                 in use', and a rank may connect to itself); choose a port below {lo}",
                s.port()
            );
        }
    }
    let magic = args.magic.as_deref().map(parse_magic).transpose()?;
    let ip = match (args.ip, session) {
        (Some(ip), _) => ip,
        (None, Some(s)) if s.ip().is_loopback() => s.ip(),
        (None, s) => pick_ip(s.map_or(os::Family::V4, |s| os::Family::of(&s.ip())))?,
    };
    let op_timeout = Duration::from_millis(args.op_timeout_ms);
    let specs = workload.ops(args.seed);
    let ops: Vec<_> = specs.iter().enumerate().map(|(i, s)| build_op(*s, args.seed, i as u32, rank, nranks)).collect();
    let plugin_here = match &args.plugin {
        Some(p) if args.plugin_ranks.as_ref().is_none_or(|l| l.contains(&rank)) => {
            Some(plugin_smoke::locate_plugin(p)?)
        }
        _ => None,
    };
    let started = Instant::now();
    let (mut ok, mut ran) = (0, 0);
    let mut first_cause = None;
    for iter in 0..args.iterations {
        ran += 1;
        let (rendezvous, magic) = match (session, &args.uid_file) {
            (Some(s), _) => {
                let addr = SocketAddr::new(
                    s.ip(),
                    u16::try_from(iter)
                        .ok()
                        .and_then(|i| s.port().checked_add(i))
                        .context("--iterations run past port 65535")?,
                );
                let (m, source) = secret::session_magic(magic, args.secret_file.as_deref(), addr)?;
                if iter == 0 {
                    match source {
                        secret::MagicSource::Derived => eprintln!("{}", secret::derived_warning(rank, addr)),
                        secret::MagicSource::Secret => tracing::info!(rank, "session magic from the shared secret"),
                        secret::MagicSource::Given => {}
                    }
                }
                (Rendezvous::Session(addr), m)
            }
            (None, Some(path)) => {
                let path = iter_path(path, iter);
                // Only rank 0's magic is used: it is in the file, whose readers are trusted.
                (Rendezvous::UidFile(path), magic.unwrap_or_else(random_u64))
            }
            (None, None) => unreachable!("checked above"),
        };
        let uid_file = match &rendezvous {
            Rendezvous::UidFile(p) if rank == 0 => Some(p.clone()),
            _ => None,
        };
        let cfg = SessionConfig {
            rank,
            nranks,
            variant,
            limits: real_limits(op_timeout),
            magic,
            ip,
            rendezvous,
            uid_wait: op_timeout,
        };
        let t0 = Instant::now();
        if args.rdma.rdma {
            // The RDMA check is this iteration's workload: its own bootstrap sessions (handle
            // exchange, then a barrier) use the next rendezvous points (port + 1000 + 2i + s, or
            // PATH.rdma.i.s).
            let mut session = |ops: Vec<bootsim_nvshmem::Op>, sub: u32| {
                let mut cfg = cfg.clone();
                let mut remove = None;
                cfg.rendezvous = match &cfg.rendezvous {
                    Rendezvous::Session(a) => Rendezvous::Session(SocketAddr::new(
                        a.ip(),
                        u16::try_from(1000 + 2 * u64::from(iter) + u64::from(sub))
                            .ok()
                            .and_then(|off| a.port().checked_add(off))
                            .unwrap_or(0),
                    )),
                    Rendezvous::UidFile(p) => {
                        let p = p.with_extension(format!("rdma.{iter}.{sub}"));
                        remove = (rank == 0).then(|| p.clone());
                        Rendezvous::UidFile(p)
                    }
                };
                let run = run_blocking(cfg, ops);
                if let Some(p) = remove {
                    let _ = std::fs::remove_file(p);
                }
                run
            };
            let clean = super::rdma::check(&args.rdma, rank, nranks, iter, &mut session)?;
            if let Some(p) = uid_file {
                let _ = std::fs::remove_file(p);
            }
            if !clean {
                break;
            }
            ok += 1;
            continue;
        }
        let mut strays = 0;
        let mut lost_root = "";
        // The rank this one lost, if its failure is another's (typed where the error was made).
        let mut lost = None;
        let (report, stderr) = match &plugin_here {
            Some(p) => {
                let uid = match &cfg.rendezvous {
                    Rendezvous::Session(addr) => UidArg::Given(
                        UniqueId { version: bootsim_nvshmem::NVSHMEM_UID_VERSION, root: *addr, magic }.encode(),
                    ),
                    Rendezvous::UidFile(path) if rank == 0 => UidArg::Create(path.clone()),
                    Rendezvous::UidFile(path) => UidArg::Read(path.clone()),
                };
                let mut cmd = plugin::plugin_rank_command(p, rank, nranks, &uid, &specs, args.seed, op_timeout);
                if let Rendezvous::Session(addr) = &cfg.rendezvous {
                    cmd.env("NVSHMEM_BOOTSTRAP_UID_SESSION_ID", addr.to_string());
                }
                let child = crate::cli::scratch::die_with_parent(&mut cmd)
                    .spawn()
                    .context("starting the plugin rank process")
                    .map_err(crate::cli::runtime)?;
                let mut run = bootsim_adapters::plugin::supervise(rank, child, op_timeout);
                if let Rendezvous::Session(root) = &cfg.rendezvous {
                    if rank != 0 && run.lost == Some(*root) {
                        consequence::lost_the_root(&mut run.record, *root);
                        lost_root = " (a consequence: it lost the root)";
                        lost = Some(0);
                    }
                }
                // NVSHMEM's root held by a connection that sent nothing: the session's first cause.
                if let (Some(_), Some(h)) = (run.stopped_at, consequence::held_silent(&run.held)) {
                    first_cause.get_or_insert(format!("; first cause: rank {rank} made no progress: {h}"));
                }
                (run.record, run.stderr)
            }
            None => {
                let root_addr = match &cfg.rendezvous {
                    Rendezvous::Session(addr) => Some(*addr),
                    Rendezvous::UidFile(_) => None,
                };
                let result = run_blocking(cfg, ops.clone());
                if let Some(why) = could_not_run::could_not_run(&result, root_addr) {
                    return Err(crate::cli::runtime(anyhow!("rank {rank}/{nranks} iter {iter}: could not run: {why}")));
                }
                strays = stray_count(&result);
                lost = result.as_ref().err().and_then(|e| e.culprit(rank)).map(Culprit::rank).filter(|&k| k != rank);
                (bootsim_driver::rank_record(rank, &result), Vec::new())
            }
        };
        if let Some(p) = uid_file {
            let _ = std::fs::remove_file(p);
        }
        let ms = t0.elapsed().as_millis();
        let (_, findings) = judge(&specs, args.seed, nranks, &RunRecord::of_ranks(vec![report]));
        let verdict = match findings.is_empty() {
            true => Ok(()),
            false => Err(findings.iter().map(ToString::to_string).collect::<Vec<_>>().join("; then ")),
        };
        match verdict {
            Ok(()) => {
                let dropped = match strays {
                    0 => String::new(),
                    k => format!(" ({k} stranger connections dropped)"),
                };
                println!(
                    "rank {rank}/{nranks} iter {iter}: ok: init + {} ops verified in {ms} ms{dropped}",
                    specs.len()
                );
                ok += 1;
            }
            Err(e) => {
                println!("rank {rank}/{nranks} iter {iter}: FAIL after {ms} ms{lost_root}: {e}");
                if let (true, Some(lost)) = (args.blame_lines, lost) {
                    eprintln!("{}", blame::BlameLine { rank, lost }.line());
                }
                for line in &stderr {
                    println!("  rank {rank} stderr: {line}");
                }
                if !args.keep_going {
                    break;
                }
            }
        }
    }
    let total = started.elapsed().as_millis();
    if rank == 0 {
        let status = if ok == args.iterations { "pass" } else { "FAIL" };
        let what = match &plugin_here {
            Some(p) => format!("NVSHMEM {}", p.version.as_deref().unwrap_or("plugin")),
            None => format!("variant {variant}"),
        };
        println!(
            "smoke: {status}: {what} workload {} ranks {nranks}: {} in {total} ms{}",
            workload.name(),
            report::iterations_text(ok, ran, args.iterations),
            first_cause.unwrap_or_default()
        );
    }
    Ok(if ok == args.iterations { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// `--local N`: N child processes on loopback, a uid file in a fresh temporary directory.
fn local(args: &SmokeArgs, n: u32) -> anyhow::Result<ExitCode> {
    if n == 0 || n > LOCAL_MAX {
        bail!("--local {n}: between 1 and {LOCAL_MAX} processes on one host");
    }
    let dir = crate::cli::scratch::ScratchDir::new("smoke")?;
    let exe = std::env::current_exe().context("locating this program")?;
    let uid = dir.path().join("uid");
    let started = Instant::now();
    let mut children = Vec::new();
    for r in 0..n {
        let mut cmd = Command::new(&exe);
        cmd.arg("smoke").args(["--rank", &r.to_string(), "--ranks", &n.to_string()]);
        cmd.arg("--uid-file").arg(&uid).args(["--ip", "127.0.0.1", "--variant", args.variant_name()]);
        cmd.args(["--workload", args.workload_name(), "--seed", &args.seed.to_string()]);
        cmd.args(["--iterations", &args.iterations.to_string(), "--op-timeout-ms", &args.op_timeout_ms.to_string()]);
        if args.keep_going {
            cmd.arg("--keep-going");
        }
        cmd.arg("--blame-lines");
        if let Some(m) = &args.magic {
            cmd.env("BOOTSIM_SESSION_MAGIC", m);
        }
        if let Some(ms) = args.drain_ms {
            cmd.arg(format!("--drain-ms={ms}"));
        }
        if args.rdma.rdma {
            cmd.args(["--rdma", "--qps-per-peer", &args.rdma.qps_per_peer.to_string()]);
            if let Some(d) = &args.rdma.device {
                cmd.args(["--device", d]);
            }
            if let Some(g) = args.rdma.gid_index {
                cmd.args(["--gid-index", &g.to_string()]);
            }
        }
        let child = crate::cli::scratch::die_with_parent(&mut cmd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("spawning a rank")?;
        children.push(Ranked::new(r, child));
    }
    // Each child bounds itself (op timeout, connect retries, flush); this is the safety net.
    let per_iter = Duration::from_millis(args.op_timeout_ms) * 2 + Duration::from_secs(30);
    let deadline = started + per_iter * args.iterations;
    let mut failed = Vec::new();
    let (mut findings, mut lost, mut dead) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    let (mut usage_errors, mut could_not_run) = (0, 0);
    for c in &mut children {
        let status = c.wait_until(deadline);
        usage_errors += usize::from(status == ChildEnd::Exited(2));
        could_not_run += usize::from(status == ChildEnd::Exited(3));
        let (out, err) = c.output();
        if let Some(f) = blame::finding(c.rank, &out) {
            findings.insert(c.rank, f);
        }
        match status {
            ChildEnd::Signaled { signal } => dead.insert(c.rank, format!("died of signal {signal}")),
            ChildEnd::KilledAtDeadline => dead.insert(c.rank, "made no end and was killed by bootsim".into()),
            ChildEnd::Exited(_) => None,
        };
        for line in out.lines() {
            println!("{line}");
        }
        for line in err.lines() {
            match blame::BlameLine::parse(line) {
                Some(b) => {
                    lost.entry(b.rank).or_insert(b.lost);
                }
                None => println!("rank {} stderr: {line}", c.rank),
            }
        }
        match status {
            ChildEnd::Exited(0) => {}
            ChildEnd::Exited(code) => failed.push(format!("rank {} exited {code}", c.rank)),
            ChildEnd::Signaled { signal } => {
                failed.push(format!("rank {} died of signal {signal} (not sent by bootsim)", c.rank))
            }
            ChildEnd::KilledAtDeadline => failed.push(format!(
                "rank {} made no end within {} ms per iteration and was killed by bootsim",
                c.rank,
                per_iter.as_millis()
            )),
        }
    }
    drop(dir);
    let ms = started.elapsed().as_millis();
    let head = format!(
        "smoke --local {n}: variant {} workload {} x{}",
        args.variant_name(),
        args.workload_name(),
        args.iterations
    );
    if failed.is_empty() {
        println!("{head}: pass: all {n} ranks ok in {ms} ms");
        Ok(ExitCode::SUCCESS)
    } else {
        let cause = blame::first_cause(&findings, &lost, &dead).map_or(String::new(), |c| format!("; {c}"));
        println!("{head}: FAIL in {ms} ms: {}{cause}", failed.join(", "));
        // Every rank refused to start (bad usage, no RDMA device): say so with exit 2 too; no
        // violation but a rank that could not run: 3.
        let code = if usage_errors == children.len() {
            2
        } else if could_not_run > 0 && could_not_run + usage_errors == failed.len() {
            3
        } else {
            1
        };
        Ok(ExitCode::from(code))
    }
}

/// How a `--local` child rank ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChildEnd {
    /// It exited with this code.
    Exited(i32),
    /// Something else killed it (a signal bootsim did not send).
    Signaled { signal: i32 },
    /// bootsim killed it at the safety deadline.
    KilledAtDeadline,
}

/// A child rank and the threads collecting its output.
struct Ranked {
    rank: u32,
    child: Child,
    out: Option<std::thread::JoinHandle<String>>,
    err: Option<std::thread::JoinHandle<String>>,
}

impl Ranked {
    fn new(rank: u32, mut child: Child) -> Self {
        fn collect(r: Option<impl Read + Send + 'static>) -> Option<std::thread::JoinHandle<String>> {
            r.map(|r| {
                std::thread::spawn(move || {
                    BufReader::new(r).lines().map_while(Result::ok).collect::<Vec<_>>().join("\n")
                })
            })
        }
        let (out, err) = (collect(child.stdout.take()), collect(child.stderr.take()));
        Ranked { rank, child, out, err }
    }

    /// How the child ended, waiting at most until `deadline` (then it is killed).
    fn wait_until(&mut self, deadline: Instant) -> ChildEnd {
        use std::os::unix::process::ExitStatusExt;
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) => {
                    return match (s.code(), s.signal()) {
                        (Some(code), _) => ChildEnd::Exited(code),
                        (None, sig) => ChildEnd::Signaled { signal: sig.unwrap_or(0) },
                    }
                }
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return ChildEnd::KilledAtDeadline;
                }
            }
        }
    }

    fn output(&mut self) -> (String, String) {
        let join = |h: Option<std::thread::JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
        (join(self.out.take()), join(self.err.take()))
    }
}

/// The bootsim variant that speaks like the plugin `arg` names.
fn plugin_variant(arg: &str) -> anyhow::Result<Variant> {
    let spec = plugin_smoke::locate_plugin(arg)?;
    Ok(Variant::preset(spec.family.variant()).expect("a preset"))
}

pub(crate) fn parse_workload(name: &str) -> anyhow::Result<Workload> {
    Ok(match name {
        "deepep" => Workload::Deepep { qps: 24 },
        "nvshmem-init" => Workload::NvshmemInit { qps: 2 },
        "qp-create" => Workload::QpCreate { k: 4 },
        "churn" => Workload::Churn { len: 12 },
        _ => bail!("unknown workload {name:?}; accepted: deepep, nvshmem-init, qp-create, churn"),
    })
}

fn parse_magic(s: &str) -> anyhow::Result<u64> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.with_context(|| format!("--magic {s:?} is not a u64 (decimal or 0x-hex)"))
}

fn resolve(session: &str) -> anyhow::Result<SocketAddr> {
    session
        .to_socket_addrs()
        .with_context(|| format!("--session {session:?} is not host:port"))?
        .next()
        .ok_or_else(|| anyhow!("--session {session:?} resolves to no address"))
}

/// The bootstrap interface's address, as NVSHMEM picks it (NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME).
fn pick_ip(family: os::Family) -> anyhow::Result<IpAddr> {
    let filter = std::env::var("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME").ok().map(|s| os::IfFilter::parse(&s));
    let list = os::list_interfaces().context("listing interfaces")?;
    let chosen = os::select(filter.as_ref(), family, &list);
    Ok(chosen.map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |i| i.addr))
}

/// Connections from strangers (bad magic, garbage, stalled or evicted headers) the rank, and
/// on rank 0 the root, dropped.
fn stray_count(result: &Result<bootsim_adapters::nvshmem::RankRun, bootsim_adapters::nvshmem::DriverError>) -> usize {
    let Some(run) = bootsim_driver::run_of(result) else { return 0 };
    run.events.iter().filter(|e| bootsim_driver::is_stranger_dropped(*e)).count()
}

/// The kernel's ephemeral port range, where it can be read.
fn ephemeral_ports() -> Option<(u32, u32)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = text.split_whitespace().map(|w| w.parse::<u32>().ok());
    Some((it.next()??, it.next()??))
}

fn iter_path(path: &Path, iter: u32) -> PathBuf {
    if iter == 0 {
        return path.to_path_buf();
    }
    let mut p = path.as_os_str().to_owned();
    p.push(format!(".{iter}"));
    PathBuf::from(p)
}

/// 64 random bits from the kernel (a magic nobody else knows, a unique folder name).
pub(crate) fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b)).is_err() {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        b = (u64::from(std::process::id()) ^ t.as_nanos() as u64).to_le_bytes();
    }
    u64::from_le_bytes(b)
}

/// Creates `dir` readable by its owner alone (mode 700): it holds unique-ID files, whose
/// magic lets a peer join the session.
pub(crate) fn private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Ranked {
        let child =
            Command::new("sh").args(["-c", script]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        Ranked::new(2, child)
    }

    #[test]
    fn a_child_killed_from_outside_is_told_apart_from_one_bootsim_killed() {
        let far = Instant::now() + Duration::from_secs(30);
        assert_eq!(sh("exit 3").wait_until(far), ChildEnd::Exited(3));
        assert_eq!(sh("kill -9 $$").wait_until(far), ChildEnd::Signaled { signal: 9 });
        assert_eq!(sh("sleep 30").wait_until(Instant::now() + Duration::from_millis(100)), ChildEnd::KilledAtDeadline);
    }
}
