//! Who holds a stuck plugin rank's listeners: NVSHMEM's root takes one connection at a time
//! and waits for its check-in with no timeout, so a stranger that connects and sends nothing
//! stops the whole session. Read from /proc before the rank is killed, to name it.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// A connection a process accepted on one of its own listeners and still holds open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    /// The listener's side (its address and port).
    pub local: SocketAddr,
    /// Who connected.
    pub remote: SocketAddr,
    /// Bytes that arrived and are not read yet (0: it is waiting for bytes that never came).
    pub unread: u32,
}

/// `; it held accepted connections it was reading: L from R ...` for `held`; empty if none.
pub(super) fn describe(held: &[Held]) -> String {
    if held.is_empty() {
        return String::new();
    }
    let list: Vec<String> = held.iter().map(|h| format!("{} from {}", h.local, h.remote)).collect();
    format!(
        "; it held accepted connections it was reading: {} (NVSHMEM's root serves one connection at a time with no \
         timeout: a peer that is not a rank of the session, connected there and silent, stops the session)",
        list.join(", ")
    )
}

/// The established connections `pid` holds on its own listening ports (from /proc; empty
/// without it).
pub(super) fn accepted(pid: u32) -> Vec<Held> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    let inodes: BTreeSet<String> = fds
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']').map(str::to_string))
        .collect();
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap_or_default();
    // (local, remote, state, unread) of this process's IPv4 sockets.
    let mine: Vec<(SocketAddr, SocketAddr, String, u32)> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if !inodes.contains(*f.get(9)?) {
                return None;
            }
            let unread = u32::from_str_radix(f.get(4)?.split_once(':')?.1, 16).ok()?;
            Some((parse(f.get(1)?)?, parse(f.get(2)?)?, f.get(3)?.to_string(), unread))
        })
        .collect();
    let listening: BTreeSet<u16> =
        mine.iter().filter(|(_, _, st, _)| st == "0A").map(|(l, _, _, _)| l.port()).collect();
    mine.into_iter()
        .filter(|(l, _, st, _)| st == "01" && listening.contains(&l.port()))
        .map(|(local, remote, _, unread)| Held { local, remote, unread })
        .collect()
}

/// `0100007F:1F90` (an IPv4 address as /proc/net/tcp prints it) as 127.0.0.1:8080.
fn parse(field: &str) -> Option<SocketAddr> {
    let (ip, port) = field.split_once(':')?;
    let ip = u32::from_str_radix(ip, 16).ok()?;
    let port = u16::from_str_radix(port, 16).ok()?;
    Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip.swap_bytes())), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_connection_to_this_process_is_named() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, from) = l.accept().unwrap();
        let held = accepted(std::process::id());
        assert!(held.iter().any(|h| h.remote == from && h.unread == 0), "{held:?}");
        let text = describe(&held);
        assert!(text.contains(&format!("{} from {from}", l.local_addr().unwrap())), "{text}");
        assert_eq!(from, c.local_addr().unwrap());
        assert_eq!(parse("0100007F:1F90"), Some("127.0.0.1:8080".parse().unwrap()));
    }
}
