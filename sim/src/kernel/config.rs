//! The kernel model's knobs, named adversary profiles, and `key=value` parsing and printing.

use std::fmt;
use std::time::Duration;

use super::rng::{self, Purpose};
use bootsim_core::duration::show;

/// Every knob of the kernel model. `Default` is the `fifo` profile.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelConfig {
    /// RX queues per host (RSS spreads flows over them), 1..=128.
    pub rx_queues: u16,
    /// Softirq time to process one packet.
    pub service: Duration,
    /// One-way wire latency floor.
    pub latency: Duration,
    /// Extra one-way latency, uniform in `0..=jitter` (packets of one connection and direction
    /// still arrive in order).
    pub jitter: Duration,
    /// Mean free time between background-load stalls of one RX queue's CPU; `None`: no stalls.
    pub stall_gap: Option<Duration>,
    /// Load spread across RX queues (>= 1): each queue's mean gap is `stall_gap * f`, with
    /// `ln f` uniform in `[-ln skew, ln skew]` (RSS spreads background flows unevenly).
    pub stall_skew: f64,
    /// Shortest stall (Pareto scale).
    pub stall_xm: Duration,
    /// Stall tail index (Pareto shape): smaller is heavier.
    pub stall_alpha: f64,
    /// Longest stall.
    pub stall_cap: Duration,
    /// Gilbert–Elliott: mean length of a good spell (exponential; spells are time, not packets).
    pub loss_good_spell: Duration,
    /// Gilbert–Elliott: mean length of a bad spell (a congestion episode).
    pub loss_bad_spell: Duration,
    /// Loss probability in the good state.
    pub loss_good: f64,
    /// Loss probability in the bad state.
    pub loss_bad: f64,
    /// Accept-queue capacity of every listener (`listen(fd, backlog)`), at least 1.
    pub backlog: u32,
    /// First SYN / SYN-ACK retransmission timeout (doubles per retry).
    pub syn_rto: Duration,
    /// SYN retransmissions before connect fails (`tcp_syn_retries`).
    pub syn_retries: u8,
    /// SYN-ACK retransmissions before a half-open connection is forgotten (`tcp_synack_retries`).
    pub synack_retries: u8,
    /// Data retransmission timeout floor (`TCP_RTO_MIN`); doubles per consecutive timeout.
    pub rto_min: Duration,
    /// Data retransmission timeout ceiling (`TCP_RTO_MAX`).
    pub rto_max: Duration,
    /// Data retransmissions before the connection is aborted (`tcp_retries2`).
    pub data_retries: u8,
    /// Emit trace events (stalls, losses, retransmissions, enqueues) besides application events.
    pub trace: bool,
    /// Forced RX-queue stalls, on top of (or, with `stall_gap=off`, instead of) random ones.
    pub stalls: Vec<ScriptedStall>,
    /// Load-dependent receive path ([`LoadConfig`]); all off in every profile but `load`.
    pub load: LoadConfig,
}

/// The load-dependent receive path: TCP's per-packet cost by kind, NAPI's poll budget with
/// deferral to ksoftirqd, a bounded RX ring, and a background packet flood. Zero or `None`
/// switches a part off; `Default` is all off (today's constant-cost, unbounded queue).
/// The Linux values (the `load` profile) and their sources are in docs/load-model.md.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadConfig {
    /// Softirq time a SYN or SYN-ACK costs on top of `service` (request-socket work).
    pub syn_cost: Duration,
    /// Softirq time a pure ACK, FIN-less ACK or RST costs on top of `service`.
    pub ack_cost: Duration,
    /// Softirq time a data or FIN segment costs on top of `service` (queueing to the socket).
    pub data_cost: Duration,
    /// NAPI budget in packets per poll (`net.core.netdev_budget`); 0: unlimited.
    pub napi_budget: u32,
    /// NAPI budget in time per poll (`net.core.netdev_budget_usecs`); `None`: unlimited.
    pub napi_budget_time: Option<Duration>,
    /// How long a poll that exhausted its budget waits for ksoftirqd to be scheduled.
    pub ksoftirqd_delay: Duration,
    /// RX ring length in packets (`ethtool -g`); a packet finding it full is dropped; 0: unbounded.
    pub rx_ring: u32,
    /// Background packets per second arriving at every host (an iperf3 UDP flood); 0: none.
    pub flood_rate: u64,
    /// Flows the flood is made of: each is hashed by RSS onto one RX queue.
    pub flood_flows: u32,
    /// Softirq time one flood packet costs.
    pub flood_cost: Duration,
    /// The host's CPUs ([`CpuConfig`]); all off but in the `cpu` profile.
    pub cpu: CpuConfig,
}

