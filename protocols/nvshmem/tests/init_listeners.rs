//! A rank's own listeners during init (the root-facing one and the peer listener that carries
//! the ring): a stranger there is nobody's progress, so a steady trickle of them cannot keep
//! an init whose root never answers alive past the operation timeout, and under read-ahead
//! idle strangers delay the honest connection by at most about one header timeout.

use std::net::SocketAddr;
use std::time::Duration;

use bootsim_core::codec::{encode_frame, encode_sockaddr, Preamble};
use bootsim_core::{ConnId, Instant};
use bootsim_nvshmem::{
    BootstrapError, Effect, Input, Limits, Listener, Observation, Output, Rank, RankConfig, UniqueId, Variant,
};

const MAGIC: u64 = 0x5eed_0000_b007_51a1;
const OP: Duration = Duration::from_secs(10);
const HEADER: Duration = Duration::from_secs(1);

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Rank 1 of 4 over a hand-fed driver: the test plays the root, the peers and the strangers.
struct Driver {
    rank: Rank,
    now: Instant,
    /// Outstanding accepts per listener.
    accepts: Vec<(Listener, ConnId)>,
    connects: Vec<(ConnId, SocketAddr)>,
    closed: Vec<ConnId>,
    failed: Option<BootstrapError>,
    ready: bool,
}

impl Driver {
    fn new(read_ahead: Option<usize>) -> Driver {
        let variant = Variant::preset("nvshmem-3.7").unwrap();
        let uid = UniqueId { version: variant.uid_version(), root: addr("10.0.0.1:9000"), magic: MAGIC };
        let limits = Limits { op_timeout: Some(OP), header_timeout: Some(HEADER), read_ahead, ..Limits::default() };
        let rank = Rank::new(RankConfig { rank: 1, nranks: 4, uid, variant, limits }, Instant::ZERO);
        let mut d = Driver {
            rank,
            now: Instant::ZERO,
            accepts: Vec::new(),
            connects: Vec::new(),
            closed: Vec::new(),
            failed: None,
            ready: false,
        };
        d.drain();
        d.feed(Input::Listening { listener: Listener::Peers, addr: addr("10.1.0.1:7001") });
        d.feed(Input::Listening { listener: Listener::FromRoot, addr: addr("10.1.0.1:7002") });
        d
    }

    fn drain(&mut self) {
        let mut tx = Vec::new();
        while let Some(out) = self.rank.poll_output(&mut tx) {
            match out {
                Output::Effect(Effect::Accept { listener, conn }) => {
                    self.accepts.retain(|(l, _)| *l != listener);
                    self.accepts.push((listener, conn));
                }
                Output::Effect(Effect::CloseListener { listener }) => self.accepts.retain(|(l, _)| *l != listener),
                Output::Effect(Effect::Connect { conn, addr }) => self.connects.push((conn, addr)),
                Output::Effect(Effect::Close { conn }) => self.closed.push(conn),
                Output::Observe(Observation::Completed(c)) => match c.result {
                    Err(e) => self.failed = Some(e),
                    Ok(_) => self.ready = true,
                },
                _ => {}
            }
        }
    }

    fn feed(&mut self, input: Input<'_>) {
        self.rank.handle(self.now, input);
        self.drain();
    }

    /// Lets time pass to `t`, firing every timer on the way.
    fn until(&mut self, t: Instant) {
        while let Some(next) = self.rank.poll_timeout().filter(|&n| n <= t) {
            self.now = self.now.max(next);
            self.rank.handle_timeout(self.now);
            self.drain();
            if self.failed.is_some() {
                return;
            }
        }
        self.now = self.now.max(t);
    }

    /// A connection accepted on `listener` from `from` (the rank must have asked for one).
    fn accept(&mut self, listener: Listener, from: &str) -> ConnId {
        let i = self.accepts.iter().position(|(l, _)| *l == listener).expect("an accept outstanding");
        let (_, conn) = self.accepts.remove(i);
        self.feed(Input::Accepted { conn, from: addr(from) });
        conn
    }

    /// Plays the root through the check-in: the rank then waits for its successor.
    fn check_in(&mut self) {
        let (conn, _) = self.connects.pop().expect("dials the root");
        self.feed(Input::Connected { conn });
        let mut reply = Vec::new();
        encode_frame(&mut reply, &self.rank_version().to_le_bytes());
        self.feed(Input::Received { conn, bytes: &reply });
    }

    fn rank_version(&self) -> i32 {
        Variant::preset("nvshmem-3.7").unwrap().uid_version()
    }

    /// Plays the root telling the successor, then the ring's send side connecting.
    fn successor(&mut self) {
        let conn = self.accept(Listener::FromRoot, "10.0.0.1:40000");
        let mut bytes = Preamble::bootstrap(MAGIC).encode().to_vec();
        encode_frame(&mut bytes, &encode_sockaddr(&addr("10.1.0.2:7001")));
        self.feed(Input::Received { conn, bytes: &bytes });
        let (conn, _) = self.connects.pop().expect("dials the successor");
        self.feed(Input::Connected { conn });
    }

