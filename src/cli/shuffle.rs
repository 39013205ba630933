//! `bootsim shuffle --policy P -- COMMAND ARGS...`: runs any dynamically linked program under
//! the accept interposer (`libbootsim_preload.so`), which hands the program its incoming
//! connections in the order P decides, and reports the interposer's decision log.
//!
//! The library is found through `BOOTSIM_PRELOAD`, else beside the `bootsim` executable
//! (`cargo build --release` at the workspace root builds both into target/release/).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{anyhow, Context};
use bootsim_interposer::{InterposerPolicy, LogSummary, HOST_ENV, LIBRARY_ENV, LIBRARY_FILE, LOG_ENV, POLICY_ENV};

/// Arguments of `bootsim shuffle`.
#[derive(clap::Args, Debug)]
pub struct ShuffleArgs {
    /// The accept-order policy: the wire's (none, hold=DUR[,select=S], release-on-next[=DUR][,select=S];
    /// S: all, even, odd, every:K[:P], nth:N, conn:N, pair:SRC>DST[:N], msg:FROM:TAG), plus
    /// permute=SEED[:WINDOW[:WAIT]] and peek=DUR.
    #[arg(long, value_name = "POLICY")]
    policy: String,
    /// Append the decision log here (default: a temporary file, summarised and removed).
    #[arg(long, value_name = "PATH")]
    log: Option<PathBuf>,
    /// This program's host number: the D of pair:S>D; outgoing loopback connections come from
    /// 127.0.0.HOST.
    #[arg(long, value_name = "H")]
    host: Option<u8>,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// The interposer library, found.
#[derive(Clone, Debug)]
pub(crate) struct Interposer {
    lib: PathBuf,
}

impl Interposer {
    /// Finds `libbootsim_preload.so`: `BOOTSIM_PRELOAD`, else beside this executable; a clear
    /// error (exit 3) naming where it looked when it is nowhere.
    pub fn locate() -> anyhow::Result<Interposer> {
        let mut tried = Vec::new();
        if let Some(p) = std::env::var_os(LIBRARY_ENV) {
            let p = PathBuf::from(p);
            if p.is_file() {
                return Ok(Interposer { lib: std::path::absolute(&p).unwrap_or(p) });
            }
            return Err(crate::cli::runtime(anyhow!("{LIBRARY_ENV}={}: no such file", p.display())));
        }
        if let Ok(exe) = std::env::current_exe() {
            // Beside the binary (target/release), one folder up (a test's target/debug/deps), or
            // where `make install` puts it (PREFIX/bin/bootsim, PREFIX/lib/bootsim/).
            let bin = exe.parent();
            let installed = bin.and_then(Path::parent).map(|p| p.join("lib/bootsim"));
            for dir in bin
                .map(Path::to_path_buf)
                .into_iter()
                .chain(bin.and_then(Path::parent).map(Path::to_path_buf))
                .chain(installed)
            {
                let p = dir.join(LIBRARY_FILE);
                if p.is_file() {
                    return Ok(Interposer { lib: p });
                }
                tried.push(p.display().to_string());
            }
        }
        Err(crate::cli::runtime(anyhow!(
            "the accept interposer {LIBRARY_FILE} is not installed (looked at {}): build it with \
             `cargo build --release` at the workspace root (it lands beside target/release/bootsim), or \
             `cargo build --release -p bootsim-preload` and copy it beside bootsim, or set {LIBRARY_ENV}=PATH",
            tried.join(", ")
        )))
    }

    /// Puts `cmd` under the interposer: policy, log file and host number.
    pub fn apply(&self, cmd: &mut Command, policy: &str, log: &Path, host: Option<u8>) {
        let mut preload = self.lib.as_os_str().to_os_string();
        if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
            preload.push(" ");
            preload.push(old);
        }
        cmd.env("LD_PRELOAD", preload).env(POLICY_ENV, policy).env(LOG_ENV, log);
        match host {
            Some(h) => cmd.env(HOST_ENV, h.to_string()),
            None => cmd.env_remove(HOST_ENV),
        };
    }
}

/// Parses an interposer policy; a bad one is usage (exit 2).
pub(crate) fn parse_policy(flag: &str, s: &str) -> anyhow::Result<InterposerPolicy> {
    s.parse::<InterposerPolicy>().map_err(|e| anyhow!("{flag} '{s}': {e}"))
}

/// The line every run without an adversary prints.
pub(crate) const NO_ADVERSARY: &str =
    "no adversary: the accept order was left as it came, and a pass without an adversary proves nothing about reordering";

/// Runs `bootsim shuffle`.
pub fn shuffle(a: ShuffleArgs) -> anyhow::Result<ExitCode> {
    let policy = parse_policy("--policy", &a.policy)?;
    let lib = Interposer::locate()?;
    let temp = match &a.log {
        Some(_) => None,
        None => Some(crate::cli::scratch::ScratchDir::new("shuffle")?),
    };
    let log = match (&a.log, &temp) {
        (Some(p), _) => p.clone(),
        (None, Some(t)) => t.path().join("accept.log"),
        (None, None) => unreachable!("one of them"),
    };
    let mut cmd = Command::new(&a.command[0]);
    cmd.args(&a.command[1..]);
    lib.apply(&mut cmd, &a.policy, &log, a.host);
    let status = cmd
        .status()
        .with_context(|| format!("starting {}", a.command[0].to_string_lossy()))
        .map_err(crate::cli::runtime)?;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let summary = LogSummary::of(&text);
    eprintln!("shuffle: policy '{policy}': {}", summary.headline());
    if summary.arrived == 0 {
        eprintln!(
            "shuffle: the interposer saw no connection: the program accepted none, is statically linked, \
             uses io_uring, or accepts in a process LD_PRELOAD does not reach"
        );
    }
    if !policy.is_adversary() {
        eprintln!("shuffle: {NO_ADVERSARY}");
    }
    if let Some(p) = &a.log {
        eprintln!("shuffle: decision log in {}", p.display());
    }
    drop(temp);
    Ok(exit_of(status))
}

/// The program's exit status as ours (128 + signal for a signal, as shells report it).
fn exit_of(s: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => ExitCode::from(c as u8),
        (None, Some(sig)) => ExitCode::from(128u8.saturating_add(sig as u8)),
        _ => ExitCode::from(crate::cli::EXIT_RUNTIME),
    }
}
