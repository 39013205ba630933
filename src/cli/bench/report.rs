//! What one `bootsim bench` run measured, as data: written as JSON (`--json FILE`), and the one
//! source both the terminal text and BENCHMARKS.md's generated tables are rendered from
//! (`render.rs`). Targets are judged here, from the figures, so a report read back judges the
//! same way as the run that wrote it.

use serde::{Deserialize, Serialize};

/// One run of `bootsim bench`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Report {
    pub meta: Meta,
    /// Section 1, one entry per subject, in the order run.
    pub throughput: Vec<Subject>,
    /// Section 1's ratios, each the median over rounds of the ratio within a round.
    pub ratios: Option<Ratios>,
    /// Section 2, one entry per point up to `--max-ranks` and per target point above it.
    pub scale: Vec<ScaleRow>,
    /// Section 2's growth exponents.
    pub growth: Option<Growth>,
    /// Section 2 for NCCL's init (`nccl-init`), the same points (absent from reports written
    /// before it was measured).
    #[serde(default)]
    pub nccl_scale: Vec<ScaleRow>,
    /// Its growth exponents.
    #[serde(default)]
    pub nccl_growth: Option<Growth>,
    /// Section 3.
    pub detect: Vec<DetectRow>,
    /// Section 4.
    pub real: Vec<RealRow>,
    /// Section 5: callgrind's profile of the scale series' case (absent from reports before
    /// 2026-12-02 evening).
    #[serde(default)]
    pub profile: Option<ProfileSection>,
}

/// Where and how the run was made.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Meta {
    /// UTC start time, RFC 3339.
    pub date: String,
    /// `git rev-parse --short HEAD` of the working directory, when it is a checkout.
    pub commit: Option<String>,
    /// The arguments after `bootsim bench`.
    pub args: String,
    pub quick: bool,
    /// `available_parallelism`.
    pub cpus: usize,
    pub mem_gib: f64,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
    /// The whole bench's wall time.
    pub wall_s: f64,
}

/// One throughput subject: totals over every round, and the median rate over rounds.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Subject {
    /// Short name, e.g. `fast init 16`.
    pub name: String,
    /// Hosts (ranks) per run.
    pub hosts: u64,
    pub runs: u64,
    pub runs_per_s: f64,
    pub conns_per_s: f64,
    pub conns_per_run: f64,
    pub packets_per_run: f64,
    pub sim_ms_per_run: f64,
    /// The engine's cost unit: µs per host per 1 ms tick (turmoil), ns per packet (fast).
    pub cost: f64,
    pub cost_unit: String,
}

/// Section 1's ratios.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Ratios {
    pub fast_over_turmoil_deepep2: f64,
    pub fast_over_turmoil_init16: f64,
    /// The bound the shared kernel model puts on fast / turmoil at init 16.
    pub kernel_model_ceiling_init16: f64,
    pub bare_over_turmoil_init16_runs: f64,
    pub bare_over_turmoil_init16_conns: f64,
    pub fast_init16_over_bare_runs: f64,
}

/// One scale point and how it ended.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ScaleRow {
    pub ranks: u32,
    pub outcome: ScaleOutcome,
}

/// How a scale point ended.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ScaleOutcome {
    Done(ScalePoint),
    /// The child ran out of its address-space cap; the peak it reached.
    OutOfMemory {
        cap_mib: f64,
        peak_mib: f64,
    },
    /// Not run, and why.
    NotRun {
        why: String,
    },
}

/// What one scale point measured (one child process).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ScalePoint {
    pub wall_s: f64,
    pub cpu_s: f64,
    pub peak_mib: f64,
    /// The run's verdict: a scale point is the whole bootstrap only when it passed.
    pub verdict: String,
    /// Simulated bootstrap time.
    pub bootstrap_s: f64,
    pub messages: f64,
    /// Every frame written (ring and root included); `messages` are point-to-point only.
    pub writes: f64,
    pub agenda_events: f64,
    pub wakeups: f64,
    pub packets: f64,
}

impl ScalePoint {
    /// CPU nanoseconds per kernel agenda event.
    pub fn ns_per_event(&self) -> f64 {
        self.cpu_s * 1e9 / self.agenda_events.max(1.0)
    }
    fn whole(&self) -> bool {
        self.verdict == "pass"
    }
}

