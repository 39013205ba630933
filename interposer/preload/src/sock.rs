//! The socket calls the library makes for itself, each wrapped so that the rest is safe code.
//! Raw fds stay raw: the program owns the numbers it gets from accept().

use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::{Duration, Instant};

use libc::{c_int, sockaddr, sockaddr_storage, socklen_t};

use crate::real::real;

/// The calling thread's errno.
pub fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Sets the calling thread's errno (what the program reads after a -1).
pub fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno slot, valid for the thread's life.
    unsafe { *libc::__errno_location() = e }
}

/// A socket address as the kernel gave it, kept to hand back to the program.
#[derive(Clone, Copy)]
pub struct RawAddr {
    storage: sockaddr_storage,
    len: socklen_t,
}

impl RawAddr {
    fn empty() -> Self {
        // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid (AF_UNSPEC) value.
        RawAddr { storage: unsafe { zeroed() }, len: size_of::<sockaddr_storage>() as socklen_t }
    }

    /// As a Rust address (IPv4 and IPv6 only).
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        let p = &self.storage as *const sockaddr_storage;
        match c_int::from(self.storage.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in, which it is large
                // and aligned enough for.
                let a = unsafe { &*(p as *const libc::sockaddr_in) };
                let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
                Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(a.sin_port))))
            }
            libc::AF_INET6 => {
                // SAFETY: as above, for sockaddr_in6.
                let a = unsafe { &*(p as *const libc::sockaddr_in6) };
                let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
                Some(SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(a.sin6_port), 0, a.sin6_scope_id)))
            }
            _ => None,
        }
    }

    /// Copies it to the program's `addr`/`addrlen` as accept(2) does: truncated to the
    /// buffer, `*addrlen` set to the full length; nothing when `addr` is null.
    ///
    /// # Safety
    /// `addr` and `len` are the program's accept() arguments: null, or valid for writing
    /// `*len` bytes and one socklen_t.
    pub unsafe fn copy_out(&self, addr: *mut sockaddr, len: *mut socklen_t) {
        if addr.is_null() || len.is_null() {
            return;
        }
        let n = (*len).min(self.len) as usize;
        std::ptr::copy_nonoverlapping(&self.storage as *const _ as *const u8, addr as *mut u8, n);
        *len = self.len;
    }
}

/// What identifies a listening TCP socket: its inode (so a reused fd number is noticed) and
/// its local address.
pub fn tcp_listener(fd: c_int) -> Option<(u64, SocketAddr)> {
    // SAFETY: fstat writes into the zeroed struct we own.
    let mut st: libc::stat = unsafe { zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return None;
    }
    if sockopt(fd, libc::SO_ACCEPTCONN)? != 1 || sockopt(fd, libc::SO_TYPE)? != libc::SOCK_STREAM {
        return None;
    }
    let mut a = RawAddr::empty();
    // SAFETY: getsockname writes at most a.len bytes into storage we own, and the length.
    if unsafe { libc::getsockname(fd, &mut a.storage as *mut _ as *mut sockaddr, &mut a.len) } != 0 {
        return None;
    }
    Some((st.st_ino, a.socket_addr()?))
}

fn sockopt(fd: c_int, opt: c_int) -> Option<c_int> {
    let mut v: c_int = 0;
    let mut len = size_of::<c_int>() as socklen_t;
    // SAFETY: an int-valued SOL_SOCKET option into an int we own.
    let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, opt, &mut v as *mut _ as *mut libc::c_void, &mut len) };
    (r == 0).then_some(v)
}

/// Whether the fd has O_NONBLOCK.
pub fn nonblocking(fd: c_int) -> bool {
    // SAFETY: F_GETFL has no memory arguments.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    fl >= 0 && fl & libc::O_NONBLOCK != 0
}

