//! Every command shown in README.md, ARCHITECTURE.md, BENCHMARKS.md and docs/*.md is run here, as a user would type it, and
//! must end as the text says. A command added to the docs without an entry in [`EXPECTED`]
//! fails this test, so examples cannot drift from what the program does.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const SUBCOMMANDS: [&str; 14] = [
    "check",
    "shuffle",
    "run",
    "replay",
    "sweep",
    "compare",
    "shrink",
    "merge",
    "smoke",
    "bench",
    "probe",
    "real-nvshmem",
    "conformance",
    "explore",
];

/// What an example must do.
enum Expect {
    /// Exit with this code, and print this (stdout or stderr).
    Exit(i32, &'static str),
    /// As `Exit`, but needs the userspace wire (root, /dev/net/tun).
    Wire(i32, &'static str),
    /// The receiving half of a probe pair: run in the background, then its sending half.
    ProbeListen,
    /// Not runnable on one machine; the reason, and where it is covered instead.
    NotHere(&'static str),
}
use Expect::*;

const CLUSTER: &str =
    "needs a cluster launcher (srun/mpirun, node001); its single-host form is tested in tests/smoke.rs";

/// Every documented command, as written (comment stripped), and what it must do.
const EXPECTED: &[(&str, Expect)] = &[
    ("make run", NotHere("the same compare as below over 200 seeds; make is not run from a test")),
    ("make test", NotHere("this very test suite")),
    ("make run-nccl", NotHere("the NCCL compare below over 200 seeds; make is not run from a test")),
    ("bootsim compare --workload nccl-init --ranks 8 --seeds 100", Exit(0, "| nccl-2.21 |  100 |  100 |")),
    ("bootsim compare --workload nccl-p2p --ranks 2 --seeds 100", Exit(0, "| nccl-2.30 |  100 |  100 |")),
    (
        "bootsim explore 'variant=nccl-2.21 workload=nccl-init gpus_per_node=2 ranks=4'",
        Exit(0, "result: no violation in any schedule (proved for this model)"),
    ),
    ("bootsim explore 'variant=nccl-2.19 workload=nccl-p2p ranks=2'", Exit(1, "result: counterexample")),
    (
        "bootsim explore --pairs --variant nccl-2.8,nccl-2.19,nccl-2.21,nccl-2.30 --ranks 2..3",
        Exit(1, "barrier>intra-allgather                hang         pass"),
    ),
    (
        "bootsim run 'protocol=nccl variant=nccl-2.19 workload=nccl-p2p ranks=2 adversary=rss seed=2'",
        Exit(1, "transport.cc:204: recv from rank 1 tag 0x100: Message truncated : received 512 bytes instead of 4"),
    ),
    (
        "make install",
        NotHere("a release build into ~/.cargo/bin; tests/install_scripts.rs runs it into a temporary PREFIX (dev profile)"),
    ),
    ("make bench-scale", NotHere("tens of minutes and up to 3/4 of the machine's memory; its quick form is tests/bench.rs")),
    ("make bench", NotHere("about 90 s of release runs; its quick form below is what tests/bench.rs runs")),
    ("bootsim bench --quick", NotHere("tests/bench.rs runs it and checks every section's output")),
    ("make real-nvshmem", NotHere("200 runs a row; tests/real_nvshmem.rs runs the same table with 4")),
    ("make real-nvshmem-accept", NotHere("200 runs a row; tests/interposer.rs runs the same table with 2")),
    ("PROPTEST_CASES=10000 cargo test --release --test properties", NotHere("tests/properties.rs, 128 cases")),
    ("scripts/load-table.sh 200", NotHere("about fifteen minutes on a release build; tests/load_table.rs runs it with 3 seeds")),
    (
        "scripts/load-table.sh 200 2,4,8,16,32,64 600000 'cpu cpus=4;cpu rps=on'",
        NotHere("the slow cells run for many minutes; tests/load_table.rs runs the extra-row form with 3 seeds"),
    ),
    (
        "bootsim run 'variant=nvshmem-3.7 workload=custom ops=barrier,alltoall:576 ranks=16 adversary=load seed=1'",
        Exit(0, "NAPI polls deferred to ksoftirqd"),
    ),
    (
        "bootsim run 'variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3'",
        Exit(1, "verdict: corruption"),
    ),
    ("bootsim run 'variant=seq workload=deepep ranks=2 adversary=rss seed=3' --trace", Exit(0, "verdict: pass")),
    ("bootsim replay 'variant=nvshmem-3.7 workload=deepep ranks=2 adversary=rss seed=3'", Exit(1, "trace-digest: ")),
    (
        "bootsim sweep --variant nvshmem-3.4,seq --workload deepep --ranks 2 --adversary rss --seeds 1000 --jobs 2",
        Exit(1, "seq          runs=1000 pass=1000"),
    ),
    ("bootsim compare --workload qp-create --ranks 4 --seeds 200", Exit(0, "| nvshmem-3.8 |  200 |  200 |")),
    (
        "bootsim shrink 'variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3' --save seeds/my-case.toml",
        Exit(0, "saved: seeds/my-case.toml"),
    ),
    (
        "bootsim replay 'variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3' --timeline out.html",
        Exit(1, "explain:"),
    ),
    (
        "bootsim run 'variant=nvshmem-3.7 workload=qp-create ranks=4 adversary=rss seed=2' --json",
        Exit(1, "\"verdict\": \"corruption\""),
    ),
    (
        "bootsim sweep --variant seq --seeds 100 --shard 0/2 --json > out.0.jsonl; bootsim sweep --variant seq --seeds 100 --shard 1/2 --json > out.1.jsonl; bootsim merge out.*.jsonl",
        Exit(0, "seq          runs=100 pass=100"),
    ),
    ("bootsim smoke --local 8 --workload nvshmem-init --variant nvshmem-3.7", Exit(0, ": pass: all 8 ranks ok")),
    (
        "bootsim smoke --local 8 --workload nvshmem-init --in-process",
        Exit(0, "--in-process: protocol nvshmem variant nvshmem-3.7 workload nvshmem-init: pass"),
    ),
    (
        "bootsim sweep --variant nccl-2.19,nccl-2.21 --workload nccl-init --ranks 16 --set collnet=on --seeds 20",
        Exit(1, "nccl-2.21    runs=20 pass=20 benign=0 corruption=0 error=0 hang=0"),
    ),
    (
        "bootsim explore --pairs --variant nccl-2.19,nccl-2.21 --ranks 2",
        Exit(1, "barrier>intra-allgather n=2 hang: bootsim replay 'engine=fast protocol=nccl variant=nccl-2.21"),
    ),
    (
        "bootsim smoke --local 4 --in-process --variant nccl-2.19 --workload nccl-init",
        Exit(0, "--in-process: protocol nccl variant nccl-2.19 workload nccl-init: pass"),
    ),
    (
        "bootsim explore 'variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3'",
        Exit(1, "fast engine: corruption (the same verdict)"),
    ),
    (
        "bootsim run 'variant=nvshmem-3.4 workload=deepep ranks=2 adversary=fifo seed=0 accept=0:1.0,1.1,1.2/1:0.0,0.2,0.1'",
        Exit(1, "verdict: corruption"),
    ),
    ("bootsim explore 'variant=seq workload=deepep ranks=4'", Exit(0, "no violation in any schedule (proved")),
    (
        "bootsim explore 'variant=seq workload=deepep ranks=4' --no-reduction",
        Exit(0, "what enumerating every schedule would run"),
    ),
    (
        "bootsim explore 'variant=pr97 workload=qp-create k=2 ranks=2' --faults drain-timeout",
        Exit(1, "fast engine: corruption (the same verdict)"),
    ),
    (
        "bootsim explore --pairs --variant nvshmem-3.4,nvshmem-3.7,disjoint --ranks 2..3",
        Exit(1, "alltoall>barrier"),
    ),
    (
        "bootsim explore --pairs --variant nvshmem-3.4 --ranks 2..8 --max-states 50000",
        NotHere("about a minute of CPU on a release build; the map at --ranks 2..3 runs above, and sim's explore tests cover bounded cells and their walks"),
    ),
    (
        "srun -N2 --ntasks-per-node=8 bootsim smoke --session node001:29500 --workload deepep --variant nvshmem-3.7 --iterations 100",
        NotHere(CLUSTER),
    ),
    (
        "mpirun -np 16 --map-by ppr:8:node bootsim smoke --session node001:29500 --workload deepep --variant pr97 --iterations 100",
        NotHere(CLUSTER),
    ),
    ("srun -N2 --ntasks-per-node=8 bootsim smoke --uid-file /shared/$SLURM_JOB_ID.uid --workload deepep", NotHere(CLUSTER)),
    (
        "srun -N2 --ntasks-per-node=8 bootsim smoke --plugin 3.7.1 --session node001:29500 --workload qp-create --iterations 100",
        NotHere("needs a cluster launcher; tests/real_nvshmem.rs runs the same with SLURM_PROCID on one host"),
    ),
    (
        "srun -N2 --ntasks-per-node=1 bootsim smoke --session node001:29500 --rdma --device mlx5_0 --qps-per-peer 4 --iterations 20",
        NotHere("needs ConnectX NICs; tests/rdma_cli.rs checks the no-device path"),
    ),
    ("bootsim probe accept-order --listen 0.0.0.0:7777 -k 1000", ProbeListen),
    ("bootsim probe accept-order --connect node002:7777 -k 1000", Exit(0, "sent 1000 connections")),
    ("bootsim probe accept-order --connect node002:7777 -k 1000 --drain", Exit(0, "sent 1000 connections")),
    ("bootsim probe accept-order --listen 0.0.0.0:7000 -k 300", ProbeListen),
    ("bootsim probe accept-order --connect 10.1.2.3:7000 -k 300", Exit(0, "sent 300 connections")),
    ("bootsim probe accept-order --connect 10.1.2.3:7000 -k 300 --drain", Exit(0, "sent 300 connections")),
    ("bootsim probe accept-order --connect 10.1.2.3:7000 -k 300 --drain 5000", Exit(0, "sent 300 connections")),
    (
        "bootsim smoke --local 2 --plugin 3.4.5 --wire 'release-on-next=500ms,select=pair:1>2:2'",
        Wire(1, "corruption 1, error 0, hang 0: verdict corruption"),
    ),
    (
        "bootsim smoke --local 4 --plugin 3.8.0 --plugin-ranks 0,2 --workload nvshmem-init",
        Exit(0, "pass 1, benign 0, corruption 0, error 0, hang 0: verdict pass"),
    ),
    (
        "bootsim smoke --local 2 --plugin ./my-build/nvshmem_bootstrap_uid.so.3",
        Exit(1, "--accept 'release-on-next=500ms,select=pair:1>2:2': workload deepep x1: pass 0, benign 0, corruption 0, error 1, hang 0: verdict error"),
    ),
    ("bootsim conformance --plugin 3.7.1", Wire(0, "put the same bytes on the wire")),
    ("bootsim check --plugin 3.7.1", Exit(1, "the first cached version that is not: NVSHMEM 3.8.0")),
    ("bootsim check --plugin ./my-build/nvshmem_bootstrap_uid.so.3", Exit(1, "the first cached version that is not: NVSHMEM 3.8.0")),
    ("bootsim smoke --local 2 --plugin 3.4.5", Exit(1, "corruption 1, error 0, hang 0: verdict corruption")),
    (
        "bootsim shuffle --policy 'release-on-next=500ms,select=nth:2' -- python3 scripts/accept-order-server.py 6",
        Exit(0, "0 1 3 2 4 5"),
    ),
    (
        "bootsim smoke --local 2 --plugin 3.8.0 --plugin-ranks 0 --workload qp-create --tag-counter 2147483646",
        Exit(1, "alltoall #2: UID bootstrap message tag space exhausted (the next tag would be 0x80000000, past 2^31-1)"),
    ),
    (
        "bootsim smoke --local 2 --workload deepep --variant nvshmem-3.4 --wire 'release-on-next=500ms,select=pair:1>2:2'",
        Wire(1, "FAIL: verdict corruption"),
    ),
    (
        "bootsim smoke --local 2 --workload deepep --variant pr97 --wire 'hold=2500ms,select=pair:1>2:2'",
        Wire(0, "DRAIN GAVE UP after"),
    ),
    (
        "bootsim smoke --local 2 --workload deepep --variant pr97 --drain-ms 200 --wire 'hold=600ms,select=pair:1>2:2'",
        Wire(0, "DRAIN GAVE UP after 2"),
    ),
    (
        r#"bootsim sweep --variant nvshmem-3.4,nvshmem-3.7,pr97,seq --workload deepep --ranks 2 --adversary rss --seeds 1000000 --jobs "$SLURM_CPUS_PER_TASK" --shard "$SLURM_ARRAY_TASK_ID/64" --json > "out.$SLURM_ARRAY_TASK_ID.jsonl""#,
        NotHere("a Slurm array task (10^6 seeds); the shard-and-merge path is the README example above"),
    ),
    ("bootsim merge out.*.jsonl", NotHere("the Slurm array's merge step; the README's shard example merges")),
    (
        "bootsim sweep --variant nvshmem-3.4,nvshmem-3.7,pr97,seq --workload deepep --ranks 2",
        NotHere("a Kubernetes Job manifest; the shard-and-merge path is the README example above"),
    ),
];

/// Every command in the code blocks of README.md, ARCHITECTURE.md, BENCHMARKS.md and docs/*.md
/// (continuations joined, trailing comments stripped).
fn documented() -> Vec<(String, String)> {
    let mut files: Vec<PathBuf> =
        ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md"].iter().map(|f| PathBuf::from(ROOT).join(f)).collect();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let (mut in_block, mut pending) = (false, String::new());
        for raw in text.lines() {
            if raw.starts_with("```") {
                in_block = !in_block;
                continue;
            }
            if !in_block {
                continue;
            }
            let mut line = if pending.is_empty() { raw.to_string() } else { format!("{pending} {}", raw.trim()) };
            pending.clear();
            if let Some(head) = line.trim_end().strip_suffix('\\') {
                pending = head.trim_end().to_string();
                continue;
            }
            if let Some(i) = line.find("  #").or_else(|| line.find("\t#")) {
                line.truncate(i);
            }
            let cmd = line.trim().to_string();
            let words: Vec<&str> = cmd.split_whitespace().collect();
            let is_cmd = match words.as_slice() {
                ["bootsim", sub, ..] => SUBCOMMANDS.contains(sub),
                [first, ..] => {
                    ["srun", "mpirun", "make"].contains(first)
                        || first.starts_with("PROPTEST_CASES=")
                        || first.starts_with("scripts/")
                }
                [] => false,
            };
            if is_cmd {
                out.push((name.clone(), cmd));
            }
        }
    }
    out
}

/// Whether the wire examples can run here (under CI they must: see `bootsim_adapters::skip`).
fn wire_here() -> bool {
    bootsim_adapters::skip::wire_can_run()
}

/// A fresh working folder with `seeds/` and a user's own plugin build in `my-build/`, removed
/// when dropped (also when the test fails).
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix("bootsim-docs-").tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("seeds")).unwrap();
    std::fs::create_dir_all(dir.path().join("my-build")).unwrap();
    dir
}

