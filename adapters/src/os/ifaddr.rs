//! Interface selection, as `ncclFindInterfaces` does it for
//! `NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME`.
//!
//! Syntax: a comma-separated list of name prefixes. A leading `^` turns it
//! into an exclude list; a following `=` (so `=eth0` or `^=eth0`) makes the
//! entries exact names. As in NCCL's `parseStringList`, `:suffix` on an entry
//! (a port, in the HCA syntax it shares) is dropped, empty entries are
//! skipped and only the first 16 entries count. An empty list matches every
//! name, so `""` selects anything and `"^"` selects nothing.
//!
//! Without a filter, NVSHMEM tries `ib`, then `^docker,lo`, then `docker`,
//! then `lo`, and keeps the first match in `getifaddrs` order. (It tries the
//! subnet of `SESSION_ID` between `ib` and `^docker,lo`; that step is not
//! modelled here.)

use std::io;
use std::net::{IpAddr, Ipv6Addr};

/// NCCL's `MAX_IFS`: entries past this many are ignored.
const MAX_ENTRIES: usize = 16;

/// An address family (`NVSHMEM_BOOTSTRAP_UID_SOCK_FAMILY`, default `AF_INET`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Family {
    /// `AF_INET`.
    #[default]
    V4,
    /// `AF_INET6`.
    V6,
}

impl Family {
    /// The family of `addr`.
    pub fn of(addr: &IpAddr) -> Self {
        match addr {
            IpAddr::V4(_) => Self::V4,
            IpAddr::V6(_) => Self::V6,
        }
    }
}

/// One (interface name, address) pair from `getifaddrs`; an interface with
/// several addresses appears once per address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Interface {
    /// Interface name, e.g. `eth0` or an alias label such as `eth0:1`.
    pub name: String,
    /// One of its addresses.
    pub addr: IpAddr,
}

/// A parsed `..._SOCK_IFNAME` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfFilter {
    exclude: bool,
    exact: bool,
    entries: Vec<String>,
}

impl IfFilter {
    /// Parses NCCL's interface-list syntax. Never fails: like NCCL, any
    /// string is a list.
    pub fn parse(spec: &str) -> Self {
        let (exclude, rest) = match spec.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, spec),
        };
        let (exact, rest) = match rest.strip_prefix('=') {
            Some(rest) => (true, rest),
            None => (false, rest),
        };
        let entries = rest
            .split(',')
            .map(|e| e.split(':').next().unwrap_or(""))
            .filter(|e| !e.is_empty())
            .take(MAX_ENTRIES)
            .map(str::to_owned)
            .collect();
        Self { exclude, exact, entries }
    }

    /// Whether the interface `name` passes the filter.
    pub fn matches(&self, name: &str) -> bool {
        let listed = self.entries.is_empty()
            || self.entries.iter().any(|e| if self.exact { name == e } else { name.starts_with(e.as_str()) });
        listed != self.exclude
    }
}

/// The first interface of `family` in `list` that passes `filter`, or, with
/// no filter, NVSHMEM's default order: `ib*`, anything but `docker*`/`lo*`,
/// `docker*`, `lo*`.
pub fn select(filter: Option<&IfFilter>, family: Family, list: &[Interface]) -> Option<Interface> {
    let first = |f: &IfFilter| list.iter().find(|i| Family::of(&i.addr) == family && f.matches(&i.name)).cloned();
    match filter {
        Some(f) => first(f),
        None => ["ib", "^docker,lo", "docker", "lo"].into_iter().find_map(|spec| first(&IfFilter::parse(spec))),
    }
}

/// `fe80::/10`.
fn is_link_local_v6(addr: &Ipv6Addr) -> bool {
    addr.segments()[0] & 0xffc0 == 0xfe80
}