/// Gives an accepted fd the flags the program asked accept4() for (it was taken with
/// SOCK_CLOEXEC only, so a held connection never leaks into an exec'd child).
pub fn apply_accept_flags(fd: c_int, flags: c_int) {
    // SAFETY: fcntl flag calls on an fd this library owns until it returns it.
    unsafe {
        if flags & libc::SOCK_NONBLOCK != 0 {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        if flags & libc::SOCK_CLOEXEC == 0 {
            libc::fcntl(fd, libc::F_SETFD, 0);
        }
    }
}

/// Waits up to `ms` (-1: forever) for `fd` to be readable, through the real poll.
pub fn wait_readable(fd: c_int, ms: c_int) -> c_int {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd we own.
    unsafe { (real().poll)(&mut p, 1, ms) }
}

/// One connection from the kernel's queue without blocking: `Ok(None)` when it is empty.
pub fn accept_pending(fd: c_int) -> Result<Option<(c_int, RawAddr)>, c_int> {
    loop {
        if wait_readable(fd, 0) <= 0 {
            return Ok(None);
        }
        let mut a = RawAddr::empty();
        // SAFETY: accept4 writes at most a.len bytes into storage we own, and the length.
        let nfd =
            unsafe { (real().accept4)(fd, &mut a.storage as *mut _ as *mut sockaddr, &mut a.len, libc::SOCK_CLOEXEC) };
        if nfd >= 0 {
            return Ok(Some((nfd, a)));
        }
        match errno() {
            libc::EAGAIN | libc::ECONNABORTED | libc::EINTR => continue,
            e => return Err(e),
        }
    }
}

/// Up to `n` of the connection's first bytes, left in place (MSG_PEEK), waiting at most `wait`
/// for them to arrive.
pub fn peek(fd: c_int, n: usize, wait: Duration) -> Vec<u8> {
    let until = Instant::now() + wait;
    let mut buf = vec![0u8; n];
    loop {
        // SAFETY: recv writes at most n bytes into buf.
        let got =
            unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, n, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        let left = until.saturating_duration_since(Instant::now());
        if got == n as isize || got == 0 || left.is_zero() || (got < 0 && errno() != libc::EAGAIN) {
            buf.truncate(got.max(0) as usize);
            return buf;
        }
        // More may come: wait for readability (a partial header wakes at once; back off).
        if got > 0 {
            std::thread::sleep(Duration::from_micros(200).min(left));
        } else {
            wait_readable(fd, left.as_millis().clamp(1, i32::MAX as u128) as c_int);
        }
    }
}

/// Binds an unbound IPv4 socket about to connect to a loopback address to 127.0.0.HOST, so
/// the peer sees which host it comes from (port 0: the kernel picks it, as connect would).
///
/// # Safety
/// `addr` and `len` are the program's connect() arguments.
pub unsafe fn bind_loopback_source(fd: c_int, addr: *const sockaddr, len: socklen_t, host: u8) {
    if addr.is_null()
        || (len as usize) < size_of::<libc::sockaddr_in>()
        || c_int::from((*addr).sa_family) != libc::AF_INET
    {
        return;
    }
    let dst = &*(addr as *const libc::sockaddr_in);
    if u32::from_be(dst.sin_addr.s_addr) >> 24 != 127 {
        return;
    }
    let mut cur = RawAddr::empty();
    if libc::getsockname(fd, &mut cur.storage as *mut _ as *mut sockaddr, &mut cur.len) != 0 {
        return;
    }
    if !matches!(cur.socket_addr(), Some(SocketAddr::V4(a)) if a.port() == 0 && a.ip().is_unspecified()) {
        return;
    }
    let mut src: libc::sockaddr_in = zeroed();
    src.sin_family = libc::AF_INET as libc::sa_family_t;
    src.sin_addr.s_addr = u32::from(Ipv4Addr::new(127, 0, 0, host)).to_be();
    libc::bind(fd, &src as *const _ as *const sockaddr, size_of::<libc::sockaddr_in>() as socklen_t);
}

/// Whether fds `a` and `b` of this process are the same open file (an epoll instance and its
/// dup), by kcmp(2); where kcmp is not allowed, assumed so (one epoll instance per program is
/// the common case).
pub fn same_open_file(a: c_int, b: c_int) -> bool {
    if a == b {
        return true;
    }
    const KCMP_FILE: libc::c_long = 0;
    // SAFETY: kcmp compares two fds of this process; it has no memory arguments.
    let r = unsafe {
        let pid = libc::getpid() as libc::c_long;
        libc::syscall(libc::SYS_kcmp, pid, pid, KCMP_FILE, a as libc::c_long, b as libc::c_long)
    };
    r <= 0
}

/// Closes an fd the library took and will not hand over.
pub fn close(fd: c_int) {
    // SAFETY: the fd was accepted by this library and never given to the program.
    unsafe { libc::close(fd) };
}
