//! `bootsim probe accept-order`: the report's standalone reproducer, on this host through the
//! userspace wire, or across two hosts of a cluster.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use bootsim_adapters::probe::{self, ProbeReport};
use bootsim_adapters::wire::Policy;

/// Arguments of `bootsim probe`.
#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    #[command(subcommand)]
    what: ProbeKind,
}

#[derive(clap::Subcommand, Debug)]
enum ProbeKind {
    /// Many short-lived connections in a tight burst; accept order compared with connect order.
    AcceptOrder(AcceptOrderArgs),
}

#[derive(clap::Args, Debug)]
struct AcceptOrderArgs {
    /// Connections in the burst.
    #[arg(long, short = 'k', default_value_t = 300)]
    connections: u32,
    /// Drain each connection's send queue (SIOCOUTQ) before close, bounded by this many ms.
    #[arg(long, value_name = "MS", num_args = 0..=1, default_missing_value = "1000")]
    drain: Option<u64>,
    /// Both ends here, each in its own network namespace behind the userspace wire (needs root).
    #[arg(long, conflicts_with_all = ["listen", "connect"])]
    local: bool,
    /// The wire's packet policy for --local: none, hold=DUR[,select=...], release-on-next[=DUR].
    #[arg(long, default_value = "none", requires = "local")]
    wire: String,
    /// Receive the burst on this HOST:PORT (run it first, on the receiving host).
    #[arg(long, value_name = "HOST:PORT", value_parser = super::host_port)]
    listen: Option<SocketAddr>,
    /// Send the burst to this HOST:PORT (the other host's --listen), e.g. node002:7777.
    #[arg(long, value_name = "HOST:PORT", value_parser = super::host_port)]
    connect: Option<SocketAddr>,
    /// One JSON object instead of the summary line.
    #[arg(long)]
    json: bool,
}

/// Runs the probe; exit 0 when it ran (the order is a measurement, not a verdict).
pub fn probe(a: ProbeArgs) -> anyhow::Result<ExitCode> {
    let ProbeKind::AcceptOrder(a) = a.what;
    if a.connections == 0 {
        bail!("--connections must be at least 1");
    }
    let drain = a.drain.map(Duration::from_millis);
    let print = |line: String, json: String| {
        println!("{}", if a.json { json } else { line });
    };
    if a.local {
        let policy: Policy = a.wire.parse().with_context(|| format!("--wire '{}'", a.wire))?;
        bootsim_adapters::wire::wire_available()
            .map_err(|why| super::runtime(anyhow::anyhow!("--local needs the userspace wire: {why}")))?;
        let report: ProbeReport = probe::run_local(a.connections, drain, policy).map_err(super::runtime)?;
        print(report.to_string(), serde_json::to_string(&report)?);
    } else if let Some(addr) = a.listen {
        let heard = probe::listen(addr, a.connections).map_err(super::runtime)?;
        print(heard.to_string(), serde_json::to_string(&heard)?);
    } else if let Some(addr) = a.connect {
        let sent = probe::connect(addr, a.connections, drain).map_err(super::runtime)?;
        print(sent.to_string(), serde_json::to_string(&sent)?);
    } else {
        bail!("say where: --local, --listen ADDR (receiving host) or --connect ADDR (sending host)");
    }
    Ok(ExitCode::SUCCESS)
}
