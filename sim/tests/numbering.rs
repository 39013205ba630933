//! One numbering: every operation and connection an explanation or a finding names exists with
//! that number in the trace of the same run, so a reader can match them across outputs.

use bootsim_sim::{explain, run_case, Case};

/// `(word, number)` for every `<word> #N` / `<word> N` in `text` (e.g. ("alltoall", 1)).
fn numbered<'a>(text: &'a str, words: &[&str]) -> Vec<(&'a str, u64)> {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let mut out = Vec::new();
    for w in tokens.windows(2) {
        let word = w[0].trim_start_matches(|c: char| !c.is_alphanumeric());
        let word = word.strip_suffix("'s").unwrap_or(word);
        if !words.contains(&word.to_lowercase().as_str()) {
            continue;
        }
        let digits: String = w[1].trim_start_matches('#').chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse() {
            out.push((word, n));
        }
    }
    out
}

const OPS: &[&str] = &["allgather", "alltoall", "barrier"];

fn check(case: &str) {
    let report = run_case(&Case::parse(case).expect("valid case"), true);
    let trace = report.trace.as_ref().expect("traced").lines.join("\n");
    let explanation = explain(&report).join("\n");
    let findings: String = report.findings.iter().map(|f| format!("{f}\n")).collect();
    assert!(!explanation.is_empty(), "{case}: no explanation");
    let told = format!("{explanation}\n{findings}");
    let ops = numbered(&told, OPS);
    assert!(!ops.is_empty(), "{case}: the explanation names no operation:\n{told}");
    for (kind, n) in ops {
        // Every operation completes or fails in the trace under the same name.
        let name = format!("{kind} #{n}");
        assert!(
            trace.contains(&format!("{name} ok")) || trace.contains(&format!("{name} failed")),
            "{case}: '{name}' is named in\n{told}\nbut no trace line ends it"
        );
    }
    let conns = numbered(&explanation, &["connection"]);
    assert!(!conns.is_empty(), "{case}: the explanation names no connection:\n{explanation}");
    for (_, k) in conns {
        let name = format!("connection {k} ");
        assert!(trace.contains(&name), "{case}: '{name}' is named in\n{explanation}\nbut never in the trace");
    }
}

#[test]
fn explanations_and_traces_share_numbers_fast() {
    check("engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3");
    check("engine=fast variant=disjoint workload=qp-create ranks=4 adversary=rss seed=2");
}

#[test]
fn explanations_and_traces_share_numbers_turmoil() {
    check("engine=turmoil variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=5");
}

#[test]
fn the_number_reader_finds_names() {
    let found = numbered(
        "rank 0's alltoall #1 step 1 took barrier #2 round 1 on connection 8.",
        &["alltoall", "barrier", "connection"],
    );
    assert_eq!(found, vec![("alltoall", 1), ("barrier", 2), ("connection", 8)]);
}
