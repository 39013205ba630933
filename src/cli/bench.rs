//! `bootsim bench`: the figures a user asks for before adopting the tool, measured the same way
//! every time, kept as one `Report` (`report.rs`): printed as text, written as JSON with
//! `--json FILE`, and rendered into BENCHMARKS.md's tables with `--markdown FILE --update DOC`
//! (`make bench` does both), so no figure there is typed by hand.
//!
//! Noise: on a small shared machine absolute rates drift by tens of percent between minutes, so
//! every comparison is made between measurements taken side by side. Throughput cases run
//! interleaved in rounds (each round gives every case the same slice of wall time) and a ratio is
//! the median over rounds of the ratio within a round; real-socket variants are interleaved the
//! same way against `nvshmem-3.7`. Progress goes to stderr, the report to stdout at the end.

mod bare_turmoil;
mod profile;
mod real;
mod render;
mod report;

use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use bootsim_sim::case::shorten;
use bootsim_sim::{run_case, Case};
use report::{DetectRow, Growth, Meta, Ratios, RealRow, Report, ScaleOutcome, ScalePoint, ScaleRow};

/// Arguments of `bootsim bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Largest world of the scale series (16, 64, 256, 1024, 2048, 4096: every point up to this;
    /// `make bench-scale` runs all).
    #[arg(long, default_value_t = 1024)]
    max_ranks: u32,
    /// Fresh seeds for the time-to-detect figures.
    #[arg(long, default_value_t = 200)]
    detect_seeds: u64,
    /// Ranks of the real-socket runs (`bootsim smoke --local N`).
    #[arg(long, default_value_t = 32)]
    real_ranks: u32,
    /// Repetitions of each real-socket run (the median is reported).
    #[arg(long, default_value_t = 5)]
    real_reps: u32,
    /// A smoke version of every section in a few seconds (short budgets, small worlds).
    #[arg(long)]
    quick: bool,
    /// Internal: run one world of this size of `--scale-series` and print its wall time (the
    /// scale series runs each point in a child so that its peak memory is its own).
    #[arg(long, hide = true)]
    scale_child: Option<u32>,
    /// Internal: the series `--scale-child` runs a point of.
    #[arg(long, hide = true, value_enum, default_value_t = Series::NvshmemInit)]
    scale_series: Series,
    /// Also write the run's figures to FILE as JSON (`make bench` writes BENCHMARKS.json).
    #[arg(long, value_name = "FILE")]
    json: Option<std::path::PathBuf>,
    /// Run nothing: print BENCHMARKS.md's generated tables from a JSON report written by `--json`.
    #[arg(long, value_name = "JSON")]
    markdown: Option<std::path::PathBuf>,
    /// With `--markdown`: write the tables into DOC between its markers instead of printing them.
    #[arg(long, value_name = "DOC", requires = "markdown")]
    update: Option<std::path::PathBuf>,
}

fn case(s: &str) -> anyhow::Result<Case> {
    Case::parse(s).with_context(|| format!("in '{}'", shorten(s)))
}

