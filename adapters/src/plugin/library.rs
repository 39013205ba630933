//! A loaded UID bootstrap plugin and one rank's handle on it.
//!
//! Every call into the plugin blocks (NVSHMEM's sockets are blocking and have no timeout), so a
//! [`PluginRank`] is meant to live in a process of its own: the parent bounds it
//! ([`super::supervise`]).

use std::ffi::c_int;
use std::path::{Path, PathBuf};

use super::abi::{self, Handle, InitFn, PreInitFn, UniqueIdArgs};
use super::PluginError;

/// The unique ID's size.
pub const UID_LEN: usize = 128;

/// A `nvshmem_bootstrap_uid.so*` opened with `dlopen`.
pub struct Plugin {
    lib: libloading::Library,
    path: PathBuf,
    abi: c_int,
}

impl Plugin {
    /// Opens the plugin at `path`; `abi` is the NVSHMEM ABI version to present
    /// ([`abi::abi_version`]; 30000 when unknown: every 3.x plugin accepts 30000..=39999).
    pub fn open(path: &Path, abi: c_int) -> Result<Plugin, PluginError> {
        // SAFETY: loading a shared object runs its initialisers; the UID plugin's only touch
        // libc and libstdc++ state.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| PluginError::Load { path: path.display().to_string(), reason: e.to_string() })?;
        Ok(Plugin { lib, path: path.to_path_buf(), abi })
    }

    /// Where it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `nvshmemi_bootstrap_plugin_pre_init` and returns a handle ready for init.
    pub fn pre_init(&self) -> Result<PluginRank<'_>, PluginError> {
        let pre_init: libloading::Symbol<PreInitFn> = self.symbol(b"nvshmemi_bootstrap_plugin_pre_init\0")?;
        let mut handle = Box::new(zeroed_handle());
        // SAFETY: `handle` is a valid, zeroed `bootstrap_handle_v1` that outlives the plugin's use.
        let rc = unsafe { pre_init(&mut *handle, self.abi) };
        if rc != 0 {
            return Err(PluginError::Call { call: "pre_init", rc });
        }
        Ok(PluginRank { plugin: self, handle, initialized: false })
    }

    fn symbol<T>(&self, name: &[u8]) -> Result<libloading::Symbol<'_, T>, PluginError> {
        // SAFETY: the symbol's type is the one NVSHMEM's plugin ABI declares for that name.
        unsafe { self.lib.get(name) }.map_err(|e| PluginError::Load {
            path: self.path.display().to_string(),
            reason: format!("no {}: {e}", String::from_utf8_lossy(&name[..name.len() - 1])),
        })
    }
}

fn zeroed_handle() -> Handle {
    Handle {
        version: 0,
        pg_rank: 0,
        pg_size: 0,
        mype_node: 0,
        npes_node: 0,
        allgather: None,
        alltoall: None,
        barrier: None,
        global_exit: None,
        finalize: None,
        show_info: None,
        pre_init_ops: std::ptr::null_mut(),
        comm_state: std::ptr::null_mut(),
    }
}

/// One rank's `bootstrap_handle_v1`.
pub struct PluginRank<'p> {
    plugin: &'p Plugin,
    handle: Box<Handle>,
    initialized: bool,
}

