//! `bootsim replay --timeline`: the HTML is self-contained and deterministic, and loaded in
//! headless Chromium (Debian's `chromium`, scripts/install-chromium.sh) its DOM shows the lanes,
//! the mismatch highlight, the stall shading and the expected and received QPN. In a 1400x1000
//! window, measured by tests/timeline_check.js on the rendered page: no two texts overlap, the
//! first violation is on the first screen, the page is no wider than the window, every gap drawn
//! shorter than to scale is marked, and the init checkbox hides and shows the init phase.
//! Without chromium the browser tests are skipped and counted, except under CI (env CI set),
//! where they fail (`bootsim_adapters::skip`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bootsim_sim::{run_case, timeline::render_html, timeline::scale::PX_PER_MS, timeline::WINDOW, Case};
use serde_json::Value;

const REPORT_CASE: &str = "engine=fast variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3";
/// A long run: 24 back-to-back alltoalls on 4 ranks (5 lanes), failing in the ninth.
const LARGE_CASE: &str = "engine=fast variant=nvshmem-3.7 workload=qp-create k=24 ranks=4 adversary=rss seed=1";
/// Nine lanes (the most shown), passing: the widest picture.
const WIDE_CASE: &str = "engine=fast variant=nvshmem-3.7 workload=qp-create k=6 ranks=8 adversary=rss seed=1";

/// A scratch folder, removed when dropped (also when the test fails).
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("bootsim-timeline-{name}-")).tempdir().expect("temp dir")
}

fn chromium() -> Option<String> {
    let bin = std::env::var("CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let found = Command::new(&bin).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    let found = match found {
        Ok(s) if s.success() => Ok(()),
        _ => Err(format!("`{bin} --version` did not run: run scripts/install-chromium.sh (make test does)")),
    };
    bootsim_adapters::skip::can_run("chromium", found).then_some(bin)
}

/// The DOM after load, as `chromium --headless --dump-dom` serialises it (into a file: a DOM
/// larger than a pipe's buffer would block chromium while this waits).
fn dump_dom(bin: &str, html: &Path, profile: &Path) -> String {
    let out_path = profile.with_extension("dom");
    let out_file = std::fs::File::create(&out_path).expect("dom file");
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
        .arg(format!("--window-size={},{}", WINDOW.0, WINDOW.1))
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .stdout(out_file)
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("chromium status") {
            break status;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium --dump-dom did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "chromium failed: {status:?}");
    std::fs::read_to_string(&out_path).expect("dom written")
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
    let scratch = scratch("report");
    let dir = scratch.path();
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

    let Some(bin) = chromium() else { return };
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
}

