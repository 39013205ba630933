//! The hardware path of the RDMA check, on ibverbs 0.9.2 (cargo feature `rdma`).
//!
//! ```text
//! let ctx = open(None)?;                                  // first device, port 1
//! let gid = ctx.choose_gid(gid_index_override)?;
//! let cfg = QpConfig::new(QpLayout::new(nranks, rank, k)?, &gid);
//! let res = ctx.resources(cfg)?;                          // PD + one CQ
//! let qps = res.create_qps()?;                            // nranks × K RC QPs
//! bootstrap.allgather(qps.extra_record().encode())        // → ExtraRecord::decode_all
//! let recv = bootstrap.alltoall(qps.send_payload(), layout.chunk_len());
//! let connected = qps.connect(&layout.decode(&recv)?)?;   // INIT→RTR→RTS, post receives
//! bootstrap.barrier();                                    // every receive is posted
//! let report = connected.exchange_canaries(DEFAULT_CANARY_DEADLINE)?;
//! ```
//!
//! The three-step borrow (`Context` → `Resources` → `QpSet`) is ibverbs' own: QPs borrow the PD
//! and CQ, which borrow the context, so they cannot live in one struct.
//!
//! # What ibverbs 0.9.2 can and cannot do (and so what this check does not test)
//!
//! * **Port 1 only** (`PORT_NUM` is a private constant): a multi-port HCA's other ports, and
//!   NVSHMEM's `NVSHMEM_HCA_LIST` port selection, are out of reach.
//! * **PSN 0 only**: `handshake` hard-codes `sq_psn = 0`, and the RQ PSN is set at build time,
//!   before any exchange; so every QP starts at PSN 0 and [`ExtraRecord::psn`] is always 0.
//!   NVSHMEM also uses fixed PSNs, so this matches it, but it means a cross-wired QP's packets
//!   carry the PSN its wrong receiver expects: the canary names its sender for that reason.
//! * **SEND/RECV only**, signalled, one SGE: no RDMA WRITE/READ, so no rkey/addr exchange and
//!   no check of NVSHMEM's one-sided path.
//! * **No traffic class, flow label, SL or hop-limit control** (`grh.hop_limit` is 0xff): a
//!   fabric that needs DSCP for lossless RoCE (NCCL_IB_TC) runs the canary in the default class.
//! * The path MTU cannot be read from the port (its attributes are private), so it is
//!   configured: [`DEFAULT_PATH_MTU`] = 1024, valid on any Ethernet MTU ≥ 1500 (NVSHMEM uses the
//!   port's active MTU instead).
//! * `handshake` reports one errno for the whole INIT → RTR → RTS sequence: the step that
//!   failed is not known (for a zeroed handle it is RTR).
//! * The GID is set through `set_gid_index`, which requires index == position in the table of
//!   valid entries ([`gid::ibverbs_addressable`]).

use std::io;
use std::time::{Duration, Instant};

use bootsim_nvshmem::QpHandle;
use ibverbs::{CompletionQueue, MemoryRegion, PreparedQueuePair, ProtectionDomain, QueuePair};

use super::canary::{self, Canary, Side};
use super::exchange::{handle_from_parts, ExchangeError, ExtraRecord, QpLayout};
use super::gid::{self, GidChoice, GidEntry, GidError, GidType};
use super::verdict::{Observation, Report, WcError};

/// RC ACK timeout exponent: 4.096 µs × 2^14 ≈ 67 ms (ibverbs' default of 4, 65 µs, is too
/// short for a loaded fabric).
pub const DEFAULT_TIMEOUT: u8 = 14;
/// Transport retries before `IBV_WC_RETRY_EXC_ERR` (the 3-bit maximum).
pub const DEFAULT_RETRY_COUNT: u8 = 7;
/// RNR retries: 7 means retry forever, so a peer that posts its receive late is not an error.
pub const DEFAULT_RNR_RETRY: u8 = 7;
/// `IBV_MTU_1024`.
pub const DEFAULT_PATH_MTU: u8 = 3;
/// Work requests per queue: one canary each way, plus slack.
pub const MAX_WR: u32 = 2;
/// How long [`Connected::exchange_canaries`] polls by default. A cross-wired send fails after
/// about (retry + 1) × 67 ms ≈ 0.5 s; the rest is slack for slow peers.
pub const DEFAULT_CANARY_DEADLINE: Duration = Duration::from_secs(5);

