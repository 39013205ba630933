//! Process hygiene for the commands that start children and make temporary folders
//! (`smoke --local`, `smoke --plugin`, `shuffle`, `check`, `bench`'s profile).
//!
//! - Children die with their parent: [`die_with_parent`] sets `PR_SET_PDEATHSIG(SIGKILL)` in
//!   the child before exec and checks there that the parent is still the one that forked it.
//! - Temporary folders ([`ScratchDir`], `$TMPDIR/bootsim-KIND-PID-HEX`) are removed when
//!   dropped; on SIGINT, SIGTERM or SIGHUP a signal thread ([`install_signal_cleanup`]) removes
//!   every live one and exits 128 + signal (the children follow through their death signal);
//!   after a SIGKILL, which nothing can catch, the next [`ScratchDir::new`] removes the folders
//!   whose PID is no longer a running process.

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use anyhow::Context;

/// The folder kinds this module makes (and cleans up after a dead process).
const KINDS: [&str; 5] = ["plugin", "smoke", "shuffle", "check", "bench"];

/// Folders to remove if a signal ends the process.
static LIVE: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// A fresh temporary folder, removed on drop or when a signal ends the process.
#[derive(Debug)]
pub(crate) struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// Makes `$TMPDIR/bootsim-KIND-PID-HEX` (mode 700), first removing folders of any kind left by
    /// processes that no longer run.
    pub fn new(kind: &str) -> anyhow::Result<ScratchDir> {
        debug_assert!(KINDS.contains(&kind));
        remove_stale(&std::env::temp_dir());
        for _ in 0..100 {
            let path = std::env::temp_dir().join(format!(
                "bootsim-{kind}-{}-{:016x}",
                std::process::id(),
                super::smoke::random_u64()
            ));
            // Mode 700: it holds unique-ID files, whose magic lets a peer join the session.
            match super::smoke::private_dir(&path) {
                Ok(()) => {
                    LIVE.lock().unwrap_or_else(|p| p.into_inner()).insert(path.clone());
                    return Ok(ScratchDir { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e).with_context(|| format!("creating {}", path.display())),
            }
        }
        anyhow::bail!("no fresh folder under {}", std::env::temp_dir().display())
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        LIVE.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.path);
    }
}

/// The PID in a folder name `bootsim-KIND-PID-HEX`, if it is one of ours.
fn owner(name: &str) -> Option<i32> {
    let rest = name.strip_prefix("bootsim-")?;
    let (kind, rest) = rest.split_once('-')?;
    let (pid, hex) = rest.split_once('-')?;
    (KINDS.contains(&kind) && hex.len() == 16 && hex.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| pid.parse().ok())
        .flatten()
}

/// Removes our folders in `tmp` whose process is gone (a SIGKILLed run's).
fn remove_stale(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = owner(&name.to_string_lossy()) else { continue };
        // SAFETY: kill with signal 0 only checks whether the process exists.
        let gone =
            unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Makes the child die (SIGKILL) when the thread that spawned it ends, and refuse to start if
/// its parent is already gone (the signal would never come).
pub(crate) fn die_with_parent(cmd: &mut Command) -> &mut Command {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and makes only async-signal-safe
    // calls (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        })
    }
}

/// Routes SIGINT, SIGTERM and SIGHUP to a thread that removes the live scratch folders and
/// exits 128 + signal. Call first thing in `main`, before any other thread exists (they
/// inherit the blocked mask; spawned programs get a clean one from std).
pub(crate) fn install_signal_cleanup() {
    // SAFETY: sigset manipulation on a local set, and pthread_sigmask on the calling thread.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    let _ = std::thread::Builder::new().name("signals".into()).spawn(move || {
        let mut sig: libc::c_int = 0;
        // SAFETY: sigwait on the set built above, into a local.
        if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
            return;
        }
        for p in LIVE.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = std::fs::remove_dir_all(p);
        }
        // SAFETY: _exit ends the process at once; the children's death signal follows.
        unsafe { libc::_exit(128 + sig) }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_folder_names_have_an_owner() {
        assert_eq!(owner("bootsim-smoke-123-00000000deadbeef"), Some(123));
        assert_eq!(owner("bootsim-plugin-9-0123456789abcdef"), Some(9));
        assert_eq!(owner("bootsim-secret-123"), None);
        assert_eq!(owner("bootsim-smoke-123-xyz"), None);
        assert_eq!(owner("other-smoke-1-0123456789abcdef"), None);
    }

    #[test]
    fn a_dead_processs_folder_is_removed_and_a_live_ones_kept() {
        let tmp = std::env::temp_dir().join(format!("bootsim-scratch-test-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        // A PID that is not running: a child that has been waited for.
        let mut child = Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = tmp.join(format!("bootsim-smoke-{dead}-0123456789abcdef"));
        let live = tmp.join(format!("bootsim-smoke-{}-0123456789abcdef", std::process::id()));
        for d in [&stale, &live] {
            std::fs::create_dir_all(d.join("inner")).unwrap();
        }
        remove_stale(&tmp);
        assert!(!stale.exists() && live.exists());
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
