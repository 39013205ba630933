//! Protocol variants: the buggy NVSHMEM versions, the proposed fix, and robust designs, as one
//! value made of independent flags with named presets.

use std::fmt;
use std::time::Duration;

use crate::uid::NVSHMEM_UID_VERSION;

/// How collectives number their point-to-point tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TagScheme {
    /// Alltoall and barrier counters both start at 0 on every call (NVSHMEM 3.4 to 3.7).
    Overlapping,
    /// Alltoall tags start at `1 << 24`, barrier tags at `1 << 25` (rev-0c06599, PR #97).
    Disjoint,
    /// NVSHMEM 3.8.0: every alltoall and barrier call takes one tag from a 64-bit counter that
    /// init sets to `first` (1) and nothing resets; all messages of the call carry it. A call
    /// finding the counter past [`MAX_CALL_TAG`] fails ("tag space exhausted"), the counter unmoved.
    PerCall {
        /// The counter's value after init (1 in NVSHMEM; larger to reach the limit in a test).
        first: u64,
    },
}

/// The largest tag 3.8.0's per-call counter hands out: 2^31 - 1, the largest `int` tag.
pub const MAX_CALL_TAG: u64 = i32::MAX as u64;

/// What a receive does when the message size differs from the buffer size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SizePolicy {
    /// Shorter: copied to the start, the rest left as it was, success. Longer: "truncated" (3.4/3.5).
    Lenient,
    /// Any difference is an error (3.7 and later).
    Strict,
}

/// How point-to-point messages travel and are matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// One short-lived connection per message, matched by (peer, tag) with the unexpected list.
    PerMessage,
    /// Per-message connections whose header carries a per-ordered-pair sequence number; the
    /// receiver takes every connection and delivers in sequence order.
    Sequenced,
    /// One persistent connection per (source, destination), opened lazily: TCP order is FIFO.
    Persistent,
}

/// A complete protocol variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Variant {
    /// Tag numbering of alltoall and barrier.
    pub tags: TagScheme,
    /// Receive-size semantics.
    pub size: SizePolicy,
    /// The TX drain before close, with its bound; `None` when off.
    pub drain: Option<Duration>,
    /// Message transport and matching.
    pub transport: Transport,
}

/// Every named preset, in the order tables list them.
pub const PRESETS: [&str; 8] =
    ["nvshmem-3.4", "nvshmem-3.7", "nvshmem-3.8", "drain", "disjoint", "pr97", "seq", "persistent"];

/// The drain bound NVSHMEM's `NVSHMEM_BOOTSTRAP_UID_SEND_DRAIN_MS` defaults to.
pub const DEFAULT_DRAIN: Duration = Duration::from_millis(1000);

impl Variant {
    /// NVSHMEM v3.4.5/3.5: overlapping tags, no drain, lenient size.
    pub const NVSHMEM_3_4: Variant = Variant {
        tags: TagScheme::Overlapping,
        size: SizePolicy::Lenient,
        drain: None,
        transport: Transport::PerMessage,
    };
    /// NVSHMEM v3.7: as 3.4 with strict size.
    pub const NVSHMEM_3_7: Variant = Variant { size: SizePolicy::Strict, ..Self::NVSHMEM_3_4 };
    /// NVSHMEM v3.8.0: as 3.7 with one tag per call from a counter never reset.
    pub const NVSHMEM_3_8: Variant = Variant { tags: TagScheme::PerCall { first: 1 }, ..Self::NVSHMEM_3_7 };
    /// 3.7 plus the SIOCOUTQ drain before close (fail-open after 1000 ms).
    pub const DRAIN: Variant = Variant { drain: Some(DEFAULT_DRAIN), ..Self::NVSHMEM_3_7 };
    /// 3.7 with disjoint alltoall and barrier tag spaces.
    pub const DISJOINT: Variant = Variant { tags: TagScheme::Disjoint, ..Self::NVSHMEM_3_7 };
    /// The fix proposed in NVIDIA/nvshmem#97: drain plus disjoint tags.
    pub const PR97: Variant = Variant { tags: TagScheme::Disjoint, ..Self::DRAIN };
    /// Per-ordered-pair sequence numbers: immune to accept order, no waiting.
    pub const SEQ: Variant = Variant { transport: Transport::Sequenced, ..Self::NVSHMEM_3_7 };
    /// Persistent ordered connections per (source, destination).
    pub const PERSISTENT: Variant = Variant { transport: Transport::Persistent, ..Self::NVSHMEM_3_7 };

