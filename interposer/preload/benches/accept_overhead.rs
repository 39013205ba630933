//! The interposer's cost per accept(): the same loop of accepts timed in a child process
//! without the library and under it with several policies (`make bench-interposer`, part of
//! `make bench`). Target: under 10 µs per accept.
//!
//! Each round connects BATCH clients to a listener, then times BATCH accept() calls; the
//! clients stay open until the round ends, so every accept finds its connection queued (under
//! the library the first accept takes all of them into its queue, so intake is included).

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const BATCH: usize = 100;
const ROUNDS: usize = 40;

/// In the child: nanoseconds per accept, median over the rounds.
fn measure() -> f64 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let mut per = Vec::new();
    for _ in 0..ROUNDS {
        let clients: Vec<TcpStream> = (0..BATCH).map(|_| TcpStream::connect(addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(2));
        let t0 = Instant::now();
        let accepted: Vec<_> = (0..BATCH).map(|_| l.accept().unwrap()).collect();
        per.push(t0.elapsed().as_nanos() as f64 / BATCH as f64);
        drop(accepted);
        drop(clients);
    }
    per.sort_by(f64::total_cmp);
    per[per.len() / 2]
}

fn main() {
    if std::env::var_os("BOOTSIM_BENCH_CHILD").is_some() {
        println!("{}", measure());
        return;
    }
    let exe = std::env::current_exe().unwrap();
    // target/release/deps/accept_overhead-HASH -> target/release/libbootsim_preload.so
    let lib = exe.parent().and_then(Path::parent).unwrap().join("libbootsim_preload.so");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let st = Command::new(cargo).args(["build", "-q", "--release", "-p", "bootsim-preload"]).status().unwrap();
    assert!(st.success() && lib.exists(), "building {}", lib.display());
    let run = |policy: Option<&str>| -> f64 {
        let mut c = Command::new(&exe);
        c.env("BOOTSIM_BENCH_CHILD", "1").env_remove("LD_PRELOAD");
        if let Some(p) = policy {
            c.env("LD_PRELOAD", &lib).env("BOOTSIM_ACCEPT_POLICY", p).env("BOOTSIM_ACCEPT_LOG", "/dev/null");
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
    };
    let plain = run(None);
    println!("accept() median over {ROUNDS} rounds of {BATCH} queued connections");
    println!("{:<40} {:>12} {:>14}", "policy", "ns/accept", "overhead µs");
    println!("{:<40} {:>12.0} {:>14}", "(no interposer)", plain, "-");
    let mut worst: f64 = 0.0;
    for p in ["none", "release-on-next=500ms,select=nth:1", "permute=7:4:50ms", "hold=5ms,select=msg:0:1,peek=0ms"] {
        let t = run(Some(p));
        let over = (t - plain) / 1000.0;
        worst = worst.max(over);
        println!("{:<40} {:>12.0} {:>14.2}", p, t, over);
    }
    println!(
        "worst overhead per accept: {worst:.2} µs (target: under 10 µs){}",
        if worst < 10.0 { "" } else { ": OVER TARGET" }
    );
}
