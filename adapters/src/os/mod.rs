//! What the operating system and the launcher give a real rank: the SIOCOUTQ TX drain,
//! NVSHMEM's connect retry over errno (its loop, [`bootsim_driver::retry_dial`], also drives
//! the turmoil backend), interface selection and the launcher's rank/size. Linux only (`SIOCOUTQ`,
//! `getifaddrs`). The tokio sockets that use them are [`crate::tokio_sockets`].

mod connect;
mod drain;
mod ifaddr;
mod launcher;

/// Connect with NVSHMEM's retry policy: [`connect_with_retry`] under a
/// [`bootsim_core::RetryPolicy`] (the loop is [`bootsim_driver::retry_dial`]), failing with a
/// [`ConnectError`] whose [`GiveUp`] says why.
pub use connect::{connect_with_retry, connect_with_retry_using, ConnectError, GiveUp};
/// Wait for the peer to ACK everything sent: [`drain`] polls [`outq`] and
/// returns a [`bootsim_driver::DrainReport`]; [`outq_not_sent`] is the never-sent part.
/// Defaults: [`DEFAULT_POLL_INTERVAL`], [`DEFAULT_DRAIN_TIMEOUT`].
pub use drain::{drain, outq, outq_not_sent, DEFAULT_DRAIN_TIMEOUT, DEFAULT_POLL_INTERVAL};
/// Pick the bootstrap interface: [`list_interfaces`] reads the host's
/// [`Interface`]s, [`select`] picks one of a [`Family`], optionally through an
/// [`IfFilter`] parsed from `NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME`.
pub use ifaddr::{list_interfaces, select, Family, IfFilter, Interface};
/// Rank and size from the launcher: [`from_env`] / [`from_process_env`] try
/// each [`Launcher`] in [`LAUNCHERS`] and give a [`LaunchInfo`] or a
/// [`LaunchError`].
pub use launcher::{from_env, from_process_env, LaunchError, LaunchInfo, Launcher, LAUNCHERS};
