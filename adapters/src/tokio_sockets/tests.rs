//! Loopback tests: 8 and 32 ranks and the root as tasks of one runtime, every preset variant
//! and workload; strangers on every listener during a bootstrap.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bootsim_core::codec::WireError;
use bootsim_nvshmem::workload::{build_op, expected_result, Workload};
use bootsim_nvshmem::OpKind;
use bootsim_nvshmem::{Event, Limits, Listener, RankConfig, RootConfig, Transport, UniqueId, Variant, PRESETS};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use super::{real_limits, TokioNet};
use crate::nvshmem::{run_rank, run_root_notify, DriverError, RankRun};
use bootsim_core::seam::ListenerKey;
use bootsim_driver::{Backend, DrainReport};

/// The driver's listener key as NVSHMEM's (these backends serve NVSHMEM's nodes only).
pub(super) fn nvshmem_listener(which: impl ListenerKey) -> Listener {
    *(&which as &dyn std::any::Any).downcast_ref::<Listener>().expect("NVSHMEM's listener key")
}

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Runs `nranks` ranks and the root on loopback; returns each rank's result.
async fn world(
    nranks: u32,
    variant: Variant,
    workload: &Workload,
    op_timeout: Duration,
    start: u32,
) -> Vec<Result<RankRun, DriverError>> {
    let limits = real_limits(op_timeout);
    let net = TokioNet::new(LOOPBACK);
    let placeholder = UniqueId { version: variant.uid_version(), root: (LOOPBACK, 0).into(), magic: 0xb007_5111 };
    let (tx, rx) = oneshot::channel();
    let root =
        tokio::spawn(run_root_notify(net.clone(), RootConfig { uid: placeholder, nranks: None, limits }, Some(tx)));
    let uid = UniqueId { root: rx.await.expect("root listens"), ..placeholder };
    let specs = workload.ops(0);
    let ranks: Vec<_> = (start..nranks)
        .map(|r| {
            let ops = specs.iter().enumerate().map(|(i, s)| build_op(*s, 0, i as u32, r, nranks)).collect();
            let cfg = RankConfig { rank: r, nranks, uid, variant, limits };
            tokio::spawn(run_rank(net.clone(), cfg, ops))
        })
        .collect();
    let mut out = Vec::new();
    for r in ranks {
        out.push(r.await.expect("rank task"));
    }
    root.abort();
    out
}

/// The integrity oracle on one rank's run: init first, then every op's expected bytes.
fn verify(name: &str, workload: &Workload, n: u32, r: u32, res: Result<RankRun, DriverError>) -> RankRun {
    let specs = workload.ops(0);
    let run = res.unwrap_or_else(|e| panic!("{name} {}: rank {r}: {e}", workload.name()));
    assert_eq!(run.completions.len(), specs.len() + 1, "{name}: rank {r}");
    assert_eq!(run.completions[0].kind, OpKind::Init);
    for (i, (spec, c)) in specs.iter().zip(&run.completions[1..]).enumerate() {
        let got = c.result.as_ref().unwrap();
        if let Some(want) = expected_result(*spec, 0, i as u32, r, n) {
            assert_eq!(got, &want, "{name}: rank {r} op {i} ({spec:?}) delivered wrong bytes");
        }
    }
    run
}

