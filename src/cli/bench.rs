//! `bootsim bench`: the figures a user asks for before adopting the tool, measured the same way
//! every time, printed as one table (`make bench`; BENCHMARKS.md records the latest).
//!
//! Noise: on a small shared machine absolute rates drift by tens of percent between minutes, so
//! every comparison is made between measurements taken side by side. Throughput cases run
//! interleaved in rounds (each round gives every case the same slice of wall time) and a ratio is
//! the median over rounds of the ratio within a round; real-socket variants are interleaved the
//! same way against `nvshmem-3.7`. Progress goes to stderr, the table to stdout at the end.

mod bare_turmoil;
mod real;

use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use bootsim_sim::case::shorten;
use bootsim_sim::{run_case, Case};

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
    /// Internal: run one `nvshmem-init` world of this size and print its wall time (the scale
    /// series runs each point in a child so that its peak memory is its own).
    #[arg(long, hide = true)]
    scale_child: Option<u32>,
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

/// One line of the table.
struct Row {
    section: &'static str,
    case: String,
    figure: String,
    ratio: String,
    target: Option<(String, Option<bool>)>,
}

impl Row {
    fn new(section: &'static str, case: impl Into<String>, figure: impl Into<String>) -> Self {
        Row { section, case: case.into(), figure: figure.into(), ratio: String::new(), target: None }
    }
    fn ratio(mut self, r: impl Into<String>) -> Self {
        self.ratio = r.into();
        self
    }
    /// A target and whether it is met (`None`: not measured in this run).
    fn target(mut self, t: impl Into<String>, met: Option<bool>) -> Self {
        self.target = Some((t.into(), met));
        self
    }
}

fn print_table(rows: &[Row]) {
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            let target = match &r.target {
                None => String::new(),
                Some((t, Some(true))) => format!("{t}: PASS"),
                Some((t, Some(false))) => format!("{t}: MISS"),
                Some((t, None)) => format!("{t}: not measured"),
            };
            [r.section.to_string(), r.case.clone(), r.figure.clone(), r.ratio.clone(), target]
        })
        .collect();
    let mut table = super::table::new(&["section", "case", "figure", "ratio", "target"], &[]);
    for c in cells {
        table.add_row(c.to_vec());
    }
    println!("{table}");
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
type Subject = Box<dyn FnMut(u64) -> Work>;

/// Per subject and round: (runs/s, connections/s); per subject: the totals (runs, work, wall).
struct Rates {
    rounds: Vec<Vec<(f64, f64)>>,
    totals: Vec<(u64, Work, Duration)>,
}

