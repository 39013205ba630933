//! The one judge across worlds: the same ends judged the same whether a simulated engine or a
//! real world recorded them, and what each world leaves out changes nothing else.

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
use crate::run::run_case;
use bootsim_nvshmem::workload::expected_result;

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
                *source = crate::oracle::Provenance::Told(String::new());
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
