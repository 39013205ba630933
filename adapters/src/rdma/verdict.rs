//! Per-QP verdicts of the RDMA check, a predictor of what hardware would say about a received
//! handle, and a summary.
//!
//! The predictor lets the simulator turn "the alltoall delivered these handles" into "the RDMA
//! setup would have failed like this", and lets a hardware run be checked against it.

use std::collections::BTreeMap;
use std::fmt;
use std::io;

use bootsim_nvshmem::QpHandle;

use super::canary::{Canary, Side};
use super::exchange::{QpLayout, QpSlot};
use bootsim_nvshmem::GidDisplay;

/// `IBV_WC_WR_FLUSH_ERR`: the completion status of work requests flushed because their QP went
/// to the error state (a consequence of another error, never a cause).
pub const WC_WR_FLUSH_ERR: u32 = 5;
/// `IBV_WC_RETRY_EXC_ERR`: no ACK from the remote QP within `retry_cnt` timeouts.
pub const WC_RETRY_EXC_ERR: u32 = 12;

/// The name of an `enum ibv_wc_status` value (rdma-core v55 numbering).
pub fn wc_status_name(status: u32) -> &'static str {
    const NAMES: [&str; 24] = [
        "IBV_WC_SUCCESS",
        "IBV_WC_LOC_LEN_ERR",
        "IBV_WC_LOC_QP_OP_ERR",
        "IBV_WC_LOC_EEC_OP_ERR",
        "IBV_WC_LOC_PROT_ERR",
        "IBV_WC_WR_FLUSH_ERR",
        "IBV_WC_MW_BIND_ERR",
        "IBV_WC_BAD_RESP_ERR",
        "IBV_WC_LOC_ACCESS_ERR",
        "IBV_WC_REM_INV_REQ_ERR",
        "IBV_WC_REM_ACCESS_ERR",
        "IBV_WC_REM_OP_ERR",
        "IBV_WC_RETRY_EXC_ERR",
        "IBV_WC_RNR_RETRY_EXC_ERR",
        "IBV_WC_LOC_RDD_VIOL_ERR",
        "IBV_WC_REM_INV_RD_REQ_ERR",
        "IBV_WC_REM_ABORT_ERR",
        "IBV_WC_INV_EECN_ERR",
        "IBV_WC_INV_EEC_STATE_ERR",
        "IBV_WC_FATAL_ERR",
        "IBV_WC_RESP_TIMEOUT_ERR",
        "IBV_WC_GENERAL_ERR",
        "IBV_WC_TM_ERR",
        "IBV_WC_TM_RNDV_INCOMPLETE",
    ];
    NAMES.get(status as usize).copied().unwrap_or("IBV_WC_<unknown>")
}

/// The symbolic name of the errnos `ibv_modify_qp` and friends return, if it is one of them.
pub fn errno_name(errno: i32) -> Option<&'static str> {
    Some(match errno {
        libc::EPERM => "EPERM",
        libc::EIO => "EIO",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSYS => "ENOSYS",
        libc::ENODATA => "ENODATA",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        _ => return None,
    })
}

struct Errno(i32);

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("no errno");
        }
        match errno_name(self.0) {
            Some(name) => write!(f, "{name}: ")?,
            None => write!(f, "errno {}: ", self.0)?,
        }
        // io::Error's Display is "<strerror> (os error N)".
        write!(f, "{}", io::Error::from_raw_os_error(self.0))
    }
}

/// Formats a handle with its zeroed parts called out: `qpn 0x0 (ZERO), lid 0, gid … (ZERO)`.
pub struct HandleDisplay<'a>(pub &'a QpHandle);

impl fmt::Display for HandleDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = self.0;
        write!(f, "qpn {:#x}", h.qpn)?;
        if h.qpn == 0 {
            f.write_str(" (ZERO)")?;
        }
        write!(f, ", lid {}, gid {}", h.lid, GidDisplay(&h.gid()))?;
        if h.gid_is_zero() {
            f.write_str(" (ZERO)")?;
        }
        Ok(())
    }
}

