//! The NCCL versions modelled, and every way their bootstrap differs. Each variant's doc names the
//! release tag and the source lines it follows (NVIDIA/nccl; see docs/nccl-protocol.md).

use std::fmt;
use std::str::FromStr;

/// One NCCL release's bootstrap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variant {
    /// `v2.8.4-1`: no socket magic or type; `bootstrapSend(peer, data)` frames `[rank][data]` and
    /// `bootstrapRecv` matches by peer alone (src/bootstrap.cc:414-488); `ncclTransportP2pSetup`
    /// exchanges connectInfo with no sync afterwards (src/transport.cc:63-120).
    Nccl28,
    /// `v2.19.3-1`: magic + socket type on every connection (src/misc/socket.cc:421-452, 546-553),
    /// `[rank][tag][data]` and (peer, tag) matching (src/bootstrap.cc:406-565); the transport
    /// setup's sync reuses the connectInfo tag `(i<<8) + graph->id+1` (src/transport.cc:79, 186).
    Nccl219,
    /// `v2.21.5-1`: as 2.19 but the sync's tag is `(i<<8) + (1<<7) + graph->id+1`
    /// (src/transport.cc:94, 232); the ring allgather sends and receives together
    /// (src/bootstrap.cc:532-545) and the intra-node allgather is a ring over two new sockets
    /// tagged 0 (src/bootstrap.cc:584-601).
    Nccl221,
    /// `v2.30.7-1`: the header is one framed `socketAckInfo {rank, tag}` (src/bootstrap.cc:980-993),
    /// a separate P2P listener (src/bootstrap.cc:826-832), a 176-byte `extInfo` with root early
    /// replies (src/bootstrap.cc:264-403), the ring allgather in both directions
    /// (src/bootstrap.cc:1144-1193), the sync as 0-byte messages (src/transport.cc:324-344), and a
    /// bad magic, bad type or early close discarded by accept (src/misc/socket.cc:326-392, 506-535).
    Nccl230,
}

/// Every variant, oldest first.
pub const ALL: [Variant; 4] = [Variant::Nccl28, Variant::Nccl219, Variant::Nccl221, Variant::Nccl230];

/// Every variant's case-string name, oldest first (as [`ALL`]).
pub const NAMES: [&str; 4] = ["nccl-2.8", "nccl-2.19", "nccl-2.21", "nccl-2.30"];

/// The 64-bit socket-type value NCCL sends after the magic: `ncclSocketTypeBootstrap`.
pub const SOCKET_TYPE_BOOTSTRAP: i32 = 1;

impl Variant {
    /// The name used in case strings: `nccl-2.8`, `nccl-2.19`, `nccl-2.21`, `nccl-2.30`.
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }

    /// The release tag of NVIDIA/nccl this variant follows.
    pub fn source_tag(self) -> &'static str {
        match self {
            Variant::Nccl28 => "v2.8.4-1",
            Variant::Nccl219 => "v2.19.3-1",
            Variant::Nccl221 => "v2.21.5-1",
            Variant::Nccl230 => "v2.30.7-1",
        }
    }

    /// Whether every connection starts with `u64 magic` then `i32 type` (2.9 onwards).
    pub fn has_preamble(self) -> bool {
        self != Variant::Nccl28
    }

    /// Whether messages carry a tag and receives match (peer, tag) rather than peer alone.
    pub fn tagged(self) -> bool {
        self != Variant::Nccl28
    }

    /// Whether the (rank, tag) header is one 8-byte frame (`socketAckInfo`) rather than two.
    pub fn ack_header(self) -> bool {
        self == Variant::Nccl230
    }

    /// Whether point-to-point messages go to a listener of their own rather than the ring's.
    pub fn separate_p2p_listener(self) -> bool {
        self == Variant::Nccl230
    }

    /// Whether the root answers a rank as soon as its ring successor has checked in.
    pub fn root_early_replies(self) -> bool {
        self == Variant::Nccl230
    }

    /// Whether the ring allgather runs in both directions at once.
    pub fn bidirectional_allgather(self) -> bool {
        self == Variant::Nccl230
    }

    /// Whether the transport setup ends with a sync (2.8 has none).
    pub fn setup_sync(self) -> bool {
        self != Variant::Nccl28
    }

    /// The transport setup's connectInfo tag for peer distance `i` and graph id `graph` (None:
    /// the NULL graph of point-to-point connections); 0 where messages carry no tag.
    pub fn exchange_tag(self, i: u32, graph: Option<u32>) -> i32 {
        if !self.tagged() {
            return 0;
        }
        ((i << 8) + graph.map_or(0, |g| g + 1)) as i32
    }

    /// The transport setup's sync tag: the exchange tag up to 2.21.4, `+ (1<<7)` from 2.21.5.
    pub fn sync_tag(self, i: u32, graph: Option<u32>) -> i32 {
        match self {
            Variant::Nccl28 => 0,
            Variant::Nccl219 => self.exchange_tag(i, graph),
            Variant::Nccl221 | Variant::Nccl230 => self.exchange_tag(i, graph) + (1 << 7),
        }
    }

    /// The size of the sync message: an `int` flag, or nothing at all in 2.30.
    pub fn sync_size(self) -> usize {
        if self == Variant::Nccl230 {
            0
        } else {
            4
        }
    }

    /// The tag of the two sockets of an intra-node allgather ring (2.21 onwards), or None where
    /// the intra-node allgather is point-to-point messages tagged by distance (2.19).
    pub fn intra_ring_tag(self) -> Option<i32> {
        match self {
            Variant::Nccl28 | Variant::Nccl219 => None,
            Variant::Nccl221 => Some(0),
            Variant::Nccl230 => Some(1 << 28),
        }
    }

    /// The size of the `extInfo` a rank sends the root.
    pub fn ext_info_len(self) -> usize {
        crate::codec::ext_info_len(self)
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A variant name that is not one of [`ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown NCCL variant '{0}' (expected one of nccl-2.8, nccl-2.19, nccl-2.21, nccl-2.30)")]
pub struct UnknownVariant(pub String);

impl FromStr for Variant {
    type Err = UnknownVariant;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ALL.into_iter().find(|v| v.name() == s).ok_or_else(|| UnknownVariant(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_follow_each_release() {
        // Ring graph (id 0), distance 1: connectInfo 0x101 everywhere tagged.
        assert_eq!(Variant::Nccl219.exchange_tag(1, Some(0)), 0x101);
        assert_eq!(Variant::Nccl219.sync_tag(1, Some(0)), 0x101, "2.19 reuses the tag");
        assert_eq!(Variant::Nccl221.sync_tag(1, Some(0)), 0x181, "2.21.5 adds 1<<7");
        assert_eq!(Variant::Nccl230.sync_tag(3, None), 0x380);
        assert_eq!(Variant::Nccl28.exchange_tag(1, Some(0)), 0);
    }

    #[test]
    fn names_round_trip_and_bad_names_are_errors() {
        for v in ALL {
            assert_eq!(v.name().parse::<Variant>(), Ok(v));
        }
        assert_eq!("nccl-2.20".parse::<Variant>(), Err(UnknownVariant("nccl-2.20".into())));
    }
}