/// The host's CPUs: how many there are (RX queues share them), RPS steering to per-CPU
/// backlogs, and the application's own CPU time on its core. Zero or off switches a part off;
/// `Default` is all off (one CPU per RX queue, no RPS, no application cost). The Linux values
/// (the `cpu` profile) and their sources are in docs/load-model.md.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuConfig {
    /// CPUs per host; RX queue `q` is served by CPU `q % cpus` (0: one CPU per RX queue).
    pub cpus: u16,
    /// RPS (`/sys/class/net/*/queues/rx-*/rps_cpus`): the RX queue's CPU steers each packet by
    /// its flow hash to a CPU's backlog, whose softirq does the TCP work. Off in Linux.
    pub rps: bool,
    /// Packets one CPU's backlog holds before dropping (`net.core.netdev_max_backlog`); 0: unbounded.
    pub max_backlog: u32,
    /// The CPU each rank's process runs on.
    pub app_cpu: u16,
    /// CPU time of one socket call (accept, read, write, connect, close); 0: the application
    /// costs no CPU (today's model).
    pub syscall_cost: Duration,
    /// CPU time the rank's own code spends on each input it handles.
    pub app_work: Duration,
}

impl CpuConfig {
    /// Whether the application's CPU time is modelled.
    pub fn app_on(&self) -> bool {
        !self.syscall_cost.is_zero() || !self.app_work.is_zero()
    }

    /// Whether any part is on.
    pub fn on(&self) -> bool {
        *self != CpuConfig::default()
    }
}

impl LoadConfig {
    /// Whether any part that needs the loaded queue model (budget, ring, flood, CPUs) is on.
    pub fn queue_model_on(&self) -> bool {
        self.napi_budget > 0
            || self.napi_budget_time.is_some()
            || self.rx_ring > 0
            || self.flood_rate > 0
            || self.cpu.on()
    }
}

/// One forced RX-queue stall on `host`'s RX queue `queue`, written `HOST:QUEUE:START_US:DUR_US`
/// (the queue's CPU is busy during `[START, START + DUR)`, microseconds with up to three
/// decimals) or `HOST:QUEUE:pN:DUR_US` (packet N, counted from 0, reaching that queue finds
/// its CPU busy for DUR from when it could first be processed). Several are joined by `;`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ScriptedStall {
    /// Receiving host (rank number; the root shares rank 0's host).
    pub host: u32,
    /// RX queue on that host.
    pub queue: u16,
    /// What the stall is anchored to.
    pub at: StallAt,
    /// How long it lasts, in nanoseconds (at least 1).
    pub dur: u64,
}

/// What a [`ScriptedStall`] is anchored to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StallAt {
    /// An absolute simulated time, in nanoseconds.
    Time(u64),
    /// The n-th packet (from 0) reaching the queue: robust to earlier timing changes.
    Packet(u64),
}

impl ScriptedStall {
    /// Parses a `stalls=` value: `none`, or items joined by `;`.
    pub fn parse_list(s: &str) -> Result<Vec<ScriptedStall>, String> {
        if s.is_empty() || s == "none" {
            return Ok(Vec::new());
        }
        s.split(';').filter(|i| !i.is_empty()).map(ScriptedStall::parse_one).collect()
    }

    fn parse_one(item: &str) -> Result<ScriptedStall, String> {
        let parts: Vec<&str> = item.split(':').collect();
        let [host, queue, at, dur] = parts[..] else {
            return Err(format!("`{item}` is not HOST:QUEUE:START_US:DUR_US or HOST:QUEUE:pN:DUR_US"));
        };
        let host = host.parse::<u32>().map_err(|_| format!("`{item}`: host `{host}` is not a rank number"))?;
        let queue = queue
            .parse::<u16>()
            .ok()
            .filter(|q| *q < 128)
            .ok_or_else(|| format!("`{item}`: queue `{queue}` is not in 0..128"))?;
        let at = match at.strip_prefix('p') {
            Some(n) => StallAt::Packet(
                n.parse::<u64>().map_err(|_| format!("`{item}`: packet `{at}` is not p followed by a number"))?,
            ),
            None => {
                StallAt::Time(parse_micros(at).ok_or_else(|| format!("`{item}`: start `{at}` is not microseconds"))?)
            }
        };
        let dur = parse_micros(dur)
            .filter(|d| *d > 0)
            .ok_or_else(|| format!("`{item}`: duration `{dur}` is not a positive number of microseconds"))?;
        Ok(ScriptedStall { host, queue, at, dur })
    }

    /// Formats a list as `parse_list` reads it (`none` when empty).
    pub fn format_list(list: &[ScriptedStall]) -> String {
        if list.is_empty() {
            return "none".into();
        }
        list.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(";")
    }
}

impl fmt::Display for ScriptedStall {
    /// `HOST:QUEUE:START_US:DUR_US` or `HOST:QUEUE:pN:DUR_US`, exact to the nanosecond.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = match self.at {
            StallAt::Time(t) => show_micros(t),
            StallAt::Packet(n) => format!("p{n}"),
        };
        write!(f, "{}:{}:{at}:{}", self.host, self.queue, show_micros(self.dur))
    }
}

/// `12`, `12.5`, `12.345` microseconds as nanoseconds (at most three decimals).
fn parse_micros(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() || frac.len() > 3 || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole = int.parse::<u64>().ok()?.checked_mul(1000)?;
    let frac = if frac.is_empty() { 0 } else { frac.parse::<u64>().ok()? * 10u64.pow(3 - frac.len() as u32) };
    whole.checked_add(frac)
}

