//! The root as a sans-IO state machine: NVSHMEM's `bootstrap_root` thread, which takes every
//! rank's check-in one at a time and then tells each rank, in rank order, its ring successor.

use std::collections::VecDeque;
use std::net::SocketAddr;

use crate::error::BootstrapError;
use crate::ids::{ConnId, Listener, OpId, OpKind};
use crate::io::{Completion, Event, Input, Limits, Output};
use crate::time::Instant;
use crate::uid::UniqueId;
use crate::wire::{encode_frame, encode_sockaddr, ExtInfo, FrameReader, Preamble, WireError};

/// The largest world a root accepts (a check-in claiming more is refused before any allocation).
pub const MAX_RANKS: u32 = 65536;

/// What the root is told.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RootConfig {
    /// The unique ID (its version and magic; its address is where the driver listens).
    pub uid: UniqueId,
    /// World size when known up front (the SESSION_ID path); otherwise the first check-in decides.
    pub nranks: Option<u32>,
    /// Protection against bad peers.
    pub limits: Limits,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Listening,
    Accepting(ConnId),
    Preamble(ConnId),
    Version(ConnId),
    Info(ConnId),
    Connecting { rank: u32, conn: ConnId },
    Done,
}

/// The bootstrap root (`Clone` and `Hash` as [`crate::Rank`]'s).
#[derive(Clone, Debug, Hash)]
pub struct Root {
    cfg: RootConfig,
    now: Instant,
    out: VecDeque<Output>,
    phase: Phase,
    next_conn: u64,
    reader: FrameReader,
    remote: Option<SocketAddr>,
    opened: Instant,
    nranks: Option<u32>,
    listen_root: Vec<Option<SocketAddr>>,
    listen: Vec<Option<SocketAddr>>,
    count: u32,
    addr: Option<SocketAddr>,
    last_progress: Instant,
}

impl Root {
    /// A root that opens its rendezvous listener at once.
    pub fn new(cfg: RootConfig, now: Instant) -> Root {
        let mut root = Root {
            nranks: cfg.nranks,
            cfg,
            now,
            out: VecDeque::from([Output::Listen { listener: Listener::Rendezvous }]),
            phase: Phase::Listening,
            next_conn: 0,
            reader: FrameReader::new(),
            remote: None,
            opened: now,
            listen_root: Vec::new(),
            listen: Vec::new(),
            count: 0,
            addr: None,
            last_progress: now,
        };
        if let Some(n) = root.nranks {
            root.listen_root = vec![None; n as usize];
            root.listen = vec![None; n as usize];
        }
        root
    }

    /// Where the root listens, once the driver said so.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// True once every rank was told its successor, or the root failed.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Ranks checked in so far.
    pub fn checked_in(&self) -> u32 {
        self.count
    }

    /// A one-line description of what the root waits for.
    pub fn waiting_for(&self) -> Option<String> {
        let n = self.nranks.map_or("?".to_string(), |n| n.to_string());
        Some(match self.phase {
            Phase::Done => return None,
            Phase::Listening => "its listener".into(),
            Phase::Accepting(_) => format!("check-in {} of {n}{}", self.count + 1, self.missing_ranks()),
            Phase::Preamble(c) | Phase::Version(c) | Phase::Info(c) => {
                format!("check-in bytes on {c} ({} of {n} in)", self.count)
            }
            Phase::Connecting { rank, .. } => format!("connect to rank {rank} to send its successor"),
        })
    }

    /// The culprits of a stalled rendezvous: the ranks that have not checked in (once the world
    /// size is known), e.g. "; not yet checked in: rank 3".
    fn missing_ranks(&self) -> String {
        if self.nranks.is_none() {
            return String::new();
        }
        let missing: Vec<String> =
            self.listen_root.iter().enumerate().filter(|(_, a)| a.is_none()).map(|(r, _)| r.to_string()).collect();
        match missing.len() {
            0 => String::new(),
            1 => format!("; not yet checked in: rank {}", missing[0]),
            k if k <= 8 => format!("; not yet checked in: ranks {}", missing.join(", ")),
            k => format!("; not yet checked in: {k} ranks, first {}", missing[..8].join(", ")),
        }
    }

