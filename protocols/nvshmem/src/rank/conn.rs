//! A rank's connections: what each is for, its receive buffer, and how far its header has parsed.

use std::hash::{Hash, Hasher};
use std::net::SocketAddr;

use bootsim_core::codec::{FrameReader, WireError};
use bootsim_core::ids::ConnId;
use bootsim_core::time::Instant;

use crate::variant::Transport;

/// What a connection is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Role {
    /// Dialed to the root for the check-in.
    ToRoot,
    /// Accepted from the root on the root listener: carries the ring successor.
    FromRoot,
    /// Dialed to the ring successor (persistent).
    RingSend,
    /// Accepted from the ring predecessor (persistent).
    RingRecv,
    /// Dialed to send one point-to-point message (or, persistent transport, all of them).
    MessageOut,
    /// Accepted on the peer listener: a point-to-point message (or a persistent stream).
    MessageIn,
}

impl Role {
    /// The listener an accepted connection of this role came from (`None`: dialed).
    pub fn listener(self) -> Option<crate::listener::Listener> {
        match self {
            Role::FromRoot => Some(crate::listener::Listener::FromRoot),
            Role::RingRecv | Role::MessageIn => Some(crate::listener::Listener::Peers),
            Role::ToRoot | Role::RingSend | Role::MessageOut => None,
        }
    }
}

/// The identifying header of an inbound point-to-point connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Header {
    /// The sender's rank as it wrote it.
    pub rank: i32,
    /// The message tag (unused by the persistent transport, whose tags come per message).
    pub tag: i32,
    /// The sequence number (sequenced transport only).
    pub seq: u64,
}

/// Progress through an inbound connection's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum HeaderState {
    Preamble,
    Rank,
    Tag { rank: i32 },
    Seq { rank: i32, tag: i32 },
    Done(Header),
}

/// One connection.
#[derive(Clone, Debug, Hash)]
pub(crate) struct Conn {
    pub role: Role,
    pub remote: Option<SocketAddr>,
    pub reader: FrameReader,
    pub opened: Instant,
    header: HeaderState,
    /// Dialed connections: the handshake completed.
    pub established: bool,
    /// Drain answer, once the driver gave it: time waited and, on timeout, bytes still unacked.
    pub drained: Option<(std::time::Duration, Option<usize>)>,
    /// Point-to-point messages taken from a persistent stream so far.
    pub taken: u64,
}

impl Conn {
    pub fn new(role: Role, remote: Option<SocketAddr>, now: Instant) -> Self {
        Conn {
            role,
            remote,
            reader: FrameReader::new(),
            opened: now,
            header: HeaderState::Preamble,
            established: false,
            drained: None,
            taken: 0,
        }
    }

    /// The parsed header, if complete.
    pub fn header(&self) -> Option<Header> {
        match self.header {
            HeaderState::Done(h) => Some(h),
            _ => None,
        }
    }

    /// True while the header is still incomplete (a stall candidate).
    pub fn header_pending(&self) -> bool {
        !matches!(self.header, HeaderState::Done(_))
    }

    /// Advances header parsing as far as the buffered bytes allow. The preamble alone for the
    /// ring and root connections; preamble, rank and tag (and seq) for point-to-point ones;
    /// preamble and rank for persistent streams.
    pub fn parse_header(&mut self, magic: u64, transport: Transport) -> Result<Option<Header>, WireError> {
        loop {
            match self.header {
                HeaderState::Preamble => {
                    if self.reader.read_preamble(magic)?.is_none() {
                        return Ok(None);
                    }
                    self.header = match self.role {
                        Role::MessageIn => HeaderState::Rank,
                        _ => HeaderState::Done(Header { rank: -1, tag: 0, seq: 0 }),
                    };
                }
                HeaderState::Rank => {
                    let Some(rank) = self.reader.read_i32("rank")? else { return Ok(None) };
                    self.header = match transport {
                        Transport::Persistent => HeaderState::Done(Header { rank, tag: 0, seq: 0 }),
                        _ => HeaderState::Tag { rank },
                    };
                }
                HeaderState::Tag { rank } => {
                    let Some(tag) = self.reader.read_i32("tag")? else { return Ok(None) };
                    self.header = match transport {
                        Transport::Sequenced => HeaderState::Seq { rank, tag },
                        _ => HeaderState::Done(Header { rank, tag, seq: 0 }),
                    };
                }
                HeaderState::Seq { rank, tag } => {
                    let Some(seq) = self.reader.read_fixed::<8>("sequence number")? else { return Ok(None) };
                    self.header = HeaderState::Done(Header { rank, tag, seq: u64::from_le_bytes(seq) });
                }
                HeaderState::Done(h) => return Ok(Some(h)),
            }
        }
    }
}

