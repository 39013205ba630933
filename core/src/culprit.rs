//! Blame: the peer a failed rank lost, named where the error is made.

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

    /// The peer a rank's own words name: `rank N` or `the root`, the names the rank's steps give
    /// their peers (`from`, `to`, a wait's description); the first one that is not `me`.
    pub fn named(words: &str, me: u32) -> Option<Culprit> {
        let mut it = words.split(|c: char| !c.is_ascii_alphanumeric()).peekable();
        while let Some(w) = it.next() {
            let found = match (w, it.peek()) {
                ("rank", Some(n)) => n.parse().ok().map(Culprit::Rank),
                ("the", Some(&"root")) => Some(Culprit::Root),
                _ => None,
            };
            if let Some(c) = found.filter(|c| *c != Culprit::Rank(me)) {
                return Some(c);
            }
        }
        None
    }
}