    /// Feeds one input.
    pub fn handle(&mut self, now: Instant, input: Input<'_>) {
        self.now = self.now.max(now);
        match (input, self.phase) {
            (Input::Listening { addr, .. }, Phase::Listening) => {
                self.addr = Some(addr);
                self.accept_next();
            }
            (Input::ListenFailed { reason, .. }, Phase::Listening) => self.fail(BootstrapError::RootListen { reason }),
            (Input::Accepted { conn, from }, Phase::Accepting(c)) if conn == c => {
                self.reader = FrameReader::new();
                self.remote = Some(from);
                self.opened = self.now;
                self.progress(Phase::Preamble(conn));
            }
            (Input::Received { conn, bytes }, Phase::Preamble(c) | Phase::Version(c) | Phase::Info(c)) if conn == c => {
                self.reader.push(bytes);
            }
            (Input::PeerClosed { conn }, Phase::Preamble(c) | Phase::Version(c) | Phase::Info(c)) if conn == c => {
                self.reader.push_eof();
            }
            (Input::Connected { conn }, Phase::Connecting { rank, conn: c }) if conn == c => {
                self.send_successor(rank, conn)
            }
            (Input::ConnectFailed { conn, reason }, Phase::Connecting { rank, conn: c }) if conn == c => {
                let addr = self.listen_root[rank as usize].expect("checked in");
                self.fail(BootstrapError::RootConnect { to: rank, addr, reason });
            }
            _ => {}
        }
        self.advance();
    }

