//! The wrapped libc functions, resolved once with `dlsym(RTLD_NEXT, name)`: the definitions
//! after this library in the lookup order, i.e. libc's. The library's own calls go through
//! these, never through its exported names (that would call itself).

use std::sync::OnceLock;

use libc::{c_int, nfds_t, pollfd, sockaddr, socklen_t};

type Accept4 = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int;
type Poll = unsafe extern "C" fn(*mut pollfd, nfds_t, c_int) -> c_int;
type Connect = unsafe extern "C" fn(c_int, *const sockaddr, socklen_t) -> c_int;
type Ppoll = unsafe extern "C" fn(*mut pollfd, nfds_t, *const libc::timespec, *const libc::sigset_t) -> c_int;
type EpollCtl = unsafe extern "C" fn(c_int, c_int, c_int, *mut libc::epoll_event) -> c_int;
type EpollWait = unsafe extern "C" fn(c_int, *mut libc::epoll_event, c_int, c_int) -> c_int;

/// libc's versions of the hooked functions.
pub struct Real {
    pub accept4: Accept4,
    pub poll: Poll,
    pub connect: Connect,
    pub ppoll: Ppoll,
    pub epoll_ctl: EpollCtl,
    pub epoll_wait: EpollWait,
}

/// The real functions (resolved on first use; a libc without them aborts with the name).
pub fn real() -> &'static Real {
    static REAL: OnceLock<Real> = OnceLock::new();
    REAL.get_or_init(|| {
        // SAFETY: each name is a NUL-terminated libc function whose C signature is the type it
        // is transmuted to (accept4(2), poll(2), connect(2)); a null result is refused before
        // the transmute (ppoll(2), epoll_ctl(2), epoll_wait(2) likewise).
        unsafe {
            Real {
                accept4: std::mem::transmute::<*mut libc::c_void, Accept4>(sym(c"accept4")),
                poll: std::mem::transmute::<*mut libc::c_void, Poll>(sym(c"poll")),
                connect: std::mem::transmute::<*mut libc::c_void, Connect>(sym(c"connect")),
                ppoll: std::mem::transmute::<*mut libc::c_void, Ppoll>(sym(c"ppoll")),
                epoll_ctl: std::mem::transmute::<*mut libc::c_void, EpollCtl>(sym(c"epoll_ctl")),
                epoll_wait: std::mem::transmute::<*mut libc::c_void, EpollWait>(sym(c"epoll_wait")),
            }
        }
    })
}

fn sym(name: &std::ffi::CStr) -> *mut libc::c_void {
    // SAFETY: dlsym with RTLD_NEXT and a valid C string has no other precondition.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if p.is_null() {
        eprintln!("bootsim-preload: libc has no {name:?}; cannot interpose");
        std::process::abort();
    }
    p
}
