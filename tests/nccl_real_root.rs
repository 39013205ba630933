//! NCCL's real root in the loop. `libnccl.so.2` from the `nvidia-nccl-cu12` wheels (fetched by
//! `scripts/fetch-nccl.sh`, never committed) runs `ncclGetUniqueId` without a GPU, which starts
//! NCCL's own bootstrap root thread. Here a child process (this test binary run with `--child`)
//! loads the library, prints the unique ID and keeps the root alive; model ranks check in to it
//! over real loopback sockets, one after another, and after every check-in the connections the
//! real root makes to the ranks' root listeners (which rank, which bytes: preamble and framed
//! successor information) must be exactly those the model's root makes when fed the same
//! check-ins, with nothing more. Each model rank then takes its answer and must go on to dial its
//! ring successor. The model root is given the real unique ID's magic and the same check-ins, so
//! nothing is masked: addresses and magic must agree byte for byte.
//!
//! A deliberately wrong model (the root behaviour of the other family: answers in rank order
//! after everyone, against early answers, and the other `extInfo` layout) must fail.
//!
//! The whole of `nccl-init` against the real root runs the model ranks with the one async
//! driver over tokio sockets (`bootsim_adapters::local_run::run_ranks`), which is why this test
//! is the CLI package's rather than `bootsim-nccl`'s (whose dev-dependencies may not point up).
//!
//! Without the library in the cache the test is a counted skip (bootsim-skip's one rule), and
//! under `CI` it fails (CI runs `make deps`, which fetches it).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bootsim_adapters::local_run::run_ranks;
use bootsim_core::codec::decode_sockaddr;
use bootsim_core::seam::CloseReason;
use bootsim_core::ConnId;
use bootsim_nccl::seam::{Failure, Key};
use bootsim_nccl::{
    Call, CallKind, Effect, Input, Listener, Observation, Output, Planned, Rank, RankConfig, Root, RootConfig, Step,
    Variant,
};
use common::nccl_ranks::every_step_done;

/// Each version in the cache and the variant that models its root.
const CASES: [(&str, Variant); 4] = [
    ("2.19.3", Variant::Nccl219),
    ("2.21.5", Variant::Nccl221),
    ("2.30.7", Variant::Nccl230),
    ("2.32.3", Variant::Nccl230),
];

