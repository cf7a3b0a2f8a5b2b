//! The checks `analyze` runs, one function each: what the log lines show and the fix.

use super::*;

/// Docker's default bridge network (172.17.0.0/16): a container without host networking
/// sees its end as `eth0` with such an address, which name-based exclusion cannot catch.
pub(super) fn bridge_addr(ip: &str) -> bool {
    ip.starts_with("172.17.")
}

pub(super) fn container_bridge(hosts: &BTreeSet<&str>, uses: &[IfaceUse], out: &mut Vec<Finding>) {
    if hosts.len() < 2 {
        return;
    }
    let bad: Vec<&IfaceUse> = uses
        .iter()
        .filter(|u| !host_local_iface(&u.name) && bridge_addr(&u.addr))
        .collect();
    if bad.is_empty() {
        return;
    }
    let names: BTreeSet<&str> = bad.iter().map(|u| u.name.as_str()).collect();
    let addrs: BTreeSet<&str> = bad.iter().map(|u| u.addr.as_str()).collect();
    let bad_hosts: BTreeSet<&str> = bad.iter().map(|u| u.line.host).collect();
    // The first line per host is evidence enough.
    let mut seen = BTreeSet::new();
    let mut evidence: Vec<_> = bad
        .iter()
        .filter(|u| seen.insert(u.line.host))
        .map(|u| u.line.evidence())
        .collect();
    evidence.sort();
    evidence.dedup();
    out.push(Finding {
        severity: Severity::Error,
        confirm: None,
        messages: Vec::new(),
        kind: Kind::ContainerBridge,
        summary: format!(
            "{} advertised {} on {} ({}): Docker's default bridge network, private to each host, \
            so the other hosts cannot reach it (or reach a container of their own). These ranks \
            run in containers without host networking; NCCL skips docker* and lo by name, but \
            inside the container the bridge is called {}",
            join(bad.iter().map(|u| u.what).collect::<BTreeSet<_>>()),
            join(&addrs),
            join(&names),
            join(&bad_hosts),
            join(&names),
        ),
        evidence,
        fix: "Start the containers with the host's network (`docker run --network=host`; in \
             Kubernetes `hostNetwork: true` or a CNI with routable pod addresses), then set \
             NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME to the fabric NIC as usual."
            .to_string(),
    });
}

/// A P2P-disabling setting: `NCCL_P2P_DISABLE set by environment to 1` (src/graph/paths.cc
/// prints it without a trailing '.'; NCCL_PARAM values end in '.') or
/// `NCCL_P2P_LEVEL set by environment to LOC`.
pub(super) fn p2p_off_env(m: &Msg) -> bool {
    env_is_one(m, "NCCL_P2P_DISABLE")
        || env_setting(m, "NCCL_P2P_LEVEL").is_some_and(|v| v.trim_end_matches('.') == "LOC")
}

/// A line that says this host has NVSwitch: `NVLS multicast support is available on dev 0
/// (NVLS_NCHANNELS 16)` (src/transport/nvls.cc@v2.27.3-1). A `via P2P/…` line does not say
/// whether the path is NVLink or PCIe, so NVLS is the only proof a log gives.
pub(super) fn nvlink_hint(msg: &str) -> bool {
    msg.starts_with("NVLS multicast support is available")
}

