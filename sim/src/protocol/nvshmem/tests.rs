//! NVSHMEM's runs judged: a wrong chunk named by the message taken or by its bytes, the QP
//! fields of its `--json`, and the one judge across worlds (the same ends judged the same
//! whether a simulated engine or a real world recorded them; what each world leaves out changes
//! nothing else).

use bootsim_core::{Instant, OpId, RankRecord, RunRecord};
use bootsim_driver::{rank_record, NodeRun};
use bootsim_nvshmem::seam::NvshmemNode;
use bootsim_nvshmem::OpKind;
use bootsim_nvshmem::{BootstrapError, Completion};

type RankRun = NodeRun<NvshmemNode>;
type DriverError = bootsim_driver::DriverError<NvshmemNode>;

use super::*;
use crate::case::Case;
use crate::engine::Outcome;
use crate::oracle::Provenance;
use crate::run::run_case;
use bootsim_core::{MsgOrigin, SentMsg, TakenMsg};
use bootsim_nvshmem::workload::{alltoall_chunk, expected_result};

fn ok_record(specs: &[OpSpec], seed: u64, r: u32, n: u32) -> RankRecord {
    let ops = specs
        .iter()
        .enumerate()
        .map(|(i, s)| Ok(expected_result(*s, seed, i as u32, r, n).unwrap_or_default()))
        .collect();
    RankRecord { rank: r, ops, ..Default::default() }
}

fn texts(f: &[Finding]) -> Vec<String> {
    f.iter().map(ToString::to_string).collect()
}

#[test]
fn the_reports_zeroed_chunk_is_corruption_with_einval_and_its_origin() {
    let specs = [OpSpec::Alltoall(576), OpSpec::Barrier];
    let mut r1 = ok_record(&specs, 3, 1, 2);
    // 3.4.5: rank 1's chunk from rank 0 got the barrier's 4 bytes, the rest stayed zero.
    let got = r1.ops[0].as_mut().unwrap();
    got[..576].fill(0);
    got[..4].copy_from_slice(&[1, 2, 3, 4]);
    r1.ops[1] = Err("Message truncated : received 576 bytes instead of 4".into());
    let (v, f) = judge(&specs, 3, 2, &RunRecord::of_ranks(vec![ok_record(&specs, 3, 0, 2), r1]));
    assert_eq!(v, Verdict::Corruption);
    let text = texts(&f);
    assert!(
        text[0].starts_with("corruption: rank 1 alltoall #0 chunk from rank 0 holds a 4-byte message 01020304"),
        "{text:?}"
    );
    assert!(text[0].contains("received QPN 0x4030201 and a zero GID"), "{text:?}");
    assert!(text[0].ends_with("EINVAL"), "{text:?}");
    assert_eq!(text[1], "error: rank 1: Message truncated : received 576 bytes instead of 4");
}

#[test]
fn errors_hangs_and_silent_stops_are_named() {
    let specs = [OpSpec::Alltoall(576), OpSpec::Barrier];
    let r0 = RankRecord { rank: 0, unfinished: Some("barrier #1".into()), ..Default::default() };
    let r1 = RankRecord { rank: 1, ops: vec![Err("size mismatch".into())], ..Default::default() };
    let (v, f) = judge(&specs, 0, 2, &RunRecord::of_ranks(vec![r0, r1]));
    assert_eq!(v, Verdict::Error);
    assert_eq!(texts(&f), ["hang: rank 0 waits for barrier #1", "error: rank 1: size mismatch"]);
    let quiet = RankRecord { rank: 0, ..Default::default() };
    let (v, f) = judge(&specs, 0, 1, &RunRecord::of_ranks(vec![quiet]));
    assert_eq!(
        (v, texts(&f)),
        (Verdict::Error, vec!["error: rank 0: ended after 0 of 2 operations without an error".into()])
    );
    let good: Vec<_> = (0..2).map(|r| ok_record(&specs, 0, r, 2)).collect();
    assert_eq!(judge(&specs, 0, 2, &RunRecord::of_ranks(good)), (Verdict::Pass, vec![]));
}

