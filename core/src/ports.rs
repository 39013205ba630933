//! Where simulated worlds put each listener, and the drain's poll interval: constants every
//! world shares (real sockets use ephemeral ports and poll the drain at the same interval).

use std::time::Duration;

use crate::ids::Listener;

/// The root's rendezvous listener in simulated worlds.
pub const ROOT_PORT: u16 = 5000;
/// A rank's peers listener (ring and point-to-point) in simulated worlds.
pub const PEERS_PORT: u16 = 7000;
/// A rank's listener for the root's successor message in simulated worlds.
pub const FROM_ROOT_PORT: u16 = 7001;

/// The simulated port of `listener`.
pub fn sim_port(listener: Listener) -> u16 {
    match listener {
        Listener::Rendezvous => ROOT_PORT,
        Listener::Peers => PEERS_PORT,
        Listener::FromRoot => FROM_ROOT_PORT,
    }
}

/// How often the drain before close reads SIOCOUTQ: 200 µs, as the proposed fix does.
pub const DRAIN_POLL: Duration = Duration::from_micros(200);
