//! Plain-language explanations of failing runs: which message overtook which and why, what the
//! receiver took, and what it leads to. Built from the trace-time records of an
//! [`Outcome`]; a report without them is re-run with tracing (the run is
//! deterministic, so the explanation is the same).

use std::collections::BTreeMap;

use bootsim_core::Instant;

use bootsim_core::SentMsg;

use crate::engine::outcome::Outcome;
use crate::kernel::{Dir, EventKind};
use crate::oracle::{Finding, Verdict};
use crate::protocol::RootPorts;
use crate::run::{run_case, RunReport};
use crate::words::{ms, ms_d, seg_name};

/// A message that a later message from the same sender overtook at the receiver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overtake {
    /// The receiving rank.
    pub receiver: u32,
    /// The sending rank.
    pub peer: u32,
    /// Key in [`bootsim_core::MessageLog::sent`] of the message the receive was meant to take (sent first).
    pub expected: Option<(u64, u32)>,
    /// Key in [`bootsim_core::MessageLog::sent`] of the message that arrived first and was taken instead.
    pub taken: (u64, u32),
    /// When the receive took it (absent when the receive failed before taking it).
    pub taken_at: Option<Instant>,
}

/// Finds the first harmful overtaking: a receive that took another step's message (non-benign
/// first), or, when a receive failed before taking one, a later same-tag message whose connection
/// the receiver accepted before the earlier one's.
pub fn find_overtake(out: &Outcome) -> Option<Overtake> {
    let mismatched = out.record.messages.taken.iter().filter_map(|t| {
        let key = t.conn?;
        let sent = out.record.messages.sent.get(&key)?;
        let same = sent.origin.op == t.origin.op && sent.origin.step == t.origin.step;
        let benign = sent.origin.kind.bytes_unused() && t.origin.kind.bytes_unused();
        (!same).then_some((benign, t, key))
    });
    let best = mismatched.min_by_key(|(benign, _, _)| *benign);
    if let Some((_, t, key)) = best {
        let expected = out.record.messages.sent.iter().find(|(_, s)| {
            s.from == t.from && s.to == t.rank && s.origin.op == t.origin.op && s.origin.step == t.origin.step
        });
        return Some(Overtake {
            receiver: t.rank,
            peer: t.from,
            expected: expected.map(|(k, _)| *k),
            taken: key,
            taken_at: Some(t.at),
        });
    }
    accept_inversion(out)
}

/// The earliest pair of same-tag messages from one sender whose connections the receiver
/// accepted in the wrong order (or accepted the later one while the earlier never was): the
/// overtaking connection accepted first; ties go to the lowest keys, as a scan of every pair
/// in key order would pick. O(m log m) in the messages: per (sender, receiver, tag), in send
/// order, a later message overtook iff some earlier one was accepted after it or never.
fn accept_inversion(out: &Outcome) -> Option<Overtake> {
    type Key = (u64, u32);
    // Accepts never seen count as "after everything".
    let acc = |k: &Key| accepted_at(out, k.0).map_or(u64::MAX, |t| t.as_nanos());
    let mut groups: BTreeMap<(u32, u32, i32), Vec<(Instant, Key)>> = BTreeMap::new();
    for (k, m) in &out.record.messages.sent {
        groups.entry((m.from, m.to, m.tag)).or_default().push((m.at, *k));
    }
    // The best overtaker so far: (its accept time, the overtaken key, its key).
    let mut best: Option<(u64, Key, Key)> = None;
    for list in groups.values_mut() {
        list.sort();
        let mut latest_earlier = 0u64; // the latest accept among messages sent strictly before
        let mut i = 0;
        while i < list.len() {
            let at = list[i].0;
            let j = list[i..].iter().position(|(t, _)| *t != at).map_or(list.len(), |d| i + d);
            for &(_, kb) in &list[i..j] {
                let Some(acc_b) = accepted_at(out, kb.0).map(|t| t.as_nanos()) else { continue };
                if latest_earlier <= acc_b || best.is_some_and(|(t, _, _)| t < acc_b) {
                    continue;
                }
                // The overtaken: the lowest key sent earlier and accepted later (or never).
                let ka = list[..i].iter().map(|(_, k)| *k).filter(|ka| ka.0 != kb.0 && acc(ka) > acc_b).min();
                if let Some(ka) = ka {
                    let candidate = (acc_b, ka, kb);
                    if best.is_none_or(|b| candidate < b) {
                        best = Some(candidate);
                    }
                }
            }
            for (_, k) in &list[i..j] {
                latest_earlier = latest_earlier.max(acc(k));
            }
            i = j;
        }
    }
    best.map(|(_, ka, kb)| Overtake {
        receiver: out.record.messages.sent[&ka].to,
        peer: out.record.messages.sent[&ka].from,
        expected: Some(ka),
        taken: kb,
        taken_at: None,
    })
}