/// How long the real root may take to make a connection the model expects.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long to watch for a connection the model does not expect, after each check-in.
const QUIET: Duration = Duration::from_millis(60);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        return child(Path::new(&args[2]));
    }
    let mut failures = Vec::new();
    for (version, model) in CASES {
        let lib = cache_dir().join(version).join("libnccl.so.2");
        if !lib.exists() {
            let msg = format!(
                "{version}: {} is missing (run `make deps` or `bash scripts/fetch-nccl.sh {version}`)",
                lib.display()
            );
            // Fails under CI (which runs `make deps`), else a counted SKIPPED line.
            bootsim_adapters::skip::can_run("nccl-wheel", Err(msg));
            continue;
        }
        for n in 2..=8 {
            let started = Instant::now();
            match conformance(&lib, model, n, Mutation::None) {
                Ok(()) => {
                    println!("real_root: NCCL {version} root, {n} ranks: matches {model} ({:?})", started.elapsed())
                }
                Err(e) => failures.push(format!("NCCL {version} root, {n} ranks, model {model}: {e}")),
            }
        }
        // Negative controls: the other family's variant (its check-ins are not what this root
        // reads), and this variant with its root's successor or its timing made wrong.
        let other = if model == Variant::Nccl230 { Variant::Nccl221 } else { Variant::Nccl230 };
        let mut wrong = vec![(other, Mutation::None), (model, Mutation::WrongSuccessor)];
        if model.root_early_replies() {
            wrong.push((model, Mutation::Deferred));
        }
        // Other check-in orders reach the other branches of 2.30's early answers.
        for order in [Order::Descending, Order::EvensThenOdds] {
            for n in [3, 5, 8] {
                match conformance_after(&lib, model, n, Mutation::None, None, order) {
                    Ok(()) => {
                        println!("real_root: NCCL {version} root, {n} ranks checking in {order:?}: matches {model}")
                    }
                    Err(e) => failures.push(format!("NCCL {version} root, {n} ranks {order:?}, model {model}: {e}")),
                }
            }
        }
        // The whole of ncclCommInitRank's bootstrap traffic, model ranks against the real root.
        for n in [2, 4] {
            let started = Instant::now();
            match whole_init(&lib, model, n) {
                Ok(steps) => println!(
                    "real_root: NCCL {version} root, {n} model ranks of {model} ran nccl-init to the end ({steps} steps, {:?})",
                    started.elapsed()
                ),
                Err(e) => failures.push(format!("NCCL {version} root, nccl-init over loopback, {n} ranks of {model}: {e}")),
            }
        }
        // Strangers before the first check-in: the model's root must survive exactly those the
        // real root survives (then serve 2 ranks), and give up on the others as it does.
        for kind in [Stranger::BadMagic, Stranger::WrongType, Stranger::Silent] {
            match conformance_after(&lib, model, 2, Mutation::None, Some(kind), Order::Ascending) {
                Ok(()) => println!("real_root: NCCL {version} root after a {kind:?} stranger: as {model} predicts"),
                Err(e) => failures.push(format!("NCCL {version} root after a {kind:?} stranger, model {model}: {e}")),
            }
        }
        // The other family's check-in makes the real root give up: the model's root, given the
        // same bytes, must give up with NCCL's words.
        match same_words(&lib, model, other) {
            Ok(words) => {
                println!("real_root: NCCL {version} root and {model} give up on a {other} check-in alike: {words}")
            }
            Err(e) => failures.push(format!("NCCL {version} root on a {other} check-in, model {model}: {e}")),
        }
        for (variant, mutation) in wrong {
            match conformance(&lib, variant, 3, mutation) {
                Ok(()) => failures.push(format!(
                    "negative control: NCCL {version}'s root matched a wrong model ({variant}, {mutation:?})"
                )),
                Err(e) => println!("real_root: NCCL {version} root against a wrong model ({variant}, {mutation:?}) fails as it must: {e}"),
            }
        }
    }
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("real_root: FAILED {f}");
        }
        std::process::exit(1);
    }
}

fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("BOOTSIM_NCCL_CACHE") {
        return d.into();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"));
    base.join("bootsim").join("nccl")
}

/// The child: load NCCL, make a unique ID (which starts the root thread), print it, and keep the
/// process alive until the parent closes stdin.
fn child(lib: &Path) {
    type GetVersion = unsafe extern "C" fn(*mut i32) -> i32;
    type GetUniqueId = unsafe extern "C" fn(*mut [u8; 128]) -> i32;
    // SAFETY: loading NCCL runs its constructors, which only set up its own state.
    let lib = unsafe { libloading::Library::new(lib) }.unwrap_or_else(|e| die(&format!("cannot load NCCL: {e}")));
    // SAFETY: the symbols have these C signatures in nccl.h (int* and ncclUniqueId*, 128 bytes).
    let (get_version, get_id) = unsafe {
        let v: libloading::Symbol<GetVersion> = lib.get(b"ncclGetVersion").unwrap_or_else(|e| die(&e.to_string()));
        let u: libloading::Symbol<GetUniqueId> = lib.get(b"ncclGetUniqueId").unwrap_or_else(|e| die(&e.to_string()));
        (*v, *u)
    };
    let mut version = 0i32;
    let mut id = [0u8; 128];
    // SAFETY: both write only into the buffers given.
    let (rv, ru) = unsafe { (get_version(&mut version), get_id(&mut id)) };
    if rv != 0 || ru != 0 {
        die(&format!("ncclGetVersion returned {rv}, ncclGetUniqueId returned {ru}"));
    }
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    println!("VERSION {version}\nUID {hex}");
    std::io::stdout().flush().ok();
    let mut rest = Vec::new();
    std::io::stdin().read_to_end(&mut rest).ok();
    drop(lib);
}

