//! Helpers shared by the CLI tests: running `bootsim` (and `bootsim smoke`) as processes, and
//! checking NCCL ranks run over the async driver (`nccl_ranks`).
#![allow(dead_code)]

pub mod nccl_ranks;

use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// The `bootsim` binary under test.
pub fn bootsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bootsim"))
}

/// A process's stdout and stderr together.
pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Ports handed out by [`free_port`] in this process so far (each call gets its own).
static HANDED_OUT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A loopback port below the ephemeral range, free now, with `span - 1` free ports after it
/// (a session uses one port per iteration). Each call starts its search past the ports handed
/// out before in this process, so tests of one binary do not race for one port; another
/// process may still bind it before the test does: run a session through [`on_free_port`],
/// which retries then.
pub fn free_port(seed: u16, span: u16) -> u16 {
    let taken = HANDED_OUT.fetch_add(u32::from(span), std::sync::atomic::Ordering::SeqCst);
    let offset = (std::process::id() * 7 + u32::from(seed) * 97 + taken) % 8_000;
    let start = 21_000 + offset as u16;
    let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
    let found = (start..29_000 - span).chain(21_000..start).find(|p| (*p..p + span).all(free));
    let port = found.expect("a free loopback port");
    // Past the ports probed and found busy, so the next call starts after this one.
    HANDED_OUT.fetch_add(u32::from(port.saturating_sub(start)), std::sync::atomic::Ordering::SeqCst);
    port
}

/// Runs `session` on a [`free_port`], and again on another (up to 5 tries) when a process of
/// it found its port taken meanwhile (bootsim exits 3, "Address already in use").
pub fn on_free_port(seed: u16, span: u16, mut session: impl FnMut(u16) -> Vec<Output>) -> Vec<Output> {
    let mut tries = 0;
    loop {
        let outs = session(free_port(seed, span));
        tries += 1;
        let taken = outs.iter().any(|o| o.status.code() == Some(3) && text(o).contains("Address already in use"));
        if !taken || tries == 5 {
            return outs;
        }
    }
}

/// Waits for `child` until `deadline`, killing it then; its exit code (`None`: killed).
pub fn wait_until(child: &mut Child, deadline: Instant) -> Option<i32> {
    loop {
        match child.try_wait().unwrap() {
            Some(s) => return s.code(),
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// Builds the accept interposer library beside the `bootsim` under test (a narrow `cargo test`
/// does not; a no-op when it is fresh), once per test binary; its path.
pub fn interposer() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let lib = std::path::Path::new(env!("CARGO_BIN_EXE_bootsim")).with_file_name("libbootsim_preload.so");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let st = Command::new(cargo).args(["build", "-q", "-p", "bootsim-preload"]).status().unwrap();
            assert!(st.success(), "building bootsim-preload");
            assert!(lib.exists(), "{} missing after the build", lib.display());
            lib
        })
        .clone()
}