/// What happened to one QP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QpFate {
    /// Connected; the right canary arrived and our canary was acknowledged.
    Ok,
    /// `handshake` (INIT → RTR → RTS) failed with `errno`; `given` is the remote handle it was
    /// given (the NVSHMEM bug gives a zeroed QPN and/or GID, and hardware answers EINVAL).
    ModifyQpFailed {
        /// The errno of the failing `ibv_modify_qp` (0 if the error carried none).
        errno: i32,
        /// The remote handle the bootstrap delivered.
        given: QpHandle,
    },
    /// A valid canary arrived, but not the one this QP expects: the QP is cross-wired.
    WrongPeer {
        /// The peer this QP is meant to be connected to.
        expected_peer: u32,
        /// The rank the canary came from.
        got_peer: u32,
        /// This QP's index among the K toward `expected_peer`.
        qp: u32,
        /// The canary as received (its `qp` and `receiver` say which QP sent it, to whom).
        canary: Canary,
    },
    /// A work completion with an error status.
    CompletionError {
        /// Whose completion: our canary's send or the receive of the peer's.
        side: Side,
        /// `enum ibv_wc_status`.
        status: u32,
        /// `vendor_err` syndrome.
        vendor_err: u32,
    },
    /// Something arrived, but it does not carry the canary magic.
    Garbled {
        /// The 16 bytes received.
        bytes: [u8; 16],
    },
    /// The deadline passed before both completions of the QP were seen.
    TimedOut {
        /// Our canary's send completed (successfully).
        sent: bool,
        /// A canary was received.
        received: bool,
    },
}

impl QpFate {
    /// The verdict's class.
    pub fn class(&self) -> VerdictClass {
        match self {
            QpFate::Ok => VerdictClass::Ok,
            QpFate::ModifyQpFailed { .. } => VerdictClass::ModifyQpFailed,
            QpFate::WrongPeer { .. } => VerdictClass::WrongPeer,
            QpFate::CompletionError { .. } => VerdictClass::CompletionError,
            QpFate::Garbled { .. } => VerdictClass::Garbled,
            QpFate::TimedOut { .. } => VerdictClass::TimedOut,
        }
    }

    /// True for [`QpFate::Ok`].
    pub fn is_ok(&self) -> bool {
        matches!(self, QpFate::Ok)
    }
}

impl fmt::Display for QpFate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QpFate::Ok => f.write_str("ok"),
            QpFate::ModifyQpFailed { errno, given } => {
                write!(f, "modify_qp failed ({}), given {}", Errno(*errno), HandleDisplay(given))
            }
            QpFate::WrongPeer { expected_peer, got_peer, qp, canary } => write!(
                f,
                "wrong peer: qp {qp} toward rank {expected_peer} got a canary from rank \
                 {got_peer} ({canary})"
            ),
            QpFate::CompletionError { side, status, vendor_err } => {
                write!(f, "{side} completion error {} ({status}), vendor_err {vendor_err:#x}", wc_status_name(*status))
            }
            QpFate::Garbled { bytes } => {
                f.write_str("garbled canary:")?;
                for b in bytes {
                    write!(f, " {b:02x}")?;
                }
                Ok(())
            }
            QpFate::TimedOut { sent, received } => {
                write!(f, "timed out (canary sent: {}, canary received: {})", yes_no(*sent), yes_no(*received))
            }
        }
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The class of a [`QpFate`], without its details.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VerdictClass {
    /// [`QpFate::Ok`].
    Ok,
    /// [`QpFate::ModifyQpFailed`].
    ModifyQpFailed,
    /// [`QpFate::WrongPeer`].
    WrongPeer,
    /// [`QpFate::CompletionError`].
    CompletionError,
    /// [`QpFate::Garbled`].
    Garbled,
    /// [`QpFate::TimedOut`].
    TimedOut,
}

/// One QP's verdict, with its place in the layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QpVerdict {
    /// Which QP.
    pub slot: QpSlot,
    /// What happened to it.
    pub verdict: QpFate,
}

impl fmt::Display for QpVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.slot, self.verdict)
    }
}

/// A failed work completion: `(status, vendor_err)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WcError {
    /// `enum ibv_wc_status`.
    pub status: u32,
    /// `vendor_err`.
    pub vendor_err: u32,
}

