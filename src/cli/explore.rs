//! `bootsim explore`: every accept order of a case, a proof or the shortest counterexample; with
//! `--pairs`, the hazard map of back-to-back collectives.

use std::process::ExitCode;
use std::time::Instant as WallClock;

use anyhow::{bail, Context};
use bootsim_nvshmem::PRESETS;
use bootsim_sim::case::shorten;
use bootsim_sim::explore::hazard::{cell, explore_cell, pairs, Cell};
use bootsim_sim::explore::search::MAX_RANKS;
use bootsim_sim::explore::{explore as explore_case, Bounds, Exploration, Faults};
use bootsim_sim::{run_case, Case, Finding, Verdict};

/// Arguments of `bootsim explore`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Exit: 0 no violation (proved, or none in what was explored when a bound stopped it: the output says which); 1 a counterexample (with --pairs: in any cell); 2 bad usage."
)]
pub struct ExploreArgs {
    /// The case string: its variant, workload and ranks are explored; its adversary and seed
    /// only go into the counterexample's replay line.
    #[arg(required_unless_present = "pairs")]
    case: Option<String>,
    /// The hazard map: every back-to-back pair of collectives for each `--variant` and `--ranks`.
    #[arg(long, conflicts_with = "case")]
    pairs: bool,
    /// Variants of the hazard map (comma-separated: NVSHMEM's presets, or NCCL's versions for
    /// the map of NCCL's operations).
    #[arg(long, value_delimiter = ',', requires = "pairs", default_value = "nvshmem-3.4")]
    variant: Vec<String>,
    /// World sizes of the hazard map: `N` or `A..B` (inclusive).
    #[arg(long, requires = "pairs", default_value = "2..4")]
    ranks: String,
    /// Fault choices the explorer may also make: `drain-timeout` (a drain gives up, fail-open).
    #[arg(long, value_delimiter = ',')]
    faults: Vec<String>,
    /// Most distinct states (per case, per map cell); past it the result is "incomplete". Memory
    /// grows with the widest level of the search, a few KB per state: the default stays under 4 GiB.
    #[arg(long, default_value_t = 500_000)]
    max_states: usize,
    /// Most choices along one schedule; deeper states make the result "incomplete".
    #[arg(long, default_value_t = 10_000)]
    max_depth: usize,
    /// Keep exploring after the first violation (every reachable verdict and its shortest schedule).
    #[arg(long)]
    all: bool,
    /// No partial-order reduction: take every order of independent choices too (for comparison;
    /// "schedules" then counts what enumerating every order would run).
    #[arg(long)]
    no_reduction: bool,
    /// Hazard map: random walks (complete schedules, drawn from the seed) for each cell a bound
    /// stopped short of a corruption, to reach violations deeper than the search got.
    #[arg(long, requires = "pairs", default_value_t = 200)]
    walks: u32,
}

