//! The sending half: K short-lived connections in a tight burst, like bootstrap sends.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::drain::{drain_txq, DrainSummary, DrainWait};
use super::{ProbeError, PAYLOAD_LEN};

/// How long one `connect` may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the first connection retries while the receiver is not listening yet.
pub const READY_WAIT: Duration = Duration::from_secs(5);

/// What the sending half measured.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ConnectReport {
    /// Connections made.
    pub connections: u32,
    /// Drain waits, when draining.
    pub drain: Option<DrainSummary>,
    /// Wall time of the burst, in microseconds.
    pub elapsed_us: u64,
}

impl std::fmt::Display for ConnectReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sent {} connections in {:.1} ms", self.connections, self.elapsed_us as f64 / 1e3)?;
        if let Some(d) = &self.drain {
            write!(f, "; {}", super::report::DrainLine(d))?;
        }
        Ok(())
    }
}

/// The frame connection `idx` carries: `[u32 idx][u32 len]` little-endian, then `len` bytes.
pub fn frame(idx: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + PAYLOAD_LEN);
    out.extend_from_slice(&idx.to_le_bytes());
    out.extend_from_slice(&(PAYLOAD_LEN as u32).to_le_bytes());
    out.resize(8 + PAYLOAD_LEN, idx as u8);
    out
}

/// Makes `k` connections to `addr`, one after another: connect, write the frame (with
/// TCP_NODELAY), drain the send queue when `drain` gives a bound, close. The first connect
/// retries for [`READY_WAIT`] while refused, so the listener may start a little later.
pub fn connect(addr: SocketAddr, k: u32, drain: Option<Duration>) -> Result<ConnectReport, ProbeError> {
    let start = Instant::now();
    let mut outcomes: Vec<DrainWait> = Vec::new();
    for idx in 0..k {
        let ctx = |what: &'static str| move |e| ProbeError::io(format!("connection {idx} to {addr}: {what}"), e);
        let mut stream = if idx == 0 {
            connect_first(addr).map_err(ctx("connect"))?
        } else {
            TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).map_err(ctx("connect"))?
        };
        stream.set_nodelay(true).map_err(ctx("TCP_NODELAY"))?;
        stream.write_all(&frame(idx)).map_err(ctx("write"))?;
        if let Some(bound) = drain {
            outcomes.push(drain_txq(stream.as_raw_fd(), bound).map_err(ctx("TIOCOUTQ"))?);
        }
        drop(stream);
    }
    Ok(ConnectReport {
        connections: k,
        drain: drain.map(|bound| DrainSummary::from_outcomes(bound, &outcomes)),
        elapsed_us: start.elapsed().as_micros() as u64,
    })
}

fn connect_first(addr: SocketAddr) -> io::Result<TcpStream> {
    let deadline = Instant::now() + READY_WAIT;
    loop {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_layout() {
        let f = frame(0x0102_0304);
        assert_eq!(f.len(), 72);
        assert_eq!(&f[..8], &[4, 3, 2, 1, 64, 0, 0, 0]);
        assert!(f[8..].iter().all(|&b| b == 4));
    }
}
