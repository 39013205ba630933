//! Helpers shared by the tests that run `bootsim smoke` as processes.
#![allow(dead_code)]

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

/// A loopback port below the ephemeral range, free now, with `span - 1` free ports after it
/// (a session uses one port per iteration). Tests of one binary start apart by their seed.
pub fn free_port(seed: u16, span: u16) -> u16 {
    let start = 21_000 + ((std::process::id() as u16).wrapping_mul(7).wrapping_add(seed.wrapping_mul(97)) % 8_000);
    let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
    (start..start + 8_000).find(|p| (*p..p + span).all(free)).expect("a free loopback port")
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
