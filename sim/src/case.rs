//! Case strings: one line of `key=value` words that determines a run completely.

use std::fmt;
use std::time::Duration;

use bootsim_nvshmem::{Variant, PRESETS};

use crate::explore::schedule::Schedule;
use crate::kernel::{KernelConfig, PROFILES};
use bootsim_nvshmem::workload::{parse_ops, Workload, WORKLOADS};

mod builder;
mod memory;
pub use builder::CaseBuilder;

/// Which engine runs the case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// The single-threaded discrete-event engine over the kernel model.
    Fast,
    /// turmoil hosts running the async driver; the kernel model gates accepts and drains.
    Turmoil,
}

impl EngineKind {
    /// Engine names the case string accepts.
    pub const NAMES: [&'static str; 2] = ["fast", "turmoil"];

    /// The engine's name in case strings.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Fast => "fast",
            EngineKind::Turmoil => "turmoil",
        }
    }
}

/// A complete, reproducible run description. Made by [`Case::parse`] or [`Case::builder`], both
/// of which validate it; its kernel configuration is parsed once, there.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    engine: EngineKind,
    /// The preset name the variant came from.
    variant_name: String,
    /// The protocol variant (preset plus `drain_ms` and `first_tag`).
    variant: Variant,
    drain_ms: Option<i64>,
    first_tag: Option<u64>,
    workload: Workload,
    ranks: u32,
    adversary: String,
    seed: u64,
    deadline: Duration,
    /// Kernel knobs set explicitly, in the order given.
    knobs: Vec<(String, String)>,
    schedule: Schedule,
    nccl: Option<NcclCase>,
    /// The adversary profile (drawn from the seed for `swarm`) with the knobs applied.
    kernel: KernelConfig,
    /// The bound on the run's buffers it was checked against ([`Case::parse_within`]), kept
    /// for a changed copy ([`Case::to_builder`]).
    budget: Budget,
    /// The protocol of the user's own this case's world runs, if any ([`Case::named`]).
    foreign: Option<Foreign>,
}

/// The bound on a run's buffers a case was checked against: how the case was made, not what
/// it runs, so it is no word of its line and two cases that differ only in it are equal.
#[derive(Clone, Copy, Debug)]
struct Budget(u128);

impl PartialEq for Budget {
    fn eq(&self, _: &Budget) -> bool {
        true
    }
}

/// What a `protocol=nccl` case runs: one of NCCL's versions and workloads (crate
/// `bootsim-nccl`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NcclCase {
    /// `variant=nccl-2.8 | nccl-2.19 | nccl-2.21 | nccl-2.30`.
    pub variant: bootsim_nccl::Variant,
    /// `workload=nccl-init` (`gpus_per_node`, `channels`, `collnet`) or `nccl-p2p`
    /// (`channels`, `distances`).
    pub workload: bootsim_nccl::Workload,
}

impl NcclCase {
    /// The variant when a case names none: the newest modelled.
    pub const DEFAULT_VARIANT: bootsim_nccl::Variant = bootsim_nccl::Variant::Nccl230;
}

/// The words naming a protocol bootsim does not know (one of the user's own, run through
/// [`crate::harness`]), its variant and its workload, as their `Display` gives them: a case of
/// it prints the line [`crate::harness::world_of`] reads back.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Foreign {
    protocol: String,
    variant: String,
    workload: String,
}

/// A case string that does not parse; the message names the key and the accepted values.
/// Shown, each `quoted` piece of the input is cut to [`SHOWN_CHARS`] characters (a case string
/// can be megabytes long).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad case string: {}", cut_quoted(.0))]
pub struct CaseError(pub String);

/// The most characters of a user's input an error message repeats.
pub const SHOWN_CHARS: usize = 64;

/// `text` with its first [`SHOWN_CHARS`] characters kept and the rest replaced by a count.
pub fn shorten(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}... ({} bytes in all)", &text[..cut], text.len()),
    }
}

/// `message` with every piece between backquotes shortened.
fn cut_quoted(message: &str) -> String {
    message
        .split('`')
        .enumerate()
        .map(|(i, p)| if i % 2 == 1 { shorten(p) } else { p.to_string() })
        .collect::<Vec<_>>()
        .join("`")
}

/// The longest simulated deadline: one day (with every duration knob at most an hour, the
/// simulated clock cannot overflow).
pub const MAX_DEADLINE_MS: u64 = 86_400_000;

/// The most memory one run may need ([`Case::payload_bytes`]'s estimate): 4 GiB.
pub const PAYLOAD_BUDGET: u128 = 4 << 30;

const KEYS: &str =
    "engine, protocol, variant, workload, ranks, adversary, seed, drain_ms, first_tag, qps, k, len, ops, gpus_per_node, channels, collnet, distances, pair, deadline_ms, accept, drain_fail, or a kernel knob";

/// The protocols a case can name (`protocol=`).
pub const PROTOCOLS: [&str; 2] = ["nvshmem", "nccl"];

/// Every variant a case can name: NVSHMEM's presets, then NCCL's versions.
pub fn variant_names() -> Vec<&'static str> {
    PRESETS.iter().chain(bootsim_nccl::variant::NAMES.iter()).copied().collect()
}

/// Every workload a case can name: NVSHMEM's, then NCCL's.
pub fn workload_names() -> Vec<&'static str> {
    WORKLOADS.iter().chain(bootsim_nccl::WORKLOADS.iter()).copied().collect()
}

/// The variants `bootsim compare` puts side by side for `workload`: NCCL's versions for an
/// NCCL workload, else NVSHMEM's presets.
pub fn variants_for(workload: &str) -> Vec<&'static str> {
    if bootsim_nccl::WORKLOADS.contains(&workload) {
        bootsim_nccl::variant::NAMES.to_vec()
    } else {
        PRESETS.to_vec()
    }
}

/// The error for a case of a protocol bootsim does not know, such as a line a protocol of the
/// user's own printed with `harness::replay_line`: it names the protocol, lists the known ones,
/// and says how such a line replays (the call is not quoted, so it is shown whole).
fn unknown_protocol(name: &str) -> CaseError {
    CaseError(format!(
        "protocol=`{name}` is not one of bootsim's protocols (known: {}). A case line of a protocol \
         of your own replays in your own cargo test, through the library: \
         bootsim_sim::harness::run(&YourProtocol, &variant, &workload, &bootsim_sim::harness::world_of(LINE)?, true)",
        PROTOCOLS.join(", ")
    ))
}

/// The keys that configure NVSHMEM only.
const NVSHMEM_KEYS: [&str; 7] = ["drain_ms", "first_tag", "qps", "k", "len", "ops", "drain_fail"];

/// The adversary a case names none.
const DEFAULT_ADVERSARY: &str = "rss";

impl Default for Case {
    /// The case of the empty case string.
    fn default() -> Self {
        Case {
            engine: EngineKind::Fast,
            variant_name: "nvshmem-3.7".into(),
            variant: Variant::NVSHMEM_3_7,
            drain_ms: None,
            first_tag: None,
            workload: Workload::Deepep { qps: 24 },
            ranks: 2,
            adversary: DEFAULT_ADVERSARY.into(),
            seed: 0,
            deadline: Duration::from_secs(300),
            knobs: Vec::new(),
            schedule: Schedule::default(),
            nccl: None,
            // `rss` draws nothing from the seed; the test `the_default_case_is_the_empty_string`
            // holds this to the profile.
            kernel: KernelConfig::profile(DEFAULT_ADVERSARY).unwrap_or_default(),
            budget: Budget(PAYLOAD_BUDGET),
            foreign: None,
        }
    }
}