/// Runs every subject over `rounds` interleaved rounds of `slice` each.
fn interleaved(subjects: &mut [(String, Subject)], rounds: u32, slice: Duration) -> Rates {
    let mut r = Rates { rounds: vec![Vec::new(); subjects.len()], totals: vec![Default::default(); subjects.len()] };
    for round in 0..rounds {
        progress(&format!("throughput round {}/{rounds}", round + 1));
        for (i, (_, run)) in subjects.iter_mut().enumerate() {
            let start = Instant::now();
            let (mut runs, mut conns) = (0u64, 0u64);
            while start.elapsed() < slice || runs < 2 {
                // Seeds continue across rounds: every run is a fresh seed.
                let w = run(r.totals[i].0 + runs);
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
    r
}

fn throughput_section(quick: bool, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    const SECTION: &str = "1 throughput";
    let engine_case = |engine: &str, s: &str| case(&format!("engine={engine} variant=nvshmem-3.7 adversary=rss {s}"));
    let (deepep, init) = ("workload=deepep ranks=2", "workload=nvshmem-init ranks=16");
    let engine = |c: Case| -> Subject {
        Box::new(move |seed| {
            let r = run_case(&c.with_seed(seed), false);
            Work { conns: r.kernel.enqueued, packets: r.kernel.packets, sim: r.bootstrap_time }
        })
    };
    let bare: Subject = Box::new(|seed| {
        let (conns, sim) = bare_turmoil::run(16, seed);
        Work { conns, packets: 0, sim }
    });
    let mut subjects: Vec<(String, Subject)> = vec![
        ("bare turmoil: 16 hosts all-to-all, 240 short connections".into(), bare),
        (format!("turmoil {deepep}"), engine(engine_case("turmoil", deepep)?)),
        (format!("turmoil {init}"), engine(engine_case("turmoil", init)?)),
        (format!("fast {deepep}"), engine(engine_case("fast", deepep)?)),
        (format!("fast {init}"), engine(engine_case("fast", init)?)),
    ];
    let hosts = [16u64, 2, 16, 2, 16];
    let (rounds, slice) = if quick { (2, Duration::from_millis(100)) } else { (5, Duration::from_millis(800)) };
    let rates = interleaved(&mut subjects, rounds, slice);
    let median =
        |i: usize, per_conn: bool| median_f(rates.rounds[i].iter().map(|r| if per_conn { r.1 } else { r.0 }).collect());
    // Median over rounds of a / b within the round (runs/s or connections/s).
    let ratio = |a: usize, b: usize, per_conn: bool| {
        let pick = |r: &(f64, f64)| if per_conn { r.1 } else { r.0 };
        median_f(rates.rounds[a].iter().zip(&rates.rounds[b]).map(|(x, y)| pick(x) / pick(y)).collect())
    };
    // The breakdown: turmoil's cost is per host per tick (1 ms of simulated time), the fast
    // engine's per packet of the kernel model.
    let figure = |i: usize| {
        let (runs, w, wall) = rates.totals[i];
        let per_run = |x: u64| x as f64 / runs as f64;
        let ticks = w.sim.as_secs_f64() * 1e3;
        let cost = if i <= 2 {
            format!("{:.2} us per host-tick", wall.as_secs_f64() * 1e6 / (ticks * hosts[i] as f64).max(1.0))
        } else {
            format!("{:.0} ns per packet", wall.as_secs_f64() * 1e9 / (w.packets as f64).max(1.0))
        };
        format!(
            "{:.1} runs/s, {:.0} conns/s; per run {:.0} conns, {:.0} packets, {:.0} sim ms; {cost}",
            median(i, false),
            median(i, true),
            per_run(w.conns),
            per_run(w.packets),
            ticks / runs as f64,
        )
    };
    let (bare, t_dee, t_init, f_dee, f_init) = (0, 1, 2, 3, 4);
    rows.push(
        Row::new(SECTION, subjects[bare].0.clone(), figure(bare))
            .ratio(format!("fast nvshmem-init / this: {:.2}x runs/s", ratio(f_init, bare, false))),
    );
    rows.push(Row::new(SECTION, subjects[t_dee].0.clone(), figure(t_dee)));
    rows.push(Row::new(SECTION, subjects[t_init].0.clone(), figure(t_init)).ratio(format!(
        "bare turmoil / this: {:.1}x runs/s, {:.1}x conns/s",
        ratio(bare, t_init, false),
        ratio(bare, t_init, true)
    )));
    rows.push(
        Row::new(SECTION, subjects[f_dee].0.clone(), figure(f_dee))
            .ratio(format!("fast / turmoil: {:.1}x", ratio(f_dee, t_dee, false)))
            .target("fast >= 50x turmoil", Some(ratio(f_dee, t_dee, false) >= 50.0)),
    );
    let x = ratio(f_init, t_init, false);
    // Both engines run the same kernel model, packet by packet: a turmoil run cannot take less
    // than its packets at the fast engine's cost per packet, which caps the ratio.
    let per_run = |i: usize| rates.totals[i].2.as_secs_f64() / rates.totals[i].0 as f64;
    let per_packet = |i: usize| rates.totals[i].2.as_secs_f64() / (rates.totals[i].1.packets as f64).max(1.0);
    let turmoil_packets = rates.totals[t_init].1.packets as f64 / rates.totals[t_init].0 as f64;
    let ceiling = per_run(t_init) / (turmoil_packets * per_packet(f_init));
    rows.push(
        Row::new(SECTION, subjects[f_init].0.clone(), figure(f_init))
            .ratio(format!("fast / turmoil: {x:.1}x (kernel-model ceiling {ceiling:.1}x)"))
            .target("fast >= 50x turmoil", Some(x >= 50.0)),
    );
    Ok(())
}

/// The scale point the child runs: `nvshmem-init` at `ranks` on the fast engine.
/// A scale point's case. Its simulated time grows with n (init's and 14 allgathers' ring steps
/// run one after another: 128 s at 1024 ranks), past the default 300 s deadline at 4096 ranks,
/// so the deadline is an hour: a point must measure the whole run.
fn scale_case(ranks: u32) -> String {
    format!(
        "engine=fast variant=nvshmem-3.7 workload=nvshmem-init ranks={ranks} adversary=rss seed=1 deadline_ms=3600000"
    )
}

/// The scale series: every point up to `--max-ranks` (`make bench-scale` goes to 4096).
const SCALE_POINTS: [u32; 6] = [16, 64, 256, 1024, 2048, 4096];

/// Issue #17's targets per scale point: (ranks, CPU seconds, peak MiB).
const SCALE_TARGETS: [(u32, f64, f64); 3] = [(1024, 10.0, 300.0), (2048, 60.0, 1024.0), (4096, 300.0, 4096.0)];

/// Engine events per bootstrap message the fast engine should stay under, at every size.
const EVENTS_PER_MESSAGE_TARGET: f64 = 20.0;

/// The CPU time this process has used so far (`CLOCK_PROCESS_CPUTIME_ID`).
fn process_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a pointer to a live local.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// `--scale-child N`: the median wall and CPU time of the point (repeated while cheap), and
/// what one run did, as `key value` lines.
fn scale_child(ranks: u32) -> anyhow::Result<ExitCode> {
    // The parent caps this process's address space (`scale_point`), so a point larger than the
    // case budget meant for interactive runs is measured, and fails alone if it cannot fit.
    let s = scale_case(ranks);
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

/// What one scale point measured.
struct ScalePoint {
    wall: f64,
    cpu: f64,
    peak_mib: f64,
    /// The run's verdict: a scale point is the whole bootstrap only when it passed.
    verdict: String,
    /// Simulated bootstrap time.
    bootstrap_s: f64,
    messages: f64,
    /// Every frame written (ring and root included); `messages` are point-to-point only.
    writes: f64,
    agenda_events: f64,
    wakeups: f64,
    packets: f64,
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
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 =
        info.lines().find_map(|l| l.strip_prefix("MemTotal:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024 / 4 * 3)
}

/// Runs one scale point in a child `bootsim bench --scale-child N` under the memory cap.
fn scale_point(ranks: u32) -> anyhow::Result<ScaleEnd> {
    let exe = std::env::current_exe().context("locating the bootsim binary")?;
    let cap = memory_cap_bytes();
    let mut cmd = Command::new(exe);
    // The child's stderr is ours: a child that fails says why before the bench stops.
    cmd.args(["bench", "--scale-child", &ranks.to_string()]).stdout(Stdio::piped()).stderr(Stdio::inherit());
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
        wall: field("wall_s")?,
        cpu: field("cpu_s")?,
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

fn scale_section(max_ranks: u32, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    const SECTION: &str = "2 scale";
    let (mut cpu_pts, mut mem_pts, mut msg_pts, mut pkt_pts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut stopped = false;
    for &n in SCALE_POINTS.iter().filter(|&&n| n <= max_ranks) {
        let case = format!("fast nvshmem-init ranks={n}");
        let target = SCALE_TARGETS.iter().find(|t| t.0 == n);
        let target_text = |t: &(u32, f64, f64)| {
            format!("<= {} CPU-s, <= {} MiB, <= {EVENTS_PER_MESSAGE_TARGET} events/msg", t.1, t.2)
        };
        if stopped {
            let mut row = Row::new(SECTION, case, "not run: a smaller point ran out of memory");
            if let Some(t) = target {
                row = row.target(target_text(t), Some(false));
            }
            rows.push(row);
            continue;
        }
        progress(&format!("scale: nvshmem-init at {n} ranks"));
        let p = match scale_point(n)? {
            ScaleEnd::Done(p) => p,
            ScaleEnd::OutOfMemory { cap_mib, peak_mib } => {
                let mut row = Row::new(
                    SECTION,
                    case,
                    format!("not runnable: out of memory under a {cap_mib:.0} MiB cap (peak {peak_mib:.0} MiB)"),
                );
                if let Some(t) = target {
                    row = row.target(target_text(t), Some(false));
                }
                rows.push(row);
                stopped = true;
                continue;
            }
        };
        let per_msg = |x: f64| x / p.messages.max(1.0);
        let mut row = Row::new(
            SECTION,
            case,
            format!(
                "{}{:.2} CPU-s ({:.2} s wall), peak {:.1} MiB; {:.1} s simulated; {:.0} messages; per message {:.1} agenda events, {:.1} wake-ups, {:.1} packets; {:.1} frames written per message, {:.2} agenda events per frame",
                if p.verdict == "pass" { String::new() } else { format!("NOT A WHOLE RUN (verdict {}): ", p.verdict) },
                p.cpu,
                p.wall,
                p.peak_mib,
                p.bootstrap_s,
                p.messages,
                per_msg(p.agenda_events),
                per_msg(p.wakeups),
                per_msg(p.packets),
                per_msg(p.writes),
                p.agenda_events / p.writes.max(1.0)
            ),
        );
        if let Some(t) = target {
            let met = p.verdict == "pass"
                && p.cpu <= t.1
                && p.peak_mib <= t.2
                && per_msg(p.agenda_events) <= EVENTS_PER_MESSAGE_TARGET;
            row = row.target(target_text(t), Some(met));
        }
        rows.push(row);
        cpu_pts.push((n as f64, p.cpu));
        mem_pts.push((n as f64, p.peak_mib));
        msg_pts.push((n as f64, p.messages));
        pkt_pts.push((n as f64, p.packets));
    }
    for t in SCALE_TARGETS.iter().filter(|t| t.0 > max_ranks) {
        rows.push(
            Row::new(SECTION, format!("fast nvshmem-init ranks={}", t.0), "not run (--max-ranks; make bench-scale)")
                .target(format!("<= {} CPU-s, <= {} MiB", t.1, t.2), None),
        );
    }
    let show = |k: Option<f64>| k.map_or("-".to_string(), |k| format!("{k:.2}"));
    // The smallest worlds are dominated by fixed costs; exponents are fitted on n >= 256 when
    // there are at least two such points, else on n >= 64.
    let from = if cpu_pts.iter().filter(|p| p.0 >= 256.0).count() >= 2 { 256.0 } else { 64.0 };
    let tail = |p: &[(f64, f64)]| p.iter().copied().filter(|q| q.0 >= from).collect::<Vec<_>>();
    let (cpu_k, msg_k) = (log_log_slope(&tail(&cpu_pts)), log_log_slope(&tail(&msg_pts)));
    let gap = cpu_k.zip(msg_k).map(|(c, m)| c - m);
    rows.push(
        Row::new(
            SECTION,
            format!("growth exponents, fit over ranks >= {from}"),
            format!(
                "CPU ~ ranks^{}, messages ~ ranks^{}, packets ~ ranks^{}, peak memory ~ ranks^{}",
                show(cpu_k),
                show(msg_k),
                show(log_log_slope(&tail(&pkt_pts))),
                show(log_log_slope(&tail(&mem_pts)))
            ),
        )
        .ratio(format!("CPU - messages exponent: {}", show(gap)))
        .target("gap <= 0.05 (cost proportional to messages)", gap.map(|g| g <= 0.05)),
    );
    Ok(())
}

/// Over `seeds` consecutive seeds: failures, and per failure the seeds and wall time since the
/// previous failure (or the start): each is a sample of "seeds until the first failure" from a
/// fresh start.
fn detection(c: &Case, seeds: u64) -> (usize, Vec<u64>, Vec<Duration>) {
    let (mut gaps, mut walls) = (Vec::new(), Vec::new());
    let (mut last, mut since) = (0u64, Instant::now());
    for s in 0..seeds {
        if !run_case(&c.with_seed(s), false).verdict.is_ok() {
            gaps.push(s + 1 - last);
            walls.push(since.elapsed());
            last = s + 1;
            since = Instant::now();
        }
    }
    (gaps.len(), gaps, walls)
}

fn detect_section(quick: bool, seeds: u64, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    const SECTION: &str = "3 time to detect";
    for variant in ["nvshmem-3.4", "nvshmem-3.7"] {
        for (s, report) in [("workload=deepep ranks=2", true), ("workload=nvshmem-init ranks=16", false)] {
            let c = case(&format!("engine=fast variant={variant} adversary=rss {s}"))?;
            let seeds = match (quick, report) {
                (false, _) => seeds,
                (true, true) => seeds.min(40),
                (true, false) => seeds.min(10),
            };
            progress(&format!("detect: {variant} {s}, {seeds} seeds"));
            let (failures, mut gaps, mut walls) = detection(&c, seeds);
            let (median, p90) = (quantile(&mut gaps, 0.5), quantile(&mut gaps, 0.9));
            let wall = quantile(&mut walls, 0.5);
            let show = |x: Option<u64>| x.map_or("-".to_string(), |v| v.to_string());
            let figure = format!(
                "{failures}/{seeds} fail; seeds to first failure: median {}, p90 {}; wall median {}",
                show(median),
                show(p90),
                wall.map_or("-".to_string(), |d| format!("{:.1} ms", d.as_secs_f64() * 1e3))
            );
            let mut row = Row::new(SECTION, format!("{variant} rss {s}"), figure);
            if report {
                row = row.target("median <= 10 seeds", Some(median.is_some_and(|m| m <= 10)));
            }
            rows.push(row);
        }
    }
    Ok(())
}

fn real_section(n: u32, reps: u32, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    const SECTION: &str = "4 real sockets";
    let variants = bootsim_core::PRESETS;
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
        let ratio = median_f(walls[i].iter().zip(&walls[base]).map(|(a, b)| a / b).collect());
        let drain_figure = if drain.drains == 0 {
            "no drain".to_string()
        } else {
            format!(
                "drain {:.1} us/message ({} drains, {} gave up)",
                drain.per_message().as_secs_f64() * 1e6,
                drain.drains,
                drain.gave_up
            )
        };
        let figure = format!(
            "{:.0} ms wall (slowest rank {:.0} ms), {drain_figure}",
            median_f(walls[i].clone()) * 1e3,
            median_f(slowest[i].clone())
        );
        let mut row = Row::new(SECTION, format!("smoke --local {n} nvshmem-init --variant {v}"), figure)
            .ratio(format!("{ratio:.3}x nvshmem-3.7"));
        if *v == "seq" {
            row = row.target("seq <= 1.05x nvshmem-3.7", Some(ratio <= 1.05));
        }
        rows.push(row);
    }
    Ok(())
}

/// Prints the table.
pub fn bench(a: BenchArgs) -> anyhow::Result<ExitCode> {
    if let Some(n) = a.scale_child {
        return scale_child(n);
    }
    let started = Instant::now();
    let mut rows = Vec::new();
    throughput_section(a.quick, &mut rows)?;
    scale_section(if a.quick { a.max_ranks.min(64) } else { a.max_ranks }, &mut rows)?;
    detect_section(a.quick, a.detect_seeds, &mut rows)?;
    let (n, reps) = if a.quick { (a.real_ranks.min(8), 1) } else { (a.real_ranks, a.real_reps.max(1)) };
    real_section(n, reps, &mut rows)?;
    print_table(&rows);
    println!(
        "\nbootsim bench{}: {:.1} s; ratios are medians over interleaved rounds (see BENCHMARKS.md)",
        if a.quick { " --quick" } else { "" },
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