/// When the receiver's accept() took connection `k`.
pub fn accepted_at(out: &Outcome, k: u64) -> Option<Instant> {
    note_time(out, k, |e| matches!(e, EventKind::Accepted { .. }))
}

/// When connection `k`'s child joined the accept queue.
pub fn enqueued_at(out: &Outcome, k: u64) -> Option<Instant> {
    note_time(out, k, |e| matches!(e, EventKind::ChildEnqueued { .. }))
}

fn note_time(out: &Outcome, k: u64, f: impl Fn(&EventKind) -> bool) -> Option<Instant> {
    out.kernel_notes.get(&k)?.iter().find(|(_, e)| f(e)).map(|(t, _)| *t)
}

/// The RX stall on connection `ka` (sent first) that most delayed it while `kb` overtook it:
/// the one overlapping most with the window from `kb`'s SYN to `ka`'s enqueue. A stall outside
/// that window cannot have let `kb` pass (it may predate `kb` by seconds), so none is named then.
/// Returns its index in `ka`'s kernel notes and the event.
pub fn decisive_stall(out: &Outcome, ka: u64, kb: u64) -> Option<(usize, EventKind)> {
    let limit = enqueued_at(out, ka).or(accepted_at(out, ka)).unwrap_or(out.end);
    let start = note_time(out, kb, |e| matches!(e, EventKind::SynSent { .. })).unwrap_or(Instant::ZERO);
    let notes = out.kernel_notes.get(&ka)?;
    let stalls = notes.iter().enumerate().filter(|(_, (at, _))| *at <= limit).filter_map(|(i, (_, e))| match *e {
        EventKind::RxStall { from, until, .. } => {
            let overlap = until.min(limit).as_nanos().saturating_sub(from.max(start).as_nanos());
            Some((overlap, until.as_nanos() - from.as_nanos(), i, *e))
        }
        _ => None,
    });
    stalls
        .filter(|&(overlap, ..)| overlap > 0)
        .max_by_key(|&(overlap, len, i, _)| (overlap, len, std::cmp::Reverse(i)))
        .map(|(_, _, i, e)| (i, e))
}

/// Three to six plain lines for a failing run (none for pass and benign): which message
/// overtook which and why, what the receiver took, and the downstream symptom.
pub fn explain(report: &RunReport) -> Vec<String> {
    if report.verdict.is_ok() {
        return Vec::new();
    }
    if report.verdict == Verdict::Guard {
        // What the guard says is the whole story; re-running the costly case traced would not add to it.
        return guard_lines(report);
    }
    if report.trace.is_none() {
        // An untraced run is explained by re-running it traced, if that fits in memory.
        if let Err(e) = report.case.check_kept_results(true) {
            return vec![format!("Not explained: re-running it traced does not fit ({e})")];
        }
        return explain(&run_case(&report.case, true));
    }
    let out = &report.outcome;
    let mut lines = match find_overtake(out) {
        Some(o) => overtake_lines(report, &o),
        None => {
            let mut l = vec!["No message overtook another on its way to a receive.".to_string()];
            l.extend(stuck_lines(report));
            l
        }
    };
    // Where the case's protocol says so (NCCL: many hangs behind the one error that aborted a
    // rank), the worst finding first.
    let mut findings: Vec<&Finding> = report.findings.iter().collect();
    if crate::protocol::worst_first(&report.case) {
        findings.sort_by_key(|f| std::cmp::Reverse(f.verdict()));
    }
    for f in findings {
        if lines.len() >= 6 {
            break;
        }
        if let Some(l) = consequence(f, &lines) {
            lines.push(l);
        }
    }
    if lines.len() < 3 {
        let k = &report.kernel;
        lines.push(format!(
            "Kernel: {} packets, {} stalled in RX queues, {} lost, {} retransmitted, {} dropped by a full accept queue.",
            k.packets, k.stalled, k.lost, k.retransmits, k.backlog_drops
        ));
    }
    lines.truncate(6);
    lines
}