    /// A preset by name, e.g. `nvshmem-3.4` or `pr97`.
    pub fn preset(name: &str) -> Option<Variant> {
        Some(match name {
            "nvshmem-3.4" => Self::NVSHMEM_3_4,
            "nvshmem-3.7" => Self::NVSHMEM_3_7,
            "nvshmem-3.8" => Self::NVSHMEM_3_8,
            "drain" => Self::DRAIN,
            "disjoint" => Self::DISJOINT,
            "pr97" => Self::PR97,
            "seq" => Self::SEQ,
            "persistent" => Self::PERSISTENT,
            _ => return None,
        })
    }

    /// The preset's name if this value is one.
    pub fn preset_name(&self) -> Option<&'static str> {
        PRESETS.into_iter().find(|n| Self::preset(n).as_ref() == Some(self))
    }

    /// Sets the drain bound with `NVSHMEM_BOOTSTRAP_UID_SEND_DRAIN_MS` semantics: 0 or less disables.
    pub fn with_drain_ms(mut self, ms: i64) -> Variant {
        self.drain = u64::try_from(ms).ok().filter(|&ms| ms > 0).map(Duration::from_millis);
        self
    }

    /// Starts a per-call tag counter at `first` (3.8's knob to reach the tag limit in a test);
    /// variants whose tags restart every call are returned unchanged.
    pub fn with_first_tag(mut self, first: u64) -> Variant {
        if let TagScheme::PerCall { .. } = self.tags {
            self.tags = TagScheme::PerCall { first };
        }
        self
    }

    /// True when ranks of the two variants send the same bytes for the same workload: the same
    /// tags (the per-call counter's start aside) and the same transport, which is what
    /// `bootsim conformance` compares. Receive-size checks and the drain change no byte sent, so
    /// such a pair works together whatever they are.
    pub fn same_wire_bytes(&self, other: &Variant) -> bool {
        let (a, b) = (self.with_first_tag(1), other.with_first_tag(1));
        a.tags == b.tags && a.transport == b.transport
    }

    /// The tag counter's value after init, for variants with one tag per call.
    pub fn first_call_tag(&self) -> Option<u64> {
        match self.tags {
            TagScheme::PerCall { first } => Some(first),
            _ => None,
        }
    }

    /// True where a barrier sends 4 zero bytes (3.8.0 initialises its word; earlier versions
    /// send whatever the stack held, which the workload's word stands for).
    pub fn zeroes_barrier_word(&self) -> bool {
        matches!(self.tags, TagScheme::PerCall { .. })
    }

    /// The unique-ID version this variant's wire format answers to: mixed builds fail at the root.
    pub fn uid_version(&self) -> i32 {
        match self.transport {
            Transport::PerMessage => NVSHMEM_UID_VERSION,
            Transport::Sequenced => (2 << 16) + 128,
            Transport::Persistent => (3 << 16) + 128,
        }
    }

    /// First alltoall tag minus one (the counter is incremented before each step); per-call
    /// tags have no base.
    pub fn alltoall_tag_base(&self) -> i32 {
        match self.tags {
            TagScheme::Overlapping | TagScheme::PerCall { .. } => 0,
            TagScheme::Disjoint => 1 << 24,
        }
    }

    /// First barrier tag minus one.
    pub fn barrier_tag_base(&self) -> i32 {
        match self.tags {
            TagScheme::Overlapping | TagScheme::PerCall { .. } => 0,
            TagScheme::Disjoint => 1 << 25,
        }
    }
}