/// Errors of the hardware path. Per-QP failures are not errors: they are verdicts.
#[derive(Debug, thiserror::Error)]
pub enum RdmaError {
    /// `ibv_get_device_list` failed (ENOSYS without kernel RDMA support) or returned no device.
    #[error("no RDMA device found: {0}")]
    NoDevice(#[source] io::Error),
    /// A device was named but is not in the list.
    #[error("RDMA device {wanted:?} not found (available: {})", .available.join(", "))]
    DeviceNotFound {
        /// The name asked for.
        wanted: String,
        /// The names present.
        available: Vec<String>,
    },
    /// `ibv_open_device`, `ibv_query_port(1)` or the GID table query failed, or port 1 is not
    /// ACTIVE/ARMED.
    #[error("cannot open RDMA device {device} (port 1): {source}")]
    Open {
        /// Device name.
        device: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// GID selection failed.
    #[error(transparent)]
    Gid(#[from] GidError),
    /// Layout or exchange data is inconsistent.
    #[error(transparent)]
    Exchange(#[from] ExchangeError),
    /// A verbs call failed (`ibv_create_cq`, `ibv_alloc_pd`, `ibv_create_qp`, `ibv_reg_mr`,
    /// `ibv_poll_cq`).
    #[error("{what} failed: {source}")]
    Verbs {
        /// Which call.
        what: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// `ibv_post_send`/`ibv_post_recv` failed on a connected QP.
    #[error("posting the canary {side} on QP {index} failed: {source}")]
    Post {
        /// Send or receive.
        side: Side,
        /// Flat QP index.
        index: usize,
        /// The error.
        #[source]
        source: io::Error,
    },
}

fn verbs(what: &'static str) -> impl FnOnce(io::Error) -> RdmaError {
    move |source| RdmaError::Verbs { what, source }
}

/// The 16 wire-order bytes of an ibverbs GID.
fn gid_bytes(gid: &ibverbs::Gid) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&gid.subnet_prefix().to_be_bytes());
    b[8..].copy_from_slice(&gid.interface_id().to_be_bytes());
    b
}

fn to_ibverbs_gid(bytes: [u8; 16]) -> ibverbs::Gid {
    ibverbs::Gid::from(ibverbs_sys::ibv_gid { raw: bytes })
}

fn gid_type_of(raw: ibverbs::ibv_gid_type) -> Option<GidType> {
    match raw {
        ibverbs_sys::IBV_GID_TYPE_IB => Some(GidType::Ib),
        ibverbs_sys::IBV_GID_TYPE_ROCE_V1 => Some(GidType::RoceV1),
        ibverbs_sys::IBV_GID_TYPE_ROCE_V2 => Some(GidType::RoceV2),
        _ => None,
    }
}

/// An opened RDMA device (port 1) with its GID table as plain data.
pub struct Context {
    inner: ibverbs::Context,
    name: String,
    gid_table: Vec<GidEntry>,
    /// `gid_index` of every entry ibverbs returned, in its order (what `set_gid_index` indexes).
    ibverbs_indices: Vec<u32>,
}

/// Opens `device` (by name, e.g. `mlx5_0`), or the first device if `None`.
///
/// Fails with [`RdmaError::NoDevice`] ("no RDMA device found: …") when the device list cannot
/// be read (ENOSYS on a kernel without RDMA, as on the development VMs) or is empty.
pub fn open(device: Option<&str>) -> Result<Context, RdmaError> {
    let list = ibverbs::devices().map_err(RdmaError::NoDevice)?;
    if list.is_empty() {
        return Err(RdmaError::NoDevice(io::Error::new(io::ErrorKind::NotFound, "the device list is empty")));
    }
    let name_of = |d: &ibverbs::Device<'_>| {
        d.name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "<unnamed>".to_string())
    };
    let dev = match device {
        None => list.get(0).expect("list is not empty"),
        Some(wanted) => list.iter().find(|d| name_of(d) == wanted).ok_or_else(|| RdmaError::DeviceNotFound {
            wanted: wanted.to_string(),
            available: list.iter().map(|d| name_of(&d)).collect(),
        })?,
    };
    let name = name_of(&dev);
    let inner = dev.open().map_err(|source| RdmaError::Open { device: name.clone(), source })?;
    // Entries of an unknown type (none exist in rdma-core v55) are left out.
    let gid_table = inner
        .gid_table()
        .iter()
        .filter_map(|e| {
            Some(GidEntry {
                index: e.gid_index,
                gid: gid_bytes(&e.gid),
                gid_type: gid_type_of(e.gid_type)?,
                ndev_ifindex: e.ndev_ifindex,
            })
        })
        .collect();
    let ibverbs_indices = inner.gid_table().iter().map(|e| e.gid_index).collect();
    Ok(Context { inner, name, gid_table, ibverbs_indices })
}

impl Context {
    /// The device name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Port 1's GID table (valid entries only, as ibverbs returns it).
    pub fn gid_table(&self) -> &[GidEntry] {
        &self.gid_table
    }

