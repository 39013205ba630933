//! A flood of idle connections on the peer listeners of ranks waiting in a collective: `seq`
//! and `persistent` accept every connection as it comes, so without a bound each stranger
//! holds a descriptor for the header timeout (640 in 4 s were seen). Read-ahead bounds them.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bootsim_nvshmem::{Listener, Op, RankConfig, RootConfig, UniqueId, Variant};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use super::tests::nvshmem_listener;
use super::{real_limits, TokioNet, DEFAULT_READ_AHEAD};
use crate::nvshmem::{run_rank, run_root_notify};
use bootsim_core::seam::ListenerKey;
use bootsim_driver::{Backend, DrainReport};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// Idle strangers per peer listener.
const FLOOD: usize = 300;
/// How long the slow rank holds its barrier messages (the flood comes meanwhile).
const HOLD: Duration = Duration::from_secs(3);

/// [`TokioNet`] that records every peer listener and, for the slow rank, holds each connect to
/// a peer listener after the first (the ring's) for a while: the others wait in the barrier.
#[derive(Clone)]
struct SlowNet {
    inner: TokioNet,
    peers: Arc<Mutex<Vec<SocketAddr>>>,
    slow: bool,
    dialed: Arc<AtomicUsize>,
}

impl Backend for SlowNet {
    type Listener = TcpListener;
    type Stream = TcpStream;
    type Reader = OwnedReadHalf;
    type Writer = OwnedWriteHalf;

    async fn listen<L: ListenerKey + Send>(&self, key: L) -> std::io::Result<(TcpListener, SocketAddr)> {
        let (l, addr) = self.inner.listen(key).await?;
        if nvshmem_listener(key) == Listener::Peers {
            self.peers.lock().unwrap().push(addr);
        }
        Ok((l, addr))
    }

    async fn accept(&self, l: &TcpListener) -> std::io::Result<(TcpStream, SocketAddr)> {
        self.inner.accept(l).await
    }

    async fn connect(&self, addr: SocketAddr) -> std::io::Result<TcpStream> {
        let to_peer = self.peers.lock().unwrap().contains(&addr);
        if self.slow && to_peer && self.dialed.fetch_add(1, Ordering::SeqCst) > 0 {
            tokio::time::sleep(HOLD).await;
        }
        self.inner.connect(addr).await
    }

    fn split(&self, s: TcpStream) -> (OwnedReadHalf, OwnedWriteHalf) {
        self.inner.split(s)
    }

    async fn drain(&self, w: &OwnedWriteHalf, timeout: Duration) -> DrainReport {
        self.inner.drain(w, timeout).await
    }
}

/// Accepted connections on `ports` this process holds: its sockets whose local port is one of
/// them and which have a peer (a listener has none; the strangers' own ends have ephemeral
/// local ports). Other tests' sockets in this process do not count.
fn accepted_on(ports: &[u16]) -> usize {
    use std::os::fd::FromRawFd;
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return 0 };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&fd| {
            // SAFETY: the descriptor is only borrowed (never closed: ManuallyDrop) for two
            // getsockname/getpeername calls, which fail harmlessly on anything but a socket.
            let s = std::mem::ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(fd) });
            let local = s.local_addr().ok().map(|a| a.port());
            local.is_some_and(|p| ports.contains(&p)) && s.peer_addr().is_ok()
        })
        .count()
}

/// Three ranks run a barrier while every peer listener gets `FLOOD` idle connections; returns
/// the most connections the ranks held accepted on their peer listeners at once.
async fn flooded_barrier(name: &str) -> usize {
    let variant = Variant::preset(name).unwrap();
    let limits = real_limits(Duration::from_secs(20));
    let peers = Arc::new(Mutex::new(Vec::new()));
    let slow_dialed = Arc::new(AtomicUsize::new(0));
    let net =
        |slow| SlowNet { inner: TokioNet::new(LOOPBACK), peers: peers.clone(), slow, dialed: slow_dialed.clone() };
    let placeholder = UniqueId { version: variant.uid_version(), root: (LOOPBACK, 0).into(), magic: 0xf100d };
    let (tx, rx) = oneshot::channel();
    let root_cfg = RootConfig { uid: placeholder, nranks: None, limits };
    let root = tokio::spawn(run_root_notify(net(false), root_cfg, Some(tx)));
    let uid = UniqueId { root: rx.await.unwrap(), ..placeholder };
    let ranks: Vec<_> = (0..3)
        .map(|r| {
            let cfg = RankConfig { rank: r, nranks: 3, uid, variant, limits };
            tokio::spawn(run_rank(net(r == 2), cfg, vec![Op::Barrier { word: [r as u8; 4] }]))
        })
        .collect();
    // Once the slow rank dials its first barrier connection (its second to a peer listener:
    // held for HOLD), init is over and ranks 0 and 1 wait for it, accepting every connection.
    while peers.lock().unwrap().len() < 3 || slow_dialed.load(Ordering::SeqCst) < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let targets = peers.lock().unwrap().clone();
    let ports: Vec<u16> = targets.iter().map(SocketAddr::port).collect();
    let mut strangers = Vec::new();
    let mut most = 0;
    for addr in targets {
        for i in 0..FLOOD {
            strangers.push(TcpStream::connect(addr).await.expect("stranger connects"));
            if i % 50 == 49 {
                most = most.max(accepted_on(&ports));
            }
        }
    }
    let sampler = async {
        loop {
            most = most.max(accepted_on(&ports));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let runs = async {
        let mut out = Vec::new();
        for h in ranks {
            out.push(h.await.unwrap());
        }
        out
    };
    let runs = tokio::select! {
        biased;
        r = runs => r,
        () = sampler => unreachable!(),
    };
    for (r, run) in runs.into_iter().enumerate() {
        let run = run.unwrap_or_else(|e| panic!("{name}: rank {r}: {e}"));
        assert_eq!(run.completions.len(), 2, "{name}: rank {r}");
    }
    root.await.unwrap().unwrap();
    drop(strangers);
    most
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_idle_connections_on_eager_listeners_holds_bounded_descriptors() {
    for name in ["seq", "persistent"] {
        let held = flooded_barrier(name).await;
        // Three listeners, each holding at most DEFAULT_READ_AHEAD strangers plus the session's
        // own connections (the ring's and one per peer); unbounded it would be 3 x FLOOD.
        assert!(held <= 3 * (DEFAULT_READ_AHEAD + 4), "{name}: {held} connections held for {} strangers", 3 * FLOOD);
        eprintln!("{name}: {} idle strangers, at most {held} connections held by the ranks", 3 * FLOOD);
    }
}