/// Everything observed about one QP on the hardware path, as plain data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// The remote handle handed to `handshake`.
    pub given: QpHandle,
    /// `Some(errno)` if `handshake` failed (then nothing else was attempted).
    pub handshake_errno: Option<i32>,
    /// The send completion: `None` if none arrived before the deadline.
    pub send: Option<Result<(), WcError>>,
    /// The receive completion and the bytes received: `None` if none arrived in time.
    pub recv: Option<Result<[u8; 16], WcError>>,
}

/// Turns an observation of QP `slot` on rank `me` into a verdict. Order of precedence:
/// a failed handshake; a received canary that is garbled or from the wrong place; a completion
/// error (a non-flush error before a flush, the send before the receive); both completions
/// successful → ok; otherwise timed out.
pub fn judge(me: u32, slot: QpSlot, obs: &Observation) -> QpFate {
    if let Some(errno) = obs.handshake_errno {
        return QpFate::ModifyQpFailed { errno, given: obs.given };
    }
    if let Some(Ok(bytes)) = &obs.recv {
        let canary = Canary::from_bytes(bytes);
        if !canary.is_valid() {
            return QpFate::Garbled { bytes: *bytes };
        }
        if canary.sender != slot.peer || canary.receiver != me || canary.qp != slot.qp {
            return QpFate::WrongPeer { expected_peer: slot.peer, got_peer: canary.sender, qp: slot.qp, canary };
        }
    }
    let mut errors: Vec<(Side, WcError)> = Vec::new();
    if let Some(Err(e)) = obs.send {
        errors.push((Side::Send, e));
    }
    if let Some(Err(e)) = obs.recv {
        errors.push((Side::Recv, e));
    }
    // Stable sort: non-flush errors first, send before recv among equals.
    errors.sort_by_key(|(_, e)| e.status == WC_WR_FLUSH_ERR);
    if let Some((side, e)) = errors.first() {
        return QpFate::CompletionError { side: *side, status: e.status, vendor_err: e.vendor_err };
    }
    match (&obs.send, &obs.recv) {
        (Some(Ok(())), Some(Ok(_))) => QpFate::Ok,
        (send, recv) => QpFate::TimedOut { sent: send.is_some(), received: recv.is_some() },
    }
}

/// What hardware is expected to do with a received handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Predicted {
    /// The handle is the one the peer created for us: the QP connects and the canary passes.
    Ok,
    /// The handle has a zero QPN or a zero GID: the RTR `ibv_modify_qp` fails with `errno`
    /// (EINVAL, as PR NVIDIA/nvshmem#97 reports for the zeroed handles; IBGDA reports "Unable to
    /// create ah" instead, which this check does not model).
    ModifyQpFails {
        /// The expected errno.
        errno: i32,
    },
    /// A different, valid-looking handle: the QP connects, but to someone else's QP (or to no
    /// QP at all). Hardware shows this as a wrong canary, a transport retry error, or silence.
    CrossWired {
        /// The handle the peer created for us.
        expected: QpHandle,
        /// The handle delivered instead.
        got: QpHandle,
    },
    /// Only from [`predict_world`]: this QP got the right handle, but the other end is broken:
    /// the peer's QP for it was given a different (or zeroed) handle, or some other QP was also
    /// given this QP's handle. Collateral damage, shown like a cross-wired QP.
    PeerMiswired,
}

/// Predicts the hardware outcome for a QP given the handle the bootstrap delivered (`handle`)
/// and the one the peer actually created for it (`expected`).
///
/// QPN 0 or an all-zero GID → EINVAL at RTR; identical → ok; anything else → cross-wired.
/// This mirrors the failure reported on ConnectX-7 / RoCE v2; it is not verified here (no RDMA
/// hardware), and some devices may accept QPN 0 at RTR and fail later with a retry error.
pub fn predict(handle: &QpHandle, expected: &QpHandle) -> Predicted {
    if handle.qpn == 0 || handle.gid_is_zero() {
        Predicted::ModifyQpFails { errno: libc::EINVAL }
    } else if handle == expected {
        Predicted::Ok
    } else {
        Predicted::CrossWired { expected: *expected, got: *handle }
    }
}

