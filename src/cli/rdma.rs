//! `bootsim smoke --rdma`: after the bootstrap, connect real RC QPs with the handles it
//! delivered and send a canary over each (issue 7). Needs `--features rdma` and a NIC.

use bootsim_adapters::nvshmem::{DriverError, RankRun};
use bootsim_nvshmem::Op;

/// The RDMA options of `bootsim smoke`.
#[derive(clap::Args, Debug, Clone)]
pub struct RdmaArgs {
    /// After the bootstrap, connect K RC QPs per peer with the exchanged handles and send canaries.
    #[arg(long)]
    pub rdma: bool,
    /// RDMA device (default: the first one).
    #[arg(long, requires = "rdma")]
    pub device: Option<String>,
    /// GID index (default: the port's RoCE v2 GID, IPv4-mapped preferred).
    #[arg(long, requires = "rdma")]
    pub gid_index: Option<u32>,
    /// RC QPs per peer.
    #[arg(long, requires = "rdma", default_value_t = 2)]
    pub qps_per_peer: u32,
}

/// Runs the check for one iteration; `session(ops, sub)` runs `ops` in bootstrap session `sub`
/// of this iteration (0: handle exchange, 1: barrier). `Err` is exit 2 (no device, no feature).
#[cfg(feature = "rdma")]
pub fn check(
    args: &RdmaArgs,
    rank: u32,
    nranks: u32,
    iteration: u32,
    session: &mut dyn FnMut(Vec<Op>, u32) -> Result<RankRun, DriverError>,
) -> anyhow::Result<bool> {
    use bootsim_adapters::rdma::check::{run_check, CheckError, CheckOptions};
    let opts = CheckOptions { device: args.device.clone(), gid_index: args.gid_index, qps_per_peer: args.qps_per_peer };
    let mut sub = 0;
    let mut bootstrap = |ops: Vec<Op>, _step: &'static str| -> Result<Vec<Vec<u8>>, String> {
        let run = session(ops, sub).map_err(|e| e.to_string())?;
        sub += 1;
        run.completions.into_iter().skip(1).map(|c| c.result.map_err(|e| e.to_string())).collect()
    };
    match run_check(rank, nranks, &opts, &mut bootstrap) {
        Ok(report) => {
            let clean = report.summary.is_clean();
            println!("rank {rank} iteration {iteration} rdma: {}", report.summary);
            for v in report.verdicts.iter().filter(|v| !v.verdict.is_ok()) {
                println!("rank {rank} iteration {iteration} rdma: {v}");
            }
            Ok(clean)
        }
        Err(CheckError::Rdma(e)) => Err(anyhow::anyhow!("{e}")),
        Err(e @ CheckError::Bootstrap { .. }) => {
            println!("rank {rank} iteration {iteration} rdma: {e}");
            Ok(false)
        }
    }
}

/// Without the `rdma` feature there is nothing to open: say how to get it (exit 2).
#[cfg(not(feature = "rdma"))]
pub fn check(
    _args: &RdmaArgs,
    _rank: u32,
    _nranks: u32,
    _iteration: u32,
    _session: &mut dyn FnMut(Vec<Op>, u32) -> Result<RankRun, DriverError>,
) -> anyhow::Result<bool> {
    anyhow::bail!(
        "no RDMA device found: this bootsim was built without RDMA support \
         (bash scripts/install-rdma-deps.sh && cargo build --release --features rdma)"
    )
}
