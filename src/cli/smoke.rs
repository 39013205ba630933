//! `bootsim smoke`: the bootstrap over real TCP sockets, one rank per process, with the
//! integrity oracle on every rank's results.
//!
//! Rendezvous, one of:
//! - `--session host:port` (NVSHMEM_BOOTSTRAP_UID_SESSION_ID semantics): rank 0 also runs the
//!   root at that address, every rank dials it. The session magic is `--magic`, else the
//!   FNV-1a-64 hash of the string `host:port` actually used (so every rank derives the same one).
//!   Iteration `i` uses port `port + i`.
//! - `--uid-file PATH`: rank 0 runs the root on an ephemeral port and writes the 128-byte unique
//!   ID to PATH (tmp file + rename); the others poll for it for up to `--op-timeout-ms`.
//!   Iteration `i > 0` uses `PATH.i`. Rank 0 removes the file once its iteration is over.
//! - `--local N`: spawns N copies of this program as ranks 0..N-1 on 127.0.0.1 with a uid file
//!   in a fresh temporary directory, and prints their lines.
//! - `--local N --wire POLICY`: the N ranks run as threads of this process, rank k in its own
//!   network namespace as host k+1 (10.213.0.k+1) behind the userspace wire, which applies
//!   POLICY to the connections between them (see [`wire_smoke`]). Needs CAP_NET_ADMIN and
//!   /dev/net/tun.
//!
//! Each rank stops at its first failed iteration. Exit 0: every iteration verified; 1: an
//! error, timeout or wrong bytes; 2: bad usage.

use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bootsim_adapters::driver::RankRun;
use bootsim_adapters::net;
use bootsim_adapters::tokio_net::{real_limits, run_blocking, Rendezvous, SessionConfig};
use bootsim_core::Variant;
use bootsim_sim::workload::{build_op, expected_result, OpSpec, Workload};

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
    /// Session magic, decimal or 0x-hex (default: hash of the session string, or random-ish
    /// for a uid file).
    #[arg(long)]
    magic: Option<String>,
    /// Protocol variant (a preset name).
    #[arg(long, default_value = "nvshmem-3.7")]
    variant: String,
    /// Workload: deepep, nvshmem-init, qp-create or churn (default parameters).
    #[arg(long, default_value = "deepep")]
    workload: String,
    /// Seed of the payloads (and of churn's sequence).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Run the whole bootstrap this many times, each with a fresh session.
    #[arg(long, default_value_t = 1)]
    iterations: u32,
    /// Fail an operation after this long without progress.
    #[arg(long, default_value_t = 30_000)]
    op_timeout_ms: u64,
    /// Address this rank's listeners bind (default: NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME selection,
    /// or loopback when the session is on loopback).
    #[arg(long)]
    ip: Option<IpAddr>,
    /// Spawn this many ranks of this program on 127.0.0.1 and report them all.
    #[arg(long, conflicts_with_all = ["rank", "ranks", "session", "uid_file", "ip"])]
    local: Option<u32>,
    /// With --local: each rank in its own network namespace behind the userspace wire with this
    /// packet policy: none, hold=MS[,select=S], release-on-next[=MS][,select=S], model[=SEED]
    /// (select: all, even, odd, every:K[:P], nth:N, conn:N, pair:SRC>DST[:N] with host = rank+1).
    #[arg(long, requires = "local", conflicts_with = "rdma", value_name = "POLICY")]
    wire: Option<String>,
    /// Override the variant's drain bound (NVSHMEM_BOOTSTRAP_UID_SEND_DRAIN_MS; <= 0 disables).
    #[arg(long, value_name = "MS", allow_hyphen_values = true)]
    drain_ms: Option<i64>,
    #[command(flatten)]
    rdma: super::rdma::RdmaArgs,
}

