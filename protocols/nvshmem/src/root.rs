//! The root as a sans-IO state machine: NVSHMEM's `bootstrap_root` thread, which takes every
//! rank's check-in one at a time and then tells each rank, in rank order, its ring successor.

use std::collections::BTreeMap;

use std::net::SocketAddr;

use crate::io::Outbox;
use crate::OpKind;

use bootsim_core::codec::{encode_frame, encode_sockaddr, ExtInfo, FrameReader, Preamble, WireError};
use bootsim_core::ids::{ConnId, OpId};
use bootsim_core::time::Instant;

use crate::error::BootstrapError;
use crate::io::{Completion, Effect, Event, Input, Limits, Output};
use crate::listener::Listener;
use crate::uid::UniqueId;

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
    /// Taking check-ins (one at a time as NVSHMEM, or several under [`Limits::read_ahead`]).
    CheckingIn,
    Connecting {
        rank: u32,
        conn: ConnId,
    },
    Done,
}

/// How far an accepted connection's check-in has been read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Stage {
    Preamble,
    Version,
    Info,
}

/// An accepted connection whose check-in is being read.
#[derive(Clone, Debug, Hash)]
struct CheckIn {
    reader: FrameReader,
    remote: SocketAddr,
    opened: Instant,
    stage: Stage,
}