fn median_f(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// The nearest-rank `q` quantile of `v`, sorted in place.
fn quantile<T: Copy + Ord>(v: &mut [T], q: f64) -> Option<T> {
    v.sort_unstable();
    let i = ((v.len() as f64) * q).ceil() as usize;
    v.get(i.saturating_sub(1).min(v.len().saturating_sub(1))).copied()
}

fn progress(s: &str) {
    eprintln!("bench: {s}");
}

/// What one run of a throughput subject did: connections, packets the kernel model carried
/// (0 without the model), and simulated time.
#[derive(Clone, Copy, Default)]
struct Work {
    conns: u64,
    packets: u64,
    sim: Duration,
}

/// A throughput subject: one run per call (argument: the seed).
type Subject = Box<dyn FnMut(u64) -> anyhow::Result<Work>>;

/// Per subject and round: (runs/s, connections/s); per subject: the totals (runs, work, wall).
struct Rates {
    rounds: Vec<Vec<(f64, f64)>>,
    totals: Vec<(u64, Work, Duration)>,
}

/// Runs every subject over `rounds` interleaved rounds of `slice` each.
fn interleaved(subjects: &mut [(String, Subject)], rounds: u32, slice: Duration) -> anyhow::Result<Rates> {
    let mut r = Rates { rounds: vec![Vec::new(); subjects.len()], totals: vec![Default::default(); subjects.len()] };
    for round in 0..rounds {
        progress(&format!("throughput round {}/{rounds}", round + 1));
        for (i, (_, run)) in subjects.iter_mut().enumerate() {
            let start = Instant::now();
            let (mut runs, mut conns) = (0u64, 0u64);
            while start.elapsed() < slice || runs < 2 {
                // Seeds continue across rounds: every run is a fresh seed.
                let w = run(r.totals[i].0 + runs)?;
                conns += w.conns;
                let t = &mut r.totals[i].1;
                (t.conns, t.packets, t.sim) = (t.conns + w.conns, t.packets + w.packets, t.sim + w.sim);
                runs += 1;
            }
            let t = start.elapsed();
            r.totals[i].0 += runs;
            r.totals[i].2 += t;
            r.rounds[i].push((runs as f64 / t.as_secs_f64(), conns as f64 / t.as_secs_f64()));
        }
    }
    Ok(r)
}

fn throughput_section(quick: bool, report: &mut Report) -> anyhow::Result<()> {
    let engine_case = |engine: &str, s: &str| case(&format!("engine={engine} variant=nvshmem-3.7 adversary=rss {s}"));
    let (deepep, init) = ("workload=deepep ranks=2", "workload=nvshmem-init ranks=16");
    let engine = |c: Case| -> Subject {
        Box::new(move |seed| {
            let r = run_case(&c.with_seed(seed)?, false);
            Ok(Work { conns: r.kernel.enqueued, packets: r.kernel.packets, sim: r.bootstrap_time })
        })
    };
    let bare: Subject = Box::new(|seed| {
        let (conns, sim) = bare_turmoil::run(16, seed);
        Ok(Work { conns, packets: 0, sim })
    });
    let mut subjects: Vec<(String, Subject)> = vec![
        ("bare turmoil 16".into(), bare),
        ("turmoil deepep 2".into(), engine(engine_case("turmoil", deepep)?)),
        ("turmoil init 16".into(), engine(engine_case("turmoil", init)?)),
        ("fast deepep 2".into(), engine(engine_case("fast", deepep)?)),
        ("fast init 16".into(), engine(engine_case("fast", init)?)),
    ];
    let hosts = [16u64, 2, 16, 2, 16];
    let (rounds, slice) = if quick { (2, Duration::from_millis(100)) } else { (5, Duration::from_millis(800)) };
    let rates = interleaved(&mut subjects, rounds, slice)?;
    let median =
        |i: usize, per_conn: bool| median_f(rates.rounds[i].iter().map(|r| if per_conn { r.1 } else { r.0 }).collect());
    // Median over rounds of a / b within the round (runs/s or connections/s).
    let ratio = |a: usize, b: usize, per_conn: bool| {
        let pick = |r: &(f64, f64)| if per_conn { r.1 } else { r.0 };
        median_f(rates.rounds[a].iter().zip(&rates.rounds[b]).map(|(x, y)| pick(x) / pick(y)).collect())
    };
    // The breakdown: turmoil's cost is per host per tick (1 ms of simulated time), the fast
    // engine's per packet of the kernel model.
    for (i, (name, _)) in subjects.iter().enumerate() {
        let (runs, w, wall) = rates.totals[i];
        let per_run = |x: u64| x as f64 / runs as f64;
        let ticks = w.sim.as_secs_f64() * 1e3;
        let (cost, cost_unit) = if i <= 2 {
            (wall.as_secs_f64() * 1e6 / (ticks * hosts[i] as f64).max(1.0), "us/host-tick")
        } else {
            (wall.as_secs_f64() * 1e9 / (w.packets as f64).max(1.0), "ns/packet")
        };
        report.throughput.push(report::Subject {
            name: name.clone(),
            hosts: hosts[i],
            runs,
            runs_per_s: median(i, false),
            conns_per_s: median(i, true),
            conns_per_run: per_run(w.conns),
            packets_per_run: per_run(w.packets),
            sim_ms_per_run: ticks / runs as f64,
            cost,
            cost_unit: cost_unit.into(),
        });
    }
    let (bare, t_dee, t_init, f_dee, f_init) = (0, 1, 2, 3, 4);
    // Both engines run the same kernel model, packet by packet: a turmoil run cannot take less
    // than its packets at the fast engine's cost per packet, which caps the ratio.
    let per_run = |i: usize| rates.totals[i].2.as_secs_f64() / rates.totals[i].0 as f64;
    let per_packet = |i: usize| rates.totals[i].2.as_secs_f64() / (rates.totals[i].1.packets as f64).max(1.0);
    let turmoil_packets = rates.totals[t_init].1.packets as f64 / rates.totals[t_init].0 as f64;
    report.ratios = Some(Ratios {
        fast_over_turmoil_deepep2: ratio(f_dee, t_dee, false),
        fast_over_turmoil_init16: ratio(f_init, t_init, false),
        kernel_model_ceiling_init16: per_run(t_init) / (turmoil_packets * per_packet(f_init)),
        bare_over_turmoil_init16_runs: ratio(bare, t_init, false),
        bare_over_turmoil_init16_conns: ratio(bare, t_init, true),
        fast_init16_over_bare_runs: ratio(f_init, bare, false),
    });
    Ok(())
}

/// A scale series: the init workload of one protocol on the fast engine, `seed=1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Series {
    /// NVSHMEM's `nvshmem-init` on `nvshmem-3.7`.
    NvshmemInit,
    /// NCCL's `nccl-init` (`ncclCommInitRank`'s bootstrap) on `nccl-2.30`.
    NcclInit,
}