/// Least-squares growth exponents against ranks.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Growth {
    /// The fit covers ranks >= this.
    pub from_ranks: u32,
    pub cpu: Option<f64>,
    pub messages: Option<f64>,
    pub packets: Option<f64>,
    /// Every frame written, ring and root included (absent from reports before 2026-12-02).
    pub frames: Option<f64>,
    /// Kernel agenda events (absent from reports before 2026-12-02).
    pub events: Option<f64>,
    pub memory: Option<f64>,
}

/// One time-to-detect case.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct DetectRow {
    pub variant: String,
    /// Short name, e.g. `deepep 2`.
    pub case: String,
    pub seeds: u64,
    pub failures: u64,
    pub median: Option<u64>,
    pub p90: Option<u64>,
    pub wall_median_ms: Option<f64>,
    /// The report's case, which carries the ≤ 10 seeds target.
    pub targeted: bool,
}

/// One real-socket variant.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct RealRow {
    pub variant: String,
    pub ranks: u32,
    pub wall_ms: f64,
    pub slowest_rank_ms: f64,
    pub drains: u64,
    pub gave_up: u64,
    pub drain_us_per_message: Option<f64>,
    /// Median over rounds of this variant's wall time over nvshmem-3.7's.
    pub ratio: f64,
}

/// Section 5: the case profiled under callgrind, and what it found.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ProfileSection {
    /// The case string run.
    pub case: String,
    /// Its ranks.
    pub ranks: u32,
    /// Its profile, or why there is none.
    pub outcome: ProfileOutcome,
}

/// How the profile ended.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ProfileOutcome {
    /// Run and read.
    Done(Profile),
    /// Not run (no valgrind, or the run failed), and why.
    NotRun { why: String },
}

/// Instructions of one run, exact: in total, per function (inclusive) and per layer (own).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Profile {
    /// Instructions of the whole run (callgrind's `Ir` total).
    pub instructions: u64,
    /// The run's agenda events (its `stats`).
    pub agenda_events: u64,
    /// The run's packets (its `stats`).
    pub packets: u64,
    /// `profile::FUNCTIONS`, each with its callees.
    pub functions: Vec<ProfilePart>,
    /// Every instruction once, by the layer of the function it was spent in.
    pub layers: Vec<ProfilePart>,
}

/// A named share of a profile.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ProfilePart {
    /// What the share is, as the report prints it.
    pub name: String,
    /// Its instructions.
    pub instructions: u64,
}

/// A target of issue #28 (and the older ones still standing) and how this run did.
pub struct Target {
    /// The target as the report names it.
    pub name: String,
    /// This run's figure for it.
    pub measured: String,
    /// `None`: not measured in this run.
    pub met: Option<bool>,
    /// For a miss, the distance left: the cut that would meet it (`-34% CPU`).
    pub to_go: Option<String>,
}

impl Target {
    fn new(name: impl Into<String>, measured: impl Into<String>, met: Option<bool>) -> Self {
        Target { name: name.into(), measured: measured.into(), met, to_go: None }
    }

    /// This target, with the distance `to_go` when it is missed.
    fn missing(mut self, to_go: impl FnOnce() -> String) -> Self {
        if self.met == Some(false) {
            self.to_go = Some(to_go());
        }
        self
    }

    /// PASS, MISS or not measured.
    pub fn verdict(&self) -> &'static str {
        match self.met {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "not measured",
        }
    }
}

/// Per scale point: (ranks, CPU seconds, peak MiB) at most.
pub const SCALE_TARGETS: [(u32, f64, Option<f64>); 3] =
    [(1024, 10.0, Some(300.0)), (2048, 60.0, None), (4096, 300.0, Some(2048.0))];
/// CPU nanoseconds per agenda event at 1024 ranks, at most.
pub const NS_PER_EVENT_TARGET: f64 = 100.0;

impl Report {
    fn point(&self, ranks: u32) -> Option<&ScaleOutcome> {
        self.scale.iter().find(|r| r.ranks == ranks).map(|r| &r.outcome)
    }