#[test]
fn the_timeline_is_a_pure_function_of_the_case() {
    for case in [REPORT_CASE, LARGE_CASE] {
        let case = Case::parse(case).unwrap();
        let a = render_html(&run_case(&case, true)).unwrap();
        let b = render_html(&run_case(&case, false)).unwrap();
        assert!(a == b, "{case}: two renderings differ");
        assert!(a.contains(r#"class="stall decisive""#));
    }
}

#[test]
fn a_passing_case_renders_without_a_highlight() {
    let html = render_html(&run_case(&Case::parse("engine=fast variant=seq seed=3").unwrap(), true)).unwrap();
    assert!(html.contains(r#"id="lane-rank0""#) && html.contains(r#"id="lane-rank1""#));
    assert!(html.contains(r#"class="conn""#));
    assert!(!html.contains(r#"class="conn mismatch"#) && !html.contains(r#"id="mismatch""#));
    assert!(!html.contains(r#"id="explain""#));
}

#[test]
fn large_worlds_show_only_the_lanes_involved() {
    let case =
        Case::parse("engine=fast variant=nvshmem-3.4 workload=deepep ranks=16 adversary=overflow seed=5").unwrap();
    let html = render_html(&run_case(&case, false)).unwrap();
    assert!(html.contains(r#"id="filtered""#));
    assert!(html.contains(r#"id="lane-rank7""#) && !html.contains(r#"id="lane-rank8""#));
    let one = render_html(&run_case(&Case::parse("engine=fast variant=seq ranks=1 seed=1").unwrap(), true)).unwrap();
    assert!(one.contains(r#"id="lane-rank0""#));
}

/// The findings of tests/timeline_check.js on `html` loaded in a [`WINDOW`]-sized Chromium.
fn measure(bin: &str, name: &str, html: &str) -> Value {
    let scratch = scratch(name);
    let dir = scratch.path();
    let path = dir.join("page.html");
    let script = format!("<script>const PX_PER_MS = {PX_PER_MS};\n{}</script>", include_str!("timeline_check.js"));
    std::fs::write(&path, html.replace("</body>", &format!("{script}</body>"))).unwrap();
    let dom = dump_dom(bin, &path, &dir.join("profile"));
    let json =
        text_of(&dom, "check").replace("&quot;", "\"").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// What must hold in every state of the page: no overlapping texts, no sideways scrolling, no
/// unmarked time cut.
fn check_state(case: &str, what: &str, s: &Value) {
    let labels = &s["labels"];
    assert!(labels["texts"].as_u64().unwrap() > 10, "{case} {what}: too few texts measured: {s}");
    assert_eq!(labels["count"], 0, "{case} {what}: overlapping texts: {}", labels["overlaps"]);
    let (doc, view) = (s["doc_width"].as_f64().unwrap(), s["view_width"].as_f64().unwrap());
    assert!(doc <= view, "{case} {what}: the page is {doc} px wide in a {view} px window");
    assert_eq!(s["axis"]["unmarked"], serde_json::json!([]), "{case} {what}: cuts not marked: {s}");
}

fn check_page(case: &str) -> Value {
    let html = render_html(&run_case(&Case::parse(case).unwrap(), true)).unwrap();
    let Some(bin) = chromium() else { return Value::Null };
    let m = measure(&bin, &case.replace([' ', '='], "_"), &html);
    assert_eq!(m["inner"][0], WINDOW.0, "{case}: window {}", m["inner"]);
    for what in ["initial", "toggled", "again"] {
        if !m[what].is_null() {
            check_state(case, what, &m[what]);
        }
    }
    m
}

/// The first violation is inside the first screen, whole.
fn assert_violation_on_first_screen(case: &str, m: &Value) {
    let v = &m["initial"]["violation"];
    assert!(!v.is_null(), "{case}: no #first-violation");
    let (top, bottom) = (v["top"].as_f64().unwrap(), v["bottom"].as_f64().unwrap());
    let (left, right) = (v["left"].as_f64().unwrap(), v["right"].as_f64().unwrap());
    let height = m["inner"][1].as_f64().unwrap().min(WINDOW.1);
    assert!(top >= 0.0 && bottom <= height && left >= 0.0 && right <= WINDOW.0, "{case}: violation at {v}");
}

/// The init checkbox hides and shows the init phase.
fn assert_init_toggles(case: &str, m: &Value) {
    let (a, b, c) = (&m["initial"]["init_shown"], &m["toggled"]["init_shown"], &m["again"]["init_shown"]);
    let (a, b, c) = (a.as_u64().unwrap(), b.as_u64().unwrap(), c.as_u64().unwrap());
    assert!((a == 0) != (b == 0), "{case}: init elements shown {a}, after the click {b}");
    assert_eq!(a, c, "{case}: a second click restores the first view");
}

#[test]
fn the_report_case_opens_on_its_violation_without_overlaps() {
    let m = check_page(REPORT_CASE);
    if m.is_null() {
        return;
    }
    assert_violation_on_first_screen(REPORT_CASE, &m);
    assert_init_toggles(REPORT_CASE, &m);
    // The run's 30 ms wait at the end is cut, and marked.
    assert!(
        m["initial"]["axis"]["compressed"].as_u64().unwrap() > 0 && m["initial"]["axis"]["cuts"].as_u64().unwrap() > 0
    );
}

#[test]
fn a_long_run_opens_on_its_violation_without_overlaps() {
    let m = check_page(LARGE_CASE);
    if m.is_null() {
        return;
    }
    assert_violation_on_first_screen(LARGE_CASE, &m);
    assert_init_toggles(LARGE_CASE, &m);
}

#[test]
fn nine_lanes_fit_the_window_without_overlaps() {
    let m = check_page(WIDE_CASE);
    if m.is_null() {
        return;
    }
    assert!(m["initial"]["violation"].is_null());
    assert_init_toggles(WIDE_CASE, &m);
}