    /// [`gid::select_gid`] on this device's table, plus the check that ibverbs 0.9.2 can use
    /// the chosen index.
    pub fn choose_gid(&self, override_index: Option<u32>) -> Result<GidChoice, RdmaError> {
        let choice = gid::select_gid(&self.gid_table, override_index)?;
        gid::ibverbs_addressable(&self.ibverbs_indices, choice.entry.index)?;
        Ok(choice)
    }

    /// Allocates the protection domain and one CQ big enough for every completion of `cfg`.
    pub fn resources(&self, cfg: QpConfig) -> Result<Resources<'_>, RdmaError> {
        gid::ibverbs_addressable(&self.ibverbs_indices, cfg.gid_index)?;
        if cfg.layout.qps_per_peer() > u32::from(u16::MAX) {
            return Err(ExchangeError::InvalidLayout {
                rank: cfg.layout.rank(),
                nranks: cfg.layout.nranks(),
                qps_per_peer: cfg.layout.qps_per_peer(),
            }
            .into());
        }
        let cq_entries = i32::try_from(2 * cfg.layout.len() * MAX_WR as usize)
            .map_err(|_| verbs("ibv_create_cq")(io::Error::other("too many QPs for one CQ")))?;
        let cq = self.inner.create_cq(cq_entries, 0).map_err(verbs("ibv_create_cq"))?;
        let pd = self.inner.alloc_pd().map_err(verbs("ibv_alloc_pd"))?;
        Ok(Resources { cfg, pd, cq })
    }
}

/// Parameters of the QPs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpConfig {
    /// Ranks, this rank, K.
    pub layout: QpLayout,
    /// Local GID index (`sgid_index`).
    pub gid_index: u32,
    /// Its type, for the extra record.
    pub gid_type: GidType,
    /// `enum ibv_mtu` (1..=5).
    pub path_mtu: u8,
    /// ACK timeout exponent.
    pub timeout: u8,
    /// Transport retry count (≤ 7).
    pub retry_count: u8,
    /// RNR retry count (≤ 7; 7 = forever).
    pub rnr_retry: u8,
}

impl QpConfig {
    /// The defaults above, with the chosen GID.
    pub fn new(layout: QpLayout, gid: &GidChoice) -> QpConfig {
        QpConfig {
            layout,
            gid_index: gid.entry.index,
            gid_type: gid.entry.gid_type,
            path_mtu: DEFAULT_PATH_MTU,
            timeout: DEFAULT_TIMEOUT,
            retry_count: DEFAULT_RETRY_COUNT,
            rnr_retry: DEFAULT_RNR_RETRY,
        }
    }
}

/// Protection domain and completion queue of one check.
pub struct Resources<'ctx> {
    cfg: QpConfig,
    pd: ProtectionDomain<'ctx>,
    cq: CompletionQueue<'ctx>,
}

impl Resources<'_> {
    /// Creates the `nranks × K` RC QPs (self chunk included: loopback QPs) and the registered
    /// canary buffer. The QPs are in RESET until [`QpSet::connect`].
    pub fn create_qps(&self) -> Result<QpSet<'_>, RdmaError> {
        let cfg = self.cfg;
        let n = cfg.layout.len();
        let mut prepared = Vec::with_capacity(n);
        let mut handles = Vec::with_capacity(n);
        for _ in 0..n {
            let pqp = self
                .pd
                .create_qp(&self.cq, &self.cq, ibverbs::ibv_qp_type::IBV_QPT_RC)
                .set_gid_index(cfg.gid_index)
                .set_timeout(cfg.timeout)
                .set_retry_count(cfg.retry_count)
                .set_rnr_retry(cfg.rnr_retry)
                .set_path_mtu(cfg.path_mtu.into())
                .set_rq_psn(0)
                .set_max_send_wr(MAX_WR)
                .set_max_recv_wr(MAX_WR)
                .build()
                .map_err(verbs("ibv_create_qp"))?;
            let ep = pqp.endpoint();
            let gid = ep.gid.map(|g| gid_bytes(&g)).unwrap_or([0; 16]);
            handles.push(handle_from_parts(ep.num, ep.lid, gid));
            prepared.push(pqp);
        }
        let mr = self.pd.allocate::<u8>(canary::buffer_len(n)).map_err(verbs("ibv_reg_mr"))?;
        Ok(QpSet { cfg, cq: &self.cq, prepared, handles, mr })
    }
}