/// A sent message's step as the case's protocol names it ([`crate::protocol::message_name`]).
fn sent_name(report: &RunReport, s: &SentMsg) -> String {
    crate::protocol::message_name(&report.case, s.from, s.to, &s.origin, true)
}

/// A receive's step (rank `t.rank`'s, from `t.from`) as the case's protocol names it.
fn taken_name(report: &RunReport, t: &bootsim_core::TakenMsg) -> String {
    crate::protocol::message_name(&report.case, t.rank, t.from, &t.origin, false)
}

fn overtake_lines(report: &RunReport, o: &Overtake) -> Vec<String> {
    let out = &report.outcome;
    let taken = &out.record.messages.sent[&o.taken];
    let (kb, r, p) = (o.taken.0, o.receiver, o.peer);
    let mut lines = Vec::new();
    let expected = o.expected.and_then(|k| out.record.messages.sent.get(&k).map(|s| (k.0, s)));
    match expected {
        Some((ka, a)) => {
            lines.push(format!(
                "rank {p} sent {} ({} bytes, tag {:#x}) to rank {r} on connection {ka} at {}, then {} ({} bytes, tag {:#x}) on connection {kb} at {}.",
                sent_name(report, a), a.size, a.tag, ms(a.at), sent_name(report, taken), taken.size, taken.tag, ms(taken.at)
            ));
            lines.extend(why(out, ka, kb, a, r, !report.case.schedule().accept.is_empty()));
        }
        None => lines.push(format!(
            "rank {p} sent {} ({} bytes, tag {:#x}) to rank {r} on connection {kb} at {}.",
            sent_name(report, taken),
            taken.size,
            taken.tag,
            ms(taken.at)
        )),
    }
    lines.push(took_line(report, o, taken));
    lines
}

/// Why connection `ka` (sent first) reached the accept queue after `kb`: the longest RX stall,
/// losses, backlog drops on `ka`'s handshake, and a drain on it that gave up; or, `scheduled`,
/// the case's explicit accept order.
fn why(out: &Outcome, ka: u64, kb: u64, a: &SentMsg, r: u32, scheduled: bool) -> Vec<String> {
    let mut lines = Vec::new();
    let (enq_a, enq_b) = (enqueued_at(out, ka), enqueued_at(out, kb));
    let limit = enq_a.or(accepted_at(out, ka)).unwrap_or(out.end);
    let notes = out.kernel_notes.get(&ka).map_or(&[][..], Vec::as_slice);
    let order = match (enq_a, enq_b) {
        (Some(x), Some(y)) => format!("{kb} entered rank {r}'s accept queue first ({} vs {})", ms(y), ms(x)),
        (None, Some(y)) => format!("{kb} entered rank {r}'s accept queue at {} and {ka} never did", ms(y)),
        _ => format!("rank {r} accepted {kb} first"),
    };
    let stall = decisive_stall(out, ka, kb).map(|(_, e)| e);
    let mut cause = Vec::new();
    for (_, e) in notes.iter().filter(|(at, _)| *at <= limit) {
        match *e {
            EventKind::PacketLost { host, seg, dir, .. } => {
                cause.push(format!("{ka}'s {} was lost on the way to host {}", seg_name(seg, dir), host.0))
            }
            EventKind::RingDrop { host, queue, seg, dir, .. } => cause.push(format!(
                "{ka}'s {} was dropped: host {}'s RX ring {queue} was full",
                seg_name(seg, dir),
                host.0
            )),
            EventKind::CpuBacklogDrop { host, cpu, seg, dir, .. } => cause.push(format!(
                "{ka}'s {} was dropped: host {}'s CPU {cpu} had a full backlog",
                seg_name(seg, dir),
                host.0
            )),
            EventKind::Retransmit { seg, dir, attempt, .. } if cause.len() < 3 => {
                cause.push(format!("its {} was retransmitted (attempt {attempt})", seg_name(seg, dir)))
            }
            EventKind::BacklogDrop { flow, .. } => cause
                .push(format!("host {}'s accept queue was full and dropped {ka}'s handshake (backlog)", flow.server.0)),
            _ => {}
        }
    }
    if let Some(EventKind::RxStall { host, queue, dir, seg, from, until, .. }) = stall {
        let d = until - from;
        let whose = if dir == Dir::ToServer { format!("rank {r}") } else { format!("rank {}", a.from) };
        cause.insert(
            0,
            format!(
                "{ka}'s {} waited {} ({}–{}) in RX queue {queue} on host {} ({whose}), whose softirq CPU was busy",
                seg_name(seg, dir),
                ms_d(d),
                ms(from),
                ms(until),
                host.0
            ),
        );
    }
    if cause.is_empty() {
        cause.push(format!("{ka}'s handshake took longer to complete than {kb}'s"));
    }
    let order = if scheduled {
        cause = vec![format!("the case's accept= order had rank {r} take {kb} first, whatever the kernel queued")];
        format!("rank {r} accepted {kb} first")
    } else {
        order
    };
    cause.truncate(2);
    lines.push(format!("Connection {kb} overtook connection {ka}: {}, so {order}.", cause.join("; ")));
    if let Some(d) = out.drains.iter().find(|d| d.kconn == Some(ka) && d.gave_up && d.unacked == 0) {
        // Only a forced failure gives up with nothing unacknowledged.
        lines.push(format!(
            "rank {}'s drain of connection {ka} was made to give up after {} (drain_fail=, fail-open), so nothing ordered connection {kb} after it.",
            d.rank,
            ms_d(d.end - d.start)
        ));
    } else if let Some(d) = out.drains.iter().find(|d| d.kconn == Some(ka) && d.gave_up) {
        lines.push(format!(
            "rank {}'s drain of connection {ka} gave up after {} with {} bytes unacknowledged (fail-open), so connection {kb} was opened before {ka}'s data had arrived.",
            d.rank,
            ms_d(d.end - d.start),
            d.unacked
        ));
    }
    lines
}

