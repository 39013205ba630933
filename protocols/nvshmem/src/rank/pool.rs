//! Init under [`Limits::read_ahead`](crate::Limits::read_ahead): the root-facing listener and
//! the peer listener (which carries the ring) are read ahead from the moment they listen, as
//! the root and the per-message receives are. Every accepted connection joins its listener's
//! pool, its preamble is parsed as bytes come, garbage is dropped at once, the oldest
//! incomplete one is evicted when the pool is full, and the step takes the first whose
//! preamble carries the session magic. A stranger therefore delays init by nothing (evicted)
//! or one header timeout at most, and never counts as progress.

use std::net::SocketAddr;

use bootsim_core::ids::ConnId;

use super::conn::{Conn, Role};
use super::exec::Progress;
use super::{Rank, Wait};
use crate::io::{Effect, Event};
use crate::listener::Listener;

impl Rank {
    /// Keeps one accept outstanding on each listener init still reads (under read-ahead).
    pub(super) fn arm_pool_accepts(&mut self) {
        if self.cfg.limits.read_ahead.is_none() || self.failed {
            return;
        }
        if self.root_accept.is_none() && self.successor.is_none() && self.listeners.contains_key(&Listener::FromRoot) {
            let conn = self.conns.allocate();
            self.root_accept = Some(conn);
            self.out.effect(Effect::Accept { listener: Listener::FromRoot, conn });
        }
        self.arm_eager_accept();
    }

    /// A connection accepted into an init pool: the root-facing one, or the peer listener's
    /// before the ring predecessor is known.
    pub(super) fn on_pool_accepted(&mut self, conn: ConnId, from: SocketAddr) {
        let (listener, role) = if self.root_accept == Some(conn) {
            self.root_accept = None;
            (Listener::FromRoot, Role::FromRoot)
        } else {
            self.eager_accept = None;
            (Listener::Peers, Role::RingRecv)
        };
        self.make_room(listener);
        self.conns.insert(conn, Conn::new(role, Some(from), self.now));
        self.read_pool_preamble(conn);
        self.arm_pool_accepts();
    }

    /// Parses a pooled connection's preamble as far as its bytes go, dropping it as a stranger
    /// on a bad one. False if `id` is not a pooled init connection.
    pub(super) fn read_pool_preamble(&mut self, id: ConnId) -> bool {
        let magic = self.cfg.uid.magic;
        let transport = self.cfg.variant.transport;
        if self.cfg.limits.read_ahead.is_none() || self.is_taken(id) {
            return false;
        }
        let Some(c) = self.conns.get_mut(id) else { return false };
        if !matches!(c.role, Role::FromRoot | Role::RingRecv) || !c.header_pending() {
            return false;
        }
        let from = c.remote;
        if let Err(error) = c.parse_header(magic, transport) {
            self.drop_stray(id, from, error);
        }
        true
    }

    /// The oldest pooled connection of `role` whose preamble is complete.
    pub(super) fn pooled(&self, role: Role) -> Option<ConnId> {
        let taken = |id: &ConnId| Some(*id) == self.ring_recv;
        self.conns.iter().find(|(id, c)| c.role == role && !c.header_pending() && !taken(id)).map(|(id, _)| *id)
    }

    /// Waits for the pool (not progress: strangers arriving there are nobody's progress).
    pub(super) fn block_on_pool(&mut self) -> Progress {
        self.set_wait(Wait::Pool);
        Progress::Blocked
    }

    /// The ring step's receive side: the predecessor's connection from the pool, once its
    /// preamble came; the rest of the pool are strangers.
    pub(super) fn take_ring_from_pool(&mut self) -> Progress {
        let Some(conn) = self.pooled(Role::RingRecv) else { return self.block_on_pool() };
        self.ring_recv = Some(conn);
        self.drop_pool(Role::RingRecv);
        self.arm_eager_accept();
        Progress::StepDone
    }

    /// Closes the pooled connections of `role` left once its step took the one it needed.
    pub(super) fn drop_pool(&mut self, role: Role) {
        let ring = self.ring_recv;
        let left: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(id, c)| c.role == role && Some(**id) != ring && c.header_pending())
            .map(|(id, _)| *id)
            .collect();
        for id in left {
            let Some(c) = self.conns.remove(id) else { continue };
            self.out.effect(Effect::Close { conn: id });
            let from = c.remote.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
            let after = self.now.saturating_since(c.opened);
            self.emit(Event::StalledDropped { conn: id, from, after });
        }
    }
}
