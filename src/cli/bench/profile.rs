//! Section 5 of `bootsim bench`: where the fast engine's instructions go. One run of the scale
//! series' case under `valgrind --tool=callgrind` (exact instruction counts, the same on any
//! host, unlike CPU seconds), its output file read here for each function's inclusive count and
//! each layer's own: the profile that explains the distance to the per-event targets, measured
//! by the same command as the distance itself.

use std::collections::HashMap;
use std::process::Command;

use anyhow::Context;

use crate::cli::scratch::{die_with_parent, ScratchDir};

use super::report::{Profile, ProfileOutcome, ProfilePart, ProfileSection};

/// The case profiled at `ranks`: the scale series' (`Series::NvshmemInit`); the bench takes 64
/// ranks, the size of the dated callgrind figures in BENCHMARKS.md's history (16 with `--quick`).
pub fn case(ranks: u32) -> String {
    format!("engine=fast variant=nvshmem-3.7 workload=nvshmem-init ranks={ranks} adversary=rss seed=1")
}

/// The functions shown, each with what it stands for: its instructions and every callee's.
/// Each is marked `#[inline(never)]`, so its count holds every call in any build; a name missing
/// from a profile fails the section (a rename must update this list, not print a zero).
pub const FUNCTIONS: [(&str, &str); 4] = [
    ("kernel: agenda, delivery, timers", "bootsim_sim::kernel::Kernel::handle_timeout_until"),
    ("engine: ranks' outputs carried out", "bootsim_sim::engine::fast::World<P>::collect"),
    ("TCP's send path (inside both)", "bootsim_sim::kernel::tcp::Conn::send"),
    ("NVSHMEM's rank state machines", "<bootsim_nvshmem::seam::NvshmemNode as bootsim_core::seam::node::Node>::handle"),
];

/// Runs [`case`] under callgrind (this executable, `run CASE --json`) and reads its profile.
pub fn section(quick: bool) -> ProfileSection {
    let ranks = if quick { 16 } else { 64 };
    let case = case(ranks);
    let outcome = match measure(&case) {
        Ok(p) => ProfileOutcome::Done(p),
        Err(e) => ProfileOutcome::NotRun { why: format!("{e:#}") },
    };
    ProfileSection { case, ranks, outcome }
}

/// Whether `valgrind` runs here, and if not what to do about it.
pub fn valgrind_available() -> Result<(), String> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("`valgrind --version` did not run: run scripts/install-valgrind.sh (make test does)".into()),
    }
}

fn measure(case: &str) -> anyhow::Result<Profile> {
    valgrind_available().map_err(anyhow::Error::msg)?;
    let exe = std::env::current_exe().context("this executable's path")?;
    let dir = ScratchDir::new("bench")?;
    let out_file = dir.path().join("callgrind.out");
    let o = die_with_parent(&mut Command::new("valgrind"))
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg("-q")
        .arg(&exe)
        .args(["run", case, "--json"])
        .output()
        .context("running valgrind")?;
    let run: serde_json::Value = serde_json::from_slice(&o.stdout).with_context(|| {
        format!(
            "`valgrind --tool=callgrind bootsim run '{case}' --json` printed no report: {}",
            last_lines(&String::from_utf8_lossy(&o.stderr), 4)
        )
    })?;
    let stat = |k: &str| run["stats"][k].as_u64().with_context(|| format!("the run's report has no stats.{k}"));
    let (agenda_events, packets) = (stat("agenda_events")?, stat("packets")?);
    let text = std::fs::read_to_string(&out_file).with_context(|| format!("reading {}", out_file.display()))?;
    let costs = Costs::parse(&text)?;
    let mut functions = Vec::new();
    for (name, f) in FUNCTIONS {
        let instructions = costs.inclusive.get(f).copied().with_context(|| {
            format!("no function `{f}` in the profile: the bench's list (profile::FUNCTIONS) is out of date")
        })?;
        functions.push(ProfilePart { name: name.into(), instructions });
    }
    let mut layers: Vec<ProfilePart> =
        LAYERS.iter().map(|(name, _)| ProfilePart { name: (*name).into(), instructions: 0 }).collect();
    for (f, own) in &costs.own {
        layers[layer(f)].instructions += own;
    }
    Ok(Profile { instructions: costs.total, agenda_events, packets, functions, layers })
}

