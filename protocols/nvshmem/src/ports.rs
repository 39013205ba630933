//! Where simulated worlds put each of NVSHMEM's listeners: constants every world shares (real
//! sockets use ephemeral ports).

use crate::listener::Listener;

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
