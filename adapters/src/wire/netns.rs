//! A fresh network namespace on its own OS thread, with `lo` up and one TUN device
//! (`IFF_TUN | IFF_NO_PI`) addressed and up. The TUN fd goes back to the caller (the wire).
//!
//! The namespace lives as long as a thread in it (or a socket of it) does; its devices
//! vanish with it. Nothing outside it is touched.

use std::ffi::{CStr, CString};
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};

use super::WireError;

/// How to set up the TUN device inside the namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetnsConfig {
    /// Device name (at most 15 bytes).
    pub ifname: String,
    /// The device's address.
    pub addr: Ipv4Addr,
    /// Prefix length of the device's subnet (24 for a /24).
    pub prefix_len: u8,
}

/// A thread running in its own network namespace.
#[derive(Debug)]
pub struct NetnsThread<R> {
    handle: JoinHandle<Option<R>>,
}

impl<R> NetnsThread<R> {
    /// Waits for the thread's closure and returns its result.
    pub fn join(self) -> Result<R, WireError> {
        match self.handle.join() {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Err(WireError::Panicked("network namespace thread (setup)".into())),
            Err(_) => Err(WireError::Panicked("network namespace thread".into())),
        }
    }
}

/// Spawns a thread that enters a new network namespace, sets it up per `cfg`, hands back the
/// TUN fd (non-blocking; reading it gives the packets the namespace sends) and then runs `f`.
/// Threads that `f` spawns stay in the namespace.
pub fn spawn_in_netns<F, R>(cfg: NetnsConfig, f: F) -> Result<(OwnedFd, NetnsThread<R>), WireError>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let (tx, rx) = mpsc::sync_channel::<Result<OwnedFd, WireError>>(1);
    let handle = thread::Builder::new()
        .name(format!("netns-{}", cfg.addr))
        .spawn(move || -> Option<R> {
            let setup = setup(&cfg).map_err(|(step, source)| WireError::Setup { addr: cfg.addr, step, source });
            let ok = setup.is_ok();
            (tx.send(setup).is_ok() && ok).then(f)
        })
        .map_err(|e| WireError::io("spawning a namespace thread", e))?;
    match rx.recv() {
        Ok(Ok(tun)) => Ok((tun, NetnsThread { handle })),
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(e)
        }
        Err(_) => {
            let _ = handle.join();
            Err(WireError::Panicked("network namespace setup".into()))
        }
    }
}

type StepResult<T> = Result<T, (String, io::Error)>;

fn step<T>(what: &str, r: io::Result<T>) -> StepResult<T> {
    r.map_err(|e| (what.to_string(), e))
}

fn setup(cfg: &NetnsConfig) -> StepResult<OwnedFd> {
    let name = step("interface name", ifname(&cfg.ifname))?;
    // SAFETY: unshare only affects the calling thread's namespaces.
    step("unshare(CLONE_NEWNET)", cvt(unsafe { libc::unshare(libc::CLONE_NEWNET) }))?;
    let ctl = step("control socket", socket())?;
    step("bringing lo up", set_up(ctl.as_raw_fd(), c"lo"))?;
    let tun = step("opening /dev/net/tun (TUNSETIFF)", open_tun(&name))?;
    step("SIOCSIFADDR", set_addr(ctl.as_raw_fd(), &name, libc::SIOCSIFADDR, cfg.addr))?;
    let mask = u32::MAX.checked_shl(32 - u32::from(cfg.prefix_len.min(32))).unwrap_or(0);
    step("SIOCSIFNETMASK", set_addr(ctl.as_raw_fd(), &name, libc::SIOCSIFNETMASK, Ipv4Addr::from(mask)))?;
    step("SIOCSIFFLAGS (up)", set_up(ctl.as_raw_fd(), &name))?;
    Ok(tun)
}

fn ifname(name: &str) -> io::Result<CString> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("interface name `{name}` {why}"));
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(bad("must be 1..=15 bytes"));
    }
    CString::new(name).map_err(|_| bad("contains a NUL byte"))
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn socket() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the fd is owned right away.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd is fresh and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ifreq(name: &CStr) -> libc::ifreq {
    // SAFETY: ifreq is plain old data; all-zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(name.to_bytes()) {
        *dst = src as libc::c_char;
    }
    req
}

fn open_tun(name: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: plain open(2) of a constant path.
    let fd = cvt(unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) })?;
    // SAFETY: fd is fresh and ours.
    let tun = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one ifreq.
    cvt(unsafe { libc::ioctl(tun.as_raw_fd(), libc::TUNSETIFF, &mut req) })?;
    set_nonblocking(tun.as_raw_fd())?;
    Ok(tun)
}

/// Sets `O_NONBLOCK` on `fd`.
pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a caller-owned fd.
    let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(drop)
}

fn set_up(ctl: RawFd, name: &CStr) -> io::Result<()> {
    let mut req = ifreq(name);
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write one ifreq.
    cvt(unsafe { libc::ioctl(ctl, libc::SIOCGIFFLAGS, &mut req) })?;
    // SAFETY: the union's flags member was just filled in by the kernel.
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: as above.
    cvt(unsafe { libc::ioctl(ctl, libc::SIOCSIFFLAGS, &mut req) }).map(drop)
}

fn set_addr(ctl: RawFd, name: &CStr, request: libc::c_ulong, addr: Ipv4Addr) -> io::Result<()> {
    let mut req = ifreq(name);
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr { s_addr: u32::from(addr).to_be() },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size; the union member is a sockaddr.
    unsafe { std::ptr::write(std::ptr::addr_of_mut!(req.ifr_ifru.ifru_addr).cast::<libc::sockaddr_in>(), sin) };
    // SAFETY: the ioctl reads one ifreq.
    cvt(unsafe { libc::ioctl(ctl, request, &mut req) }).map(drop)
}