/// Runs the exploration or the hazard map.
pub fn explore(a: ExploreArgs) -> anyhow::Result<ExitCode> {
    let mut faults = Faults::default();
    for f in &a.faults {
        match f.as_str() {
            "drain-timeout" => faults.drain_timeout = true,
            other => bail!("--faults `{other}`: accepted: drain-timeout"),
        }
    }
    if a.max_states == 0 || a.max_depth == 0 {
        bail!("--max-states and --max-depth must be at least 1");
    }
    if a.pairs {
        return hazard_map(&a, faults);
    }
    let text = a.case.as_deref().expect("clap requires a case without --pairs");
    let case = Case::parse(text).with_context(|| format!("in '{}'", shorten(text)))?;
    if !case.schedule().is_empty() {
        bail!("in '{}': explore chooses the schedule itself; remove accept= and drain_fail=", shorten(text));
    }
    if case.ranks() > MAX_RANKS {
        bail!(
            "in '{}': explore models no timers, so at most ranks={MAX_RANKS} (NVSHMEM staggers larger worlds)",
            shorten(text)
        );
    }
    if faults.drain_timeout && case.nccl().is_some() {
        bail!("--faults drain-timeout: NCCL does not drain before close");
    }
    if faults.drain_timeout && case.nccl().is_none() && case.variant().drain.is_none() {
        bail!("--faults drain-timeout: variant {} has no drain (drain, pr97, or drain_ms > 0)", case.variant_name());
    }
    let bounds = Bounds {
        max_states: a.max_states,
        max_depth: a.max_depth,
        stop_at: (!a.all).then_some(Verdict::Hang),
        reduce: !a.no_reduction,
    };
    let clock = WallClock::now();
    let ex = explore_case(&case, faults, bounds);
    let secs = clock.elapsed().as_secs_f64();
    print_exploration(&ex, faults);
    println!("time: {secs:.3} s");
    Ok(if ex.counterexample().is_some() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn model(nccl: bool, faults: Faults) -> &'static str {
    if nccl {
        "every accept order at every peer listener (NCCL does not drain before close)"
    } else if faults.drain_timeout {
        "every accept order at every peer listener; every drain completes or gives up"
    } else {
        "every accept order at every peer listener; drains complete"
    }
}

fn print_exploration(ex: &Exploration, faults: Faults) {
    println!("explore: {}", ex.case);
    println!("model: {}", model(ex.case.nccl().is_some(), faults));
    println!(
        "states: {}  transitions: {}  final states: {}  longest schedule: {} choices",
        ex.states, ex.transitions, ex.finals, ex.depth
    );
    if ex.reduced {
        println!("reduction: sleep sets skipped {} independent reorderings (--no-reduction takes them)", ex.slept);
    }
    if ex.reduced && ex.incomplete.is_none() {
        let exact = if ex.schedules_exact { "" } else { "at least " };
        println!(
            "schedules: {exact}{} explored after reduction (--no-reduction counts what enumerating every order would run)",
            ex.schedules
        );
    } else if ex.incomplete.is_none() && ex.schedules_exact {
        let ratio = ex.schedules as f64 / ex.states.max(1) as f64;
        println!(
            "schedules: {} (what enumerating every schedule would run; {} states explored, {ratio:.1}x fewer)",
            ex.schedules, ex.states
        );
    } else if ex.incomplete.is_some() {
        println!("schedules: {} complete ones reached before stopping", ex.schedules);
    } else {
        println!("schedules: at least {} (a state was reached at two depths: counted once)", ex.schedules);
    }
    let verdicts: Vec<String> =
        ex.verdicts.iter().map(|(v, (states, n))| format!("{v} {n} ({states} final states)")).collect();
    println!("schedules by verdict: {}", verdicts.join(", "));
    match (ex.counterexample(), &ex.incomplete) {
        (Some(c), _) => {
            println!("result: counterexample, shortest ({} choices): {}", c.depth, c.verdict);
            for f in &c.findings {
                println!("  {f}");
            }
            println!("replay: bootsim replay '{}'", c.case);
            let fast = run_case(&c.case, false).verdict;
            let same =
                if fast == c.verdict { "the same verdict" } else { "A DIFFERENT VERDICT (a bug: please report it)" };
            println!("fast engine: {fast} ({same})");
        }
        (None, None) => {
            println!("result: no violation in any schedule (proved for this model)");
            if let Some(b) = ex.examples.get(&Verdict::Benign) {
                let unused = b
                    .findings
                    .iter()
                    .find_map(|f| match f {
                        Finding::Mismatch { taken_for, benign: true, .. } => Some(taken_for.unused_bytes()),
                        _ => None,
                    })
                    .unwrap_or_else(|| "their bytes are unused".into());
                println!("  benign swaps are reachable ({unused}): bootsim replay '{}'", b.case);
            }
        }
        (None, Some(why)) => {
            println!("result: incomplete ({why}): no violation in the schedules explored, not a proof")
        }
    }
}

fn parse_ranks(s: &str) -> anyhow::Result<(u32, u32)> {
    let num = |x: &str| x.trim().parse::<u32>().with_context(|| format!("--ranks `{s}`: expected N or A..B"));
    let (lo, hi) = match s.split_once("..") {
        Some((a, b)) => (num(a)?, num(b.trim_start_matches('='))?),
        None => (num(s)?, num(s)?),
    };
    if lo < 2 || hi < lo || hi > 64 {
        bail!("--ranks `{s}`: must be within 2..64, smallest first");
    }
    Ok((lo, hi))
}

/// One row of a hazard map: its pair's name and the cell at each world size.
type Row<'a> = (String, Box<dyn Fn(u32) -> anyhow::Result<Cell> + 'a>);