/// Nanoseconds as microseconds with only the decimals needed.
fn show_micros(ns: u64) -> String {
    let (us, rest) = (ns / 1000, ns % 1000);
    if rest == 0 {
        us.to_string()
    } else {
        format!("{us}.{}", format!("{rest:03}").trim_end_matches('0'))
    }
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            rx_queues: 1,
            service: Duration::from_micros(2),
            latency: Duration::from_micros(10),
            jitter: Duration::ZERO,
            stall_gap: None,
            stall_skew: 1.0,
            stall_xm: Duration::from_micros(50),
            stall_alpha: 1.2,
            stall_cap: Duration::from_millis(20),
            loss_good_spell: Duration::from_micros(1500),
            loss_bad_spell: Duration::from_micros(100),
            loss_good: 0.0,
            loss_bad: 0.0,
            backlog: 4096,
            syn_rto: Duration::from_secs(1),
            syn_retries: 6,
            synack_retries: 5,
            rto_min: Duration::from_millis(200),
            rto_max: Duration::from_secs(120),
            data_retries: 15,
            trace: true,
            stalls: Vec::new(),
            load: LoadConfig { flood_flows: 1, ..LoadConfig::default() },
        }
    }
}

/// The names `KernelConfig::profile` accepts.
pub const PROFILES: &[&str] = &["fifo", "rss", "lossy", "overflow", "swarm", "load", "cpu"];

/// `KernelConfig::profile` was given a name it does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown kernel profile `{0}`; accepted: fifo, rss, lossy, overflow, swarm, load, cpu")]
pub struct UnknownProfile(pub String);

/// A knob could not be set.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KnobError {
    /// No knob has this name.
    #[error("unknown kernel knob `{key}`; accepted: {accepted}")]
    UnknownKey {
        /// The name given.
        key: String,
        /// Every knob name, comma-separated.
        accepted: String,
    },
    /// The value does not parse or is out of range.
    #[error("bad value `{value}` for kernel knob `{key}`: expected {expected}")]
    BadValue {
        /// The knob.
        key: String,
        /// The value given.
        value: String,
        /// What the knob accepts.
        expected: &'static str,
    },
    /// A `stalls=` list does not parse.
    #[error("bad value `{value}` for kernel knob `stalls`: {why}; expected {expected}")]
    BadStalls {
        /// The value given.
        value: String,
        /// Which item is wrong and why.
        why: String,
        /// What the knob accepts.
        expected: &'static str,
    },
    /// A word of a case string is not `key=value`.
    #[error("kernel knob word `{0}` is not key=value")]
    NotKeyValue(String),
}

const DUR: &str = "a duration like 500ns, 2us, 1ms or 1s, at most 3600s";
const COST: &str = "a CPU cost like 500ns or 2us, at most 1ms (Linux's are microseconds; the load model walks every \
                    stall a longer one spans)";
const STALL: &str = "a duration > 0 like 20us, at most 3600s";
const GAP: &str = "a duration from 1us to 3600s, or off";
/// The largest per-packet or per-call CPU cost a knob takes (see [`COST`]).
pub const MAX_COST: Duration = Duration::from_millis(1);
const DUR_OR_OFF: &str = "a duration like 500us (at most 3600s), or off";
const PROB: &str = "a probability in [0, 1]";

const KNOBS: &[(&str, &str)] = &[
    ("rx_queues", "RX queues per host (RSS), 1..=128"),
    ("service", "softirq time per packet (duration, at most 1ms)"),
    ("latency", "one-way wire latency floor (duration)"),
    ("jitter", "extra one-way latency, uniform 0..=jitter (duration)"),
    ("stall_gap", "mean free time between RX-queue CPU stalls (duration >= 1us, or off)"),
    ("stall_skew", "per-queue load spread: gap x f, ln f uniform in [-ln skew, ln skew] (1..=1000)"),
    ("stall_xm", "shortest stall, Pareto scale (duration > 0)"),
    ("stall_alpha", "stall tail index, Pareto shape (> 0; smaller is heavier)"),
    ("stall_cap", "longest stall (duration > 0)"),
    ("loss_good_spell", "Gilbert-Elliott mean good spell, in time (duration > 0)"),
    ("loss_bad_spell", "Gilbert-Elliott mean bad spell (a congestion episode), in time (duration > 0)"),
    ("loss_good", "loss probability in the good state"),
    ("loss_bad", "loss probability in the bad state"),
    ("backlog", "accept-queue capacity per listener (>= 1)"),
    ("syn_rto", "first SYN/SYN-ACK retransmission timeout, doubling (duration)"),
    ("syn_retries", "SYN retransmissions before ETIMEDOUT (tcp_syn_retries)"),
    ("synack_retries", "SYN-ACK retransmissions before a half-open connection is dropped"),
    ("rto_min", "data retransmission timeout floor, doubling per timeout (duration)"),
    ("rto_max", "data retransmission timeout ceiling (duration)"),
    ("data_retries", "data retransmissions before abort (tcp_retries2)"),
    ("trace", "emit trace events: true or false"),
    ("syn_cost", "extra softirq time per SYN / SYN-ACK (duration <= 1ms; Linux ~4us, load profile)"),
    ("ack_cost", "extra softirq time per pure ACK or RST (duration <= 1ms; Linux ~1us)"),
    ("data_cost", "extra softirq time per data or FIN segment (duration <= 1ms; Linux ~2us)"),
    ("napi_budget", "packets per NAPI poll before deferring to ksoftirqd, 0 = off (netdev_budget, Linux 300)"),
    ("napi_budget_time", "time per NAPI poll before deferring, or off (netdev_budget_usecs, Linux 2ms)"),
    ("ksoftirqd_delay", "wait for ksoftirqd after a poll exhausts its budget (duration; ~1ms)"),
    ("rx_ring", "RX ring length in packets, full ring drops, 0 = unbounded (ethtool -g, mlx5 1024)"),
    ("flood_rate", "background UDP flood, packets per second per host, 0 = off (an iperf3 -u flood)"),
    ("flood_flows", "flows of the flood, each hashed by RSS onto one RX queue (>= 1; iperf3 -P)"),
    ("flood_cost", "softirq time per flood packet (duration <= 1ms; ~1.5us for UDP)"),
    ("cpus", "CPUs per host, RX queue q on CPU q % cpus, 0 = one CPU per queue (IRQ affinity spread)"),
    ("rps", "RPS: steer packets by flow hash to a CPU's backlog, on or off (rps_cpus, Linux off)"),
    ("max_backlog", "per-CPU backlog in packets, full drops, 0 = unbounded (netdev_max_backlog, Linux 1000)"),
    ("app_cpu", "CPU each rank's process runs on (cpu profile 0: RX queue 0's core)"),
    ("syscall_cost", "CPU time per accept/read/write/connect/close, 0 = off (duration <= 1ms; ~2us)"),
    ("app_work", "CPU time of the rank's own code per input it handles (duration <= 1ms; ~1us)"),
    ("stalls", "forced RX-queue stalls HOST:QUEUE:START_US:DUR_US or HOST:QUEUE:pN:DUR_US, `;`-joined, or none"),
];