/// The QPs of one check, created but not connected.
pub struct QpSet<'res> {
    cfg: QpConfig,
    cq: &'res CompletionQueue<'res>,
    // Dropped (QPs destroyed) before `mr` is deregistered.
    prepared: Vec<PreparedQueuePair<'res>>,
    handles: Vec<QpHandle>,
    mr: MemoryRegion<u8>,
}

impl<'res> QpSet<'res> {
    /// The layout.
    pub fn layout(&self) -> QpLayout {
        self.cfg.layout
    }

    /// This rank's handles in NVSHMEM's alltoall order: `local_handles()[p*K + k]` is the
    /// handle of the k-th QP meant for peer p (`qpn` from the QP, `lid` of port 1, GID split
    /// into `spn`/`iid` as NVSHMEM copies it).
    pub fn local_handles(&self) -> &[QpHandle] {
        &self.handles
    }

    /// The alltoall send buffer (`nranks × K × 24` bytes).
    pub fn send_payload(&self) -> Vec<u8> {
        self.cfg.layout.encode(&self.handles).expect("one handle per slot")
    }

    /// This rank's contribution to the extra-record allgather.
    pub fn extra_record(&self) -> ExtraRecord {
        ExtraRecord {
            rank: self.cfg.layout.rank(),
            gid_index: self.cfg.gid_index,
            psn: 0, // ibverbs 0.9.2: sq_psn is hard-coded to 0, and we build with rq_psn 0.
            qps_per_peer: u16::try_from(self.cfg.layout.qps_per_peer()).expect("checked in Context::resources"),
            path_mtu: self.cfg.path_mtu,
            gid_type: match self.cfg.gid_type {
                GidType::Ib => 0,
                GidType::RoceV1 => 1,
                GidType::RoceV2 => 2,
            },
        }
    }

    /// Connects QP `i` to `received[i]` (the alltoall receive buffer, decoded in flat order)
    /// with `handshake` (INIT → RTR → RTS) and posts its canary receive. A failing handshake
    /// is recorded (its errno becomes a `ModifyQpFailed` verdict) and the QP is destroyed; it
    /// does not stop the others.
    ///
    /// Run a bootstrap barrier after this, before [`Connected::exchange_canaries`], so every
    /// peer's receives are posted and its QPs are past RTR before the first canary flies.
    pub fn connect(self, received: &[QpHandle]) -> Result<Connected<'res>, RdmaError> {
        let layout = self.cfg.layout;
        if received.len() != layout.len() {
            return Err(ExchangeError::Length {
                what: "received handles (QPs)",
                expected: layout.len(),
                got: received.len(),
            }
            .into());
        }
        let QpSet { cq, prepared, mut mr, .. } = self;
        let mut qps = Vec::with_capacity(layout.len());
        let mut observations = Vec::with_capacity(layout.len());
        for (i, (pqp, given)) in prepared.into_iter().zip(received).enumerate() {
            let remote =
                ibverbs::QueuePairEndpoint { num: given.qpn, lid: given.lid, gid: Some(to_ibverbs_gid(given.gid())) };
            let mut obs = Observation { given: *given, handshake_errno: None, send: None, recv: None };
            match pqp.handshake(remote) {
                Ok(mut qp) => {
                    // SAFETY: `mr` is owned by `Connected` next to the QP and outlives it (the
                    // QPs are dropped first); the receive slot is not touched until its
                    // completion is polled.
                    unsafe { qp.post_receive(&mut mr, canary::recv_range(i), canary::wr_id(i, Side::Recv)) }
                        .map_err(|source| RdmaError::Post { side: Side::Recv, index: i, source })?;
                    qps.push(Some(qp));
                }
                Err(e) => {
                    obs.handshake_errno = Some(e.raw_os_error().unwrap_or(0));
                    qps.push(None);
                }
            }
            observations.push(obs);
        }
        Ok(Connected { layout, cq, qps, mr, observations })
    }
}

