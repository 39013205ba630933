//! The parent's side of a plugin rank process: its records, its stderr, its end, all bounded by
//! the operation timeout.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::process::Child;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use bootsim_core::RankRecord;

pub use super::held::Held;
use super::rank::RankLine;
use super::PluginError;

/// How one plugin rank ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PluginRankRun {
    /// What it reported, as every real world reports a rank (errors with their context; a rank
    /// killed for making no progress is `unfinished`, with where it was).
    pub record: RankRecord,
    /// What the plugin printed on stderr.
    pub stderr: Vec<String>,
    /// Wall time from spawn to end.
    pub took: Duration,
    /// When bootsim stopped it for making no progress within the op timeout (it was stuck on
    /// its own: a cause, never a consequence of another rank's end).
    pub stopped_at: Option<Instant>,
    /// The address of the peer whose connection failed under it (the plugin's "Call to recv
    /// from ADDR failed"): it gave up because it lost that peer.
    pub lost: Option<SocketAddr>,
    /// The connections it held on its own listeners when it was stopped (local, remote, bytes
    /// unread): at a root, the one it was blocked on.
    pub held: Vec<Held>,
}

/// How long a rank other than 0 waits past the op timeout during init before it is stopped:
/// rank 0 runs the root every other rank waits for in init, so when init is stuck the root is
/// stopped first (and names who held it), and the others end as its consequences, whatever
/// the order their timers would have fired in.
pub const ROOT_FIRST: Duration = Duration::from_millis(1000);

/// How long a rank may stay blocked once another rank has failed, before it is stopped as a
/// launcher would stop it (srun and mpirun end the job when one rank exits non-zero).
pub const AFTER_PEER_FAILED: Duration = Duration::from_millis(500);

/// Reads the records of `child` (rank `rank`, spawned with piped stdout and stderr) until it
/// ends, killing it once `op_timeout` passes without a record.
pub fn supervise(rank: u32, child: Child, op_timeout: Duration) -> PluginRankRun {
    supervise_with(rank, child, op_timeout, &|| false)
}

/// As [`supervise`], and once `peer_failed()` turns true, waits at most [`AFTER_PEER_FAILED`]
/// more for progress before stopping the rank (NVSHMEM would block there forever).
pub fn supervise_with(
    rank: u32,
    mut child: Child,
    op_timeout: Duration,
    peer_failed: &dyn Fn() -> bool,
) -> PluginRankRun {
    let started = Instant::now();
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    let stderr = child.stderr.take().map(|e| thread::spawn(move || read_lines(e)));
    let mut run = PluginRankRun { record: RankRecord { rank, ..Default::default() }, ..Default::default() };
    let mut current = ("init".to_string(), None::<u32>);
    let mut failed: Option<(String, Option<i32>)> = None;
    let mut init_done = false;
    let mut last = Instant::now();
    let mut peer_failed_at: Option<Instant> = None;
    loop {
        if peer_failed_at.is_none() && peer_failed() {
            peer_failed_at = Some(Instant::now());
        }
        let patience = if rank != 0 && !init_done { op_timeout + ROOT_FIRST } else { op_timeout };
        let limit = match peer_failed_at {
            Some(at) => (at + AFTER_PEER_FAILED).min(last + patience),
            None => last + patience,
        };
        let now = Instant::now();
        if now >= limit {
            run.held = super::held::accepted(child.id());
            let held = super::held::describe(&run.held);
            let _ = child.kill();
            run.record.unfinished = Some(match peer_failed_at {
                Some(_) if now < last + patience => format!(
                    "{}: still blocked {} ms after another rank failed (NVSHMEM has no timeout; stopped as a launcher would)",
                    current.0,
                    AFTER_PEER_FAILED.as_millis()
                ),
                _ => {
                    run.stopped_at = Some(now);
                    format!(
                        "{}: no progress for {} ms (NVSHMEM has no timeout; the rank process was killed){held}",
                        current.0,
                        patience.as_millis()
                    )
                }
            }
            .into());
            break;
        }
        match rx.recv_timeout((limit - now).min(Duration::from_millis(20))) {
            Ok(line) => match serde_json::from_str::<RankLine>(&line) {
                Ok(RankLine::Begin { what, index }) => {
                    current = (what, index);
                    last = Instant::now();
                }
                Ok(RankLine::Done { bytes }) => {
                    last = Instant::now();
                    if init_done {
                        run.record.ops.push(Ok(bytes));
                    } else {
                        init_done = true;
                    }
                }
                Ok(RankLine::Failed { error, rc }) => failed = Some((error, rc)),
                Err(_) => tracing::warn!(rank, line, "plugin rank: a stdout line that is not a record"),
            },
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // Its output is closed (or it was killed): it ends now, or within the timeout at most.
    let status = wait_bounded(&mut child, op_timeout);
    if status.is_err() && run.record.unfinished.is_none() {
        run.record.unfinished = Some(
            format!("{}: closed its output but did not exit within {} ms (killed)", current.0, op_timeout.as_millis())
                .into(),
        );
    }
    run.stderr = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    run.took = started.elapsed();
    let error = match (failed, &run.record.unfinished, status) {
        (Some((error, rc)), _, _) => Some(match classify_stderr(&run.stderr) {
            Some(typed) => {
                if let PluginError::PeerLost { addr, .. } = &typed {
                    run.lost = *addr;
                }
                format!("{typed}{}", rc.map_or(String::new(), |rc| format!("; returned {rc}")))
            }
            None => error,
        }),
        (None, Some(_), _) => None,
        (None, None, Ok(s)) if s.success() => None,
        (None, None, Ok(s)) => {
            let last = run.stderr.last().cloned();
            Some(match (s.code(), s.signal()) {
                (Some(code), _) => PluginError::Exited { code, stderr: last }.to_string(),
                (None, Some(signal)) => PluginError::Crashed { signal, stderr: last }.to_string(),
                _ => format!("the rank process ended with {s}"),
            })
        }
        (None, None, Err(e)) => Some(format!("waiting for the rank process: {e}")),
    };
    if let Some(e) = error {
        let e = format!("{}: {e}", current.0);
        match current.1 {
            None => run.record.init = Some(bootsim_core::report::init_text(e).into()),
            Some(_) => run.record.ops.push(Err(e.into())),
        }
    }
    run
}

/// The child's exit status, killing it if it has not exited within `limit`.
fn wait_bounded(child: &mut Child, limit: Duration) -> std::io::Result<std::process::ExitStatus> {
    let until = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(s);
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the rank process did not exit"));
        }
        thread::sleep(Duration::from_millis(5));
    }
}