/// `n` ranks run `workload` under every preset, one world after the other.
async fn check(n: u32, workload: Workload) {
    let started = std::time::Instant::now();
    for name in PRESETS {
        let variant = Variant::preset(name).unwrap();
        let t0 = std::time::Instant::now();
        let results = world(n, variant, &workload, Duration::from_secs(10), 0).await;
        let (mut drained, mut gave_up) = (0, 0);
        for (r, res) in results.into_iter().enumerate() {
            for e in &verify(name, &workload, n, r as u32, res).events {
                match e {
                    Event::DrainCompleted { .. } => drained += 1,
                    Event::DrainGaveUp { .. } => gave_up += 1,
                    _ => {}
                }
            }
        }
        // The real SIOCOUTQ drain: loopback peers' kernels ACK at once, far within the bound.
        assert_eq!(gave_up, 0, "{name}: a drain gave up on loopback");
        assert_eq!(drained > 0, variant.drain.is_some(), "{name}: {drained} drains completed");
        eprintln!("{n} ranks {} {name}: {} ms", workload.name(), t0.elapsed().as_millis());
    }
    eprintln!("{n} ranks {} every preset: {} ms", workload.name(), started.elapsed().as_millis());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deepep_on_loopback_under_every_preset() {
    check(8, Workload::Deepep { qps: 24 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nvshmem_init_on_loopback_under_every_preset() {
    check(8, Workload::NvshmemInit { qps: 2 }).await;
}

// 32 ranks, every workload (the parameters `bootsim smoke` uses), every preset.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_ranks_deepep_under_every_preset() {
    check(32, Workload::Deepep { qps: 24 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_ranks_nvshmem_init_under_every_preset() {
    check(32, Workload::NvshmemInit { qps: 2 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_ranks_qp_create_under_every_preset() {
    check(32, Workload::QpCreate { k: 4 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_ranks_churn_under_every_preset() {
    check(32, Workload::Churn { len: 12 }).await;
}

#[tokio::test]
async fn a_missing_rank_times_out_naming_rank_and_step() {
    // Rank 0 never starts: the others wait for the root's successor message and time out.
    let workload = Workload::Deepep { qps: 1 };
    let results = world(3, Variant::PR97, &workload, Duration::from_millis(300), 1).await;
    for (i, res) in results.into_iter().enumerate() {
        let msg = res.expect_err("must time out").to_string();
        assert!(msg.starts_with(&format!("rank {}: init: no progress for 300ms", i + 1)), "{msg}");
        assert!(msg.contains("waiting for the root"), "{msg}");
    }
}

// Strangers on every listener during a bootstrap.

/// What a stranger sends (a half-open one sends nothing).
type Stranger = (&'static str, Vec<u8>);

/// The strangers a [`StrayNet`] connected, and where.
#[derive(Default)]
struct Strays {
    /// Every stranger's connection, kept open until the test ends.
    conns: Vec<(Listener, &'static str, TcpStream)>,
    /// Their local addresses, to tell them from the session's connections at accept.
    addrs: BTreeSet<SocketAddr>,
    /// Peer listeners, and whether they got their second wave.
    peers: BTreeMap<SocketAddr, bool>,
}

/// [`TokioNet`] that connects strangers to every listener it opens: the first wave as soon as
/// the listener is open, before anyone learns its address (so they are first in its accept
/// queue); on a rank's peer listener, a second wave once the ring predecessor's connection is
/// accepted (so the collectives' receives meet them before any message).
#[derive(Clone)]
struct StrayNet {
    inner: TokioNet,
    magic: u64,
    /// Also put the stalling strangers (half-open, half header) in the peer listener's first
    /// wave, met by the ring connect of init.
    stall_ring_connect: bool,
    strays: Arc<Mutex<Strays>>,
}

/// A frame of raw bytes: an i32 length then the payload (NVSHMEM's framing).
fn frame(len: i32, payload: &[u8]) -> Vec<u8> {
    let mut b = len.to_le_bytes().to_vec();
    b.extend_from_slice(payload);
    b
}

impl StrayNet {
    fn new(magic: u64) -> Self {
        StrayNet { inner: TokioNet::new(LOOPBACK), magic, stall_ring_connect: false, strays: Arc::default() }
    }

    /// The strangers for one listener: four that are wrong from their first bytes, then two
    /// that stall (half-open, half a header).
    fn strangers(&self, which: Listener) -> Vec<Stranger> {
        let preamble = |magic: u64, kind: i32| [magic.to_le_bytes().as_slice(), &kind.to_le_bytes()].concat();
        let good = preamble(self.magic, 1);
        let oversize = match which {
            // The root reads the version frame after the preamble: the session's own magic gets
            // there, and the length is refused before any allocation.
            Listener::Rendezvous => [good.clone(), frame(i32::MAX, &[])].concat(),
            // A rank trusts a preamble with the session's magic (it is the secret), so the
            // oversize header carries a stranger's magic.
            _ => [preamble(self.magic ^ 0xdead, 1), frame(i32::MAX, &[])].concat(),
        };
        vec![
            ("garbage", vec![0xa5; 40]),
            ("wrong magic", [preamble(self.magic ^ 1, 1), frame(4, &0i32.to_le_bytes())].concat()),
            ("wrong type", preamble(self.magic, 7)),
            ("oversize length", oversize),
            ("half-open", Vec::new()),
            ("half header", good[..6].to_vec()),
        ]
    }

    /// Connects `strangers` to `addr` one after the other; each is established (so queued for
    /// accept, in this order) and its bytes written before the next.
    async fn connect(&self, which: Listener, addr: SocketAddr, strangers: Vec<Stranger>) -> std::io::Result<()> {
        for (what, bytes) in strangers {
            let mut s = TcpStream::connect(addr).await?;
            s.write_all(&bytes).await?;
            let mut strays = self.strays.lock().unwrap();
            strays.addrs.insert(s.local_addr()?);
            strays.conns.push((which, what, s));
        }
        Ok(())
    }
}

impl Backend for StrayNet {
    type Listener = TcpListener;
    type Stream = TcpStream;
    type Reader = OwnedReadHalf;
    type Writer = OwnedWriteHalf;

    async fn listen<L: ListenerKey + Send>(&self, key: L) -> std::io::Result<(TcpListener, SocketAddr)> {
        let (l, addr) = self.inner.listen(key).await?;
        let which = nvshmem_listener(key);
        let mut first = self.strangers(which);
        if which == Listener::Peers {
            self.strays.lock().unwrap().peers.insert(addr, false);
            if !self.stall_ring_connect {
                first.truncate(4);
            }
        }
        self.connect(which, addr, first).await?;
        Ok((l, addr))
    }

    async fn accept(&self, l: &TcpListener) -> std::io::Result<(TcpStream, SocketAddr)> {
        let (s, from) = self.inner.accept(l).await?;
        let addr = l.local_addr()?;
        let second_wave = {
            let mut strays = self.strays.lock().unwrap();
            let member = !strays.addrs.contains(&from);
            match strays.peers.get_mut(&addr) {
                Some(done) if member && !*done => {
                    *done = true;
                    true
                }
                _ => false,
            }
        };
        if second_wave {
            self.connect(Listener::Peers, addr, self.strangers(Listener::Peers)).await?;
        }
        Ok((s, from))
    }

    async fn connect(&self, addr: SocketAddr) -> std::io::Result<TcpStream> {
        self.inner.connect(addr).await
    }

    fn split(&self, s: TcpStream) -> (OwnedReadHalf, OwnedWriteHalf) {
        self.inner.split(s)
    }

    async fn drain(&self, w: &OwnedWriteHalf, timeout: Duration) -> DrainReport {
        self.inner.drain(w, timeout).await
    }
}

/// `n` ranks and the root of `name` on `net`, header timeout 300 ms; returns each rank's run
/// (oracle-checked; the root must succeed).
async fn stray_world(net: StrayNet, name: &'static str, n: u32, workload: Workload) -> Vec<RankRun> {
    let variant = Variant::preset(name).unwrap();
    let limits = Limits { header_timeout: Some(Duration::from_millis(300)), ..real_limits(Duration::from_secs(10)) };
    let placeholder = UniqueId { version: variant.uid_version(), root: (LOOPBACK, 0).into(), magic: net.magic };
    let (tx, rx) = oneshot::channel();
    let root_cfg = RootConfig { uid: placeholder, nranks: None, limits };
    let root = tokio::spawn(run_root_notify(net.clone(), root_cfg, Some(tx)));
    let uid = UniqueId { root: rx.await.expect("root listens"), ..placeholder };
    let specs = workload.ops(0);
    let ranks: Vec<_> = (0..n)
        .map(|r| {
            let ops = specs.iter().enumerate().map(|(i, s)| build_op(*s, 0, i as u32, r, n)).collect();
            tokio::spawn(run_rank(net.clone(), RankConfig { rank: r, nranks: n, uid, variant, limits }, ops))
        })
        .collect();
    let mut runs = Vec::new();
    for (r, h) in ranks.into_iter().enumerate() {
        runs.push(verify(name, &workload, n, r as u32, h.await.expect("rank task")));
    }
    root.await.expect("root task").unwrap_or_else(|e| panic!("{name}: root: {e}"));
    runs
}

/// (bad magic, wrong type, other strays, stalled) in a rank's events.
fn stray_counts(run: &RankRun) -> (usize, usize, usize, usize) {
    let (mut magic, mut kind, mut other, mut stalled) = (0, 0, 0, 0);
    for e in &run.events {
        match e {
            Event::StrayDropped { error: WireError::BadMagic { .. }, .. } => magic += 1,
            Event::StrayDropped { error: WireError::BadType { got: 7, .. }, .. } => kind += 1,
            Event::StrayDropped { .. } => other += 1,
            // At the header timeout, or earlier: an init pool drops its strangers once the
            // step took the honest connection.
            Event::StalledDropped { after, .. } => {
                assert!(*after <= Duration::from_millis(300), "{after:?}");
                stalled += 1;
            }
            _ => {}
        }
    }
    (magic, kind, other, stalled)
}

/// Reads `s` to its end: `Ok(())` on EOF, the error otherwise (a reset: never accepted).
async fn read_to_eof(s: &mut TcpStream) -> std::io::Result<()> {
    let mut buf = [0u8; 256];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await? {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(e),
        }
    }
}

#[tokio::test]
async fn strangers_on_every_listener_are_dropped_and_logged_without_disturbing_the_bootstrap() {
    let started = std::time::Instant::now();
    let worlds: Vec<_> = PRESETS
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let net = StrayNet::new(0x5eed_b007_0000_0000 + i as u64);
            (name, net.clone(), tokio::spawn(stray_world(net, name, 4, Workload::Deepep { qps: 24 })))
        })
        .collect();
    for (name, net, w) in worlds {
        let runs = w.await.expect("world");
        let mut strays = std::mem::take(&mut net.strays.lock().unwrap().conns);
        // The root's listener: 6; each rank's root listener: 6, peer listener: 4 + 6.
        assert_eq!(strays.len(), 6 + 4 * (6 + 4 + 6), "{name}");
        let per_message = Variant::preset(name).unwrap().transport == Transport::PerMessage;
        for (r, run) in runs.iter().enumerate() {
            let (magic, kind, other, stalled) = stray_counts(run);
            // Garbage, wrong magic and oversize (with a stranger's magic) are bad magic, then a
            // wrong type: on the root listener and in both waves on the peer listener.
            assert_eq!((magic, kind, other), (9, 3, 0), "{name}: rank {r}: {:#?}", run.events);
            if per_message {
                // Half-open and half header on the root listener, dropped once the root's
                // connection came; the second wave's two wait in the read-ahead pool while the
                // receives take the messages whose headers came, and are closed at the end.
                assert_eq!(stalled, 2, "{name}: rank {r}: {:#?}", run.events);
            } else {
                // Eager transports take the second wave beside the operations: its two stalls
                // are dropped only if the rank is still running 300 ms later.
                assert!((2..=4).contains(&stalled), "{name}: rank {r}: {:#?}", run.events);
            }
        }
        // Every stranger was accepted and closed by the bootstrap (EOF), none left in an accept
        // queue until its listener closed (a reset). The root only logs its drops, so this is
        // how its six are checked: garbage, wrong magic, wrong type and an oversize version
        // length are strays, half-open and half header stalls; the root closes each as it
        // drops it (and logs it).
        for (which, what, s) in &mut strays {
            let end = read_to_eof(s).await;
            assert!(end.is_ok(), "{name}: {what} on {which:?} was not taken by the bootstrap: {end:?}");
        }
    }
    eprintln!("strangers, every preset at once: {} ms", started.elapsed().as_millis());
}

/// A stranger that stalls on a rank's peer listener while init's ring connect accepts there.
///
/// Regression: dropping the stalled stranger put init back to `Wait::Start`, which
/// `step_ring_connect` took as "dial the successor" a second time; the ring data went on a
/// connection the successor never accepted and init hung until the op timeout.
#[tokio::test]
async fn a_stranger_stalling_during_ring_connect_is_dropped_and_init_completes() {
    let net = StrayNet { stall_ring_connect: true, ..StrayNet::new(0x5eed_b007_0000_1000) };
    let runs = stray_world(net, "nvshmem-3.7", 2, Workload::Deepep { qps: 1 }).await;
    for run in &runs {
        // Root listener: 4 + 2 stalls; peer listener: 4 + 2 stalls in each wave. The init
        // pools drop their stalls once the step took the honest connection; the second wave's
        // wait in the read-ahead pool and are closed at the end, not waited for.
        assert_eq!(stray_counts(run), (9, 3, 0, 4), "{:#?}", run.events);
    }
}

#[tokio::test]
async fn a_failed_rank_stops_dialling_and_does_not_wait_the_flush_bound_for_it() {
    // Rank 1 dials a root that refuses (NVSHMEM retries refused connects for a long time);
    // after the 1 s op timeout the rank fails, and the dialling writer is abandoned at once
    // instead of being waited for up to the 5 s flush bound.
    let refused = std::net::TcpListener::bind((LOOPBACK, 0)).unwrap();
    let root = refused.local_addr().unwrap();
    drop(refused);
    let variant = Variant::preset("nvshmem-3.4").unwrap();
    let uid = UniqueId { version: variant.uid_version(), root, magic: 7 };
    let limits = real_limits(Duration::from_secs(1));
    let cfg = RankConfig { rank: 1, nranks: 2, uid, variant, limits };
    let started = tokio::time::Instant::now();
    let r = run_rank(TokioNet::new(LOOPBACK), cfg, Vec::new()).await;
    let took = started.elapsed();
    assert!(matches!(r, Err(DriverError::Failed { .. })), "{r:?}");
    assert!(took < Duration::from_secs(4), "the failed rank ended after {took:?}");
}