/// Predicts every QP of every rank: `world[r]` is rank r's `local_handles()` and `received[r]`
/// the handles rank r's alltoall delivered (both flat layout order, `nranks × k` each).
///
/// [`predict`] alone is one-sided: an RC QP works only if both ends were given each other's
/// handle. On top of it, a QP predicted ok becomes [`Predicted::PeerMiswired`] when its
/// counterpart (peer p's QP for this rank, same index) did not receive this QP's handle, or
/// when this QP's handle or its counterpart's was given to more than one QP in the world (a
/// third QP then sends into the pair and may take its one posted receive).
///
/// # Panics
/// If the shapes disagree.
pub fn predict_world(world: &[Vec<QpHandle>], received: &[Vec<QpHandle>], qps_per_peer: u32) -> Vec<Vec<Predicted>> {
    let n = world.len();
    let k = qps_per_peer as usize;
    assert_eq!(received.len(), n, "one receive buffer per rank");
    let mut given_to: BTreeMap<QpHandle, usize> = BTreeMap::new();
    for h in received.iter().flatten() {
        *given_to.entry(*h).or_default() += 1;
    }
    (0..n)
        .map(|r| {
            assert_eq!(world[r].len(), n * k, "rank {r}'s local handles");
            assert_eq!(received[r].len(), n * k, "rank {r}'s received handles");
            (0..n * k)
                .map(|i| {
                    let (p, q) = (i / k, i % k);
                    let expected = world[p][r * k + q];
                    let predicted = predict(&received[r][i], &expected);
                    if predicted != Predicted::Ok {
                        return predicted;
                    }
                    let mine = world[r][i];
                    let counterpart_got = received[p][r * k + q];
                    let contended = |h: &QpHandle| given_to.get(h).copied().unwrap_or(0) > 1;
                    if counterpart_got != mine || contended(&mine) || contended(&expected) {
                        Predicted::PeerMiswired
                    } else {
                        Predicted::Ok
                    }
                })
                .collect()
        })
        .collect()
}

impl Predicted {
    /// Whether an observed verdict is consistent with this prediction. A cross-wired QP (or
    /// one whose peer is miswired) may legitimately show up as a wrong canary, a completion
    /// error or a timeout.
    pub fn matches(&self, verdict: &QpFate) -> bool {
        match (self, verdict) {
            (Predicted::Ok, QpFate::Ok) => true,
            (Predicted::ModifyQpFails { errno }, QpFate::ModifyQpFailed { errno: got, .. }) => errno == got,
            (Predicted::CrossWired { .. } | Predicted::PeerMiswired, v) => {
                matches!(v.class(), VerdictClass::WrongPeer | VerdictClass::CompletionError | VerdictClass::TimedOut)
            }
            _ => false,
        }
    }
}

impl fmt::Display for Predicted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Predicted::Ok => f.write_str("ok"),
            Predicted::ModifyQpFails { errno } => {
                write!(f, "modify_qp fails at RTR ({})", Errno(*errno))
            }
            Predicted::CrossWired { expected, got } => {
                write!(f, "cross-wired: expected {}, got {}", HandleDisplay(expected), HandleDisplay(got))
            }
            Predicted::PeerMiswired => f.write_str("peer side miswired"),
        }
    }
}

/// Counts of each verdict class over a set of QPs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// [`QpFate::Ok`].
    pub ok: usize,
    /// [`QpFate::ModifyQpFailed`].
    pub modify_qp_failed: usize,
    /// [`QpFate::WrongPeer`].
    pub wrong_peer: usize,
    /// [`QpFate::CompletionError`].
    pub completion_error: usize,
    /// [`QpFate::Garbled`].
    pub garbled: usize,
    /// [`QpFate::TimedOut`].
    pub timed_out: usize,
    /// `ModifyQpFailed` broken down by errno.
    pub errnos: BTreeMap<i32, usize>,
    /// `CompletionError` broken down by status.
    pub statuses: BTreeMap<u32, usize>,
}

