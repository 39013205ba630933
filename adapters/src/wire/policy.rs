//! Packet policies: which TCP connections the wire holds back, and for how long.
//!
//! A held connection has its handshake-completing packet (the first non-SYN client→server
//! packet, a bare ACK or the ACK merged with data) and everything after it on that flow held
//! back, then released in order. Until then the server's kernel has no established child
//! socket for it, so a later connection can be accepted first.
//!
//! String forms (see [`Policy::from_str`](std::str::FromStr)): `none`, `hold=20ms`,
//! `hold=20ms,select=even`, `release-on-next`, `release-on-next=100ms,select=nth:0`. Durations
//! carry their unit (`us`, `ms`, `s`: [`bootsim_core::duration`]).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub(crate) use bootsim_core::accept_policy::HoldPlan;
pub use bootsim_core::accept_policy::PolicySpec;
pub use bootsim_core::accept_policy::{PolicyParseError, Select, DEFAULT_FALLBACK, MAX_DELAY};

use super::flow::FlowInfo;

/// A per-connection delay callback, for plugging in the simulator's kernel model.
pub struct DelayModel(Box<dyn FnMut(&FlowInfo) -> Duration + Send>);

impl DelayModel {
    /// Wraps `f`; it is called once per connection, at its first SYN, in first-SYN order.
    pub fn new(f: impl FnMut(&FlowInfo) -> Duration + Send + 'static) -> Self {
        DelayModel(Box::new(f))
    }
}

impl fmt::Debug for DelayModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DelayModel(..)")
    }
}

/// What the wire does to TCP connections between its hosts: a policy of the shared grammar
/// (none, hold, release-on-next; held = the completing packet and the flow after it), or a
/// per-connection delay model.
#[derive(Debug)]
pub enum Policy {
    /// A policy string's meaning ([`PolicySpec`]).
    Spec(PolicySpec),
    /// Hold each connection for whatever the callback says (zero: forward at once).
    Model(DelayModel),
}

impl Default for Policy {
    fn default() -> Self {
        Policy::NONE
    }
}

impl Policy {
    /// Forward every packet at once.
    pub const NONE: Policy = Policy::Spec(PolicySpec::None);

    /// A `Model` policy from a per-connection delay callback.
    pub fn model(f: impl FnMut(&FlowInfo) -> Duration + Send + 'static) -> Self {
        Policy::Model(DelayModel::new(f))
    }

    /// Decides the plan of a newly numbered connection.
    pub(crate) fn plan(&mut self, flow: &FlowInfo) -> HoldPlan {
        match self {
            Policy::Spec(spec) => spec.plan(&flow.key()),
            Policy::Model(DelayModel(f)) => match f(flow).min(MAX_DELAY) {
                d if d.is_zero() => HoldPlan::Pass,
                d => HoldPlan::For(d),
            },
        }
    }

    /// The longest it may hold one connection (zero for a model: its delays are not known ahead).
    pub fn longest_hold(&self) -> Duration {
        match self {
            Policy::Spec(PolicySpec::Hold { delay, .. }) => *delay,
            Policy::Spec(PolicySpec::ReleaseOnNext { fallback, .. }) => *fallback,
            Policy::Spec(PolicySpec::None) | Policy::Model(_) => Duration::ZERO,
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Spec(spec) => spec.fmt(f),
            Policy::Model(_) => f.write_str("model"),
        }
    }
}

impl FromStr for Policy {
    type Err = PolicyParseError;

    /// The shared grammar ([`PolicySpec`]); `select=msg:` is refused: the wire decides at the
    /// handshake, before any byte of the message has been sent.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let spec: PolicySpec = s.parse()?;
        if let Some(sel) = spec.select().filter(|sel| sel.reads_bytes()) {
            return Err(PolicyParseError::new(
                &sel.to_string(),
                "the wire decides at the handshake, before a message's header is sent (msg: is the accept interposer's)",
            ));
        }
        Ok(Policy::Spec(spec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddrV4};

    fn flow(conn: u32, pair_conn: u32) -> FlowInfo {
        FlowInfo {
            conn,
            pair_conn,
            src_host: 1,
            dst_host: 2,
            src: SocketAddrV4::new(Ipv4Addr::new(10, 213, 0, 1), 40000),
            dst: SocketAddrV4::new(Ipv4Addr::new(10, 213, 0, 2), 7000),
            isn: 0,
        }
    }

    #[test]
    fn the_shared_grammar_round_trips_and_msg_is_refused() {
        for s in ["none", "hold=20ms,select=even", "release-on-next=100ms,select=pair:1>2:2"] {
            assert_eq!(s.parse::<Policy>().unwrap().to_string(), s);
        }
        let e = "hold=5ms,select=msg:0:1".parse::<Policy>().unwrap_err();
        assert_eq!(e.part, "msg:0:1");
    }

    #[test]
    fn plans_follow_selection() {
        let mut p: Policy = "release-on-next".parse().unwrap();
        assert_eq!(p.plan(&flow(0, 0)), HoldPlan::UntilNext(DEFAULT_FALLBACK));
        assert_eq!(p.plan(&flow(1, 1)), HoldPlan::Pass);
        let mut p: Policy = "hold=7ms".parse().unwrap();
        assert_eq!(p.plan(&flow(5, 5)), HoldPlan::For(Duration::from_millis(7)));
        let mut p = Policy::model(|f| Duration::from_millis(u64::from(f.conn)));
        assert_eq!(p.plan(&flow(0, 0)), HoldPlan::Pass);
        assert_eq!(p.plan(&flow(3, 0)), HoldPlan::For(Duration::from_millis(3)));
        let mut p = Policy::model(|_| Duration::MAX);
        assert_eq!(p.plan(&flow(0, 0)), HoldPlan::For(MAX_DELAY));
    }
}
