//! The exported functions that take the place of libc's in the program.

use std::time::{Duration, Instant};

use libc::{c_int, nfds_t, pollfd, sockaddr, socklen_t};

use crate::real::real;
use crate::sock::{self, set_errno};
use crate::state::lock;

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
        let intake = st.intake(fd, id);
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
    if fds.is_null() || nfds == 0 || !lock().sched.any_pending() {
        return (real().poll)(fds, nfds, timeout);
    }
    let set = std::slice::from_raw_parts_mut(fds, nfds as usize);
    let started = Instant::now();
    loop {
        let mut st = lock();
        let now = st.now();
        let ds = st.sched.tick(now);
        st.log(ds);
        let mut ready = Vec::new();
        let mut pending = false;
        for (i, p) in set.iter().enumerate() {
            if let Some(l) = st.listeners.get(&p.fd).filter(|_| p.events & libc::POLLIN != 0) {
                ready.extend(st.sched.has_ready(l.id).then_some(i));
                pending |= st.sched.has_pending(l.id);
            }
        }
        let deadline = st.sched.next_deadline().filter(|_| pending).map(|d| d.saturating_sub(now));
        drop(st);
        if !ready.is_empty() {
            let r = (real().poll)(fds, nfds, 0);
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
        let left = (timeout >= 0).then(|| Duration::from_millis(timeout as u64).saturating_sub(started.elapsed()));
        let wait = match (left, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let r = (real().poll)(fds, nfds, wait.map_or(-1, ms_ceil));
        if r != 0 || left.is_some_and(|l| l <= wait.unwrap_or(l)) || !pending {
            return r;
        }
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

fn ms_ceil(d: Duration) -> c_int {
    d.as_micros().div_ceil(1000).clamp(1, i32::MAX as u128) as c_int
}
