//! [`CaseBuilder`]: a [`Case`] from typed values, checked as a case string is.

use std::time::Duration;

use bootsim_nvshmem::workload::Workload;

use super::{Case, CaseError, EngineKind, Foreign, PAYLOAD_BUDGET};
use crate::explore::schedule::Schedule;

/// The workload a builder was given: NVSHMEM's or NCCL's.
#[derive(Clone, Debug, PartialEq)]
enum Load {
    Nvshmem(Workload),
    Nccl(bootsim_nccl::Workload),
}

/// Builds a [`Case`] from typed values. [`CaseBuilder::build`] checks them exactly as
/// [`Case::parse`] checks a case string (the same errors, naming the key and the value), so a
/// built case always prints a case string that gives it back.
///
/// ```
/// use bootsim_sim::Case;
/// use bootsim_nvshmem::workload::Workload;
///
/// let case = Case::builder().variant("nvshmem-3.4").workload(Workload::QpCreate { k: 2 }).ranks(4).seed(9).build()?;
/// assert_eq!(case.to_string(), "engine=fast variant=nvshmem-3.4 workload=qp-create k=2 ranks=4 adversary=rss seed=9");
/// assert!(Case::builder().adversary("gentle").build().unwrap_err().to_string().contains("adversary=`gentle`"));
/// # Ok::<(), bootsim_sim::CaseError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build`"]
pub struct CaseBuilder {
    engine: EngineKind,
    variant: Option<String>,
    drain_ms: Option<i64>,
    first_tag: Option<u64>,
    load: Option<Load>,
    ranks: u32,
    adversary: String,
    seed: u64,
    deadline: Duration,
    knobs: Vec<(String, String)>,
    schedule: Schedule,
    budget: u128,
    /// A protocol of the user's own, from [`Case::to_builder`] of a case [`Case::named`] it.
    foreign: Option<Foreign>,
}

impl Default for CaseBuilder {
    /// The empty case string's values.
    fn default() -> Self {
        let d = Case::default();
        CaseBuilder {
            engine: d.engine,
            variant: None,
            drain_ms: None,
            first_tag: None,
            load: None,
            ranks: d.ranks,
            adversary: d.adversary,
            seed: d.seed,
            deadline: d.deadline,
            knobs: Vec::new(),
            schedule: Schedule::default(),
            budget: PAYLOAD_BUDGET,
            foreign: None,
        }
    }
}

impl CaseBuilder {
    /// The engine (`engine=`).
    pub fn engine(mut self, engine: EngineKind) -> Self {
        self.engine = engine;
        self
    }

    /// The variant by name (`variant=`): an NVSHMEM preset or an NCCL version (`nccl-2.19`,
    /// which makes the case `protocol=nccl`).
    pub fn variant(mut self, name: &str) -> Self {
        self.variant = Some(name.to_string());
        self
    }

    /// `drain_ms=`: NVSHMEM's drain in milliseconds, <= 0 disables.
    pub fn drain_ms(mut self, ms: i64) -> Self {
        self.drain_ms = Some(ms);
        self
    }

    /// `first_tag=`: where nvshmem-3.8's per-call tag counter starts.
    pub fn first_tag(mut self, first: u64) -> Self {
        self.first_tag = Some(first);
        self
    }

    /// An NVSHMEM workload (`workload=` with `qps=`, `k=`, `len=` or `ops=`).
    pub fn workload(mut self, workload: Workload) -> Self {
        self.load = Some(Load::Nvshmem(workload));
        self
    }

    /// An NCCL workload (`workload=nccl-*` with its parameters); the case is `protocol=nccl`.
    pub fn nccl_workload(mut self, workload: bootsim_nccl::Workload) -> Self {
        self.load = Some(Load::Nccl(workload));
        self
    }

    /// World size (`ranks=`), 1..=65536.
    pub fn ranks(mut self, ranks: u32) -> Self {
        self.ranks = ranks;
        self
    }

