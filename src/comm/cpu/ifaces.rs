//! Network interfaces, chosen the way NCCL chooses them (NVIDIA/nccl src/misc/socket.cc):
//! `NCCL_SOCKET_IFNAME` is a comma-separated list of prefixes, `^` excludes, `=` asks for exact
//! names; when set it is "find or fail". Unset, NCCL prefers ib*, then anything but docker*/lo
//! (and virbr* from 2.28), then docker*, then lo (then virbr*, 2.28+). From 2.28 only running
//! interfaces (IFF_RUNNING) are candidates at all; before, any interface with an address was.
//! Compare src/misc/socket.cc@v2.27.3-1 (ncclFindInterfaces, findInterfaces) with @v2.28.3-1.
//! Which release is imitated is [`crate::comm::emu::log::profile`] (`RINGLAB_NCCL_VERSION`).

use std::fmt;
use std::net::IpAddr;

use crate::nccl_log::Profile as Style;

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

/// The interfaces NCCL would use, best first, and why, for the release this process imitates.
pub fn select(ifaces: &[Iface], ifname: Option<&str>) -> Result<(Vec<Iface>, String), SelectError> {
    select_as(ifaces, ifname, crate::comm::emu::log::profile())
}

/// The interfaces the NCCL release `style` would use, best first, and why.
pub fn select_as(
    ifaces: &[Iface],
    ifname: Option<&str>,
    style: Style,
) -> Result<(Vec<Iface>, String), SelectError> {
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
    let tiers: &[(&str, &str)] = if style.virbr_last_and_running_only() {
        &[
            ("ib", "InfiniBand (ib*) first"),
            (
                "^docker,lo,virbr",
                "no ib*: anything but docker*, lo, virbr*",
            ),
            ("docker", "only docker* left"),
            ("lo", "only loopback left"),
            ("virbr", "only virbr* left"),
        ]
    } else {
        &[
            ("ib", "InfiniBand (ib*) first"),
            ("^docker,lo", "no ib*: anything but docker*, lo"),
            ("docker", "only docker* left"),
            ("lo", "only loopback left"),
        ]
    };
    for &(spec, why) in tiers {
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

/// The interfaces NCCL would consider, IPv4 first, in kernel order: each one's first address
/// of each family. On a node of the emulated cluster, that node's virtual table.
pub fn list() -> std::io::Result<Vec<Iface>> {
    if let Some(v) = crate::comm::emu::vnet::current() {
        return Ok(v.net.ifaces(v.node));
    }
    host_list()
}

/// One address entry as getifaddrs reports it: the interface's name, its flags (IFF_UP,
/// IFF_RUNNING, …) and the address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawIface {
    pub name: String,
    pub flags: u32,
    pub addr: IpAddr,
}

/// The entries the NCCL release `style` would consider, IPv4 first, in kernel order. From 2.28
/// an interface must be running (IFF_RUNNING: up, with a carrier, so an idle `docker0` with
/// NO-CARRIER is not one); before, NCCL looked at no flag at all. IPv6 loopback is skipped (as
/// NCCL does) and so are IPv6 link-local addresses (they need a scope to be dialled).
pub fn candidates(raw: &[RawIface], style: Style) -> Vec<Iface> {
    let running = libc::IFF_RUNNING as u32;
    let keep = |r: &&RawIface| {
        if style.virbr_last_and_running_only() && r.flags & running == 0 {
            return false;
        }
        match r.addr {
            IpAddr::V4(_) => true,
            IpAddr::V6(ip) => !ip.is_loopback() && ip.segments()[0] & 0xffc0 != 0xfe80,
        }
    };
    let iface = |r: &RawIface| Iface {
        name: r.name.clone(),
        addr: r.addr,
    };
    let v4 = raw.iter().filter(keep).filter(|r| r.addr.is_ipv4());
    let v6 = raw.iter().filter(keep).filter(|r| r.addr.is_ipv6());
    v4.chain(v6).map(iface).collect()
}

/// This host's interfaces (getifaddrs), as the imitated release would consider them.
pub fn host_list() -> std::io::Result<Vec<Iface>> {
    Ok(candidates(&host_raw()?, crate::comm::emu::log::profile()))
}

/// Every IPv4 and IPv6 address entry of this host (getifaddrs), with its interface's flags.
pub fn host_raw() -> std::io::Result<Vec<RawIface>> {
    let list = nix::ifaddrs::getifaddrs()?;
    Ok(list
        .filter_map(|ifa| {
            let sa = ifa.address?;
            let addr = if let Some(sin) = sa.as_sockaddr_in() {
                IpAddr::V4(sin.ip())
            } else {
                IpAddr::V6(sa.as_sockaddr_in6()?.ip())
            };
            Some(RawIface {
                name: ifa.interface_name,
                // The kernel's unsigned ifa_flags, as nix hands them back (a c_int of bits).
                flags: ifa.flags.bits() as u32,
                addr,
            })
        })
        .collect())
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

    const UP: u32 = libc::IFF_UP as u32;
    const RUNNING: u32 = libc::IFF_UP as u32 | libc::IFF_RUNNING as u32;

    fn raw(list: &[(&str, u32, &str)]) -> Vec<RawIface> {
        list.iter()
            .map(|(n, f, a)| RawIface {
                name: n.to_string(),
                flags: *f,
                addr: a.parse().expect("ip"),
            })
            .collect()
    }

    fn names(v: &[Iface]) -> Vec<&str> {
        v.iter().map(|i| i.name.as_str()).collect()
    }

    fn first_as(list: &[Iface], spec: Option<&str>, style: Style) -> String {
        select_as(list, spec, style)
            .map(|(v, _)| v[0].name.clone())
            .unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn virbr_is_an_ordinary_nic_before_2_28_and_last_from_2_28() {
        let host = ifs(&[("lo", "127.0.0.1"), ("virbr0", "192.168.122.1")]);
        assert_eq!(first_as(&host, None, Style::V2_21), "virbr0");
        assert_eq!(first_as(&host, None, Style::V2_27), "virbr0");
        assert_eq!(first_as(&host, None, Style::NEWEST), "lo");
        let with_eth = ifs(&[
            ("virbr0", "192.168.122.1"),
            ("eth0", "10.0.0.1"),
            ("lo", "127.0.0.1"),
        ]);
        // Before 2.28 both are "anything but docker and lo", in kernel order.
        let (v, why) = select_as(&with_eth, None, Style::V2_27).expect("found");
        assert_eq!(names(&v), ["virbr0", "eth0"]);
        assert!(
            why.contains("anything but docker*, lo") && !why.contains("virbr"),
            "{why}"
        );
        let (v, _) = select_as(&with_eth, None, Style::NEWEST).expect("found");
        assert_eq!(names(&v), ["eth0"]);
        let only_virbr = ifs(&[("virbr0", "192.168.122.1")]);
        assert_eq!(first_as(&only_virbr, None, Style::NEWEST), "virbr0");
    }

    #[test]
    fn docker_then_lo_in_every_release() {
        let host = ifs(&[("lo", "127.0.0.1"), ("docker0", "172.17.0.1")]);
        for style in [Style::V2_21, Style::V2_27, Style::NEWEST] {
            assert_eq!(first_as(&host, None, style), "docker0", "{style}");
        }
    }

    #[test]
    fn from_2_28_only_running_interfaces_are_candidates() {
        // An idle docker0 (up, NO-CARRIER: not running), a down eth1, a running eth0 and lo.
        let host = raw(&[
            ("lo", RUNNING | libc::IFF_LOOPBACK as u32, "127.0.0.1"),
            ("docker0", UP, "172.17.0.1"),
            ("eth1", 0, "10.1.0.1"),
            ("eth0", RUNNING, "10.0.0.1"),
        ]);
        assert_eq!(names(&candidates(&host, Style::NEWEST)), ["lo", "eth0"]);
        assert_eq!(
            names(&candidates(&host, Style::V2_27)),
            ["lo", "docker0", "eth1", "eth0"]
        );
        // With eth0 gone too, 2.28 falls to lo; 2.27 still takes the idle docker0.
        let no_eth = raw(&[("lo", RUNNING, "127.0.0.1"), ("docker0", UP, "172.17.0.1")]);
        assert_eq!(
            first_as(&candidates(&no_eth, Style::NEWEST), None, Style::NEWEST),
            "lo"
        );
        assert_eq!(
            first_as(&candidates(&no_eth, Style::V2_27), None, Style::V2_27),
            "docker0"
        );
    }

    #[test]
    fn candidates_put_ipv4_first_and_skip_ipv6_loopback_and_link_local() {
        let host = raw(&[
            ("lo", RUNNING, "::1"),
            ("eth0", RUNNING, "fe80::1"),
            ("eth0", RUNNING, "2001:db8::1"),
            ("lo", RUNNING, "127.0.0.1"),
            ("eth0", RUNNING, "10.0.0.1"),
        ]);
        let v = candidates(&host, Style::NEWEST);
        let addrs: Vec<String> = v.iter().map(|i| i.addr.to_string()).collect();
        assert_eq!(addrs, ["127.0.0.1", "10.0.0.1", "2001:db8::1"]);
    }

    #[test]
    fn this_machine_has_loopback() {
        let l = list().expect("getifaddrs");
        assert!(l.iter().any(|i| i.addr.is_loopback()), "{l:?}");
    }
}