fn die(msg: &str) -> ! {
    eprintln!("real_root child: {msg}");
    std::process::exit(3)
}

/// The child process with NCCL's root; killed on drop.
struct RealRoot {
    child: Mutex<Child>,
    stderr: Arc<Mutex<String>>,
    magic: u64,
    addr: SocketAddr,
}

impl RealRoot {
    fn start(lib: &Path) -> Result<RealRoot, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut child = Command::new(exe)
            .arg("--child")
            .arg(lib)
            .env("NCCL_SOCKET_IFNAME", "lo")
            .env("NCCL_DEBUG", "WARN")
            .env_remove("NCCL_COMM_ID")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the child: {e}"))?;
        let stderr = Arc::new(Mutex::new(String::new()));
        let (err_pipe, sink) = (child.stderr.take().expect("piped"), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(err_pipe).lines().map_while(Result::ok) {
                sink.lock().expect("not poisoned").push_str(&format!("{line}\n"));
            }
        });
        // NCCL prints its warnings on stdout (NCCL_DEBUG_FILE unset): keep them with stderr's.
        let (tx, rx) = mpsc::channel();
        let (out, sink) = (child.stdout.take().expect("piped"), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().expect("not poisoned").push_str(&format!("{line}\n"));
                tx.send(line).ok();
            }
        });
        let mut root =
            RealRoot { child: Mutex::new(child), stderr, magic: 0, addr: SocketAddr::from(([0, 0, 0, 0], 0)) };
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(60))
                .map_err(|_| format!("the child printed no unique ID within 60 s [NCCL: {}]", root.finish()))?;
            if let Some(hex) = line.strip_prefix("UID ") {
                let id: Vec<u8> = (0..hex.len() / 2)
                    .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|e| e.to_string()))
                    .collect::<Result<_, _>>()?;
                // ncclBootstrapHandle: u64 magic, then the root's 28-byte socket address.
                root.magic = u64::from_le_bytes(id[..8].try_into().expect("8 bytes"));
                root.addr = decode_sockaddr(id[8..36].try_into().expect("28 bytes")).map_err(|e| e.to_string())?;
                return Ok(root);
            }
        }
    }

    /// Ends the child and returns NCCL's warnings (they reach the pipe only when it exits).
    fn finish(&self) -> String {
        self.stop();
        std::thread::sleep(Duration::from_millis(50));
        let s = self.stderr.lock().expect("not poisoned");
        let warns: Vec<&str> = s.lines().filter(|l| l.contains("WARN")).collect();
        if warns.is_empty() {
            "no warning".into()
        } else {
            warns.join(" | ")
        }
    }

    /// Closes the child's stdin and waits for it to exit (killing it after 5 s).
    fn stop(&self) {
        let mut child = self.child.lock().expect("not poisoned");
        drop(child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        child.kill().ok();
        child.wait().ok();
    }
}

impl Drop for RealRoot {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A deliberately wrong model: the right variant with one behaviour of its root changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutation {
    /// The model as it is.
    None,
    /// The root hands each rank the address of the rank two places on, not its successor's.
    WrongSuccessor,
    /// The root keeps every answer until everyone has checked in (the rank-order root of 2.22
    /// and earlier, with this variant's bytes).
    Deferred,
}

/// A model rank with real listeners.
struct ModelRank {
    rank: Rank,
    ring: TcpListener,
    reply_conn: Option<ConnId>,
}

/// A rank's effects, each with the bytes it writes (empty but for a write); its observations
/// are left out.
fn drain(rank: &mut Rank) -> Vec<(Effect, Vec<u8>)> {
    let mut tx = Vec::new();
    let mut effects = Vec::new();
    while let Some(out) = rank.poll_output(&mut tx) {
        if let Output::Effect(e) = out {
            let bytes = if matches!(e, Effect::Write { .. }) { tx.clone() } else { Vec::new() };
            effects.push((e, bytes));
        }
    }
    effects
}

/// One conformance run: `n` model ranks of `model` check in to the real root, one after another.
fn conformance(lib: &Path, model: Variant, n: u32, mutation: Mutation) -> Result<(), String> {
    conformance_after(lib, model, n, mutation, None, Order::Ascending)
}

/// The order in which the ranks check in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    /// 0, 1, ..., n-1.
    Ascending,
    /// n-1, ..., 0: every rank's successor is in before it (2.30 answers each at once).
    Descending,
    /// The even ranks, then the odd ones: a mix of both of 2.30's early answers.
    EvensThenOdds,
}