impl fmt::Display for Variant {
    /// The preset name, or the flags spelled out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(name) = self.preset_name() {
            return f.write_str(name);
        }
        if let (Some(first), Some(name)) = (self.first_call_tag(), self.with_first_tag(1).preset_name()) {
            return write!(f, "{name} first_tag={first}");
        }
        let drain = self.drain.map_or("off".to_string(), |d| format!("{}ms", d.as_millis()));
        let tags = match self.tags {
            TagScheme::PerCall { first } => format!("PerCall(first={first:#x})"),
            t => format!("{t:?}"),
        };
        write!(f, "{tags}/{:?}/drain={}/{:?}", self.size, drain, self.transport)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pairs_that_send_the_same_bytes_differ_only_in_checks_and_drain() {
        let same = |a: &str, b: &str| Variant::preset(a).unwrap().same_wire_bytes(&Variant::preset(b).unwrap());
        // Conformance proves plugin 3.4.5 byte-identical to nvshmem-3.7 and 3.7.1 to nvshmem-3.4.
        assert!(same("nvshmem-3.4", "nvshmem-3.7") && same("nvshmem-3.7", "nvshmem-3.4"));
        assert!(same("nvshmem-3.7", "drain") && same("disjoint", "pr97"));
        assert!(!same("nvshmem-3.4", "nvshmem-3.8") && !same("nvshmem-3.7", "disjoint"));
        assert!(!same("nvshmem-3.7", "seq") && !same("seq", "persistent"));
        let late = Variant::NVSHMEM_3_8.with_first_tag(1 << 31);
        assert!(late.same_wire_bytes(&Variant::NVSHMEM_3_8), "the counter's start is a knob, not a protocol");
    }

    #[test]
    fn presets_are_distinct_and_named() {
        for (i, a) in PRESETS.iter().enumerate() {
            let v = Variant::preset(a).unwrap();
            assert_eq!(v.to_string(), *a);
            for b in &PRESETS[i + 1..] {
                assert_ne!(v, Variant::preset(b).unwrap(), "{a} vs {b}");
            }
        }
        assert_eq!(Variant::preset("nvshmem-3.5"), None);
    }

    #[test]
    fn drain_ms_follows_nvshmem_env_semantics() {
        assert_eq!(Variant::PR97.with_drain_ms(0).drain, None);
        assert_eq!(Variant::PR97.with_drain_ms(-3).drain, None);
        assert_eq!(Variant::NVSHMEM_3_7.with_drain_ms(5).drain, Some(Duration::from_millis(5)));
        assert_eq!(Variant::PR97.with_drain_ms(0).to_string(), "disjoint");
        assert_eq!(Variant::DRAIN.with_drain_ms(5).to_string(), "Overlapping/Strict/drain=5ms/PerMessage");
    }

    #[test]
    fn only_per_call_tags_take_a_first_tag() {
        assert_eq!(Variant::NVSHMEM_3_8.first_call_tag(), Some(1));
        assert_eq!(Variant::NVSHMEM_3_8.with_first_tag(1), Variant::NVSHMEM_3_8);
        let near = Variant::NVSHMEM_3_8.with_first_tag(0x7fff_fffe);
        assert_eq!(near.to_string(), "nvshmem-3.8 first_tag=2147483646");
        assert_eq!(Variant::NVSHMEM_3_7.with_first_tag(9), Variant::NVSHMEM_3_7);
        assert_eq!(Variant::NVSHMEM_3_8.uid_version(), NVSHMEM_UID_VERSION);
    }

    #[test]
    fn wire_incompatible_variants_have_their_own_uid_version() {
        assert_eq!(Variant::PR97.uid_version(), NVSHMEM_UID_VERSION);
        assert_ne!(Variant::SEQ.uid_version(), NVSHMEM_UID_VERSION);
        assert_ne!(Variant::PERSISTENT.uid_version(), Variant::SEQ.uid_version());
    }
}
