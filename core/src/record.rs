//! The one record of a run every world produces, simulated or real: how each rank and the root
//! ended and, where the world can observe them, the messages (joined to the connection and
//! index they travelled on), the drains that gave up, and timings. It is the only input of the
//! oracle (`bootsim_sim::oracle::judge`). Real worlds fill what they observe (per-rank results);
//! simulated worlds fill everything.

use std::collections::BTreeMap;
use std::time::Duration;

use rustc_hash::FxHashMap;

use crate::ending::{Awaited, RecordedError};
use crate::ids::MsgOrigin;
use crate::time::Instant;

/// Everything a run leaves for the oracle.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunRecord {
    /// Per rank, by rank number for a whole run (a real world may record fewer).
    pub ranks: Vec<RankRecord>,
    /// How the root ended.
    pub root: RootEnd,
    /// Messages sent and taken; empty where the world cannot observe them.
    pub messages: MessageLog,
    /// Drains that gave up (fail-open), in order.
    pub drain_gave_up: Vec<DrainGiveUp>,
}

impl RunRecord {
    /// A record of `n` ranks that have not ended yet.
    pub fn new(n: usize) -> RunRecord {
        let ranks = (0..n as u32).map(|rank| RankRecord { rank, ..RankRecord::default() }).collect();
        RunRecord { ranks, ..RunRecord::default() }
    }

    /// A record of per-rank results only (the real worlds: no root, messages or drains).
    pub fn of_ranks(ranks: Vec<RankRecord>) -> RunRecord {
        RunRecord { ranks, ..RunRecord::default() }
    }
}

/// One rank's end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RankRecord {
    /// The rank.
    pub rank: u32,
    /// Init's error, if it failed.
    pub init: Option<RecordedError>,
    /// The workload's operations that ended, in order: received bytes or the error.
    pub ops: Vec<Result<Vec<u8>, RecordedError>>,
    /// Set when the rank was stopped before it ended: what it was waiting in.
    pub unfinished: Option<Awaited>,
    /// Its unexpected list at the end, (peer, tag) head first; empty where not observed.
    pub unexpected: Vec<(i32, i32)>,
    /// When init and then each operation ended; empty where the world keeps no time.
    pub ended_at: Vec<Instant>,
    /// When it ended (its last operation, or the error it stopped at), where observed.
    pub finished_at: Option<Instant>,
}

impl RankRecord {
    /// True when init or an operation failed, or the rank was stopped.
    pub fn failed(&self) -> bool {
        self.init.is_some() || self.unfinished.is_some() || self.ops.iter().any(Result::is_err)
    }

    /// Records the end of init (`index` 0) or of the workload's operation `index - 1`, at `at`.
    pub fn ended(&mut self, index: usize, at: Instant, result: Result<Vec<u8>, RecordedError>) {
        self.ended_at.push(at);
        match (index, result) {
            (0, Err(e)) => self.init = Some(e),
            (0, Ok(_)) => {}
            (_, r) => self.ops.push(r),
        }
    }
}

/// How the root ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RootEnd {
    /// The world does not observe the root (real worlds).
    #[default]
    NotObserved,
    /// It served every check-in.
    Done,
    /// It failed.
    Failed(RecordedError),
    /// Still running when the run stopped: what it waited for.
    Waiting(Awaited),
}

/// A point-to-point message as its sender handed it over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentMsg {
    /// Sending rank.
    pub from: u32,
    /// Destination rank.
    pub to: u32,
    /// Its tag.
    pub tag: i32,
    /// The sender's operation and step.
    pub origin: MsgOrigin,
    /// Payload bytes.
    pub size: usize,
    /// When it was written.
    pub at: Instant,
}

/// A message a receive took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TakenMsg {
    /// When.
    pub at: Instant,
    /// The receiving rank.
    pub rank: u32,
    /// The (peer, tag) the receive asked for.
    pub from: u32,
    /// Tag asked for.
    pub tag: i32,
    /// The receiver's operation and step.
    pub origin: MsgOrigin,
    /// Bytes taken.
    pub size: usize,
    /// Bytes expected.
    pub expected_size: usize,
    /// The connection it came on and its index there (joins with [`MessageLog::sent`]).
    pub conn: Option<(u64, u32)>,
}