/// One rank's completions: init, an alltoall whose chunk from rank 0 is wrong, a barrier that
/// failed with the core's typed error.
fn completions(specs: &[OpSpec], seed: u64) -> Vec<Completion> {
    let mut bytes = expected_result(specs[0], seed, 0, 1, 2).unwrap();
    bytes[0] ^= 0xff;
    let err = BootstrapError::SizeMismatch { rank: 1, peer: 0, op: OpKind::Barrier, tag: 3, expected: 4, got: 9 };
    vec![
        Completion { op: OpId(0), kind: OpKind::Init, result: Ok(Vec::new()) },
        Completion { op: OpId(1), kind: OpKind::Alltoall, result: Ok(bytes) },
        Completion { op: OpId(2), kind: OpKind::Barrier, result: Err(err) },
    ]
}

#[test]
fn the_same_ends_recorded_by_a_simulated_and_a_real_world_give_the_same_findings() {
    let (specs, seed) = ([OpSpec::Alltoall(48), OpSpec::Barrier], 9);
    let cs = completions(&specs, seed);
    // Simulated: the engines' recorder.
    let mut out = Outcome::new(2);
    for (i, c) in completions(&specs, seed).into_iter().enumerate() {
        out.completed(1, Instant::from_nanos(i as u64), c);
    }
    out.rank_ended(1, Instant::from_nanos(9));
    out.record.ranks[0] = ok_record(&specs, seed, 0, 2);
    out.rank_stopped(1, None, Vec::new());
    out.root_ended(&Ok(Vec::new()));
    // Real: the async driver's run as a real world reports it.
    let run = RankRun { completions: cs.clone(), ..RankRun::default() };
    let error = cs[2].result.clone().unwrap_err();
    let failed = Err(DriverError::Failed { error, completed: 2, run: Box::new(run), culprit: None });
    let real = RunRecord::of_ranks(vec![ok_record(&specs, seed, 0, 2), rank_record(1, &failed)]);

    let sim = judge(&specs, seed, 2, &out.record);
    assert_eq!(sim, judge(&specs, seed, 2, &real));
    assert_eq!(sim.0, Verdict::Corruption);
    assert_eq!(
        texts(&sim.1)[1],
        "error: rank 1: barrier #1 recv from rank 0 tag 0x3: message size mismatch: received 9 bytes instead of 4"
    );
}

#[test]
fn a_simulated_run_judged_from_its_per_rank_part_alone_keeps_its_per_rank_findings() {
    // The corpus' explore counterexample: silently cross-wired QPs.
    let entry =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../seeds/explore-disjoint-qp-create.toml"))
            .unwrap();
    let line = entry.lines().find_map(|l| l.strip_prefix("case = ")).unwrap().trim_matches('"');
    let case = Case::parse(line).unwrap();
    let report = run_case(&case, true);
    assert_eq!(report.verdict, Verdict::Corruption);
    // What a real world would have recorded: results and hangs, no message log, root or drains.
    let real: Vec<RankRecord> = report
        .outcome
        .record
        .ranks
        .iter()
        .map(|r| RankRecord { unexpected: Vec::new(), ended_at: Vec::new(), finished_at: None, ..r.clone() })
        .collect();
    let (verdict, real) =
        judge(&case.workload().ops(case.seed()), case.seed(), case.ranks(), &RunRecord::of_ranks(real));
    assert_eq!(verdict, Verdict::Corruption);
    // The same per-rank findings; only the source of a wrong chunk may be told otherwise (by its
    // bytes rather than by the message the receive took).
    let strip = |f: &Finding| match f {
        Finding::Corruption { source: _, .. } => {
            let mut f = f.clone();
            if let Finding::Corruption { source, .. } = &mut f {
                *source = Provenance::Unknown;
            }
            Some(f)
        }
        Finding::Mismatch { .. } | Finding::DrainGaveUp { .. } => None,
        Finding::Hang { who: crate::oracle::Who::Root, .. } => None,
        _ => Some(f.clone()),
    };
    let sim: Vec<Finding> = report.findings.iter().filter_map(strip).collect();
    let real: Vec<Finding> = real.iter().filter_map(strip).collect();
    assert!(!sim.is_empty());
    assert_eq!(sim, real);
}

