//! [`CaseBuilder`]: a [`Case`] from typed values, checked as a case string is.

use std::time::Duration;

use bootsim_nvshmem::workload::Workload;

use super::{nccl_params, nvshmem_params, Case, CaseError, EngineKind, PAYLOAD_BUDGET};
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
        let case = Case::parse_within(&line, self.budget)?;
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
        let mut words = vec![format!("engine={}", self.engine.name())];
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
            Some(Load::Nvshmem(w)) => words.push(format!("workload={}{}", w.name(), nvshmem_params(w))),
            Some(Load::Nccl(w)) => words.push(format!("workload={}{}", w.name(), nccl_params(w))),
            None => {}
        }
        words.push(format!("ranks={}", self.ranks));
        words.push(format!("adversary={}", self.adversary));
        words.push(format!("seed={}", self.seed));
        if self.deadline.subsec_nanos() % 1_000_000 != 0 {
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
        for word in &words {
            let (key, value) = word.split_once('=').unwrap_or((word, ""));
            if value.contains(char::is_whitespace) {
                return Err(CaseError(format!("{key}=`{value}`: a case string's values hold no whitespace")));
            }
        }
        Ok(words.join(" "))
    }
}

impl Case {
    /// A builder starting from the empty case string's values.
    pub fn builder() -> CaseBuilder {
        CaseBuilder::default()
    }

    /// A builder holding this case's values, to make a changed copy.
    pub fn to_builder(&self) -> CaseBuilder {
        let (variant, load) = match &self.nccl {
            Some(nc) => (nc.variant.name().to_string(), Load::Nccl(nc.workload.clone())),
            None => (self.variant_name.clone(), Load::Nvshmem(self.workload.clone())),
        };
        CaseBuilder {
            engine: self.engine,
            variant: Some(variant),
            drain_ms: self.drain_ms,
            first_tag: self.first_tag,
            load: Some(load),
            ranks: self.ranks,
            adversary: self.adversary.clone(),
            seed: self.seed,
            deadline: self.deadline,
            knobs: self.knobs.clone(),
            schedule: self.schedule.clone(),
            budget: PAYLOAD_BUDGET,
        }
    }
}
