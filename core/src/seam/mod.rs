//! The protocol seam: the one contract between a bootstrap protocol and every world that runs
//! it (the fast and turmoil engines, explore, the in-memory world, real sockets).
//!
//! A protocol gives sans-IO [`Node`]s (its root and its ranks) and a [`Protocol`] factory.
//! The contract, in the quinn-proto / str0m style:
//!
//! - **Inputs** ([`Input`]): what the world did (a listener opened, a connection accepted or
//!   established, bytes received, a peer closed, a drain ended), fed with `handle(now, input)`.
//! - **Outputs** ([`Output`]), drained with `poll_output(&mut tx)` after every input or timeout,
//!   in two typed arms: [`Effect`]s the world carries out in order (listen, accept, close a
//!   listener, connect, write the bytes put in `tx`, drain, close), and [`Observation`]s it
//!   only records and renders (an operation's end, read through [`Completed`]; a protocol
//!   event, read through [`Observed`] for the record's message log, drains and strays, and
//!   rendered to trace words by the protocol, [`Protocol::event_words`]).
//! - **Time** comes in as values: the world calls `handle_timeout(now)` once `poll_timeout`
//!   passes. A node without timers returns `None` (a peer that never comes is a hang the
//!   world detects).
//! - **Listeners** are the protocol's own key ([`ListenerKey`]): the world gives each a port
//!   and asks which one is the rank-to-rank listener `accept=` schedules order.
//! - **At the end** the world reads what each node waits for, the rank that could unblock it,
//!   its unexpected list, and whether it finished; the protocol's [`Judge`] concludes.
//!
//! Worlds are generic over the protocol (static dispatch: no boxed nodes in a hot loop).
//! NVSHMEM's nodes implement it in the `bootsim-nvshmem` crate, NCCL's in `bootsim-nccl`.

#[cfg(any(test, feature = "testing"))]
pub mod checkin;
mod io;
mod node;
mod outbox;
mod protocol;

pub use io::{CloseReason, Effect, Input, Observation, Output, OwnedInput};
pub use node::{Completed, ListenerKey, Node, NodeOutput, Noted, Observed, PeerPorts};
pub use outbox::Outbox;
pub use protocol::{CompletionOf, Judge, Nodes, Protocol, Setup};