impl KernelConfig {
    /// A named profile: `fifo` (one queue, no stalls, no loss: production without load), `rss`
    /// (eight queues with frequent heavy-tailed softirq stalls: the bug report's condition),
    /// `lossy` (rss plus bursty loss), `overflow` (rss with a backlog of 2), `swarm`
    /// (`KernelConfig::swarm(0)`; use [`KernelConfig::profile_for_seed`] to vary it) or `load`
    /// (the load-dependent receive path with Linux's values and a background flood) or `cpu`
    /// (`load` plus the host's CPUs: the application's CPU time on RX queue 0's core).
    pub fn profile(name: &str) -> Result<KernelConfig, UnknownProfile> {
        Self::profile_for_seed(name, 0)
    }

    /// Like [`KernelConfig::profile`], but `swarm` draws its knobs from `seed`.
    pub fn profile_for_seed(name: &str, seed: u64) -> Result<KernelConfig, UnknownProfile> {
        // Calibrated so that message B, sent one handshake after message A from the same
        // host, is accepted first in about 14% of seeds (see the kernel tests).
        let rss = || KernelConfig {
            rx_queues: 8,
            jitter: Duration::from_micros(2),
            stall_gap: Some(Duration::from_micros(100)),
            stall_skew: 1000.0,
            stall_xm: Duration::from_micros(50),
            stall_alpha: 0.8,
            stall_cap: Duration::from_millis(30),
            ..KernelConfig::default()
        };
        match name {
            "fifo" => Ok(KernelConfig::default()),
            "rss" => Ok(rss()),
            "lossy" => Ok(KernelConfig { loss_good: 0.001, loss_bad: 0.6, ..rss() }),
            "overflow" => Ok(KernelConfig { backlog: 2, ..rss() }),
            "swarm" => Ok(KernelConfig::swarm(seed)),
            "load" => Ok(KernelConfig::load()),
            "cpu" => Ok(KernelConfig::cpu()),
            other => Err(UnknownProfile(other.to_string())),
        }
    }

    /// Swarm testing: every adversary knob (queues, service, latency, jitter, stalls, loss,
    /// backlog) drawn from `seed`, each feature sometimes switched off entirely. TCP timer
    /// constants keep their Linux defaults.
    pub fn swarm(seed: u64) -> KernelConfig {
        let mut r = rng::stream(seed, Purpose::Swarm, 0, 0);
        let r = &mut r;
        let us = |x: f64| Duration::from_nanos((x * 1000.0) as u64);
        let mut cfg = KernelConfig {
            rx_queues: [1u16, 2, 4, 8, 16, 32][rng::below(r, 6) as usize],
            service: us(rng::log_uniform(r, 0.3, 8.0)),
            latency: us(rng::log_uniform(r, 2.0, 200.0)),
            ..KernelConfig::default()
        };
        cfg.jitter = if rng::chance(r, 0.3) {
            Duration::ZERO
        } else {
            us(rng::unit(r) * cfg.latency.as_nanos() as f64 / 1000.0)
        };
        // Ranges stay adversarial but allow progress: stalls up to 100 ms, mean loss below ~7%.
        if rng::chance(r, 0.8) {
            cfg.stall_gap = Some(us(rng::log_uniform(r, 20.0, 20_000.0)));
            cfg.stall_skew =
                if rng::chance(r, 0.3) { 1.0 } else { (rng::log_uniform(r, 1.0, 1000.0) * 10.0).round() / 10.0 };
            cfg.stall_xm = us(rng::log_uniform(r, 5.0, 200.0));
            cfg.stall_alpha = (rng::log_uniform(r, 0.7, 2.5) * 100.0).round() / 100.0;
            cfg.stall_cap = cfg.stall_xm.mul_f64(rng::log_uniform(r, 2.0, 1000.0)).min(Duration::from_millis(100));
        }
        if rng::chance(r, 0.5) {
            cfg.loss_good_spell = Duration::from_nanos(rng::log_uniform(r, 500e3, 50e6) as u64);
            cfg.loss_bad_spell = Duration::from_nanos(rng::log_uniform(r, 20e3, 1e6) as u64);
            cfg.loss_good = if rng::chance(r, 0.5) { 0.0 } else { rng::log_uniform(r, 1e-4, 2e-3) };
            cfg.loss_bad = rng::log_uniform(r, 0.1, 0.7);
        }
        cfg.backlog = [1u32, 2, 4, 16, 128, 4096][rng::below(r, 6) as usize];
        cfg
    }

