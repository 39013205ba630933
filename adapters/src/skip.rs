//! The one skip rule (crate bootsim-skip): a test whose real part cannot run here fails under
//! CI and is a counted `SKIPPED` line elsewhere; plus the wire's need.

pub use bootsim_skip::{can_run, under_ci, SKIP_LOG};

/// [`can_run`] for the userspace wire (CAP_NET_ADMIN, CAP_SYS_ADMIN and /dev/net/tun).
pub fn wire_can_run() -> bool {
    can_run("wire", crate::wire::wire_available())
}