/// QPs past the handshake, receives posted.
pub struct Connected<'res> {
    layout: QpLayout,
    cq: &'res CompletionQueue<'res>,
    // Dropped (QPs destroyed, outstanding work requests flushed) before `mr` is deregistered.
    qps: Vec<Option<QueuePair<'res>>>,
    mr: MemoryRegion<u8>,
    observations: Vec<Observation>,
}

impl Connected<'_> {
    /// Number of QPs whose handshake failed.
    pub fn handshake_failures(&self) -> usize {
        self.qps.iter().filter(|q| q.is_none()).count()
    }

    /// Sends every connected QP's canary, polls the CQ until every send and receive completed
    /// or `deadline` passed, and judges each QP.
    pub fn exchange_canaries(mut self, deadline: Duration) -> Result<Report, RdmaError> {
        let rank = self.layout.rank();
        let mut pending = 0usize;
        for i in 0..self.qps.len() {
            let Some(qp) = self.qps[i].as_mut() else {
                continue;
            };
            let slot = self.layout.slot(i);
            self.mr[canary::send_range(i)].copy_from_slice(&Canary::new(rank, slot.peer, slot.qp).to_bytes());
            // SAFETY: as for the receive in `connect`; the send slot is not written again.
            unsafe { qp.post_send(&mut self.mr, canary::send_range(i), canary::wr_id(i, Side::Send)) }
                .map_err(|source| RdmaError::Post { side: Side::Send, index: i, source })?;
            pending += 2;
        }

        let start = Instant::now();
        let mut wcs = [ibverbs::ibv_wc::default(); 32];
        while pending > 0 && start.elapsed() < deadline {
            let done = self.cq.poll(&mut wcs).map_err(verbs("ibv_poll_cq"))?;
            if done.is_empty() {
                std::thread::sleep(Duration::from_micros(50));
                continue;
            }
            for wc in done.iter() {
                let (i, side) = canary::parse_wr_id(wc.wr_id());
                let Some(obs) = self.observations.get_mut(i) else {
                    continue; // not ours
                };
                let result = match wc.error() {
                    None => Ok(()),
                    Some((status, vendor_err)) => Err(WcError { status, vendor_err }),
                };
                match side {
                    Side::Send if obs.send.is_none() => {
                        obs.send = Some(result);
                        pending -= 1;
                    }
                    Side::Recv if obs.recv.is_none() => {
                        let mut bytes = [0u8; Canary::SIZE];
                        if result.is_ok() {
                            bytes.copy_from_slice(&self.mr[canary::recv_range(i)]);
                        }
                        obs.recv = Some(result.map(|()| bytes));
                        pending -= 1;
                    }
                    _ => {} // a duplicate completion: cannot happen with one WR per queue
                }
            }
        }
        Ok(Report::from_observations(&self.layout, &self.observations))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::sync::{Barrier, Mutex};

    use crate::rdma::exchange::alltoall_in_memory;
    use crate::rdma::verdict::predict_world;

    fn no_rdma_here() -> bool {
        !Path::new("/sys/class/infiniband").exists()
    }

    #[test]
    fn open_without_device_is_a_clean_error() {
        match open(None) {
            Ok(ctx) => eprintln!("RDMA device {} present; {} GIDs", ctx.name(), ctx.gid_table().len()),
            Err(e) => {
                let msg = e.to_string();
                eprintln!("{msg}");
                if no_rdma_here() {
                    assert!(matches!(e, RdmaError::NoDevice(_)), "{e:?}");
                    assert!(msg.starts_with("no RDMA device found: "), "{msg}");
                }
            }
        }
        // Naming a device behaves the same when there are none.
        if no_rdma_here() {
            let e = open(Some("mlx5_0")).err().expect("no device here");
            assert!(e.to_string().starts_with("no RDMA device found: "), "{e}");
        }
    }

    #[test]
    fn gid_conversions_roundtrip() {
        let mut raw = [0u8; 16];
        raw[10] = 0xff;
        raw[11] = 0xff;
        raw[12..].copy_from_slice(&[10, 1, 2, 3]);
        let g = to_ibverbs_gid(raw);
        assert_eq!(gid_bytes(&g), raw);
        assert_eq!(g.subnet_prefix(), 0);
        assert_eq!(g.interface_id() >> 32, 0xffff);
        let h = handle_from_parts(7, 0, gid_bytes(&g));
        assert_eq!(h.gid(), raw);
        assert_eq!(gid_type_of(ibverbs_sys::IBV_GID_TYPE_ROCE_V2), Some(GidType::RoceV2));
        assert_eq!(gid_type_of(ibverbs_sys::IBV_GID_TYPE_IB), Some(GidType::Ib));
        assert_eq!(gid_type_of(9), None);
    }

    /// `nranks` in-process "ranks" on the first device, each on its own thread and context.
    /// `corrupt` edits the alltoall receive buffers before they are decoded. Every verdict is
    /// checked against [`predict_world`]. Without a device: `None`, counted as a skip (CI, which has
    /// no RDMA hardware, declares it in `BOOTSIM_CI_LACKS`).
    fn in_process(nranks: u32, k: u32, corrupt: fn(&mut [Vec<u8>])) -> Option<Vec<Report>> {
        if !crate::skip::can_run("rdma-device", open(None).map(drop).map_err(|e| e.to_string())) {
            return None;
        }
        let barrier = Barrier::new(nranks as usize);
        let sends = Mutex::new(vec![Vec::new(); nranks as usize]);
        let world = Mutex::new(vec![Vec::new(); nranks as usize]);
        let recvs = Mutex::new(Vec::new());
        let reports = std::thread::scope(|s| {
            let threads: Vec<_> = (0..nranks)
                .map(|r| {
                    let (barrier, sends, world, recvs) = (&barrier, &sends, &world, &recvs);
                    s.spawn(move || {
                        let ctx = open(None).unwrap();
                        let gid = ctx.choose_gid(None).unwrap();
                        let layout = QpLayout::new(nranks, r, k).unwrap();
                        let res = ctx.resources(QpConfig::new(layout, &gid)).unwrap();
                        let qps = res.create_qps().unwrap();
                        sends.lock().unwrap()[r as usize] = qps.send_payload();
                        world.lock().unwrap()[r as usize] = qps.local_handles().to_vec();
                        barrier.wait();
                        if r == 0 {
                            let mut out = alltoall_in_memory(&sends.lock().unwrap()).unwrap();
                            corrupt(&mut out);
                            *recvs.lock().unwrap() = out;
                        }
                        barrier.wait();
                        let received = layout.decode(&recvs.lock().unwrap()[r as usize]).unwrap();
                        let connected = qps.connect(&received).unwrap();
                        barrier.wait();
                        let report = connected.exchange_canaries(DEFAULT_CANARY_DEADLINE).unwrap();
                        (received, report)
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect::<Vec<_>>()
        });
        let (received, reports): (Vec<_>, Vec<_>) = reports.into_iter().unzip();
        let predicted = predict_world(&world.into_inner().unwrap(), &received, k);
        for (report, predicted) in reports.iter().zip(&predicted) {
            for (v, p) in report.verdicts.iter().zip(predicted) {
                assert!(p.matches(&v.verdict), "rank {} {}: predicted {p}, got {}", report.rank, v.slot, v.verdict);
            }
        }
        Some(reports)
    }

    #[test]
    fn hardware_clean_exchange() {
        if let Some(reports) = in_process(2, 2, |_| {}) {
            for r in &reports {
                assert!(r.is_clean(), "{r}");
            }
        }
    }

    #[test]
    fn hardware_zeroed_handles_fail_modify_qp() {
        // Rank 1 receives the v3.4.5 short read: 4 bytes of barrier payload, then zeros.
        fn zero_rank1_from_rank0(recvs: &mut [Vec<u8>]) {
            let chunk = 2 * QpHandle::SIZE;
            recvs[1][..chunk].fill(0);
            recvs[1][..4].copy_from_slice(&1u32.to_le_bytes());
        }
        if let Some(reports) = in_process(2, 2, zero_rank1_from_rank0) {
            assert_eq!(reports[1].summary.modify_qp_failed, 2, "{}", reports[1]);
        }
    }

    #[test]
    fn hardware_swapped_handles_are_cross_wired() {
        // Rank 1's two handles from rank 0 are swapped: QP 0 ↔ QP 1.
        fn swap(recvs: &mut [Vec<u8>]) {
            let (a, b) = recvs[1][..48].split_at_mut(24);
            a.swap_with_slice(b);
        }
        if let Some(reports) = in_process(2, 2, swap) {
            assert!(!reports[1].is_clean(), "{}", reports[1]);
        }
    }
}