    /// The `load` profile: eight RSS queues, per-kind TCP costs, NAPI's default budget and
    /// deferral, a 1024-slot ring, a 4-flow background flood, and only light random CPU
    /// stealing (the application's own time), so that queueing grows with traffic. The values
    /// and their sources are in docs/load-model.md.
    pub fn load() -> KernelConfig {
        KernelConfig {
            rx_queues: 8,
            service: Duration::from_micros(1),
            jitter: Duration::from_micros(2),
            stall_gap: Some(Duration::from_millis(1)),
            stall_skew: 10.0,
            stall_xm: Duration::from_micros(20),
            stall_alpha: 1.5,
            stall_cap: Duration::from_millis(2),
            load: LoadConfig {
                syn_cost: Duration::from_micros(4),
                ack_cost: Duration::from_micros(1),
                data_cost: Duration::from_micros(2),
                napi_budget: 300,
                napi_budget_time: Some(Duration::from_millis(2)),
                ksoftirqd_delay: Duration::from_millis(1),
                rx_ring: 1024,
                flood_rate: 600_000,
                flood_flows: 4,
                flood_cost: Duration::from_nanos(1500),
                cpu: CpuConfig::default(),
            },
            ..KernelConfig::default()
        }
    }

    /// The `cpu` profile: `load` with the host's CPUs modelled. Eight CPUs serve the eight RX
    /// queues (one each, as the default IRQ spread gives), RPS is off as in Linux (so the
    /// backlog is not on the path), and each rank's process runs on CPU 0, where its socket
    /// calls and its own work compete with queue 0's softirq. The values and their sources
    /// are in docs/load-model.md.
    pub fn cpu() -> KernelConfig {
        let mut cfg = KernelConfig::load();
        cfg.load.cpu = CpuConfig {
            cpus: 8,
            rps: false,
            max_backlog: 1000,
            app_cpu: 0,
            syscall_cost: Duration::from_micros(2),
            app_work: Duration::from_micros(1),
        };
        cfg
    }