impl Series {
    /// The variant and workload words of the series' case.
    fn words(self) -> &'static str {
        match self {
            Series::NvshmemInit => "variant=nvshmem-3.7 workload=nvshmem-init",
            Series::NcclInit => "variant=nccl-2.30 workload=nccl-init",
        }
    }

    /// What `--scale-series` calls it.
    fn arg(self) -> &'static str {
        match self {
            Series::NvshmemInit => "nvshmem-init",
            Series::NcclInit => "nccl-init",
        }
    }

    /// A scale point's case. Its simulated time grows with n (nvshmem-init's 14 allgathers'
    /// ring steps run one after another: 128 s at 1024 ranks), past the default 300 s deadline
    /// at 4096 ranks, so the deadline is an hour: a point must measure the whole run.
    fn case(self, ranks: u32) -> String {
        format!("engine=fast {} ranks={ranks} adversary=rss seed=1 deadline_ms=3600000", self.words())
    }
}

/// The scale series: every point up to `--max-ranks` (`make bench-scale` goes to 4096).
const SCALE_POINTS: [u32; 6] = [16, 64, 256, 1024, 2048, 4096];

/// The CPU time this process has used so far (`CLOCK_PROCESS_CPUTIME_ID`).
fn process_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a pointer to a live local.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// `--scale-child N`: the median wall and CPU time of the point (repeated while cheap), and
/// what one run did, as `key value` lines.
fn scale_child(series: Series, ranks: u32) -> anyhow::Result<ExitCode> {
    // The parent caps this process's address space (`scale_point`), so a point larger than the
    // case budget meant for interactive runs is measured, and fails alone if it cannot fit.
    let s = series.case(ranks);
    let c = Case::parse_within(&s, u128::MAX).with_context(|| format!("in '{}'", shorten(&s)))?;
    let (mut walls, mut cpus) = (Vec::new(), Vec::new());
    let start = Instant::now();
    let mut last = None;
    while walls.is_empty() || (walls.len() < 5 && start.elapsed() < Duration::from_secs(1)) {
        let (t, cpu) = (Instant::now(), process_cpu());
        let report = run_case(&c, false);
        walls.push(t.elapsed().as_secs_f64());
        cpus.push((process_cpu() - cpu).as_secs_f64());
        last = Some(std::hint::black_box(report));
    }
    let r = last.expect("one run at least");
    println!("wall_s {}\ncpu_s {}", median_f(walls), median_f(cpus));
    println!("verdict {}\nbootstrap_s {}", r.verdict, r.bootstrap_time.as_secs_f64());
    let k = &r.kernel;
    println!(
        "messages {}\nwrites {}\nagenda_events {}\nwakeups {}\npackets {}",
        r.messages, k.writes, k.agenda_events, k.wakeups, k.packets
    );
    Ok(ExitCode::SUCCESS)
}