impl Summary {
    /// Summarises verdicts.
    pub fn of<'a>(verdicts: impl IntoIterator<Item = &'a QpFate>) -> Summary {
        let mut s = Summary::default();
        for v in verdicts {
            s.add(v);
        }
        s
    }

    /// Counts one more verdict.
    pub fn add(&mut self, v: &QpFate) {
        match v {
            QpFate::Ok => self.ok += 1,
            QpFate::ModifyQpFailed { errno, .. } => {
                self.modify_qp_failed += 1;
                *self.errnos.entry(*errno).or_default() += 1;
            }
            QpFate::WrongPeer { .. } => self.wrong_peer += 1,
            QpFate::CompletionError { status, .. } => {
                self.completion_error += 1;
                *self.statuses.entry(*status).or_default() += 1;
            }
            QpFate::Garbled { .. } => self.garbled += 1,
            QpFate::TimedOut { .. } => self.timed_out += 1,
        }
    }

    /// Number of QPs counted.
    pub fn total(&self) -> usize {
        self.ok + self.modify_qp_failed + self.wrong_peer + self.completion_error + self.garbled + self.timed_out
    }

    /// Number of QPs whose verdict is not ok.
    pub fn failed(&self) -> usize {
        self.total() - self.ok
    }

    /// True when at least one QP was checked and every QP is ok. (An empty check is not clean:
    /// it proves nothing.)
    pub fn is_clean(&self) -> bool {
        self.total() > 0 && self.ok == self.total()
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} QPs: {} ok, {} modify_qp failed", self.total(), self.ok, self.modify_qp_failed)?;
        if !self.errnos.is_empty() {
            let parts: Vec<String> = self
                .errnos
                .iter()
                .map(|(e, n)| match errno_name(*e) {
                    Some(name) => format!("{name}×{n}"),
                    None => format!("errno {e}×{n}"),
                })
                .collect();
            write!(f, " [{}]", parts.join(", "))?;
        }
        write!(f, ", {} wrong peer, {} completion error", self.wrong_peer, self.completion_error)?;
        if !self.statuses.is_empty() {
            let parts: Vec<String> = self.statuses.iter().map(|(s, n)| format!("{}×{n}", wc_status_name(*s))).collect();
            write!(f, " [{}]", parts.join(", "))?;
        }
        write!(f, ", {} garbled, {} timed out", self.garbled, self.timed_out)
    }
}

/// The verdicts of one rank's check, in flat layout order, and their summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The rank that ran the check.
    pub rank: u32,
    /// One verdict per QP, in flat layout order (peer-major, self chunk included).
    pub verdicts: Vec<QpVerdict>,
    /// Counts over `verdicts`.
    pub summary: Summary,
}

impl Report {
    /// Judges every observation (`observations[i]` belongs to `layout.slot(i)`).
    ///
    /// # Panics
    /// If there is not exactly one observation per QP of the layout.
    pub fn from_observations(layout: &QpLayout, observations: &[Observation]) -> Report {
        assert_eq!(observations.len(), layout.len(), "one observation per QP");
        let verdicts: Vec<QpVerdict> = observations
            .iter()
            .enumerate()
            .map(|(i, obs)| {
                let slot = layout.slot(i);
                QpVerdict { slot, verdict: judge(layout.rank(), slot, obs) }
            })
            .collect();
        let summary = Summary::of(verdicts.iter().map(|v| &v.verdict));
        Report { rank: layout.rank(), verdicts, summary }
    }

    /// True when every QP is ok (see [`Summary::is_clean`]).
    pub fn is_clean(&self) -> bool {
        self.summary.is_clean()
    }
}