    /// Every knob name with a one-line description.
    pub fn knobs() -> &'static [(&'static str, &'static str)] {
        KNOBS
    }

    /// Set one knob by name from its text form (as printed by `Display`).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), KnobError> {
        let bad =
            |expected: &'static str| KnobError::BadValue { key: key.to_string(), value: value.to_string(), expected };
        let dur = || parse_duration(value).ok_or_else(|| bad(DUR));
        let cost = || parse_duration(value).filter(|d| *d <= MAX_COST).ok_or_else(|| bad(COST));
        let stall = || parse_duration(value).filter(|d| !d.is_zero()).ok_or_else(|| bad(STALL));
        let prob = || value.parse::<f64>().ok().filter(|p| (0.0..=1.0).contains(p)).ok_or_else(|| bad(PROB));
        let small = |expected| value.parse::<u8>().map_err(|_| bad(expected));
        match key {
            "rx_queues" => {
                const E: &str = "an integer in 1..=128";
                self.rx_queues = value.parse::<u16>().ok().filter(|q| (1..=128).contains(q)).ok_or_else(|| bad(E))?;
            }
            "service" => self.service = cost()?,
            "latency" => self.latency = dur()?,
            "jitter" => self.jitter = dur()?,
            "stall_gap" => {
                self.stall_gap = if value == "off" {
                    None
                } else {
                    let at_least_1us = |d: &Duration| *d >= Duration::from_micros(1);
                    Some(parse_duration(value).filter(at_least_1us).ok_or_else(|| bad(GAP))?)
                }
            }
            "stall_skew" => {
                const E: &str = "a number in 1..=1000, e.g. 4";
                self.stall_skew =
                    value.parse::<f64>().ok().filter(|s| (1.0..=1000.0).contains(s)).ok_or_else(|| bad(E))?;
            }
            "stall_xm" => self.stall_xm = stall()?,
            "stall_alpha" => {
                const E: &str = "a number > 0, e.g. 1.2";
                self.stall_alpha =
                    value.parse::<f64>().ok().filter(|a| *a > 0.0 && a.is_finite()).ok_or_else(|| bad(E))?;
            }
            "stall_cap" => self.stall_cap = stall()?,
            "loss_good_spell" | "loss_bad_spell" => {
                let d = dur().and_then(|d| if d.is_zero() { Err(bad("a duration > 0, e.g. 100us")) } else { Ok(d) })?;
                match key {
                    "loss_good_spell" => self.loss_good_spell = d,
                    _ => self.loss_bad_spell = d,
                }
            }
            "loss_good" => self.loss_good = prob()?,
            "loss_bad" => self.loss_bad = prob()?,
            "backlog" => {
                const E: &str = "an integer >= 1";
                self.backlog = value.parse::<u32>().ok().filter(|b| *b >= 1).ok_or_else(|| bad(E))?;
            }
            "syn_rto" => {
                self.syn_rto =
                    dur().and_then(|d| if d.is_zero() { Err(bad("a duration > 0, e.g. 1s")) } else { Ok(d) })?
            }
            "syn_retries" => self.syn_retries = small("an integer in 0..=255")?,
            "synack_retries" => self.synack_retries = small("an integer in 0..=255")?,
            "rto_min" => {
                self.rto_min =
                    dur().and_then(|d| if d.is_zero() { Err(bad("a duration > 0, e.g. 200ms")) } else { Ok(d) })?
            }
            "rto_max" => {
                self.rto_max =
                    dur().and_then(|d| if d.is_zero() { Err(bad("a duration > 0, e.g. 120s")) } else { Ok(d) })?
            }
            "data_retries" => self.data_retries = small("an integer in 0..=255")?,
            "syn_cost" => self.load.syn_cost = cost()?,
            "ack_cost" => self.load.ack_cost = cost()?,
            "data_cost" => self.load.data_cost = cost()?,
            "napi_budget" => {
                const E: &str = "a number of packets, 0 for unlimited";
                self.load.napi_budget = value.parse::<u32>().map_err(|_| bad(E))?;
            }
            "napi_budget_time" => {
                self.load.napi_budget_time = if value == "off" {
                    None
                } else {
                    Some(parse_duration(value).filter(|d| !d.is_zero()).ok_or_else(|| bad(DUR_OR_OFF))?)
                }
            }
            "ksoftirqd_delay" => self.load.ksoftirqd_delay = dur()?,
            "rx_ring" => {
                const E: &str = "a number of packets, 0 for unbounded";
                self.load.rx_ring = value.parse::<u32>().map_err(|_| bad(E))?;
            }
            "flood_rate" => {
                const E: &str = "packets per second, at most 100000000, 0 for none";
                self.load.flood_rate = value.parse::<u64>().ok().filter(|r| *r <= 100_000_000).ok_or_else(|| bad(E))?;
            }
            "flood_flows" => {
                const E: &str = "an integer in 1..=1024";
                self.load.flood_flows =
                    value.parse::<u32>().ok().filter(|f| (1..=1024).contains(f)).ok_or_else(|| bad(E))?;
            }
            "flood_cost" => self.load.flood_cost = cost()?,
            "cpus" => {
                const E: &str = "an integer in 0..=1024, 0 for one CPU per RX queue";
                self.load.cpu.cpus = value.parse::<u16>().ok().filter(|c| *c <= 1024).ok_or_else(|| bad(E))?;
            }
            "rps" => {
                self.load.cpu.rps = match value {
                    "true" | "on" | "1" => true,
                    "false" | "off" | "0" => false,
                    _ => return Err(bad("on or off")),
                }
            }
            "max_backlog" => {
                const E: &str = "a number of packets, 0 for unbounded";
                self.load.cpu.max_backlog = value.parse::<u32>().map_err(|_| bad(E))?;
            }
            "app_cpu" => {
                const E: &str = "a CPU number in 0..=1023";
                self.load.cpu.app_cpu = value.parse::<u16>().ok().filter(|c| *c < 1024).ok_or_else(|| bad(E))?;
            }
            "syscall_cost" => self.load.cpu.syscall_cost = cost()?,
            "app_work" => self.load.cpu.app_work = cost()?,
            "stalls" => {
                const E: &str = "HOST:QUEUE:START_US:DUR_US or HOST:QUEUE:pN:DUR_US items joined by `;`, or none";
                self.stalls = ScriptedStall::parse_list(value).map_err(|why| KnobError::BadStalls {
                    value: value.to_string(),
                    why,
                    expected: E,
                })?;
            }
            "trace" => {
                self.trace = match value {
                    "true" | "on" | "1" => true,
                    "false" | "off" | "0" => false,
                    _ => return Err(bad("true or false")),
                }
            }
            _ => {
                return Err(KnobError::UnknownKey {
                    key: key.to_string(),
                    accepted: KNOBS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", "),
                })
            }
        }
        Ok(())
    }

    /// Checks what single knobs cannot: `rto_min <= rto_max`, and scripted stalls on hosts and
    /// queues that exist. `hosts` is the number of hosts of the run.
    pub fn validate(&self, hosts: u32) -> Result<(), String> {
        if self.rto_min > self.rto_max {
            return Err(format!("rto_min ({:?}) is above rto_max ({:?})", self.rto_min, self.rto_max));
        }
        let l = &self.load;
        let flood_share = l.flood_rate as f64 * l.flood_cost.as_secs_f64();
        if flood_share >= 1.0 {
            return Err(format!(
                "flood_rate x flood_cost = {flood_share:.3} of a CPU: the flood alone would saturate a queue \
                 (keep it below 1)"
            ));
        }
        if l.flood_rate > 0 && l.rx_ring == 0 {
            return Err("flood_rate needs a bounded ring (rx_ring > 0): behind a flood an unbounded RX queue \
                        can grow without limit"
                .into());
        }
        let c = &l.cpu;
        let cpus = if c.cpus == 0 { self.rx_queues.clamp(1, 128) } else { c.cpus };
        if c.app_on() && c.app_cpu >= cpus {
            return Err(format!("app_cpu {} does not exist: the host has CPUs 0..{cpus}", c.app_cpu));
        }
        if c.rps && l.flood_rate > 0 && c.max_backlog == 0 {
            return Err("flood_rate with rps=on needs a bounded backlog (max_backlog > 0)".into());
        }
        for st in &self.stalls {
            if st.host >= hosts || st.queue >= self.rx_queues {
                return Err(format!(
                    "stalls: host {} queue {} does not exist (hosts 0..{hosts}, rx_queues {})",
                    st.host, st.queue, self.rx_queues
                ));
            }
        }
        Ok(())
    }

    /// Apply whitespace-separated `key=value` words, in order.
    pub fn apply_words(&mut self, words: &str) -> Result<(), KnobError> {
        for word in words.split_whitespace() {
            let (k, v) = word.split_once('=').ok_or_else(|| KnobError::NotKeyValue(word.to_string()))?;
            self.set(k, v)?;
        }
        Ok(())
    }
}