pub(super) fn shm_fallback(lines: &[Line], out: &mut Vec<Finding>) {
    // Hosts whose P2P is switched off by a variable are the p2p-disabled finding's.
    let p2p_off: BTreeSet<&str> = lines
        .iter()
        .filter(|l| p2p_off_env(l.m))
        .map(|l| l.host)
        .collect();
    let mut per: BTreeMap<&str, (usize, usize, Option<&Line>)> = BTreeMap::new();
    for l in lines {
        match parse_transport(l.m) {
            Some((Transport::Shm, _)) => {
                let e = per.entry(l.host).or_default();
                e.0 += 1;
                e.2.get_or_insert(l);
            }
            Some((Transport::P2p, _)) => per.entry(l.host).or_default().1 += 1,
            _ => {}
        }
    }
    for (host, (shm, p2p, first)) in per {
        let Some(first) = first else { continue };
        if p2p > 0 || p2p_off.contains(host) {
            continue;
        }
        let mut evidence = vec![first.evidence()];
        // NVML's verdict, where NCCL printed it (src/graph/paths.cc).
        evidence.extend(
            lines
                .iter()
                .filter(|l| l.host == host && l.msg.starts_with("P2P is disabled between"))
                .take(2)
                .map(|l| l.evidence()),
        );
        let nvlink = lines.iter().find(|l| l.host == host && nvlink_hint(l.msg));
        if let Some(l) = nvlink {
            evidence.push(l.evidence());
        }
        evidence.sort();
        evidence.dedup();
        let why = if nvlink.is_some() {
            "this machine has NVSwitch (NVLS is available), so its GPUs should talk over NVLink: \
            expect a fraction of the bandwidth (busbw in the tens of GB/s instead of hundreds)"
        } else {
            "every byte between these GPUs is staged through host memory, at PCIe speed or less"
        };
        out.push(Finding {
            severity: Severity::Error,
            confirm: None,
            messages: Vec::new(),
            kind: Kind::ShmFallback,
            summary: format!(
                "on {host} all {shm} same-host connection(s) went via SHM and none via P2P, with \
                no NCCL_P2P_DISABLE or NCCL_P2P_LEVEL set: {why}"
            ),
            evidence,
            fix: "Find out why GPU peer-to-peer is unavailable: `nvidia-smi topo -m` (NV# \
                 between the GPUs? PCIe pairs beyond PXB use SHM by default), `nvidia-smi nvlink \
                 --status`, on NVSwitch machines `systemctl status nvidia-fabricmanager`, on \
                 PCIe machines ACS and the IOMMU (and P2P support in a VM); ranks in separate \
                 containers need a shared /dev/shm (--ipc=host)."
                .to_string(),
        });
    }
}

pub(super) fn local_interface(
    hosts: &BTreeSet<&str>,
    uses: &[IfaceUse],
    ifname_env: &[(&Line, &str)],
    out: &mut Vec<Finding>,
) {
    if hosts.len() < 2 {
        return;
    }
    let bad: Vec<&IfaceUse> = uses.iter().filter(|u| host_local_iface(&u.name)).collect();
    if bad.is_empty() {
        return;
    }
    let names: BTreeSet<&str> = bad.iter().map(|u| u.name.as_str()).collect();
    let bad_hosts: BTreeSet<&str> = bad.iter().map(|u| u.line.host).collect();
    let addrs: BTreeSet<&str> = bad.iter().map(|u| u.addr.as_str()).collect();
    let whats: BTreeSet<&str> = bad.iter().map(|u| u.what).collect();
    let summary = format!(
        "{} chose {} ({}) on {} while the job spans {} hosts ({}): these interfaces exist on \
         every host and never leave it, so a peer that dials {} reaches its own machine or nothing",
        join(&whats),
        join(&names),
        join(&addrs),
        join(&bad_hosts),
        hosts.len(),
        join(hosts),
        join(&addrs),
    );
    let mut fix = "Set NCCL_SOCKET_IFNAME to the fabric NIC between the nodes (the one whose \
                   address the other hosts can reach, e.g. NCCL_SOCKET_IFNAME=eth0) on every \
                   node, or exclude the host-local ones with NCCL_SOCKET_IFNAME=^docker0,lo; \
                   set GLOO_SOCKET_IFNAME the same way."
        .to_string();
    let mut evidence: Vec<_> = bad.iter().map(|u| u.line.evidence()).collect();
    let excl: Vec<&(&Line, &str)> = ifname_env
        .iter()
        .filter(|(_, v)| v.starts_with('^') && !v.contains("lo"))
        .collect();
    if let Some((l, v)) = excl.first()
        && names.contains("lo")
    {
        fix.push_str(&format!(
            " NCCL_SOCKET_IFNAME={v} excludes docker but not lo, so NCCL fell to lo: write \
             ^docker0,lo or name the fabric NIC."
        ));
        evidence.push(l.evidence());
    }
    evidence.sort();
    evidence.dedup();
    out.push(Finding {
        severity: Severity::Error,
        confirm: None,
        messages: Vec::new(),
        kind: Kind::LocalInterface,
        summary,
        evidence,
        fix,
    });
}

