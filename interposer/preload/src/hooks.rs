//! The exported functions that take the place of libc's in the program.

use std::time::{Duration, Instant};

use libc::{c_int, nfds_t, pollfd, sockaddr, socklen_t};

use crate::real::real;
use crate::sock::{self, set_errno};
use crate::state::{lock, take_pending};

/// accept(2) under the policy.
///
/// # Safety
/// The program's accept() arguments, with accept(2)'s contract.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    accept_under_policy(fd, addr, len, 0)
}

/// accept4(2) under the policy.
///
/// # Safety
/// The program's accept4() arguments, with accept4(2)'s contract.
#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    accept_under_policy(fd, addr, len, flags)
}

unsafe fn accept_under_policy(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    loop {
        let mut st = lock();
        let Some(id) = st.listener(fd) else {
            drop(st);
            return (real().accept4)(fd, addr, len, flags);
        };
        let plan = st.intake_plan(fd);
        drop(st);
        // The header peek waits (bounded): never under the lock, which every hook takes.
        let intake = plan.and_then(|(local, wait)| {
            let (taken, result) = take_pending(fd, wait);
            lock().admit(id, local, taken);
            result
        });
        let mut st = lock();
        let now = st.now();
        let ds = st.sched.tick(now);
        st.log(ds);
        if let Some((conn, d)) = st.sched.take(now, id) {
            st.log([d]);
            let (nfd, peer) = st.held.remove(&conn).expect("a queued connection has its fd");
            drop(st);
            sock::apply_accept_flags(nfd, flags);
            peer.copy_out(addr, len);
            return nfd;
        }
        if let Err(e) = intake {
            drop(st);
            set_errno(e);
            return -1;
        }
        if sock::nonblocking(fd) {
            drop(st);
            set_errno(libc::EAGAIN);
            return -1;
        }
        let wait = st.sched.next_deadline().map(|d| d.saturating_sub(now));
        drop(st);
        // Blocks like accept: until a connection arrives or a hold's deadline passes. A signal
        // restarts the wait, as SA_RESTART restarts accept.
        sock::wait_readable(fd, wait.map_or(-1, ms_ceil));
    }
}

/// poll(2): a listener with a connection the policy has made acceptable is readable; while
/// only held ones remain, the wait ends at the next deadline so the program sees the release.
///
/// # Safety
/// The program's poll() arguments, with poll(2)'s contract.
#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    let timeout = (timeout >= 0).then(|| Duration::from_millis(timeout as u64));
    poll_under_policy(fds, nfds, timeout, &|fds, nfds, wait| (real().poll)(fds, nfds, wait.map_or(-1, ms_ceil)))
}

/// ppoll(2), as [`poll`]; the signal mask applies to each wait.
///
/// # Safety
/// The program's ppoll() arguments, with ppoll(2)'s contract.
#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    nfds: nfds_t,
    ts: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> c_int {
    let timeout =
        (!ts.is_null()).then(|| Duration::new((*ts).tv_sec.max(0) as u64, (*ts).tv_nsec.clamp(0, 999_999_999) as u32));
    poll_under_policy(fds, nfds, timeout, &|fds, nfds, wait| {
        let spec = wait.map(|d| libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as _ });
        (real().ppoll)(fds, nfds, spec.as_ref().map_or(std::ptr::null(), |t| t as *const _), mask)
    })
}

type Wait<'a> = &'a dyn Fn(*mut pollfd, nfds_t, Option<Duration>) -> c_int;

