//! The process's interposer state: the schedule, the listeners it has seen, the connections it
//! holds, and the log. One mutex; never held across a wait.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use bootsim_interposer::schedule::Arrival;
use bootsim_interposer::{peek, Decision, InterposerPolicy, Schedule, HOST_ENV, LOG_ENV, POLICY_ENV};
use libc::c_int;

use crate::sock::{self, RawAddr};

/// A connection taken from a listener's kernel queue, with its first bytes peeked at.
pub struct Taken {
    nfd: c_int,
    peer: RawAddr,
    first: Vec<u8>,
}

/// Takes every pending connection of listener `fd` from the kernel and peeks at each one's
/// header for at most `wait`: called with the lock let go, since the peek waits. The
/// connections taken before an error (other than an empty queue) are kept; the error is
/// returned as accept would return it.
pub fn take_pending(fd: c_int, wait: Duration) -> (Vec<Taken>, Result<(), c_int>) {
    let mut taken = Vec::new();
    loop {
        match sock::accept_pending(fd) {
            Ok(Some((nfd, peer))) => {
                let first = sock::peek(nfd, peek::HEADER_LEN, wait);
                taken.push(Taken { nfd, peer, first });
            }
            Ok(None) => return (taken, Ok(())),
            Err(e) => return (taken, Err(e)),
        }
    }
}

/// A listening socket the library manages.
pub struct Listener {
    /// The schedule's number for it.
    pub id: u32,
    ino: u64,
    local: SocketAddr,
}

/// Everything the library keeps for this process.
pub struct State {
    /// The queue.
    pub sched: Schedule,
    /// Listeners by fd number.
    pub listeners: BTreeMap<c_int, Listener>,
    next_listener: u32,
    /// Connections taken from the kernel and not yet handed over: fd and peer address.
    pub held: BTreeMap<u32, (c_int, RawAddr)>,
    log: Option<File>,
    start: Instant,
    /// This process's host number, if given.
    pub host: Option<u8>,
    /// Fds registered for input in an epoll instance: fd to (the epoll fd it was registered
    /// through, the program's data). mio registers through a dup of the fd it waits on.
    pub epoll: BTreeMap<c_int, (c_int, u64)>,
}

static STATE: OnceLock<Mutex<State>> = OnceLock::new();

/// Reads the environment (stopping the program with the reason when it is wrong) and sets the
/// exit hook. Called when the library loads.
pub fn init() {
    let _ = state();
    // SAFETY: atexit with a plain extern "C" function that never unwinds.
    unsafe { libc::atexit(at_exit) };
}

/// The state, made on first use.
pub fn state() -> &'static Mutex<State> {
    STATE.get_or_init(|| {
        let fail = |what: &str| -> ! {
            eprintln!("bootsim-preload: {what}");
            // SAFETY: _exit has no preconditions; nothing of ours needs flushing.
            unsafe { libc::_exit(3) }
        };
        let policy = match std::env::var(POLICY_ENV) {
            Ok(s) => s.parse::<InterposerPolicy>().unwrap_or_else(|e| fail(&format!("{POLICY_ENV}='{s}': {e}"))),
            Err(_) => InterposerPolicy::default(),
        };
        let host = std::env::var(HOST_ENV).ok().map(|h| {
            h.parse::<u8>()
                .ok()
                .filter(|&h| h > 0)
                .unwrap_or_else(|| fail(&format!("{HOST_ENV}='{h}': expected 1..=255")))
        });
        let log = std::env::var_os(LOG_ENV).map(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(&p)
                .unwrap_or_else(|e| fail(&format!("{LOG_ENV}={}: {e}", p.to_string_lossy())))
        });
        Mutex::new(State {
            sched: Schedule::new(policy),
            listeners: BTreeMap::new(),
            next_listener: 0,
            held: BTreeMap::new(),
            log,
            start: Instant::now(),
            host,
            epoll: BTreeMap::new(),
        })
    })
}

/// Locks the state; a panic elsewhere does not stop the program from accepting.
pub fn lock() -> MutexGuard<'static, State> {
    state().lock().unwrap_or_else(|p| p.into_inner())
}