pub(super) fn names_and_subnets(uses: &[IfaceUse], out: &mut Vec<Finding>) {
    // Per host, the fabric interfaces its ranks chose (host-local ones are reported above).
    let mut per_host: BTreeMap<&str, Vec<&IfaceUse>> = BTreeMap::new();
    for u in uses.iter().filter(|u| !host_local_iface(&u.name)) {
        per_host.entry(u.line.host).or_default().push(u);
    }
    if per_host.len() < 2 {
        return;
    }
    let names: BTreeMap<&str, BTreeSet<&str>> = per_host
        .iter()
        .map(|(h, us)| (*h, us.iter().map(|u| u.name.as_str()).collect()))
        .collect();
    let distinct: BTreeSet<&BTreeSet<&str>> = names.values().collect();
    // The first line per host and interface name is evidence enough.
    let first_per = |key: &dyn Fn(&IfaceUse) -> String| -> Vec<(String, usize, String)> {
        let mut seen = BTreeSet::new();
        let mut ev = Vec::new();
        for us in per_host.values() {
            for u in us {
                if seen.insert((u.line.host, key(u))) {
                    ev.push(u.line.evidence());
                }
            }
        }
        ev.sort();
        ev.dedup();
        ev
    };
    if distinct.len() > 1 {
        let all: BTreeSet<&str> = names.values().flatten().copied().collect();
        let per = join(names.iter().map(|(h, n)| format!("{} on {h}", join(n))));
        let list = all.iter().copied().collect::<Vec<_>>().join(",");
        out.push(Finding {
            severity: Severity::Error,
            confirm: None,
            messages: Vec::new(),
            kind: Kind::IfaceNamesDiffer,
            summary: format!(
                "the hosts chose interfaces with different names ({per}): one \
                 NCCL_SOCKET_IFNAME value must match the fabric NIC on every host"
            ),
            evidence: first_per(&|u| u.name.clone()),
            fix: format!(
                "List every name: NCCL_SOCKET_IFNAME={list} (a comma-separated list of \
                 prefixes), or give each node its exact name (NCCL_SOCKET_IFNAME==eth0 on one, \
                 ==eno1 on the other, e.g. in a per-node /etc/nccl.conf); the same for \
                 GLOO_SOCKET_IFNAME."
            ),
        });
    }
    let nets: BTreeMap<&str, BTreeSet<String>> = per_host
        .iter()
        .map(|(h, us)| (*h, us.iter().filter_map(|u| prefix24(&u.addr)).collect()))
        .filter(|(_, s): &(&str, BTreeSet<String>)| !s.is_empty())
        .collect();
    let distinct_nets: BTreeSet<&BTreeSet<String>> = nets.values().collect();
    if nets.len() > 1 && distinct_nets.len() > 1 {
        let per = join(
            nets.iter()
                .map(|(h, n)| format!("{} on {h}", join(n.iter().map(|p| format!("{p}.0/24"))))),
        );
        out.push(Finding {
            severity: Severity::Error,
            confirm: None,
            messages: Vec::new(),
            kind: Kind::SubnetsDiffer,
            summary: format!(
                "the hosts chose addresses in different /24 networks ({per}): the ranks may \
                 be on NICs that cannot reach each other"
            ),
            evidence: first_per(&|u| prefix24(&u.addr).unwrap_or_default()),
            fix: "Check with `ip -br addr` on each node which NIC carries the network between \
                  the nodes and name exactly that one in NCCL_SOCKET_IFNAME on every node \
                  (a list like eth0,eno1 when the names differ, or =NAME for an exact match); \
                  if two NICs share a subnet, fix the netmask or route metrics."
                .to_string(),
        });
    }
}

pub(super) fn connect_retries(lines: &[Line], out: &mut Vec<Finding>) {
    for ((addr, _), a) in retry_loops(lines) {
        out.push(retry_finding(&addr, &a));
    }
}

