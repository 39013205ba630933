//! `libbootsim_preload.so`: loaded with `LD_PRELOAD` into an unmodified, dynamically linked
//! program, it takes every pending connection of the program's TCP listeners into its own
//! queue and hands them to `accept`/`accept4` in the order `BOOTSIM_ACCEPT_POLICY` decides
//! (the logic is `bootsim_interposer::Schedule`), writing every decision to
//! `BOOTSIM_ACCEPT_LOG`.
//!
//! - `real`: the libc functions it wraps, found with `dlsym(RTLD_NEXT)`.
//! - `sock`: small safe wrappers over the socket calls it makes itself.
//! - `state`: the process's queue, listeners and log.
//! - `hooks`: the exported `accept`, `accept4`, `poll`, `ppoll`, `epoll_ctl`, `epoll_wait`
//!   and `connect`.
//!
//! Semantics kept: a blocking listener blocks until the policy hands a connection over (or a
//! hold's deadline passes: every hold has one); a non-blocking one returns `EAGAIN` while
//! everything is held; `SOCK_NONBLOCK`/`SOCK_CLOEXEC` and the peer address are as without it.
//! At exit, connections never accepted are logged `unaccepted` and closed.

#![warn(missing_docs)]

mod hooks;
mod real;
mod sock;
mod state;

/// Runs when the library is loaded: a bad policy or host number stops the program at once with
/// the reason (a silent pass-through would be a false all-clear), and the exit hook is set.
extern "C" fn on_load() {
    state::init();
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;