/// Sent and taken messages, joined by the connection (a world-wide number) and index on it.
///
/// A log made by [`MessageLog::streaming`] keeps only what is in flight: a sent message until
/// it is taken, and no taken ones. Its caller judges each take as [`MessageLog::taken`] hands
/// it back with its source, so memory follows what is in flight, not the whole run.
///
/// Only a whole log is ever iterated (explain, the timeline, the turmoil engine's tests), so
/// only its `sent` is ordered; what a streaming log holds is only looked up, by key, in
/// seedless hash maps (a take cost 751 instructions in two B-trees at 64 ranks).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MessageLog {
    /// Sent messages by connection and index on it (persistent streams carry many); always
    /// empty in a streaming log, which holds those not yet taken apart ([`MessageLog::held`]).
    pub sent: BTreeMap<(u64, u32), SentMsg>,
    /// Taken messages, in order; always empty in a streaming log.
    pub taken: Vec<TakenMsg>,
    /// Per connection: how many messages were sent on it and how many taken (one entry, one
    /// lookup per message).
    counts: FxHashMap<u64, (u32, u32)>,
    /// A streaming log's sent messages not yet taken, by the same key as `sent`.
    in_flight: FxHashMap<(u64, u32), SentMsg>,
    streaming: bool,
    sent_total: usize,
}

impl MessageLog {
    /// A log that forgets a message once it is taken (see the type's doc).
    pub fn streaming() -> MessageLog {
        MessageLog { streaming: true, ..MessageLog::default() }
    }

    /// Messages recorded as sent over the whole run (a streaming log included).
    pub fn sent_total(&self) -> usize {
        self.sent_total
    }

    /// Sent messages the log holds: every one in a whole log, those not yet taken in a
    /// streaming log.
    pub fn held(&self) -> usize {
        self.sent.len() + self.in_flight.len()
    }

    /// Records a message handed over on `conn` (unjoinable without one: dropped).
    pub fn sent(&mut self, conn: Option<u64>, msg: SentMsg) {
        if let Some(k) = conn {
            let (sent, _) = self.counts.entry(k).or_insert((0, 0));
            let key = (k, *sent);
            *sent += 1;
            self.sent_total += 1;
            if self.streaming {
                self.in_flight.insert(key, msg);
            } else {
                self.sent.insert(key, msg);
            }
        }
    }

    /// Records a message taken from `conn`, the next index on it; `msg.conn` is set here.
    /// Returns it with the message it is (its source), if that was recorded: a streaming log
    /// hands both back and keeps neither.
    pub fn taken(&mut self, conn: Option<u64>, mut msg: TakenMsg) -> (TakenMsg, Option<SentMsg>) {
        let mut all_taken = false;
        msg.conn = conn.map(|k| {
            let (sent, taken) = self.counts.entry(k).or_insert((0, 0));
            *taken += 1;
            all_taken = sent == taken;
            (k, *taken - 1)
        });
        if !self.streaming {
            let source = self.source(&msg).cloned();
            self.taken.push(msg.clone());
            return (msg, source);
        }
        let source = msg.conn.and_then(|key| self.in_flight.remove(&key));
        // Everything sent on the connection was taken: its counters start again from zero
        // together, so the next message on it still joins (and nothing is kept per connection).
        if let (Some(k), true) = (conn, all_taken) {
            self.counts.remove(&k);
        }
        (msg, source)
    }

    /// The message a taken one is, if it was recorded (and, in a streaming log, not yet taken).
    pub fn source(&self, t: &TakenMsg) -> Option<&SentMsg> {
        let key = t.conn?;
        if self.streaming {
            self.in_flight.get(&key)
        } else {
            self.sent.get(&key)
        }
    }
}