/// The kernel configuration of `adversary` under `seed` (`swarm` draws from it) with `knobs`
/// applied in order; an error names the adversary or the knob that does not parse.
fn kernel_for(adversary: &str, seed: u64, knobs: &[(String, String)]) -> Result<KernelConfig, CaseError> {
    let mut cfg = KernelConfig::profile_for_seed(adversary, bootsim_core::seed::derive(seed, "swarm", 0))
        .map_err(|_| CaseError(format!("adversary=`{adversary}`: accepted: {}", PROFILES.join(", "))))?;
    for (k, v) in knobs {
        cfg.set(k, v).map_err(|e| match e {
            crate::kernel::KnobError::UnknownKey { .. } => CaseError(format!(
                "unknown key `{k}`; accepted: {KEYS} ({})",
                KernelConfig::knobs().iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
            )),
            other => CaseError(other.to_string()),
        })?;
    }
    Ok(cfg)
}

impl Case {
    /// The engine that runs the case.
    pub fn engine(&self) -> EngineKind {
        self.engine
    }

    /// The NVSHMEM preset the variant came from (`nvshmem-3.7` for an NCCL case; see
    /// [`Case::variant_label`]).
    pub fn variant_name(&self) -> &str {
        &self.variant_name
    }

    /// The NVSHMEM variant: the preset with `drain_ms` and `first_tag` applied.
    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// `drain_ms` when given (NVSHMEM_BOOTSTRAP_UID_SEND_DRAIN_MS semantics).
    pub fn drain_ms(&self) -> Option<i64> {
        self.drain_ms
    }

    /// `first_tag` when given: where a per-call tag counter starts (nvshmem-3.8; 1 in NVSHMEM).
    pub fn first_tag(&self) -> Option<u64> {
        self.first_tag
    }

    /// The NVSHMEM workload (the default for an NCCL case; see [`Case::nccl`]).
    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    /// World size, 1..=65536.
    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    /// The adversary profile's name.
    pub fn adversary(&self) -> &str {
        &self.adversary
    }

    /// The seed of every random stream of the run.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Simulated-time limit; past it, unfinished ranks are a hang.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Kernel knobs set explicitly, `(key, value)` in the order given.
    pub fn knobs(&self) -> &[(String, String)] {
        &self.knobs
    }

    /// The explicit accept order and drain failures (`accept=`, `drain_fail=`; fast engine only).
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// NCCL's variant and workload for a `protocol=nccl` case, None for NVSHMEM's.
    pub fn nccl(&self) -> Option<&NcclCase> {
        self.nccl.as_ref()
    }
}

