//! What the operating system and the launcher give a real rank: the SIOCOUTQ TX drain,
//! NVSHMEM's connect retry over errno (its loop, [`retry_dial`], also drives the turmoil
//! backend), interface selection and the launcher's rank/size. Linux only (`SIOCOUTQ`,
//! `getifaddrs`). The tokio sockets that use them are [`crate::tokio_sockets`].

mod connect;
mod drain;
mod ifaddr;
mod launcher;

/// Connect with NVSHMEM's retry policy: [`connect_with_retry`] under a
/// [`bootsim_core::RetryPolicy`], failing with a [`ConnectError`] whose [`GiveUp`] says why;
/// [`retry_dial`] is that loop for any async driver (turmoil's too), fed [`Attempt`]s.
pub use connect::{
    connect_with_retry, connect_with_retry_using, retry_dial, Attempt, ConnectError, DialFailed, GiveUp,
};
/// Wait for the peer to ACK everything sent: [`drain`] polls [`outq`] and
/// returns a [`DrainReport`] with a [`DrainOutcome`]; [`outq_not_sent`] is the
/// never-sent part. Defaults: [`DEFAULT_POLL_INTERVAL`], [`DEFAULT_DRAIN_TIMEOUT`].
pub use drain::{drain, outq, outq_not_sent, DrainOutcome, DrainReport, DEFAULT_DRAIN_TIMEOUT, DEFAULT_POLL_INTERVAL};
/// Pick the bootstrap interface: [`list_interfaces`] reads the host's
/// [`Interface`]s, [`select`] picks one of a [`Family`], optionally through an
/// [`IfFilter`] parsed from `NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME`.
pub use ifaddr::{list_interfaces, select, Family, IfFilter, Interface};
/// Rank and size from the launcher: [`from_env`] / [`from_process_env`] try
/// each [`Launcher`] in [`LAUNCHERS`] and give a [`LaunchInfo`] or a
/// [`LaunchError`].
pub use launcher::{from_env, from_process_env, LaunchError, LaunchInfo, Launcher, LAUNCHERS};