impl fmt::Display for Report {
    /// The summary line, then one line per QP that is not ok.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {}: {}", self.rank, self.summary)?;
        for v in self.verdicts.iter().filter(|v| !v.verdict.is_ok()) {
            write!(f, "\n  {v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good(qpn: u32) -> QpHandle {
        QpHandle { qpn, lid: 0, spn: 0, iid: u64::from_le_bytes([0, 0, 0xff, 0xff, 10, 0, 0, 2]) }
    }

    const SLOT: QpSlot = QpSlot { peer: 1, qp: 0 };

    fn obs() -> Observation {
        Observation {
            given: good(0x111),
            handshake_errno: None,
            send: Some(Ok(())),
            recv: Some(Ok(Canary::new(1, 0, 0).to_bytes())),
        }
    }

    #[test]
    fn predict_mirrors_hardware() {
        let expected = good(0x111);
        assert_eq!(predict(&expected, &expected), Predicted::Ok);
        // The v3.4.5 short read: qpn = barrier's 4 garbage bytes, rest calloc zeros.
        let short = QpHandle { qpn: 0xdead, lid: 0, spn: 0, iid: 0 };
        assert_eq!(predict(&short, &expected), Predicted::ModifyQpFails { errno: libc::EINVAL });
        assert_eq!(predict(&QpHandle::default(), &expected), Predicted::ModifyQpFails { errno: libc::EINVAL });
        let zero_qpn = QpHandle { qpn: 0, ..expected };
        assert_eq!(predict(&zero_qpn, &expected), Predicted::ModifyQpFails { errno: libc::EINVAL });
        let other = good(0x222);
        assert_eq!(predict(&other, &expected), Predicted::CrossWired { expected, got: other });
    }

    #[test]
    fn judge_ok_and_wrong_peer() {
        assert_eq!(judge(0, SLOT, &obs()), QpFate::Ok);

        let from_rank_2 = Observation { recv: Some(Ok(Canary::new(2, 0, 0).to_bytes())), ..obs() };
        let v = judge(0, SLOT, &from_rank_2);
        assert_eq!(v, QpFate::WrongPeer { expected_peer: 1, got_peer: 2, qp: 0, canary: Canary::new(2, 0, 0) });
        assert_eq!(
            v.to_string(),
            "wrong peer: qp 0 toward rank 1 got a canary from rank 2 (canary rank 2 -> rank 0 qp 0)"
        );
        // Right peer, wrong QP of that peer: cross-wired within the chunk.
        let other_qp = Observation { recv: Some(Ok(Canary::new(1, 0, 1).to_bytes())), ..obs() };
        assert_eq!(judge(0, SLOT, &other_qp).class(), VerdictClass::WrongPeer);
        // Meant for someone else.
        let other_receiver = Observation { recv: Some(Ok(Canary::new(1, 3, 0).to_bytes())), ..obs() };
        assert_eq!(judge(0, SLOT, &other_receiver).class(), VerdictClass::WrongPeer);
        // A wrong canary outranks a send error.
        let both =
            Observation { send: Some(Err(WcError { status: WC_RETRY_EXC_ERR, vendor_err: 0x81 })), ..from_rank_2 };
        assert_eq!(judge(0, SLOT, &both).class(), VerdictClass::WrongPeer);
    }

    #[test]
    fn judge_modify_qp_failure_shows_zeroes() {
        let o = Observation { given: QpHandle::default(), handshake_errno: Some(libc::EINVAL), send: None, recv: None };
        let v = judge(0, SLOT, &o);
        assert_eq!(v, QpFate::ModifyQpFailed { errno: libc::EINVAL, given: QpHandle::default() });
        let s = v.to_string();
        assert!(s.starts_with("modify_qp failed (EINVAL: Invalid argument (os error 22))"), "{s}");
        assert!(s.contains("qpn 0x0 (ZERO)"), "{s}");
        assert!(s.ends_with("gid :: (ZERO)"), "{s}");
        // A valid-looking handle shows no ZERO marks.
        let ok = HandleDisplay(&good(0x111)).to_string();
        assert_eq!(ok, "qpn 0x111, lid 0, gid ::ffff:10.0.0.2");
    }

    #[test]
    fn judge_completion_errors_prefer_the_cause() {
        let retry = WcError { status: WC_RETRY_EXC_ERR, vendor_err: 0x81 };
        let flush = WcError { status: WC_WR_FLUSH_ERR, vendor_err: 0xf5 };
        let o = Observation { send: Some(Err(retry)), recv: Some(Err(flush)), ..obs() };
        let v = judge(0, SLOT, &o);
        assert_eq!(v, QpFate::CompletionError { side: Side::Send, status: WC_RETRY_EXC_ERR, vendor_err: 0x81 });
        assert_eq!(v.to_string(), "send completion error IBV_WC_RETRY_EXC_ERR (12), vendor_err 0x81");
        let flipped = Observation { send: Some(Err(flush)), recv: Some(Err(retry)), ..obs() };
        assert!(matches!(
            judge(0, SLOT, &flipped),
            QpFate::CompletionError { side: Side::Recv, status: WC_RETRY_EXC_ERR, .. }
        ));
    }

    #[test]
    fn judge_garbled_and_timeouts() {
        let g = Observation { recv: Some(Ok([0xaa; 16])), ..obs() };
        assert_eq!(judge(0, SLOT, &g), QpFate::Garbled { bytes: [0xaa; 16] });
        assert!(judge(0, SLOT, &g).to_string().starts_with("garbled canary: aa aa"));

        let no_recv = Observation { recv: None, ..obs() };
        let v = judge(0, SLOT, &no_recv);
        assert_eq!(v, QpFate::TimedOut { sent: true, received: false });
        assert_eq!(v.to_string(), "timed out (canary sent: yes, canary received: no)");
        let no_send = Observation { send: None, ..obs() };
        assert_eq!(judge(0, SLOT, &no_send), QpFate::TimedOut { sent: false, received: true });
    }

    #[test]
    fn predictions_match_verdicts() {
        let e = good(1);
        assert!(predict(&e, &e).matches(&QpFate::Ok));
        let zero = predict(&QpHandle::default(), &e);
        assert!(zero.matches(&QpFate::ModifyQpFailed { errno: libc::EINVAL, given: QpHandle::default() }));
        assert!(!zero.matches(&QpFate::ModifyQpFailed { errno: libc::ENOMEM, given: QpHandle::default() }));
        assert!(!zero.matches(&QpFate::Ok));
        let cross = predict(&good(2), &e);
        assert!(cross.matches(&QpFate::TimedOut { sent: false, received: false }));
        assert!(cross.matches(&QpFate::CompletionError { side: Side::Send, status: WC_RETRY_EXC_ERR, vendor_err: 0 }));
        assert!(!cross.matches(&QpFate::Ok));
        assert!(zero.to_string().starts_with("modify_qp fails at RTR (EINVAL"));
        assert!(cross.to_string().starts_with("cross-wired: expected qpn 0x1"));
    }

    #[test]
    fn summary_counts_and_displays() {
        let verdicts = vec![
            QpFate::Ok,
            QpFate::Ok,
            QpFate::ModifyQpFailed { errno: libc::EINVAL, given: QpHandle::default() },
            QpFate::ModifyQpFailed { errno: libc::EINVAL, given: QpHandle::default() },
            QpFate::WrongPeer { expected_peer: 1, got_peer: 2, qp: 0, canary: Canary::new(2, 0, 0) },
            QpFate::CompletionError { side: Side::Send, status: WC_RETRY_EXC_ERR, vendor_err: 0 },
            QpFate::Garbled { bytes: [0; 16] },
            QpFate::TimedOut { sent: true, received: false },
        ];
        let s = Summary::of(&verdicts);
        assert_eq!(s.total(), 8);
        assert_eq!(s.failed(), 6);
        assert_eq!(
            (s.ok, s.modify_qp_failed, s.wrong_peer, s.completion_error, s.garbled, s.timed_out),
            (2, 2, 1, 1, 1, 1)
        );
        assert!(!s.is_clean());
        assert_eq!(
            s.to_string(),
            "8 QPs: 2 ok, 2 modify_qp failed [EINVAL×2], 1 wrong peer, 1 completion error \
             [IBV_WC_RETRY_EXC_ERR×1], 1 garbled, 1 timed out"
        );
        let clean = Summary::of(&verdicts[..2]);
        assert!(clean.is_clean());
        assert_eq!(
            clean.to_string(),
            "2 QPs: 2 ok, 0 modify_qp failed, 0 wrong peer, 0 completion error, 0 garbled, 0 timed out"
        );
        assert!(!Summary::default().is_clean());
    }

    #[test]
    fn names() {
        assert_eq!(wc_status_name(0), "IBV_WC_SUCCESS");
        assert_eq!(wc_status_name(5), "IBV_WC_WR_FLUSH_ERR");
        assert_eq!(wc_status_name(12), "IBV_WC_RETRY_EXC_ERR");
        assert_eq!(wc_status_name(23), "IBV_WC_TM_RNDV_INCOMPLETE");
        assert_eq!(wc_status_name(99), "IBV_WC_<unknown>");
        assert_eq!(errno_name(22), Some("EINVAL"));
        assert_eq!(errno_name(9999), None);
        assert_eq!(Errno(0).to_string(), "no errno");
        assert!(Errno(9999).to_string().starts_with("errno 9999: "));
    }

    #[test]
    fn report_judges_each_slot() {
        let layout = QpLayout::new(2, 0, 2).unwrap();
        let mut observations: Vec<Observation> = layout
            .slots()
            .map(|s| Observation {
                given: good(0x100 + s.peer * 2 + s.qp),
                handshake_errno: None,
                send: Some(Ok(())),
                recv: Some(Ok(Canary::new(s.peer, 0, s.qp).to_bytes())),
            })
            .collect();
        let clean = Report::from_observations(&layout, &observations);
        assert!(clean.is_clean());
        assert_eq!(clean.verdicts[3].slot, QpSlot { peer: 1, qp: 1 });
        assert_eq!(
            clean.to_string(),
            "rank 0: 4 QPs: 4 ok, 0 modify_qp failed, 0 wrong peer, 0 completion error, 0 garbled, 0 timed out"
        );

        observations[2] =
            Observation { given: QpHandle::default(), handshake_errno: Some(libc::EINVAL), send: None, recv: None };
        let bad = Report::from_observations(&layout, &observations);
        assert!(!bad.is_clean());
        let text = bad.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].starts_with("rank 0: 4 QPs: 3 ok, 1 modify_qp failed [EINVAL×1]"));
        assert!(lines[1].starts_with("  peer 1 qp 0: modify_qp failed (EINVAL"), "{text}");
    }

    /// Two ranks, K = 2, handles distinct per rank and slot.
    fn world2() -> Vec<Vec<QpHandle>> {
        (0..2u32).map(|r| (0..4u32).map(|i| good(0x100 * (r + 1) + i)).collect()).collect()
    }

    fn clean_received(world: &[Vec<QpHandle>]) -> Vec<Vec<QpHandle>> {
        (0..2).map(|r| crate::rdma::exchange::expected_received(world, r, 2)).collect()
    }

    #[test]
    fn predict_world_clean() {
        let w = world2();
        let p = predict_world(&w, &clean_received(&w), 2);
        assert!(p.iter().flatten().all(|x| *x == Predicted::Ok));
    }

    #[test]
    fn predict_world_zeroed_chunk_breaks_both_ends() {
        let w = world2();
        let mut recv = clean_received(&w);
        // Rank 1's chunk from rank 0 (slots 0 and 1): the v3.4.5 short read.
        recv[1][0] = QpHandle { qpn: 1, ..QpHandle::default() };
        recv[1][1] = QpHandle::default();
        let p = predict_world(&w, &recv, 2);
        let einval = Predicted::ModifyQpFails { errno: libc::EINVAL };
        assert_eq!(p[1], vec![einval, einval, Predicted::Ok, Predicted::Ok]);
        // Rank 0's QPs toward rank 1 (slots 2, 3) lose their other end.
        assert_eq!(p[0], vec![Predicted::Ok, Predicted::Ok, Predicted::PeerMiswired, Predicted::PeerMiswired]);
        assert_eq!(Predicted::PeerMiswired.to_string(), "peer side miswired");
    }

    #[test]
    fn predict_world_swapped_pair_and_duplicates() {
        let w = world2();
        let mut recv = clean_received(&w);
        recv[1].swap(0, 1);
        let p = predict_world(&w, &recv, 2);
        assert!(matches!(p[1][0], Predicted::CrossWired { .. }));
        assert!(matches!(p[1][1], Predicted::CrossWired { .. }));
        assert_eq!(p[0][2], Predicted::PeerMiswired);
        assert_eq!(p[0][3], Predicted::PeerMiswired);
        assert_eq!(p[0][0], Predicted::Ok);

        // Rank 1 gets rank 0's QP (1,0) handle twice: the rightful pair (rank 1 slot 0 and
        // rank 0 slot 2) is contended even though its own pairing is right.
        let mut dup = clean_received(&w);
        dup[1][1] = dup[1][0];
        let p = predict_world(&w, &dup, 2);
        assert_eq!(p[1][0], Predicted::PeerMiswired);
        assert!(matches!(p[1][1], Predicted::CrossWired { .. }));
        assert_eq!(p[0][2], Predicted::PeerMiswired);
        assert!(Predicted::PeerMiswired.matches(&QpFate::TimedOut { sent: false, received: true }));
    }
}
