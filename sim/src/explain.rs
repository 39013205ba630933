//! Plain-language explanations of failing runs: which message overtook which and why, what the
//! receiver took, and what it leads to. Built from the trace-time records of an
//! [`Outcome`](crate::engine::Outcome); a report without them is re-run with tracing (the run is
//! deterministic, so the explanation is the same).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

use bootsim_core::{Instant, MsgOrigin, OpKind};

use crate::engine::outcome::{Outcome, SentMsg};
use crate::kernel::{Dir, EventKind, Seg};
use crate::oracle::Finding;
use crate::run::{run_case, RunReport};

/// A message that a later message from the same sender overtook at the receiver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overtake {
    /// The receiving rank.
    pub receiver: u32,
    /// The sending rank.
    pub peer: u32,
    /// Key in [`Outcome::sent`] of the message the receive was meant to take (sent first).
    pub expected: Option<(u64, u32)>,
    /// Key in [`Outcome::sent`] of the message that arrived first and was taken instead.
    pub taken: (u64, u32),
    /// When the receive took it (absent when the receive failed before taking it).
    pub taken_at: Option<Instant>,
}

/// Finds the first harmful overtaking: a receive that took another step's message (non-benign
/// first), or, when a receive failed before taking one, a later same-tag message whose connection
/// the receiver accepted before the earlier one's.
pub fn find_overtake(out: &Outcome) -> Option<Overtake> {
    let mismatched = out.taken.iter().filter_map(|t| {
        let key = t.kconn?;
        let sent = out.sent.get(&key)?;
        let same = sent.origin.op == t.origin.op && sent.origin.step == t.origin.step;
        let benign = sent.origin.kind == OpKind::Barrier && t.origin.kind == OpKind::Barrier;
        (!same).then_some((benign, t, key))
    });
    let best = mismatched.min_by_key(|(benign, _, _)| *benign);
    if let Some((_, t, key)) = best {
        let expected = out.sent.iter().find(|(_, s)| {
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
    for (k, m) in &out.sent {
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
        receiver: out.sent[&ka].to,
        peer: out.sent[&ka].from,
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
/// the one overlapping most with the window from `kb`'s SYN to `ka`'s enqueue, else the longest
/// before that enqueue. Returns its index in `ka`'s kernel notes and the event.
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
    stalls.max_by_key(|&(overlap, len, i, _)| (overlap, len, std::cmp::Reverse(i))).map(|(_, _, i, e)| (i, e))
}

/// `alltoall #1 step 1`, `barrier #2 round 1`: the oracle's names for a message's step.
pub fn step_name(origin: &MsgOrigin) -> String {
    let step = if origin.kind == OpKind::Barrier { "round" } else { "step" };
    format!("{} #{} {step} {}", origin.kind, origin.op.0.saturating_sub(1), origin.step)
}

/// Milliseconds with three decimals, truncated to the microsecond like the trace's times.
pub fn ms(t: Instant) -> String {
    ms_d(Duration::from_nanos(t.as_nanos()))
}

/// A duration as milliseconds with three decimals (truncated to the microsecond).
pub fn ms_d(d: Duration) -> String {
    let us = d.as_micros();
    format!("{}.{:03} ms", us / 1000, us % 1000)
}

/// A segment in words.
pub fn seg_name(seg: Seg, dir: Dir) -> Cow<'static, str> {
    match seg {
        Seg::Syn => "SYN".into(),
        Seg::SynAck => "SYN-ACK".into(),
        Seg::Ack => "handshake-completing ACK".into(),
        Seg::Data { idx: 0 } if dir == Dir::ToServer => "first data segment (it completes the handshake)".into(),
        Seg::Data { idx } => format!("data segment {idx}").into(),
        Seg::Fin { .. } => "FIN".into(),
        Seg::DataAck { upto } => format!("ACK of {upto} segment(s)").into(),
        Seg::Rst => "RST".into(),
    }
}

/// Three to six plain lines for a failing run (none for pass and benign): which message
/// overtook which and why, what the receiver took, and the downstream symptom.
pub fn explain(report: &RunReport) -> Vec<String> {
    if report.verdict.is_ok() {
        return Vec::new();
    }
    if report.trace.is_none() {
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
    for f in &report.findings {
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

fn overtake_lines(report: &RunReport, o: &Overtake) -> Vec<String> {
    let out = &report.outcome;
    let taken = &out.sent[&o.taken];
    let (kb, r, p) = (o.taken.0, o.receiver, o.peer);
    let mut lines = Vec::new();
    let expected = o.expected.and_then(|k| out.sent.get(&k).map(|s| (k.0, s)));
    match expected {
        Some((ka, a)) => {
            lines.push(format!(
                "rank {p} sent {} ({} bytes, tag {:#x}) to rank {r} on connection {ka} at {}, then {} ({} bytes, tag {:#x}) on connection {kb} at {}.",
                step_name(&a.origin), a.size, a.tag, ms(a.at), step_name(&taken.origin), taken.size, taken.tag, ms(taken.at)
            ));
            lines.extend(why(out, ka, kb, a, r));
        }
        None => lines.push(format!(
            "rank {p} sent {} ({} bytes, tag {:#x}) to rank {r} on connection {kb} at {}.",
            step_name(&taken.origin),
            taken.size,
            taken.tag,
            ms(taken.at)
        )),
    }
    lines.push(took_line(report, o, taken));
    lines
}

/// Why connection `ka` (sent first) reached the accept queue after `kb`: the longest RX stall,
/// losses, backlog drops on `ka`'s handshake, and a drain on it that gave up.
fn why(out: &Outcome, ka: u64, kb: u64, a: &SentMsg, r: u32) -> Vec<String> {
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
    cause.truncate(2);
    lines.push(format!("Connection {kb} overtook connection {ka}: {}, so {order}.", cause.join("; ")));
    if let Some(d) = out.drains.iter().find(|d| d.kconn == Some(ka) && d.gave_up) {
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
    let what = step_name(&taken.origin);
    if let Some(t) = out.taken.iter().find(|t| t.kconn == Some(o.taken) && t.rank == r) {
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
            step_name(&t.origin),
            t.tag
        );
    }
    let failure = report.findings.iter().find_map(|f| match f {
        Finding::Error { rank: Some(x), error } if *x == r => Some(strip_rank(error, r)),
        _ => None,
    });
    match failure {
        Some(e) => format!("rank {r} accepted connection {kb} (the {what} message) first and failed: {e}."),
        None => {
            format!("rank {r} accepted connection {kb} (the {what} message) before the message it was waiting for.")
        }
    }
}

/// `rank 0: rank 0: x` -> `x`.
fn strip_rank(error: &str, r: u32) -> &str {
    let prefix = format!("rank {r}: ");
    let mut s = error;
    while let Some(rest) = s.strip_prefix(&prefix) {
        s = rest;
    }
    s
}

/// `QPN 0x1 GID 0000:...:0000` with the GID shortened (zero GID, `::ffff:` prefix).
pub fn short_qp(s: &str) -> String {
    s.replace("GID 0000:0000:0000:0000:0000:0000:0000:0000", "and a zero GID")
        .replace("0000:0000:0000:0000:0000:ffff:", "::ffff:")
}

/// For a hang: how many ranks were stuck, and why up to two of their last connects never
/// reached the peer's accept() (backlog drops, losses, retransmissions, a peer not accepting).
/// A cycle of ranks each blocked in connect() to the next (NVSHMEM sends before it receives,
/// so none of them accepts): named, with what NVSHMEM would do about it.
fn connect_deadlock(report: &RunReport) -> Option<String> {
    let out = &report.outcome;
    // Who each unfinished rank is dialing, from its wait ("send to rank 7 tag 0x8 (connect of c85)").
    let dialing: BTreeMap<u32, u32> = out
        .ranks
        .iter()
        .enumerate()
        .filter(|(_, e)| e.finished.is_none())
        .filter_map(|(r, e)| {
            let w = e.waiting_for.as_deref()?;
            if !w.contains("(connect of ") {
                return None;
            }
            let to = w.split("send to rank ").nth(1)?.split_whitespace().next()?.parse().ok()?;
            Some((r as u32, to))
        })
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
    let hung: Vec<u32> = (0..out.ranks.len() as u32).filter(|&r| out.ranks[r as usize].finished.is_none()).collect();
    if hung.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "{} of {} ranks were still waiting at the simulated deadline ({}).",
        hung.len(),
        out.ranks.len(),
        ms(out.end)
    )];
    lines.extend(connect_deadlock(report));
    let mut stuck = Vec::new();
    for &r in &hung {
        let pending = out.kernel_notes.iter().rev().find_map(|(&k, notes)| {
            let (syn, flow) = notes.iter().find_map(|(t, e)| match e {
                EventKind::SynSent { flow, .. } => Some((*t, *flow)),
                _ => None,
            })?;
            let accepted = notes.iter().any(|(_, e)| matches!(e, EventKind::Accepted { .. }));
            (flow.client.0 == r && flow.server_port != bootsim_core::ports::ROOT_PORT && !accepted)
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
        let lost = count(&|e| matches!(e, EventKind::PacketLost { .. } | EventKind::RingDrop { .. }));
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
    }
    lines
}

/// One line per downstream finding not yet told.
fn consequence(f: &Finding, told: &[String]) -> Option<String> {
    let line = match f {
        Finding::Corruption { rank, op, peer, expected_qp, received_qp, verbs, .. } => {
            match (expected_qp, received_qp) {
                (Some(e), Some(g)) => format!(
                    "Symptom: rank {rank}'s {op} holds {} from rank {peer} where {} was expected{}.",
                    short_qp(g),
                    short_qp(e),
                    verbs.as_ref().map_or(String::new(), |v| format!(": {v}"))
                ),
                _ => format!("Symptom: rank {rank}'s {op} reported success with wrong bytes in rank {peer}'s chunk."),
            }
        }
        Finding::Error { rank: Some(r), error } => {
            let e = strip_rank(error, *r);
            if told.iter().any(|l| l.contains(e)) {
                return None;
            }
            format!("Then rank {r} failed: {e}.")
        }
        Finding::Error { rank: None, error } => format!("Then the root failed: {error}."),
        Finding::Hang { who, waiting, .. } => format!("Then {who} hangs: it still waits for {waiting}."),
        Finding::Leak { rank, entries } => {
            format!("rank {rank} ended with unclaimed connections (peer, tag) {entries:?}.")
        }
        Finding::DrainGaveUp { .. } | Finding::Mismatch { .. } => return None,
    };
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Case;

    /// The pairwise scan `accept_inversion` replaced (quadratic in the messages).
    fn accept_inversion_by_pairs(out: &Outcome) -> Option<Overtake> {
        let mut best: Option<(Instant, Overtake)> = None;
        for (&ka, a) in &out.sent {
            for (&kb, b) in &out.sent {
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
}