/// One connect-retry loop: the lines of one address dialled (or of one host, where the
/// release does not print the address), and the give-up that ended it.
struct RetryLoop<'a> {
    first: &'a Line<'a>,
    last: &'a Line<'a>,
    count: usize,
    max_k: u64,
    n: u64,
    legacy: bool,
    errors: BTreeSet<String>,
    hosts: BTreeSet<&'a str>,
    gave_up: Option<&'a Line<'a>>,
}

/// The retry loops in `lines`, keyed by (address, "") or ("", host).
fn retry_loops<'a>(lines: &'a [Line<'a>]) -> BTreeMap<(String, String), RetryLoop<'a>> {
    // A process that names the address in some retry lines needs no address-less group: its
    // lines describe one loop (only a tool imitating several releases at once writes both).
    let named: BTreeSet<(&str, &str, u32)> = lines
        .iter()
        .filter(|l| parse_retry(l.m).is_some_and(|r| r.addr.is_some()))
        .map(|l| (l.file, l.host, l.pid))
        .collect();
    // Keyed by the address dialled, or, where the release does not print it, by the host.
    let key = |addr: &Option<String>, l: &Line| match addr {
        Some(a) => (a.clone(), String::new()),
        None => (String::new(), l.host.to_string()),
    };
    let mut by_addr: BTreeMap<(String, String), RetryLoop> = BTreeMap::new();
    for l in lines {
        let Some(r) = parse_retry(l.m) else {
            continue;
        };
        if r.addr.is_none() && named.contains(&(l.file, l.host, l.pid)) {
            continue;
        }
        let acc = by_addr.entry(key(&r.addr, l)).or_insert(RetryLoop {
            first: l,
            last: l,
            count: 0,
            max_k: 0,
            n: 0,
            legacy: false,
            errors: BTreeSet::new(),
            hosts: BTreeSet::new(),
            gave_up: None,
        });
        acc.last = l;
        acc.count += 1;
        acc.max_k = acc.max_k.max(r.k);
        acc.n = acc.n.max(r.n);
        acc.legacy |= r.legacy;
        acc.errors.insert(r.error);
        acc.hosts.insert(l.host);
    }
    for l in lines {
        if let Some(addr) = parse_give_up(l.m)
            && let Some(acc) = by_addr.get_mut(&key(&addr, l))
        {
            acc.gave_up.get_or_insert(l);
        }
    }
    by_addr
}

/// The finding for one retry loop dialling `addr` (empty where the release does not say).
fn retry_finding(addr: &str, a: &RetryLoop) -> Finding {
    let known = !addr.is_empty();
    let ip = addr.split('<').next().unwrap_or(addr).to_string();
    let local = known && everywhere_addr(&ip);
    let of = if a.n > 0 {
        format!(" (reached {}/{})", a.max_k, a.n)
    } else if a.legacy {
        // ≤ 2.23 prints one line per 1000 refused attempts, 1 ms apart.
        format!(
            " (about {} attempts, {} s; NCCL 2.23 and earlier give up after 20000, about 20 s)",
            a.count * 1000,
            a.count
        )
    } else {
        String::new()
    };
    let target = if known {
        format!("connect to {addr}")
    } else {
        "a connect whose address this NCCL release does not print (2.26 and earlier)".to_string()
    };
    let mut summary = format!(
        "{} kept retrying {target}: {} ({} retry line(s){of})",
        join(&a.hosts),
        join(&a.errors),
        a.count,
    );
    if local {
        summary.push_str(&format!(
            "; {ip} is an address every node has (Docker's docker0 or loopback), so the \
             dialler reaches its own machine, where nothing listens"
        ));
    }
    if a.gave_up.is_some() {
        summary.push_str(
            "; then it gave up (ncclRemoteError), while the ranks waiting for it wait on",
        );
    }
    let fix = retry_fix(known, local, &ip, a);
    let mut evidence = vec![a.first.evidence()];
    if a.last.no != a.first.no || a.last.file != a.first.file {
        evidence.push(a.last.evidence());
    }
    if let Some(g) = a.gave_up {
        evidence.push(g.evidence());
    }
    Finding {
        severity: Severity::Error,
        confirm: None,
        messages: Vec::new(),
        kind: Kind::ConnectRetry,
        summary,
        evidence,
        fix,
    }
}

/// What to do about a retry loop: a host-local address, an unknown one, nothing listening,
/// or no route.
fn retry_fix(known: bool, local: bool, ip: &str, a: &RetryLoop) -> String {
    if local {
        "The listening rank advertised a host-local address: set NCCL_SOCKET_IFNAME to the \
         fabric NIC (or ^docker0,lo) on every node so it advertises an address the others \
         can reach."
            .to_string()
    } else if !known {
        "Find the address it dials: the other ranks' `Bootstrap` and `NET/Socket : Using` \
         lines say what each advertised (a docker0 172.17.x or 127.x address there is the \
         usual cause); NCCL 2.27 and later print the address in this line. Then check that \
         address is on the network between the nodes and that the rank listening there is \
         alive."
            .to_string()
    } else if a.errors.iter().all(|e| e.contains("refused")) {
        format!(
            "{ip} is reachable but nothing listens on that port: check that the rank that \
             should listen there started and is alive (a missing rank, a wrong \
             MASTER_ADDR/--master-addr or port), and that every node uses the same one."
        )
    } else {
        format!(
            "{ip} cannot be reached from {}: check routes and firewalls between the nodes \
             (ping, `nc -zv`), and that NCCL_SOCKET_IFNAME names the NIC on the network \
             between them.",
            join(&a.hosts)
        )
    }
}

pub(super) fn no_socket_interface(
    lines: &[Line],
    ifname_env: &[(&Line, &str)],
    out: &mut Vec<Finding>,
) {
    // From 2.27 a NCCL_SOCKET_IFNAME that matches nothing is no longer refused at once: the
    // bootstrap goes on with an empty address (`ncclSocketInit: connecting to address  with
    // family 0 is neither AF_INET(2) nor AF_INET6(10)`, src/misc/socket.cc at v2.27.7-1).
    let hits: Vec<&Line> = lines
        .iter()
        .filter(|l| {
            matches!(l.m, Msg::NoSocketInterface | Msg::NoSubnetInterface { .. })
                || l.row_id()
                    .is_some_and(|id| id.starts_with("socket-family-invalid"))
        })
        // A container's missing subnet is the container-network finding's.
        .filter(|l| !rests_on(out, l))
        .collect();
    if hits.is_empty() {
        return;
    }
    let mut evidence: Vec<_> = Vec::new();
    let mut values = BTreeSet::new();
    let hosts: BTreeSet<&str> = hits.iter().map(|l| l.host).collect();
    for h in &hits {
        // The setting of the same process, else of the same host, else the one value the
        // whole log sets (a line without its host: a launcher's prefix took its place).
        let only: BTreeSet<&str> = ifname_env.iter().map(|(_, v)| *v).collect();
        if let Some((l, v)) = ifname_env
            .iter()
            .find(|(l, _)| l.file == h.file && l.host == h.host && l.pid == h.pid)
            .or_else(|| ifname_env.iter().find(|(l, _)| l.host == h.host))
            .or_else(|| ifname_env.first().filter(|_| only.len() == 1))
        {
            evidence.push(l.evidence());
            values.insert(*v);
        }
        evidence.push(h.evidence());
    }
    evidence.sort();
    evidence.dedup();
    // With NCCL_SOCKET_IFNAME unset NCCL ends its search at `lo`, which every host has
    // (ncclFindInterfaces: "ib", then NCCL_COMM_ID's subnet, "^docker,lo", "docker", "lo";
    // src/misc/socket.cc at v2.21.5-1). So finding none means a set value matched nothing.
    let ifname = hits
        .iter()
        .any(|l| !matches!(l.m, Msg::NoSubnetInterface { .. }));
    let summary = match (values.is_empty(), ifname) {
        (true, true) => format!(
            "NCCL found no socket interface on {} and stopped at init. Unset, NCCL falls back \
             to any interface and finally to lo, so NCCL_SOCKET_IFNAME (or \
             NCCL_SOCKET_FAMILY) is set to something no interface there matches; the log does \
             not show the value",
            join(&hosts)
        ),
        (true, false) => format!(
            "NCCL found no interface on {} in the subnet of the address it was given \
             (NCCL_COMM_ID)",
            join(&hosts)
        ),
        (false, _) => format!(
            "NCCL_SOCKET_IFNAME={} matches no interface on {}, so NCCL stopped at init (a set \
             value is find-or-fail)",
            join(&values),
            join(&hosts)
        ),
    };
    out.push(Finding {
        severity: Severity::Error,
        confirm: Some(
            "`ip -br addr` where the ranks run (inside the container), and `env | grep \
             NCCL_SOCKET` in the job's environment."
                .into(),
        ),
        messages: Vec::new(),
        kind: if ifname || !values.is_empty() {
            Kind::IfnameNoMatch
        } else {
            Kind::NoSocketInterface
        },
        summary,
        evidence,
        fix: "Run `ip -br addr` on that host and set NCCL_SOCKET_IFNAME to a prefix that \
              matches its fabric NIC (`eth` matches eth0; `=eth0` is exact; `^` excludes; a \
              comma-separated list covers hosts whose names differ)."
            .to_string(),
    });
}

/// What the log shows of InfiniBand/RoCE hardware: an IPoIB interface (`ib0`), NET/IB using
/// a device, a `via NET/IB` connection, or a device NCCL saw and could not open. (An absent
/// device says nothing: `NET/IB : No device found.` is every cloud VM's line.)
fn ib_hardware<'a>(lines: &'a [Line<'a>], uses: &'a [IfaceUse<'a>]) -> Option<&'a Line<'a>> {
    uses.iter()
        .find(|u| u.name.starts_with("ib") || u.name.starts_with("mlx"))
        .map(|u| &u.line)
        .or_else(|| {
            lines.iter().find(|l| {
                (l.msg.starts_with("NET/IB : Using [") && !l.msg.contains("No device"))
                    || l.row_id() == Some("ib-open-device-failed")
                    || l.msg.starts_with("Using network IB")
                    || matches!(
                        parse_transport(l.m),
                        Some((Transport::Net(NetPlugin::Ib), _))
                    )
            })
        })
}

pub(super) fn ib_and_p2p(lines: &[Line], uses: &[IfaceUse], span: Span, out: &mut Vec<Finding>) {
    let ib_hw = ib_hardware(lines, uses);
    let ib_env: Vec<&Line> = lines
        .iter()
        .filter(|l| env_is_one(l.m, "NCCL_IB_DISABLE"))
        .collect();
    let socket: Vec<&Line> = lines
        .iter()
        .filter(|l| l.msg.starts_with("Using network Socket"))
        .collect();
    if !ib_env.is_empty() {
        out.push(ib_disabled(&ib_env, &socket, ib_hw, span));
    } else if span != Span::OneHost {
        out.extend(socket_fallback(lines, uses, &socket, ib_hw, span));
    }
    out.extend(p2p_disabled(lines));
}

const SLOW: &str = "inter-node traffic goes over TCP sockets, far slower than InfiniBand/RoCE";

/// NCCL_IB_DISABLE=1 in the log: an error where IB hardware is in sight across hosts, else a
/// note.
fn ib_disabled(ib_env: &[&Line], socket: &[&Line], ib_hw: Option<&Line>, span: Span) -> Finding {
    let files: BTreeSet<&str> = ib_env.iter().map(|l| l.file).collect();
    let mut evidence: Vec<_> = ib_env.iter().map(|l| l.evidence()).collect();
    evidence.extend(
        socket
            .iter()
            .filter(|l| files.contains(l.file))
            .map(|l| l.evidence()),
    );
    evidence.sort();
    evidence.dedup();
    Finding {
        // Only where the log shows IB hardware is turning it off a cost; else a note.
        severity: if ib_hw.is_some() && span != Span::OneHost {
            Severity::Error
        } else {
            Severity::Note
        },
        confirm: None,
        messages: Vec::new(),
        kind: Kind::IbDisabled,
        summary: format!("NCCL_IB_DISABLE=1 is set: {SLOW}"),
        evidence,
        fix: "NCCL_IB_DISABLE=1 is a diagnostic, not a fix: use it to tell whether the IB \
              transport is at fault, then repair that transport (drivers, NCCL_IB_HCA, \
              ports up with `ibstat`) and remove the variable."
            .to_string(),
    }
}

/// The processes that fell back: "NET/IB : No device found." followed by "Using network
/// Socket", and the first `via NET/Socket` connection of that process. Returns the evidence
/// and the hosts that fell back.
fn fell_back<'a>(
    lines: &'a [Line<'a>],
    socket: &[&'a Line<'a>],
) -> (BTreeSet<(String, usize, String)>, BTreeSet<&'a str>) {
    let mut evidence: BTreeSet<(String, usize, String)> = BTreeSet::new();
    let mut fell: BTreeSet<&str> = BTreeSet::new();
    let no_ib = lines
        .iter()
        .filter(|l| l.msg.starts_with("NET/IB") && l.msg.contains("No device found"));
    // One pass each, per process (file, pid): its `Using network Socket` lines in line
    // order, and its first socket connection. (A search per "No device found" line was
    // quadratic in a long log.)
    let mut socket_by: BTreeMap<(&str, u32), Vec<&Line>> = BTreeMap::new();
    for s in socket {
        socket_by.entry((s.file, s.pid)).or_default().push(s);
    }
    let mut first_socket_conn: BTreeMap<(&str, u32), &Line> = BTreeMap::new();
    for c in lines {
        if matches!(
            parse_transport(c.m),
            Some((Transport::Net(NetPlugin::Socket), _))
        ) {
            first_socket_conn.entry((c.file, c.pid)).or_insert(c);
        }
    }
    for ib in no_ib {
        let key = (ib.file, ib.pid);
        let Some(s) = socket_by.get(&key).and_then(|v| {
            // The first line after this one (lines of one file are in order).
            v.get(v.partition_point(|s| s.no <= ib.no)).copied()
        }) else {
            continue;
        };
        evidence.insert(ib.evidence());
        evidence.insert(s.evidence());
        fell.insert(ib.host);
        if let Some(c) = first_socket_conn.get(&key) {
            evidence.insert(c.evidence());
        }
    }
    (evidence, fell)
}

