//! Trace lines are written for people in our own words: no Rust `Debug` shapes, so the trace
//! digest depends on our wording only, and every kind of line occurs in the cases below.

use bootsim_sim::{run_case, Case};

/// Text `Debug` would produce for our types (struct braces, tuple-struct names, enum variants).
const DEBUG_SHAPES: &[&str] = &[
    "{ ",
    " }",
    "HostId(",
    "SockId(",
    "ConnId(",
    "OpId(",
    "ListenerId(",
    "Instant(",
    "Flow {",
    "MsgOrigin",
    "Some(",
    "None",
    "ToServer",
    "ToClient",
    "DataAck",
    "RxStall",
    "SynSent",
    "Rendezvous",
    "FromRoot",
    "Peers",
    "CheckedIn",
    "MessageSent",
    "MessageTaken",
];

/// `Duration`'s Debug: a number glued to its unit (`4.245ms`, `48µs`); ours read `4.245 ms`.
fn has_debug_duration(line: &str) -> bool {
    let b = line.as_bytes();
    ["ms", "µs", "ns"].iter().any(|u| line.match_indices(u).any(|(i, _)| i > 0 && b[i - 1].is_ascii_digit()))
}

fn trace(case: &str) -> Vec<String> {
    let report = run_case(&Case::parse(case).expect("valid case"), true);
    report.trace.expect("traced").lines
}

fn assert_plain(case: &str) -> Vec<String> {
    let lines = trace(case);
    for l in &lines {
        // The case and kernel-config lines echo key=value input, which is not Debug output.
        if l.contains(" world ") {
            continue;
        }
        for shape in DEBUG_SHAPES {
            assert!(!l.contains(shape), "{case}: trace line has Debug-shaped text {shape:?}: {l}");
        }
        assert!(!has_debug_duration(l), "{case}: trace line has a Debug duration: {l}");
    }
    lines
}

#[test]
fn the_checks_catch_debug_output() {
    assert!(has_debug_duration("drain c5 done after 4.245ms"));
    assert!(!has_debug_duration("drain of connection 7 (local c5) done after 4.245 ms"));
    let debug = format!("{:?}", bootsim_core::ConnId(5));
    assert!(DEBUG_SHAPES.iter().any(|s| debug.contains(s)), "{debug}");
}

#[test]
fn fast_engine_lines_are_plain_words() {
    let mut all = Vec::new();
    for case in [
        "engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3",
        "engine=fast variant=pr97 drain_ms=100 workload=qp-create ranks=4 adversary=lossy seed=52",
        "engine=fast variant=nvshmem-3.4 workload=deepep ranks=4 adversary=overflow seed=28",
        "engine=fast variant=drain workload=deepep ranks=4 adversary=swarm seed=1",
        "engine=fast variant=nvshmem-3.7 workload=deepep ranks=4 adversary=load rx_ring=8 seed=3",
    ] {
        all.extend(assert_plain(case));
    }
    // The cases cover the event kinds whose wording this test guards.
    for word in [
        "sent its SYN",
        "waited",
        "was lost",
        "retransmitted",
        "took rank",
        "sent alltoall",
        " took ",
        "drain of",
        "ring was full",
    ] {
        assert!(all.iter().any(|l| l.contains(word)), "no trace line with {word:?}");
    }
}

#[test]
fn turmoil_engine_lines_are_plain_words() {
    let lines = assert_plain("engine=turmoil variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3");
    assert!(lines.iter().any(|l| l.contains("entered listener")), "no accept-queue line");
}

#[test]
fn trace_production_has_no_debug_formatting() {
    // The files that write trace lines: any `{:?}` there would put Debug text into the digest.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for file in ["words.rs", "engine/fast.rs", "engine/turmoil/gate.rs", "engine/turmoil/mod.rs", "engine/outcome.rs"] {
        let text = std::fs::read_to_string(dir.join(file)).expect("readable source");
        for (i, line) in text.lines().enumerate() {
            assert!(!line.contains(":?}"), "sim/src/{file}:{}: Debug formatting in trace production: {line}", i + 1);
        }
    }
}

/// The kernel connections in `lines` whose words contain `what` followed by a number.
fn conns_after(lines: &[String], what: &str) -> Vec<u64> {
    let mut v: Vec<u64> = lines
        .iter()
        .filter_map(|l| l.split_once(what))
        .filter_map(|(_, rest)| rest.split(' ').next()?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn every_accept_has_its_kernel_record_the_one_that_ends_the_run_too() {
    // Each case's run ends on an accept (its rank's last connection): the kernel's `accepted`
    // record of it is made by that last call, and must be traced like every other.
    for case in [
        "variant=drain workload=deepep ranks=3 adversary=fifo seed=7",
        "variant=nvshmem-3.8 workload=qp-create ranks=6 adversary=cpu seed=4",
    ] {
        let lines = trace(case);
        let accepted = conns_after(&lines, " accept connection ");
        let left: Vec<String> = lines.iter().filter(|l| l.contains(" left listener ")).cloned().collect();
        let recorded = conns_after(&left, "kernel connection ");
        assert!(accepted.len() > 10, "{case}: {accepted:?}");
        assert_eq!(accepted, recorded, "{case}: an accept without its kernel record, or the other way");
    }
}
