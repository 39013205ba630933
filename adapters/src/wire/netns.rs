//! A fresh network namespace on its own OS thread, with `lo` up and one TUN device
//! (`IFF_TUN | IFF_NO_PI`) addressed and up. The TUN fd goes back to the caller (the wire).
//!
//! The namespace lives as long as a thread in it (or a socket of it) does; its devices
//! vanish with it. Nothing outside it is touched.

use std::ffi::{CStr, CString};
use std::fs::OpenOptions;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::mpsc;
use std::thread::{self, JoinHandle};

use nix::sched::{unshare, CloneFlags};
use nix::sys::socket::{AddressFamily, SockFlag, SockType, SockaddrIn};

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
    // Only the calling thread's namespaces change.
    step("unshare(CLONE_NEWNET)", unshare(CloneFlags::CLONE_NEWNET).map_err(io::Error::from))?;
    let ctl = step("control socket", socket())?;
    step("bringing lo up", set_up(&ctl, c"lo"))?;
    let tun = step("opening /dev/net/tun (TUNSETIFF)", open_tun(&name))?;
    step("SIOCSIFADDR", set_addr(&ctl, &name, siocsifaddr, cfg.addr))?;
    let mask = u32::MAX.checked_shl(32 - u32::from(cfg.prefix_len.min(32))).unwrap_or(0);
    step("SIOCSIFNETMASK", set_addr(&ctl, &name, siocsifnetmask, Ipv4Addr::from(mask)))?;
    step("SIOCSIFFLAGS (up)", set_up(&ctl, &name))?;
    Ok(tun)
}

fn ifname(name: &str) -> io::Result<CString> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("interface name `{name}` {why}"));
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(bad("must be 1..=15 bytes"));
    }
    CString::new(name).map_err(|_| bad("contains a NUL byte"))
}

fn socket() -> io::Result<OwnedFd> {
    Ok(nix::sys::socket::socket(AddressFamily::Inet, SockType::Datagram, SockFlag::SOCK_CLOEXEC, None)?)
}

// The interface ioctls: each reads (and the getters and TUNSETIFF write back) one `ifreq`.
// nix's macros make them `pub`; the private module keeps them out of the crate's API.
mod ioctl {
    nix::ioctl_readwrite_bad!(tunsetiff, libc::TUNSETIFF, libc::ifreq);
    nix::ioctl_readwrite_bad!(siocgifflags, libc::SIOCGIFFLAGS, libc::ifreq);
    nix::ioctl_write_ptr_bad!(siocsifflags, libc::SIOCSIFFLAGS, libc::ifreq);
    nix::ioctl_write_ptr_bad!(siocsifaddr, libc::SIOCSIFADDR, libc::ifreq);
    nix::ioctl_write_ptr_bad!(siocsifnetmask, libc::SIOCSIFNETMASK, libc::ifreq);
}
use ioctl::{siocgifflags, siocsifaddr, siocsifflags, siocsifnetmask, tunsetiff};

/// A setter of one `ifreq` (`siocsifaddr`, `siocsifnetmask`).
type IfreqSetter = unsafe fn(libc::c_int, *const libc::ifreq) -> nix::Result<libc::c_int>;

fn ifreq(name: &CStr) -> libc::ifreq {
    // SAFETY: ifreq is plain old data; all-zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(name.to_bytes()) {
        *dst = src as libc::c_char;
    }
    req
}

/// `/dev/net/tun` (std opens it close-on-exec), non-blocking, attached to a new TUN device.
fn open_tun(name: &CStr) -> io::Result<OwnedFd> {
    let tun: OwnedFd =
        OpenOptions::new().read(true).write(true).custom_flags(libc::O_NONBLOCK).open("/dev/net/tun")?.into();
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one ifreq, a live local.
    unsafe { tunsetiff(tun.as_raw_fd(), &mut req) }?;
    Ok(tun)
}

fn set_up(ctl: &OwnedFd, name: &CStr) -> io::Result<()> {
    let mut req = ifreq(name);
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write one ifreq, a live local.
    unsafe { siocgifflags(ctl.as_raw_fd(), &mut req) }?;
    // SAFETY: the union's flags member was just filled in by the kernel.
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: as above.
    unsafe { siocsifflags(ctl.as_raw_fd(), &req) }?;
    Ok(())
}

fn set_addr(ctl: &OwnedFd, name: &CStr, set: IfreqSetter, addr: Ipv4Addr) -> io::Result<()> {
    let mut req = ifreq(name);
    let sin: libc::sockaddr_in = *SockaddrIn::from(SocketAddrV4::new(addr, 0)).as_ref();
    // SAFETY: sockaddr_in and sockaddr have the same size; the union member is a sockaddr.
    unsafe { std::ptr::write(std::ptr::addr_of_mut!(req.ifr_ifru.ifru_addr).cast::<libc::sockaddr_in>(), sin) };
    // SAFETY: the ioctl reads one ifreq, a live local.
    unsafe { set(ctl.as_raw_fd(), &req) }?;
    Ok(())
}