/// How one scale child ended.
enum ScaleEnd {
    Done(ScalePoint),
    /// It ran out of the address-space cap (MiB) or was killed; the peak it reached.
    OutOfMemory {
        cap_mib: f64,
        peak_mib: f64,
    },
}

/// The child's address-space cap: three quarters of this machine's memory, so a point that
/// cannot fit fails alone instead of pushing the machine into swap or the OOM killer.
fn memory_cap_bytes() -> Option<u64> {
    Some(memory_bytes()? / 4 * 3)
}

/// This machine's memory (`MemTotal`).
fn memory_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 =
        info.lines().find_map(|l| l.strip_prefix("MemTotal:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// Runs one scale point in a child `bootsim bench --scale-child N` under the memory cap.
fn scale_point(series: Series, ranks: u32) -> anyhow::Result<ScaleEnd> {
    let exe = std::env::current_exe().context("locating the bootsim binary")?;
    let cap = memory_cap_bytes();
    let mut cmd = Command::new(exe);
    // The child's stderr is ours: a child that fails says why before the bench stops.
    cmd.args(["bench", "--scale-child", &ranks.to_string(), "--scale-series", series.arg()]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
    if let Some(cap) = cap {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe and touches only the child's own limits.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit { rlim_cur: cap, rlim_max: cap };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let child = cmd.spawn().context("spawning the scale child")?;
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.context("the child's stdout")?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut text)?;
    // wait4 rather than Child::wait: it returns this child's own resource usage.
    let mut status = 0;
    // SAFETY: wait4 writes only the status and the rusage struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    anyhow::ensure!(rc == pid, "wait4 on the scale child failed");
    let peak_mib = ru.ru_maxrss as f64 / 1024.0;
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        // An allocation beyond RLIMIT_AS aborts the child (SIGABRT); the kernel's OOM killer
        // sends SIGKILL.
        let sig = if libc::WIFSIGNALED(status) { libc::WTERMSIG(status) } else { 0 };
        anyhow::ensure!(
            sig == libc::SIGABRT || sig == libc::SIGKILL,
            "scale child at {ranks} ranks failed (status {status:#x})"
        );
        return Ok(ScaleEnd::OutOfMemory { cap_mib: cap.unwrap_or(0) as f64 / 1048576.0, peak_mib });
    }
    let field = |key: &str| -> anyhow::Result<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse::<f64>().ok())
            .with_context(|| format!("the scale child printed no {key}"))
    };
    Ok(ScaleEnd::Done(ScalePoint {
        wall_s: field("wall_s")?,
        cpu_s: field("cpu_s")?,
        peak_mib,
        verdict: text
            .lines()
            .find_map(|l| l.strip_prefix("verdict "))
            .context("the scale child printed no verdict")?
            .trim()
            .to_string(),
        bootstrap_s: field("bootstrap_s")?,
        messages: field("messages")?,
        writes: field("writes")?,
        agenda_events: field("agenda_events")?,
        wakeups: field("wakeups")?,
        packets: field("packets")?,
    }))
}