fn took_line(report: &RunReport, o: &Overtake, taken: &SentMsg) -> String {
    let out = &report.outcome;
    let (r, p) = (o.receiver, o.peer);
    let kb = o.taken.0;
    let what = sent_name(report, taken);
    if let Some(t) = out.record.messages.taken.iter().find(|t| t.conn == Some(o.taken) && t.rank == r) {
        let size = if t.size < t.expected_size {
            format!(
                ": {} bytes where {} were expected, copied into the start of the buffer and reported as success",
                t.size, t.expected_size
            )
        } else if t.size == t.expected_size {
            format!(": {} bytes, the size it expected, so no size check can notice", t.size)
        } else {
            format!(": {} bytes where {} were expected", t.size, t.expected_size)
        };
        return format!(
            "rank {r}'s {}, matching only (peer {p}, tag {:#x}), accepted connection {kb} and took the {what} message{size}.",
            taken_name(report, t),
            t.tag
        );
    }
    let failure = report.findings.iter().find_map(|f| match f {
        Finding::Error { rank: Some(x), error } if *x == r => Some(error.text()),
        _ => None,
    });
    match failure {
        Some(e) => format!("rank {r} accepted connection {kb} (the {what} message) first and failed: {e}."),
        None => {
            format!("rank {r} accepted connection {kb} (the {what} message) before the message it was waiting for.")
        }
    }
}

/// For a hang: how many ranks were stuck, and why up to two of their last connects never
/// reached the peer's accept() (backlog drops, losses, retransmissions, a peer not accepting).
/// A cycle of ranks each blocked in connect() to the next (NVSHMEM sends before it receives,
/// so none of them accepts): named, with what NVSHMEM would do about it.
fn connect_deadlock(report: &RunReport) -> Option<String> {
    let out = &report.outcome;
    // Who each unfinished rank is dialing to send to, from its typed wait.
    let dialing: BTreeMap<u32, u32> = out
        .record
        .ranks
        .iter()
        .enumerate()
        .filter_map(|(r, e)| Some((r as u32, e.unfinished.as_ref()?.connecting_to_send()?)))
        .collect();
    for &start in dialing.keys() {
        let mut cycle = vec![start];
        let mut at = start;
        while let Some(&next) = dialing.get(&at) {
            if next == start {
                let names: Vec<String> = cycle.iter().map(u32::to_string).collect();
                let who = match names.as_slice() {
                    [a, b] => format!("ranks {a} and {b} each wait in connect() for the other"),
                    _ => format!(
                        "ranks {} each wait in connect() for the next (the last for rank {start})",
                        names.join(" -> ")
                    ),
                };
                let k = report.case.kernel_config();
                let per_connect = k.syn_rto.as_secs_f64() * f64::from((1u32 << (u32::from(k.syn_retries) + 1)) - 1);
                return Some(format!(
                    "Deadlock: {who}, and none accepts while it sends: with their accept queues full, the handshakes \
                     are dropped. NVSHMEM gives up after 3 connect timeouts (about {:.0} s here) with \"connect timed \
                     out\"; nothing else can end it.",
                    3.0 * per_connect
                ));
            }
            if cycle.contains(&next) || cycle.len() > dialing.len() {
                break;
            }
            cycle.push(next);
            at = next;
        }
    }
    None
}

