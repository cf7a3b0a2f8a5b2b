//! Network interfaces, chosen the way NCCL chooses them (NVIDIA/nccl src/misc/socket.cc):
//! `NCCL_SOCKET_IFNAME` is a comma-separated list of prefixes, `^` excludes, `=` asks for exact
//! names; when set it is "find or fail". Unset, NCCL prefers ib*, then anything but
//! docker*/lo/virbr*, then docker*, then lo, then virbr*.

use std::ffi::CStr;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    pub name: String,
    pub addr: IpAddr,
}

impl fmt::Display for Iface {
    /// NCCL's way of naming an interface with its address: `eth0:10.0.0.1<0>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}<0>", self.name, self.addr)
    }
}

/// A parsed NCCL_SOCKET_IFNAME value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfnameFilter {
    pub exclude: bool,
    pub exact: bool,
    pub names: Vec<String>,
}

impl IfnameFilter {
    pub fn parse(s: &str) -> Self {
        let mut rest = s.trim();
        let exclude = rest.starts_with('^');
        if exclude {
            rest = &rest[1..];
        }
        let exact = rest.starts_with('=');
        if exact {
            rest = &rest[1..];
        }
        let names = rest
            .split(',')
            .map(|n| n.trim().split(':').next().unwrap_or("").to_string())
            .filter(|n| !n.is_empty())
            .collect();
        Self {
            exclude,
            exact,
            names,
        }
    }

    pub fn matches(&self, name: &str) -> bool {
        let hit = self.names.iter().any(|n| {
            if self.exact {
                name == n
            } else {
                name.starts_with(n.as_str())
            }
        });
        hit != self.exclude
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error(
        "Bootstrap : no socket interface found (NCCL_SOCKET_IFNAME={filter}; interfaces here: {available})"
    )]
    NoMatch { filter: String, available: String },
    #[error("Bootstrap : no socket interface found (no interface has an address)")]
    NoInterfaces,
}

/// The interfaces an NCCL_SOCKET_IFNAME-style list selects, in kernel order.
fn matching(ifaces: &[Iface], spec: &str) -> Vec<Iface> {
    let f = IfnameFilter::parse(spec);
    ifaces
        .iter()
        .filter(|i| f.matches(&i.name))
        .cloned()
        .collect()
}

/// The interfaces NCCL would use, best first, and why.
pub fn select(ifaces: &[Iface], ifname: Option<&str>) -> Result<(Vec<Iface>, String), SelectError> {
    if let Some(spec) = ifname.filter(|s| !s.trim().is_empty()) {
        let found = matching(ifaces, spec);
        if found.is_empty() {
            return Err(SelectError::NoMatch {
                filter: spec.to_string(),
                available: names(ifaces),
            });
        }
        return Ok((
            found,
            format!("NCCL_SOCKET_IFNAME set by environment to {spec}"),
        ));
    }
    let tiers: [(&str, &str); 5] = [
        ("ib", "InfiniBand (ib*) first"),
        (
            "^docker,lo,virbr",
            "no ib*: anything but docker*, lo, virbr*",
        ),
        ("docker", "only docker* left"),
        ("lo", "only loopback left"),
        ("virbr", "only virbr* left"),
    ];
    for (spec, why) in tiers {
        let found = matching(ifaces, spec);
        if !found.is_empty() {
            return Ok((found, format!("NCCL_SOCKET_IFNAME unset: {why}")));
        }
    }
    Err(SelectError::NoInterfaces)
}

fn names(ifaces: &[Iface]) -> String {
    let mut n: Vec<&str> = ifaces.iter().map(|i| i.name.as_str()).collect();
    n.dedup();
    if n.is_empty() {
        "none".into()
    } else {
        n.join(", ")
    }
}

/// Up interfaces with an IPv4 or (non link-local) IPv6 address, IPv4 first, in kernel order.
/// On a node of the emulated cluster, that node's virtual table.
pub fn list() -> std::io::Result<Vec<Iface>> {
    if let Some(v) = super::vnet::current() {
        return Ok(v.net.ifaces(v.node));
    }
    host_list()
}

