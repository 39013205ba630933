//! The case grammar under fuzzing: random kernel knobs and case keys with extreme values. Each
//! case string is refused at parse time with the offending key named, or runs to a verdict
//! within a bounded wall-clock time (the simulated deadline, or the engine's work guard, ends
//! it); none runs on until something outside kills it. Issue #30 item 9's seven cases first.

use std::sync::mpsc;
use std::time::Duration;

use bootsim_sim::kernel::KernelConfig;
use bootsim_sim::{run_case, Case};
use proptest::prelude::*;

/// Per case, in a debug build on a loaded 2-core machine.
const BOUND: Duration = Duration::from_secs(120);

/// Runs `case` on a thread and waits at most [`BOUND`] for its findings, as text.
fn run_bounded(case: Case) -> Result<Vec<String>, String> {
    let (tx, rx) = mpsc::channel();
    let s = case.to_string();
    std::thread::spawn(move || {
        let r = run_case(&case, false);
        let _ = tx.send(r.findings.iter().map(ToString::to_string).collect());
    });
    rx.recv_timeout(BOUND).map_err(|_| format!("'{s}' still running after {BOUND:?}"))
}

/// Parses `s`; if it parses, runs it on a thread and waits at most [`BOUND`] for the verdict.
fn parse_or_run(s: &str) -> Result<(), String> {
    let case = match Case::parse(s) {
        Ok(c) => c,
        Err(e) => {
            let text = e.to_string();
            // The refusal names a key of the case string.
            let named = s.split_whitespace().filter_map(|w| w.split_once('=')).any(|(k, _)| text.contains(k));
            return if named { Ok(()) } else { Err(format!("'{s}' refused without naming its key: {text}")) };
        }
    };
    run_bounded(case).map(|_| ())
}

#[test]
fn the_issues_seven_cases_are_refused_or_end() {
    for s in [
        "deadline_ms=1 stall_xm=0 napi_budget_time=1.5ms",
        "deadline_ms=1 service=3600s max_backlog=4294967295",
        "seed=14892862071321873792 deadline_ms=1 stall_skew=18446744073709551616 syscall_cost=1.5ms",
        "deadline_ms=1000 data_cost=3600s cpus=128",
        "deadline_ms=1000 rx_ring=129 stall_xm=0.0000001ns",
        "ranks=2 stall_skew=1e30 deadline_ms=1000",
        "ranks=2 syscall_cost=3600s deadline_ms=1000",
    ] {
        parse_or_run(s).unwrap();
    }
}

#[test]
fn the_most_costly_accepted_knobs_end_with_the_guard_naming_them() {
    let s = "ranks=8 deadline_ms=86400000 service=1ms syscall_cost=1ms app_work=1ms stall_gap=1us stall_skew=1000 \
             adversary=cpu";
    let r = run_case(&Case::parse(s).unwrap(), false);
    assert_eq!(r.verdict, bootsim_sim::Verdict::Guard, "its own verdict, not an error");
    let text: Vec<String> = r.findings.iter().map(ToString::to_string).collect();
    let guard = text.iter().find(|f| f.starts_with("guard: the run exceeded ")).unwrap_or_else(|| panic!("{text:?}"));
    assert!(guard.contains("syscall_cost=1ms") && guard.contains("stall_gap=1us"), "{guard}");
}

#[test]
fn on_turmoil_too_the_most_costly_accepted_knobs_end_with_the_guard_naming_them() {
    // A day of simulated time with the kernel walking a stall every microsecond: turmoil used
    // to tick through it for hours; the same work guard as the fast engine's ends it.
    let s = "engine=turmoil ranks=2 deadline_ms=86400000 service=1ms syscall_cost=0 app_work=0 stall_gap=1us \
             stall_skew=1000 adversary=cpu";
    let text = run_bounded(Case::parse(s).unwrap()).unwrap();
    let guard = text.iter().find(|f| f.starts_with("guard: the run exceeded ")).unwrap_or_else(|| panic!("{text:?}"));
    assert!(guard.contains("stall_gap=1us") && guard.contains("service=1ms"), "{guard}");
    assert!(guard.contains("before deadline_ms=86400000"), "{guard}");
}

/// Values that probe every parser's edges.
const VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "0.5",
    "1e30",
    "nan",
    "inf",
    "4294967295",
    "18446744073709551616",
    "0.0000001ns",
    "1ns",
    "1us",
    "1.5ms",
    "1ms",
    "10ms",
    "3600s",
    "3601s",
    "off",
    "on",
    "true",
    "abc",
    "",
    "0:0:0:1",
];

fn word() -> impl Strategy<Value = String> {
    let knobs: Vec<&'static str> = KernelConfig::knobs().iter().map(|(k, _)| *k).collect();
    let keys = prop::sample::select(knobs);
    let value = prop_oneof![
        prop::sample::select(VALUES).prop_map(str::to_string),
        any::<u64>().prop_map(|n| n.to_string()),
        (0u32..5000, prop::sample::select(&["ns", "us", "ms", "s"][..])).prop_map(|(n, u)| format!("{n}{u}")),
    ];
    (keys, value).prop_map(|(k, v)| format!("{k}={v}"))
}

fn case_string() -> impl Strategy<Value = String> {
    let adversary = prop::sample::select(&["fifo", "rss", "lossy", "overflow", "swarm", "load", "cpu"][..]);
    (prop::collection::vec(word(), 1..5), 1u32..4, 1u64..3000, adversary, any::<u64>()).prop_map(
        |(words, ranks, deadline, adversary, seed)| {
            format!("ranks={ranks} deadline_ms={deadline} adversary={adversary} seed={seed} {}", words.join(" "))
        },
    )
}

proptest! {
    // A fixed number of cases keeps `make test` bounded; failures are kept in
    // proptest-regressions and replayed first.
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_knob_string_is_refused_naming_its_key_or_ends(s in case_string()) {
        if let Err(e) = parse_or_run(&s) {
            return Err(TestCaseError::fail(e));
        }
    }
}

proptest! {
    // turmoil ticks each simulated millisecond, so fewer cases; the application CPU knobs are
    // the fast engine's alone (a random word may set them again: refused, naming the key).
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn on_turmoil_every_knob_string_is_refused_naming_its_key_or_ends(s in case_string()) {
        let s = format!("engine=turmoil syscall_cost=0 app_work=0 {s}");
        if let Err(e) = parse_or_run(&s) {
            return Err(TestCaseError::fail(e));
        }
    }
}

#[test]
fn an_nccl_case_with_the_most_costly_knobs_ends_with_the_guard_too() {
    // NCCL's few packets over a day of one-microsecond stalls: the loaded model walked the
    // same busy periods again and again, which the guard did not count (it ran for hours);
    // the walk's steps are the model's work too.
    let s = "protocol=nccl ranks=2 deadline_ms=86400000 service=1ms syscall_cost=0 app_work=0 stall_gap=1us \
             stall_skew=1000 adversary=cpu";
    let text = run_bounded(Case::parse(s).unwrap()).unwrap();
    let guard = text.iter().find(|f| f.starts_with("guard: the run exceeded ")).unwrap_or_else(|| panic!("{text:?}"));
    assert!(guard.contains("stall_gap=1us") && guard.contains("service=1ms"), "{guard}");
}