fn stuck_lines(report: &RunReport) -> Vec<String> {
    let out = &report.outcome;
    let hung: Vec<u32> = out.record.ranks.iter().filter(|e| e.finished_at.is_none()).map(|e| e.rank).collect();
    if hung.is_empty() {
        return Vec::new();
    }
    let ports = crate::protocol::root_ports(&report.case);
    let at_deadline =
        out.end.saturating_since(Instant::ZERO) + std::time::Duration::from_millis(1) >= report.case.deadline();
    let when = if at_deadline {
        format!("at the simulated deadline ({})", ms(out.end))
    } else {
        format!(
            "when the run stopped at {}: nothing was left to happen (no packet in flight, no timer), so they \
             would have waited forever",
            ms(out.end)
        )
    };
    let mut lines = vec![format!("{} of {} ranks were still waiting {when}.", hung.len(), out.record.ranks.len())];
    lines.extend(connect_deadlock(report));
    let mut stuck = Vec::new();
    let mut explained: Vec<u32> = Vec::new();
    for &r in &hung {
        let pending = out.kernel_notes.iter().rev().find_map(|(&k, notes)| {
            let (syn, flow) = notes.iter().find_map(|(t, e)| match e {
                EventKind::SynSent { flow, .. } => Some((*t, *flow)),
                _ => None,
            })?;
            let accepted = notes.iter().any(|(_, e)| matches!(e, EventKind::Accepted { .. }));
            (flow.client.0 == r && ports.is_none_or(|p| flow.server_port != p.root) && !accepted)
                .then_some((k, syn, flow, notes))
        });
        if let Some((k, syn, flow, notes)) = pending {
            stuck.push((enqueued_at(out, k), r, k, syn, flow.server.0, notes));
        }
    }
    // Connects whose handshake never completed explain more than ones waiting to be accepted.
    stuck.sort_by_key(|s| (s.0.is_some(), s.1));
    for (enq, r, k, syn, peer, notes) in stuck.into_iter().take(2) {
        let count = |f: &dyn Fn(&EventKind) -> bool| notes.iter().filter(|(_, e)| f(e)).count();
        let drops = count(&|e| matches!(e, EventKind::BacklogDrop { .. }));
        let lost = count(&|e| {
            matches!(e, EventKind::PacketLost { .. } | EventKind::RingDrop { .. } | EventKind::CpuBacklogDrop { .. })
        });
        let rexmit = count(&|e| matches!(e, EventKind::Retransmit { .. }));
        let fate = match enq {
            Some(t) => format!("it waited in rank {peer}'s accept queue from {} on, never accepted", ms(t)),
            None if drops > 0 => {
                format!("rank {peer}'s accept queue was full and dropped its handshake {drops} time(s)")
            }
            None => "its handshake never completed".to_string(),
        };
        lines.push(format!(
            "rank {r}'s connection {k} to rank {peer} (first SYN at {}) never reached accept(): {fate}; {lost} packet(s) lost, {rexmit} retransmission(s).",
            ms(syn)
        ));
        explained.push(r);
    }
    lines.extend(lost_data_lines(report, &hung, &explained));
    lines
}

/// Who a connection joins, as people name them: the root's check-in listener and its
/// connections to a rank's root listener are the root's, the rest are ranks'.
fn endpoints(flow: &crate::kernel::Flow, ports: Option<RootPorts>) -> (String, String) {
    let is = |port: fn(&RootPorts) -> u16| ports.as_ref().is_some_and(|p| flow.server_port == port(p));
    let client = if is(|p| p.from_root) { "the root".into() } else { format!("rank {}", flow.client.0) };
    let server = if is(|p| p.root) { "the root".into() } else { format!("rank {}", flow.server.0) };
    (client, server)
}

