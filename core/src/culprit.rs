//! Blame: the peer a failed rank lost, named where the error is made: each error that blames a
//! peer carries it typed (nothing reads it back out of an error's text; bootsim's worlds blame
//! only their own ranks' typed errors, never a real binary's messages).

use std::fmt;

/// The peer a failed rank lost: the one that stopped, died, refused it or never came. A rank
/// that fails because of it gave up; the culprit's own failure is the cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Culprit {
    /// A rank of the session.
    Rank(u32),
    /// The root (run by rank 0's process in every bootsim session).
    Root,
}

impl Culprit {
    /// The rank it is, counting the root as rank 0's.
    pub fn rank(self) -> u32 {
        match self {
            Culprit::Rank(r) => r,
            Culprit::Root => 0,
        }
    }
}

impl fmt::Display for Culprit {
    /// As a rank's steps name their peers: `rank N` or `the root`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Culprit::Rank(r) => write!(f, "rank {r}"),
            Culprit::Root => f.write_str("the root"),
        }
    }
}