impl Case {
    /// The most ranks a case of `workload` (its default parameters, e.g. `deepep`) may have
    /// within [`PAYLOAD_BUDGET`]; 0 for a workload that needs parameters (`custom`).
    pub fn max_ranks(workload: &str) -> u32 {
        let fits = |n: u32| Case::parse(&format!("workload={workload} ranks={n}")).is_ok();
        if !fits(1) {
            return 0;
        }
        let (mut lo, mut hi) = (1u32, 65_537u32);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Every case key with its values and default, from the parser's own tables (for `--help`).
    pub fn keys_help() -> String {
        let d = Case::default();
        let rows: Vec<(&str, String, String)> = vec![
            ("engine", "fast | turmoil (protocol=nccl: fast)".into(), d.engine.name().into()),
            ("protocol", PROTOCOLS.join(" | "), "nvshmem, or nccl when variant or workload names NCCL's".into()),
            ("variant", PRESETS.join(" | "), d.variant_name.clone()),
            (
                "",
                format!("protocol=nccl: {}", bootsim_nccl::ALL.map(|v| v.name()).join(" | ")),
                NcclCase::DEFAULT_VARIANT.name().into(),
            ),
            (
                "drain_ms",
                "milliseconds; <= 0 disables (NVSHMEM_BOOTSTRAP_UID_SEND_DRAIN_MS)".into(),
                "the variant's".into(),
            ),
            ("first_tag", "where nvshmem-3.8's per-call tag counter starts, 1..=2^31".into(), "1".into()),
            ("workload", WORKLOADS.join(" | "), d.workload.name().into()),
            ("", format!("protocol=nccl: {}", bootsim_nccl::WORKLOADS.join(" | ")), "nccl-init".into()),
            ("gpus_per_node", "nccl-init: ranks per node (intra-node barrier and allgathers)".into(), "8".into()),
            ("channels", "nccl-init, nccl-p2p: channels per peer (128-byte connectInfo each)".into(), "2".into()),
            ("collnet", "nccl-init: on | off (CollNet's two setups over one graph)".into(), "off".into()),
            ("distances", "nccl-p2p: peer distances, one NULL-graph setup each, e.g. 1,1".into(), "every peer once".into()),
            (
                "pair",
                format!("nccl-pair (required): two operations back to back after init, FIRST,SECOND of {}", nccl_ops()),
                "none: e.g. pair=ring-setup,barrier".into(),
            ),
            ("qps", "QPs per peer (deepep 24, nvshmem-init 2)".into(), "the workload's".into()),
            ("k", "back-to-back alltoalls (qp-create)".into(), "4".into()),
            ("len", "operations (churn)".into(), "12".into()),
            ("ops", "custom: allgather:N,alltoall:N,barrier,...".into(), "-".into()),
            (
                "ranks",
                format!(
                    "1..=65536, within the {} MiB budget: at most {} (deepep), {} (nvshmem-init), {} (qp-create), {} (churn) with their default parameters",
                    PAYLOAD_BUDGET >> 20,
                    Case::max_ranks("deepep"),
                    Case::max_ranks("nvshmem-init"),
                    Case::max_ranks("qp-create"),
                    Case::max_ranks("churn"),
                ),
                d.ranks.to_string(),
            ),
            ("adversary", PROFILES.join(" | "), d.adversary.clone()),
            ("seed", "unsigned 64-bit".into(), d.seed.to_string()),
            (
                "deadline_ms",
                "simulated time before unfinished ranks are a hang".into(),
                d.deadline.as_millis().to_string(),
            ),
            (
                "accept",
                "explicit accept order, TO:FROM.K,...[/TO:...]: rank TO's peer listener (TO `root`: the root's \
                 listener) takes rank FROM's K-th connection to it next (fast engine; `bootsim explore` prints it)"
                    .into(),
                "the kernel's order".into(),
            ),
            ("drain_fail", "FROM>TO.K,...: these drains give up at their deadline (fail-open)".into(), "-".into()),
        ];
        let mut out = String::from("Case keys (space-separated key=value words, every one optional):\n");
        for (k, v, def) in rows {
            out.push_str(&format!("  {k:<12} {v} [default: {def}]\n"));
        }
        out.push_str("Kernel knobs (override the adversary profile's):\n");
        for (k, what) in KernelConfig::knobs() {
            out.push_str(&format!("  {k:<14} {what}\n"));
        }
        out.push_str("Example: bootsim run 'variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3' (exit 1: corruption)\n");
        out.push_str(
            "NCCL example: bootsim run 'variant=nccl-2.19 workload=nccl-p2p ranks=2 seed=2' (exit 1: nccl#1176)",
        );
        out
    }

    /// Parses a case string; every key is optional and defaults as `Case::default`. Its
    /// buffers must fit [`PAYLOAD_BUDGET`].
    pub fn parse(s: &str) -> Result<Case, CaseError> {
        Case::parse_within(s, PAYLOAD_BUDGET)
    }

    /// [`Case::parse`] with another bound on the run's buffers, for a caller that bounds the
    /// process's memory itself (`bench`'s scale points run under an address-space cap).
    pub fn parse_within(s: &str, budget: u128) -> Result<Case, CaseError> {
        Case::parse_line(s, budget, false)
    }

    /// A case line of a protocol of the user's own (`protocol=NAME variant=V workload=W` and
    /// the world's words, as [`crate::harness::replay_line`] prints it): its world, named with
    /// those words so it prints the same line. A line of bootsim's own protocols parses as
    /// [`Case::parse_within`] parses it.
    pub(crate) fn parse_foreign(s: &str, budget: u128) -> Result<Case, CaseError> {
        Case::parse_line(s, budget, true)
    }

    /// [`Case::parse_within`], and with `foreign` a line of a protocol bootsim does not know
    /// ([`Case::parse_foreign`]).
    fn parse_line(s: &str, budget: u128, foreign: bool) -> Result<Case, CaseError> {
        let err = |m: String| CaseError(m);
        // First, whatever the words' order: another protocol's words are not ours to judge.
        let mut words_of = None;
        if let Some(name) = s.split_whitespace().find_map(|w| w.strip_prefix("protocol=")) {
            if !PROTOCOLS.contains(&name) {
                if !foreign {
                    return Err(unknown_protocol(name));
                }
                words_of = Some(Foreign { protocol: name.into(), variant: String::new(), workload: String::new() });
            }
        }
        let mut case = Case { budget: Budget(budget), ..Case::default() };
        let mut seen: Vec<&str> = Vec::new();
        let (mut workload, mut qps, mut k, mut len, mut ops) = (None, None, None, None, None);
        let mut engine = None;
        let mut nccl = NcclWords::default();
        for word in s.split_whitespace() {
            let (key, value) = word.split_once('=').ok_or_else(|| err(format!("`{word}` is not key=value")))?;
            if seen.contains(&key) {
                return Err(err(format!("`{key}` given twice")));
            }
            seen.push(key);
            // The user's protocol's words are its own: kept as they are.
            if let Some(x) = words_of.as_mut() {
                match key {
                    "protocol" => continue,
                    "variant" => {
                        x.variant = value.to_string();
                        continue;
                    }
                    "workload" => {
                        x.workload = value.to_string();
                        continue;
                    }
                    _ => {}
                }
            }
            let num = |what: &str| -> Result<u64, CaseError> {
                value.parse::<u64>().map_err(|_| err(format!("{key}=`{value}`: expected {what}")))
            };
            let bounded = |what: &str, range: std::ops::RangeInclusive<u32>| -> Result<u32, CaseError> {
                let n = num(&format!("{what}, {}..={}", range.start(), range.end()))?;
                u32::try_from(n)
                    .ok()
                    .filter(|n| range.contains(n))
                    .ok_or_else(|| err(format!("{key}={n}: must be {}..={}", range.start(), range.end())))
            };
            match key {
                "engine" => {
                    engine = Some(match value {
                        "fast" => EngineKind::Fast,
                        "turmoil" => EngineKind::Turmoil,
                        _ => return Err(err(format!("engine=`{value}`: accepted: {}", EngineKind::NAMES.join(", ")))),
                    })
                }
                // One of PROTOCOLS: checked above.
                "protocol" => nccl.protocol = Some(value == "nccl"),
                "variant" if value.starts_with("nccl-") => {
                    nccl.variant = Some(value.parse().map_err(|_: bootsim_nccl::variant::UnknownVariant| {
                        err(format!("variant=`{value}`: accepted for protocol=nccl: {}", nccl_variants()))
                    })?)
                }
                "workload" if value.starts_with("nccl-") => {
                    if !bootsim_nccl::WORKLOADS.contains(&value) {
                        return Err(err(format!(
                            "workload=`{value}`: accepted for protocol=nccl: {}",
                            bootsim_nccl::WORKLOADS.join(", ")
                        )));
                    }
                    nccl.workload = Some(value.to_string());
                }
                "gpus_per_node" => nccl.gpus_per_node = Some(bounded("ranks per node", 1..=65536)?),
                "channels" => nccl.channels = Some(bounded("channels per peer", 1..=64)?),
                "collnet" => {
                    nccl.collnet = Some(match value {
                        "on" => true,
                        "off" => false,
                        _ => return Err(err(format!("collnet=`{value}`: accepted: on, off"))),
                    })
                }
                "distances" => {
                    let ds = value
                        .split(',')
                        .map(|d| d.parse::<u32>().ok().filter(|&d| (1..=65535).contains(&d)))
                        .collect::<Option<Vec<u32>>>()
                        .filter(|ds| !ds.is_empty() && ds.len() <= 1024)
                        .ok_or_else(|| {
                            err(format!("distances=`{value}`: expected 1 to 1024 peer distances 1..=65535, e.g. 1,1,2"))
                        })?;
                    nccl.distances = Some(ds);
                }
                "pair" => {
                    let ops = value
                        .split_once(',')
                        .and_then(|(a, b)| Some((bootsim_nccl::Op::by_name(a)?, bootsim_nccl::Op::by_name(b)?)))
                        .ok_or_else(|| err(format!("pair=`{value}`: expected FIRST,SECOND of {}", nccl_ops())))?;
                    nccl.pair = Some(ops);
                }
                "variant" => {
                    nccl.nvshmem_named.push("variant");
                    case.variant = Variant::preset(value)
                        .ok_or_else(|| err(format!("variant=`{value}`: accepted: {}", PRESETS.join(", "))))?;
                    case.variant_name = value.to_string();
                }
                "workload" => {
                    if !WORKLOADS.contains(&value) {
                        return Err(err(format!(
                            "workload=`{value}`: accepted: {} (protocol=nccl: {})",
                            WORKLOADS.join(", "),
                            bootsim_nccl::WORKLOADS.join(", ")
                        )));
                    }
                    nccl.nvshmem_named.push("workload");
                    workload = Some(value.to_string());
                }
                "ranks" => {
                    let n = num("a number of ranks, 1..=65536")?;
                    if !(1..=65536).contains(&n) {
                        return Err(err(format!("ranks={n}: must be 1..=65536")));
                    }
                    case.ranks = n as u32;
                }
                "adversary" => {
                    kernel_for(value, 0, &[])?;
                    case.adversary = value.to_string();
                }
                "seed" => case.seed = num("an unsigned 64-bit integer")?,
                "drain_ms" => {
                    case.drain_ms = Some(
                        value
                            .parse::<i64>()
                            .map_err(|_| err(format!("drain_ms=`{value}`: expected milliseconds (<= 0 disables)")))?,
                    )
                }
                "first_tag" => {
                    let first = num("a tag counter value")?;
                    if !(1..=bootsim_nvshmem::MAX_CALL_TAG + 1).contains(&first) {
                        return Err(err(format!(
                            "first_tag={first}: must be 1..={} (one past 2^31-1 starts exhausted)",
                            bootsim_nvshmem::MAX_CALL_TAG + 1
                        )));
                    }
                    case.first_tag = Some(first);
                }
                "qps" => qps = Some(bounded("QPs per peer", 1..=1024)?),
                "k" => k = Some(bounded("alltoalls", 1..=1024)?),
                "len" => len = Some(bounded("operations", 1..=10_000)?),
                "ops" => ops = Some(parse_ops(value).map_err(|e| err(format!("ops: {e}")))?),
                "accept" => case.schedule.parse_accept(value).map_err(|e| err(format!("accept: {e}")))?,
                "drain_fail" => case.schedule.parse_drain_fail(value).map_err(|e| err(format!("drain_fail: {e}")))?,
                "deadline_ms" => {
                    let ms = num("milliseconds of simulated time")?;
                    if !(1..=MAX_DEADLINE_MS).contains(&ms) {
                        return Err(err(format!(
                            "deadline_ms={ms}: must be 1..={MAX_DEADLINE_MS} (a day of simulated time)"
                        )));
                    }
                    case.deadline = Duration::from_millis(ms);
                }
                _ => {
                    // Checked word by word, so the first bad knob is the one named.
                    let knob = [(key.to_string(), value.to_string())];
                    kernel_for("fifo", 0, &knob)?;
                    case.knobs.extend(knob);
                }
            }
        }
        case.kernel = kernel_for(&case.adversary, case.seed, &case.knobs)?;
        if let Some(nc) = nccl.case(&seen, case.ranks)? {
            case.nccl = Some(nc);
            case.engine = engine.unwrap_or(EngineKind::Fast);
            case.engine_can_run().map_err(err)?;
            case.schedule.validate(case.ranks).map_err(err)?;
            case.kernel_config().validate(case.ranks).map_err(err)?;
            let bytes = case.payload_bytes();
            if bytes > budget {
                return Err(err(format!(
                    "ranks={} with protocol=nccl needs about {} MiB (every rank's state and its host's, and \
                     more with the square of the ranks), over the {} MiB budget: use fewer ranks",
                    case.ranks,
                    bytes >> 20,
                    budget >> 20
                )));
            }
            if case.engine == EngineKind::Turmoil {
                case.check_kept_results(false)?;
            }
            return Ok(case);
        }
        if let Some(x) = words_of {
            return Case::of_foreign(case, x, &seen, engine);
        }
        let misplaced = |key: &str, wl: &str| err(format!("`{key}` applies to workload={wl} only"));
        case.workload = match workload.as_deref().unwrap_or("deepep") {
            "deepep" => Workload::Deepep { qps: qps.unwrap_or(Workload::DEEPEP_QPS) },
            "nvshmem-init" => Workload::NvshmemInit { qps: qps.unwrap_or(Workload::INIT_QPS) },
            "qp-create" => Workload::QpCreate { k: k.unwrap_or(Workload::QP_CREATE_K) },
            "churn" => Workload::Churn { len: len.unwrap_or(Workload::CHURN_LEN) },
            _ => Workload::Custom(ops.clone().ok_or_else(|| {
                err("workload=custom needs ops=..., e.g. ops=allgather:8,alltoall:576,barrier".into())
            })?),
        };
        let wl = case.workload.name();
        if qps.is_some() && !matches!(case.workload, Workload::Deepep { .. } | Workload::NvshmemInit { .. }) {
            return Err(misplaced("qps", "deepep or nvshmem-init"));
        }
        if k.is_some() && wl != "qp-create" {
            return Err(misplaced("k", "qp-create"));
        }
        if len.is_some() && wl != "churn" {
            return Err(misplaced("len", "churn"));
        }
        if ops.is_some() && wl != "custom" {
            return Err(misplaced("ops", "custom"));
        }
        if let Some(ms) = case.drain_ms {
            case.variant = case.variant.with_drain_ms(ms);
        }
        if let Some(first) = case.first_tag {
            if case.variant.first_call_tag().is_none() {
                return Err(err(format!(
                    "first_tag applies to variants with one tag per call (nvshmem-3.8), not {}",
                    case.variant_name
                )));
            }
            case.variant = case.variant.with_first_tag(first);
        }
        case.schedule.validate(case.ranks).map_err(err)?;
        case.drains_can_fail().map_err(err)?;
        case.kernel_config().validate(case.ranks).map_err(err)?;
        let bytes = case.payload_bytes();
        if bytes > budget {
            return Err(err(format!(
                "ranks={} with workload={} needs about {} MiB (every rank's state and its host's, its \
                 largest operation in flight, and more with the square of the ranks), over the {} MiB \
                 budget: use fewer ranks or smaller operations",
                case.ranks,
                case.workload.name(),
                bytes >> 20,
                budget >> 20
            )));
        }
        // One rule for every command (run, replay, sweep, compare, shrink): the fast engine
        // unless the case says engine=turmoil. Every printed case string names its engine.
        case.engine = engine.unwrap_or(EngineKind::Fast);
        case.engine_can_run().map_err(err)?;
        if case.engine == EngineKind::Turmoil {
            case.check_kept_results(false)?;
        }
        Ok(case)
    }

    /// The world `case` parsed from a line of a protocol of the user's own, named with `words`
    /// (`seen`: every key given): NVSHMEM's own words do not apply, nor its memory estimate.
    fn of_foreign(
        mut case: Case,
        words: Foreign,
        seen: &[&str],
        engine: Option<EngineKind>,
    ) -> Result<Case, CaseError> {
        let name = &words.protocol;
        if let Some(key) = ["variant", "workload"].into_iter().find(|k| !seen.contains(k)) {
            return Err(CaseError(format!(
                "a line of protocol=`{name}` names its {key}= (as harness::replay_line prints it)"
            )));
        }
        if let Some(key) = NVSHMEM_KEYS.iter().filter(|k| **k != "drain_fail").find(|k| seen.contains(k)) {
            return Err(CaseError(format!("`{key}` applies to protocol=nvshmem only, not protocol=`{name}`")));
        }
        case.foreign = Some(words);
        case.engine = engine.unwrap_or(EngineKind::Fast);
        case.schedule.validate(case.ranks).map_err(CaseError)?;
        case.kernel_config().validate(case.ranks).map_err(CaseError)?;
        case.engine_can_run().map_err(CaseError)?;
        Ok(case)
    }

    /// `drain_fail=` needs an NVSHMEM variant with a drain (another protocol's drains are its
    /// own to know).
    fn drains_can_fail(&self) -> Result<(), String> {
        let nvshmem = self.nccl.is_none() && self.foreign.is_none();
        if nvshmem && !self.schedule.drain_fail.is_empty() && self.variant.drain.is_none() {
            return Err(format!(
                "drain_fail needs a variant with a drain (drain, pr97, or drain_ms > 0), not {}",
                self.variant_name
            ));
        }
        Ok(())
    }

    /// The same case with explicit schedule `schedule` (checked as `accept=` and `drain_fail=`
    /// are).
    pub fn with_schedule(&self, schedule: Schedule) -> Result<Case, CaseError> {
        let case = Case { schedule, ..self.clone() };
        case.schedule.validate(case.ranks).map_err(CaseError)?;
        case.drains_can_fail().map_err(CaseError)?;
        case.engine_can_run().map_err(CaseError)?;
        Ok(case)
    }

    /// The same case on the fast engine with no explicit schedule: as explore's counterexamples
    /// replay (the fast engine runs every case the turmoil engine does).
    pub fn on_fast_engine_unscheduled(&self) -> Case {
        Case { schedule: Schedule::default(), engine: EngineKind::Fast, ..self.clone() }
    }

    /// What the turmoil engine cannot do (explicit schedules, the application's CPU time), for
    /// every protocol.
    fn engine_can_run(&self) -> Result<(), String> {
        if self.engine == EngineKind::Turmoil && !self.schedule.is_empty() {
            return Err("accept= and drain_fail= are honoured by engine=fast only".into());
        }
        if self.engine == EngineKind::Turmoil && self.kernel_config().load.cpu.app_on() {
            return Err("the application's CPU time (syscall_cost, app_work: the cpu profile) is modelled by \
                 engine=fast only; add syscall_cost=0 app_work=0 to run the rest of it on turmoil"
                .into());
        }
        Ok(())
    }

    /// The kernel configuration: the adversary profile (drawn from the seed for `swarm`), then
    /// the knobs; parsed once, when the case was made.
    pub fn kernel_config(&self) -> &KernelConfig {
        &self.kernel
    }

    /// The variant's name as the case string gives it (NVSHMEM's preset, NCCL's version, or
    /// the words of a protocol of the user's own, [`Case::named`]).
    pub fn variant_label(&self) -> &str {
        match (&self.foreign, &self.nccl) {
            (Some(x), _) => &x.variant,
            (None, Some(nc)) => nc.variant.name(),
            (None, None) => &self.variant_name,
        }
    }

    /// The protocol the case names: `nvshmem`, `nccl`, or one of the user's own ([`Case::named`]).
    pub fn protocol(&self) -> &str {
        match (&self.foreign, &self.nccl) {
            (Some(x), _) => &x.protocol,
            (None, Some(_)) => "nccl",
            (None, None) => "nvshmem",
        }
    }

    /// This case's world (engine, ranks, adversary, seed, deadline, schedule, knobs) running
    /// `protocol`'s `variant` and `workload`, so that it prints the line that reproduces their
    /// run: for NVSHMEM or NCCL the case that line parses to, for a protocol of the user's own
    /// the world named with their words (`protocol=rendezvous variant=reused-tag
    /// workload=two-rounds engine=fast ...`, which [`crate::harness::world_of`] reads back).
    /// The harness names every case it hands back this way. An error when the words make no
    /// such line: a word with whitespace or `=` in a user's protocol's name or variant, or
    /// bootsim's own protocol with a variant or workload its case strings cannot say.
    ///
    /// ```
    /// use bootsim_sim::Case;
    ///
    /// let world = Case::parse("ranks=3 adversary=swarm seed=9").unwrap();
    /// let named = world.named("rendezvous", "reused-tag", "two-rounds").unwrap();
    /// let line = "protocol=rendezvous variant=reused-tag workload=two-rounds engine=fast ranks=3 adversary=swarm seed=9";
    /// assert_eq!(named.to_string(), line);
    /// assert_eq!(bootsim_sim::harness::world_of(line).unwrap(), named);
    /// // bootsim's own protocols: the case the line parses to.
    /// let nvshmem = world.named("nvshmem", "nvshmem-3.4", "deepep qps=3").unwrap();
    /// assert_eq!(nvshmem, Case::parse("variant=nvshmem-3.4 workload=deepep qps=3 ranks=3 adversary=swarm seed=9").unwrap());
    /// assert!(world.named("nvshmem", "Overlapping/Fixed", "deepep").is_err());
    /// ```
    pub fn named(
        &self,
        protocol: &str,
        variant: impl fmt::Display,
        workload: impl fmt::Display,
    ) -> Result<Case, CaseError> {
        let (variant, workload) = (variant.to_string(), workload.to_string());
        let line = replay_words(protocol, &variant, &workload, self);
        if PROTOCOLS.contains(&protocol) {
            return Case::parse_within(&line, self.budget.0);
        }
        let one_word = |w: &str| !w.is_empty() && !w.contains(|c: char| c.is_whitespace() || c == '=');
        if let Some((key, w)) = [("protocol", protocol), ("variant", &variant), ("workload", &workload)]
            .into_iter()
            .find(|(_, w)| !one_word(w))
        {
            return Err(CaseError(format!(
                "{key}=`{w}`: a protocol of your own is named in one word, without whitespace or `=` \
                 (its Display makes the word)"
            )));
        }
        Case::parse_foreign(&line, self.budget.0)
    }

    /// The same case with another seed (and, for `swarm`, the kernel configuration that seed
    /// draws), or an error naming the seed when a knob checked against the profile (`stalls`,
    /// `app_cpu`) does not fit that draw ([`Case::misfit`]): such a case could not run (the
    /// kernel model has no such queue or CPU) and no case string gives it.
    pub fn with_seed(&self, seed: u64) -> Result<Case, CaseError> {
        let mut case = self.clone();
        case.seed = seed;
        if self.adversary == "swarm" {
            case.kernel = kernel_for(&self.adversary, seed, &self.knobs)?;
        }
        match case.misfit() {
            Some(why) => Err(CaseError(why)),
            None => Ok(case),
        }
    }

    /// Why this case's explicit knobs do not fit its kernel, if they do not: under `swarm` a
    /// seed may draw fewer RX queues or CPUs than a `stalls=` or `app_cpu` names.
    /// [`Case::with_seed`] refuses such a seed with this text; sweeps check every seed before
    /// they start.
    pub fn misfit(&self) -> Option<String> {
        self.kernel.validate(self.ranks).err().map(|why| {
            format!(
                "seed {}: the knobs do not fit the kernel adversary={} draws for it: {why}",
                self.seed, self.adversary
            )
        })
    }
}

impl Case {
    /// The case string that reproduces this case, or why there is none, checked by parsing it
    /// back (for a protocol of the user's own, [`Case::named`], as [`crate::harness::world_of`]
    /// reads it). A parsed, built or reseeded case always has one ([`Case::with_seed`] refuses a seed
    /// whose kernel the knobs do not fit), except a case parsed within a larger budget
    /// ([`Case::parse_within`]) and over the case string's.
    pub fn case_string(&self) -> Result<String, CaseError> {
        let line = self.to_string();
        let parsed =
            if self.foreign.is_some() { Case::parse_foreign(&line, PAYLOAD_BUDGET) } else { Case::parse(&line) };
        match parsed {
            Ok(back) if back == *self => Ok(line),
            Ok(_) => Err(CaseError(format!("no case string reproduces this case: `{line}` reads back as another"))),
            Err(e) => Err(CaseError(format!("no case string reproduces this case: {}", e.0))),
        }
    }
}

impl fmt::Display for Case {
    /// The canonical case string: parsing it gives the case back, except for a case parsed
    /// within a larger budget ([`Case::parse_within`]), whose line the parser refuses naming
    /// the budget ([`Case::case_string`] says so up front).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(x) = &self.foreign {
            return f.write_str(&replay_words(&x.protocol, &x.variant, &x.workload, self));
        }
        if let Some(nc) = &self.nccl {
            write!(f, "engine={} protocol=nccl variant={}", self.engine.name(), nc.variant)?;
            write!(f, " workload={}", nc.workload)?;
            return self.fmt_world(f);
        }
        write!(f, "engine={} variant={}", self.engine.name(), self.variant_name)?;
        if let Some(ms) = self.drain_ms {
            write!(f, " drain_ms={ms}")?;
        }
        if let Some(first) = self.first_tag {
            write!(f, " first_tag={first}")?;
        }
        write!(f, " workload={}", self.workload)?;
        self.fmt_world(f)
    }
}