/// NCCL found no InfiniBand/RoCE device and fell back to sockets, across hosts.
fn socket_fallback(
    lines: &[Line],
    uses: &[IfaceUse],
    socket: &[&Line],
    ib_hw: Option<&Line>,
    span: Span,
) -> Option<Finding> {
    let (mut evidence, fell) = fell_back(lines, socket);
    if evidence.is_empty() {
        return None;
    }
    // An IPoIB interface (ib0) on these hosts means the InfiniBand hardware is there.
    let ipoib: Vec<&IfaceUse> = uses
        .iter()
        .filter(|u| fell.contains(u.line.host) && u.name.starts_with("ib"))
        .collect();
    let ipoib_names: BTreeSet<&str> = ipoib.iter().map(|u| u.name.as_str()).collect();
    if let Some(u) = ipoib.first() {
        evidence.insert(u.line.evidence());
    }
    let ib_hosts: BTreeSet<&str> = lines
        .iter()
        .filter(|l| {
            l.msg.starts_with("Using network IB")
                || matches!(
                    parse_transport(l.m),
                    Some((Transport::Net(NetPlugin::Ib), _))
                )
        })
        .map(|l| l.host)
        .filter(|h| !fell.contains(h))
        .collect();
    let mut summary =
        format!("NCCL found no InfiniBand/RoCE device and fell back to sockets: {SLOW}");
    if !ipoib_names.is_empty() {
        summary.push_str(&format!(
            "; yet {} use(s) the IPoIB interface {}, so InfiniBand is there and the \
             verbs devices are what NCCL cannot see",
            join(&fell),
            join(&ipoib_names)
        ));
    }
    if !ib_hosts.is_empty() {
        summary.push_str(&format!(
            "; {} use(s) IB while {} fell back: every rank should use the same network",
            join(&ib_hosts),
            join(&fell)
        ));
    }
    if let Some(l) = ib_hw {
        evidence.insert(l.evidence());
    }
    // A job across hosts with IB hardware in sight: the fallback costs (an error).
    // A device seen but not opened is the cause itself, whatever the span. Without
    // IB hardware in the log, sockets may be all there is: a note, exit 0.
    let unopened = ib_hw.is_some_and(|l| l.row_id() == Some("ib-open-device-failed"));
    let severity = match (span, ib_hw) {
        (Span::Hosts, Some(_)) => Severity::Error,
        _ if unopened => Severity::Error,
        _ => {
            summary.push_str(
                " (the log shows no InfiniBand/RoCE hardware: if the nodes have none, \
                 sockets are all there is)",
            );
            Severity::Note
        }
    };
    Some(Finding {
        severity,
        confirm: Some(
            "`ibv_devinfo` where the ranks run (inside the container) lists the HCA \
             and its port as PORT_ACTIVE; `ls /dev/infiniband` shows uverbs devices."
                .into(),
        ),
        messages: Vec::new(),
        kind: Kind::SocketFallback,
        summary,
        evidence: evidence.into_iter().collect(),
        fix: "If the nodes have IB or RoCE NICs, make them visible to NCCL: in a \
              container --device=/dev/infiniband, the rdma-core libraries in the image, \
              --ulimit memlock=-1 and --cap-add=IPC_LOCK; check with `ibv_devinfo` \
              where the job runs, and NCCL_IB_HCA if set. If the nodes have none, \
              sockets are expected and this is only a note on speed."
            .to_string(),
    })
}