/// A drain that gave up at its deadline (fail-open): ordering was no longer guaranteed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainGiveUp {
    /// When it gave up.
    pub at: Instant,
    /// The sending rank.
    pub rank: u32,
    /// The destination rank.
    pub to: u32,
    /// The tag of the message it drained.
    pub tag: i32,
    /// How long it waited.
    pub waited: Duration,
    /// Bytes still unacknowledged.
    pub unacked: usize,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ids::{OpId, OpType, OpTypeDef};

    const SEND: OpType = OpType::new(&OpTypeDef { code: 1, name: "send", step: "step", bytes_unused: false });

    fn sent(size: usize) -> SentMsg {
        let origin = MsgOrigin { op: OpId(0), kind: SEND, step: 1 };
        SentMsg { from: 0, to: 1, tag: 5, origin, size, at: Instant::ZERO }
    }

    fn taken() -> TakenMsg {
        let origin = MsgOrigin { op: OpId(0), kind: SEND, step: 1 };
        TakenMsg { at: Instant::ZERO, rank: 1, from: 0, tag: 5, origin, size: 0, expected_size: 0, conn: None }
    }

    #[test]
    fn a_streaming_log_joins_each_take_to_its_send_in_order_and_keeps_nothing_once_all_are_taken() {
        let mut log = MessageLog::streaming();
        log.sent(Some(7), sent(1));
        log.sent(Some(7), sent(2));
        let (t, source) = log.taken(Some(7), taken());
        assert_eq!((t.conn, source.map(|s| s.size)), (Some((7, 0)), Some(1)));
        let (t, source) = log.taken(Some(7), taken());
        assert_eq!((t.conn, source.map(|s| s.size)), (Some((7, 1)), Some(2)));
        assert!(log.held() == 0 && log.counts.is_empty(), "all taken: nothing kept for the connection");
        // Its counters started again together: the next message on it still joins.
        log.sent(Some(7), sent(3));
        let (t, source) = log.taken(Some(7), taken());
        assert_eq!((t.conn, source.map(|s| s.size)), (Some((7, 0)), Some(3)));
        // A take with nothing sent before it joins nothing, and is not forgotten as all taken.
        let (t, source) = log.taken(Some(8), taken());
        assert_eq!((t.conn, source), (Some((8, 0)), None));
        assert_eq!(log.counts.get(&8), Some(&(0, 1)));
        assert_eq!(log.sent_total(), 3);
    }

    /// The B-tree log this one replaced, kept as the reference its hash maps must agree with.
    #[derive(Default)]
    struct Reference {
        sent: BTreeMap<(u64, u32), SentMsg>,
        counts: BTreeMap<u64, (u32, u32)>,
        streaming: bool,
    }

    impl Reference {
        fn sent(&mut self, conn: Option<u64>, msg: SentMsg) {
            if let Some(k) = conn {
                let (sent, _) = self.counts.entry(k).or_insert((0, 0));
                self.sent.insert((k, *sent), msg);
                *sent += 1;
            }
        }

        /// The take written plainly: the next index on the connection, its source looked up
        /// (and, streaming, removed, with the counters forgotten once all sent were taken).
        fn taken(&mut self, conn: Option<u64>, mut msg: TakenMsg) -> (TakenMsg, Option<SentMsg>) {
            let Some(k) = conn else { return (msg, None) };
            let counts = self.counts.entry(k).or_default();
            let index = counts.1;
            counts.1 += 1;
            let forget = counts.0 == counts.1;
            msg.conn = Some((k, index));
            let source = match self.streaming {
                false => self.sent.get(&(k, index)).cloned(),
                true => self.sent.remove(&(k, index)),
            };
            if self.streaming && forget {
                self.counts.remove(&k);
            }
            (msg, source)
        }
    }

    /// A send (`true`) or take on a connection (`None`: unjoinable).
    fn steps() -> impl Strategy<Value = Vec<(bool, Option<u64>)>> {
        proptest::collection::vec((any::<bool>(), proptest::option::weighted(0.9, 0..4u64)), 0..200)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Streaming or whole, the log joins every take to the same source at the same index
        /// as the B-tree log it replaced, holds as many messages, and a whole log keeps the
        /// same ordered `sent` and `taken`.
        #[test]
        fn the_log_joins_and_holds_exactly_as_the_b_tree_log_did(steps in steps(), streaming in any::<bool>()) {
            let mut log = if streaming { MessageLog::streaming() } else { MessageLog::default() };
            let mut reference = Reference { streaming, ..Reference::default() };
            let mut takes = Vec::new();
            for (i, (send, conn)) in steps.into_iter().enumerate() {
                if send {
                    log.sent(conn, sent(i));
                    reference.sent(conn, sent(i));
                } else {
                    let got = log.taken(conn, taken());
                    prop_assert_eq!(log.source(&got.0).cloned(), if streaming { None } else { got.1.clone() });
                    prop_assert_eq!(&got, &reference.taken(conn, taken()));
                    takes.push(got.0);
                }
                prop_assert_eq!(log.held(), reference.sent.len());
                prop_assert_eq!(log.counts.len(), reference.counts.len());
            }
            let expected_sent = if streaming { BTreeMap::new() } else { reference.sent.clone() };
            prop_assert_eq!(&log.sent, &expected_sent);
            prop_assert_eq!(&log.taken, &if streaming { Vec::new() } else { takes });
            if streaming {
                let mut held: Vec<_> = log.in_flight.iter().map(|(k, m)| (*k, m.clone())).collect();
                held.sort_by_key(|(k, _)| *k);
                prop_assert_eq!(held, reference.sent.into_iter().collect::<Vec<_>>());
            }
        }
    }
}
