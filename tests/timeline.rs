//! `bootsim replay --timeline`: the HTML is self-contained and deterministic, and loaded in
//! headless Chromium (Debian's `chromium`, scripts/install-chromium.sh) its DOM shows the lanes,
//! the mismatch highlight, the stall shading and the expected and received QPN. Without chromium
//! the browser test is skipped with a message, except under CI (env CI set), where it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bootsim_sim::{run_case, timeline::render_html, Case};

const REPORT_CASE: &str = "engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3";

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bootsim-timeline-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn chromium() -> Option<String> {
    let bin = std::env::var("CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let found = Command::new(&bin).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    found.is_ok_and(|s| s.success()).then_some(bin)
}

/// The DOM after load, as `chromium --headless --dump-dom` serialises it.
fn dump_dom(bin: &str, html: &Path, profile: &Path) -> String {
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let start = Instant::now();
    while child.try_wait().expect("chromium status").is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium --dump-dom did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("chromium output");
    assert!(out.status.success(), "chromium failed: {:?}", out.status);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The text content of the element with `id` (up to its closing tag).
fn text_of<'a>(dom: &'a str, id: &str) -> &'a str {
    let at = dom.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no #{id}"));
    let rest = &dom[at..];
    let open = rest.find('>').unwrap() + 1;
    let close = rest[open..].find("</").unwrap() + open;
    &rest[open..close]
}

#[test]
fn replay_writes_a_timeline_that_chromium_shows() {
    let dir = scratch("report");
    let html = dir.join("report.html");
    let o = Command::new(env!("CARGO_BIN_EXE_bootsim"))
        .args(["replay", REPORT_CASE, "--timeline"])
        .arg(&html)
        .output()
        .expect("bootsim runs");
    assert_eq!(o.status.code(), Some(1));
    let written = std::fs::read_to_string(&html).expect("timeline written");
    assert!(!written.contains("<script") && !written.contains("<link") && !written.contains("src="));
    assert!(!written.replace("http://www.w3.org/2000/svg", "").contains("http"), "no external assets");

    let Some(bin) = chromium() else {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(!ci, "chromium is required under CI: run scripts/install-chromium.sh (make test does)");
        eprintln!("SKIPPED: chromium not found; run scripts/install-chromium.sh to check the timeline in a browser");
        return;
    };
    let dom = dump_dom(&bin, &html, &dir.join("profile"));
    for needle in [
        "<svg",
        r#"id="lane-root""#,
        r#"id="lane-rank0""#,
        r#"id="lane-rank1""#,
        r#"class="conn mismatch taken" id="conn-8" data-conn="8""#,
        r#"class="conn mismatch overtaken" id="conn-7" data-conn="7""#,
        r#"class="stall decisive""#,
        r#"class="stall""#,
        r#"class="accept""#,
        r#"class="enqueue""#,
        r#"class="read mismatch taken" data-conn="8""#,
        r#"id="mismatch""#,
        r#"id="explain""#,
    ] {
        assert!(dom.contains(needle), "the DOM lacks {needle}");
    }
    assert!(text_of(&dom, "expected").contains("QPN 0x404500"), "{}", text_of(&dom, "expected"));
    let received = text_of(&dom, "received");
    assert!(received.contains("QPN 0x820001ba") && received.contains("zero GID"), "{received}");
    assert!(text_of(&dom, "verdict").contains("corruption"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_timeline_is_a_pure_function_of_the_case() {
    let case = Case::parse(REPORT_CASE).unwrap();
    let a = render_html(&run_case(&case, true));
    let b = render_html(&run_case(&case, false));
    assert_eq!(a, b);
    assert!(a.contains(r#"class="stall decisive""#));
}

#[test]
fn a_passing_case_renders_without_a_highlight() {
    let html = render_html(&run_case(&Case::parse("engine=fast variant=seq seed=3").unwrap(), true));
    assert!(html.contains(r#"id="lane-rank0""#) && html.contains(r#"id="lane-rank1""#));
    assert!(html.contains(r#"class="conn""#));
    assert!(!html.contains(r#"class="conn mismatch"#) && !html.contains(r#"id="mismatch""#));
    assert!(!html.contains(r#"id="explain""#));
}

#[test]
fn large_worlds_show_only_the_lanes_involved() {
    let case =
        Case::parse("engine=fast variant=nvshmem-3.4 workload=deepep ranks=16 adversary=overflow seed=5").unwrap();
    let html = render_html(&run_case(&case, false));
    assert!(html.contains(r#"id="filtered""#));
    assert!(html.contains(r#"id="lane-rank7""#) && !html.contains(r#"id="lane-rank8""#));
    let one = render_html(&run_case(&Case::parse("engine=fast variant=seq ranks=1 seed=1").unwrap(), true));
    assert!(one.contains(r#"id="lane-rank0""#));
}