unsafe fn poll_under_policy(fds: *mut pollfd, nfds: nfds_t, timeout: Option<Duration>, wait: Wait) -> c_int {
    if fds.is_null() || nfds == 0 || !lock().sched.any_pending() {
        return wait(fds, nfds, timeout);
    }
    // SAFETY: the caller's `fds` points to `nfds` pollfds it owns for the call (poll's
    // contract); every later wait goes through this slice's pointer, so no second path aliases it.
    let set = std::slice::from_raw_parts_mut(fds, nfds as usize);
    let started = Instant::now();
    loop {
        let watched = set.iter().enumerate().filter(|(_, p)| p.events & libc::POLLIN != 0).map(|(i, p)| (p.fd, i));
        let (ready, deadline) = lock().readiness(watched);
        if !ready.is_empty() {
            let r = wait(set.as_mut_ptr(), nfds, Some(Duration::ZERO));
            if r < 0 {
                return r;
            }
            let mut n = r;
            for i in ready {
                if set[i].revents == 0 {
                    n += 1;
                }
                set[i].revents |= libc::POLLIN;
            }
            return n;
        }
        let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
        let w = shorter(left, deadline);
        let r = wait(set.as_mut_ptr(), nfds, w);
        if r != 0 || left.is_some_and(|l| Some(l) == w) || deadline.is_none() {
            return r;
        }
    }
}

/// epoll_ctl(2), remembering which fds are registered for input (and their data) so that
/// [`epoll_wait`] can report a listener whose held connection was released.
///
/// # Safety
/// The program's epoll_ctl() arguments, with epoll_ctl(2)'s contract.
#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, event: *mut libc::epoll_event) -> c_int {
    let r = (real().epoll_ctl)(epfd, op, fd, event);
    if r == 0 {
        let input = (op == libc::EPOLL_CTL_ADD || op == libc::EPOLL_CTL_MOD)
            && !event.is_null()
            && (*event).events & libc::EPOLLIN as u32 != 0;
        let mut st = lock();
        if input {
            st.epoll.insert(fd, (epfd, (*event).u64));
        } else {
            st.epoll.remove(&fd);
        }
    }
    r
}

/// epoll_wait(2): as [`poll`], for the listeners registered in `epfd`; a ready connection is
/// reported as EPOLLIN with the program's data (also under edge triggering: it is new input).
///
/// # Safety
/// The program's epoll_wait() arguments, with epoll_wait(2)'s contract.
#[no_mangle]
pub unsafe extern "C" fn epoll_wait(epfd: c_int, events: *mut libc::epoll_event, max: c_int, timeout: c_int) -> c_int {
    if events.is_null() || max <= 0 || !lock().sched.any_pending() {
        return (real().epoll_wait)(epfd, events, max, timeout);
    }
    let timeout = (timeout >= 0).then(|| Duration::from_millis(timeout as u64));
    let started = Instant::now();
    loop {
        let mut st = lock();
        let watched: Vec<(c_int, u64)> = st
            .epoll
            .iter()
            .filter(|(_, &(via, _))| sock::same_open_file(via, epfd))
            .map(|(&fd, &(_, data))| (fd, data))
            .collect();
        let (ready, deadline) = st.readiness(watched);
        drop(st);
        if !ready.is_empty() {
            let out = std::slice::from_raw_parts_mut(events, max as usize);
            let k = ready.len().min(out.len());
            for (slot, data) in out.iter_mut().zip(ready) {
                *slot = libc::epoll_event { events: libc::EPOLLIN as u32, u64: data };
            }
            let more = if k < out.len() { (real().epoll_wait)(epfd, events.add(k), max - k as c_int, 0) } else { 0 };
            return k as c_int + more.max(0);
        }
        let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
        let w = shorter(left, deadline);
        let r = (real().epoll_wait)(epfd, events, max, w.map_or(-1, ms_ceil));
        if r != 0 || left.is_some_and(|l| Some(l) == w) || deadline.is_none() {
            return r;
        }
    }
}

fn shorter(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// connect(2); with `BOOTSIM_HOST=H` an unbound IPv4 socket dialling a loopback address is
/// first bound to 127.0.0.H, so the accepting side knows the caller's host as on the wire.
///
/// # Safety
/// The program's connect() arguments, with connect(2)'s contract.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    if let Some(h) = lock().host.filter(|&h| h != 1) {
        sock::bind_loopback_source(fd, addr, len, h);
    }
    (real().connect)(fd, addr, len)
}

/// Milliseconds for poll-like calls, rounded up (a wait of 10 µs must not become a busy 0).
fn ms_ceil(d: Duration) -> c_int {
    d.as_micros().div_ceil(1000).min(i32::MAX as u128) as c_int
}
