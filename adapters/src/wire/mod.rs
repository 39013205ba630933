//! A self-contained userspace "wire" between network namespaces: the real Linux kernel as
//! the accept-order adversary.
//!
//! [`Wire::start`] puts hosts 1..=N (10.213.0.1 .. 10.213.0.N, one /24) each in a fresh
//! network namespace with a TUN device, and forwards IP packets between the TUN fds by
//! destination address, applying a [`Policy`] that can hold a TCP connection's
//! handshake-completing packet back so the receiver's kernel accepts a later connection
//! first. Closures run inside a host's namespace with [`Wire::spawn`]. Needs
//! CAP_NET_ADMIN (and CAP_SYS_ADMIN for `unshare`) and `/dev/net/tun`; see
//! [`wire_available`]. Namespaces and devices vanish with their threads: nothing outside
//! them is touched and nothing needs cleaning up.

mod error;
mod flow;
mod forwarder;
pub mod netns;
pub mod packet;
mod policy;
mod tracker;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tracker_tests;

use std::net::Ipv4Addr;
use std::sync::{mpsc, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::Instant;

pub use error::WireError;
pub use flow::{CapturedStream, FlowInfo, ReleaseReason, WireCounters, WireDecision, WireEvent, WireReport};
pub use policy::{DelayModel, Policy, PolicyParseError, PolicySpec, Select, DEFAULT_FALLBACK, MAX_DELAY};

use forwarder::Forwarder;
use netns::{spawn_in_netns, NetnsConfig, NetnsThread};
use tracker::Tracker;

/// The first three octets of every host address.
pub const SUBNET: [u8; 3] = [10, 213, 0];
/// The prefix length of the hosts' subnet.
pub const PREFIX_LEN: u8 = 24;
/// The most hosts one wire can have.
pub const MAX_HOSTS: u8 = 254;

/// The address of host `host` (1-based): 10.213.0.`host`.
pub fn host_addr(host: u8) -> Ipv4Addr {
    let [a, b, c] = SUBNET;
    Ipv4Addr::new(a, b, c, host)
}

type Job = Box<dyn FnOnce() + Send>;

struct HostWorker {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<NetnsThread<()>>,
}

/// A running wire and its hosts. Join the [`HostTask`]s, then [`Wire::shutdown`].
pub struct Wire {
    hosts: Vec<HostWorker>,
    forwarder: Forwarder,
}

/// A closure running in one host's namespace, on its own thread.
#[derive(Debug)]
pub struct HostTask<R> {
    host: u8,
    handle: JoinHandle<R>,
}

impl<R> HostTask<R> {
    /// The host it runs on.
    pub fn host(&self) -> u8 {
        self.host
    }

    /// Waits for the closure and returns its result.
    pub fn join(self) -> Result<R, WireError> {
        let host = self.host;
        self.handle.join().map_err(|_| WireError::Panicked(format!("a task on host {host}")))
    }
}

impl Wire {
    /// Sets up `hosts` namespaces (1..=254) and starts forwarding between them under `policy`.
    pub fn start(hosts: u8, policy: Policy) -> Result<Wire, WireError> {
        Self::start_with(hosts, policy, false)
    }

    /// As [`Wire::start`], and records each connection's client-to-server bytes in the
    /// report's `streams` (what each sender put on the wire).
    pub fn start_capturing(hosts: u8, policy: Policy) -> Result<Wire, WireError> {
        Self::start_with(hosts, policy, true)
    }

    fn start_with(hosts: u8, policy: Policy, capture: bool) -> Result<Wire, WireError> {
        if !(1..=MAX_HOSTS).contains(&hosts) {
            return Err(WireError::Config(format!("{hosts} hosts: need 1..={MAX_HOSTS}")));
        }
        let mut workers = Vec::with_capacity(usize::from(hosts));
        let mut tuns = Vec::with_capacity(usize::from(hosts));
        for host in 1..=hosts {
            let cfg = NetnsConfig { ifname: format!("wire{host}"), addr: host_addr(host), prefix_len: PREFIX_LEN };
            let (tx, rx) = mpsc::channel::<Job>();
            let (tun, thread) = spawn_in_netns(cfg, move || rx.into_iter().for_each(|job| job()))?;
            tuns.push(tun);
            workers.push(HostWorker { jobs: Some(tx), thread: Some(thread) });
        }
        let mut tracker = Tracker::new(policy, SUBNET, hosts, Instant::now());
        if capture {
            tracker = tracker.capturing();
        }
        let forwarder = Forwarder::spawn(tuns, tracker)?;
        Ok(Wire { hosts: workers, forwarder })
    }

    /// How many hosts the wire has.
    pub fn hosts(&self) -> u8 {
        self.hosts.len() as u8
    }

    /// Runs `f` on a new thread inside host `host`'s namespace.
    pub fn spawn<F, R>(&self, host: u8, f: F) -> Result<HostTask<R>, WireError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let worker =
            usize::from(host).checked_sub(1).and_then(|i| self.hosts.get(i)).ok_or(WireError::NoSuchHost(host))?;
        let (reply, answer) = mpsc::sync_channel(1);
        let job: Job = Box::new(move || {
            let spawned = thread::Builder::new().name(format!("host{host}-task")).spawn(f);
            let _ = reply.send(spawned);
        });
        let gone = || WireError::Panicked(format!("host {host}'s namespace thread"));
        worker.jobs.as_ref().ok_or_else(gone)?.send(job).map_err(|_| gone())?;
        let handle = answer
            .recv()
            .map_err(|_| gone())?
            .map_err(|e| WireError::io(format!("spawning a task on host {host}"), e))?;
        Ok(HostTask { host, handle })
    }

    /// Stops forwarding (anything still held is dropped and logged), lets the namespaces go
    /// and returns the wire's record.
    pub fn shutdown(mut self) -> Result<WireReport, WireError> {
        let report = self.forwarder.stop();
        self.release_hosts()?;
        report
    }

    fn release_hosts(&mut self) -> Result<(), WireError> {
        for w in &mut self.hosts {
            w.jobs = None;
        }
        let mut result = Ok(());
        for w in &mut self.hosts {
            if let Some(t) = w.thread.take() {
                if let Err(e) = t.join() {
                    result = Err(e);
                }
            }
        }
        result
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        let _ = self.release_hosts();
    }
}

/// Whether this process can run a wire: `Err` says why not (no `/dev/net/tun`, missing
/// capabilities, or the setup of a trial namespace failed). Checked once per process.
pub fn wire_available() -> Result<(), String> {
    static CHECK: OnceLock<Result<(), String>> = OnceLock::new();
    CHECK.get_or_init(check_wire).clone()
}

fn check_wire() -> Result<(), String> {
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Err("/dev/net/tun does not exist".into());
    }
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| format!("reading /proc/self/status: {e}"))?;
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .ok_or("no CapEff line in /proc/self/status")?;
    for (bit, name) in [(12, "CAP_NET_ADMIN"), (21, "CAP_SYS_ADMIN")] {
        if cap_eff & (1 << bit) == 0 {
            return Err(format!("the process lacks {name} (CapEff {cap_eff:#x})"));
        }
    }
    let cfg = NetnsConfig { ifname: "wirecheck".into(), addr: host_addr(1), prefix_len: PREFIX_LEN };
    let (_tun, thread) = spawn_in_netns(cfg, || ()).map_err(|e| format!("trial namespace: {e}"))?;
    thread.join().map_err(|e| e.to_string())
}
