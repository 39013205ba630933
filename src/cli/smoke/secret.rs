//! The session secret of a real-socket run: the unique ID's 64-bit magic. A peer that knows it
//! is trusted (it can check in as a rank or inject a message a rank takes as a peer's), so on a
//! cluster it must not be computable from public data. NVSHMEM's session mode has the same
//! property (every rank must be able to compute the ID), so bootsim asks for a secret shared
//! out of band and says so loudly when it has to derive one from the address.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{bail, Context};
use sha2::{Digest, Sha256};

/// The environment variable that carries a shared secret to every rank.
pub const SECRET_ENV: &str = "BOOTSIM_SESSION_SECRET";

/// Where a session's magic came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MagicSource {
    /// `--magic`.
    Given,
    /// A secret (environment or file) mixed with the launcher's job id and the address.
    Secret,
    /// Derived from the address alone: anyone who can reach the session can compute it.
    Derived,
}

/// The launcher's job id (Slurm, Open MPI/PMIx, LSF), mixed into the magic so one secret does
/// not give the same magic to two jobs.
fn job_id() -> String {
    ["SLURM_JOB_ID", "PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid", "LSB_JOBID"]
        .iter()
        .find_map(|k| std::env::var(k).ok())
        .unwrap_or_default()
}

/// Reads a secret file, refusing one that others can read.
fn read_secret_file(path: &Path) -> anyhow::Result<String> {
    let meta = std::fs::metadata(path).with_context(|| format!("--secret-file {}", path.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        bail!(
            "--secret-file {}: readable by others (mode {:o}); chmod 600 it: the secret lets a peer join the session",
            path.display(),
            meta.permissions().mode() & 0o777
        );
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("--secret-file {}", path.display()))?;
    Ok(text.trim().to_string())
}

fn mix(parts: &[&[u8]]) -> u64 {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    u64::from_le_bytes(h.finalize()[..8].try_into().expect("8 bytes"))
}

/// The magic of the session at `addr`: `--magic`, else the shared secret (file, then
/// environment) with the job id and the address, else derived from the address.
pub fn session_magic(
    given: Option<u64>,
    secret_file: Option<&Path>,
    addr: SocketAddr,
) -> anyhow::Result<(u64, MagicSource)> {
    if let Some(m) = given {
        return Ok((m, MagicSource::Given));
    }
    let secret = match secret_file {
        Some(p) => Some(read_secret_file(p)?),
        None => std::env::var(SECRET_ENV).ok().filter(|s| !s.is_empty()),
    };
    let a = addr.to_string();
    Ok(match secret {
        Some(s) => (mix(&[b"bootsim-session", s.as_bytes(), job_id().as_bytes(), a.as_bytes()]), MagicSource::Secret),
        None => (mix(&[b"bootsim-session", a.as_bytes()]), MagicSource::Derived),
    })
}

/// The warning a rank prints when its magic is derivable.
pub fn derived_warning(rank: u32, addr: SocketAddr) -> String {
    format!(
        "bootsim: warning: rank {rank}: the session magic is derived from the address {addr}: anyone who can reach it can \
         join the session or inject messages. Share a secret: {SECRET_ENV} in the job's environment, --secret-file PATH \
         (mode 600) or --magic"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_changes_the_magic_and_a_shared_one_agrees() {
        let addr: SocketAddr = "10.0.0.1:29500".parse().unwrap();
        let (d, src) = session_magic(None, None, addr).unwrap();
        assert_eq!(src, if std::env::var(SECRET_ENV).is_ok() { MagicSource::Secret } else { MagicSource::Derived });
        let dir = std::env::temp_dir().join(format!("bootsim-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("s");
        std::fs::write(&f, "hunter2\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(session_magic(None, Some(&f), addr).unwrap_err().to_string().contains("readable by others"));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (s1, src) = session_magic(None, Some(&f), addr).unwrap();
        let (s2, _) = session_magic(None, Some(&f), addr).unwrap();
        assert_eq!((s1, src), (s2, MagicSource::Secret));
        assert_ne!(s1, d);
        assert_eq!(session_magic(Some(7), Some(&f), addr).unwrap(), (7, MagicSource::Given));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