/// Least-squares slope of ln(y) against ln(x).
fn log_log_slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let (xs, ys): (Vec<f64>, Vec<f64>) = points.iter().map(|&(x, y)| (x.ln(), y.ln())).unzip();
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// One scale series up to `max_ranks`: its rows and growth exponents.
fn scale_section(series: Series, max_ranks: u32) -> anyhow::Result<(Vec<ScaleRow>, Growth)> {
    let mut rows = Vec::new();
    let (mut cpu_pts, mut mem_pts, mut msg_pts, mut pkt_pts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut frame_pts, mut event_pts) = (Vec::new(), Vec::new());
    let mut stopped = false;
    for &n in SCALE_POINTS.iter().filter(|&&n| n <= max_ranks) {
        let outcome = if stopped {
            ScaleOutcome::NotRun { why: "a smaller point ran out of memory".into() }
        } else {
            progress(&format!("scale: {} at {n} ranks", series.arg()));
            match scale_point(series, n)? {
                ScaleEnd::Done(p) => {
                    cpu_pts.push((n as f64, p.cpu_s));
                    mem_pts.push((n as f64, p.peak_mib));
                    msg_pts.push((n as f64, p.messages));
                    pkt_pts.push((n as f64, p.packets));
                    frame_pts.push((n as f64, p.writes));
                    event_pts.push((n as f64, p.agenda_events));
                    ScaleOutcome::Done(p)
                }
                ScaleEnd::OutOfMemory { cap_mib, peak_mib } => {
                    stopped = true;
                    ScaleOutcome::OutOfMemory { cap_mib, peak_mib }
                }
            }
        };
        rows.push(ScaleRow { ranks: n, outcome });
    }
    for t in report::SCALE_TARGETS.iter().filter(|t| t.0 > max_ranks) {
        let why = "--max-ranks (make bench-scale runs it)".into();
        rows.push(ScaleRow { ranks: t.0, outcome: ScaleOutcome::NotRun { why } });
    }
    // The smallest worlds are dominated by fixed costs; exponents are fitted on n >= 256 when
    // there are at least two such points, else on n >= 64.
    let from = if cpu_pts.iter().filter(|p| p.0 >= 256.0).count() >= 2 { 256 } else { 64 };
    let tail = |p: &[(f64, f64)]| p.iter().copied().filter(|q| q.0 >= from as f64).collect::<Vec<_>>();
    let growth = Growth {
        from_ranks: from,
        cpu: log_log_slope(&tail(&cpu_pts)),
        messages: log_log_slope(&tail(&msg_pts)),
        packets: log_log_slope(&tail(&pkt_pts)),
        frames: log_log_slope(&tail(&frame_pts)),
        events: log_log_slope(&tail(&event_pts)),
        memory: log_log_slope(&tail(&mem_pts)),
    };
    Ok((rows, growth))
}

/// Over `seeds` consecutive seeds: failures, and per failure the seeds and wall time since the
/// previous failure (or the start): each is a sample of "seeds until the first failure" from a
/// fresh start.
fn detection(c: &Case, seeds: u64) -> anyhow::Result<(usize, Vec<u64>, Vec<Duration>)> {
    let (mut gaps, mut walls) = (Vec::new(), Vec::new());
    let (mut last, mut since) = (0u64, Instant::now());
    for s in 0..seeds {
        if !run_case(&c.with_seed(s)?, false).verdict.is_ok() {
            gaps.push(s + 1 - last);
            walls.push(since.elapsed());
            last = s + 1;
            since = Instant::now();
        }
    }
    Ok((gaps.len(), gaps, walls))
}

fn detect_section(quick: bool, seeds: u64, report: &mut Report) -> anyhow::Result<()> {
    for variant in ["nvshmem-3.4", "nvshmem-3.7"] {
        for (name, s, targeted) in
            [("deepep 2", "workload=deepep ranks=2", true), ("init 16", "workload=nvshmem-init ranks=16", false)]
        {
            let c = case(&format!("engine=fast variant={variant} adversary=rss {s}"))?;
            let seeds = match (quick, targeted) {
                (false, _) => seeds,
                (true, true) => seeds.min(40),
                (true, false) => seeds.min(10),
            };
            progress(&format!("detect: {variant} {s}, {seeds} seeds"));
            let (failures, mut gaps, mut walls) = detection(&c, seeds)?;
            report.detect.push(DetectRow {
                variant: variant.into(),
                case: name.into(),
                seeds,
                failures: failures as u64,
                median: quantile(&mut gaps, 0.5),
                p90: quantile(&mut gaps, 0.9),
                wall_median_ms: quantile(&mut walls, 0.5).map(|d| d.as_secs_f64() * 1e3),
                targeted,
            });
        }
    }
    Ok(())
}