    /// The adversary profile by name (`adversary=`).
    pub fn adversary(mut self, name: &str) -> Self {
        self.adversary = name.to_string();
        self
    }

    /// The seed of every random stream (`seed=`).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The simulated-time limit (`deadline_ms=`): whole milliseconds, up to a day.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// A kernel knob in its case-string form (`rx_queues`, `4`), replacing an earlier setting of
    /// the same knob; knobs apply in the order first set.
    pub fn knob(mut self, key: &str, value: &str) -> Self {
        match self.knobs.iter_mut().find(|(k, _)| k == key) {
            Some(kv) => kv.1 = value.to_string(),
            None => self.knobs.push((key.to_string(), value.to_string())),
        }
        self
    }

    /// The explicit accept order and drain failures (`accept=`, `drain_fail=`).
    pub fn schedule(mut self, schedule: Schedule) -> Self {
        self.schedule = schedule;
        self
    }

    /// Another bound on the run's buffers than [`PAYLOAD_BUDGET`] (see [`Case::parse_within`]).
    pub fn budget(mut self, bytes: u128) -> Self {
        self.budget = bytes;
        self
    }

    /// The case, or the first thing wrong with it, named as [`Case::parse`] names it.
    pub fn build(&self) -> Result<Case, CaseError> {
        let line = self.line()?;
        let case = match self.foreign {
            Some(_) => Case::parse_foreign(&line, self.budget)?,
            None => Case::parse_within(&line, self.budget)?,
        };
        let unsaid = |what: String| Err(CaseError(format!("{what}: no case string says it, so no case has it")));
        match &self.load {
            Some(Load::Nvshmem(w)) if *w != case.workload => return unsaid(format!("workload {w:?}")),
            Some(Load::Nccl(w)) if case.nccl.as_ref().is_none_or(|nc| nc.workload != *w) => {
                return unsaid(format!("NCCL workload {w:?}"))
            }
            _ => {}
        }
        if case.schedule != self.schedule {
            return unsaid(format!("schedule {:?}", self.schedule));
        }
        Ok(case)
    }

    /// The case string of these values (checked by parsing it); an error for a value no word
    /// can hold.
    fn line(&self) -> Result<String, CaseError> {
        // The values given as text: anything else prints as one word.
        let texts = self.variant.iter().map(|v| ("variant", v)).chain([("adversary", &self.adversary)]);
        for (key, value) in texts.chain(self.knobs.iter().map(|(k, v)| (k.as_str(), v))) {
            if value.contains(char::is_whitespace) {
                return Err(CaseError(format!("{key}=`{value}`: a case string's values hold no whitespace")));
            }
        }
        let mut words = Vec::new();
        if let Some(x) = &self.foreign {
            words.push(format!("protocol={} variant={} workload={}", x.protocol, x.variant, x.workload));
        }
        words.push(format!("engine={}", self.engine.name()));
        let nccl =
            matches!(self.load, Some(Load::Nccl(_))) || self.variant.as_deref().is_some_and(|v| v.starts_with("nccl-"));
        if nccl {
            words.push("protocol=nccl".into());
        }
        if let Some(v) = &self.variant {
            words.push(format!("variant={v}"));
        }
        if let Some(ms) = self.drain_ms {
            words.push(format!("drain_ms={ms}"));
        }
        if let Some(first) = self.first_tag {
            words.push(format!("first_tag={first}"));
        }
        match &self.load {
            Some(Load::Nvshmem(w)) => words.push(format!("workload={w}")),
            Some(Load::Nccl(w)) => words.push(format!("workload={w}")),
            None => {}
        }
        words.push(format!("ranks={}", self.ranks));
        words.push(format!("adversary={}", self.adversary));
        words.push(format!("seed={}", self.seed));
        if !self.deadline.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(CaseError(format!("deadline {:?}: deadline_ms takes whole milliseconds", self.deadline)));
        }
        words.push(format!("deadline_ms={}", self.deadline.as_millis()));
        words.extend(self.schedule.accept_value().map(|a| format!("accept={a}")));
        words.extend(self.schedule.drain_fail_value().map(|d| format!("drain_fail={d}")));
        for (k, v) in &self.knobs {
            if k.is_empty() || k.contains(|c: char| c == '=' || c.is_whitespace()) {
                return Err(CaseError(format!("kernel knob `{k}`: a key is one word without `=`")));
            }
            words.push(format!("{k}={v}"));
        }
        Ok(words.join(" "))
    }
}