impl Order {
    fn ranks(self, n: u32) -> Vec<usize> {
        let all = 0..n as usize;
        match self {
            Order::Ascending => all.collect(),
            Order::Descending => all.rev().collect(),
            Order::EvensThenOdds => all.clone().filter(|r| r % 2 == 0).chain(all.filter(|r| r % 2 == 1)).collect(),
        }
    }
}

/// A connection that is not a rank, made to the root before any rank checks in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stranger {
    /// Twelve bytes with another magic (a port scanner that sends something).
    BadMagic,
    /// The right magic and another socket type (a proxy socket dialling the wrong port).
    WrongType,
    /// Connects and closes without a byte (nmap's connect scan, NVIDIA/nccl#1612).
    Silent,
}

/// As [`conformance`], after `stranger` connected to the root first: the model's root must
/// survive it exactly when the real one does.
fn conformance_after(
    lib: &Path,
    model: Variant,
    n: u32,
    mutation: Mutation,
    stranger: Option<Stranger>,
    order: Order,
) -> Result<(), String> {
    let real = RealRoot::start(lib)?;
    let run = Run { model, n, mutation, stranger, order };
    drive(&real, run).map_err(|e| {
        // NCCL's warnings reach the pipe when the child exits (stdout is block-buffered).
        let warnings = real.finish();
        format!("{e} [NCCL: {warnings}]")
    })
}

/// One conformance run's parameters.
#[derive(Clone, Copy, Debug)]
struct Run {
    model: Variant,
    n: u32,
    mutation: Mutation,
    stranger: Option<Stranger>,
    order: Order,
}

/// The model's root of `model`, told it listens where the real root does, and the connection of
/// its first accept.
fn model_root(model: Variant, real: &RealRoot) -> (Root, Option<ConnId>) {
    let mut root = Root::new(RootConfig { variant: model, magic: real.magic });
    let mut tx = Vec::new();
    while root.poll_output(&mut tx).is_some() {}
    root.handle(Input::Listening { listener: Key::of(model, Listener::Root), addr: real.addr });
    let accept = std::iter::from_fn(|| root.poll_output(&mut tx)).find_map(|o| match o {
        Output::Effect(Effect::Accept { conn, .. }) => Some(conn),
        _ => None,
    });
    (root, accept)
}

