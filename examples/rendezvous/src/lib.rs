//! A worked example of bootsim's protocol seam ([`bootsim_core::seam`]): a small rendezvous
//! bootstrap, written only against the seam, with a deliberate (peer, tag) reuse bug
//! ([`Variant::ReusedTag`]) and its fix ([`Variant::RoundTag`]).
//!
//! # The protocol
//!
//! 1. **Init.** The root listens; each rank opens its peer listener, dials the root and checks
//!    in (its rank and listener address). Once all `n` have, the root sends every rank the
//!    table of addresses and closes.
//! 2. **Exchange rounds** (the [`Workload`]). In round `k` every rank sends each peer one
//!    message on a connection of its own (connect, write, close) and receives one from each.
//!    A receiver accepts whatever its peer listener has queued, reads the connections one at a
//!    time in the order it accepted them, and matches messages to its receives by (peer, tag). Payloads are derived from
//!    (seed, from, to, round), so the [`Judge`] knows every correct result.
//!
//! The bug: with one tag for every round, a peer that is already in round 2 can send a
//! message whose connection overtakes its round-1 message's (the kernel completes handshakes
//! out of order, and the receiver accepts it first). The receiver's round 1 then takes round 2's
//! bytes: a silent corruption.
//! Putting the round in the tag makes (peer, tag) name exactly one message.
//!
//! # How this example maps onto the seam
//!
//! | the seam asks for | here |
//! |---|---|
//! | [`ListenerKey`](bootsim_core::seam::ListenerKey): the protocol's listeners, a port each, which one peers dial | [`Listener`] (`Rendezvous` on the root, `Peer` on ranks) |
//! | [`Node`](bootsim_core::seam::Node): sans-IO `handle` / `poll_output` / `poll_timeout` | [`Node`], an enum of [`Root`] and [`Rank`]; no timers |
//! | [`Effect`](bootsim_core::seam::Effect)s for the world | listen, accept, connect, write, close (no drain) |
//! | [`Completed`](bootsim_core::seam::Completed): an operation's end | [`Completion`]: init is operation 0, round `k` operation `k`; errors are [`Error`] |
//! | [`Observed`](bootsim_core::seam::Observed): events, and what the record keeps of them | [`Event`]: `Sent` / `Taken` become the record's message log, `Stray` its strays |
//! | [`Protocol`](bootsim_core::seam::Protocol): nodes for n ranks, variants, workloads, trace words | [`Rendezvous`], [`Variant`], [`Workload`] |
//! | [`Judge`](bootsim_core::seam::Judge): the verdict | [`Judge`]: bootsim's oracle told the protocol's [`Rounds`] (`oracle::Payloads`: each round's bytes from [`payload()`]s, what wrong bytes are) |
//!
//! Nothing of this crate is known to any engine: the fast engine runs it as `fast::run(&Rendezvous,
//! &variant, &workload, &case, trace)` (see `tests/fast.rs`), `tests/memory.rs` steps it in
//! core's in-memory world and `tests/explore.rs` explores every schedule of it
//! (`bootsim_sim::harness::explore`). See README.md for what each test shows and how to test
//! your own protocol.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod judge;
mod node;
mod outbox;
pub mod payload;
mod protocol;
mod rank;
mod root;
mod types;
pub mod wire;

pub use judge::{judge, Judge, Rounds};
pub use node::Node;
pub use payload::payload;
pub use protocol::{Peers, Rendezvous, Variant, Workload};
pub use rank::{Rank, RankConfig};
pub use root::Root;
pub use types::{origin, Completion, Error, Event, Listener, PEER_PORT, ROOT_PORT};

/// README.md's examples, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;