impl PluginRank<'_> {
    /// `handle->pre_init_ops->get_unique_id`: fills a unique ID and starts the root thread in
    /// this process (rank 0's job).
    pub fn unique_id(&mut self) -> Result<[u8; UID_LEN], PluginError> {
        let mut uid = [0u8; UID_LEN];
        // SAFETY: pre_init set `pre_init_ops` (checked non-null) and `uid` is 128 writable bytes.
        let get = unsafe { self.handle.pre_init_ops.as_ref() }
            .and_then(|ops| ops.get_unique_id)
            .ok_or(PluginError::Missing("pre_init_ops->get_unique_id"))?;
        let rc = unsafe { get(uid.as_mut_ptr().cast()) };
        if rc != 0 {
            return Err(PluginError::Call { call: "get_unique_id", rc });
        }
        Ok(uid)
    }

    /// `nvshmemi_bootstrap_plugin_init` with the unique ID: the whole bootstrap (check-in,
    /// ring, address allgather).
    pub fn init(&mut self, uid: &[u8; UID_LEN], rank: u32, nranks: u32) -> Result<(), PluginError> {
        let init: libloading::Symbol<InitFn> = self.plugin.symbol(b"nvshmemi_bootstrap_plugin_init\0")?;
        let mut uid = *uid;
        let mut args = UniqueIdArgs {
            version: abi::UNIQUEID_ARGS_VERSION,
            id: uid.as_mut_ptr().cast(),
            myrank: to_c(rank, "rank")?,
            nranks: to_c(nranks, "nranks")?,
        };
        // SAFETY: `args` and `uid` live through the call; the plugin copies what it keeps.
        let rc = unsafe { init((&mut args as *mut UniqueIdArgs).cast(), &mut *self.handle, self.plugin.abi) };
        if rc != 0 {
            return Err(PluginError::Call { call: "init", rc });
        }
        self.initialized = true;
        Ok(())
    }

    /// `handle->allgather` of `mine` (the same length on every rank); returns `nranks` slices.
    pub fn allgather(&mut self, mine: &[u8]) -> Result<Vec<u8>, PluginError> {
        let f = self.handle.allgather.ok_or(PluginError::Missing("allgather"))?;
        let mut out = vec![0u8; mine.len() * self.nranks()];
        let rc = unsafe {
            // SAFETY: `out` holds nranks slices of `mine.len()` bytes, as the ABI requires.
            f(mine.as_ptr().cast(), out.as_mut_ptr().cast(), to_c(mine.len(), "bytes")?, &mut *self.handle)
        };
        if rc != 0 {
            return Err(PluginError::Call { call: "allgather", rc });
        }
        Ok(out)
    }

    /// `handle->alltoall` of `chunks` (`nranks` equal chunks); the result is zero-initialised,
    /// as NVSHMEM's callers calloc it, so a short copy shows as zeros.
    pub fn alltoall(&mut self, chunks: &[u8]) -> Result<Vec<u8>, PluginError> {
        let f = self.handle.alltoall.ok_or(PluginError::Missing("alltoall"))?;
        let n = self.nranks();
        if !chunks.len().is_multiple_of(n) {
            return Err(PluginError::Usage(format!("alltoall of {} bytes over {n} ranks", chunks.len())));
        }
        let mut out = vec![0u8; chunks.len()];
        let rc = unsafe {
            // SAFETY: both buffers hold nranks chunks of `len / nranks` bytes.
            f(chunks.as_ptr().cast(), out.as_mut_ptr().cast(), to_c(chunks.len() / n, "bytes")?, &mut *self.handle)
        };
        if rc != 0 {
            return Err(PluginError::Call { call: "alltoall", rc });
        }
        Ok(out)
    }

    /// `handle->barrier`.
    pub fn barrier(&mut self) -> Result<(), PluginError> {
        let f = self.handle.barrier.ok_or(PluginError::Missing("barrier"))?;
        // SAFETY: the handle was initialised by init.
        let rc = unsafe { f(&mut *self.handle) };
        if rc != 0 {
            return Err(PluginError::Call { call: "barrier", rc });
        }
        Ok(())
    }

    /// 3.8.0 only: presets the tag counter `reserve_tags` takes from, to reach its limit
    /// (2^31 - 1) in a test. Refused unless the state's rank field reads this rank (the layout
    /// of 3.8.0, read from its machine code).
    pub fn set_tag_counter_3_8(&mut self, value: u64, rank: u32) -> Result<(), PluginError> {
        let state = self.handle.comm_state.cast::<u8>();
        if !self.initialized || state.is_null() {
            return Err(PluginError::Usage("the tag counter exists only after init".into()));
        }
        // SAFETY: comm_state points at the plugin's state struct, larger than 0x150 bytes in 3.8.0;
        // the rank field is checked before the counter is written.
        unsafe {
            let seen = std::ptr::read_unaligned(state.add(abi::RANK_OFFSET_3_8).cast::<c_int>());
            if seen != to_c(rank, "rank")? {
                return Err(PluginError::Usage(format!(
                    "this plugin's state does not have 3.8.0's layout (rank field reads {seen}, not {rank})"
                )));
            }
            std::ptr::write_unaligned(state.add(abi::TAG_COUNTER_OFFSET_3_8).cast::<u64>(), value);
        }
        Ok(())
    }

    fn nranks(&self) -> usize {
        usize::try_from(self.handle.pg_size).unwrap_or(0).max(1)
    }
}

impl Drop for PluginRank<'_> {
    fn drop(&mut self) {
        if let (true, Some(f)) = (self.initialized, self.handle.finalize) {
            // SAFETY: the handle was initialised; finalize closes its sockets.
            unsafe { f(&mut *self.handle) };
        }
    }
}

fn to_c<T: TryInto<c_int> + Copy + std::fmt::Display>(v: T, what: &str) -> Result<c_int, PluginError> {
    v.try_into().map_err(|_| PluginError::Usage(format!("{what} {v} does not fit a C int")))
}
