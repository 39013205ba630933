//! The wire loop: `ppoll` over the hosts' TUN fds and a stop eventfd, packets handed to the
//! [`Tracker`], held packets released when their deadline comes, and a clean shutdown.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::flow::WireReport;
use super::tracker::{Delivery, Tracker};
use super::WireError;

/// Packets read from one TUN fd before the others get their turn.
const BATCH: usize = 64;
/// Larger than any packet a TUN device without offloads hands out.
const BUF_LEN: usize = 65536;

struct Endpoint {
    fd: OwnedFd,
    alive: bool,
}

/// The running wire thread.
pub(crate) struct Forwarder {
    stop: Arc<OwnedFd>,
    join: Option<JoinHandle<Result<WireReport, WireError>>>,
}

impl Forwarder {
    /// Starts the loop over `tuns`, where `tuns[i]` belongs to host `i + 1`.
    pub fn spawn(tuns: Vec<OwnedFd>, tracker: Tracker) -> Result<Forwarder, WireError> {
        // SAFETY: plain syscall; the fd is owned right away.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(WireError::io("eventfd", io::Error::last_os_error()));
        }
        // SAFETY: fd is fresh and ours.
        let stop = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        let eps = tuns.into_iter().map(|fd| Endpoint { fd, alive: true }).collect();
        let stop2 = Arc::clone(&stop);
        let join = thread::Builder::new()
            .name("wire".into())
            .spawn(move || run(eps, &stop2, tracker))
            .map_err(|e| WireError::io("spawning the wire thread", e))?;
        Ok(Forwarder { stop, join: Some(join) })
    }

    /// Stops the loop and returns its record (held packets are dropped and logged).
    pub fn stop(&mut self) -> Result<WireReport, WireError> {
        let Some(join) = self.join.take() else {
            return Err(WireError::Config("the wire was already stopped".into()));
        };
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd.
        let r = unsafe { libc::write(self.stop.as_raw_fd(), (&one as *const u64).cast(), 8) };
        if r != 8 {
            tracing::warn!(error = %io::Error::last_os_error(), "wire: could not signal stop");
        }
        join.join().map_err(|_| WireError::Panicked("the wire thread".into()))?
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        if self.join.is_some() {
            let _ = self.stop();
        }
    }
}

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

fn run(mut eps: Vec<Endpoint>, stop: &OwnedFd, mut tracker: Tracker) -> Result<WireReport, WireError> {
    let mut buf = vec![0u8; BUF_LEN];
    let mut out = Vec::new();
    let mut pfds: Vec<libc::pollfd> = Vec::with_capacity(eps.len() + 1);
    let mut which: Vec<usize> = Vec::with_capacity(eps.len());
    loop {
        tracker.on_timer(Instant::now(), &mut out);
        deliver(&eps, &mut out, &mut tracker);
        pfds.clear();
        which.clear();
        pfds.push(pollfd(stop.as_raw_fd()));
        for (i, ep) in eps.iter().enumerate().filter(|(_, ep)| ep.alive) {
            pfds.push(pollfd(ep.fd.as_raw_fd()));
            which.push(i);
        }
        let ts = tracker.next_deadline().map(|at| timespec(at.saturating_duration_since(Instant::now())));
        let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: pfds is a live array of pollfd of the given length; tsp is null or live.
        let r = unsafe { libc::ppoll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, tsp, std::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(WireError::io("ppoll on the TUN fds", e));
        }
        if pfds[0].revents != 0 {
            break;
        }
        for (pfd, &i) in pfds[1..].iter().zip(&which) {
            if pfd.revents & libc::POLLIN != 0 {
                for _ in 0..BATCH {
                    match read(eps[i].fd.as_raw_fd(), &mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            tracker.on_packet(Instant::now(), buf[..n].to_vec(), &mut out);
                            deliver(&eps, &mut out, &mut tracker);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            tracing::debug!(host = i + 1, error = %e, "wire: host's TUN gone");
                            eps[i].alive = false;
                            break;
                        }
                    }
                }
            } else if pfd.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                tracing::debug!(host = i + 1, revents = pfd.revents, "wire: host's TUN gone");
                eps[i].alive = false;
            }
        }
    }
    Ok(tracker.finish(Instant::now()))
}

fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd { fd, events: libc::POLLIN, revents: 0 }
}

fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: reads into a live buffer of the given length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Writes the pending deliveries, in order; one write injects one packet into that
/// namespace's stack, which processes it before the write returns.
fn deliver(eps: &[Endpoint], out: &mut Vec<Delivery>, tracker: &mut Tracker) {
    for d in out.drain(..) {
        let Some(ep) = eps.get(usize::from(d.to).wrapping_sub(1)).filter(|ep| ep.alive) else {
            tracker.count_write_error();
            continue;
        };
        // SAFETY: writes from a live buffer of the given length.
        let n = unsafe { libc::write(ep.fd.as_raw_fd(), d.packet.as_ptr().cast(), d.packet.len()) };
        if n < 0 {
            tracing::debug!(host = d.to, error = %io::Error::last_os_error(), "wire: write failed");
            tracker.count_write_error();
        }
    }
}