/// The body of [`conformance_after`], against a started real root.
fn drive(real: &RealRoot, run: Run) -> Result<(), String> {
    let Run { model, n, mutation, stranger, order } = run;
    let (mut root, mut accept) = model_root(model, real);
    if let Some(kind) = stranger {
        let bytes = match kind {
            Stranger::BadMagic => bootsim_core::codec::Preamble { magic: !real.magic, kind: 1 }.encode().to_vec(),
            Stranger::WrongType => bootsim_core::codec::Preamble { magic: real.magic, kind: 2 }.encode().to_vec(),
            Stranger::Silent => Vec::new(),
        };
        let mut s = TcpStream::connect(real.addr).map_err(|e| format!("the stranger cannot connect: {e}"))?;
        s.write_all(&bytes).map_err(|e| e.to_string())?;
        drop(s);
        let conn = accept.take().ok_or("the model's root takes no connection")?;
        let (_, next, _) = model_answers(&mut root, conn, &bytes)?;
        accept = next;
        // Give the real root time to read and judge the stranger.
        std::thread::sleep(Duration::from_millis(200));
        if root.is_done() {
            // The model's root gave up: the real one must have closed its listener too.
            return match TcpStream::connect(real.addr) {
                Err(_) => Ok(()),
                Ok(_) => Err(format!(
                    "after a {kind:?} stranger the model's root gives up, but the real root still listens",
                )),
            };
        }
    }

    let bind = || TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"));
    let init = Planned { step: Step::Init, call: Call { kind: CallKind::BootstrapInit, site: "bootstrap.cc" } };
    // One listener takes every rank's answer, so its accept queue keeps the order in which the
    // real root connected; an answer's bytes say which rank it is for.
    let answers = bind()?;
    answers.set_nonblocking(true).map_err(|e| e.to_string())?;
    let answers_addr = answers.local_addr().map_err(|e| e.to_string())?;
    let mut ranks = Vec::new();
    let mut checkins = Vec::new();
    for r in 0..n {
        let ring = bind()?;
        let cfg = RankConfig {
            rank: r,
            nranks: n,
            variant: model,
            magic: real.magic,
            root: real.addr,
            program: vec![init.clone()],
        };
        let mut rank = Rank::new(cfg);
        drain(&mut rank);
        let ring_addr = ring.local_addr().map_err(|e| e.to_string())?;
        rank.handle(Input::Listening { listener: Key::of(model, Listener::Ring), addr: ring_addr });
        rank.handle(Input::Listening { listener: Key::of(model, Listener::FromRoot), addr: answers_addr });
        let Some((Effect::Connect { conn, addr }, _)) = drain(&mut rank).into_iter().next() else {
            return Err(format!("model rank {r} did not dial the root"));
        };
        if addr != real.addr {
            return Err(format!("model rank {r} dials {addr}, not the unique ID's {}", real.addr));
        }
        rank.handle(Input::Connected { conn });
        let mut bytes = Vec::new();
        let mut reply_conn = None;
        for (e, written) in drain(&mut rank) {
            match e {
                Effect::Write { .. } => bytes.extend(written),
                Effect::Accept { listener, conn } if listener.listener == Listener::FromRoot => reply_conn = Some(conn),
                _ => {}
            }
        }
        checkins.push(bytes);
        ranks.push(ModelRank { rank, ring, reply_conn });
    }
    let rings: Vec<SocketAddr> = ranks.iter().map(|m| m.ring.local_addr().expect("bound")).collect();
    let to_of = |bytes: &[u8]| answer_for(bytes, &rings, model);
    let mut deferred = Vec::new();

    for (k, r) in order.ranks(n).into_iter().enumerate() {
        let checkin = &checkins[r];
        // The real root gets rank r's check-in...
        let mut s =
            TcpStream::connect(real.addr).map_err(|e| format!("check-in {r}: connect to the real root: {e}"))?;
        s.write_all(checkin).map_err(|e| format!("check-in {r}: {e}"))?;
        drop(s);
        // ...and so does the model's, which says which answers must follow.
        let conn = accept.take().ok_or_else(|| format!("the model's root takes no check-in {r}"))?;
        let (expected, next, _) = model_answers(&mut root, conn, checkin)?;
        let mut expected: Vec<(usize, Vec<u8>)> = expected.into_iter().map(|b| (to_of(&b), b)).collect();
        accept = next;
        match mutation {
            Mutation::None => {}
            Mutation::WrongSuccessor => {
                for (to, bytes) in &mut expected {
                    // After the preamble (12 bytes, from 2.9) and the frame size (4): the address.
                    let at = if model.has_preamble() { 16 } else { 4 };
                    let wrong = ranks[(*to + 2) % n as usize].ring.local_addr().expect("bound");
                    bytes[at..at + 28].copy_from_slice(&bootsim_core::codec::encode_sockaddr(&wrong));
                }
            }
            Mutation::Deferred => {
                deferred.append(&mut expected);
                if k + 1 == n as usize {
                    deferred.sort_by_key(|(to, _)| *to);
                    expected = std::mem::take(&mut deferred);
                }
            }
        }
        for (to, bytes) in expected {
            let got = next_answer(&answers, ANSWER_TIMEOUT).ok_or_else(|| {
                format!(
                    "after rank {r}'s check-in the model's root answers rank {to} ({} bytes); the real root sent nothing within {:?}",
                    bytes.len(),
                    ANSWER_TIMEOUT,
                )
            })?;
            let got_to = to_of(&got);
            if got != bytes {
                return Err(format!(
                    "after rank {r}'s check-in the real root answered rank {got_to} with {} but the model's root answers rank {to} with {}",
                    hex(&got),
                    hex(&bytes)
                ));
            }
            let next = ranks_ring(&ranks, to, n);
            if mutation == Mutation::None {
                take_answer(&mut ranks[to], &got, &next)?;
            }
        }
        if let Some(got) = next_answer(&answers, QUIET) {
            return Err(format!(
                "after rank {r}'s check-in the real root also answered rank {} ({}), which the model's root does not",
                to_of(&got),
                hex(&got)
            ));
        }
    }
    if !root.is_done() {
        return Err(format!("the model's root is not done: it waits for {:?}", root.waiting_for()));
    }
    Ok(())
}

