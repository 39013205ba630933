//! A node's queue of outputs, drained by the world through `poll_output`: the seam's own
//! [`bootsim_core::seam::Outbox`] over this protocol's types.

use bootsim_core::seam::Output;

use crate::types::{Completion, Event, Listener};

/// One of the nodes' outputs.
pub(crate) type Out = Output<Listener, Completion, Event>;

/// Outputs in the order they were made, the bytes of every write in one reused buffer.
pub(crate) type Outbox = bootsim_core::seam::Outbox<Listener, Completion, Event>;
