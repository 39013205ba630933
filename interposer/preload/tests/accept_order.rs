//! The library in a real process: a small Python server whose output is the order in which it
//! accepted its connections, run under LD_PRELOAD with several policies.

use std::path::PathBuf;
use std::process::Command;

use bootsim_interposer::{LogSummary, LOG_ENV, POLICY_ENV};

/// The server whose output is its accept order (also the docs' `bootsim shuffle` example).
const SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/accept-order-server.py");

/// The library, built now (cargo builds a cdylib-only crate's library for its tests only when
/// asked; a no-op when it is fresh).
fn library() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let st = Command::new(cargo).args(["build", "-q", "-p", "bootsim-preload"]).status().unwrap();
            assert!(st.success(), "building bootsim-preload");
            // target/debug/deps/accept_order-HASH -> target/debug/libbootsim_preload.so
            let exe = std::env::current_exe().unwrap();
            exe.parent().unwrap().parent().unwrap().join("libbootsim_preload.so")
        })
        .clone()
}

fn python() -> Option<&'static str> {
    match Command::new("python3").arg("-c").arg("pass").status() {
        Ok(s) if s.success() => Some("python3"),
        // Fails under CI, else a counted SKIPPED line (the one skip rule).
        _ => bootsim_skip::can_run("python3", Err("python3 is missing: the accept-order server cannot run".into()))
            .then_some("python3"),
    }
}

/// Runs the server under `policy`; its output and the log's summary.
fn run(policy: &str, n: u32, nonblocking: bool) -> (String, LogSummary) {
    run_with(policy, n, if nonblocking { &["--nonblocking"] } else { &[] })
}