/// For hung ranks no pending connect explains: a connection of the rank still being
/// retransmitted when the run ended (three or more times, backing off toward rto_max), the
/// one that lost most.
fn lost_data_lines(report: &RunReport, hung: &[u32], explained: &[u32]) -> Vec<String> {
    let out = &report.outcome;
    let rto_max = report.case.kernel_config().rto_max;
    let mut lines = Vec::new();
    for &r in hung.iter().filter(|r| !explained.contains(r)).take(2) {
        let worst = out
            .kernel_notes
            .iter()
            .filter_map(|(&k, notes)| {
                let flow = notes.iter().find_map(|(_, e)| match e {
                    EventKind::SynSent { flow, .. } => Some(*flow),
                    _ => None,
                })?;
                let lost = notes.iter().filter(|(_, e)| matches!(e, EventKind::PacketLost { .. })).count();
                let rexmit: Vec<Instant> =
                    notes.iter().filter(|(_, e)| matches!(e, EventKind::Retransmit { .. })).map(|(t, _)| *t).collect();
                // Still being retransmitted when the run ended: the connection's last event is a
                // loss or a retransmission, after at least three of them (backing off).
                let pending = notes
                    .last()
                    .is_some_and(|(_, e)| matches!(e, EventKind::PacketLost { .. } | EventKind::Retransmit { .. }));
                let recent = rexmit.last().is_some_and(|t| out.end.saturating_since(*t) <= rto_max * 2);
                let involved = flow.server.0 == r || flow.client.0 == r;
                (involved && pending && recent && lost > 0 && rexmit.len() >= 3).then_some((lost, k, flow, rexmit))
            })
            .max_by_key(|(lost, k, _, _)| (*lost, std::cmp::Reverse(*k)));
        if let Some((lost, k, flow, rexmit)) = worst {
            let last = rexmit.last().map_or(String::new(), |t| format!(", the last at {}", ms(*t)));
            let (from, to) = endpoints(&flow, crate::protocol::root_ports(&report.case));
            lines.push(format!(
                "rank {r} waits while connection {k} from {from} to {to} is lost and retransmitted ({lost} loss(es), \
                 {} retransmission(s){last}): TCP doubles its retransmission timeout after each loss (up to \
                 rto_max), so its bytes had not arrived when the run ended.",
                rexmit.len()
            ));
        }
    }
    lines
}

/// One line per downstream finding not yet told.
fn consequence(f: &Finding, told: &[String]) -> Option<String> {
    let line = match f {
        Finding::Corruption { rank, op, peer, detail, .. } => match detail.as_ref().and_then(|d| d.expected_received())
        {
            Some((e, g)) => format!(
                "Symptom: rank {rank}'s {op} holds {g} from rank {peer} where {e} was expected{}.",
                detail.as_ref().and_then(|d| d.consequence()).map_or(String::new(), |v| format!(": {v}"))
            ),
            None => format!("Symptom: rank {rank}'s {op} reported success with wrong bytes in rank {peer}'s chunk."),
        },
        Finding::Error { rank: Some(r), error } => {
            // The record names the rank: the protocol's words never start with it.
            let e = error.text();
            if told.iter().any(|l| l.contains(e)) {
                return None;
            }
            format!("Then rank {r} failed: {e}.")
        }
        Finding::Error { rank: None, error } => format!("Then the root failed: {error}."),
        Finding::Hang { who, waiting, .. } => format!("Then {who} hangs: it still waits for {waiting}."),
        Finding::Leak { rank, entries } => {
            format!("rank {rank} ended with unclaimed connections from {}.", crate::words::peer_tags(entries))
        }
        Finding::Guard { steps, at, .. } => {
            format!("Then the simulation stopped after {steps} steps at simulated {at}: its work guard tripped.")
        }
        Finding::DrainGaveUp { .. } | Finding::Mismatch { .. } => return None,
    };
    Some(line)
}