    /// Every target, judged from this report's figures, each miss with the distance left.
    pub fn targets(&self) -> Vec<Target> {
        let mut t = Vec::new();
        let ratio = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.1}x"));
        let r = self.ratios.as_ref();
        for (what, x) in
            [("deepep 2", r.map(|r| r.fast_over_turmoil_deepep2)), ("init 16", r.map(|r| r.fast_over_turmoil_init16))]
        {
            let target = Target::new(format!("fast >= 50x turmoil, {what}"), ratio(x), x.map(|x| x >= 50.0));
            t.push(target.missing(|| format!("{} cost", cut(50.0, x.unwrap_or(0.0)))));
        }
        let per_event = format!("<= {NS_PER_EVENT_TARGET} ns per agenda event, 1024 ranks");
        t.push(match self.point(1024) {
            Some(ScaleOutcome::Done(p)) => Target::new(
                per_event,
                format!("{:.0} ns", p.ns_per_event()),
                Some(p.whole() && p.ns_per_event() <= NS_PER_EVENT_TARGET),
            )
            .missing(|| match p.whole() {
                true => format!("{} ns", cut(p.ns_per_event(), NS_PER_EVENT_TARGET)),
                false => "a passing run".into(),
            }),
            Some(ScaleOutcome::OutOfMemory { .. }) => {
                Target::new(per_event, "out of memory", Some(false)).missing(|| "a run that fits".into())
            }
            _ => Target::new(per_event, "not run", None),
        });
        for (n, cpu, mib) in SCALE_TARGETS {
            let name = match mib {
                Some(m) => format!("{n} ranks: <= {cpu} CPU-s, <= {m} MiB"),
                None => format!("{n} ranks: <= {cpu} CPU-s"),
            };
            t.push(match self.point(n) {
                Some(ScaleOutcome::Done(p)) => Target::new(
                    name,
                    format!("{:.1} CPU-s, {:.0} MiB", p.cpu_s, p.peak_mib),
                    Some(p.whole() && p.cpu_s <= cpu && mib.is_none_or(|m| p.peak_mib <= m)),
                )
                .missing(|| match mib {
                    _ if !p.whole() => "a passing run".into(),
                    _ if p.cpu_s > cpu => format!("{} CPU", cut(p.cpu_s, cpu)),
                    Some(m) if p.peak_mib > m => format!("{} MiB", cut(p.peak_mib, m)),
                    _ => "a passing run".into(),
                }),
                Some(ScaleOutcome::OutOfMemory { peak_mib, .. }) => {
                    Target::new(name, format!("out of memory at {peak_mib:.0} MiB"), Some(false))
                        .missing(|| "a run that fits".into())
                }
                _ => Target::new(name, "not run", None),
            });
        }
        let gap = self.growth.as_ref().and_then(|g| g.cpu.zip(g.messages)).map(|(c, m)| c - m);
        t.push(
            Target::new(
                "CPU - messages exponent <= 0.05",
                gap.map_or("-".to_string(), |g| format!("{g:.2}")),
                gap.map(|g| g <= 0.05),
            )
            .missing(|| format!("-{:.2}", gap.unwrap_or(0.0) - 0.05)),
        );
        for d in self.detect.iter().filter(|d| d.targeted) {
            t.push(
                Target::new(
                    format!("{} {}: median <= 10 seeds", d.variant, d.case),
                    d.median.map_or("-".to_string(), |m| m.to_string()),
                    Some(d.median.is_some_and(|m| m <= 10)),
                )
                .missing(|| d.median.map_or("a failure".into(), |m| format!("-{} seeds", m - 10))),
            );
        }
        if let Some(s) = self.real.iter().find(|r| r.variant == "seq") {
            let target =
                Target::new("seq <= 1.05x nvshmem-3.7 (real)", format!("{:.3}x", s.ratio), Some(s.ratio <= 1.05));
            t.push(target.missing(|| format!("{} wall", cut(s.ratio, 1.05))));
        }
        t
    }

    /// The tables, in order: what both renderings show.
    pub fn tables(&self) -> Vec<Table> {
        let mut out = Vec::new();
        let f = |x: f64, d: usize| format!("{x:.d$}");
        if !self.throughput.is_empty() {
            out.push(Table {
                title: "1 throughput: one thread, nvshmem-3.7 rss, a fresh seed per run".into(),
                header: vec!["subject", "runs/s", "conns/run", "pkts/run", "sim ms", "cost"],
                left: 1,
                rows: self
                    .throughput
                    .iter()
                    .map(|s| {
                        vec![
                            s.name.clone(),
                            f(s.runs_per_s, 1),
                            f(s.conns_per_run, 0),
                            f(s.packets_per_run, 0),
                            f(s.sim_ms_per_run, 0),
                            format!("{:.2} {}", s.cost, s.cost_unit),
                        ]
                    })
                    .collect(),
            });
        }
        if let Some(r) = &self.ratios {
            let x = |v: f64| format!("{v:.2}x");
            out.push(Table {
                title: "1 throughput ratios: medians of within-round ratios".into(),
                header: vec!["ratio", "value"],
                left: 1,
                rows: vec![
                    vec!["fast / turmoil, deepep 2 (runs/s)".into(), x(r.fast_over_turmoil_deepep2)],
                    vec!["fast / turmoil, init 16 (runs/s)".into(), x(r.fast_over_turmoil_init16)],
                    vec!["kernel-model ceiling of that, init 16".into(), x(r.kernel_model_ceiling_init16)],
                    vec!["bare turmoil / turmoil init 16 (runs/s)".into(), x(r.bare_over_turmoil_init16_runs)],
                    vec!["bare turmoil / turmoil init 16 (conns/s)".into(), x(r.bare_over_turmoil_init16_conns)],
                    vec!["fast init 16 / bare turmoil (runs/s)".into(), x(r.fast_init16_over_bare_runs)],
                ],
            });
        }
        out.extend(scale_tables(
            "2 scale: fast nvshmem-init seed=1, one child process per point",
            &self.scale,
            &self.growth,
        ));
        out.extend(scale_tables(
            "2b scale: fast nccl-init (nccl-2.30) seed=1, a child per point",
            &self.nccl_scale,
            &self.nccl_growth,
        ));
        if !self.detect.is_empty() {
            let o = |x: Option<u64>| x.map_or("-".to_string(), |v| v.to_string());
            out.push(Table {
                title: "3 time to detect: seeds 0.. of engine=fast adversary=rss".into(),
                header: vec!["variant", "case", "seeds", "fail", "median", "p90", "wall ms"],
                left: 2,
                rows: self
                    .detect
                    .iter()
                    .map(|d| {
                        vec![
                            d.variant.clone(),
                            d.case.clone(),
                            d.seeds.to_string(),
                            d.failures.to_string(),
                            o(d.median),
                            o(d.p90),
                            d.wall_median_ms.map_or("-".to_string(), |w| f(w, 1)),
                        ]
                    })
                    .collect(),
            });
        }
        if let Some(first) = self.real.first() {
            out.push(Table {
                title: format!("4 real sockets: smoke --local {} nvshmem-init per variant", first.ranks),
                header: vec!["variant", "wall ms", "slowest ms", "drain us/msg", "gave up", "/ 3.7"],
                left: 1,
                rows: self
                    .real
                    .iter()
                    .map(|r| {
                        vec![
                            r.variant.clone(),
                            f(r.wall_ms, 0),
                            f(r.slowest_rank_ms, 0),
                            r.drain_us_per_message.map_or("no drain".to_string(), |d| f(d, 1)),
                            r.gave_up.to_string(),
                            format!("{:.3}x", r.ratio),
                        ]
                    })
                    .collect(),
            });
        }
        out.extend(self.profile.as_ref().map(profile_tables).unwrap_or_default());
        out.push(Table {
            title: "targets (issue #28)".into(),
            header: vec!["target", "measured", "to meet", "verdict"],
            left: 4,
            rows: self
                .targets()
                .into_iter()
                .map(|t| {
                    vec![t.name.clone(), t.measured.clone(), t.to_go.clone().unwrap_or_default(), t.verdict().into()]
                })
                .collect(),
        });
        out
    }
}

