//! The root: collects every rank's check-in (its rank and peer-listener address) on the
//! rendezvous listener, then sends each the table of all addresses and closes.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use bootsim_core::codec::FrameReader;
use bootsim_core::seam::{Effect, Input};
use bootsim_core::ConnId;

use crate::outbox::{Out, Outbox};
use crate::types::{Completion, Error, Event, Listener};
use crate::wire::{encode_table, CheckIn};

/// The root's state machine.
#[derive(Clone, Debug, Hash)]
pub struct Root {
    n: u32,
    out: Outbox,
    next_conn: u64,
    /// Connections accepted whose check-in has not fully come.
    reading: BTreeMap<ConnId, FrameReader>,
    /// Check-ins taken: rank -> (its connection, its address).
    checked_in: BTreeMap<u32, (ConnId, SocketAddr)>,
    done: bool,
}

impl Root {
    /// A root for a world of `n` ranks, opening its listener at once.
    pub fn new(n: u32) -> Root {
        let mut out = Outbox::default();
        out.effect(Effect::Listen { listener: Listener::Rendezvous });
        Root { n, out, next_conn: 0, reading: BTreeMap::new(), checked_in: BTreeMap::new(), done: false }
    }

    fn accept(&mut self) {
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        self.out.effect(Effect::Accept { listener: Listener::Rendezvous, conn });
    }

    fn fail(&mut self, error: Error) {
        if !self.done {
            self.done = true;
            self.out.completed(Completion { op: 0, result: Err(error) });
        }
    }

    fn stray(&mut self, conn: ConnId, error: String) {
        self.reading.remove(&conn);
        self.out.event(Event::Stray { conn, error });
        self.out.effect(Effect::Close { conn });
    }

    /// Feeds one input.
    pub fn handle(&mut self, input: Input<'_, Listener>) {
        if self.done {
            return;
        }
        match input {
            Input::Listening { .. } => self.accept(),
            Input::ListenFailed { listener, reason } => self.fail(Error::Listen { listener, reason }),
            Input::Accepted { conn, .. } => {
                self.reading.insert(conn, FrameReader::new());
                self.accept();
            }
            Input::Received { conn, bytes } => {
                if let Some(rx) = self.reading.get_mut(&conn) {
                    rx.push(bytes);
                    self.read(conn);
                }
            }
            Input::PeerClosed { conn, reason } => {
                if let Some(rx) = self.reading.get_mut(&conn) {
                    rx.push_close(reason);
                    self.read(conn);
                }
            }
            _ => {}
        }
    }

    fn read(&mut self, conn: ConnId) {
        let Some(rx) = self.reading.get_mut(&conn) else { return };
        match CheckIn::read(rx) {
            Ok(None) => {}
            Err(e) => self.stray(conn, format!("bad check-in: {e}")),
            Ok(Some(c)) if c.rank >= self.n => {
                self.stray(conn, format!("check-in of rank {} in a world of {}", c.rank, self.n));
            }
            Ok(Some(c)) if self.checked_in.contains_key(&c.rank) => {
                self.stray(conn, format!("second check-in of rank {}", c.rank));
            }
            Ok(Some(c)) => {
                self.reading.remove(&conn);
                self.checked_in.insert(c.rank, (conn, c.addr));
                self.out.event(Event::CheckedIn { rank: c.rank });
                if self.checked_in.len() == self.n as usize {
                    self.send_table();
                }
            }
        }
    }

    fn send_table(&mut self) {
        let addrs: Vec<SocketAddr> = self.checked_in.values().map(|&(_, a)| a).collect();
        let conns: Vec<ConnId> = self.checked_in.values().map(|&(c, _)| c).collect();
        for conn in conns {
            self.out.write(conn, |b| encode_table(b, &addrs));
            self.out.effect(Effect::Close { conn });
        }
        self.out.effect(Effect::CloseListener { listener: Listener::Rendezvous });
        self.out.event(Event::TableSent);
        self.done = true;
        self.out.completed(Completion { op: 0, result: Ok(Vec::new()) });
    }

    /// The next output.
    pub fn poll_output(&mut self, tx: &mut Vec<u8>) -> Option<Out> {
        self.out.poll(tx)
    }

    /// What it waits for, unless done.
    pub fn waiting_for(&self) -> Option<String> {
        let missing: Vec<String> =
            (0..self.n).filter(|r| !self.checked_in.contains_key(r)).map(|r| r.to_string()).collect();
        (!self.done).then(|| format!("check-in of rank {}", missing.join(", ")))
    }

    /// The first rank that has not checked in, unless done.
    pub fn culprit(&self) -> Option<u32> {
        (!self.done).then(|| (0..self.n).find(|r| !self.checked_in.contains_key(r))).flatten()
    }

    /// True once the table went out (or it failed).
    pub fn is_done(&self) -> bool {
        self.done
    }
}
