//! `bootsim merge`: combines `sweep --shard I/N --json` outputs into the summary `sweep` prints.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use bootsim_sim::sweep::{verdict_counts, JsonLine, Shard, SWEEP_JSON_SCHEMA};
use bootsim_sim::{Case, Verdict};

use super::sweep::print_summary;

/// Arguments of `bootsim merge`.
#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// JSON-lines files written by `bootsim sweep --shard I/N --json`.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print the merged result as JSON lines again (as one unsharded `sweep --json`).
    #[arg(long)]
    json: bool,
}

/// One variant's sweep, merged over shards.
#[derive(Default)]
struct Merged {
    case: String,
    start: u64,
    seeds: u64,
    shards: BTreeMap<u64, u64>,
    runs: usize,
    counts: BTreeMap<String, usize>,
    /// Failure lines with their verdicts, read once.
    failures: Vec<(Verdict, JsonLine)>,
}

/// Merges the files; exit 1 if any seed found a violation, else 3 if the work guard stopped one,
/// like `sweep`.
pub fn merge(a: MergeArgs) -> anyhow::Result<ExitCode> {
    let mut by_variant: BTreeMap<String, Merged> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for path in &a.files {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading {}", path.display()))
            .map_err(super::runtime)?;
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let at = || format!("{}:{}", path.display(), i + 1);
            let parsed: JsonLine =
                serde_json::from_str(line).with_context(|| format!("{}: not a `bootsim sweep --json` line", at()))?;
            let (variant, schema) = match &parsed {
                JsonLine::Failure { variant, schema, .. } | JsonLine::Summary { variant, schema, .. } => {
                    (variant.clone(), *schema)
                }
            };
            if schema != SWEEP_JSON_SCHEMA {
                bail!(
                    "{}: a sweep line of layout {schema} (this bootsim reads layout {SWEEP_JSON_SCHEMA}): \
                     re-run that shard's sweep with this bootsim",
                    at()
                );
            }
            if !order.contains(&variant) {
                order.push(variant.clone());
            }
            let m = by_variant.entry(variant.clone()).or_default();
            match parsed {
                JsonLine::Failure { ref verdict, .. } => {
                    let v = Verdict::parse(verdict)
                        .filter(|v| !v.is_ok())
                        .with_context(|| format!("{}: `{verdict}` is no verdict of a failure line", at()))?;
                    m.failures.push((v, parsed));
                }
                JsonLine::Summary { case, start, seeds, shard, runs, counts, .. } => {
                    add_summary(m, &variant, &at(), (case, start, seeds, shard, runs, counts))?;
                }
            }
        }
    }
    if order.is_empty() {
        bail!("no `bootsim sweep --json` lines in {} file(s): nothing to merge", a.files.len());
    }
    let mut failed = false;
    let mut stopped = false;
    for variant in &order {
        let m = &by_variant[variant];
        if m.case.is_empty() {
            bail!("{variant}: failure lines without a summary line (a shard's output is truncated)");
        }
        let count_of = m.shards.values().copied().next().unwrap_or(1);
        let missing: Vec<String> =
            (0..count_of).filter(|i| !m.shards.contains_key(i)).map(|i| format!("{i}/{count_of}")).collect();
        if !missing.is_empty() {
            // A shard that died must not look like a clean sweep: the merge fails (exit 1).
            eprintln!(
                "bootsim merge: {variant}: shards missing: {} (the summary covers part of the range)",
                missing.join(", ")
            );
            failed = true;
        }
        let mut failures: Vec<(Verdict, &JsonLine)> = m.failures.iter().map(|(v, f)| (*v, f)).collect();
        failures.sort_by_key(|(_, f)| match f {
            JsonLine::Failure { seed, .. } => *seed,
            JsonLine::Summary { .. } => u64::MAX,
        });
        failed |= failures.iter().any(|(v, _)| v.is_violation());
        stopped |= m.count(Verdict::Guard) > 0;
        let case = Case::parse(&m.case).with_context(|| format!("{variant}: bad case in summary"))?;
        if a.json {
            for (_, f) in &failures {
                println!("{}", serde_json::to_string(f)?);
            }
            let line = JsonLine::Summary {
                schema: SWEEP_JSON_SCHEMA,
                variant: variant.clone(),
                case: m.case.clone(),
                start: m.start,
                seeds: m.seeds,
                shard: Shard::WHOLE,
                runs: m.runs,
                counts: verdict_counts(|v| m.count(v)),
                first_failure_seed: first_seed(&failures),
            };
            println!("{}", serde_json::to_string(&line)?);
        } else {
            let violation = failures.iter().find(|(v, _)| v.is_violation());
            let first = violation.or(failures.first()).and_then(|(_, f)| match f {
                JsonLine::Failure { seed, first_finding, .. } => Some((*seed, first_finding.clone())),
                JsonLine::Summary { .. } => None,
            });
            print_summary(&case, m.runs, |v| m.count(v), first)?;
        }
    }
    Ok(super::sweep::sweep_exit(failed, stopped))
}

type SummaryFields = (String, u64, u64, Shard, usize, BTreeMap<String, usize>);

/// Adds one shard's summary, checking it belongs to the same sweep and is not a duplicate.
fn add_summary(m: &mut Merged, variant: &str, at: &str, s: SummaryFields) -> anyhow::Result<()> {
    let (case, start, seeds, shard, runs, counts) = s;
    if m.case.is_empty() {
        (m.case, m.start, m.seeds) = (case, start, seeds);
    } else if m.case != case || m.start != start || m.seeds != seeds {
        bail!("{at}: {variant} is a different sweep ('{case}', {seeds} seeds) than '{}' ({} seeds)", m.case, m.seeds);
    }
    if let Some(n) = m.shards.values().next() {
        if *n != shard.count {
            bail!("{at}: {variant} shard {}/{} mixes with shards of {n}", shard.index, shard.count);
        }
    }
    if m.shards.insert(shard.index, shard.count).is_some() {
        bail!("{at}: {variant} shard {}/{} given twice", shard.index, shard.count);
    }
    m.runs += runs;
    for (name, n) in counts {
        if Verdict::parse(&name).is_none() {
            bail!("{at}: unknown verdict `{name}`");
        }
        *m.counts.entry(name).or_default() += n;
    }
    Ok(())
}

impl Merged {
    fn count(&self, v: Verdict) -> usize {
        self.counts.get(v.name()).copied().unwrap_or(0)
    }
}

/// The lowest seed with a violation (a seed the work guard stopped is none), of `failures` in
/// seed order.
fn first_seed(failures: &[(Verdict, &JsonLine)]) -> Option<u64> {
    failures.iter().find_map(|(v, f)| match f {
        JsonLine::Failure { seed, .. } if v.is_violation() => Some(*seed),
        _ => None,
    })
}