fn real_section(n: u32, reps: u32, report: &mut Report) -> anyhow::Result<()> {
    let variants = bootsim_nvshmem::PRESETS;
    let base = variants.iter().position(|v| *v == "nvshmem-3.7").context("nvshmem-3.7 is a preset")?;
    // walls[v][rep]: wall time of `smoke --local n`, slowest[v][rep]: the slowest rank's own time.
    let mut walls = vec![Vec::new(); variants.len()];
    let mut slowest = vec![Vec::new(); variants.len()];
    // Warm the page cache and the loopback path once before measuring.
    real::smoke_local(n, "nvshmem-3.7")?;
    for rep in 0..reps {
        progress(&format!("real sockets: smoke --local {n}, round {}/{reps}", rep + 1));
        for (i, v) in variants.iter().enumerate() {
            let (wall, slow) = real::smoke_local(n, v)?;
            walls[i].push(wall.as_secs_f64());
            slowest[i].push(slow.unwrap_or(0) as f64);
        }
    }
    for (i, v) in variants.iter().enumerate() {
        progress(&format!("real sockets: {v} in process, drain waits"));
        let drain = real::drain_in_process(n, v, 1)?;
        report.real.push(RealRow {
            variant: v.to_string(),
            ranks: n,
            wall_ms: median_f(walls[i].clone()) * 1e3,
            slowest_rank_ms: median_f(slowest[i].clone()),
            drains: drain.drains,
            gave_up: drain.gave_up,
            drain_us_per_message: (drain.drains > 0).then(|| drain.per_message().as_secs_f64() * 1e6),
            ratio: median_f(walls[i].iter().zip(&walls[base]).map(|(a, b)| a / b).collect()),
        });
    }
    Ok(())
}

/// The commit of the working directory's checkout, if it is one.
fn commit() -> Option<String> {
    let o = Command::new("git").args(["rev-parse", "--short", "HEAD"]).stderr(Stdio::null()).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn meta(a: &BenchArgs) -> Meta {
    Meta {
        date: jiff::Timestamp::now().to_string(),
        commit: commit(),
        args: std::env::args().skip(2).collect::<Vec<_>>().join(" "),
        quick: a.quick,
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        mem_gib: memory_bytes().unwrap_or(0) as f64 / (1u64 << 30) as f64,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string(),
        wall_s: 0.0,
    }
}

/// `--markdown JSON [--update DOC]`: render a written report, run nothing.
fn markdown(json: &std::path::Path, doc: Option<&std::path::Path>) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(json).with_context(|| format!("reading {}", json.display()))?;
    let r: Report = serde_json::from_str(&text).with_context(|| format!("{} is not a bench report", json.display()))?;
    let md = render::markdown(&r);
    match doc {
        None => print!("{md}"),
        Some(doc) => {
            let old = std::fs::read_to_string(doc).with_context(|| format!("reading {}", doc.display()))?;
            let new = render::splice(&old, &md).with_context(|| format!("in {}", doc.display()))?;
            std::fs::write(doc, new).with_context(|| format!("writing {}", doc.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs every section and prints the report (and writes it with `--json`).
pub fn bench(a: BenchArgs) -> anyhow::Result<ExitCode> {
    if let Some(n) = a.scale_child {
        return scale_child(a.scale_series, n);
    }
    if let Some(json) = &a.markdown {
        return markdown(json, a.update.as_deref());
    }
    let started = Instant::now();
    let mut r = Report {
        meta: meta(&a),
        throughput: Vec::new(),
        ratios: None,
        scale: Vec::new(),
        growth: None,
        nccl_scale: Vec::new(),
        nccl_growth: None,
        detect: Vec::new(),
        real: Vec::new(),
        profile: None,
    };
    throughput_section(a.quick, &mut r)?;
    let max_ranks = if a.quick { a.max_ranks.min(64) } else { a.max_ranks };
    (r.scale, r.growth) = scale_section(Series::NvshmemInit, max_ranks).map(|(s, g)| (s, Some(g)))?;
    (r.nccl_scale, r.nccl_growth) = scale_section(Series::NcclInit, max_ranks).map(|(s, g)| (s, Some(g)))?;
    detect_section(a.quick, a.detect_seeds, &mut r)?;
    let (n, reps) = if a.quick { (a.real_ranks.min(8), 1) } else { (a.real_ranks, a.real_reps.max(1)) };
    real_section(n, reps, &mut r)?;
    progress("5 profile: callgrind");
    r.profile = Some(profile::section(a.quick));
    r.meta.wall_s = started.elapsed().as_secs_f64();
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&r)? + "\n";
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    print!("{}", render::text(&r));
    Ok(ExitCode::SUCCESS)
}