/// Rank 1's findings when its operation `index` of `specs` (seed 5, two ranks) delivers `got`,
/// the messages it took being `taken` (sent, taken) pairs.
fn judged(specs: &[OpSpec], index: usize, got: Vec<u8>, taken: &[(SentMsg, TakenMsg)]) -> Vec<Finding> {
    let mut j = judge_of(specs, 5, 2);
    for (s, t) in taken {
        j.taken(t, Some(s));
    }
    j.completed(1, index, &Ok(got));
    j.finish(&RunRecord::new(2)).1.into_iter().filter(|f| matches!(f, Finding::Corruption { .. })).collect()
}

#[test]
fn a_wrong_chunk_is_named_by_the_message_taken_else_by_its_bytes() {
    let (specs, seed, n) = ([OpSpec::Alltoall(48), OpSpec::Alltoall(48)], 5, 2);
    let right = expected_result(specs[1], seed, 1, 1, n).unwrap();
    assert_eq!(judged(&specs, 1, right.clone(), &[]), vec![]);
    // Rank 1's chunk from rank 0 holds alltoall #0's chunk.
    let mut got = right.clone();
    got[..48].copy_from_slice(&alltoall_chunk(seed, 0, 0, 1, 48));
    let by_bytes = judged(&specs, 1, got.clone(), &[]);
    let text = by_bytes[0].to_string();
    assert_eq!(by_bytes.len(), 1, "{by_bytes:?}");
    assert!(
        text.starts_with(
            "corruption: rank 1 alltoall #1 chunk from rank 0 holds alltoall #0's chunk from rank 0 for rank 1; "
        ),
        "{text}"
    );
    // The chunk holds QP handles: what the verbs layer would do with the first wrong one.
    assert!(
        text.ends_with("cross-wired QP: rank 1 would connect to rank 0's QP 0 meant for rank 1 (alltoall #0)"),
        "{text}"
    );
    let sent_origin = MsgOrigin { op: OpId(1), kind: OpKind::Alltoall.op_type(), step: 1 };
    let sent = SentMsg { from: 0, to: 1, tag: 1, origin: sent_origin, size: 48, at: Instant::ZERO };
    let taken_origin = MsgOrigin { op: OpId(2), kind: OpKind::Alltoall.op_type(), step: 1 };
    let t = TakenMsg {
        at: Instant::ZERO,
        rank: 1,
        from: 0,
        tag: 1,
        origin: taken_origin,
        size: 48,
        expected_size: 48,
        conn: None,
    };
    let by_message = judged(&specs, 1, got, &[(sent, t)]);
    let text = by_message[0].to_string();
    let want = "corruption: rank 1 alltoall #1 chunk from rank 0 holds alltoall #0 step 1 from rank 0; ";
    assert!(text.starts_with(want), "{text}");
    let Finding::Corruption { source: Provenance::Message { from: 0, origin }, .. } = &by_message[0] else {
        panic!("{by_message:?}")
    };
    assert_eq!(*origin, sent_origin);
}

#[test]
fn the_json_of_a_corruption_keeps_nvshmems_qp_fields_where_they_always_were() {
    // The fields `--json` has always had, null where no QP handle is named.
    let (specs, seed, n) = ([OpSpec::Allgather(8), OpSpec::Alltoall(48)], 5, 2);
    let right = expected_result(specs[0], seed, 0, 1, n).unwrap();
    let mut got = right.clone();
    got[0] ^= 1;
    let f = &judged(&specs, 0, got, &[])[0];
    assert_eq!(
        serde_json::to_string(f).unwrap(),
        r#"{"kind":"corruption","rank":1,"op":"allgather #0","peer":0,"source":"bytes of unknown origin","expected_qp":null,"received_qp":null,"verbs":null}"#
    );
    let right = expected_result(specs[1], seed, 1, 1, n).unwrap();
    let mut got = right.clone();
    got[..48].fill(0);
    let f = &judged(&specs, 1, got, &[])[0];
    let json = serde_json::to_string(f).unwrap();
    let Finding::Corruption { detail: Some(d), .. } = f else { panic!("{f:?}") };
    let (e, r) = d.expected_received().unwrap();
    let want = format!(
        r#"{{"kind":"corruption","rank":1,"op":"alltoall #1","peer":0,"source":"48 zero bytes: nothing was written into it","expected_qp":"{e}","received_qp":"{r}","verbs":"rank 1 would call ibv_modify_qp(RTR) with QPN 0x0 and a zero GID: EINVAL"}}"#
    );
    assert_eq!(json, want);
}
