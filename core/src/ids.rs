//! Identifiers the core hands to drivers.

use std::fmt;

/// A connection, numbered by the state machine that asked for it (connect or accept).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}

/// An application operation, numbered in the order the application started it (init is 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u32);

impl OpId {
    /// The operation's index in the application's workload (from 0, init apart), the one number
    /// every person-facing output shows; `None` for init.
    pub fn workload_index(self) -> Option<u32> {
        (self.0 != 0).then(|| self.0 - 1)
    }
}

/// An operation as a person reads it: `init`, `alltoall #1` (see [`OpId::workload_index`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpName(pub OpType, pub OpId);

impl fmt::Display for OpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1.workload_index() {
            Some(i) => write!(f, "{} #{i}", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

/// What kind of operation an [`OpId`] is, as its protocol defines it: a pointer to the
/// protocol's static [`OpTypeDef`], so an origin stays a few copyable bytes (no allocation per
/// message) and prints without asking its protocol. Two are equal when their code and name are.
#[derive(Clone, Copy)]
pub struct OpType(&'static OpTypeDef);

/// A protocol's description of one of its operation types (see [`OpType`]).
#[derive(Debug)]
pub struct OpTypeDef {
    /// Its number among its protocol's types (orders and hashes it).
    pub code: u8,
    /// Its name as people read it: `alltoall`, `barrier`.
    pub name: &'static str,
    /// What one of its steps is called: `step`, `round`.
    pub step: &'static str,
    /// True when nobody reads its messages' bytes (a barrier's): a receive of one type that
    /// took another message of such a type is benign.
    pub bytes_unused: bool,
}

impl OpType {
    /// The type `def` describes (a protocol's `const`).
    pub const fn new(def: &'static OpTypeDef) -> OpType {
        OpType(def)
    }

    /// Its number among its protocol's types.
    pub fn code(self) -> u8 {
        self.0.code
    }

    /// Its name: `alltoall`.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// What one of its steps is called: `step`, `round`.
    pub fn step_word(self) -> &'static str {
        self.0.step
    }

    /// True when nobody reads its messages' bytes (see [`OpTypeDef::bytes_unused`]).
    pub fn bytes_unused(self) -> bool {
        self.0.bytes_unused
    }
}

impl PartialEq for OpType {
    fn eq(&self, other: &OpType) -> bool {
        std::ptr::eq(self.0, other.0) || (self.0.code == other.0.code && self.0.name == other.0.name)
    }
}

impl Eq for OpType {}

impl PartialOrd for OpType {
    fn partial_cmp(&self, other: &OpType) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OpType {
    fn cmp(&self, other: &OpType) -> std::cmp::Ordering {
        (self.0.code, self.0.name).cmp(&(other.0.code, other.0.name))
    }
}

impl std::hash::Hash for OpType {
    /// The code as a derived `Hash` of a fieldless enum writes its discriminant, so state
    /// fingerprints read the same as when the types were one enum.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_isize(self.0.code as isize);
    }
}

impl fmt::Debug for OpType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.name)
    }
}

impl fmt::Display for OpType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.name)
    }
}

/// Where a point-to-point message belongs: which operation of its sender, and which step of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MsgOrigin {
    /// The operation's id on the rank that sent or receives it.
    pub op: OpId,
    /// The operation's type, as its protocol names it.
    pub kind: OpType,
    /// The step within the operation (alltoall shift, barrier round), from 1.
    pub step: u32,
}

impl fmt::Display for MsgOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", OpName(self.kind, self.op), self.kind.step_word(), self.step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIFT: OpType = OpType::new(&OpTypeDef { code: 2, name: "shift", step: "step", bytes_unused: false });
    const FLAG: OpType = OpType::new(&OpTypeDef { code: 3, name: "flag", step: "round", bytes_unused: true });

    #[test]
    fn an_origin_prints_its_protocols_names_and_stays_small() {
        let o = MsgOrigin { op: OpId(2), kind: FLAG, step: 1 };
        assert_eq!(o.to_string(), "flag #1 round 1");
        assert_eq!(MsgOrigin { op: OpId(0), kind: SHIFT, step: 3 }.to_string(), "shift step 3");
        assert!(FLAG.bytes_unused() && !SHIFT.bytes_unused());
        assert!(SHIFT < FLAG && SHIFT != FLAG);
        // A copy of the description elsewhere is the same type.
        static COPY: OpTypeDef = OpTypeDef { code: 2, name: "shift", step: "step", bytes_unused: false };
        assert_eq!(OpType::new(&COPY), SHIFT);
        assert!(std::mem::size_of::<MsgOrigin>() <= 16);
    }
}
