//! Skips do not pass CI (`bootsim_adapters::skip`): this binary runs one of its own wire tests
//! again as a child without CAP_NET_ADMIN (`setpriv --bounding-set -net_admin`, util-linux) and
//! checks that under `CI=true` it fails naming what is missing, and that without CI it passes as
//! a counted skip.

use std::process::{Command, Output};

use bootsim_adapters::skip;
use bootsim_adapters::wire::{Policy, Wire};

/// A real wire test: two hosts in their own namespaces come up and shut down cleanly.
#[test]
fn two_wire_hosts_start_and_stop() {
    if !skip::wire_can_run() {
        return;
    }
    let wire = Wire::start(2, Policy::NONE).expect("a two-host wire");
    assert_eq!(wire.hosts(), 2);
    wire.shutdown().expect("the wire shuts down");
}

/// This binary's `two_wire_hosts_start_and_stop` as a child lacking CAP_NET_ADMIN, with `env`.
fn without_net_admin(env: &[(&str, &str)]) -> Output {
    let me = std::env::current_exe().unwrap();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if root {
        let have = Command::new("setpriv").arg("--version").output().is_ok_and(|o| o.status.success());
        assert!(have || !skip::can_run("setpriv", Err("setpriv (util-linux) is not installed".into())));
        let mut c = Command::new("setpriv");
        c.args(["--bounding-set", "-net_admin", "--inh-caps", "-net_admin"]).arg(me);
        c
    } else {
        // Not root: the child lacks CAP_NET_ADMIN anyway.
        Command::new(me)
    };
    cmd.args(["--exact", "two_wire_hosts_start_and_stop", "--nocapture", "--test-threads", "1"]);
    cmd.env_remove("CI").env_remove("BOOTSIM_CI_LACKS").env_remove(skip::SKIP_LOG);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn a_wire_test_without_cap_net_admin_fails_under_ci_and_is_a_counted_skip_elsewhere() {
    let o = without_net_admin(&[("CI", "true")]);
    let out = text(&o);
    assert!(!o.status.success(), "under CI a test that cannot run must fail: {out}");
    assert!(
        out.contains("two_wire_hosts_start_and_stop cannot run its real part under CI: needs wire"),
        "the failure names the test and the need: {out}"
    );
    assert!(out.contains("CAP_NET_ADMIN"), "and what is missing: {out}");

    // CI declaring that it lacks something else does not excuse this need.
    let o = without_net_admin(&[("CI", "1"), ("BOOTSIM_CI_LACKS", "rdma-device,chromium")]);
    assert!(!o.status.success(), "{}", text(&o));

    let log = std::env::temp_dir().join(format!("bootsim-skips-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    for ci in ["false", "0", ""] {
        let o = without_net_admin(&[("CI", ci), (skip::SKIP_LOG, log.to_str().unwrap())]);
        let out = text(&o);
        assert!(o.status.success(), "CI={ci:?} is not CI: the test is skipped: {out}");
        assert!(out.contains("SKIPPED two_wire_hosts_start_and_stop: needs wire: "), "{out}");
    }
    let counted = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert_eq!(counted.lines().count(), 3, "each skip is counted once: {counted}");
    assert!(counted.lines().all(|l| l.starts_with("SKIPPED two_wire_hosts_start_and_stop: needs wire: ")), "{counted}");

    // Declared by CI as lacking, the skip is allowed (and still counted).
    let o = without_net_admin(&[("CI", "true"), ("BOOTSIM_CI_LACKS", "chromium, wire")]);
    assert!(o.status.success(), "{}", text(&o));
}
