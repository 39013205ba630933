//! `bootsim bench`: the figures a user asks for before adopting the tool, measured the same way
//! every time, printed as one table (`make bench`; BENCHMARKS.md records the latest).

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::Context;
use bootsim_sim::{run_case, Case};

/// Arguments of `bootsim bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Largest world of the scale series (16, 64, 256, ... up to this).
    #[arg(long, default_value_t = 1024)]
    max_ranks: u32,
    /// Fresh seeds for the time-to-detect figures.
    #[arg(long, default_value_t = 200)]
    detect_seeds: u64,
    /// Only the quick sections (throughput and detection), for a smoke check of the command.
    #[arg(long)]
    quick: bool,
}

fn case(s: &str) -> anyhow::Result<Case> {
    Case::parse(s).with_context(|| format!("in '{s}'"))
}

/// Runs `case` over consecutive seeds for at least `budget` of wall time; runs per second.
fn throughput(c: &Case, budget: Duration) -> (u64, f64) {
    let start = Instant::now();
    let mut runs = 0u64;
    while start.elapsed() < budget || runs < 3 {
        run_case(&c.with_seed(runs), false);
        runs += 1;
    }
    (runs, runs as f64 / start.elapsed().as_secs_f64())
}

/// Peak resident set of this process's finished children so far, in MiB.
fn children_max_rss_mib() -> f64 {
    // SAFETY: getrusage only writes the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    if rc != 0 {
        return f64::NAN;
    }
    ru.ru_maxrss as f64 / 1024.0
}

/// Runs one case in a child `bootsim run` so its peak memory is its own.
fn scale_point(ranks: u32) -> anyhow::Result<(Duration, f64)> {
    let exe = std::env::current_exe().context("locating the bootsim binary")?;
    let c = format!("variant=nvshmem-3.7 workload=nvshmem-init ranks={ranks} adversary=rss seed=1");
    let start = Instant::now();
    let status = Command::new(exe).args(["run", &c]).stdout(std::process::Stdio::null()).status()?;
    let wall = start.elapsed();
    anyhow::ensure!(status.code().is_some(), "bootsim run '{c}' was killed");
    // Worlds are measured in increasing size, so the children's maximum is this one's peak.
    Ok((wall, children_max_rss_mib()))
}

/// Seeds between consecutive failures over `seeds` fresh seeds: (median, p90, failures, first wall time).
fn detection(c: &Case, seeds: u64) -> (Option<u64>, Option<u64>, usize, Option<Duration>) {
    let start = Instant::now();
    let mut first_wall = None;
    let mut gaps = Vec::new();
    let mut last = 0u64;
    for s in 0..seeds {
        if !run_case(&c.with_seed(s), false).verdict.is_ok() {
            first_wall.get_or_insert(start.elapsed());
            gaps.push(s + 1 - last);
            last = s + 1;
        }
    }
    let failures = gaps.len();
    gaps.sort_unstable();
    let pick = |q: f64| gaps.get(((gaps.len() as f64 - 1.0) * q).round() as usize).copied();
    (pick(0.5), pick(0.9), failures, first_wall)
}

/// Prints the table.
pub fn bench(a: BenchArgs) -> anyhow::Result<ExitCode> {
    let budget = if a.quick { Duration::from_millis(300) } else { Duration::from_secs(3) };
    println!("## engine throughput (runs/s, one thread)");
    println!("{:<40} {:>10} {:>8}", "case", "runs/s", "runs");
    for s in ["workload=deepep ranks=2", "workload=nvshmem-init ranks=16"] {
        let c = case(&format!("engine=fast variant=nvshmem-3.7 adversary=rss {s}"))?;
        let (runs, rate) = throughput(&c, budget);
        println!("{:<40} {:>10.1} {:>8}", format!("fast {s}"), rate, runs);
    }

    if !a.quick {
        println!("\n## scale: nvshmem-init on the fast engine (one run each, child process)");
        println!("{:>6} {:>10} {:>12}", "ranks", "wall s", "peak MiB");
        let mut points = Vec::new();
        let mut n = 16;
        while n <= a.max_ranks {
            let (wall, rss) = scale_point(n)?;
            println!("{:>6} {:>10.2} {:>12.1}", n, wall.as_secs_f64(), rss);
            points.push((n as f64, wall.as_secs_f64()));
            n *= 4;
        }
        if let (Some(&(n0, t0)), Some(&(n1, t1))) = (points.first(), points.last()) {
            if n1 > n0 && t0 > 0.0 {
                println!("growth exponent (wall ~ ranks^k): k = {:.2}", (t1 / t0).ln() / (n1 / n0).ln());
            }
        }
    }

    println!("\n## time to detect the report's bug under rss ({} fresh seeds)", a.detect_seeds);
    println!("{:<36} {:>9} {:>9} {:>9} {:>14}", "case", "failures", "median", "p90", "first (wall)");
    for variant in ["nvshmem-3.4", "nvshmem-3.7"] {
        for s in ["workload=deepep ranks=2", "workload=nvshmem-init ranks=16"] {
            let c = case(&format!("engine=fast variant={variant} adversary=rss {s}"))?;
            let seeds = if a.quick { a.detect_seeds.min(40) } else { a.detect_seeds };
            let (median, p90, failures, first) = detection(&c, seeds);
            let show = |x: Option<u64>| x.map_or("-".to_string(), |v| v.to_string());
            let first = first.map_or("-".to_string(), |d| format!("{:.1} ms", d.as_secs_f64() * 1e3));
            println!(
                "{:<36} {:>9} {:>9} {:>9} {:>14}",
                format!("{variant} {s}"),
                failures,
                show(median),
                show(p90),
                first
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