/// A run the engine's work guard stopped: what that is, where it stopped, and what to change.
fn guard_lines(report: &RunReport) -> Vec<String> {
    let mut lines =
        vec!["No verdict on the protocol: the simulation stopped before the case's deadline because its work guard \
         tripped (the run exceeded the step budget every run of this many ranks gets)."
            .to_string()];
    if let Some(Finding::Guard { steps, at, deadline_ms, progress, knobs }) =
        report.findings.iter().find(|f| matches!(f, Finding::Guard { .. }))
    {
        lines.push(format!(
            "It had taken {steps} steps by simulated {at}, short of deadline_ms={deadline_ms}; last progress by {progress}."
        ));
        lines.push(format!(
            "The case is too costly to simulate with these kernel knobs: {knobs}; lower the costs or the deadline \
             to get a verdict."
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Case;

    #[test]
    fn an_untraced_failure_too_large_to_re_run_traced_is_not_explained_and_says_why() {
        let line = "engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3";
        let probe = Case::parse(line).unwrap();
        let tight = Case::parse_within(line, probe.payload_bytes() + probe.kept_results_bytes()).unwrap();
        let report = run_case(&tight, false);
        assert!(!report.verdict.is_ok(), "{:?}", report.verdict);
        let lines = explain(&report);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("Not explained: re-running it traced does not fit") && lines[0].contains("MiB"));
        // Within the default budget the same run is explained.
        assert!(explain(&run_case(&probe, false)).len() > 1);
    }

    /// The pairwise scan `accept_inversion` replaced (quadratic in the messages).
    fn accept_inversion_by_pairs(out: &Outcome) -> Option<Overtake> {
        let mut best: Option<(Instant, Overtake)> = None;
        for (&ka, a) in &out.record.messages.sent {
            for (&kb, b) in &out.record.messages.sent {
                if ka.0 == kb.0 || (a.from, a.to, a.tag) != (b.from, b.to, b.tag) || a.at >= b.at {
                    continue;
                }
                let Some(acc_b) = accepted_at(out, kb.0) else { continue };
                if accepted_at(out, ka.0).is_some_and(|acc_a| acc_a <= acc_b) {
                    continue;
                }
                if best.as_ref().is_none_or(|(t, _)| acc_b < *t) {
                    let o = Overtake { receiver: a.to, peer: a.from, expected: Some(ka), taken: kb, taken_at: None };
                    best = Some((acc_b, o));
                }
            }
        }
        best.map(|(_, o)| o)
    }

    #[test]
    fn the_linear_inversion_finder_agrees_with_the_pairwise_scan() {
        let mut inversions = 0;
        for (wl, ranks) in [("deepep", 2), ("qp-create", 4), ("nvshmem-init", 6), ("churn", 3)] {
            for adversary in ["rss", "lossy", "overflow"] {
                for seed in 0..25 {
                    let c = Case::parse(&format!(
                        "engine=fast variant=nvshmem-3.4 workload={wl} ranks={ranks} adversary={adversary} seed={seed}"
                    ))
                    .unwrap();
                    let report = run_case(&c, true);
                    let out = &report.outcome;
                    let (fast, slow) = (accept_inversion(out), accept_inversion_by_pairs(out));
                    let key = |o: &Option<Overtake>| o.as_ref().map(|o| (o.receiver, o.peer, o.expected, o.taken));
                    assert_eq!(key(&fast), key(&slow), "{c}");
                    inversions += usize::from(fast.is_some());
                }
            }
        }
        assert!(inversions > 20, "the sample must hold inversions to compare: {inversions}");
    }

    fn explanation(case: &str) -> Vec<String> {
        let c = Case::parse(case).unwrap();
        explain(&run_case(&c, true))
    }

    #[test]
    fn a_hang_of_lost_retransmissions_names_the_connection_and_the_deadline() {
        let lines = explanation(
            "engine=fast variant=seq workload=deepep ranks=2 adversary=lossy loss_good=0.6 loss_bad=0.95 \
             deadline_ms=20000 seed=3",
        );
        let text = lines.join("\n");
        assert!(text.contains("still waiting at the simulated deadline (20000.000 ms)"), "{text}");
        assert!(text.contains("from rank 1 to the root is lost and retransmitted"), "{text}");
    }

    #[test]
    fn a_hang_that_stops_early_does_not_claim_the_deadline() {
        // One rank fails on a size mismatch; the ranks waiting for it have nothing left to
        // happen, so the run stops long before its deadline.
        let c = Case::parse("engine=fast variant=nvshmem-3.7 workload=churn ranks=8 adversary=swarm seed=44").unwrap();
        let report = run_case(&c, true);
        assert!(report.outcome.record.ranks.iter().any(|r| r.finished_at.is_none()), "some rank hangs");
        assert!(report.outcome.end.saturating_since(Instant::ZERO) < c.deadline(), "stopped early");
        let first = stuck_lines(&report).remove(0);
        assert!(first.contains("when the run stopped at") && !first.contains("deadline"), "{first}");
    }

    /// A connect deadlock is read from the record's typed waits: the peer each rank is in
    /// connect() to, to send; never from the words (which may name another rank, or be all a
    /// world has).
    #[test]
    fn a_connect_deadlock_names_the_ranks_from_the_typed_wait() {
        use bootsim_core::{Awaited, Blocked, Culprit};
        let c = Case::parse("engine=fast variant=nvshmem-3.7 workload=custom ops=barrier ranks=3 seed=1").unwrap();
        let mut report = run_case(&c, true);
        let dialing = |to: u32, words: &str| Awaited::Protocol {
            op: None,
            peer: Some(Culprit::Rank(to)),
            blocked: Blocked::ConnectToSend,
            text: words.to_string(),
        };
        let ranks = &mut report.outcome.record.ranks;
        // The words name rank 2; the typed peers are ranks 1 and 0.
        ranks[0].unfinished = Some(dialing(1, "barrier #0: send to rank 2 tag 0x1 (connect of local c4)"));
        ranks[1].unfinished = Some(dialing(0, "somewhere else"));
        let line = connect_deadlock(&report).expect("a deadlock");
        assert!(line.starts_with("Deadlock: ranks 0 and 1 each wait in connect() for the other"), "{line}");
        // A cycle of three, through the typed peers.
        let ranks = &mut report.outcome.record.ranks;
        ranks[1].unfinished = Some(dialing(2, ""));
        ranks[2].unfinished = Some(dialing(0, ""));
        let line = connect_deadlock(&report).expect("a deadlock");
        assert!(line.contains("ranks 0 -> 1 -> 2 each wait in connect() for the next"), "{line}");
        // Words alone (a text fallback), or a connect that is not a send's, are no deadlock.
        let ranks = &mut report.outcome.record.ranks;
        ranks[0].unfinished = Some("barrier #0: send to rank 1 tag 0x1 (connect of local c4)".into());
        ranks[1].unfinished = Some("barrier #0: send to rank 0 tag 0x1 (connect of local c4)".into());
        ranks[2].unfinished = Some(Awaited::Protocol {
            op: None,
            peer: Some(Culprit::Rank(0)),
            blocked: Blocked::Connect,
            text: String::new(),
        });
        assert_eq!(connect_deadlock(&report), None);
    }

    /// Findings whose errors and waits are only words (a world's text fallback) explain as the
    /// typed ones do: their words are what is shown.
    #[test]
    fn a_text_fallback_record_explains_with_the_same_words() {
        let c = Case::parse("engine=fast variant=nvshmem-3.7 workload=churn ranks=8 adversary=swarm seed=44").unwrap();
        let mut report = run_case(&c, true);
        let typed = explain(&report);
        let mut texts = 0;
        for f in &mut report.findings {
            match f {
                Finding::Error { error, .. } => *error = error.text().into(),
                Finding::Hang { waiting, .. } => *waiting = waiting.text().into(),
                _ => continue,
            }
            texts += 1;
        }
        assert!(texts > 1, "the case must hold errors and hangs: {:?}", report.findings);
        assert_eq!(explain(&report), typed);
        let told = |what: &str| typed.iter().any(|l| l.contains(what));
        assert!(told(" first and failed: ") && told(" hangs: it still waits for "), "{typed:?}");
        let words = Finding::Error { rank: Some(4), error: "its words".into() };
        assert_eq!(consequence(&words, &[]).as_deref(), Some("Then rank 4 failed: its words."));
    }

    #[test]
    fn the_decisive_stall_overlaps_the_window_in_which_the_overtake_happened() {
        let mut named = 0;
        for (wl, ranks, adversary) in [("deepep", 2, "rss"), ("qp-create", 4, "overflow"), ("churn", 3, "swarm")] {
            for seed in 0..40 {
                let c = Case::parse(&format!(
                    "engine=fast variant=nvshmem-3.7 workload={wl} ranks={ranks} adversary={adversary} seed={seed}"
                ))
                .unwrap();
                let report = run_case(&c, true);
                let out = &report.outcome;
                let Some(o) = find_overtake(out) else { continue };
                let Some(ka) = o.expected else { continue };
                let (ka, kb) = (ka.0, o.taken.0);
                let Some((_, EventKind::RxStall { from, until, .. })) = decisive_stall(out, ka, kb) else { continue };
                let start = note_time(out, kb, |e| matches!(e, EventKind::SynSent { .. })).unwrap();
                let limit = enqueued_at(out, ka).or(accepted_at(out, ka)).unwrap_or(out.end);
                assert!(until > start && from < limit, "{c}: stall {from}..{until} outside {start}..{limit}");
                named += 1;
            }
        }
        assert!(named > 10, "the sample must name stalls: {named}");
    }
}
