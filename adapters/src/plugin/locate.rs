//! Which plugin a `--plugin` argument names: a version in the fetch cache (fetched on demand by
//! `scripts/fetch-nvshmem.sh`) or a path to any `nvshmem_bootstrap_uid.so*`; and which of
//! bootsim's variants speaks like it.

use std::path::{Path, PathBuf};

/// A resolved plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginSpec {
    /// Its file.
    pub path: PathBuf,
    /// `major.minor.patch` when known (a cached version, or a path under a version folder).
    pub version: Option<String>,
    /// The ABI version to present: the version's, else 30000 (every 3.x plugin accepts 30000..=39999).
    pub abi: i32,
    /// Which bootsim variant matches it on the wire.
    pub family: PluginFamily,
}

/// The three wire behaviours NVSHMEM's UID plugin has shipped with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PluginFamily {
    /// Tags restart every call; short messages copied leniently (3.4, 3.5).
    Lenient,
    /// Tags restart every call; strict size check (3.6, 3.7).
    Strict,
    /// One tag per call from a counter never reset (3.8).
    TagPerCall,
}

impl PluginFamily {
    /// The bootsim-core preset that speaks like it.
    pub fn variant(self) -> &'static str {
        match self {
            PluginFamily::Lenient => "nvshmem-3.4",
            PluginFamily::Strict => "nvshmem-3.7",
            PluginFamily::TagPerCall => "nvshmem-3.8",
        }
    }
}

/// The fetch cache: `$BOOTSIM_NVSHMEM_CACHE`, else `$XDG_CACHE_HOME/bootsim/nvshmem`, else
/// `~/.cache/bootsim/nvshmem` (as `scripts/fetch-nvshmem.sh`).
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("BOOTSIM_NVSHMEM_CACHE") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache"));
    base.join("bootsim/nvshmem")
}

/// Resolves `arg`: `M.m.p` (the cache; `fetch` is called to fill it when missing) or a path.
pub fn locate(arg: &str, fetch: impl FnOnce(&str) -> Result<(), String>) -> Result<PluginSpec, String> {
    let (path, version) = if is_version(arg) {
        let path = cache_dir().join(arg).join("nvshmem_bootstrap_uid.so.3");
        if !path.exists() {
            fetch(arg)?;
        }
        if !path.exists() {
            return Err(format!("NVSHMEM {arg}: no plugin at {} after fetching", path.display()));
        }
        (path, Some(arg.to_string()))
    } else {
        let path = PathBuf::from(arg);
        if !path.is_file() {
            return Err(format!("--plugin {arg}: neither a version (e.g. 3.8.0) nor a plugin file"));
        }
        let version = path.parent().and_then(Path::file_name).and_then(|d| d.to_str()).filter(|d| is_version(d));
        (path.clone(), version.map(String::from))
    };
    let bytes = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let family = detect_family(&bytes).ok_or_else(|| {
        format!("{}: not an NVSHMEM UID bootstrap plugin (none of its messages found)", path.display())
    })?;
    let abi = version.as_deref().and_then(abi_of).unwrap_or(30000);
    Ok(PluginSpec { path, version, abi, family })
}

/// The family a plugin binary belongs to, from the messages it can print.
pub fn detect_family(binary: &[u8]) -> Option<PluginFamily> {
    let has = |s: &str| binary.windows(s.len()).any(|w| w == s.as_bytes());
    if has("tag space exhausted") {
        Some(PluginFamily::TagPerCall)
    } else if has("Message size mismatch") {
        Some(PluginFamily::Strict)
    } else if has("Message truncated") {
        Some(PluginFamily::Lenient)
    } else {
        None
    }
}

fn is_version(s: &str) -> bool {
    let parts: Vec<_> = s.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

fn abi_of(v: &str) -> Option<i32> {
    let mut it = v.split('.').map(|p| p.parse::<u32>().ok());
    let (a, b, c) = (it.next()??, it.next()??, it.next()??);
    (b < 100 && c < 100).then(|| super::abi::abi_version(a, b, c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_and_versions() {
        assert_eq!(detect_family(b"..Message truncated : received"), Some(PluginFamily::Lenient));
        assert_eq!(detect_family(b"Message truncated..Message size mismatch"), Some(PluginFamily::Strict));
        assert_eq!(detect_family(b"Message size mismatch tag space exhausted"), Some(PluginFamily::TagPerCall));
        assert_eq!(detect_family(b"libc"), None);
        assert!(is_version("3.8.0") && !is_version("3.8") && !is_version("./x.so"));
        assert_eq!(abi_of("3.7.1"), Some(30701));
        let e = locate("/nonexistent/plugin.so", |_| Ok(())).unwrap_err();
        assert!(e.contains("neither a version"), "{e}");
    }
}