/// The line of a run of `protocol`'s `variant` and `workload` in `case`'s world:
/// `protocol=.. variant=.. workload=.. engine=fast ranks=2 adversary=rss seed=3 ...`.
pub(crate) fn replay_words(
    protocol: &str,
    variant: &dyn fmt::Display,
    workload: &dyn fmt::Display,
    case: &Case,
) -> String {
    format!("protocol={protocol} variant={variant} workload={workload} {}", World(case))
}

/// A case's world words: its engine, then [`Case::fmt_world`]'s.
struct World<'a>(&'a Case);

impl fmt::Display for World<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "engine={}", self.0.engine.name())?;
        self.0.fmt_world(f)
    }
}

impl Case {
    /// The words after the protocol's: ranks, adversary, seed, deadline, schedule, knobs.
    fn fmt_world(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, " ranks={} adversary={} seed={}", self.ranks, self.adversary, self.seed)?;
        if self.deadline != Case::default().deadline {
            write!(f, " deadline_ms={}", self.deadline.as_millis())?;
        }
        if let Some(a) = self.schedule.accept_value() {
            write!(f, " accept={a}")?;
        }
        if let Some(d) = self.schedule.drain_fail_value() {
            write!(f, " drain_fail={d}")?;
        }
        for (k, v) in &self.knobs {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

/// The NCCL words of a case string, gathered while parsing.
#[derive(Default)]
struct NcclWords {
    /// `protocol=`: Some(true) for nccl.
    protocol: Option<bool>,
    variant: Option<bootsim_nccl::Variant>,
    workload: Option<String>,
    gpus_per_node: Option<u32>,
    channels: Option<u32>,
    collnet: Option<bool>,
    distances: Option<Vec<u32>>,
    pair: Option<(bootsim_nccl::Op, bootsim_nccl::Op)>,
    /// NVSHMEM's `variant=` or `workload=` given.
    nvshmem_named: Vec<&'static str>,
}

fn nccl_variants() -> String {
    bootsim_nccl::ALL.map(|v| v.name()).join(", ")
}

/// NCCL's operations a `pair=` names.
fn nccl_ops() -> String {
    bootsim_nccl::OPS.map(|o| o.name()).join(", ")
}

impl NcclWords {
    /// The NCCL case these words make, None for an NVSHMEM case; an error for a word of the
    /// other protocol (`seen`: every key given).
    fn case(&self, seen: &[&str], ranks: u32) -> Result<Option<NcclCase>, CaseError> {
        let err = |m: String| Err(CaseError(m));
        let named = self.variant.is_some() || self.workload.is_some();
        let params = ["gpus_per_node", "channels", "collnet", "distances", "pair"];
        let nccl = match self.protocol {
            Some(true) => true,
            Some(false) if named => return err("an NCCL variant or workload needs protocol=nccl, not nvshmem".into()),
            Some(false) => false,
            None => named,
        };
        if !nccl {
            if let Some(key) = params.iter().find(|k| seen.contains(k)) {
                return err(format!("`{key}` applies to protocol=nccl only"));
            }
            return Ok(None);
        }
        if let Some(key) = self.nvshmem_named.first() {
            return err(format!(
                "{key}= names an NVSHMEM {key} under protocol=nccl; accepted: {}",
                if *key == "variant" { nccl_variants() } else { bootsim_nccl::WORKLOADS.join(", ") }
            ));
        }
        if let Some(key) = NVSHMEM_KEYS.iter().find(|k| seen.contains(k)) {
            return err(format!("`{key}` applies to protocol=nvshmem only"));
        }
        let variant = self.variant.unwrap_or(NcclCase::DEFAULT_VARIANT);
        let init = bootsim_nccl::InitParams::default();
        let workload_name = self.workload.as_deref().unwrap_or("nccl-init");
        if self.pair.is_some() && workload_name != "nccl-pair" {
            return err("`pair` applies to workload=nccl-pair only".into());
        }
        let workload = match workload_name {
            "nccl-pair" => {
                if let Some(key) =
                    ["gpus_per_node", "channels", "collnet", "distances"].iter().find(|k| seen.contains(k))
                {
                    return err(format!("`{key}` does not apply to workload=nccl-pair (one node, one channel)"));
                }
                // The pair is the case (a hazard-map cell): never a default one.
                let Some((first, second)) = self.pair else {
                    return err(format!(
                        "workload=nccl-pair needs pair=FIRST,SECOND, the two operations it runs back to back after \
                         init, each of {}: e.g. workload=nccl-pair pair=ring-setup,barrier",
                        nccl_ops()
                    ));
                };
                bootsim_nccl::Workload::Pair(first, second)
            }
            "nccl-init" => {
                if self.distances.is_some() {
                    return err("`distances` applies to workload=nccl-p2p only".into());
                }
                bootsim_nccl::Workload::Init(bootsim_nccl::InitParams {
                    ranks_per_node: self.gpus_per_node.unwrap_or(init.ranks_per_node),
                    channels: self.channels.unwrap_or(init.channels),
                    collnet: self.collnet.unwrap_or(false),
                })
            }
            _ => {
                if let Some(key) =
                    [("gpus_per_node", self.gpus_per_node.is_some()), ("collnet", self.collnet.is_some())]
                        .iter()
                        .find_map(|(k, given)| given.then_some(k))
                {
                    return err(format!("`{key}` applies to workload=nccl-init only"));
                }
                if let Some(d) = self.distances.iter().flatten().find(|&&d| d >= ranks.max(2)) {
                    return err(format!("distances: {d} is not a peer distance below ranks={ranks}"));
                }
                bootsim_nccl::Workload::P2p {
                    channels: self.channels.unwrap_or(bootsim_nccl::InitParams::default().channels),
                    distances: self.distances.clone(),
                }
            }
        };
        Ok(Some(NcclCase { variant, workload }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_case_is_the_empty_string() {
        assert_eq!(Case::default(), Case::parse("").unwrap());
        assert_eq!(Case::builder().build().unwrap(), Case::default());
    }

    #[test]
    fn the_builder_refuses_what_the_parser_refuses_naming_the_key() {
        let e = |b: CaseBuilder| b.build().unwrap_err().to_string();
        assert!(e(Case::builder().adversary("gentle")).contains("adversary=`gentle`: accepted: fifo, rss"));
        assert!(e(Case::builder().variant("nvshmem-9")).contains("variant=`nvshmem-9`: accepted: nvshmem-3.4"));
        assert!(e(Case::builder().ranks(0)).contains("ranks=0: must be 1..=65536"));
        assert!(e(Case::builder().knob("rx_queues", "0")).contains("rx_queues"));
        assert!(e(Case::builder().knob("colour", "blue")).contains("unknown key `colour`"));
        assert!(e(Case::builder().knob("backlog", "2 seed=3")).contains("hold no whitespace"));
        assert!(e(Case::builder().adversary("rss seed=3")).contains("adversary=`rss seed=3`"));
        assert!(e(Case::builder().knob("a=b", "1")).contains("kernel knob `a=b`"));
        assert!(e(Case::builder().deadline(Duration::from_micros(1500))).contains("whole milliseconds"));
        assert!(e(Case::builder().workload(Workload::Deepep { qps: 0 })).contains("qps=0: must be 1..=1024"));
        let nccl_init = bootsim_nccl::Workload::Init(bootsim_nccl::InitParams::default());
        assert!(e(Case::builder().variant("nvshmem-3.4").nccl_workload(nccl_init)).contains("under protocol=nccl"));
        assert!(e(Case::builder().variant("nccl-2.19").workload(Workload::Churn { len: 3 }))
            .contains("NVSHMEM workload under protocol=nccl"));
    }

    #[test]
    fn the_builder_makes_what_the_parser_makes() {
        let built = Case::builder()
            .variant("pr97")
            .drain_ms(5)
            .workload(Workload::Custom(parse_ops("allgather:8,barrier").unwrap()))
            .ranks(3)
            .adversary("lossy")
            .seed(1)
            .knob("backlog", "2")
            .build()
            .unwrap();
        let text = "engine=fast variant=pr97 drain_ms=5 workload=custom ops=allgather:8,barrier ranks=3 adversary=lossy seed=1 backlog=2";
        assert_eq!(built, Case::parse(text).unwrap());
        assert_eq!(built.case_string().unwrap(), text);
        assert_eq!(built.to_builder().build().unwrap(), built);
        let p2p = bootsim_nccl::Workload::P2p { channels: 4, distances: Some(vec![1, 1]) };
        let nccl = Case::builder().variant("nccl-2.30").nccl_workload(p2p).ranks(3).build().unwrap();
        assert_eq!(
            nccl.to_string(),
            "engine=fast protocol=nccl variant=nccl-2.30 workload=nccl-p2p channels=4 distances=1,1 ranks=3 adversary=rss seed=0"
        );
    }

    #[test]
    fn the_kernel_config_is_parsed_once_and_follows_the_seed_under_swarm() {
        let c = Case::parse("adversary=swarm seed=1 backlog=3").unwrap();
        assert_eq!(c.kernel_config().backlog, 3);
        for seed in 0..8 {
            let moved = c.with_seed(seed).unwrap();
            assert_eq!(moved, Case::parse(&format!("adversary=swarm seed={seed} backlog=3")).unwrap());
            assert_eq!(moved.kernel_config().backlog, 3);
        }
        let rss = Case::parse("adversary=rss seed=1").unwrap();
        assert_eq!(rss.with_seed(9).unwrap().kernel_config(), rss.kernel_config());
    }

    #[test]
    fn a_seed_whose_swarm_draw_a_stall_does_not_fit_is_refused_naming_it() {
        // `stalls=` on RX queue 1 needs a draw of at least two queues.
        let line = |seed: u64| format!("adversary=swarm seed={seed} stalls=0:1:0:5");
        let fits = (0..256).find(|s| Case::parse(&line(*s)).is_ok()).unwrap();
        let misfit = (0..256).find(|s| Case::parse(&line(*s)).is_err()).unwrap();
        let c = Case::parse(&line(fits)).unwrap();
        let err = c.with_seed(misfit).unwrap_err().to_string();
        assert!(
            err.contains(&format!("seed {misfit}: the knobs do not fit the kernel adversary=swarm draws")),
            "{err}"
        );
        assert!(err.contains("queue 1 does not exist"), "{err}");
        // The line such a case would print is refused by the parser with the same reason.
        let parsed = Case::parse(&line(misfit)).unwrap_err().to_string();
        assert!(parsed.contains("queue 1 does not exist"), "{parsed}");
        // A seed that fits moves the case as parsing its line would.
        assert_eq!(c.with_seed(fits).unwrap(), c);
    }

    #[test]
    fn a_case_named_for_a_protocol_of_ones_own_prints_its_line_and_only_the_harness_reads_it() {
        let world = Case::parse("engine=fast variant=nvshmem-3.4 ranks=3 adversary=swarm seed=4 backlog=2").unwrap();
        let named = world.named("rendezvous", "reused-tag", "2x32-ring").unwrap();
        let line = "protocol=rendezvous variant=reused-tag workload=2x32-ring engine=fast ranks=3 adversary=swarm seed=4 backlog=2";
        assert_eq!(named.to_string(), line);
        assert_eq!(named.case_string().unwrap(), line);
        assert_eq!((named.protocol(), named.variant_label()), ("rendezvous", "reused-tag"));
        assert_eq!(Case::parse_foreign(line, PAYLOAD_BUDGET).unwrap(), named);
        assert_eq!(named.kernel_config(), world.kernel_config());
        // The CLI's parser refuses it, naming the library.
        assert!(Case::parse(line).unwrap_err().to_string().contains("harness::world_of(LINE)"));
        // Reseeded, rebuilt, rescheduled: still the protocol's line.
        let moved = named.with_seed(9).unwrap();
        assert!(moved.to_string().starts_with("protocol=rendezvous variant=reused-tag workload=2x32-ring engine=fast"));
        assert_eq!(named.to_builder().build().unwrap(), named);
        assert_eq!(
            named.to_builder().knob("backlog", "3").build().unwrap().to_string(),
            line.replace("backlog=2", "backlog=3")
        );
        // Words that make no line, and NVSHMEM's words on another protocol's line, are refused.
        let e = |r: Result<Case, CaseError>| r.unwrap_err().to_string();
        assert!(
            e(world.named("rendezvous", "reused tag", "w")).contains("variant=`reused tag`: a protocol of your own")
        );
        assert!(e(world.named("my=proto", "v", "w")).contains("protocol=`my=proto`"));
        assert!(e(Case::parse_foreign("protocol=p variant=v ranks=2", PAYLOAD_BUDGET)).contains("names its workload="));
        assert!(e(Case::parse_foreign("protocol=p variant=v workload=w qps=3", PAYLOAD_BUDGET))
            .contains("`qps` applies to protocol=nvshmem only"));
        // bootsim's own protocols: the case its line parses to, or why none.
        let nccl = world.named("nccl", "nccl-2.19", "nccl-p2p channels=4").unwrap();
        assert_eq!(nccl.to_string(), "engine=fast protocol=nccl variant=nccl-2.19 workload=nccl-p2p channels=4 ranks=3 adversary=swarm seed=4 backlog=2");
        assert!(e(world.named("nvshmem", "Overlapping/Fixed", "deepep")).contains("variant=`Overlapping/Fixed`"));
        // A preset with its tag counter moved prints words the parser reads back.
        let near = bootsim_nvshmem::Variant::preset("nvshmem-3.8").unwrap().with_first_tag(0x7fff_fffe);
        let moved = world.named("nvshmem", near, "deepep").unwrap();
        assert_eq!((moved.first_tag(), moved.variant_label()), (Some(0x7fff_fffe), "nvshmem-3.8"));
    }

    #[test]
    fn round_trips() {
        for s in [
            "engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=7",
            "engine=fast variant=pr97 drain_ms=5 workload=custom ops=allgather:8,barrier ranks=3 adversary=lossy seed=1 backlog=2",
            "engine=fast variant=seq workload=qp-create k=9 ranks=16 adversary=swarm seed=18446744073709551615 deadline_ms=5000",
            "engine=fast variant=pr97 workload=deepep ranks=2 adversary=fifo seed=0 accept=1:0.0,0.2,0.1 drain_fail=0>1.1",
        ] {
            let c = Case::parse(s).unwrap();
            assert_eq!(c.to_string(), s);
            assert_eq!(Case::parse(&c.to_string()).unwrap(), c);
        }
        assert_eq!(
            Case::parse("").unwrap().to_string(),
            "engine=fast variant=nvshmem-3.7 workload=deepep ranks=2 adversary=rss seed=0"
        );
    }

    #[test]
    fn the_engine_is_fast_unless_the_case_says_turmoil() {
        assert_eq!(Case::parse("ranks=2").unwrap().engine, EngineKind::Fast);
        assert_eq!(Case::parse("ranks=65").unwrap().engine, EngineKind::Fast);
        assert_eq!(Case::parse("ranks=8 engine=turmoil").unwrap().engine, EngineKind::Turmoil);
    }

    #[test]
    fn errors_name_the_key_and_the_accepted_values() {
        let e = |s: &str| Case::parse(s).unwrap_err().to_string();
        assert!(e("variant=nvshmem-9")
            .contains("accepted: nvshmem-3.4, nvshmem-3.7, nvshmem-3.8, drain, disjoint, pr97, seq, persistent"));
        assert!(e("ranks=0").contains("ranks=0: must be 1..=65536"));
        assert!(e("ranks=65537").contains("must be 1..=65536"));
        assert!(e("ranks=two").contains("ranks=`two`"));
        assert!(e("colour=blue").contains("unknown key `colour`"));
        assert!(e("seed=1 seed=2").contains("`seed` given twice"));
        assert!(e("adversary=chaos").contains("accepted: fifo, rss"));
        assert!(e("backlog=0").contains("backlog"));
        assert!(e("workload=custom").contains("needs ops="));
        assert!(e("k=3").contains("qp-create only"));
        assert!(e("nonsense").contains("not key=value"));
        assert!(e("workload=custom ops=alltoall:1048576 ranks=4096").contains("over the 4096 MiB budget"));
        assert!(e("qps=1024 ranks=65536").contains("budget"));
        // nvshmem-init at 4096 ranks fits (about 530 MiB); a caller that bounds its own memory
        // (the bench's scale child) may ask for more, or less.
        let big = "workload=nvshmem-init ranks=4096 deadline_ms=3600000";
        assert_eq!(Case::parse(big).map(|c| c.ranks), Ok(4096));
        assert!(e("workload=nvshmem-init ranks=16384").contains("over the 4096 MiB budget"));
        assert!(e("variant=persistent workload=nvshmem-init ranks=4096").contains("over the 4096 MiB budget"));
        assert_eq!(Case::parse_within("workload=nvshmem-init ranks=16384", u128::MAX).map(|c| c.ranks), Ok(16384));
        assert!(Case::parse_within(big, 256 << 20).unwrap_err().to_string().contains("over the 256 MiB budget"));
        assert!(e("rto_min=0ns").contains("rto_min"));
        assert!(e("rto_min=2s rto_max=1s").contains("above rto_max"));
        assert!(e("stall_gap=off stalls=0:7:0:5 rx_queues=2").contains("does not exist"));
        assert!(e("accept=1:0.0,2.1").contains("outside ranks=2"));
        assert!(e("accept=1:0.x").contains("accept: `x`"));
        assert!(e("variant=nvshmem-3.4 drain_fail=0>1.1").contains("needs a variant with a drain"));
        assert!(e("engine=turmoil accept=1:0.0").contains("engine=fast only"));
    }

    #[test]
    fn first_tag_starts_3_8s_counter_and_only_3_8s() {
        let c = Case::parse("variant=nvshmem-3.8 first_tag=2147483646").unwrap();
        assert_eq!(c.variant.first_call_tag(), Some(0x7fff_fffe));
        assert_eq!(Case::parse(&c.to_string()).unwrap(), c);
        assert!(Case::parse("variant=nvshmem-3.7 first_tag=5").unwrap_err().to_string().contains("one tag per call"));
        assert!(Case::parse("variant=nvshmem-3.8 first_tag=0").is_err());
    }

    #[test]
    fn nccl_pair_cases_round_trip_and_refuse_what_does_not_apply() {
        let text = "engine=fast protocol=nccl variant=nccl-2.21 workload=nccl-pair pair=barrier,intra-allgather ranks=2 adversary=fifo seed=0 accept=0:1.0/1:0.0";
        let c = Case::parse(text).unwrap();
        let want = bootsim_nccl::Workload::Pair(bootsim_nccl::Op::Barrier, bootsim_nccl::Op::IntraAllgather);
        assert_eq!(c.nccl.as_ref().unwrap().workload, want);
        assert_eq!(c.to_string(), text);
        let e = |s: &str| Case::parse(s).unwrap_err().to_string();
        assert!(e("workload=nccl-pair pair=barrier").contains("FIRST,SECOND of ring-setup"));
        assert!(e("workload=nccl-pair pair=barrier,allreduce").contains("pair=`barrier,allreduce`"));
        assert!(e("workload=nccl-init pair=barrier,barrier").contains("workload=nccl-pair only"));
        assert!(
            e("workload=nccl-pair pair=barrier,barrier channels=2").contains("does not apply to workload=nccl-pair")
        );
        // No silent default pair: what is missing, and the right form.
        let missing = e("workload=nccl-pair ranks=2");
        assert!(missing.contains("workload=nccl-pair needs pair=FIRST,SECOND"), "{missing}");
        assert!(missing.contains("e.g. workload=nccl-pair pair=ring-setup,barrier"), "{missing}");
        assert!(Case::parse(&missing[missing.find("workload=nccl-pair pair=").unwrap()..]).is_ok(), "{missing}");
        assert!(e("workload=deepep pair=barrier,barrier").contains("protocol=nccl only"));
    }

    #[test]
    fn application_cpu_time_needs_the_fast_engine() {
        let e = Case::parse("engine=turmoil adversary=cpu").unwrap_err().to_string();
        assert!(e.contains("engine=fast only") && e.contains("syscall_cost=0 app_work=0"), "{e}");
        assert!(Case::parse("engine=turmoil adversary=cpu syscall_cost=0 app_work=0").is_ok());
        assert!(Case::parse("engine=fast adversary=cpu").is_ok());
    }

    #[test]
    fn nccl_cases_round_trip_name_their_protocol_and_nvshmem_cases_do_not() {
        for s in [
            "engine=fast protocol=nccl variant=nccl-2.19 workload=nccl-init ranks=8 adversary=rss seed=3",
            "engine=fast protocol=nccl variant=nccl-2.8 workload=nccl-init gpus_per_node=2 channels=1 collnet=on ranks=4 adversary=swarm seed=1",
            "engine=fast protocol=nccl variant=nccl-2.30 workload=nccl-p2p channels=4 distances=1,1 ranks=3 adversary=fifo seed=0 accept=1:0.1,0.0",
        ] {
            let c = Case::parse(s).unwrap();
            assert_eq!(c.to_string(), s);
            assert_eq!(c.case_string().unwrap(), s);
        }
        // An nccl-* variant or workload implies the protocol; defaults fill the rest.
        let c = Case::parse("variant=nccl-2.21 ranks=4").unwrap();
        assert_eq!(
            c.to_string(),
            "engine=fast protocol=nccl variant=nccl-2.21 workload=nccl-init ranks=4 adversary=rss seed=0"
        );
        assert_eq!(c.variant_label(), "nccl-2.21");
        let c = Case::parse("protocol=nccl").unwrap();
        assert_eq!(c.nccl.unwrap().variant, NcclCase::DEFAULT_VARIANT);
        // NVSHMEM's case strings are unchanged: no protocol word.
        assert!(!Case::parse("variant=nvshmem-3.4").unwrap().to_string().contains("protocol"));
        assert_eq!(Case::parse("protocol=nvshmem seed=2").unwrap(), Case::parse("seed=2").unwrap());
    }

    #[test]
    fn nccl_case_errors_name_the_key_and_the_other_protocol() {
        let e = |s: &str| Case::parse(s).unwrap_err().to_string();
        assert!(e("protocol=mpi").contains("protocol=`mpi` is not one of bootsim's protocols (known: nvshmem, nccl)"));
        // Whatever comes first: the protocol is what is wrong, not its variant's name.
        let line = "variant=round-tag protocol=rendezvous workload=two-rounds ranks=2";
        assert!(e(line).starts_with("bad case string: protocol=`rendezvous` is not one of"), "{}", e(line));
        assert!(e(line).contains("harness::world_of(LINE)"), "{}", e(line));
        assert!(
            e("variant=nccl-2.20").contains("accepted for protocol=nccl: nccl-2.8, nccl-2.19, nccl-2.21, nccl-2.30")
        );
        assert!(e("workload=nccl-allreduce").contains("nccl-init, nccl-p2p"));
        assert!(e("protocol=nvshmem variant=nccl-2.19").contains("needs protocol=nccl"));
        assert!(e("protocol=nccl variant=nvshmem-3.7").contains("NVSHMEM variant under protocol=nccl"));
        assert!(e("variant=nccl-2.19 qps=4").contains("`qps` applies to protocol=nvshmem only"));
        assert!(e("collnet=on").contains("applies to protocol=nccl only"));
        assert!(e("variant=nccl-2.19 collnet=maybe").contains("collnet=`maybe`: accepted: on, off"));
        assert!(e("workload=nccl-p2p collnet=on").contains("workload=nccl-init only"));
        assert!(e("workload=nccl-init distances=1").contains("workload=nccl-p2p only"));
        assert!(e("workload=nccl-p2p ranks=4 distances=1,4").contains("not a peer distance below ranks=4"));
        assert!(e("workload=nccl-p2p distances=1,x").contains("distances=`1,x`"));
        assert!(e("variant=nccl-2.19 engine=turmoil accept=1:0.0").contains("engine=fast only"));
        assert!(e("variant=nccl-2.19 workload=nccl-p2p ranks=4096").contains("over the 4096 MiB budget"));
        assert!(Case::parse("variant=nccl-2.19 ranks=4096").is_ok(), "nccl-init holds nothing per pair");
    }

    #[test]
    fn drain_ms_overrides_the_preset() {
        let c = Case::parse("variant=pr97 drain_ms=0").unwrap();
        assert_eq!(c.variant.drain, None);
        assert_eq!(Case::parse("variant=drain").unwrap().variant.drain, Some(Duration::from_millis(1000)));
    }
}
