//! The figures README quotes, computed here from the code: a figure that drifts fails this test,
//! which prints the sentence README should say instead. (The commands README shows are run by
//! tests/docs_examples.rs; this file checks the numbers in its prose and tables.)

mod common;

use bootsim_sim::{run_case, Case, Verdict};
use common::{bootsim, text};

const README: &str = include_str!("../README.md");

/// README's text with every run of whitespace one space (its lines wrap anywhere).
fn readme() -> String {
    README.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn says(sentence: &str) {
    let sentence = sentence.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(readme().contains(&sentence), "README should say, computed from the code now:\n{sentence}");
}

/// Seeds `0..seeds` of `case` whose verdict is not ok.
fn failing(case: &str, seeds: u64) -> Vec<u64> {
    let base = Case::parse(case).unwrap();
    let seeds: Vec<u64> = (0..seeds).collect();
    let chunks: Vec<Vec<u64>> = seeds.chunks(seeds.len().div_ceil(2)).map(<[u64]>::to_vec).collect();
    let found = std::thread::scope(|s| {
        let runs: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let base = &base;
                s.spawn(move || {
                    chunk
                        .into_iter()
                        .filter(|&seed| !run_case(&base.with_seed(seed).unwrap(), false).verdict.is_ok())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        runs.into_iter().flat_map(|r| r.join().unwrap()).collect::<Vec<_>>()
    });
    let mut found = found;
    found.sort_unstable();
    found
}

fn percent(n: usize, of: u64) -> String {
    format!("{:.1} %", n as f64 * 100.0 / of as f64)
}

#[test]
fn the_ranks_bound_per_workload_is_the_budget_s() {
    let [d, i, q, c] = ["deepep", "nvshmem-init", "qp-create", "churn"].map(Case::max_ranks);
    says(&format!(
        "with their default parameters at most {d} ranks of `deepep`, {i} of `nvshmem-init`, {q} of `qp-create`, {c} of `churn`"
    ));
    assert!(Case::parse(&format!("workload=deepep ranks={}", d + 1)).unwrap_err().to_string().contains("budget"));
    // A run that keeps every rank's results (turmoil), and its trace too (traced, replayed):
    // the largest that fits.
    let largest = |fits: &dyn Fn(u32) -> bool| {
        let (mut lo, mut hi) = (1, i);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(mid) {
                lo = mid
            } else {
                hi = mid - 1
            }
        }
        lo
    };
    let turmoil = largest(&|n| Case::parse(&format!("workload=nvshmem-init ranks={n} engine=turmoil")).is_ok());
    let traced = largest(&|n| {
        Case::parse(&format!("workload=nvshmem-init ranks={n}")).unwrap().check_kept_results(true).is_ok()
    });
    says(&format!(
        "`engine=turmoil` keeps every rank's results, its message log and a link per pair of hosts too, so at most {turmoil} ranks of `nvshmem-init`, and a traced run (`--trace`, `replay`, explain) its trace besides, at most {traced}"
    ));
}

#[test]
fn first_tag_runs_from_1_to_2_pow_31_as_readme_and_help_say() {
    assert!(Case::parse("variant=nvshmem-3.8 first_tag=2147483648").is_ok());
    let e = Case::parse("variant=nvshmem-3.8 first_tag=2147483649").unwrap_err().to_string();
    assert!(e.contains("must be 1..=2147483648"), "{e}");
    assert!(Case::parse("variant=nvshmem-3.8 first_tag=0").is_err());
    says("where `nvshmem-3.8`'s per-call tag counter starts, 1..=2^31");
    assert!(Case::keys_help().contains("where nvshmem-3.8's per-call tag counter starts, 1..=2^31"));
}

#[test]
fn the_swarm_hangs_of_nvshmem_3_8_at_16_ranks_are_the_seeds_readme_names() {
    let seeds = failing("variant=nvshmem-3.8 workload=nvshmem-init ranks=16 adversary=swarm", 200);
    let names: Vec<String> = seeds.iter().map(u64::to_string).collect();
    let list = match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    };
    says(&format!("({} of 200 `swarm` seeds of nvshmem-init at 16 ranks: seeds {list};", seeds.len()));
    let first =
        Case::parse(&format!("variant=nvshmem-3.8 workload=nvshmem-init ranks=16 adversary=swarm seed={}", seeds[0]));
    assert_eq!(run_case(&first.unwrap(), false).verdict, Verdict::Hang);
    says(&format!(
        "`bootsim run 'variant=nvshmem-3.8 workload=nvshmem-init ranks=16 adversary=swarm seed={}'`",
        seeds[0]
    ));
}

#[test]
fn the_pr97_fail_open_seed_needs_its_short_drain_bound_as_readme_says() {
    let toml = include_str!("../seeds/pr97-fail-open-qp-create.toml");
    let case = toml.lines().find_map(|l| l.strip_prefix("case = \"")?.strip_suffix('"')).unwrap();
    assert!(case.contains(" drain_ms=100 "), "{case}");
    assert_eq!(run_case(&Case::parse(case).unwrap(), false).verdict, Verdict::Corruption);
    let default_drain = case.replace(" drain_ms=100", "");
    assert_eq!(run_case(&Case::parse(&default_drain).unwrap(), false).verdict, Verdict::Pass, "{default_drain}");
    says("(that case sets `drain_ms=100`, a tenth of NVSHMEM's default bound; at the default 1000 ms the same seed passes)");
}

#[test]
fn the_engines_failure_rates_are_readme_s() {
    let rate = |engine: &str, ranks: u32, seeds: u64| {
        let case = format!("engine={engine} variant=nvshmem-3.7 workload=deepep ranks={ranks} adversary=rss");
        percent(failing(&case, seeds).len(), seeds)
    };
    let (f2, t2) = (rate("fast", 2, 1000), rate("turmoil", 2, 1000));
    let (f4, t4) = (rate("fast", 4, 500), rate("turmoil", 4, 500));
    let (f8, t8) = (rate("fast", 8, 500), rate("turmoil", 8, 500));
    says(&format!(
        "the fast engine finds the report's failure in {f2} of runs at 2 ranks, turmoil in {t2}; at 4 ranks {f4} and {t4} (500 seeds)"
    ));
    assert_eq!((f8.as_str(), t8.as_str()), ("0.0 %", "0.0 %"), "README: at 8 ranks neither finds one in 500");
    says("at 8 ranks neither finds one in 500");
}

#[test]
fn make_run_s_table_is_what_compare_prints() {
    // `make run` is `bootsim compare` with the Makefile's RUN_ARGS.
    let makefile = include_str!("../Makefile");
    let args = makefile.lines().find_map(|l| l.strip_prefix("RUN_ARGS ?= ")).unwrap();
    let o = bootsim().args(args.split_whitespace()).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let printed = String::from_utf8_lossy(&o.stdout);
    let start = README.find("```\nworkload=deepep ranks=2 adversary=rss engine=fast seeds 0..200\n").unwrap() + 4;
    let shown = &README[start..start + README[start..].find("```").unwrap()];
    assert_eq!(shown, printed, "README's make run block; now printed:\n{printed}");
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn readme_s_links_to_its_sections_and_docs_resolve() {
    let anchors: Vec<String> =
        README.lines().filter_map(|l| l.strip_prefix('#')).map(|h| slug(h.trim_start_matches('#'))).collect();
    let mut links = 0;
    for part in README.split("](").skip(1) {
        let target = &part[..part.find(')').unwrap()];
        if let Some(anchor) = target.strip_prefix('#') {
            assert!(anchors.iter().any(|a| a == anchor), "README links #{anchor}, no such heading: {anchors:?}");
            links += 1;
        } else if !target.starts_with("http") {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(target);
            assert!(path.exists(), "README links {target}, which does not exist");
        }
    }
    assert!(links >= 4, "the intro links both personas' sections");
    // The glossary is linked from the first paragraph.
    let first = README.split("\n\n").nth(1).unwrap();
    assert!(first.contains("[glossary](docs/glossary.md)"), "{first}");
}

#[test]
fn the_glossary_explains_every_adversary_and_workload_and_the_words_readme_uses() {
    let glossary = include_str!("../docs/glossary.md");
    for a in bootsim_sim::kernel::PROFILES {
        assert!(glossary.contains(&format!("- `{a}`: ")), "adversary {a} has no glossary entry");
    }
    for w in bootsim_nvshmem::workload::WORKLOADS {
        assert!(glossary.contains(&format!("- `{w}`: ")), "workload {w} has no glossary entry");
    }
    for word in [
        "**RSS**",
        "**RX queue**",
        "**softirq**",
        "QPN, GID",
        "**SIOCOUTQ**",
        "NVIDIA/nvshmem#97",
        "DeepEP",
        "Root rank vs root user",
    ] {
        assert!(glossary.contains(word), "the glossary lacks {word}");
    }
}

/// `12345678` as README writes it: `12 345 678`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// `bootsim explore CASE ARGS...`'s states and transitions.
fn explored(case: &str, args: &[&str]) -> (u64, u64) {
    let o = bootsim().arg("explore").arg(case).args(args).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let line = out.lines().find(|l| l.starts_with("states: ")).unwrap_or_else(|| panic!("{out}"));
    let num =
        |key: &str| -> u64 { line.split(key).nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap() };
    (num("states: "), num("transitions: "))
}

#[test]
fn the_explore_table_s_states_and_transitions_are_what_explore_counts() {
    // The rows that take seconds in a debug build; the others take minutes (README says so).
    let rows: [(&str, &str, &[&str]); 4] = [
        ("`nvshmem-3.4` deepep n=2", "variant=nvshmem-3.4 workload=deepep ranks=2", &[]),
        ("`persistent` deepep n=4", "variant=persistent workload=deepep ranks=4", &[]),
        ("`drain` qp-create k=3 n=3", "variant=drain workload=qp-create k=3 ranks=3", &[]),
        (
            "`pr97` qp-create k=2 n=3, `--faults drain-timeout`",
            "variant=pr97 workload=qp-create k=2 ranks=3",
            &["--faults", "drain-timeout"],
        ),
    ];
    std::thread::scope(|s| {
        for (label, case, args) in rows {
            s.spawn(move || {
                let (states, reduced) = explored(case, args);
                let (again, every) = explored(case, &[args, &["--no-reduction"][..]].concat());
                assert_eq!(states, again, "{label}: the same states either way");
                says(&format!("| {label} | {} | {} / {} |", grouped(states), grouped(reduced), grouped(every)));
            });
        }
    });
}