fn read_lines(r: impl Read) -> Vec<String> {
    BufReader::new(r).lines().map_while(Result::ok).collect()
}

/// The first error the plugin printed that bootsim knows, as a typed error. Its lines look like
/// `<file>:bootstrap_net_recv:<line>: Message size mismatch: received 4 bytes, expected 576 bytes`.
pub fn classify_stderr(lines: &[String]) -> Option<PluginError> {
    lines.iter().find_map(|l| classify_line(l))
}

fn classify_line(line: &str) -> Option<PluginError> {
    if line.contains("tag space exhausted") {
        return Some(PluginError::TagSpaceExhausted);
    }
    // NCCL-style sockets: "Call to recv from 127.0.0.1<29500> failed : Connection reset by peer".
    if let Some(rest) = after(line, "Call to ") {
        let (_, rest) = rest.split_once(' ')?;
        let rest = rest.strip_prefix("from ").or_else(|| rest.strip_prefix("to "))?;
        let (addr, reason) = rest.split_once(" failed : ")?;
        return Some(PluginError::PeerLost { addr: socket_addr(addr), reason: reason.trim().to_string() });
    }
    if let Some(rest) = after(line, "Connection closed by remote peer ") {
        let addr = rest.split_whitespace().next().unwrap_or_default();
        return Some(PluginError::PeerLost {
            addr: socket_addr(addr),
            reason: "connection closed by remote peer".into(),
        });
    }
    if let Some(rest) = after(line, "Message size mismatch: received ") {
        let (got, rest) = number(rest)?;
        let (expected, _) = number(after(rest, "expected ")?)?;
        return Some(PluginError::SizeMismatch { got, expected });
    }
    if let Some(rest) = after(line, "Message truncated : received ") {
        let (got, rest) = number(rest)?;
        let (expected, _) = number(after(rest, "instead of ")?)?;
        return Some(PluginError::Truncated { got, expected });
    }
    None
}

/// `127.0.0.1<29500>` (how NCCL's sockets print an address) as a socket address.
fn socket_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.trim_end_matches('>').split_once('<')?;
    Some(SocketAddr::new(ip.parse().ok()?, port.parse().ok()?))
}

fn after<'a>(s: &'a str, pat: &str) -> Option<&'a str> {
    s.find(pat).map(|i| &s[i + pat.len()..])
}