/// Model ranks of `model` run all of `nccl-init` (2 ranks per node, CollNet on) over loopback
/// with the async driver, checking in to the real root; returns how many steps completed.
fn whole_init(lib: &Path, model: Variant, n: u32) -> Result<usize, String> {
    let real = RealRoot::start(lib)?;
    let progs =
        bootsim_nccl::nccl_init(model, n, bootsim_nccl::InitParams { ranks_per_node: 2, channels: 2, collnet: true });
    let (_, ranks) = bootsim_nccl::seam::nodes(model, progs.clone(), real.magic, real.addr);
    let ran = run_ranks(ranks, real.addr.ip(), Duration::from_secs(20)).map_err(|e| format!("cannot run: {e}"))?;
    every_step_done(&ran.ranks, &progs).map_err(|e| format!("{e} [NCCL: {}]", real.finish()))
}

/// Sends the real root one check-in of the `wrong` variant, and the model's `model` root the same
/// bytes: both must give up, the model with the words NCCL warns with. Returns those words.
fn same_words(lib: &Path, model: Variant, wrong: Variant) -> Result<String, String> {
    let real = RealRoot::start(lib)?;
    let bind = || TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"));
    let (ring, from_root) = (bind()?, bind()?);
    let info = bootsim_nccl::codec::ExtInfo {
        rank: 0,
        nranks: 3,
        listen_root: from_root.local_addr().map_err(|e| e.to_string())?,
        listen: ring.local_addr().map_err(|e| e.to_string())?,
    };
    let mut bytes = Vec::new();
    bootsim_nccl::codec::encode_preamble(&mut bytes, wrong, real.magic);
    bootsim_core::codec::encode_frame(&mut bytes, &bootsim_nccl::codec::encode_ext_info(&info, wrong));
    let mut s = TcpStream::connect(real.addr).map_err(|e| format!("connect to the real root: {e}"))?;
    s.write_all(&bytes).map_err(|e| e.to_string())?;
    drop(s);
    std::thread::sleep(Duration::from_millis(200));
    let warnings = real.finish();

    let (mut root, accept) = model_root(model, &real);
    let conn = accept.ok_or("the model's root takes no check-in")?;
    let (_, _, verdict) = model_answers(&mut root, conn, &bytes)?;
    let Some(Err(e)) = verdict else {
        return Err(format!("the model's root did not give up ({verdict:?}); NCCL: {warnings}"));
    };
    let text = e.to_string();
    let words = ["Message truncated", "Bootstrap Root"]
        .iter()
        .find_map(|w| text.find(w).map(|i| text[i..].to_string()))
        .ok_or_else(|| format!("the model's root gave up with words of its own: {text}"))?;
    if warnings.contains(&words) {
        Ok(words)
    } else {
        Err(format!("the model's root says \"{words}\", NCCL warns: {warnings}"))
    }
}

/// The ring listener address of `to`'s successor, which `to` must dial once answered.
fn ranks_ring(ranks: &[ModelRank], to: usize, n: u32) -> SocketAddr {
    ranks[(to + 1) % n as usize].ring.local_addr().expect("bound")
}