/// All connections of one state machine, with ids allocated in order. A rank holds a handful
/// at a time (the ring's two, the message in flight, a few accepted ahead), so they live in a
/// vector sorted by id: a lookup is a short binary search, an insert or removal a short move,
/// where a `BTreeMap` paid a node walk and, on removal, a rebalance. Iteration is in id order,
/// as the map's was, and the table hashes as the map did.
#[derive(Clone, Debug, Default)]
pub(crate) struct ConnTable {
    next: u64,
    conns: Vec<(ConnId, Conn)>,
}

impl ConnTable {
    /// A fresh id, never reused.
    pub fn allocate(&mut self) -> ConnId {
        self.next += 1;
        ConnId(self.next)
    }

    fn find(&self, id: ConnId) -> Result<usize, usize> {
        self.conns.binary_search_by_key(&id, |(k, _)| *k)
    }

    /// Adds `conn` under `id`, replacing any connection already there.
    pub fn insert(&mut self, id: ConnId, conn: Conn) {
        // Ids are allocated in order, so a new one most often goes last.
        if self.conns.last().is_none_or(|(last, _)| *last < id) {
            return self.conns.push((id, conn));
        }
        match self.find(id) {
            Ok(i) => self.conns[i].1 = conn,
            Err(i) => self.conns.insert(i, (id, conn)),
        }
    }

    pub fn get(&self, id: ConnId) -> Option<&Conn> {
        self.find(id).ok().map(|i| &self.conns[i].1)
    }

    pub fn get_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        self.find(id).ok().map(|i| &mut self.conns[i].1)
    }

    pub fn remove(&mut self, id: ConnId) -> Option<Conn> {
        self.find(id).ok().map(|i| self.conns.remove(i).1)
    }

    /// Every connection, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&ConnId, &Conn)> {
        self.conns.iter().map(|(id, c)| (id, c))
    }

    pub fn len(&self) -> usize {
        self.conns.len()
    }
}

/// Hashes as the `BTreeMap<ConnId, Conn>` it replaced (length, then each pair in id order), so an
/// explorer's fingerprints of rank states are unchanged.
impl Hash for ConnTable {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.next.hash(h);
        self.conns.len().hash(h);
        for (id, c) in &self.conns {
            (id, c).hash(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::hash::DefaultHasher;

    use proptest::prelude::*;

    use super::*;

    fn conn(tag: u64) -> Conn {
        let mut c = Conn::new(Role::MessageIn, None, Instant::ZERO);
        c.taken = tag;
        c
    }

    fn hash_of(x: &impl Hash) -> u64 {
        let mut h = DefaultHasher::new();
        x.hash(&mut h);
        h.finish()
    }

    proptest! {
        /// Any sequence of allocations, inserts (of fresh or older ids, or over a live one) and
        /// removals leaves the table reading, iterating and hashing as the `BTreeMap` it replaced.
        #[test]
        fn the_table_behaves_and_hashes_as_a_btree_map(ops in proptest::collection::vec((0u8..4, 0u64..24), 0..80)) {
            let (mut table, mut map) = (ConnTable::default(), BTreeMap::<ConnId, Conn>::new());
            let mut next = 0u64;
            for (i, (op, k)) in ops.into_iter().enumerate() {
                match op {
                    0 => {
                        next += 1;
                        prop_assert_eq!(table.allocate(), ConnId(next));
                    }
                    1 | 2 => {
                        let id = ConnId(k % (next + 1));
                        table.insert(id, conn(i as u64));
                        map.insert(id, conn(i as u64));
                    }
                    _ => {
                        let id = ConnId(k % (next + 1));
                        prop_assert_eq!(table.remove(id).map(|c| c.taken), map.remove(&id).map(|c| c.taken));
                    }
                }
                for k in 0..=next {
                    prop_assert_eq!(table.get(ConnId(k)).map(|c| c.taken), map.get(&ConnId(k)).map(|c| c.taken));
                }
                let ids: Vec<ConnId> = table.iter().map(|(id, _)| *id).collect();
                prop_assert_eq!(ids, map.keys().copied().collect::<Vec<_>>());
                prop_assert_eq!(table.len(), map.len());
                prop_assert_eq!(hash_of(&table), hash_of(&(next, &map)));
            }
        }
    }
}
