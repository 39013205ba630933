//! `bootsim`: run, replay, sweep and compare bootstrap protocol variants in simulation, and run
//! the same state machines over real sockets.
// clap turns the argument docs into --help, where `[,select=S]` is syntax, not a link.
#![allow(rustdoc::broken_intra_doc_links)]

mod cli;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

/// The binary's allocator (feature `mimalloc`, on by default): on the same code, alternating
/// on a quiet host, a simulated nvshmem-init took 3 % less CPU than with glibc's at 1024 ranks
/// and 13 % less at 2048, for about 60 and 48 % more peak memory (its arenas, in huge pages
/// where the host's transparent huge pages allow them), which the case's memory estimate is
/// fitted to (`sim/src/case/memory.rs`, BENCHMARKS.md). Build with
/// `--no-default-features` to profile allocations (heaptrack sees glibc's `malloc` only). The
/// library crates leave the allocator to whoever links them.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Before any thread: SIGINT/SIGTERM/SIGHUP remove this run's temporary folders (cli/scratch.rs).
    cli::scratch::install_signal_cleanup();
    // Events go through `tracing` to stderr: warnings by default, more with RUST_LOG
    // (e.g. RUST_LOG=bootsim::trace=info mirrors --trace lines, RUST_LOG=debug the drivers).
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .init();
    let args = cli::Args::parse();
    match cli::dispatch(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bootsim: {}", cli::error_text(&e));
            ExitCode::from(cli::error_code(&e))
        }
    }
}