/// NCCL_P2P_DISABLE=1 or NCCL_P2P_LEVEL=LOC in the log: what it did (SHM connections) and what
/// it costs (an idle NVSwitch).
fn p2p_disabled(lines: &[Line]) -> Option<Finding> {
    let p2p: Vec<&Line> = lines.iter().filter(|l| p2p_off_env(l.m)).collect();
    if p2p.is_empty() {
        return None;
    }
    let hosts: BTreeSet<&str> = p2p.iter().map(|l| l.host).collect();
    let mut evidence: Vec<_> = p2p.iter().map(|l| l.evidence()).collect();
    // What it did: the first SHM connection per host, and an NVLink hint if logged.
    let mut shm = 0;
    let mut shown = BTreeSet::new();
    for l in lines.iter().filter(|l| hosts.contains(l.host)) {
        if matches!(parse_transport(l.m), Some((Transport::Shm, _))) {
            shm += 1;
            if shown.insert(l.host) {
                evidence.push(l.evidence());
            }
        }
    }
    let nvlink = lines
        .iter()
        .find(|l| hosts.contains(l.host) && nvlink_hint(l.msg));
    if let Some(l) = nvlink {
        evidence.push(l.evidence());
    }
    evidence.sort();
    evidence.dedup();
    let mut summary = "P2P is switched off (NCCL_P2P_DISABLE=1 or NCCL_P2P_LEVEL=LOC): \
                       direct GPU-to-GPU transfers (NVLink, PCIe peer-to-peer) are off and \
                       traffic goes through host memory"
        .to_string();
    if shm > 0 {
        summary.push_str(&format!(" ({shm} connection(s) via SHM)"));
    }
    if nvlink.is_some() {
        summary.push_str(
            "; this machine has NVSwitch (NVLS is available), so NVLink sits idle and \
             busbw drops to the tens of GB/s",
        );
    }
    Some(Finding {
        severity: Severity::Error,
        confirm: None,
        messages: Vec::new(),
        kind: Kind::P2pDisabled,
        summary,
        evidence,
        fix: "NCCL_P2P_DISABLE=1 (or NCCL_P2P_LEVEL=LOC) is a diagnostic, not a fix: once \
              the hang is understood (often PCI ACS or the IOMMU blocking peer-to-peer), \
              fix that and remove the variable."
            .to_string(),
    })
}