impl Case {
    /// A builder starting from the empty case string's values.
    pub fn builder() -> CaseBuilder {
        CaseBuilder::default()
    }

    /// A builder holding this case's values (its budget too, [`CaseBuilder::budget`]), to make
    /// a changed copy.
    pub fn to_builder(&self) -> CaseBuilder {
        let (variant, load) = match (&self.foreign, &self.nccl) {
            // The user's protocol's words stand for the variant and workload.
            (Some(_), _) => (None, None),
            (None, Some(nc)) => (Some(nc.variant.name().to_string()), Some(Load::Nccl(nc.workload.clone()))),
            (None, None) => (Some(self.variant_name.clone()), Some(Load::Nvshmem(self.workload.clone()))),
        };
        CaseBuilder {
            engine: self.engine,
            variant,
            drain_ms: self.drain_ms,
            first_tag: self.first_tag,
            load,
            ranks: self.ranks,
            adversary: self.adversary.clone(),
            seed: self.seed,
            deadline: self.deadline,
            knobs: self.knobs.clone(),
            schedule: self.schedule.clone(),
            budget: self.budget.0,
            foreign: self.foreign.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bootsim_nvshmem::workload::{OpSpec, Workload};
    use proptest::prelude::*;

    use super::CaseBuilder;
    use crate::case::{variant_names, Case, EngineKind};
    use crate::kernel::PROFILES;

    fn nvshmem_workload() -> impl Strategy<Value = Workload> {
        let op = prop_oneof![
            (1usize..4096).prop_map(OpSpec::Allgather),
            (1usize..4096).prop_map(OpSpec::Alltoall),
            Just(OpSpec::Barrier),
        ];
        prop_oneof![
            (1u32..64).prop_map(|qps| Workload::Deepep { qps }),
            (1u32..64).prop_map(|qps| Workload::NvshmemInit { qps }),
            (1u32..16).prop_map(|k| Workload::QpCreate { k }),
            (1u32..40).prop_map(|len| Workload::Churn { len }),
            prop::collection::vec(op, 1..6).prop_map(Workload::Custom),
        ]
    }

    fn nccl_workload() -> impl Strategy<Value = bootsim_nccl::Workload> {
        use bootsim_nccl::{InitParams, Workload as W, OPS};
        let op = prop::sample::select(OPS.to_vec());
        prop_oneof![
            (1u32..9, 1u32..5, any::<bool>()).prop_map(|(ranks_per_node, channels, collnet)| W::Init(InitParams {
                ranks_per_node,
                channels,
                collnet
            })),
            (1u32..5, prop::option::of(prop::collection::vec(1u32..4, 1..4)))
                .prop_map(|(channels, distances)| W::P2p { channels, distances }),
            (op.clone(), op).prop_map(|(a, b)| W::Pair(a, b)),
        ]
    }

    /// A builder from drawn values: mostly cases that hold, some that must be refused.
    fn builder() -> impl Strategy<Value = CaseBuilder> {
        let knob = prop::sample::select(vec![
            ("backlog", "3"),
            ("rx_queues", "4"),
            ("jitter", "5us"),
            ("stall_gap", "off"),
            ("loss_good", "0.01"),
            ("rto_min", "1s"),
            ("trace", "false"),
            ("syscall_cost", "0"),
            ("rx_queues", "0"),
            ("latency", "7"),
        ]);
        let adversary = prop_oneof![8 => prop::sample::select(PROFILES.to_vec()), 1 => Just("gentle")];
        let load = prop_oneof![
            nvshmem_workload().prop_map(|w| (true, Some(w), None)),
            nccl_workload().prop_map(|w| (false, None, Some(w))),
        ];
        (
            (any::<bool>(), prop::sample::select(variant_names()), load, prop::option::of(-5i64..2000)),
            (1u32..10, adversary, any::<u64>(), prop_oneof![1u64..1_000_000, Just(300_000)]),
            (prop::collection::vec(knob, 0..3), prop::option::weighted(0.1, 1u64..10)),
        )
            .prop_map(
                |((turmoil, variant, (nvshmem, w, nw), drain), (ranks, adversary, seed, ms), (knobs, first))| {
                    let mut b = Case::builder()
                        .engine(if turmoil { EngineKind::Turmoil } else { EngineKind::Fast })
                        .ranks(ranks)
                        .adversary(adversary)
                        .seed(seed)
                        .deadline(Duration::from_millis(ms));
                    // The variant mostly of the workload's protocol.
                    if variant.starts_with("nccl-") != nvshmem {
                        b = b.variant(variant);
                    }
                    if let Some(w) = w {
                        b = b.workload(w);
                        if let Some(d) = drain {
                            b = b.drain_ms(d);
                        }
                        if let Some(f) = first {
                            b = b.variant("nvshmem-3.8").first_tag(f);
                        }
                    }
                    if let Some(w) = nw {
                        b = b.nccl_workload(w);
                    }
                    for (k, v) in knobs {
                        b = b.knob(k, v);
                    }
                    b
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// A built case prints a line that parses back to it; a refused one says which key.
        #[test]
        fn a_built_case_prints_a_line_that_gives_it_back(b in builder()) {
            match b.build() {
                Ok(case) => {
                    let line = case.to_string();
                    prop_assert_eq!(&Case::parse(&line).unwrap(), &case, "{}", line);
                    prop_assert_eq!(case.case_string().unwrap(), line);
                    prop_assert_eq!(&case.to_builder().build().unwrap(), &case);
                    // Reseeded, it prints a line that gives it back, or it is refused naming the seed.
                    let seed = case.seed().wrapping_add(1);
                    match case.with_seed(seed) {
                        Ok(moved) => {
                            let line = moved.case_string().unwrap();
                            prop_assert_eq!(Case::parse(&line).unwrap(), moved);
                        }
                        Err(e) => prop_assert!(e.to_string().contains(&format!("seed {seed}: the knobs do not fit")), "{}", e),
                    }
                }
                Err(e) => {
                    let e = e.to_string();
                    prop_assert!(e.contains('=') || e.contains('`'), "{}", e);
                }
            }
        }
    }

    #[test]
    fn a_case_parsed_within_a_larger_budget_rebuilds_equal_and_keeps_its_budget() {
        let big = "workload=nvshmem-init ranks=16384";
        let c = Case::parse_within(big, u128::MAX).unwrap();
        assert_eq!(c.to_builder().build().unwrap(), c);
        let changed = c.to_builder().seed(5).build().unwrap();
        assert_eq!((changed.ranks(), changed.seed()), (16384, 5));
        // Its line is over the case string's budget: the parser refuses it, naming the budget.
        let e = c.case_string().unwrap_err().to_string();
        assert!(e.contains("over the 4096 MiB budget"), "{e}");
        // Within the default budget, a larger one changes nothing a line says.
        let small = Case::parse_within("ranks=4", u128::MAX).unwrap();
        assert_eq!(small.case_string().unwrap(), Case::parse("ranks=4").unwrap().to_string());
    }

    #[test]
    fn the_drawn_builders_mostly_build() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = builder();
        let built = (0..400).filter(|_| strategy.new_tree(&mut runner).unwrap().current().build().is_ok()).count();
        assert!(built >= 100, "only {built} of 400 drawn builders built: the property checks too little");
    }
}
