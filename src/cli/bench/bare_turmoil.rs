//! The bare-turmoil baseline: the all-to-all pattern of short-lived connections that
//! `nvshmem-init` makes, between turmoil hosts, with no bootstrap logic and no kernel model.
//!
//! Every host binds one listener, accepts a connection from each peer (reading its few bytes to
//! EOF), and connects to every peer in turn to send a few bytes and close: `n (n - 1)`
//! connections per run. The simulation is configured as `engine=turmoil` configures it (1 ms
//! tick, zero message latency), so the difference in runs per second is our cost on top of
//! turmoil itself.

use std::io;
use std::net::Ipv4Addr;
use std::time::{Duration, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PORT: u16 = 7000;
/// As `engine=turmoil`: tokio's timer wheel has millisecond resolution.
const TICK: Duration = Duration::from_millis(1);
const PAYLOAD: [u8; 16] = [0x5a; 16];

/// One run of the pattern on `hosts` hosts: the connections made and the simulated time taken.
pub fn run(hosts: u32, seed: u64) -> (u64, Duration) {
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .epoch(UNIX_EPOCH)
        .simulation_duration(Duration::from_secs(600))
        .tick_duration(TICK)
        .min_message_latency(Duration::ZERO)
        .max_message_latency(Duration::ZERO)
        .tcp_capacity(hosts as usize + 64)
        .build();
    for h in 0..hosts {
        sim.client(format!("h{h}"), async move {
            let listener = turmoil::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, PORT)).await?;
            let acceptor = tokio::spawn(async move {
                for _ in 1..hosts {
                    let (mut s, _) = listener.accept().await?;
                    let mut buf = Vec::with_capacity(PAYLOAD.len());
                    s.read_to_end(&mut buf).await?;
                    if buf != PAYLOAD {
                        return Err(io::Error::other("short or wrong payload"));
                    }
                }
                Ok::<_, io::Error>(())
            });
            // Sequential connects, as the bootstrap's alltoall does; retry while the peer has
            // not bound yet (NVSHMEM's connect retry on "refused").
            for step in 1..hosts {
                let peer = (h + step) % hosts;
                let addr = (turmoil::lookup(format!("h{peer}")), PORT);
                let mut s = loop {
                    match turmoil::net::TcpStream::connect(addr).await {
                        Ok(s) => break s,
                        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                            tokio::time::sleep(TICK).await;
                        }
                        Err(e) => return Err(e.into()),
                    }
                };
                s.write_all(&PAYLOAD).await?;
                s.shutdown().await?;
            }
            acceptor.await.map_err(io::Error::other)??;
            Ok(())
        });
    }
    sim.run().expect("the bare turmoil baseline completes");
    (u64::from(hosts) * u64::from(hosts - 1), sim.elapsed())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_host_sends_to_every_peer() {
        assert_eq!(super::run(4, 1).0, 12);
    }
}