/// The host's IPv4/IPv6 interface addresses in `getifaddrs` order, without
/// IPv6 link-local ones (which need a scope id to be usable).
pub fn list_interfaces() -> io::Result<Vec<Interface>> {
    let list = nix::ifaddrs::getifaddrs().map_err(|e| {
        let err = io::Error::from(e);
        io::Error::new(err.kind(), format!("getifaddrs: {err}"))
    })?;
    let ip = |a: &nix::sys::socket::SockaddrStorage| -> Option<IpAddr> {
        a.as_sockaddr_in().map(|v4| IpAddr::V4(v4.ip())).or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
    };
    Ok(list
        .filter_map(|ifa| Some(Interface { addr: ifa.address.as_ref().and_then(ip)?, name: ifa.interface_name }))
        .filter(|i| !matches!(i.addr, IpAddr::V6(ref v6) if is_link_local_v6(v6)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn iface(name: &str, addr: &str) -> Interface {
        Interface { name: name.to_owned(), addr: addr.parse().unwrap() }
    }

    fn host() -> Vec<Interface> {
        vec![
            iface("lo", "127.0.0.1"),
            iface("docker0", "172.17.0.1"),
            iface("eth0", "10.0.0.5"),
            iface("ib0", "192.168.100.5"),
            iface("lo", "::1"),
            iface("eth0", "2001:db8::5"),
        ]
    }

    fn name(i: Option<Interface>) -> Option<String> {
        i.map(|i| i.name)
    }

    #[test]
    fn parse_prefix_list() {
        let f = IfFilter::parse("eth,ib");
        assert!(f.matches("eth0") && f.matches("ib1") && f.matches("eth"));
        assert!(!f.matches("lo") && !f.matches("docker0") && !f.matches("et"));
    }

    #[test]
    fn parse_exclude_list() {
        let f = IfFilter::parse("^docker,lo");
        assert!(f.matches("eth0") && f.matches("ib0"));
        assert!(!f.matches("lo") && !f.matches("docker0") && !f.matches("loopy"));
    }

    #[test]
    fn parse_exact_and_exclude_exact() {
        let f = IfFilter::parse("=eth0,ib0");
        assert!(f.matches("eth0") && f.matches("ib0"));
        assert!(!f.matches("eth01") && !f.matches("eth"));
        let f = IfFilter::parse("^=eth0");
        assert!(!f.matches("eth0"));
        assert!(f.matches("eth01") && f.matches("lo"));
        // `=` before `^` is not an exclude: `^` is then a literal prefix.
        let f = IfFilter::parse("=^eth0");
        assert!(!f.matches("eth0") && f.matches("^eth0"));
    }

    #[test]
    fn parse_quirks_follow_nccl() {
        // Empty entries skipped, `:port` dropped.
        let f = IfFilter::parse(",eth0:1,,");
        assert!(f.matches("eth0") && f.matches("eth0:1") && !f.matches("ib0"));
        // Empty list: everything; excluded empty list: nothing.
        assert!(IfFilter::parse("").matches("anything"));
        assert!(!IfFilter::parse("^").matches("anything"));
        assert!(!IfFilter::parse("^=").matches("anything"));
        // Entries past the 16th are ignored.
        let many: Vec<String> = (0..17).map(|i| format!("if{i}x")).collect();
        let f = IfFilter::parse(&many.join(","));
        assert!(f.matches("if15x") && !f.matches("if16x"));
    }

    #[test]
    fn default_order_prefers_ib() {
        assert_eq!(name(select(None, Family::V4, &host())), Some("ib0".into()));
    }

    #[test]
    fn default_order_then_anything_but_docker_and_lo() {
        let list: Vec<_> = host().into_iter().filter(|i| i.name != "ib0").collect();
        assert_eq!(name(select(None, Family::V4, &list)), Some("eth0".into()));
        let v6 = select(None, Family::V6, &list).unwrap();
        assert_eq!(v6, iface("eth0", "2001:db8::5"));
    }

    #[test]
    fn default_order_then_docker_then_lo() {
        let list = vec![iface("lo", "127.0.0.1"), iface("docker0", "172.17.0.1")];
        assert_eq!(name(select(None, Family::V4, &list)), Some("docker0".into()));
        let list = vec![iface("lo", "127.0.0.1"), iface("lo", "::1")];
        assert_eq!(select(None, Family::V6, &list), Some(iface("lo", "::1")));
        assert_eq!(select(None, Family::V4, &[]), None);
    }

    #[test]
    fn family_is_respected() {
        let list = vec![iface("ib0", "fd00::1"), iface("eth0", "10.0.0.1")];
        assert_eq!(name(select(None, Family::V4, &list)), Some("eth0".into()));
        assert_eq!(name(select(None, Family::V6, &list)), Some("ib0".into()));
    }

    #[test]
    fn explicit_filter_takes_first_match_in_list_order() {
        let f = IfFilter::parse("lo,eth");
        assert_eq!(name(select(Some(&f), Family::V4, &host())), Some("lo".into()));
        let f = IfFilter::parse("^lo,docker,ib");
        assert_eq!(name(select(Some(&f), Family::V4, &host())), Some("eth0".into()));
        let f = IfFilter::parse("=eth1");
        assert_eq!(select(Some(&f), Family::V4, &host()), None);
    }

    #[test]
    fn link_local_detection() {
        assert!(is_link_local_v6(&"fe80::1".parse().unwrap()));
        assert!(is_link_local_v6(&"febf::1".parse().unwrap()));
        assert!(!is_link_local_v6(&"fec0::1".parse().unwrap()));
        assert!(!is_link_local_v6(&"::1".parse().unwrap()));
    }

    #[test]
    fn list_interfaces_finds_loopback() {
        let list = list_interfaces().unwrap();
        assert!(list.iter().any(|i| i.name == "lo" && i.addr == IpAddr::V4(Ipv4Addr::LOCALHOST)), "{list:?}");
        assert!(!list.iter().any(|i| matches!(i.addr, IpAddr::V6(ref a) if is_link_local_v6(a))));
        // Something is always selectable, lo at worst.
        assert!(select(None, Family::V4, &list).is_some());
    }
}