impl fmt::Display for KernelConfig {
    /// Every knob as `key=value` words, parseable by `apply_words` (`stalls` only when set and
    /// the load knobs only when one differs from off, so traces of older cases do not change).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rx_queues={} service={} latency={} jitter={} stall_gap={} stall_skew={} stall_xm={} \
             stall_alpha={} stall_cap={} loss_good_spell={} loss_bad_spell={} loss_good={} loss_bad={} \
             backlog={} syn_rto={} syn_retries={} synack_retries={} rto_min={} rto_max={} \
             data_retries={} trace={}",
            self.rx_queues,
            show(self.service),
            show(self.latency),
            show(self.jitter),
            self.stall_gap.map_or_else(|| "off".to_string(), show),
            self.stall_skew,
            show(self.stall_xm),
            self.stall_alpha,
            show(self.stall_cap),
            show(self.loss_good_spell),
            show(self.loss_bad_spell),
            self.loss_good,
            self.loss_bad,
            self.backlog,
            show(self.syn_rto),
            self.syn_retries,
            self.synack_retries,
            show(self.rto_min),
            show(self.rto_max),
            self.data_retries,
            self.trace,
        )?;
        let l = &self.load;
        if *l != KernelConfig::default().load {
            write!(
                f,
                " syn_cost={} ack_cost={} data_cost={} napi_budget={} napi_budget_time={} ksoftirqd_delay={} \
                 rx_ring={} flood_rate={} flood_flows={} flood_cost={}",
                show(l.syn_cost),
                show(l.ack_cost),
                show(l.data_cost),
                l.napi_budget,
                l.napi_budget_time.map_or_else(|| "off".to_string(), show),
                show(l.ksoftirqd_delay),
                l.rx_ring,
                l.flood_rate,
                l.flood_flows,
                show(l.flood_cost),
            )?;
        }
        let c = &l.cpu;
        if c.on() {
            write!(
                f,
                " cpus={} rps={} max_backlog={} app_cpu={} syscall_cost={} app_work={}",
                c.cpus,
                if c.rps { "on" } else { "off" },
                c.max_backlog,
                c.app_cpu,
                show(c.syscall_cost),
                show(c.app_work),
            )?;
        }
        if !self.stalls.is_empty() {
            write!(f, " stalls={}", ScriptedStall::format_list(&self.stalls))?;
        }
        Ok(())
    }
}

/// A knob's duration in [`bootsim_core::duration`]'s grammar, at most [`MAX_KNOB_DURATION`].
fn parse_duration(s: &str) -> Option<Duration> {
    bootsim_core::duration::parse(s, MAX_KNOB_DURATION).ok()
}