/// This host's interfaces (getifaddrs).
pub fn host_list() -> std::io::Result<Vec<Iface>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let (mut v4, mut v6) = (Vec::new(), Vec::new());
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: cur points into the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_flags & libc::IFF_UP as u32 == 0 {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: ifa_addr is non-null; its family says which sockaddr it is.
        let family = unsafe { (*ifa.ifa_addr).sa_family } as i32;
        if family == libc::AF_INET {
            // SAFETY: family is AF_INET, so this is a sockaddr_in.
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            v4.push(Iface {
                name,
                addr: IpAddr::V4(ip),
            });
        } else if family == libc::AF_INET6 {
            // SAFETY: family is AF_INET6, so this is a sockaddr_in6.
            let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            if ip.segments()[0] & 0xffc0 != 0xfe80 {
                v6.push(Iface {
                    name,
                    addr: IpAddr::V6(ip),
                });
            }
        }
    }
    // SAFETY: head came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    v4.extend(v6);
    Ok(v4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifs(names: &[(&str, &str)]) -> Vec<Iface> {
        names
            .iter()
            .map(|(n, a)| Iface {
                name: n.to_string(),
                addr: a.parse().expect("ip"),
            })
            .collect()
    }

    fn host() -> Vec<Iface> {
        ifs(&[
            ("lo", "127.0.0.1"),
            ("docker0", "172.17.0.1"),
            ("eth0", "10.0.0.1"),
            ("eth1", "10.1.0.1"),
        ])
    }

    fn first(list: &[Iface], spec: Option<&str>) -> String {
        select(list, spec)
            .map(|(v, _)| v[0].name.clone())
            .unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn default_prefers_ib_then_real_nics_then_docker_then_lo() {
        assert_eq!(first(&host(), None), "eth0");
        let mut with_ib = host();
        with_ib.push(Iface {
            name: "ib0".into(),
            addr: "192.168.0.1".parse().expect("ip"),
        });
        assert_eq!(first(&with_ib, None), "ib0");
        assert_eq!(
            first(
                &ifs(&[("lo", "127.0.0.1"), ("docker0", "172.17.0.1")]),
                None
            ),
            "docker0"
        );
        assert_eq!(
            first(
                &ifs(&[("lo", "127.0.0.1"), ("virbr0", "192.168.122.1")]),
                None
            ),
            "lo"
        );
    }

    #[test]
    fn prefix_exact_and_exclude_follow_nccl_syntax() {
        assert_eq!(first(&host(), Some("eth")), "eth0");
        assert_eq!(first(&host(), Some("eth1")), "eth1");
        assert_eq!(first(&host(), Some("=eth1")), "eth1");
        assert!(first(&host(), Some("=eth")).contains("no socket interface found"));
        assert_eq!(first(&host(), Some("^docker0,lo")), "eth0");
        assert_eq!(first(&host(), Some("eno1,eth0")), "eth0");
    }

    #[test]
    fn excluding_only_docker0_lets_lo_win() {
        // horovod/horovod#700: `^docker0` alone picked lo and the job hung.
        assert_eq!(first(&host(), Some("^docker0")), "lo");
    }

    #[test]
    fn no_match_is_an_immediate_error_naming_what_exists() {
        let e = first(&host(), Some("ib"));
        assert!(e.contains("no socket interface found"), "{e}");
        assert!(e.contains("eth0"), "{e}");
    }

    #[test]
    fn display_is_nccl_shaped() {
        assert_eq!(host()[2].to_string(), "eth0:10.0.0.1<0>");
    }

    #[test]
    fn this_machine_has_loopback() {
        let l = list().expect("getifaddrs");
        assert!(l.iter().any(|i| i.addr.is_loopback()), "{l:?}");
    }
}
