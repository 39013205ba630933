//! How a run record ([`crate::RunRecord`]) states a participant's failure or wait: typed where a
//! protocol's node made it (the operation, the peer it lost or waits for, the protocol's own
//! words), text only where a world has nothing else (a real binary's message, a panic, a
//! signal). Readers take the peer and the operation from the typed fields, never from the words;
//! the words are what every report prints.

use std::fmt;

use crate::ids::OpName;
use crate::seam::Completed;
use crate::Culprit;

/// An error a rank's init or operation, or the root, ended with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordedError {
    /// A protocol's typed error, read through its [`Completed`].
    Protocol {
        /// The failed operation's number on its node: 0 is init (the root: its session), then
        /// the workload's operations from 1.
        op: u32,
        /// The peer whose loss made it fail, when another's did ([`Completed::culprit`]).
        culprit: Option<Culprit>,
        /// The protocol's words for it ([`Completed::error_text`]: the record names the rank).
        text: String,
    },
    /// Words only: a world that has no protocol's error (a real binary, a panic, a signal).
    Text(String),
}

impl RecordedError {
    /// Rank `rank`'s error `error` ending its operation `op` (0: init), as protocol `C` reads it.
    pub fn of<C: Completed>(rank: u32, op: u32, error: &C::Error) -> RecordedError {
        RecordedError::Protocol { op, culprit: C::culprit(rank, error), text: C::error_text(rank, op, error) }
    }

    /// The root's error `error`, in its own words (they name the root).
    pub fn of_root<C: Completed>(error: &C::Error) -> RecordedError {
        RecordedError::Protocol { op: 0, culprit: C::culprit(0, error), text: error.to_string() }
    }

    /// Its words, as findings and reports print them.
    pub fn text(&self) -> &str {
        match self {
            RecordedError::Protocol { text, .. } | RecordedError::Text(text) => text,
        }
    }

    /// The peer whose loss caused it, where the protocol typed one.
    pub fn culprit(&self) -> Option<Culprit> {
        match self {
            RecordedError::Protocol { culprit, .. } => *culprit,
            RecordedError::Text(_) => None,
        }
    }

    /// The operation it ended, where the protocol typed one (0: init).
    pub fn op(&self) -> Option<u32> {
        match self {
            RecordedError::Protocol { op, .. } => Some(*op),
            RecordedError::Text(_) => None,
        }
    }

    /// The same error with its words rewritten (the typed fields kept).
    pub fn map_text(self, f: impl FnOnce(String) -> String) -> RecordedError {
        match self {
            RecordedError::Protocol { op, culprit, text } => RecordedError::Protocol { op, culprit, text: f(text) },
            RecordedError::Text(text) => RecordedError::Text(f(text)),
        }
    }
}

impl fmt::Display for RecordedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

impl From<String> for RecordedError {
    fn from(text: String) -> RecordedError {
        RecordedError::Text(text)
    }
}

impl From<&str> for RecordedError {
    fn from(text: &str) -> RecordedError {
        RecordedError::Text(text.to_string())
    }
}

/// How a waiting participant is blocked on its peer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Blocked {
    /// In connect() to the peer, to send it a message (it accepts nothing meanwhile: ranks
    /// doing this to one another in a cycle deadlock).
    ConnectToSend,
    /// In connect() to the peer otherwise (init's dials).
    Connect,
    /// Anything else: a read, an accept, a timer, a drain, or not known.
    #[default]
    Other,
}

/// What a rank or the root still waited for when the run stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Awaited {
    /// A protocol's node's own account ([`crate::seam::Node::awaited`]).
    Protocol {
        /// The operation it waits in, where the protocol names one.
        op: Option<OpName>,
        /// The peer that could unblock it, where known.
        peer: Option<Culprit>,
        /// How it is blocked on that peer.
        blocked: Blocked,
        /// The protocol's words for it.
        text: String,
    },
    /// Words only: a world that has no node's account (a real binary, a deadline it set).
    Text(String),
}

impl Awaited {
    /// A wait a protocol knows only the words and perhaps the peer of.
    pub fn told(text: String, peer: Option<Culprit>) -> Awaited {
        Awaited::Protocol { op: None, peer, blocked: Blocked::Other, text }
    }

    /// A protocol's error that is its node giving up waiting ([`Completed::is_hang`]), for
    /// `rank`'s operation `op`: what it waited for, and the peer it blamed.
    pub fn of_hang<C: Completed>(rank: u32, op: u32, error: &C::Error) -> Awaited {
        Awaited::of_hang_told::<C>(C::error_text(rank, op, error), rank, error)
    }

    /// [`Awaited::of_hang`] in the given words (a world that states the error its own way).
    pub fn of_hang_told<C: Completed>(text: String, rank: u32, error: &C::Error) -> Awaited {
        Awaited::Protocol { op: None, peer: C::culprit(rank, error), blocked: C::blocked(error), text }
    }

    /// Its words, as findings and reports print them.
    pub fn text(&self) -> &str {
        match self {
            Awaited::Protocol { text, .. } | Awaited::Text(text) => text,
        }
    }

    /// The peer that could unblock it, where the protocol typed one.
    pub fn peer(&self) -> Option<Culprit> {
        match self {
            Awaited::Protocol { peer, .. } => *peer,
            Awaited::Text(_) => None,
        }
    }

    /// The rank it waits in connect() for in order to send (see [`Blocked::ConnectToSend`]).
    pub fn connecting_to_send(&self) -> Option<u32> {
        match self {
            Awaited::Protocol { peer: Some(Culprit::Rank(to)), blocked: Blocked::ConnectToSend, .. } => Some(*to),
            _ => None,
        }
    }
}

impl fmt::Display for Awaited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

impl From<String> for Awaited {
    fn from(text: String) -> Awaited {
        Awaited::Text(text)
    }
}

impl From<&str> for Awaited {
    fn from(text: &str) -> Awaited {
        Awaited::Text(text.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_what_renders_and_typed_fields_are_read_without_it() {
        let e = RecordedError::Protocol { op: 2, culprit: Some(Culprit::Rank(3)), text: "barrier #1: lost".into() };
        assert_eq!((e.to_string(), e.op(), e.culprit()), ("barrier #1: lost".into(), Some(2), Some(Culprit::Rank(3))));
        // Words that name a rank are never read back as a culprit.
        let t = RecordedError::from("rank 3 closed the connection");
        assert_eq!((t.culprit(), t.op()), (None, None));
        assert_eq!(t.map_text(|s| format!("init: {s}")).text(), "init: rank 3 closed the connection");

        let w = Awaited::Protocol {
            op: None,
            peer: Some(Culprit::Rank(7)),
            blocked: Blocked::ConnectToSend,
            text: "send to rank 9".into(),
        };
        assert_eq!((w.connecting_to_send(), w.to_string()), (Some(7), "send to rank 9".into()));
        assert_eq!(Awaited::told("send to rank 7 (connect of local c1)".into(), None).connecting_to_send(), None);
        assert_eq!(Awaited::from("x").peer(), None);
    }
}