fn run_with(policy: &str, n: u32, flags: &[&str]) -> (String, LogSummary) {
    let nonblocking = flags.join("");
    let lib = library();
    assert!(lib.exists(), "{} not built", lib.display());
    let dir =
        std::env::temp_dir().join(format!("bootsim-preload-test-{}-{policy}-{n}-{nonblocking}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("log");
    let out = Command::new(python().unwrap())
        .args([SERVER, &n.to_string()])
        .args(flags)
        .env("LD_PRELOAD", &lib)
        .env(POLICY_ENV, policy)
        .env(LOG_ENV, &log)
        .output()
        .unwrap();
    assert!(out.status.success(), "{policy}: {}", String::from_utf8_lossy(&out.stderr));
    let summary = LogSummary::of(&std::fs::read_to_string(&log).unwrap_or_default());
    let _ = std::fs::remove_dir_all(&dir);
    (String::from_utf8(out.stdout).unwrap().trim().to_string(), summary)
}

#[test]
fn the_policy_decides_the_accept_order_and_the_log_accounts_for_every_connection() {
    if python().is_none() {
        return;
    }
    let (order, log) = run("none", 6, false);
    assert_eq!(order, "0 1 2 3 4 5");
    assert_eq!((log.arrived, log.delivered, log.held), (6, 6, 0));
    assert!(log.complete(), "{}", log.headline());

    // The wire's release-on-next: the third connection waits for the fourth.
    let (order, log) = run("release-on-next=500ms,select=nth:2", 6, false);
    assert_eq!(order, "0 1 3 2 4 5");
    assert_eq!((log.arrived, log.delivered, log.held), (6, 6, 1));

    // A seeded permutation: the same seed gives the same order, every connection once.
    let (a, log) = run("permute=3:6", 6, false);
    assert_eq!(a, run("permute=3:6", 6, false).0, "deterministic");
    let mut sorted: Vec<u32> = a.split(' ').map(|x| x.parse().unwrap()).collect();
    sorted.sort();
    assert_eq!(sorted, (0..6).collect::<Vec<_>>());
    assert!(log.complete() && log.delivered == 6, "{}", log.headline());
    let orders: std::collections::BTreeSet<String> =
        (0..4).map(|s| run(&format!("permute={s}:6"), 6, false).0).collect();
    assert!(orders.len() > 1, "seeds give different orders: {orders:?}");
}

#[test]
fn a_non_blocking_listener_gets_eagain_while_held_and_poll_or_epoll_wakes_at_the_release() {
    if python().is_none() {
        return;
    }
    for flags in [&["--nonblocking"][..], &["--nonblocking", "--epoll"]] {
        let t0 = std::time::Instant::now();
        let (order, log) = run_with("hold=300ms,select=nth:0", 2, flags);
        // Connection 1 first; then nothing acceptable until the hold ends: EAGAIN, wait, 0.
        assert_eq!(order, "1 EAGAIN 0", "{flags:?}");
        assert!(log.complete() && log.delivered == 2, "{}", log.headline());
        // The server waits 20 s at most: woken by the release, not by its own timeout.
        assert!(t0.elapsed() < std::time::Duration::from_secs(15), "{flags:?}: woken at the hold's end");
    }
}

#[test]
fn a_program_that_exits_without_accepting_has_its_connections_accounted_for() {
    if python().is_none() {
        return;
    }
    let lib = library();
    let log = std::env::temp_dir().join(format!("bootsim-preload-exit-{}", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let script = r#"
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
cs = [socket.create_connection(s.getsockname()) for _ in range(3)]
s.setblocking(False)
a, _ = s.accept()   # the only one passed; the two held ones are never accepted
"#;
    let st = Command::new("python3")
        .args(["-c", script])
        .env("LD_PRELOAD", &lib)
        .env(POLICY_ENV, "hold=10000ms,select=nth:1+2")
        .env(LOG_ENV, &log)
        .status()
        .unwrap();
    assert!(st.success());
    let s = LogSummary::of(&std::fs::read_to_string(&log).unwrap());
    let _ = std::fs::remove_file(&log);
    assert_eq!((s.arrived, s.delivered, s.unaccepted), (3, 1, 2), "{}", s.headline());
    assert!(s.complete());
}

#[test]
fn a_bad_policy_stops_the_program_with_the_reason() {
    if python().is_none() {
        return;
    }
    let out = Command::new("python3")
        .args(["-c", "print('ran')"])
        .env("LD_PRELOAD", library())
        .env(POLICY_ENV, "hold=5ms,select=evn")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad policy part `evn`"));
    assert!(out.stdout.is_empty());
}

/// What accept4() gives back, as a program sees it: flags of the new fd, the peer address in
/// a full and a too-short buffer, errno of a non-blocking listener with nothing queued and of
/// a bad fd. Called through ctypes, i.e. through the dynamic linker, as C code would.
const SEMANTICS: &str = r#"
import ctypes, ctypes.util, fcntl, os, socket, struct
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8); s.setblocking(False)
out = []
def call(fd, buflen, flags):
    buf = ctypes.create_string_buffer(128); n = ctypes.c_uint32(buflen)
    r = libc.accept4(fd, buf, ctypes.byref(n), flags)
    return r, ctypes.get_errno(), n.value, buf.raw[:buflen]
r, e, n, _ = call(s.fileno(), 16, 0)
out.append("empty: %d %s" % (r, os.strerror(e)))
r, e, n, _ = call(999, 16, 0)
out.append("badfd: %d %s" % (r, os.strerror(e)))
c1 = socket.create_connection(s.getsockname()); c2 = socket.create_connection(s.getsockname())
import select; select.select([s], [], [], 2)
r, e, n, raw = call(s.fileno(), 16, socket.SOCK_NONBLOCK)
fl, fd = fcntl.fcntl(r, fcntl.F_GETFL), fcntl.fcntl(r, fcntl.F_GETFD)
port = struct.unpack("!H", raw[2:4])[0]
out.append("nonblock: %s cloexec: %s len: %d peer-ok: %s" % (bool(fl & os.O_NONBLOCK), bool(fd & fcntl.FD_CLOEXEC), n, port == c1.getsockname()[1]))
r, e, n, raw = call(s.fileno(), 4, socket.SOCK_CLOEXEC)
fd = fcntl.fcntl(r, fcntl.F_GETFD); fl = fcntl.fcntl(r, fcntl.F_GETFL)
out.append("nonblock: %s cloexec: %s len: %d bytes: %d" % (bool(fl & os.O_NONBLOCK), bool(fd & fcntl.FD_CLOEXEC), n, len(raw)))
print("\n".join(out))
"#;

#[test]
fn flags_addresses_and_errno_are_as_without_the_library() {
    let Some(py) = python() else { return };
    let run = |preload: bool| {
        let mut c = Command::new(py);
        c.args(["-c", SEMANTICS]).env_remove("LD_PRELOAD");
        if preload {
            c.env("LD_PRELOAD", library()).env(POLICY_ENV, "none");
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let plain = run(false);
    assert!(plain.contains("empty: -1 Resource temporarily unavailable"), "{plain}");
    assert!(plain.contains("nonblock: True cloexec: False len: 16 peer-ok: True"), "{plain}");
    assert!(plain.contains("nonblock: False cloexec: True len: 16 bytes: 4"), "{plain}");
    assert_eq!(run(true), plain);
}

/// Three clients send NVSHMEM's point-to-point header (magic, type 1, framed rank and tag)
/// after a short pause; the server prints each accepted connection's (rank, tag).
const NVSHMEM_PEERS: &str = r#"
import socket, struct, threading, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
def client(rank, tag, pause):
    c = socket.create_connection(s.getsockname())
    time.sleep(pause)
    c.sendall(struct.pack("<QiiiiiI", 0xfeed, 1, 4, rank, 4, tag, 4) + b"data")
    time.sleep(2)
ts = [threading.Thread(target=client, args=a) for a in [(0, 7, 0.05), (1, 7, 0.05), (1, 8, 0.05)]]
for t in ts: t.start(); time.sleep(0.01)
out = []
for _ in range(3):
    a, _ = s.accept(); h = a.recv(28, socket.MSG_WAITALL)
    out.append("%d:%d" % struct.unpack("<QiiiiI", h)[3::2])
print(" ".join(out))
"#;

#[test]
fn the_nvshmem_selector_peeks_at_the_header_within_its_bounded_wait() {
    let Some(py) = python() else { return };
    let log = std::env::temp_dir().join(format!("bootsim-preload-msg-{}", std::process::id()));
    let _ = std::fs::remove_file(&log);
    // Held: the message from rank 1 with tag 7 (its header comes 50 ms after the connect).
    let o = Command::new(py)
        .args(["-c", NVSHMEM_PEERS])
        .env("LD_PRELOAD", library())
        .env(POLICY_ENV, "hold=300ms,select=msg:1:7,peek=1000ms")
        .env(LOG_ENV, &log)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0:7 1:8 1:7");
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    for m in ["msg=0:7", "msg=1:7", "msg=1:8"] {
        assert!(text.contains(m), "the log names each header: {text}");
    }
    let s = LogSummary::of(&text);
    assert_eq!((s.arrived, s.held, s.delivered), (3, 1, 3), "{}", s.headline());
}

#[test]
fn a_header_peek_does_not_hold_up_other_threads() {
    // Two silent clients and a msg selector with a 3 s peek: one thread's accept waits for
    // their headers (bounded), while another thread's connect, which the interposer also
    // hooks, must not wait behind it (it did when the peek ran under the interposer's lock).
    if python().is_none() {
        return;
    }
    let script = r#"
import socket, threading, time
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(16); port = l.getsockname()[1]
silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
l.setblocking(False)
def take():
    try:
        l.accept()
    except BlockingIOError:
        pass
t = threading.Thread(target=take); t.start(); time.sleep(0.2)
t0 = time.monotonic(); c = socket.create_connection(("127.0.0.1", port)); dt = time.monotonic() - t0
t.join(); print(f"{dt:.3f}")
"#;
    let out = Command::new(python().unwrap())
        .args(["-c", script])
        .env("LD_PRELOAD", library())
        .env(POLICY_ENV, "hold=100ms,select=msg:0:1,peek=3000ms")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let took: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    // A loopback connect takes microseconds; behind the peek it took the whole 3 s or more.
    assert!(took < 1.5, "the connect waited {took} s behind another thread's header peek");
}
