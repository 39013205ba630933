//! `bootsim explore` as a user runs it: exit codes, the replay line, bounds, bad usage.

use std::process::{Command, Output};

fn bootsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bootsim")).args(args).output().expect("bootsim runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_counterexample_exits_1_with_a_replay_line_the_fast_engine_agrees_with() {
    let o = bootsim(&["explore", "variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("result: counterexample, shortest (6 choices): corruption"), "{out}");
    let line = out.lines().find_map(|l| l.strip_prefix("replay: bootsim replay '")).expect("a replay line");
    let case = line.trim_end_matches('\'');
    assert!(case.contains(" accept=0:1.0,1.1,1.2/1:0.0,0.2,0.1"), "{case}");
    assert!(out.contains("fast engine: corruption (the same verdict)"), "{out}");
    let run = bootsim(&["run", case]);
    assert_eq!(run.status.code(), Some(1));
    assert!(stdout(&run).starts_with("verdict: corruption"));
}

#[test]
fn a_proof_exits_0_and_a_bound_says_incomplete_not_proved() {
    let o = bootsim(&["explore", "variant=seq workload=deepep ranks=3"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("result: no violation in any schedule (proved for this model)"), "{}", stdout(&o));
    let o = bootsim(&["explore", "variant=seq workload=deepep ranks=3", "--max-states", "5"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0));
    assert!(out.contains("result: incomplete (--max-states 5 reached)") && !out.contains("proved"), "{out}");
}

#[test]
fn bad_usage_exits_2_with_a_reason() {
    for (args, says) in [
        (vec!["explore", "variant=nvshmem-9"], "accepted:"),
        (vec!["explore", "ranks=129"], "at most ranks=128"),
        (vec!["explore", "variant=seq", "--faults", "drain-timeout"], "has no drain"),
        (vec!["explore", "variant=drain", "--faults", "loss"], "accepted: drain-timeout"),
        (vec!["explore", "accept=1:0.0"], "explore chooses the schedule itself"),
        (vec!["explore", "--pairs", "--ranks", "3..2"], "smallest first"),
        (vec!["run", "accept=1:0"], "not FROM.K"),
    ] {
        let o = bootsim(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn the_hazard_map_prints_every_pair_and_a_counterexample() {
    let o = bootsim(&["explore", "--pairs", "--variant", "nvshmem-3.7", "--ranks", "2"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "a corruption in a cell is a counterexample: {out}");
    for pair in ["alltoall>barrier", "barrier>alltoall", "alltoall>alltoall", "barrier>allgather>barrier"] {
        assert!(out.lines().any(|l| l.starts_with(pair)), "{pair}: {out}");
    }
    assert!(out.contains("alltoall>alltoall n=2 corruption: bootsim replay '"), "{out}");
}