    /// The next time [`Root::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let header = match self.phase {
            Phase::Preamble(_) | Phase::Version(_) | Phase::Info(_) => {
                self.cfg.limits.header_timeout.map(|d| self.opened + d)
            }
            _ => None,
        };
        let progress = match self.phase {
            Phase::Done => None,
            _ => self.cfg.limits.op_timeout.map(|d| self.last_progress + d),
        };
        [header, progress].into_iter().flatten().min()
    }

    /// Lets time pass: drops a check-in connection stalled mid-header; fails on no progress.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        if let (Phase::Preamble(c) | Phase::Version(c) | Phase::Info(c), Some(limit)) =
            (self.phase, self.cfg.limits.header_timeout)
        {
            if self.now >= self.opened + limit {
                self.out.push_back(Output::Close { conn: c });
                let from = self.remote.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
                self.out.push_back(Output::Event(Event::StalledDropped { conn: c, from, after: limit }));
                self.accept_next();
                return;
            }
        }
        if let Some(limit) = self.cfg.limits.op_timeout {
            if self.phase != Phase::Done && self.now >= self.last_progress + limit {
                let waiting = self.waiting_for().unwrap_or_default();
                self.fail(BootstrapError::RootTimeout { waiting, after: limit });
            }
        }
    }

    /// The next output for the driver.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    fn progress(&mut self, phase: Phase) {
        self.phase = phase;
        self.last_progress = self.now;
    }

    fn conn(&mut self) -> ConnId {
        self.next_conn += 1;
        ConnId(self.next_conn)
    }

    fn accept_next(&mut self) {
        let conn = self.conn();
        self.out.push_back(Output::Accept { listener: Listener::Rendezvous, conn });
        self.progress(Phase::Accepting(conn));
    }

    fn fail(&mut self, error: BootstrapError) {
        self.finish(Err(error));
    }

    fn finish(&mut self, result: Result<Vec<u8>, BootstrapError>) {
        if self.phase == Phase::Done {
            return;
        }
        self.phase = Phase::Done;
        self.out.push_back(Output::CloseListener { listener: Listener::Rendezvous });
        self.out.push_back(Output::Completed(Completion { op: OpId(0), kind: OpKind::Init, result }));
    }

    /// A connection that is not a rank of this session: drop it, take the next (NVSHMEM does so on bad magic).
    fn drop_stray(&mut self, conn: ConnId, error: WireError) {
        self.out.push_back(Output::Close { conn });
        let from = self.remote.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        self.out.push_back(Output::Event(Event::StrayDropped { conn, from, error }));
        self.accept_next();
    }

    fn advance(&mut self) {
        loop {
            let before = self.phase;
            match self.phase {
                Phase::Preamble(c) => match self.reader.read_preamble(self.cfg.uid.magic) {
                    Ok(Some(_)) => self.progress(Phase::Version(c)),
                    Ok(None) => return,
                    Err(e) => self.drop_stray(c, e),
                },
                Phase::Version(c) => match self.reader.read_i32("unique ID version") {
                    Ok(Some(theirs)) => {
                        let ours = self.cfg.uid.version;
                        let mut bytes = Vec::new();
                        encode_frame(&mut bytes, &ours.to_le_bytes());
                        self.out.push_back(Output::Write { conn: c, bytes });
                        if theirs != ours {
                            self.out.push_back(Output::Close { conn: c });
                            let from = self.remote.map_or("?".to_string(), |a| a.to_string());
                            return self.fail(BootstrapError::RootVersionMismatch { from, theirs, ours });
                        }
                        self.progress(Phase::Info(c));
                    }
                    Ok(None) => return,
                    Err(e) => self.drop_stray(c, e),
                },
                Phase::Info(c) => match self.reader.read_fixed::<{ ExtInfo::LEN }>("ext_info") {
                    Ok(Some(b)) => match ExtInfo::decode(&b) {
                        Ok(info) => {
                            self.out.push_back(Output::Close { conn: c });
                            if let Err(e) = self.check_in(info) {
                                return self.fail(e);
                            }
                        }
                        Err(e) => self.drop_stray(c, e),
                    },
                    Ok(None) => return,
                    Err(e) => self.drop_stray(c, e),
                },
                _ => return,
            }
            if self.phase == before {
                return;
            }
        }
    }

    /// `bootstrap_validate_ext_info` plus the duplicate check; then the next check-in or the fan-out.
    fn check_in(&mut self, info: ExtInfo) -> Result<(), BootstrapError> {
        // Validated before it sizes anything: a check-in must not make the root allocate.
        if info.nranks <= 0 || info.nranks as u32 > MAX_RANKS {
            return Err(BootstrapError::RankOutOfRange { rank: info.rank, nranks: info.nranks });
        }
        let n = match self.nranks {
            Some(n) => n,
            None => {
                let n = info.nranks as u32;
                self.nranks = Some(n);
                self.listen_root = vec![None; n as usize];
                self.listen = vec![None; n as usize];
                n
            }
        };
        if info.nranks as u32 != n {
            return Err(BootstrapError::NranksMismatch { rank: info.rank, theirs: info.nranks, ours: n });
        }
        let Some(r) = usize::try_from(info.rank).ok().filter(|&r| r < n as usize) else {
            return Err(BootstrapError::RankOutOfRange { rank: info.rank, nranks: n as i32 });
        };
        if self.listen_root[r].is_some() {
            return Err(BootstrapError::DuplicateRank { rank: info.rank, nranks: n });
        }
        self.listen_root[r] = Some(info.listen_root);
        self.listen[r] = Some(info.listen);
        self.count += 1;
        self.out.push_back(Output::Event(Event::CheckedIn { rank: r as u32, count: self.count, nranks: n }));
        if self.count < n {
            self.accept_next();
        } else {
            self.connect_to(0);
        }
        Ok(())
    }

    fn connect_to(&mut self, rank: u32) {
        let conn = self.conn();
        let addr = self.listen_root[rank as usize].expect("every rank checked in");
        self.out.push_back(Output::Connect { conn, addr });
        self.progress(Phase::Connecting { rank, conn });
    }

    fn send_successor(&mut self, rank: u32, conn: ConnId) {
        let n = self.nranks.expect("known after check-ins");
        let next = self.listen[((rank + 1) % n) as usize].expect("every rank checked in");
        let mut bytes = Preamble::bootstrap(self.cfg.uid.magic).encode().to_vec();
        encode_frame(&mut bytes, &encode_sockaddr(&next));
        self.out.push_back(Output::Write { conn, bytes });
        self.out.push_back(Output::Close { conn });
        if rank + 1 < n {
            self.connect_to(rank + 1);
        } else {
            self.finish(Ok(Vec::new()));
        }
    }
}
