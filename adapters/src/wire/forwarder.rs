//! The wire loop: `ppoll` over the hosts' TUN fds and a stop eventfd, packets handed to the
//! [`Tracker`], held packets released when their deadline comes, and a clean shutdown.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Instant;

use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::time::TimeSpec;

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
    stop: Arc<EventFd>,
    join: Option<JoinHandle<Result<WireReport, WireError>>>,
}

impl Forwarder {
    /// Starts the loop over `tuns`, where `tuns[i]` belongs to host `i + 1`.
    pub fn spawn(tuns: Vec<OwnedFd>, tracker: Tracker) -> Result<Forwarder, WireError> {
        let stop = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(|e| WireError::io("eventfd", e.into()))?;
        let stop = Arc::new(stop);
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
        if let Err(e) = self.stop.write(1) {
            tracing::warn!(error = %e, "wire: could not signal stop");
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

fn run(mut eps: Vec<Endpoint>, stop: &EventFd, mut tracker: Tracker) -> Result<WireReport, WireError> {
    let mut buf = vec![0u8; BUF_LEN];
    let mut out = Vec::new();
    let mut which: Vec<usize> = Vec::with_capacity(eps.len());
    let mut ready: Vec<PollFlags> = Vec::with_capacity(eps.len() + 1);
    loop {
        tracker.on_timer(Instant::now(), &mut out);
        deliver(&eps, &mut out, &mut tracker);
        which.clear();
        let mut pfds = vec![PollFd::new(stop.as_fd(), PollFlags::POLLIN)];
        for (i, ep) in eps.iter().enumerate().filter(|(_, ep)| ep.alive) {
            pfds.push(PollFd::new(ep.fd.as_fd(), PollFlags::POLLIN));
            which.push(i);
        }
        let timeout =
            tracker.next_deadline().map(|at| TimeSpec::from_duration(at.saturating_duration_since(Instant::now())));
        match ppoll(&mut pfds, timeout, None) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(WireError::io("ppoll on the TUN fds", e.into())),
        }
        ready.clear();
        ready.extend(pfds.iter().map(|p| p.revents().unwrap_or(PollFlags::empty())));
        drop(pfds);
        if !ready[0].is_empty() {
            break;
        }
        for (&revents, &i) in ready[1..].iter().zip(&which) {
            if revents.contains(PollFlags::POLLIN) {
                for _ in 0..BATCH {
                    match nix::unistd::read(eps[i].fd.as_fd(), &mut buf).map_err(io::Error::from) {
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
            } else if revents.intersects(PollFlags::POLLERR | PollFlags::POLLHUP | PollFlags::POLLNVAL) {
                tracing::debug!(host = i + 1, ?revents, "wire: host's TUN gone");
                eps[i].alive = false;
            }
        }
    }
    Ok(tracker.finish(Instant::now()))
}

/// Writes the pending deliveries, in order; one write injects one packet into that
/// namespace's stack, which processes it before the write returns.
fn deliver(eps: &[Endpoint], out: &mut Vec<Delivery>, tracker: &mut Tracker) {
    for d in out.drain(..) {
        let Some(ep) = eps.get(usize::from(d.to).wrapping_sub(1)).filter(|ep| ep.alive) else {
            tracker.count_write_error();
            continue;
        };
        let n = nix::unistd::write(&ep.fd, &d.packet);
        if let Err(e) = n {
            tracing::debug!(host = d.to, error = %e, "wire: write failed");
            tracker.count_write_error();
        }
    }
}