/// Feeds one check-in (on `conn`, the connection the root asked to accept) to the model's root;
/// returns the bytes of each answer it then makes, in order, and the connection of its next
/// accept, if it takes another check-in, and how its session ended, if it did.
fn model_answers(root: &mut Root, conn: ConnId, checkin: &[u8]) -> Result<Answered, String> {
    root.handle(Input::Accepted { conn, from: SocketAddr::from(([127, 0, 0, 1], 1)) });
    root.handle(Input::Received { conn, bytes: checkin });
    root.handle(Input::PeerClosed { conn, reason: CloseReason::Eof });
    let mut answers: Vec<Vec<u8>> = Vec::new();
    let mut pending: Option<ConnId> = None;
    let mut ended = None;
    let mut tx = Vec::new();
    loop {
        let Some(out) = root.poll_output(&mut tx) else {
            match pending.take() {
                Some(c) => {
                    root.handle(Input::Connected { conn: c });
                    continue;
                }
                None => return Ok((answers, None, ended)),
            }
        };
        match out {
            Output::Effect(Effect::Connect { conn, .. }) => {
                answers.push(Vec::new());
                pending = Some(conn);
            }
            Output::Effect(Effect::Write { len, .. }) => {
                answers.last_mut().ok_or("a write before any connect")?.extend_from_slice(&tx[..len])
            }
            Output::Effect(Effect::Accept { conn, .. }) => return Ok((answers, Some(conn), ended)),
            Output::Observe(Observation::Completed(c)) => ended = Some(c.result),
            _ => {}
        }
    }
}

/// What the model's root did with one check-in: its answers' bytes, the connection of its next
/// accept, and how its session ended (the root's completion), if it did.
type Answered = (Vec<Vec<u8>>, Option<ConnId>, Option<Result<Vec<u8>, Failure>>);

/// The rank an answer is for: the predecessor of the rank whose ring address it carries (after
/// the preamble, from 2.9, and the frame size); `usize::MAX` if it carries none of them.
fn answer_for(bytes: &[u8], rings: &[SocketAddr], v: Variant) -> usize {
    let at = if v.has_preamble() { 16 } else { 4 };
    let addr = bytes.get(at..at + 28).and_then(|b| decode_sockaddr(b.try_into().expect("28 bytes")).ok());
    let n = rings.len();
    addr.and_then(|a| rings.iter().position(|r| *r == a)).map_or(usize::MAX, |s| (s + n - 1) % n)
}

/// The next connection the real root makes to the ranks' answer listener, read to its end.
fn next_answer(answers: &TcpListener, within: Duration) -> Option<Vec<u8>> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok((mut s, _)) = answers.accept() {
            s.set_nonblocking(false).ok();
            s.set_read_timeout(Some(ANSWER_TIMEOUT)).ok();
            let mut bytes = Vec::new();
            s.read_to_end(&mut bytes).ok();
            return Some(bytes);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Gives model rank `m` the real root's answer: it must close the root listener and dial `next`.
fn take_answer(m: &mut ModelRank, bytes: &[u8], next: &SocketAddr) -> Result<(), String> {
    let conn = m.reply_conn.ok_or("the model rank asked for no answer")?;
    m.rank.handle(Input::Accepted { conn, from: SocketAddr::from(([127, 0, 0, 1], 2)) });
    m.rank.handle(Input::Received { conn, bytes });
    m.rank.handle(Input::PeerClosed { conn, reason: CloseReason::Eof });
    let effects: Vec<Effect> = drain(&mut m.rank).into_iter().map(|(e, _)| e).collect();
    let dials = effects.iter().any(|e| matches!(e, Effect::Connect { addr, .. } if addr == next));
    if !dials {
        return Err(format!(
            "model rank {} took the real answer but then did {effects:?}, not dial {next}",
            m.rank.rank()
        ));
    }
    Ok(())
}

fn hex(b: &[u8]) -> String {
    let s: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{} bytes {s}", b.len())
}