/// The cut in `measured` that would bring it to `target`, as a percentage (`-34%`).
fn cut(measured: f64, target: f64) -> String {
    format!("-{:.0}%", 100.0 * (1.0 - target / measured.max(f64::MIN_POSITIVE)))
}

/// `text`'s words in lines of at most `width` characters (a longer word on a line of its own), so
/// a reason printed as rows keeps the report's 80 columns.
fn words_in_lines(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// Section 5's tables: the functions (inclusive) and the layers (own) of the profiled run, each
/// as millions of instructions, share and instructions per agenda event; or why it did not run.
fn profile_tables(p: &ProfileSection) -> Vec<Table> {
    let title = format!("5 profile: callgrind, fast nvshmem-init {} ranks rss seed=1", p.ranks);
    let prof = match &p.outcome {
        ProfileOutcome::Done(prof) => prof,
        ProfileOutcome::NotRun { why } => {
            let rows = words_in_lines(&format!("not run: {why}"), 78).into_iter().map(|l| vec![l]).collect();
            return vec![Table { title, header: vec!["profile"], left: 1, rows }];
        }
    };
    let row = |name: &str, n: u64| {
        vec![
            name.to_string(),
            format!("{:.1}", n as f64 / 1e6),
            format!("{:.1}%", 100.0 * n as f64 / prof.instructions.max(1) as f64),
            format!("{:.0}", n as f64 / prof.agenda_events.max(1) as f64),
        ]
    };
    let header = vec!["where", "M instr", "share", "per event"];
    let mut functions = vec![row("whole run", prof.instructions)];
    functions.extend(prof.functions.iter().map(|f| row(&f.name, f.instructions)));
    functions.push(vec![format!(
        "{} agenda events, {} packets: {:.0} instructions a packet",
        prof.agenda_events,
        prof.packets,
        prof.instructions as f64 / prof.packets.max(1) as f64
    )]);
    vec![
        Table { title: format!("{title}, inclusive"), header: header.clone(), left: 1, rows: functions },
        Table {
            title: "5 profile: each instruction once, by layer".into(),
            header,
            left: 1,
            rows: prof.layers.iter().map(|l| row(&l.name, l.instructions)).collect(),
        },
    ]
}

/// A scale series' tables: one row per point, then its growth exponents (none when the series
/// was not measured).
fn scale_tables(title: &str, rows: &[ScaleRow], growth: &Option<Growth>) -> Vec<Table> {
    let mut out = Vec::new();
    let f = |x: f64, d: usize| format!("{x:.d$}");
    if rows.is_empty() {
        return out;
    }
    out.push(Table {
        title: title.into(),
        header: vec!["ranks", "CPU-s", "MiB", "messages", "ev/msg", "pkt/msg", "ev/frame", "ns/ev", "verdict"],
        left: 0,
        rows: rows
            .iter()
            .map(|r| match &r.outcome {
                ScaleOutcome::Done(p) => {
                    let per_msg = |x: f64| f(x / p.messages.max(1.0), 1);
                    vec![
                        r.ranks.to_string(),
                        f(p.cpu_s, 2),
                        f(p.peak_mib, 1),
                        f(p.messages, 0),
                        per_msg(p.agenda_events),
                        per_msg(p.packets),
                        f(p.agenda_events / p.writes.max(1.0), 2),
                        f(p.ns_per_event(), 0),
                        p.verdict.clone(),
                    ]
                }
                ScaleOutcome::OutOfMemory { cap_mib, peak_mib } => vec![
                    r.ranks.to_string(),
                    format!("out of memory under a {cap_mib:.0} MiB cap (peak {peak_mib:.0} MiB)"),
                ],
                ScaleOutcome::NotRun { why } => vec![r.ranks.to_string(), format!("not run: {why}")],
            })
            .collect(),
    });
    if let Some(g) = growth {
        let e = |k: Option<f64>| k.map_or("-".to_string(), |k| format!("{k:.2}"));
        out.push(Table {
            title: format!(
                "{}: growth exponents (log-log fit over ranks >= {})",
                title.split(':').next().unwrap_or(title),
                g.from_ranks
            ),
            header: vec!["quantity", "exponent"],
            left: 1,
            rows: vec![
                vec!["CPU".into(), e(g.cpu)],
                vec!["messages".into(), e(g.messages)],
                vec!["packets".into(), e(g.packets)],
                vec!["frames".into(), e(g.frames)],
                vec!["agenda events".into(), e(g.events)],
                vec!["peak memory".into(), e(g.memory)],
                vec!["CPU - messages".into(), e(g.cpu.zip(g.messages).map(|(c, m)| c - m))],
                vec!["CPU - packets".into(), e(g.cpu.zip(g.packets).map(|(c, p)| c - p))],
                vec!["CPU - frames".into(), e(g.cpu.zip(g.frames).map(|(c, p)| c - p))],
                vec!["CPU - agenda events".into(), e(g.cpu.zip(g.events).map(|(c, p)| c - p))],
            ],
        });
    }
    out
}

/// One table of the report: what both renderings (terminal, Markdown) print.
pub struct Table {
    pub title: String,
    pub header: Vec<&'static str>,
    /// The first `left` columns are left-aligned (names); the rest are numbers.
    pub left: usize,
    /// A row may be shorter than the header: its last cell then spans the rest.
    pub rows: Vec<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_reason_is_split_into_lines_that_fit() {
        let why = "not run: `valgrind --version` did not run: run scripts/install-valgrind.sh (make test does) \
                   a_word_longer_than_the_width_of_the_line_it_would_have_to_fit_in_so_it_stands_alone_xx";
        let lines = words_in_lines(why, 40);
        assert!(lines.len() > 2);
        assert_eq!(lines.join(" "), why.split_whitespace().collect::<Vec<_>>().join(" "), "no word lost");
        for l in &lines {
            assert!(l.chars().count() <= 40 || !l.contains(' '), "{l:?}");
        }
    }
}