impl State {
    /// Time since the library started.
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Appends decisions to the log, one write per line (O_APPEND: lines of processes sharing
    /// the file do not interleave).
    pub fn log(&mut self, ds: impl IntoIterator<Item = Decision>) {
        let Some(f) = self.log.as_mut() else { return };
        // SAFETY: getpid has no preconditions (called per line: right after a fork too).
        let pid = unsafe { libc::getpid() } as u32;
        for d in ds {
            let _ = f.write_all(format!("{}\n", d.line(pid)).as_bytes());
        }
    }

    /// The listener `fd` is, registering it on first sight; `None` when `fd` is not a TCP
    /// listener (the call then goes straight to libc). A reused fd number is a new listener:
    /// the old one's queue is closed and logged `unaccepted`.
    pub fn listener(&mut self, fd: c_int) -> Option<u32> {
        let (ino, local) = sock::tcp_listener(fd)?;
        if let Some(l) = self.listeners.get(&fd) {
            if l.ino == ino {
                return Some(l.id);
            }
            let old = l.id;
            let now = self.now();
            let gone = self.sched.abandon_listener(now, old);
            self.close_abandoned(gone);
        }
        let id = self.next_listener;
        self.next_listener += 1;
        self.listeners.insert(fd, Listener { id, ino, local });
        Some(id)
    }

    /// What an intake of listener `fd` needs to know before the lock is let go: its local
    /// address and how long to wait for a header.
    pub fn intake_plan(&self, fd: c_int) -> Result<(SocketAddr, Duration), c_int> {
        let local = self.listeners.get(&fd).map(|l| l.local).ok_or(libc::EBADF)?;
        Ok((local, self.sched.policy().peek_wait()))
    }

    /// Queues connections [`take_pending`] took from listener `id` (at `local`), in the order
    /// they were taken.
    pub fn admit(&mut self, id: u32, local: SocketAddr, taken: Vec<Taken>) {
        for Taken { nfd, peer, first } in taken {
            let peer_std = peer.socket_addr();
            let host_of = |a: Option<SocketAddr>| match a {
                Some(SocketAddr::V4(a)) => a.ip().octets()[3],
                _ => 0,
            };
            let arrival = Arrival {
                listener: id,
                local: local.to_string(),
                peer: peer_std.map_or("?".into(), |a| a.to_string()),
                src_host: host_of(peer_std),
                dst_host: self.host.unwrap_or_else(|| host_of(Some(local))),
                msg: peek::nvshmem_header(&first),
            };
            let now = self.now();
            let (conn, ds) = self.sched.arrive(now, arrival);
            self.held.insert(conn, (nfd, peer));
            self.log(ds);
        }
    }

    /// For a wait on `watched` (fd, the caller's tag): releases what is due, then says which
    /// watched listeners have a connection to hand over, and, when some still hold one, how
    /// long until the next release.
    pub fn readiness<T>(&mut self, watched: impl IntoIterator<Item = (c_int, T)>) -> (Vec<T>, Option<Duration>) {
        let now = self.now();
        let ds = self.sched.tick(now);
        self.log(ds);
        let mut ready = Vec::new();
        let mut pending = false;
        for (fd, tag) in watched {
            if let Some(l) = self.listeners.get(&fd) {
                if self.sched.has_ready(l.id) {
                    ready.push(tag);
                }
                pending |= self.sched.has_pending(l.id);
            }
        }
        let wake = self.sched.next_deadline().filter(|_| pending).map(|d| d.saturating_sub(now));
        (ready, wake)
    }

    fn close_abandoned(&mut self, gone: Vec<(u32, Decision)>) {
        for (conn, d) in gone {
            if let Some((fd, _)) = self.held.remove(&conn) {
                sock::close(fd);
            }
            self.log([d]);
        }
    }
}

/// At exit: what the program never accepted is logged `unaccepted` and closed (the kernel
/// would have closed it in the accept queue too). Skipped if another thread holds the lock.
extern "C" fn at_exit() {
    let Some(m) = STATE.get() else { return };
    let Ok(mut st) = m.try_lock() else { return };
    let now = st.now();
    let gone = st.sched.abandon_all(now);
    st.close_abandoned(gone);
}
