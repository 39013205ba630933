//! `bootsim`: run, replay, sweep and compare bootstrap protocol variants in simulation.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Args::parse();
    match cli::dispatch(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bootsim: {e:#}");
            ExitCode::from(2)
        }
    }
}
