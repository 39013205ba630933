//! The driver runs a protocol it knows nothing of: a toy ping over loopback sockets, its own
//! listener key, completions and events (none of NVSHMEM's types).

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use bootsim_core::seam::{
    Completed, Effect, Input, ListenerKey, Node, NodeOutput, Noted, Observation, Observed, Output,
};
use bootsim_core::{ConnId, Instant};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// The toy's one listener: the root's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Door;

impl fmt::Display for Door {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("door")
    }
}

impl ListenerKey for Door {
    const ALL: &'static [Door] = &[Door];
    fn port(self) -> u16 {
        0
    }
    fn is_peer(self) -> bool {
        false
    }
    fn is_root(self) -> bool {
        true
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Done {
    op: u32,
    result: Result<Vec<u8>, String>,
}

impl Completed for Done {
    type Error = String;
    fn op(&self) -> u32 {
        self.op
    }
    fn result(&self) -> Result<&[u8], &String> {
        self.result.as_deref()
    }
    fn into_result(self) -> Result<Vec<u8>, String> {
        self.result
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Said(&'static str);

impl Observed for Said {
    fn conn(&self) -> Option<ConnId> {
        None
    }
    fn noted(&self) -> Noted {
        Noted::Other
    }
}

/// The root answers one "ping" with "pong"; a rank dials it, pings, and reads the answer.
#[derive(Debug)]
struct Ping {
    root: Option<SocketAddr>,
    out: std::collections::VecDeque<NodeOutput<Ping>>,
    got: Vec<u8>,
    finished: bool,
}

impl Ping {
    fn new(root: Option<SocketAddr>) -> Ping {
        let first = match root {
            None => Effect::Listen { listener: Door },
            Some(addr) => Effect::Connect { conn: ConnId(1), addr },
        };
        Ping { root, out: [Output::Effect(first)].into(), got: Vec::new(), finished: false }
    }

    fn done(&mut self, op: u32, result: Result<Vec<u8>, String>) {
        self.finished = op == 1 || result.is_err() || self.root.is_none();
        self.out.push_back(Output::Observe(Observation::Completed(Done { op, result })));
    }
}

impl Node for Ping {
    type Listener = Door;
    type Completion = Done;
    type Event = Said;

    fn handle(&mut self, _now: Instant, input: Input<'_, Door>) {
        let conn = ConnId(1);
        match (self.root, input) {
            (None, Input::Listening { .. }) => {
                self.out.push_back(Output::Effect(Effect::Accept { listener: Door, conn }))
            }
            (_, Input::Received { bytes, .. }) => {
                self.got.extend_from_slice(bytes);
                if self.got.len() == 4 {
                    let got = std::mem::take(&mut self.got);
                    if self.root.is_none() {
                        self.out.push_back(Output::Effect(Effect::Write { conn, len: 4 }));
                        self.out.push_back(Output::Effect(Effect::Close { conn }));
                    }
                    self.done(u32::from(self.root.is_some()), Ok(got));
                }
            }
            (Some(_), Input::Connected { .. }) => {
                self.out.push_back(Output::Observe(Observation::Event(Said("connected"))));
                self.done(0, Ok(Vec::new()));
                self.out.push_back(Output::Effect(Effect::Write { conn, len: 4 }));
            }
            (_, Input::ConnectFailed { reason, .. }) => self.done(0, Err(format!("cannot reach the root: {reason}"))),
            _ => {}
        }
    }

    fn poll_output(&mut self, tx: &mut Vec<u8>) -> Option<NodeOutput<Ping>> {
        let out = self.out.pop_front()?;
        if let Output::Effect(Effect::Write { .. }) = out {
            tx.clear();
            tx.extend_from_slice(if self.root.is_some() { b"ping" } else { b"pong" });
        }
        Some(out)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn waiting_for(&self) -> Option<String> {
        (!self.finished).then(|| "the other side".to_string())
    }

    fn is_finished(&self) -> bool {
        self.finished
    }
}

/// Plain tokio sockets on loopback; nothing to drain.
#[derive(Clone)]
struct Loopback;

impl Backend for Loopback {
    type Listener = TcpListener;
    type Stream = TcpStream;
    type Reader = OwnedReadHalf;
    type Writer = OwnedWriteHalf;

    async fn listen<L: ListenerKey + Send>(&self, _which: L) -> std::io::Result<(TcpListener, SocketAddr)> {
        let l = TcpListener::bind("127.0.0.1:0").await?;
        let addr = l.local_addr()?;
        Ok((l, addr))
    }

    async fn accept(&self, l: &TcpListener) -> std::io::Result<(TcpStream, SocketAddr)> {
        l.accept().await
    }

    async fn connect(&self, addr: SocketAddr) -> std::io::Result<TcpStream> {
        TcpStream::connect(addr).await
    }

    fn split(&self, s: TcpStream) -> (OwnedReadHalf, OwnedWriteHalf) {
        s.into_split()
    }

    async fn drain(&self, _w: &OwnedWriteHalf, _timeout: Duration) -> DrainReport {
        DrainReport { outcome: DrainOutcome::Drained, waited: Duration::ZERO, polls: 0 }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn a_protocol_the_driver_does_not_know_runs_and_is_recorded() {
    runtime().block_on(async {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let root = tokio::spawn(run_root_notify(Loopback, Ping::new(None), Some(tx)));
        let addr = rx.await.expect("the root says where it listens");
        let kept = Kept::default();
        let rank = run_rank_watched(Loopback, 0, Ping::new(Some(addr)), kept.clone()).await.unwrap();
        let ends: Vec<_> = rank.completions.iter().map(|c| (c.op, c.result.clone())).collect();
        assert_eq!(ends, [(0, Ok(Vec::new())), (1, Ok(b"pong".to_vec()))]);
        assert_eq!(rank.events, [Said("connected")]);
        assert_eq!(kept.lock().run, rank, "the watch kept what the rank did");
        let root = root.await.unwrap().unwrap();
        assert_eq!(root.completions, [Done { op: 0, result: Ok(b"ping".to_vec()) }]);
        let record = rank_record(0, &Ok(rank));
        assert_eq!((record.init, record.ops, record.unfinished), (None, vec![Ok(b"pong".to_vec())], None));
        assert_eq!(kept.take().run.completions.len(), 2, "taken once");
        assert!(kept.lock().run.completions.is_empty());
    });
}

#[test]
fn a_failed_init_is_the_rank_error_and_its_record_says_init() {
    runtime().block_on(async {
        // A port nothing listens on: the connect fails at once.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let result = run_rank(Loopback, 3, Ping::new(Some(closed))).await;
        let Err(DriverError::Failed { error, completed, run, culprit }) = &result else { panic!("{result:?}") };
        assert!(error.starts_with("cannot reach the root: "), "{error}");
        assert_eq!((*completed, run.completions.len(), *culprit), (0, 1, None));
        let record = rank_record(3, &result);
        assert!(
            record.init.as_ref().is_some_and(|t| t.text().starts_with("init: cannot reach the root")),
            "{record:?}"
        );
        assert!(record.ops.is_empty() && record.failed());
    });
}