/// The bootstrap root (`Clone` and `Hash` as [`crate::Rank`]'s).
#[derive(Clone, Debug, Hash)]
pub struct Root {
    cfg: RootConfig,
    now: Instant,
    out: Outbox,
    phase: Phase,
    next_conn: u64,
    /// The connection of the accept the driver was asked for, until it is accepted.
    accepting: Option<ConnId>,
    /// Accepted connections whose check-in is incomplete, oldest first (ids only grow).
    checkins: BTreeMap<ConnId, CheckIn>,
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
            out: Outbox::with(Effect::Listen { listener: Listener::Rendezvous }),
            phase: Phase::Listening,
            next_conn: 0,
            accepting: None,
            checkins: BTreeMap::new(),
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
            // The culprits (the ranks not checked in) always; a connection mid-check-in may be
            // a stranger's, so it is only said beside them.
            Phase::CheckingIn => match self.checkins.len() {
                0 => format!("check-in {} of {n}{}", self.count + 1, self.missing_ranks()),
                1 => {
                    let c = self.checkins.keys().next().expect("one");
                    format!("check-in {} of {n}{} (bytes on {c}, mid-check-in)", self.count + 1, self.missing_ranks())
                }
                k => {
                    format!("check-in {} of {n}{} ({k} connections mid-check-in)", self.count + 1, self.missing_ranks())
                }
            },
            Phase::Connecting { rank, .. } => format!("connect to rank {rank} to send its successor"),
        })
    }

    /// The ranks that have not checked in (once the world size is known): a stalled
    /// rendezvous's culprits.
    fn missing(&self) -> Vec<u32> {
        if self.nranks.is_none() {
            return Vec::new();
        }
        let missing = self.listen_root.iter().enumerate().filter(|(_, a)| a.is_none());
        missing.map(|(r, _)| r as u32).collect()
    }

    /// The culprits of a stalled rendezvous as words, e.g. "; not yet checked in: rank 3".
    fn missing_ranks(&self) -> String {
        let missing: Vec<String> = self.missing().iter().map(u32::to_string).collect();
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
                self.phase = Phase::CheckingIn;
                self.last_progress = self.now;
                self.accept_next();
            }
            (Input::ListenFailed { reason, .. }, Phase::Listening) => self.fail(BootstrapError::RootListen { reason }),
            (Input::Accepted { conn, from }, Phase::CheckingIn) if self.accepting == Some(conn) => {
                self.accepting = None;
                self.make_room();
                let checkin =
                    CheckIn { reader: FrameReader::new(), remote: from, opened: self.now, stage: Stage::Preamble };
                self.checkins.insert(conn, checkin);
                self.accept_next();
            }
            (Input::Accepted { conn, .. }, _) => {
                // Asked for before the last check-in completed: nobody needs it any more.
                self.out.effect(Effect::Close { conn });
            }
            (Input::Received { conn, bytes }, Phase::CheckingIn) => {
                if let Some(c) = self.checkins.get_mut(&conn) {
                    c.reader.push(bytes);
                    self.advance(conn);
                }
            }
            (Input::PeerClosed { conn, reason }, Phase::CheckingIn) => {
                if let Some(c) = self.checkins.get_mut(&conn) {
                    c.reader.push_close(reason);
                    self.advance(conn);
                }
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
    }

    /// The next time [`Root::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let header = self.cfg.limits.header_timeout.and_then(|d| self.checkins.values().map(|c| c.opened + d).min());
        let progress = match self.phase {
            Phase::Done => None,
            _ => self.cfg.limits.op_timeout.map(|d| self.last_progress + d),
        };
        [header, progress].into_iter().flatten().min()
    }

    /// Lets time pass: drops check-in connections stalled mid-header; fails on no progress.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        if let Some(limit) = self.cfg.limits.header_timeout {
            let now = self.now;
            let stalled: Vec<ConnId> =
                self.checkins.iter().filter(|(_, c)| now >= c.opened + limit).map(|(id, _)| *id).collect();
            if !stalled.is_empty() {
                for conn in stalled {
                    self.drop_stalled(conn, limit);
                }
                self.accept_next();
                return;
            }
        }
        if let Some(limit) = self.cfg.limits.op_timeout {
            if self.phase != Phase::Done && self.now >= self.last_progress + limit {
                let waiting = self.waiting_for().unwrap_or_default();
                let missing = match self.phase {
                    Phase::CheckingIn => self.missing(),
                    // A rank that checked in and cannot be reached (it died since) holds up
                    // every rank behind the root.
                    Phase::Connecting { rank, .. } => vec![rank],
                    _ => Vec::new(),
                };
                self.fail(BootstrapError::RootTimeout { waiting, after: limit, missing });
            }
        }
    }

    /// The next output for the driver. For an [`Effect::Write`], the bytes to send replace
    /// the contents of `tx`, a buffer the driver owns and reuses.
    pub fn poll_output(&mut self, tx: &mut Vec<u8>) -> Option<Output> {
        self.out.poll(tx)
    }

    fn progress(&mut self) {
        self.last_progress = self.now;
    }

    fn conn(&mut self) -> ConnId {
        self.next_conn += 1;
        ConnId(self.next_conn)
    }

    /// Asks for the next connection unless one is asked for already or the pool is full: as
    /// NVSHMEM, one check-in at a time; under `read_ahead`, always (a full pool makes room by
    /// evicting its oldest when the connection comes).
    fn accept_next(&mut self) {
        let open = match self.cfg.limits.read_ahead {
            None => self.checkins.is_empty(),
            Some(_) => true,
        };
        if self.phase != Phase::CheckingIn || self.accepting.is_some() || !open {
            return;
        }
        let conn = self.conn();
        self.out.effect(Effect::Accept { listener: Listener::Rendezvous, conn });
        self.accepting = Some(conn);
    }

    /// Under `read_ahead = k`, a pool of `k` incomplete check-ins drops its oldest for a new one.
    fn make_room(&mut self) {
        let Some(k) = self.cfg.limits.read_ahead else { return };
        while self.checkins.len() >= k.max(1) {
            let (&oldest, c) = self.checkins.iter().next().expect("non-empty");
            let age = self.now.saturating_since(c.opened);
            self.drop_stalled(oldest, age);
        }
    }

    fn drop_stalled(&mut self, conn: ConnId, after: std::time::Duration) {
        let Some(c) = self.checkins.remove(&conn) else { return };
        self.out.effect(Effect::Close { conn });
        self.out.event(Event::StalledDropped { conn, from: c.remote, after });
    }

    fn fail(&mut self, error: BootstrapError) {
        self.finish(Err(error));
    }

    fn finish(&mut self, result: Result<Vec<u8>, BootstrapError>) {
        if self.phase == Phase::Done {
            return;
        }
        self.phase = Phase::Done;
        self.out.effect(Effect::CloseListener { listener: Listener::Rendezvous });
        self.out.completed(Completion { op: OpId(0), kind: OpKind::Init, result });
    }

    /// A connection that is not a rank of this session: drop it, take the next (NVSHMEM does so on bad magic).
    fn drop_stray(&mut self, conn: ConnId, error: WireError) {
        let Some(c) = self.checkins.remove(&conn) else { return };
        self.out.effect(Effect::Close { conn });
        self.out.event(Event::StrayDropped { conn, from: c.remote, error });
        self.accept_next();
    }

    /// Reads as much of `conn`'s check-in as has arrived.
    fn advance(&mut self, conn: ConnId) {
        let magic = self.cfg.uid.magic;
        while let Some(c) = self.checkins.get_mut(&conn) {
            match c.stage {
                Stage::Preamble => match c.reader.read_preamble(magic) {
                    Ok(Some(_)) => {
                        c.stage = Stage::Version;
                        self.progress();
                    }
                    Ok(None) => return,
                    Err(e) => return self.drop_stray(conn, e),
                },
                Stage::Version => match c.reader.read_i32("unique ID version") {
                    Ok(Some(theirs)) => {
                        c.stage = Stage::Info;
                        let from = c.remote.to_string();
                        let ours = self.cfg.uid.version;
                        self.out.write(conn, |b| encode_frame(b, &ours.to_le_bytes()));
                        if theirs != ours {
                            self.checkins.remove(&conn);
                            self.out.effect(Effect::Close { conn });
                            return self.fail(BootstrapError::RootVersionMismatch { from, theirs, ours });
                        }
                        self.progress();
                    }
                    Ok(None) => return,
                    Err(e) => return self.drop_stray(conn, e),
                },
                Stage::Info => match c.reader.read_fixed::<{ ExtInfo::LEN }>("ext_info") {
                    Ok(Some(b)) => match ExtInfo::decode(&b) {
                        Ok(info) => {
                            self.checkins.remove(&conn);
                            self.out.effect(Effect::Close { conn });
                            self.progress();
                            if let Err(e) = self.check_in(info) {
                                self.fail(e);
                            }
                            return;
                        }
                        Err(e) => return self.drop_stray(conn, e),
                    },
                    Ok(None) => return,
                    Err(e) => return self.drop_stray(conn, e),
                },
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
        self.out.event(Event::CheckedIn { rank: r as u32, count: self.count, nranks: n });
        if self.count < n {
            self.accept_next();
        } else {
            // Whoever else is mid-check-in is not a rank of this session.
            let rest: Vec<ConnId> = self.checkins.keys().copied().collect();
            for conn in rest {
                let after = self.now.saturating_since(self.checkins[&conn].opened);
                self.drop_stalled(conn, after);
            }
            self.accepting = None;
            self.connect_to(0);
        }
        Ok(())
    }

    fn connect_to(&mut self, rank: u32) {
        let conn = self.conn();
        let addr = self.listen_root[rank as usize].expect("every rank checked in");
        self.out.effect(Effect::Connect { conn, addr });
        self.phase = Phase::Connecting { rank, conn };
        self.progress();
    }

    fn send_successor(&mut self, rank: u32, conn: ConnId) {
        let n = self.nranks.expect("known after check-ins");
        let next = self.listen[((rank + 1) % n) as usize].expect("every rank checked in");
        let preamble = Preamble::bootstrap(self.cfg.uid.magic).encode();
        self.out.write(conn, |b| {
            b.extend_from_slice(&preamble);
            encode_frame(b, &encode_sockaddr(&next));
        });
        self.out.effect(Effect::Close { conn });
        if rank + 1 < n {
            self.connect_to(rank + 1);
        } else {
            self.finish(Ok(Vec::new()));
        }
    }
}