fn number(s: &str) -> Option<(usize, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    Some((s[..end].parse().ok()?, &s[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_plugins_messages_become_typed_errors() {
        let p = "./src/modules/bootstrap/uid/bootstrap_uid.cpp";
        let l = lines(&[&format!(
            "{p}:bootstrap_net_recv:102: Message size mismatch: received 4 bytes, expected 576 bytes"
        )]);
        assert_eq!(classify_stderr(&l), Some(PluginError::SizeMismatch { got: 4, expected: 576 }));
        let l =
            lines(&["x", &format!("{p}:bootstrap_net_recv:100: Message truncated : received 576 bytes instead of 4")]);
        assert_eq!(classify_stderr(&l), Some(PluginError::Truncated { got: 576, expected: 4 }));
        let l = lines(&[&format!("{p}:reserve_tags:391: UID bootstrap message tag space exhausted")]);
        assert_eq!(classify_stderr(&l), Some(PluginError::TagSpaceExhausted));
        assert_eq!(classify_stderr(&lines(&["non-zero status: -3"])), None);
        let l = lines(&[&format!(
            "{p}:socketProgressOpt:38: socketProgressOpt: Call to recv from 127.0.0.1<23466> failed : Connection reset by peer"
        )]);
        let lost = PluginError::PeerLost {
            addr: Some("127.0.0.1:23466".parse().unwrap()),
            reason: "Connection reset by peer".into(),
        };
        assert_eq!(classify_stderr(&l), Some(lost));
    }

    fn sh(script: &str) -> Child {
        Command::new("sh").args(["-c", script]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }

    #[test]
    fn a_blocked_rank_is_killed_and_named_where_it_waits() {
        let script = r#"echo '{"event":"begin","what":"init","index":null}'; echo '{"event":"done","bytes":[]}';
            echo '{"event":"begin","what":"barrier #1","index":1}'; exec sleep 30"#;
        let t0 = Instant::now();
        let run = supervise(3, sh(script), Duration::from_millis(300));
        assert!(t0.elapsed() < Duration::from_secs(20), "bounded by the timeout");
        let u = run.record.unfinished.unwrap();
        assert!(u.text().starts_with("barrier #1: no progress for 300 ms"), "{u}");
        assert_eq!((run.record.init, run.record.ops.len()), (None, 0));
        // Once a peer has failed, the blocked rank is stopped early, as a launcher would.
        let t0 = Instant::now();
        let run = supervise_with(3, sh(script), Duration::from_secs(60), &|| true);
        assert!(t0.elapsed() < Duration::from_secs(20), "bounded by the grace after a peer's failure");
        assert!(run.record.unfinished.unwrap().text().contains("still blocked 500 ms after another rank failed"));
    }

    #[test]
    fn a_rank_that_closes_its_output_but_keeps_running_is_still_bounded() {
        let t0 = Instant::now();
        let run = supervise(4, sh("exec >&-; exec sleep 30"), Duration::from_millis(300));
        assert!(t0.elapsed() < Duration::from_secs(20), "bounded by the timeout");
        assert!(run.record.unfinished.unwrap().text().contains("closed its output but did not exit"));
    }

    #[test]
    fn a_failed_call_takes_the_plugins_words_and_an_exit_is_named() {
        let script = r#"echo '{"event":"begin","what":"init","index":null}'; echo '{"event":"done","bytes":[]}';
            echo '{"event":"begin","what":"alltoall #0","index":0}';
            echo 'f.cpp:bootstrap_net_recv:99: Message size mismatch: received 4 bytes, expected 576 bytes' >&2;
            echo '{"event":"failed","error":"alltoall returned -3","rc":-3}'; exit 1"#;
        let run = supervise(1, sh(script), Duration::from_secs(10));
        assert_eq!(
            run.record.ops,
            // The plugin's words only: a real binary's errors are the record's text fallback.
            vec![Err(bootsim_core::RecordedError::Text(
                "alltoall #0: message size mismatch: received 4 bytes, expected 576 bytes (the plugin's words); returned -3"
                    .to_string()
            ))]
        );
        let run = supervise(
            2,
            sh(r#"echo '{"event":"begin","what":"init","index":null}'; echo 'version mismatch' >&2; exit 255"#),
            Duration::from_secs(10),
        );
        assert_eq!(
            run.record.init.as_ref().map(bootsim_core::RecordedError::text),
            Some("init: the rank process exited with status 255; its last stderr line: version mismatch")
        );
        let run = supervise(
            0,
            sh(r#"echo '{"event":"begin","what":"init","index":null}'; kill -SEGV $$"#),
            Duration::from_secs(10),
        );
        assert!(run.record.init.unwrap().text().contains("killed by signal 11"));
    }
}