fn hazard_map(a: &ExploreArgs, faults: Faults) -> anyhow::Result<ExitCode> {
    let (lo, hi) = parse_ranks(&a.ranks)?;
    let nccl: Vec<bootsim_nccl::Variant> = a.variant.iter().filter_map(|v| v.parse().ok()).collect();
    if !nccl.is_empty() {
        if nccl.len() != a.variant.len() {
            bail!("--variant: one protocol per map, NCCL's versions or NVSHMEM's presets, not both");
        }
        if faults.drain_timeout {
            bail!("--faults drain-timeout: NCCL does not drain before close");
        }
    }
    for v in &a.variant {
        if nccl.is_empty() && !PRESETS.contains(&v.as_str()) {
            bail!("--variant `{v}`: accepted: {}", PRESETS.join(", "));
        }
    }
    let bounds = Bounds { max_states: a.max_states, max_depth: a.max_depth, stop_at: None, reduce: !a.no_reduction };
    let clock = WallClock::now();
    // Per world size, over every variant and pair: states explored and seconds.
    let mut per_n: Vec<(usize, f64)> = vec![(0, 0.0); (hi - lo + 1) as usize];
    let mut violated = false;
    for v in &a.variant {
        let keys = format!("variant={v}");
        let rows: Vec<Row<'_>> = if nccl.is_empty() {
            if faults.drain_timeout && Case::parse(&keys)?.variant().drain.is_none() {
                bail!("--faults drain-timeout: variant {v} has no drain");
            }
            println!("hazard map: variant={v}; model: {}; worst verdict reachable", model(false, faults));
            let keys = keys.clone();
            pairs()
                .into_iter()
                .map(|(name, ops)| {
                    let keys = keys.clone();
                    let cell = move |n| Ok(cell(&keys, name, &ops, n, faults, bounds, a.walks)?);
                    (name.to_string(), Box::new(cell) as Box<dyn Fn(u32) -> anyhow::Result<Cell>>)
                })
                .collect()
        } else {
            println!(
                "hazard map: variant={v}; model: {}, every rank on one node, one channel; worst verdict reachable",
                model(true, faults)
            );
            let ops = bootsim_nccl::OPS;
            let pairs = ops.iter().flat_map(|&f| ops.iter().map(move |&s| (f, s)));
            pairs
                .map(|(first, second)| {
                    let (f, s) = (first.name(), second.name());
                    let keys = format!("{keys} workload=nccl-pair pair={f},{s}");
                    let name = format!("{f}>{s}");
                    let pair = name.clone();
                    let cell = move |n| {
                        let case = Case::parse(&format!("{keys} ranks={n} adversary=fifo"))?;
                        Ok(explore_cell(&case, &pair, faults, bounds, a.walks))
                    };
                    (name, Box::new(cell) as Box<dyn Fn(u32) -> anyhow::Result<Cell>>)
                })
                .collect()
        };
        let mut header = format!("{:<30}", "pair");
        for n in lo..=hi {
            header.push_str(&format!(" {:>12}", format!("n={n}")));
        }
        println!("{header}");
        let mut examples = Vec::new();
        let mut incomplete = false;
        for (name, cell) in rows {
            let mut row = format!("{name:<30}");
            let mut shown = false;
            for n in lo..=hi {
                let started = WallClock::now();
                let c: Cell = cell(n)?;
                let spent = &mut per_n[(n - lo) as usize];
                spent.0 += c.exploration.states;
                spent.1 += started.elapsed().as_secs_f64();
                let mark = if c.settled() { "" } else { "*" };
                incomplete |= !c.settled();
                row.push_str(&format!(" {:>12}", format!("{}{mark}", c.worst())));
                violated |= c.example().is_some_and(|cx| !cx.verdict.is_ok());
                if let (Some(cx), false) = (c.example(), shown) {
                    examples.push(format!("  {name} n={n} {}: bootsim replay '{}'", cx.verdict, cx.case));
                    shown = true;
                }
            }
            println!("{row}");
        }
        if incomplete {
            println!(
                "* incomplete: a bound (--max-states {}) stopped the search, then {} random walks; a violation shown is real, a pass is not proved",
                a.max_states, a.walks
            );
        }
        if !examples.is_empty() {
            println!("counterexamples (smallest n):");
            for e in examples {
                println!("{e}");
            }
        }
        println!();
    }
    for (i, (states, secs)) in per_n.iter().enumerate() {
        println!("n={}: {states} states, {secs:.1} s", lo + i as u32);
    }
    let states: usize = per_n.iter().map(|p| p.0).sum();
    println!("states explored: {states}; time: {:.1} s", clock.elapsed().as_secs_f64());
    Ok(if violated { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
