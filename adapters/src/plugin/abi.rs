//! The C ABI of NVSHMEM's bootstrap plugins, as the shipped `nvshmem_bootstrap_uid.so.3`
//! (3.4.5, 3.7.1, 3.8.0) reads it: `bootstrap_handle_v1` from NVSHMEM's
//! `src/include/internal/bootstrap_host_transport/nvshmemi_bootstrap_defines.h` and the
//! unique-ID arguments from the wheel's `include/bootstrap_device_host/nvshmem_uniqueid.h`.
//! Checked against the binaries: the handle is 88 bytes, `pre_init_ops` at +72, `comm_state` at +80.

use std::ffi::{c_int, c_void};

/// `bootstrap_init_ops_t`: what a plugin offers before init.
#[repr(C)]
pub struct InitOps {
    /// Opaque.
    pub cookie: *mut c_void,
    /// Fills the 128-byte unique ID and starts the root thread in this process.
    pub get_unique_id: Option<unsafe extern "C" fn(uid: *mut c_void) -> c_int>,
}

/// A collective taking a send buffer, a receive buffer and a per-rank (per-peer) byte count.
pub type CollectiveFn =
    unsafe extern "C" fn(send: *const c_void, recv: *mut c_void, bytes: c_int, handle: *mut Handle) -> c_int;

/// `bootstrap_handle_v1`.
#[repr(C)]
pub struct Handle {
    /// The plugin's version (30000 for every 3.x plugin).
    pub version: c_int,
    /// This rank, after init.
    pub pg_rank: c_int,
    /// World size, after init.
    pub pg_size: c_int,
    /// Left 0 by the UID plugin.
    pub mype_node: c_int,
    /// Left 0 by the UID plugin.
    pub npes_node: c_int,
    /// Ring allgather of `bytes` per rank.
    pub allgather: Option<CollectiveFn>,
    /// Pairwise-shift alltoall of `bytes` per peer.
    pub alltoall: Option<CollectiveFn>,
    /// Dissemination barrier.
    pub barrier: Option<unsafe extern "C" fn(handle: *mut Handle) -> c_int>,
    /// Left NULL by the UID plugin.
    pub global_exit: Option<unsafe extern "C" fn(status: c_int)>,
    /// Closes the listener and the ring sockets.
    pub finalize: Option<unsafe extern "C" fn(handle: *mut Handle) -> c_int>,
    /// Prints the plugin's settings.
    pub show_info: Option<unsafe extern "C" fn(handle: *mut Handle, style: c_int) -> c_int>,
    /// Set by pre-init.
    pub pre_init_ops: *mut InitOps,
    /// The plugin's state, set by init.
    pub comm_state: *mut c_void,
}

/// `nvshmemx_uniqueid_args_v1`.
#[repr(C)]
pub struct UniqueIdArgs {
    /// [`UNIQUEID_ARGS_VERSION`].
    pub version: c_int,
    /// The 128-byte unique ID.
    pub id: *mut c_void,
    /// This rank.
    pub myrank: c_int,
    /// World size.
    pub nranks: c_int,
}

/// `NVSHMEMX_UNIQUEID_ARGS_VERSION`: (1 << 16) + sizeof(nvshmemx_uniqueid_args_v1).
pub const UNIQUEID_ARGS_VERSION: c_int = (1 << 16) + std::mem::size_of::<UniqueIdArgs>() as c_int;

/// `nvshmemi_bootstrap_plugin_pre_init`.
pub type PreInitFn = unsafe extern "C" fn(handle: *mut Handle, abi_version: c_int) -> c_int;
/// `nvshmemi_bootstrap_plugin_init`.
pub type InitFn = unsafe extern "C" fn(args: *mut c_void, handle: *mut Handle, abi_version: c_int) -> c_int;

/// The ABI version NVSHMEM `major.minor.patch` passes: major*10000 + minor*100 + patch. Every 3.x
/// plugin accepts 30000..=39999 (and calls `exit(-1)` otherwise).
pub fn abi_version(major: u32, minor: u32, patch: u32) -> c_int {
    (major * 10000 + minor * 100 + patch) as c_int
}

/// 3.8.0: offset in `comm_state` of the 64-bit tag counter that `reserve_tags` takes from (read
/// from its machine code: rank at +0x138, nranks at +0x13c, magic at +0x140, counter at +0x148).
pub const TAG_COUNTER_OFFSET_3_8: usize = 0x148;
/// 3.8.0: offset of the rank in `comm_state`, to check the layout before touching the counter.
pub const RANK_OFFSET_3_8: usize = 0x138;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_the_shipped_plugins() {
        assert_eq!(size_of::<Handle>(), 88);
        assert_eq!(offset_of!(Handle, allgather), 24);
        assert_eq!(offset_of!(Handle, pre_init_ops), 72);
        assert_eq!(offset_of!(Handle, comm_state), 80);
        assert_eq!(size_of::<UniqueIdArgs>(), 24);
        assert_eq!(UNIQUEID_ARGS_VERSION, 65560);
        assert_eq!(abi_version(3, 8, 0), 30800);
    }
}