/// Runs `bootsim smoke`.
pub fn smoke(args: SmokeArgs) -> anyhow::Result<ExitCode> {
    let mut variant = Variant::preset(&args.variant)
        .ok_or_else(|| anyhow!("unknown variant {:?}; presets: {}", args.variant, bootsim_core::PRESETS.join(", ")))?;
    if let Some(ms) = args.drain_ms {
        variant = variant.with_drain_ms(ms);
    }
    let workload = parse_workload(&args.workload)?;
    if args.iterations == 0 {
        bail!("--iterations must be at least 1");
    }
    if let (Some(n), Some(policy)) = (args.local, &args.wire) {
        return wire_smoke::run(&args, n, policy, variant, &workload);
    }
    if let Some(n) = args.local {
        return local(&args, n);
    }
    let (rank, nranks) = match (args.rank, args.ranks) {
        (Some(r), Some(n)) => (r, n),
        _ => net::from_process_env()?
            .map(|l| (l.rank, l.size))
            .ok_or_else(|| anyhow!("no --rank/--ranks and no launcher variables (SLURM_PROCID, RANK, ...)"))?,
    };
    if nranks > bootsim_core::root::MAX_RANKS {
        bail!("--ranks {nranks}: at most {} ranks", bootsim_core::root::MAX_RANKS);
    }
    if rank >= nranks {
        bail!("rank {rank} is outside a world of {nranks} ranks");
    }
    let session = args.session.as_deref().map(resolve).transpose()?;
    if session.is_none() && args.uid_file.is_none() {
        bail!("give --session host:port, --uid-file PATH or --local N");
    }
    let magic = args.magic.as_deref().map(parse_magic).transpose()?;
    let ip = match (args.ip, session) {
        (Some(ip), _) => ip,
        (None, Some(s)) if s.ip().is_loopback() => s.ip(),
        (None, s) => pick_ip(s.map_or(net::Family::V4, |s| net::Family::of(&s.ip())))?,
    };
    let op_timeout = Duration::from_millis(args.op_timeout_ms);
    let specs = workload.ops(args.seed);
    let ops: Vec<_> = specs.iter().enumerate().map(|(i, s)| build_op(*s, args.seed, i as u32, rank, nranks)).collect();
    let started = Instant::now();
    let mut ok = 0;
    for iter in 0..args.iterations {
        let (rendezvous, magic) = match (session, &args.uid_file) {
            (Some(s), _) => {
                let addr = SocketAddr::new(
                    s.ip(),
                    u16::try_from(iter)
                        .ok()
                        .and_then(|i| s.port().checked_add(i))
                        .context("--iterations run past port 65535")?,
                );
                (Rendezvous::Session(addr), magic.unwrap_or_else(|| fnv1a(addr.to_string().as_bytes())))
            }
            (None, Some(path)) => {
                let path = iter_path(path, iter);
                let salt = format!("{}:{}:{:?}", path.display(), std::process::id(), Instant::now());
                (Rendezvous::UidFile(path), magic.unwrap_or_else(|| fnv1a(salt.as_bytes())))
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
            let mut session = |ops: Vec<bootsim_core::Op>, sub: u32| {
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
        let result = run_blocking(cfg, ops.clone());
        if let Some(p) = uid_file {
            let _ = std::fs::remove_file(p);
        }
        let ms = t0.elapsed().as_millis();
        let verdict = result.map_err(|e| e.to_string()).and_then(|run| verify(&run, &specs, args.seed, rank, nranks));
        match verdict {
            Ok(()) => {
                println!("rank {rank}/{nranks} iter {iter}: ok: init + {} ops verified in {ms} ms", specs.len());
                ok += 1;
            }
            Err(e) => {
                println!("rank {rank}/{nranks} iter {iter}: FAIL after {ms} ms: {e}");
                break;
            }
        }
    }
    let total = started.elapsed().as_millis();
    if rank == 0 {
        let status = if ok == args.iterations { "pass" } else { "FAIL" };
        println!(
            "smoke: {status}: variant {} workload {} ranks {nranks}: {ok}/{} iterations ok in {total} ms",
            args.variant,
            workload.name(),
            args.iterations
        );
    }
    Ok(if ok == args.iterations { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The integrity oracle on one rank: every result equals the workload's expected bytes.
fn verify(run: &RankRun, specs: &[OpSpec], seed: u64, rank: u32, n: u32) -> Result<(), String> {
    if run.completions.len() != specs.len() + 1 {
        return Err(format!("{} completions for init + {} ops", run.completions.len(), specs.len()));
    }
    for (i, (spec, c)) in specs.iter().zip(&run.completions[1..]).enumerate() {
        let got = c.result.as_ref().map_err(|e| e.to_string())?;
        if let Some(want) = expected_result(*spec, seed, i as u32, rank, n) {
            if *got != want {
                let at = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
                let from = at / (want.len() / n as usize).max(1);
                return Err(format!(
                    "CORRUPTION: op {i} ({spec:?}): wrong bytes from offset {at} (slice of rank {from}), {} bytes received, {} expected",
                    got.len(),
                    want.len()
                ));
            }
        }
    }
    Ok(())
}

/// `--local N`: N child processes on loopback, a uid file in a fresh temporary directory.
fn local(args: &SmokeArgs, n: u32) -> anyhow::Result<ExitCode> {
    if n == 0 || n > LOCAL_MAX {
        bail!("--local {n}: between 1 and {LOCAL_MAX} processes on one host");
    }
    let dir = std::env::temp_dir().join(format!(
        "bootsim-smoke-{}-{:x}",
        std::process::id(),
        fnv1a(format!("{:?}", Instant::now()).as_bytes())
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let exe = std::env::current_exe().context("locating this program")?;
    let uid = dir.join("uid");
    let started = Instant::now();
    let mut children = Vec::new();
    for r in 0..n {
        let mut cmd = Command::new(&exe);
        cmd.arg("smoke").args(["--rank", &r.to_string(), "--ranks", &n.to_string()]);
        cmd.arg("--uid-file").arg(&uid).args(["--ip", "127.0.0.1", "--variant", &args.variant]);
        cmd.args(["--workload", &args.workload, "--seed", &args.seed.to_string()]);
        cmd.args(["--iterations", &args.iterations.to_string(), "--op-timeout-ms", &args.op_timeout_ms.to_string()]);
        if let Some(m) = &args.magic {
            cmd.args(["--magic", m]);
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
        let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().context("spawning a rank")?;
        children.push(Ranked::new(r, child));
    }
    // Each child bounds itself (op timeout, connect retries, flush); this is the safety net.
    let per_iter = Duration::from_millis(args.op_timeout_ms) * 2 + Duration::from_secs(30);
    let deadline = started + per_iter * args.iterations;
    let mut failed = Vec::new();
    let mut usage_errors = 0;
    for c in &mut children {
        let status = c.wait_until(deadline);
        usage_errors += usize::from(status == Some(2));
        let (out, err) = c.output();
        for line in out.lines() {
            println!("{line}");
        }
        for line in err.lines() {
            println!("rank {} stderr: {line}", c.rank);
        }
        match status {
            Some(0) => {}
            Some(code) => failed.push(format!("rank {} exited {code}", c.rank)),
            None => failed.push(format!("rank {} killed after {} ms", c.rank, per_iter.as_millis())),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let ms = started.elapsed().as_millis();
    let head = format!("smoke --local {n}: variant {} workload {} x{}", args.variant, args.workload, args.iterations);
    if failed.is_empty() {
        println!("{head}: pass: all {n} ranks ok in {ms} ms");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("{head}: FAIL in {ms} ms: {}", failed.join(", "));
        // Every rank refused to start (bad usage, no RDMA device): say so with exit 2 too.
        Ok(ExitCode::from(if usage_errors == children.len() { 2 } else { 1 }))
    }
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

    /// The exit code, or `None` if it had to be killed at `deadline` (or died by a signal).
    fn wait_until(&mut self, deadline: Instant) -> Option<i32> {
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) => return s.code(),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return None;
                }
            }
        }
    }

    fn output(&mut self) -> (String, String) {
        let join = |h: Option<std::thread::JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
        (join(self.out.take()), join(self.err.take()))
    }
}

fn parse_workload(name: &str) -> anyhow::Result<Workload> {
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
fn pick_ip(family: net::Family) -> anyhow::Result<IpAddr> {
    let filter = std::env::var("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME").ok().map(|s| net::IfFilter::parse(&s));
    let list = net::list_interfaces().context("listing interfaces")?;
    let chosen = net::select(filter.as_ref(), family, &list);
    Ok(chosen.map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |i| i.addr))
}

fn iter_path(path: &Path, iter: u32) -> PathBuf {
    if iter == 0 {
        return path.to_path_buf();
    }
    let mut p = path.as_os_str().to_owned();
    p.push(format!(".{iter}"));
    PathBuf::from(p)
}

/// FNV-1a, 64 bits: a stable hash every rank computes alike.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// `bootsim smoke --local N --wire POLICY`: the ranks in network namespaces behind the
/// userspace wire, with the integrity oracle, QP-handle decoding and the drain's events.
mod wire_smoke {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    use std::process::ExitCode;
    use std::time::{Duration, Instant};

    use anyhow::{anyhow, bail, Context};
    use bootsim_adapters::driver::{DriverError, RankRun};
    use bootsim_adapters::tokio_net::real_limits;
    use bootsim_adapters::wire::{self, FlowInfo, Policy, ReleaseReason, WireDecision, WireEvent, WireReport};
    use bootsim_adapters::wire_run::{self, host_rank, WireRunConfig, ROOT_PORT};
    use bootsim_core::{BootstrapError, Event, QpHandle, Variant};
    use bootsim_sim::kernel::{EventKind, HostId, Kernel, KernelConfig, ListenerId};
    use bootsim_sim::workload::{build_op, expected_result, OpSpec, Workload};

    use super::{fnv1a, parse_magic, SmokeArgs};

    /// How one rank ended, worst last.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    enum Outcome {
        Ok,
        Error,
        Corruption,
    }

    pub(super) fn run(
        args: &SmokeArgs,
        n: u32,
        policy_str: &str,
        variant: Variant,
        workload: &Workload,
    ) -> anyhow::Result<ExitCode> {
        if n == 0 || n > u32::from(wire::MAX_HOSTS) {
            bail!("--local with --wire needs 1..={} ranks", wire::MAX_HOSTS);
        }
        // Parse first: a bad policy is bad usage even where the wire is unavailable.
        let make_policy = parse_policy(policy_str, args.seed, n)?;
        wire::wire_available().map_err(|why| anyhow!("--wire needs the userspace wire: {why}"))?;
        let specs = workload.ops(args.seed);
        let magic = args.magic.as_deref().map(parse_magic).transpose()?.unwrap_or_else(|| fnv1a(b"bootsim-wire"));
        let cfg =
            WireRunConfig { nranks: n, variant, limits: real_limits(Duration::from_millis(args.op_timeout_ms)), magic };
        let head = format!(
            "smoke --local {n} --wire '{policy_str}': variant {variant_name} workload {} x{}",
            workload.name(),
            args.iterations,
            variant_name = variant.preset_name().map_or_else(|| variant.to_string(), str::to_string),
        );
        println!(
            "wire: ranks 0..{n} on hosts 10.213.0.1..10.213.0.{n} (host = rank + 1), root at 10.213.0.1:{ROOT_PORT}, variant {variant}"
        );
        let started = Instant::now();
        let mut worst = Outcome::Ok;
        let mut ok_iters = 0;
        for iter in 0..args.iterations {
            let policy = make_policy()?;
            match policy {
                Policy::Model(_) => println!("wire: iter {iter}: policy {policy_str} (the simulator's kernel model)"),
                _ => println!("wire: iter {iter}: policy {policy}"),
            }
            let ops: Vec<Vec<_>> = (0..n)
                .map(|r| specs.iter().enumerate().map(|(i, s)| build_op(*s, args.seed, i as u32, r, n)).collect())
                .collect();
            let run = wire_run::run_ranks(cfg, ops, policy).context("running the ranks on the wire")?;
            let mut iter_worst = Outcome::Ok;
            for (r, (result, took)) in run.ranks.iter().zip(&run.rank_times).enumerate() {
                let r = r as u32;
                let (outcome, summary, notes) = judge(result, &specs, args.seed, r, n);
                let ms = took.as_millis();
                match outcome {
                    Outcome::Ok => {
                        println!("rank {r}/{n} iter {iter}: ok: init + {} ops verified in {ms} ms", specs.len())
                    }
                    _ => println!("rank {r}/{n} iter {iter}: FAIL after {ms} ms: {summary}"),
                }
                for note in notes {
                    println!("  rank {r}: {note}");
                }
                iter_worst = iter_worst.max(outcome);
            }
            print_wire(&run.wire);
            worst = worst.max(iter_worst);
            if iter_worst == Outcome::Ok {
                ok_iters += 1;
            } else {
                break;
            }
        }
        let ms = started.elapsed().as_millis();
        let verdict = match worst {
            Outcome::Ok => "pass",
            Outcome::Error => "error",
            Outcome::Corruption => "corruption",
        };
        let status = if worst == Outcome::Ok { "pass" } else { "FAIL" };
        println!("{head}: {status}: verdict {verdict}: {ok_iters}/{} iterations ok in {ms} ms", args.iterations);
        Ok(if worst == Outcome::Ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
    }

    type PolicyMaker = Box<dyn Fn() -> anyhow::Result<Policy>>;

    /// `model[=SEED][,adversary=PROFILE]` or a wire policy string.
    fn parse_policy(s: &str, default_seed: u64, n: u32) -> anyhow::Result<PolicyMaker> {
        let head = s.split(',').next().unwrap_or_default().trim();
        if head != "model" && !head.starts_with("model=") {
            s.parse::<Policy>().with_context(|| format!("--wire '{s}'"))?;
            let s = s.to_string();
            return Ok(Box::new(move || Ok(s.parse::<Policy>()?)));
        }
        let seed = match head.strip_prefix("model=") {
            Some(v) => v.trim().parse::<u64>().with_context(|| format!("--wire '{s}': `{v}` is not a seed"))?,
            None => default_seed,
        };
        let mut profile = "rss".to_string();
        for part in s.split(',').skip(1) {
            match part.trim().split_once('=') {
                Some(("adversary", p)) => profile = p.trim().to_string(),
                _ => bail!("--wire '{s}': bad part `{part}` (expected adversary=PROFILE)"),
            }
        }
        KernelConfig::profile_for_seed(&profile, seed).map_err(|e| anyhow!("--wire '{s}': {e}"))?;
        Ok(Box::new(move || {
            let cfg = KernelConfig::profile_for_seed(&profile, seed).map_err(|e| anyhow!("{e}"))?;
            Ok(model_policy(cfg, seed, n))
        }))
    }

    /// A `Policy::model` whose delays come from the simulator's kernel model: each real
    /// connection, at its first SYN, is also opened in a seeded [`Kernel`] (same hosts, same
    /// server port, at the same time since the start), and the wire holds its
    /// handshake-completing packet for as long as the model took beyond its stall-free
    /// handshake (three one-way latencies and services) to put the child in the accept queue:
    /// the RX-queue stalls (and any SYN loss and retransmission) the model imposed on it.
    fn model_policy(mut cfg: KernelConfig, seed: u64, n: u32) -> Policy {
        cfg.trace = true;
        let floor = (cfg.latency + cfg.service) * 3;
        let mut kernel = Kernel::new(cfg, seed, n);
        let mut listeners: BTreeMap<(u32, u16), ListenerId> = BTreeMap::new();
        let start = Instant::now();
        let mut model_now = bootsim_core::Instant::ZERO;
        Policy::model(move |flow: &FlowInfo| {
            let (from, to) = (host_rank(flow.src_host), host_rank(flow.dst_host));
            if flow.src_host == 0 || from >= n || to >= n {
                return Duration::ZERO;
            }
            let real = bootsim_core::Instant::from_nanos(start.elapsed().as_nanos() as u64);
            let t = real.max(model_now);
            let port = flow.dst.port();
            let l = match listeners.get(&(to, port)) {
                Some(l) => *l,
                None => match kernel.listen(t, HostId(to), port) {
                    Ok(l) => *listeners.entry((to, port)).or_insert(l),
                    Err(_) => return Duration::ZERO,
                },
            };
            let sock = kernel.connect(t, HostId(from), HostId(to), port);
            let limit = t + Duration::from_secs(10);
            let mut enqueued = None;
            while enqueued.is_none() {
                while let Some(ev) = kernel.poll_event() {
                    if let EventKind::ChildEnqueued { sock: child, .. } = ev.kind {
                        if child.conn() == sock.conn() {
                            enqueued = Some(ev.at);
                        }
                    }
                }
                while kernel.accept(model_now.max(t), l).is_some() {}
                match kernel.poll_timeout() {
                    Some(at) if enqueued.is_none() && at <= limit => {
                        kernel.handle_timeout(at);
                        model_now = model_now.max(at);
                    }
                    _ => break,
                }
            }
            let delay = enqueued.map_or(Duration::ZERO, |at| at.saturating_since(t).saturating_sub(floor));
            tracing::info!(conn = flow.conn, ?delay, "model: hold for the kernel model's delay");
            delay
        })
    }

    /// The integrity oracle on one rank: per operation, wrong bytes (QP handles decoded) or the
    /// error; plus the events an operator must see (drain timeouts, short messages).
    fn judge(
        result: &Result<RankRun, DriverError>,
        specs: &[OpSpec],
        seed: u64,
        rank: u32,
        n: u32,
    ) -> (Outcome, String, Vec<String>) {
        let run = match result {
            Ok(run) => run,
            Err(DriverError::Failed { run, .. }) => run,
            Err(e) => return (Outcome::Error, format!("error: {e}"), Vec::new()),
        };
        let mut findings = Vec::new();
        let mut outcome = Outcome::Ok;
        if let Some(Err(e)) = run.completions.first().map(|c| &c.result) {
            findings.push(format!("error: init: {e}"));
            outcome = Outcome::Error;
        }
        for (i, (spec, c)) in specs.iter().zip(run.completions.iter().skip(1)).enumerate() {
            match &c.result {
                Err(e) => {
                    findings.push(format!("error: {}", error_text(e)));
                    outcome = outcome.max(Outcome::Error);
                }
                Ok(got) => {
                    if let Some(want) = expected_result(*spec, seed, i as u32, rank, n) {
                        if *got != want {
                            findings.push(format!("CORRUPTION: {}", describe_corruption(*spec, i, got, &want, n)));
                            outcome = Outcome::Corruption;
                        }
                    }
                }
            }
        }
        let done = run.completions.len().saturating_sub(1);
        if outcome == Outcome::Ok && done < specs.len() {
            findings.push(format!("{done} of {} ops completed", specs.len()));
            outcome = Outcome::Error;
        }
        if let Err(e) = result {
            let text = e.to_string();
            if !findings.iter().any(|f| f.contains(&text)) {
                findings.push(format!("error: {text}"));
                outcome = outcome.max(Outcome::Error);
            }
        }
        let mut notes = Vec::new();
        let mut drains = (0usize, Duration::ZERO);
        for ev in &run.events {
            match ev {
                Event::DrainGaveUp { to, tag, waited, unacked, .. } => notes.push(format!(
                    "DRAIN GAVE UP after {} ms on its message to rank {to} (tag {tag:#x}): {unacked} bytes still unacknowledged; closed anyway, ordering no longer guaranteed",
                    waited.as_millis()
                )),
                Event::DrainCompleted { waited, .. } => {
                    drains.0 += 1;
                    drains.1 = drains.1.max(*waited);
                }
                Event::ShortMessageAccepted { from, tag, got, expected, .. } => notes.push(format!(
                    "accepted a {got}-byte message from rank {from} (tag {tag:#x}) into a {expected}-byte buffer and reported success"
                )),
                _ => {}
            }
        }
        if drains.0 > 0 {
            notes.push(format!("{} drains completed, longest {:.1} ms", drains.0, drains.1.as_secs_f64() * 1e3));
        }
        (outcome, findings.join("; then "), notes)
    }

    fn error_text(e: &BootstrapError) -> String {
        let s = e.to_string();
        if matches!(e, BootstrapError::Timeout { .. }) {
            format!("{s} (a hang, bounded by --op-timeout-ms)")
        } else {
            s
        }
    }

    fn describe_corruption(spec: OpSpec, i: usize, got: &[u8], want: &[u8], n: u32) -> String {
        let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        let slice = (want.len() / n as usize).max(1);
        let from = at / slice;
        let mut s = format!("op {i} ({spec:?}): wrong bytes from offset {at} (slice of rank {from})");
        if matches!(spec, OpSpec::Alltoall(_)) && slice.is_multiple_of(QpHandle::SIZE) {
            let h = (at % slice) / QpHandle::SIZE;
            let off = from * slice + h * QpHandle::SIZE;
            let handle = |b: &[u8]| {
                b.get(off..off + QpHandle::SIZE)
                    .and_then(|x| <&[u8; QpHandle::SIZE]>::try_from(x).ok())
                    .map(QpHandle::from_bytes)
            };
            if let (Some(e), Some(r)) = (handle(want), handle(got)) {
                let _ = write!(
                    s,
                    ": handle {h} from rank {from}: expected QPN {:#x} GID {}, received QPN {:#x} GID {}",
                    e.qpn,
                    gid(&e),
                    r.qpn,
                    gid(&r)
                );
                if r.gid_is_zero() {
                    s.push_str(": ibv_modify_qp(RTR) with a zero GID would fail with EINVAL");
                }
            }
        }
        s
    }

    fn gid(h: &QpHandle) -> String {
        let g = h.gid();
        g.chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect::<Vec<_>>().join(":")
    }

    fn print_wire(report: &WireReport) {
        let held = report.count(|e| matches!(e, WireEvent::Held { .. }));
        let on_next =
            report.count(|e| matches!(e, WireEvent::Released { reason: ReleaseReason::NextCompleted { .. }, .. }));
        let on_deadline = report.count(|e| matches!(e, WireEvent::Released { reason: ReleaseReason::Deadline, .. }));
        let dropped = report.count(|e| matches!(e, WireEvent::DroppedAtShutdown { .. }));
        println!(
            "wire: {} connections, {} decisions: {held} held ({on_next} released by the next connection, {on_deadline} on deadline, {dropped} dropped at shutdown); {} packets forwarded",
            report.connections,
            report.decisions.len(),
            report.counters.forwarded
        );
        for d in report.decisions.iter().filter(|d| !matches!(d.event, WireEvent::Opened | WireEvent::Passed)) {
            println!("wire:   {}", decision_line(d));
        }
    }

    fn decision_line(d: &WireDecision) -> String {
        let f = &d.flow;
        let who = format!(
            "{:>9.3} ms conn {} (host {}>{} #{}: rank {} > rank {}, {} > {})",
            d.at_us as f64 / 1e3,
            f.conn,
            f.src_host,
            f.dst_host,
            f.pair_conn,
            host_rank(f.src_host),
            host_rank(f.dst_host),
            f.src,
            f.dst
        );
        let what = match d.event {
            WireEvent::Held { delay_us, until_next: true } => {
                format!("held until the next connection on the pair (at most {:.1} ms)", delay_us as f64 / 1e3)
            }
            WireEvent::Held { delay_us, until_next: false } => format!("held for {:.3} ms", delay_us as f64 / 1e3),
            WireEvent::Released { reason, packets, held_us } => {
                let why = match reason {
                    ReleaseReason::Deadline => "on deadline".to_string(),
                    ReleaseReason::NextCompleted { by_conn } => format!("by conn {by_conn}"),
                };
                format!("released {why} after {:.3} ms ({packets} packets)", held_us as f64 / 1e3)
            }
            WireEvent::DroppedAtShutdown { packets } => format!("dropped at shutdown ({packets} packets)"),
            WireEvent::Opened | WireEvent::Passed => format!("{:?}", d.event),
        };
        format!("{who}: {what}")
    }
}
