//! What one explorer step touches, for partial-order reduction.
//!
//! The independence relation. A step is a choice plus its *cascade*: every deterministic
//! consequence the world runs before the next choice (`World::settle`). The world's state is
//! partitioned into resources (`Res`): each node's state (its core state machine, workload
//! progress, oracle digest, dial counters, and the accepted ends of connections it serves), each
//! listener's open flag, its outstanding accept, its FIFO queue (and connects waiting for it to
//! open), each in-flight connection's entry (membership of its listener's in-flight set, the
//! drained connections it must follow, and which nodes know its drain completed: reading a
//! node's knowledge reads the entries it holds, adding to it also wakes the node), and each
//! connection's buffers and open ends. `World` records every resource a step reads or writes, the choice's own
//! guard included (the accept outstanding, the connection in flight, what it must follow).
//!
//! Two steps `a` and `b` enabled at a state `s` are *independent* when neither writes a resource
//! the other reads or writes ([`Footprint::independent`]). Then they commute: `b`'s cascade only
//! writes resources `a` never looks at, so `a` at `s·b` reads the same values, makes the same
//! decisions, has the same footprint and writes the same values as at `s` (and vice versa), hence
//! `s·a·b = s·b·a`, each stays enabled after the other, and (by induction along a path of steps
//! independent of `a`) `a`'s footprint stays the one measured where it was explored. That is what
//! sleep sets need; the footprint is measured, not assumed, so an accept whose cascade dials,
//! closes a listener or wakes a node another step touches is dependent with that step.
//! Anything that changes which choices are offered other than through these resources (a drain
//! awaiting its outcome, which pre-empts every accept) marks a step `global`: dependent with
//! every step. The run's log and the choice trail are not resources: they are not in the
//! fingerprint and the oracle judges what `observed` digests (per node).

use std::cmp::Ordering;

use bootsim_core::ConnId;

use crate::engine::outcome::Node;

/// A connection, named by its dialing end.
pub(crate) type LinkId = (Node, ConnId);
/// A listener: its owner and its port (one per listener of the protocol).
pub(crate) type Key = (Node, u16);

/// One resource of the world's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Res {
    /// A node's own state.
    Node(Node),
    /// Whether a listener is open.
    Open(Key),
    /// A listener's outstanding accept.
    Pending(Key),
    /// A FIFO listener's queue and the connects waiting for a listener to open.
    Queue(Key),
    /// An in-flight connection's entry in its peer listener's set.
    Entry(LinkId),
    /// A connection's buffers and ends.
    Link(LinkId),
}

/// The resources one step read and wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    reads: Vec<Res>,
    writes: Vec<Res>,
    global: bool,
}

impl Footprint {
    pub(crate) fn read(&mut self, r: Res) {
        self.reads.push(r);
    }

    pub(crate) fn write(&mut self, r: Res) {
        self.writes.push(r);
    }

    /// Marks the step dependent with every other.
    pub(crate) fn global(&mut self) {
        self.global = true;
    }

    /// Sorts and deduplicates, once the step is over.
    pub(crate) fn seal(&mut self) {
        self.writes.sort_unstable();
        self.writes.dedup();
        self.reads.sort_unstable();
        self.reads.dedup();
        self.reads.retain(|r| self.writes.binary_search(r).is_err());
    }

    /// True when the two (sealed) steps commute: neither writes what the other touches.
    pub fn independent(&self, other: &Footprint) -> bool {
        !self.global
            && !other.global
            && disjoint(&self.writes, &other.writes)
            && disjoint(&self.writes, &other.reads)
            && disjoint(&other.writes, &self.reads)
    }
}

/// True when two sorted lists share nothing.
fn disjoint(a: &[Res], b: &[Res]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            Ordering::Less => i += 1,
            Ordering::Greater => j += 1,
            Ordering::Equal => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_conflict_on_a_write_never_on_two_reads() {
        let key = (Node::Rank(1), bootsim_nvshmem::ports::PEERS_PORT);
        let mut a = Footprint::default();
        a.write(Res::Node(Node::Rank(0)));
        a.read(Res::Open(key));
        a.seal();
        let mut b = Footprint::default();
        b.write(Res::Node(Node::Rank(2)));
        b.read(Res::Open(key));
        b.seal();
        assert!(a.independent(&b) && b.independent(&a));
        let mut c = Footprint::default();
        c.write(Res::Open(key));
        c.seal();
        assert!(!a.independent(&c) && !c.independent(&a));
        let mut g = Footprint::default();
        g.global();
        assert!(!g.independent(&Footprint::default()));
    }
}