/// The longest duration a knob takes: one hour of simulated time. Sums of such durations over a
/// whole run stay far from the 584 years a u64 of nanoseconds holds, so the simulated clock
/// cannot overflow.
pub const MAX_KNOB_DURATION: Duration = Duration::from_secs(3600);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_round_trips_through_its_words() {
        for name in PROFILES {
            for seed in 0..20 {
                let cfg = KernelConfig::profile_for_seed(name, seed).unwrap();
                let mut back = KernelConfig::default();
                back.apply_words(&cfg.to_string()).unwrap();
                assert_eq!(back, cfg, "{name} seed {seed}: {cfg}");
            }
        }
    }

    #[test]
    fn unknown_profile_names_itself() {
        let e = KernelConfig::profile("chaos").unwrap_err();
        assert!(e.to_string().contains("`chaos`") && e.to_string().contains("rss"));
    }

    #[test]
    fn knob_errors_name_the_key_and_what_is_accepted() {
        let mut cfg = KernelConfig::default();
        let e = cfg.set("stall_gapp", "1ms").unwrap_err().to_string();
        assert!(e.contains("`stall_gapp`") && e.contains("stall_gap,"), "{e}");
        let e = cfg.set("service", "fast").unwrap_err().to_string();
        assert!(e.contains("`service`") && e.contains("`fast`") && e.contains("2us"), "{e}");
        let e = cfg.set("loss_bad", "1.5").unwrap_err().to_string();
        assert!(e.contains("`loss_bad`") && e.contains("probability"), "{e}");
        let e = cfg.set("rx_queues", "0").unwrap_err().to_string();
        assert!(e.contains("`rx_queues`") && e.contains("1..=128"), "{e}");
        let e = cfg.apply_words("backlog").unwrap_err().to_string();
        assert!(e.contains("`backlog`"), "{e}");
        assert_eq!(cfg, KernelConfig::default(), "failed sets must not change anything");
    }

    #[test]
    fn knobs_are_documented_and_settable() {
        let cfg = KernelConfig::profile("cpu").unwrap();
        let words = cfg.to_string();
        for (key, doc) in KernelConfig::knobs() {
            assert!(!doc.is_empty());
            assert!(*key == "stalls" || words.contains(&format!("{key}=")), "{key} not printed");
        }
        assert_eq!(words.split_whitespace().count(), KernelConfig::knobs().len() - 1);
        let old = KernelConfig::profile("lossy").unwrap().to_string();
        assert!(!old.contains("flood_rate"), "profiles without the load path print as before: {old}");
        let mut scripted = cfg.clone();
        scripted.set("stalls", "0:4:10.153:48.5;1:7:p3:250").unwrap();
        let mut back = KernelConfig::default();
        back.apply_words(&scripted.to_string()).unwrap();
        assert_eq!(back, scripted);
        assert_eq!(back.stalls[0], ScriptedStall { host: 0, queue: 4, at: StallAt::Time(10_153), dur: 48_500 });
        assert_eq!(back.stalls[1], ScriptedStall { host: 1, queue: 7, at: StallAt::Packet(3), dur: 250_000 });
        assert!(scripted.to_string().ends_with(" stalls=0:4:10.153:48.5;1:7:p3:250"));
    }

    #[test]
    fn stall_list_errors_name_the_item() {
        let mut cfg = KernelConfig::default();
        for (value, needle) in [
            ("0:4:10", "`0:4:10` is not HOST:QUEUE:START_US:DUR_US"),
            ("0:4:px:10", "packet `px`"),
            ("x:4:10:5", "host `x`"),
            ("0:200:10:5", "queue `200`"),
            ("0:1:1.2345:5", "start `1.2345`"),
            ("0:1:10:0", "duration `0`"),
            ("0:1:10:-3", "duration `-3`"),
        ] {
            let e = cfg.set("stalls", value).unwrap_err().to_string();
            assert!(e.contains(needle) && e.contains("`stalls`"), "{value}: {e}");
        }
        cfg.set("stalls", "none").unwrap();
        assert!(cfg.stalls.is_empty());
    }

    #[test]
    fn load_knobs_are_validated() {
        let mut cfg = KernelConfig::default();
        let e = cfg.set("flood_flows", "0").unwrap_err().to_string();
        assert!(e.contains("`flood_flows`") && e.contains("1..=1024"), "{e}");
        let e = cfg.set("napi_budget", "-1").unwrap_err().to_string();
        assert!(e.contains("`napi_budget`"), "{e}");
        let e = cfg.set("napi_budget_time", "0").unwrap_err().to_string();
        assert!(e.contains("or off"), "{e}");
        assert_eq!(cfg, KernelConfig::default());
        cfg.apply_words("flood_rate=100000").unwrap();
        assert!(cfg.validate(2).unwrap_err().contains("rx_ring"));
        cfg.apply_words("rx_ring=64 flood_rate=1000000 flood_cost=1us").unwrap();
        let e = cfg.validate(2).unwrap_err();
        assert!(e.contains("saturate"), "{e}");
        cfg.set("flood_cost", "900ns").unwrap();
        assert!(cfg.validate(2).is_ok());
        assert!(cfg.load.queue_model_on() && !KernelConfig::default().load.queue_model_on());
    }

    #[test]
    fn durations_parse_in_every_unit() {
        assert_eq!(parse_duration("500ns"), Some(Duration::from_nanos(500)));
        assert_eq!(parse_duration("2us"), Some(Duration::from_micros(2)));
        assert_eq!(parse_duration("2µs"), Some(Duration::from_micros(2)));
        assert_eq!(parse_duration("1.5ms"), Some(Duration::from_micros(1500)));
        assert_eq!(parse_duration("3s"), Some(Duration::from_secs(3)));
        assert_eq!(parse_duration("7"), None);
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_duration("1h"), None);
        assert_eq!(parse_duration("-1ms"), None);
    }

    #[test]
    fn swarm_varies_with_the_seed() {
        let configs: Vec<_> = (0..32).map(KernelConfig::swarm).collect();
        assert_eq!(KernelConfig::swarm(3), configs[3]);
        assert!(configs.iter().any(|c| c.stall_gap.is_none()));
        assert!(configs.iter().any(|c| c.stall_gap.is_some()));
        assert!(configs.iter().any(|c| c.loss_bad > 0.0));
        assert!(configs.iter().any(|c| c.rx_queues == 1));
        assert!(configs.iter().any(|c| c.backlog <= 2));
    }
}