fn shell(dir: &Path, cmd: &str) -> Command {
    let bin = Path::new(env!("CARGO_BIN_EXE_bootsim")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut c = Command::new("bash");
    c.args(["-c", cmd]).current_dir(dir).env("PATH", path);
    c
}

/// Names a single machine cannot resolve to itself: the docs' receiving host is this one.
fn here(cmd: &str) -> String {
    cmd.replace("node002:", "localhost:").replace("10.1.2.3:", "127.0.0.1:")
}

#[test]
fn every_documented_command_does_what_the_text_says() {
    common::interposer();
    let docs = documented();
    assert!(docs.len() >= 30, "found only {} commands: {docs:?}", docs.len());
    let mut missing = Vec::new();
    for (file, cmd) in &docs {
        if !EXPECTED.iter().any(|(c, _)| c == cmd) {
            missing.push(format!("{file}: {cmd}"));
        }
    }
    assert!(missing.is_empty(), "documented commands with no expectation here:\n{}", missing.join("\n"));
    for (cmd, expect) in EXPECTED.iter() {
        assert!(docs.iter().any(|(_, c)| c == cmd), "an expectation for a command the docs no longer show: {cmd}");
        let (code, want) = match expect {
            NotHere(why) => {
                eprintln!("not run here: {cmd}: {why}");
                continue;
            }
            ProbeListen => continue,
            Wire(_, _) if !wire_here() => {
                eprintln!("not run (the skip above): {cmd}");
                continue;
            }
            Exit(code, want) | Wire(code, want) => (*code, *want),
        };
        let scratch = workdir();
        let dir = scratch.path();
        if cmd.contains("scripts/accept-order-server.py") {
            std::fs::create_dir_all(dir.join("scripts")).unwrap();
            std::fs::copy(
                Path::new(ROOT).join("scripts/accept-order-server.py"),
                dir.join("scripts/accept-order-server.py"),
            )
            .unwrap();
        }
        if cmd.contains("./my-build/") {
            let o = shell(dir, "bash $0/scripts/fetch-nvshmem.sh 3.7.1").arg(ROOT).output().unwrap();
            let cached = String::from_utf8_lossy(&o.stdout).trim().to_string();
            std::fs::copy(&cached, dir.join("my-build/nvshmem_bootstrap_uid.so.3")).unwrap();
        }
        // A sending probe needs its documented receiver running first.
        let listener = if cmd.contains("probe accept-order --connect") {
            let port = cmd.split(':').nth(1).and_then(|p| p.split_whitespace().next()).unwrap();
            let k = cmd.split("-k ").nth(1).and_then(|p| p.split_whitespace().next()).unwrap();
            let listen = EXPECTED
                .iter()
                .find(|(c, e)| matches!(e, ProbeListen) && c.contains(&format!(":{port} -k {k}")))
                .map(|(c, _)| *c)
                .unwrap_or_else(|| panic!("no documented receiver for {cmd}"));
            // No wait for it to listen: the sender retries a refused connect for
            // probe::READY_WAIT (5 s), as a user starting the two ends by hand needs.
            let child = shell(dir, listen).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
            Some(child)
        } else {
            None
        };
        let o = shell(dir, &here(cmd)).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        if let Some(l) = listener {
            let heard = l.wait_with_output().unwrap();
            let heard_text = String::from_utf8_lossy(&heard.stdout);
            assert!(heard.status.success() && heard_text.contains("accepted "), "receiver of {cmd}: {heard_text}");
        }
        assert_eq!(o.status.code(), Some(code), "{cmd}\n{text}");
        assert!(text.contains(want), "{cmd}: expected {want:?} in:\n{text}");
    }
}

/// The ```rust blocks of `file` (relative to the repository), each as written.
fn rust_blocks(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(ROOT).join(file)).unwrap();
    let (mut out, mut block): (Vec<String>, Option<String>) = (Vec::new(), None);
    for line in text.lines() {
        match (&mut block, line.starts_with("```")) {
            (None, true) if line.trim_end() == "```rust" => block = Some(String::new()),
            (Some(b), true) => {
                out.push(std::mem::take(b));
                block = None;
            }
            (Some(b), false) => {
                b.push_str(line);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    out
}

/// The docs' Rust examples run as doctests of the worked example's crate: each is a block of
/// examples/rendezvous/README.md, which that crate includes as doctests (`cargo test -p
/// bootsim-example-rendezvous --doc`), so none can drift from what the library does.
#[test]
fn every_rust_example_in_the_docs_is_a_doctest_of_the_worked_example() {
    let doctested = rust_blocks(Path::new("examples/rendezvous/README.md"));
    let lib = std::fs::read_to_string(Path::new(ROOT).join("examples/rendezvous/src/lib.rs")).unwrap();
    assert!(lib.contains("#[doc = include_str!(\"../README.md\")]"), "the example's README is its doctests");
    let mut files: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md"].iter().map(PathBuf::from).collect();
    for e in std::fs::read_dir(Path::new(ROOT).join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|e| e == "md") {
            files.push(p.strip_prefix(ROOT).unwrap().to_path_buf());
        }
    }
    let mut shown = 0;
    for f in &files {
        for block in rust_blocks(f) {
            shown += 1;
            assert!(doctested.contains(&block), "{}: a Rust example that is no doctest:\n{block}", f.display());
        }
    }
    assert!(shown >= 2, "README's \"Test your own protocol\" shows explore and shrink");
}