/// The last `n` lines of `text`: the end of a failed run's stderr, where its error is.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The layers the instructions are split into by the function they are spent in (inlined code
/// counts where it was inlined), each with the crate names that make it, checked in order; the
/// last takes the rest.
const LAYERS: [(&str, &[&str]); 8] = [
    ("sim kernel model (sim::kernel)", &["bootsim_sim::kernel"]),
    ("sim fast engine (sim::engine)", &["bootsim_sim::engine"]),
    ("sim, the rest (judge, log, run)", &["bootsim_sim"]),
    ("NVSHMEM protocol", &["bootsim_nvshmem"]),
    ("core (seam, codec)", &["bootsim_core"]),
    ("random streams (ChaCha)", &["rand_chacha", "rand_core", "rand"]),
    ("Rust std (alloc, core)", &["alloc", "core", "std", "hashbrown"]),
    ("allocator, libc, the rest", &[]),
];

/// The index in [`LAYERS`] of function `f`: by the crate its name starts with (a trait impl's
/// by its type's, `<bootsim_nvshmem::X as bootsim_core::Y>::f` being NVSHMEM's).
fn layer(f: &str) -> usize {
    let path = f.trim_start_matches('<');
    let krate = path.split("::").next().unwrap_or(path);
    let module = path.splitn(3, "::").take(2).collect::<Vec<_>>().join("::");
    LAYERS
        .iter()
        .position(|(_, prefixes)| prefixes.iter().any(|p| *p == krate || *p == module))
        .unwrap_or(LAYERS.len() - 1)
}

/// A callgrind output file's instructions: the total, each function's own (its cost lines, the
/// code inlined into it included) and inclusive (its own plus its calls'). A recursive function's
/// inclusive count would count its recursion twice; none of [`FUNCTIONS`] recurses.
#[derive(Debug, Default)]
struct Costs {
    total: u64,
    own: HashMap<String, u64>,
    inclusive: HashMap<String, u64>,
}

