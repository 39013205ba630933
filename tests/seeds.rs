//! Replays every recorded case in seeds/: its verdict must not change, and replaying it twice
//! must give the same trace digest, and an untraced run (judged as it goes) the same findings.

use std::path::Path;

use bootsim_sim::shrink::SeedEntry as Entry;
use bootsim_sim::{run_case, Case, Verdict};

fn entries() -> Vec<(String, Entry)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("seeds/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("readable seed file");
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let entry = Entry::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, entry)
        })
        .collect()
}

#[test]
fn every_recorded_case_keeps_its_verdict_and_digest() {
    let entries = entries();
    assert!(entries.len() >= 2, "the corpus holds at least the reported bug under both NVSHMEM versions");
    let mut changed = Vec::new();
    for (name, e) in &entries {
        assert!(!e.shows.is_empty() && !e.found.is_empty(), "{name}: say what it shows and when it was found");
        let expected = Verdict::parse(&e.verdict).unwrap_or_else(|| panic!("{name}: unknown verdict {}", e.verdict));
        let case = Case::parse(&e.case).unwrap_or_else(|err| panic!("{name}: {err}"));
        let a = run_case(&case, true);
        if a.verdict != expected {
            changed.push(format!("{name}: expected {expected}, got {}\n{a}", a.verdict));
            continue;
        }
        let b = run_case(&case, true);
        assert_eq!(a.trace.unwrap().digest, b.trace.unwrap().digest, "{name}: replay is not deterministic");
        // Untraced, the fast engine judges as it goes (issue #17): the same findings.
        let streamed = run_case(&case, false);
        let text = |f: &[bootsim_sim::Finding]| f.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(
            (streamed.verdict, text(&streamed.findings)),
            (a.verdict, text(&a.findings)),
            "{name}: judged as it went, the run gives other findings"
        );
    }
    assert!(changed.is_empty(), "verdicts changed (a human must look):\n{}", changed.join("\n"));
}
