//! A rank's failure that is not the protocol's but the world's (exit 3, "could not run"): its
//! listener could not be opened (the port is in use), or it could not reach the root at all
//! (nothing listens at the session address).

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bootsim_adapters::nvshmem::{DriverError, RankRun};
use bootsim_core::{Blocked, Culprit};
use bootsim_nvshmem::BootstrapError;
use bootsim_nvshmem::OpKind;

/// Why this rank's run could not be carried out, naming the address; `None` when it ran (a
/// verdict, pass or not, is then the protocol's). `root` is the session address, if any: a rank
/// that timed out checking in, with nothing listening there now, never reached a root.
pub fn could_not_run(result: &Result<RankRun, DriverError>, root: Option<SocketAddr>) -> Option<String> {
    match result.as_ref().err()? {
        DriverError::Setup(why) => Some(why.clone()),
        DriverError::Root(e @ BootstrapError::RootListen { .. }) => Some(e.to_string()),
        DriverError::Failed { error: e @ (BootstrapError::Listen { .. } | BootstrapError::Connect { .. }), .. } => {
            Some(e.to_string())
        }
        // Init timed out in connect() to the root: checking in (the only dial to the root).
        DriverError::Failed {
            error:
                BootstrapError::Timeout {
                    rank,
                    op: OpKind::Init,
                    after,
                    peer: Some(Culprit::Root),
                    blocked: Blocked::Connect,
                    ..
                },
            completed: 0,
            ..
        } => {
            let root = root?;
            // A port in the ephemeral range can connect to itself (simultaneous open) when
            // nothing listens: that is no root either.
            let refused = match TcpStream::connect_timeout(&root, Duration::from_secs(1)) {
                Err(e) => e.kind() == std::io::ErrorKind::ConnectionRefused,
                Ok(s) => matches!((s.local_addr(), s.peer_addr()), (Ok(l), Ok(p)) if l == p),
            };
            refused.then(|| {
                format!(
                    "rank {rank}: could not reach the root: nothing listens at {root} (connection refused; no check-in \
                     within {} ms: is rank 0 running, at that address and port?)",
                    after.as_millis()
                )
            })
        }
        _ => None,
    }
}