    /// One idle stranger at `listener`, accepted now (read-ahead accepts it at once; NVSHMEM
    /// only when the step asks, so it may have to wait for the accept).
    fn stranger(&mut self, listener: Listener, n: u32) {
        if self.accepts.iter().any(|(l, _)| *l == listener) {
            self.accept(listener, &format!("192.0.2.1:{}", 1000 + n));
        }
    }
}

/// Init in `phase` (the root-facing listener, or the ring's) with one idle stranger a second
/// and the awaited peer never coming: when the rank gives up (`None`: not within 60 s).
fn gives_up_with_a_trickle(read_ahead: Option<usize>, listener: Listener) -> Option<Instant> {
    let mut d = Driver::new(read_ahead);
    d.check_in();
    if listener == Listener::Peers {
        d.successor();
    }
    for s in 0..60u32 {
        d.stranger(listener, s);
        d.until(Instant::ZERO + Duration::from_secs(u64::from(s) + 1));
        if let Some(e) = &d.failed {
            assert!(matches!(e, BootstrapError::Timeout { .. }), "{e}");
            return Some(d.now);
        }
    }
    None
}

#[test]
fn a_trickle_of_strangers_at_a_ranks_own_listener_does_not_restart_the_op_timer() {
    for read_ahead in [None, Some(64)] {
        for listener in [Listener::FromRoot, Listener::Peers] {
            let at = gives_up_with_a_trickle(read_ahead, listener);
            let at = at.unwrap_or_else(|| panic!("{read_ahead:?} {listener}: still waiting after 60 s"));
            // The timer runs from the last step the awaited peer made: the check-in (or the
            // successor), at most a second into the run, plus the 10 s op timeout.
            assert!(at <= Instant::ZERO + OP + Duration::from_secs(2), "{read_ahead:?} {listener}: gave up at {at}");
        }
    }
}

/// Init with `idle` idle strangers at `listener` before the honest peer connects: when the
/// step took the honest connection (the ring step done, or the successor read).
fn honest_after_idle_strangers(listener: Listener, idle: u32) -> Instant {
    let mut d = Driver::new(Some(64));
    d.check_in();
    if listener == Listener::Peers {
        d.successor();
    }
    for s in 0..idle {
        d.stranger(listener, s);
    }
    match listener {
        Listener::FromRoot => d.successor(),
        _ => {
            let conn = d.accept(Listener::Peers, "10.1.0.0:50000");
            let preamble = Preamble::bootstrap(MAGIC).encode();
            d.feed(Input::Received { conn, bytes: &preamble });
        }
    }
    let waiting = d.rank.waiting_for().unwrap_or_default();
    assert!(d.failed.is_none(), "{:?}", d.failed);
    let step = if listener == Listener::FromRoot { "waiting for the root" } else { "connecting the ring" };
    assert!(!waiting.contains(step), "{listener}: still {waiting}");
    d.now
}

#[test]
fn idle_strangers_at_a_ranks_own_listeners_are_read_ahead_during_init() {
    for listener in [Listener::FromRoot, Listener::Peers] {
        // More than the pool holds: the oldest are evicted, the honest one is taken at once.
        let at = honest_after_idle_strangers(listener, 100);
        assert_eq!(at, Instant::ZERO, "{listener}");
    }
}

#[test]
fn a_ring_neighbour_that_stops_is_the_culprit_of_the_timeout_and_of_a_failed_connect() {
    use bootsim_core::Culprit;
    // Rank 1 of 4: its predecessor (rank 0) connects the ring and says nothing more, so the
    // ring receive times out; nothing in its description names the rank it waits for.
    let mut d = Driver::new(None);
    d.check_in();
    d.successor();
    let pred = d.accept(Listener::Peers, "10.1.0.0:40001");
    d.feed(Input::Received { conn: pred, bytes: &Preamble::bootstrap(MAGIC).encode() });
    d.until(Instant::ZERO + OP + Duration::from_secs(1));
    let e = d.failed.take().expect("the ring receive times out");
    assert!(matches!(e, BootstrapError::Timeout { .. }) && e.to_string().contains("ring predecessor"), "{e}");
    assert_eq!(e.culprit(1), Some(Culprit::Rank(0)), "{e}");
    // Its successor (rank 2) refuses the ring's connection: the connect names it.
    let mut d = Driver::new(None);
    d.check_in();
    let conn = d.accept(Listener::FromRoot, "10.0.0.1:40000");
    let mut bytes = Preamble::bootstrap(MAGIC).encode().to_vec();
    encode_frame(&mut bytes, &encode_sockaddr(&addr("10.1.0.2:7001")));
    d.feed(Input::Received { conn, bytes: &bytes });
    let (conn, _) = d.connects.pop().expect("dials the successor");
    d.feed(Input::ConnectFailed { conn, reason: "connection refused".into() });
    let e = d.failed.take().expect("the ring's connect fails");
    assert!(matches!(e, BootstrapError::Connect { .. }), "{e}");
    assert_eq!(e.culprit(1), Some(Culprit::Rank(2)), "{e}");
}