impl Costs {
    /// Reads callgrind's format (`fn=`/`cfn=` names, compressed as `(id) name` then `(id)`,
    /// `calls=` followed by the call's inclusive cost line, `positions:` columns before the
    /// first event, `summary:`/`totals:`); the first event is taken (callgrind's default, `Ir`).
    fn parse(text: &str) -> anyhow::Result<Costs> {
        let mut names: HashMap<String, String> = HashMap::new();
        let mut name_of = |spec: &str| -> String {
            let spec = spec.trim();
            match spec.strip_prefix('(').and_then(|s| s.split_once(')')) {
                Some((id, rest)) => {
                    let rest = rest.trim();
                    if !rest.is_empty() {
                        names.insert(id.to_string(), rest.to_string());
                    }
                    names.get(id).cloned().unwrap_or_else(|| format!("({id})"))
                }
                None => spec.to_string(),
            }
        };
        let (mut positions, mut total, mut current, mut in_call) = (1usize, None, None::<String>, false);
        let (mut own, mut calls): (HashMap<String, u64>, HashMap<String, u64>) = Default::default();
        for (i, line) in text.lines().enumerate() {
            if let Some(spec) = line.strip_prefix("fn=") {
                current = Some(name_of(spec));
            } else if let Some(spec) = line.strip_prefix("cfn=") {
                name_of(spec);
            } else if line.starts_with("calls=") {
                in_call = true;
            } else if let Some(p) = line.strip_prefix("positions:") {
                positions = p.split_whitespace().count().max(1);
            } else if let Some(t) = line.strip_prefix("summary:").or_else(|| line.strip_prefix("totals:")) {
                let t = t.split_whitespace().next().unwrap_or("");
                total = Some(t.parse::<u64>().with_context(|| format!("line {}: a total `{t}`", i + 1))?);
            } else if line.starts_with(|c: char| c.is_ascii_digit() || "+-*".contains(c)) {
                let cost = match line.split_whitespace().nth(positions) {
                    Some(c) => c.parse::<u64>().with_context(|| format!("line {}: a cost `{c}`", i + 1))?,
                    None => 0,
                };
                let f = current.clone().with_context(|| format!("line {}: a cost outside any function", i + 1))?;
                *(if in_call { &mut calls } else { &mut own }).entry(f).or_default() += cost;
                in_call = false;
            }
        }
        let total = total.context("no `summary:` or `totals:` line: not a callgrind output file")?;
        let mut inclusive = own.clone();
        for (f, c) in calls {
            *inclusive.entry(f).or_default() += c;
        }
        Ok(Costs { total, own, inclusive })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two functions, `main` calling `work` twice: compressed names, relative positions, a
    /// call's inclusive cost line, an inlined file.
    const OUT: &str = "# callgrind format\nversion: 1\npositions: line\nevents: Ir\nsummary: 120\n\n\
        ob=(1) /bin/x\nfl=(1) a.rs\nfn=(1) bootsim_sim::kernel::Kernel::work\n10 30\n+2 20\nfi=(2) b.rs\n5 10\n\n\
        fn=(2) main\n1 5\ncfn=(1)\ncalls=2 10\n* 60\n+1 15\n";

    #[test]
    fn own_and_inclusive_costs_of_a_callgrind_file() {
        let c = Costs::parse(OUT).unwrap();
        assert_eq!(c.total, 120);
        assert_eq!(c.own["bootsim_sim::kernel::Kernel::work"], 60);
        assert_eq!(c.own["main"], 20);
        assert_eq!(c.inclusive["main"], 80);
        assert_eq!(c.inclusive["bootsim_sim::kernel::Kernel::work"], 60);
        assert!(Costs::parse("fn=(1) f\n1 2\n").is_err(), "no total");
        assert!(Costs::parse("summary: 3\n1 2\n").is_err(), "a cost outside a function");
        assert!(Costs::parse("summary: 3\nfn=(1) f\n1 x\n").is_err(), "a cost that is no number");
    }

    /// The same reader on callgrind's other spellings: instruction and line positions (hex
    /// addresses, `+N`/`-N`/`*` subpositions), two events (the first is read), `fi=`/`fe=`
    /// inline switches, a name defined by `cfn=` and used by a later `fn=`, `totals:`.
    const OUT_INSTR: &str = "version: 1\npositions: instr line\nevents: Ir Dr\n\n\
        fl=(1) a.rs\nfn=(1) work\n0x10 3 40 7\n+4 -1 10 2\nfi=(2) b.rs\n+2 * 5\nfe=(1)\n* +1 1 1\n\n\
        fn=(2) main\ncfn=(3) helper\ncalls=1 0x20 5\n0x30 4 25 9\n0x34 5 6 1\n\n\
        fn=(3)\n0x20 9 25 9\n\ntotals: 87 21\n";

    #[test]
    fn instruction_positions_and_several_events() {
        let c = Costs::parse(OUT_INSTR).unwrap();
        assert_eq!(c.total, 87);
        assert_eq!(c.own["work"], 56, "inlined lines count where they were inlined");
        assert_eq!(c.own["main"], 6);
        assert_eq!(c.inclusive["main"], 31, "a call's first event, not its line or second event");
        assert_eq!(c.own["helper"], 25, "named by cfn=, then fn=(3)");
    }

    #[test]
    fn functions_fall_into_layers_by_their_crate() {
        let name = |f: &str| LAYERS[layer(f)].0;
        assert_eq!(name("bootsim_sim::kernel::tcp::Conn::send"), "sim kernel model (sim::kernel)");
        assert_eq!(name("bootsim_sim::engine::fast::World<P>::collect"), "sim fast engine (sim::engine)");
        assert_eq!(name("bootsim_sim::oracle::judge::Judge::take"), "sim, the rest (judge, log, run)");
        assert_eq!(name(FUNCTIONS[3].1), "NVSHMEM protocol");
        assert_eq!(name("<alloc::vec::Vec<T> as core::clone::Clone>::clone"), "Rust std (alloc, core)");
        assert_eq!(name("rand_chacha::guts::refill_wide::impl_avx2"), "random streams (ChaCha)");
        assert_eq!(name("__memcpy_avx_unaligned_erms"), "allocator, libc, the rest");
        assert_eq!(name("0x0000000000010240"), "allocator, libc, the rest");
    }
}
