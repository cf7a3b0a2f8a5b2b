//! Checks that work on one host's log, the log most threads post: what the job's shape is,
//! virtual interfaces chosen, a container's network, peers that cannot be reached,
//! collectives that differ across ranks, and NCCL releases that differ across hosts.

use super::*;

/// What the log says of the job's extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Span {
    /// One host: `nNodes 1`, or every connection via P2P/SHM and none via NET.
    OneHost,
    /// Several hosts: lines from two or more hosts, a `via NET/…` connection, `nNodes N>1`.
    Hosts,
    /// The log does not say.
    Unknown,
}

/// The job's extent, from every line of every file.
pub(super) fn span(lines: &[Line], hosts: &BTreeSet<&str>) -> Span {
    if hosts.len() > 1 {
        return Span::Hosts;
    }
    let nodes: Vec<u64> = lines
        .iter()
        .filter_map(|l| nccl_log::after(l.msg, "nNodes").and_then(|n| n.parse().ok()))
        .collect();
    if nodes.iter().any(|&n| n > 1) {
        return Span::Hosts;
    }
    let mut local = 0;
    for l in lines {
        match parse_transport(l.m) {
            Some((Transport::Net(_), _)) => {
                return Span::Hosts;
            }
            Some(_) => local += 1,
            None => {}
        }
    }
    if nodes.contains(&1) || local > 0 {
        Span::OneHost
    } else {
        Span::Unknown
    }
}

/// Interfaces that exist to connect containers, VMs or a VPN on one machine: Docker's
/// per-container `veth*` and user bridges `br-*`, libvirt's `virbr*`, LXC's `lxcbr*`,
/// Tailscale's `tailscale*`; and link-local addresses (`fe80::`, `169.254.`), which no router
/// forwards.
fn virtual_iface(name: &str, addr: &str) -> Option<&'static str> {
    let names: [(&str, &str); 5] = [
        ("veth", "a Docker container's end of a veth pair"),
        ("br-", "a Docker user-defined bridge"),
        ("virbr", "libvirt's NAT bridge for VMs"),
        ("lxcbr", "LXC's container bridge"),
        ("tailscale", "a Tailscale VPN tunnel"),
    ];
    if let Some((_, what)) = names.iter().find(|(p, _)| name.starts_with(p)) {
        return Some(what);
    }
    let a = addr.trim_start_matches('[').to_ascii_lowercase();
    (a.starts_with("fe80:") || a.starts_with("169.254.")).then_some("a link-local address")
}

pub(super) fn virtual_interface(span: Span, uses: &[IfaceUse], out: &mut Vec<Finding>) {
    if span == Span::OneHost {
        return;
    }
    let bad: Vec<(&IfaceUse, &str)> = uses
        .iter()
        .filter_map(|u| virtual_iface(&u.name, &u.addr).map(|w| (u, w)))
        .collect();
    let Some((first, what)) = bad.first() else {
        return;
    };
    let mut evidence: Vec<_> = bad.iter().map(|(u, _)| u.line.evidence()).collect();
    evidence.sort();
    evidence.dedup();
    evidence.truncate(6);
    let mut f = Finding::error(
        Kind::VirtualInterface,
        format!(
            "{} uses {}:{} ({what}){}: other hosts cannot reach it, so ranks on other nodes \
             hang dialling it or time out",
            first.what,
            first.name,
            first.addr,
            if span == Span::Hosts {
                " on a job that spans hosts"
            } else {
                ""
            }
        ),
        evidence,
        "Set NCCL_SOCKET_IFNAME to the NIC that joins the nodes (`ip -br addr` shows it; \
         `=eth0` for an exact name, or `^veth,br-,virbr,docker,lo` to exclude the virtual \
         ones), and GLOO_SOCKET_IFNAME to the same for PyTorch's bootstrap.",
    );
    f.confirm = Some(
        "From another node, `nc -vz ADDR PORT` (or ping) the address in the line: a virtual or \
         link-local address does not answer."
            .into(),
    );
    if span == Span::Unknown {
        f.severity = Severity::Note;
        f.summary
            .push_str(" (if the job is on one host only, this is harmless)");
    }
    out.push(f);
}

/// A container on Docker's default network (`eth0` at 172.17.x.y, or any 172.16/12 address)
/// asked to reach a peer no interface of it shares a subnet with.
pub(super) fn container_network(lines: &[Line], uses: &[IfaceUse], out: &mut Vec<Finding>) {
    let Some(miss) = lines
        .iter()
        .find(|l| matches!(l.m, Msg::NoSubnetInterface { .. }))
    else {
        return;
    };
    let in_container = uses.iter().find(|u| {
        u.line.host == miss.host
            && u.addr
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| ip.octets()[0] == 172 && (16..32).contains(&ip.octets()[1]))
    });
    let Some(u) = in_container else { return };
    let mut evidence = vec![u.line.evidence()];
    evidence.extend(
        lines
            .iter()
            .filter(|l| l.host == miss.host && matches!(l.m, Msg::NoSubnetInterface { .. }))
            .map(|l| l.evidence()),
    );
    let mut f = Finding::error(
        Kind::ContainerNetwork,
        format!(
            "{} runs in a container on Docker's bridge network ({}:{}) and has no interface in \
             the peer's subnet: the container cannot see the host's network, so NCCL cannot \
             reach the other nodes",
            if miss.host.is_empty() {
                "this rank"
            } else {
                miss.host
            },
            u.name,
            u.addr
        ),
        evidence,
        "Run the container with the host's network: `docker run --network=host` (Kubernetes: \
         `hostNetwork: true`, or a CNI that gives pods routable addresses). NCCL_SOCKET_IFNAME \
         cannot help: the interface it would need is not inside the container.",
    );
    f.confirm = Some(
        "`ip -br addr` inside the container shows only eth0 at 172.17.x.y; on the host it \
         shows the fabric NIC."
            .into(),
    );
    out.push(f);
}

/// A connect that fails with `No route to host` or times out: the address is wrong, or a
/// firewall or route is in the way (a refusal, by contrast, reaches the host).
/// A connect to a loopback address from a job that is not known to be on one host: a peer
/// advertised `lo` (127.x), which reaches only the dialler's own machine.
fn loopback_dial(lines: &[Line], span: Span, out: &mut Vec<Finding>) {
    if span == Span::OneHost {
        return;
    }
    let to_lo = |a: &str| a.starts_with("127.") || a.starts_with("[::1]") || a.starts_with("::1");
    let hits: Vec<&Line> = lines
        .iter()
        .filter(|l| match l.m {
            Msg::Retry(r) => r.addr.as_deref().is_some_and(to_lo),
            Msg::GaveUp(g) => g.addr.as_deref().is_some_and(to_lo),
            Msg::ConnectFailed { addr, .. } => to_lo(addr),
            _ => false,
        })
        // Lines a connect-retry finding already rests on: it names the address.
        .filter(|l| !rests_on(out, l))
        .collect();
    if hits.is_empty() {
        return;
    }
    let mut f = Finding::error(
        Kind::LocalInterface,
        "a rank dials a loopback address (127.x): a peer advertised `lo`, which on another \
         host leads back to the dialler itself, so the connection fails or reaches the wrong \
         process"
            .into(),
        hits.iter().take(6).map(|l| l.evidence()).collect(),
        "Set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to the interface that joins the nodes \
         (a prefix such as `enp` or `eth`, or `=eth0`), and check that each host's name does \
         not resolve to 127.0.1.1 in /etc/hosts (MASTER_ADDR and the rendezvous use it).",
    );
    if span == Span::Unknown {
        f.severity = Severity::Note;
        f.summary
            .push_str(" (if the job is on one host only, loopback is fine)");
    }
    out.push(f);
}

pub(super) fn unreachable_peer(lines: &[Line], span: Span, out: &mut Vec<Finding>) {
    loopback_dial(lines, span, out);
    let unreachable = |e: &str| {
        let e = e.to_ascii_lowercase();
        e.contains("no route to host")
            || e.contains("timed out")
            || e.contains("network is unreachable")
    };
    let hits: Vec<&Line> = lines
        .iter()
        .filter(|l| match l.m {
            Msg::Retry(r) => unreachable(&r.error),
            Msg::GaveUp(g) => g.timeouts || g.error.as_deref().is_some_and(unreachable),
            Msg::ConnectFailed { error, .. } => unreachable(error),
            _ => false,
        })
        // Retries the connect-retry finding already reports, with their error.
        .filter(|l| {
            !(matches!(l.m, Msg::Retry(_))
                && out.iter().any(|f| {
                    f.kind == Kind::ConnectRetry
                        && f.evidence.iter().any(|(file, _, _)| file == l.file)
                }))
        })
        .collect();
    let Some(first) = hits.first() else { return };
    let mut evidence: Vec<_> = hits.iter().take(6).map(|l| l.evidence()).collect();
    evidence.dedup();
    let mut f = Finding::error(
        Kind::UnreachablePeer,
        format!(
            "connections to a peer fail with no route or time out ({} line(s)): the address a \
             rank advertised is not reachable from here (a firewall dropping NCCL's ports, a \
             missing route, or an interface other hosts cannot reach)",
            hits.len()
        ),
        evidence,
        "Check the address in the line from this node: `ip route get ADDR`, `nc -vz ADDR PORT`; \
         open the ports between the nodes (NCCL uses random high ports: allow the subnet, or \
         pin them) and make NCCL_SOCKET_IFNAME name an interface on the shared subnet.",
    );
    f.confirm = Some(format!(
        "`nc -vz` the address from {}: no answer confirms it.",
        if first.host.is_empty() {
            "this host"
        } else {
            first.host
        }
    ));
    out.push(f);
}

/// NCCL_DEBUG_SUBSYS=COLL lines: every rank's call #opCount on one communicator size must be
/// the same collective with the same count and datatype.
pub(super) fn collective_mismatch(lines: &[Line], out: &mut Vec<Finding>) {
    /// A COLL line and its call: (line, collective, count, datatype).
    type Call<'a> = (&'a Line<'a>, &'a str, u64, u32);
    let mut by: BTreeMap<(u64, u32), Vec<Call>> = BTreeMap::new();
    for l in lines {
        if let Msg::Coll {
            func,
            op_count,
            count,
            datatype,
            nranks,
            ..
        } = l.m
        {
            by.entry((*op_count, *nranks))
                .or_default()
                .push((l, func, *count, *datatype));
        }
    }
    for ((op, nranks), calls) in by {
        let kinds: BTreeSet<(&str, u64, u32)> =
            calls.iter().map(|(_, f, c, d)| (*f, *c, *d)).collect();
        // One process with two calls at this opCount has two communicators of this size (TP
        // and DP, say), whose numbers run apart: nothing to compare.
        let mut procs = BTreeSet::new();
        let one_comm = calls
            .iter()
            .all(|(l, ..)| procs.insert((l.file, l.host, l.pid)));
        if kinds.len() < 2 || !one_comm {
            continue;
        }
        let mut seen = BTreeSet::new();
        let evidence: Vec<_> = calls
            .iter()
            .filter(|(_, f, c, d)| seen.insert((*f, *c, *d)))
            .map(|(l, ..)| l.evidence())
            .collect();
        let shown: Vec<String> = kinds
            .iter()
            .map(|(f, c, d)| format!("{f} of {c} × datatype {d}"))
            .collect();
        out.push(Finding::error(
            Kind::CollectiveMismatch,
            format!(
                "call #{op} (opCount {op:#x}) on a {nranks}-rank communicator is not the same \
                 call on every rank: {}. NCCL does not compare calls across ranks, so this \
                 hangs or sums the wrong bytes",
                shown.join("; ")
            ),
            evidence,
            "Make every rank issue the same collectives in the same order with the same count \
             and datatype: no collective inside a rank-dependent branch, the same tensor shapes \
             on every rank (drop_last or padding for the last batch).",
        ));
        return;
    }
}

/// The NCCL release each host printed (`NCCL version 2.19.3+cuda12.3`); a banner without a
/// host belongs to the nearest NCCL line of its file that has one.
pub(super) fn versions_differ(lines: &[Line], out: &mut Vec<Finding>) {
    let mut per: BTreeMap<String, (String, &Line)> = BTreeMap::new();
    for (i, l) in lines.iter().enumerate() {
        let Msg::Version { version } = l.m else {
            continue;
        };
        let release = version.split('+').next().unwrap_or(version).to_string();
        let near = |it: &mut dyn Iterator<Item = &Line>| {
            it.filter(|n| n.file == l.file && !n.host.is_empty())
                .map(|n| n.host.to_string())
                .next()
        };
        let host = if l.host.is_empty() {
            near(&mut lines[i + 1..].iter())
                .or_else(|| near(&mut lines[..i].iter().rev()))
                .unwrap_or_else(|| l.file.to_string())
        } else {
            l.host.to_string()
        };
        per.entry(host).or_insert((release, l));
    }
    let releases: BTreeSet<&str> = per.values().map(|(r, _)| r.as_str()).collect();
    if releases.len() < 2 {
        return;
    }
    let shown: Vec<String> = per.iter().map(|(h, (r, _))| format!("{h} {r}")).collect();
    let mut evidence: Vec<_> = per.values().map(|(_, l)| l.evidence()).collect();
    evidence.sort();
    let mut f = Finding::error(
        Kind::VersionsDiffer,
        format!(
            "the hosts run different NCCL releases ({}): {}. NCCL's wire protocol and its \
             algorithm choices change between releases, so mixed releases hang or fail at init",
            join(&releases),
            shown.join(", ")
        ),
        evidence,
        "Install one NCCL release everywhere (the same container image, or the same PyTorch \
         wheel, which carries its own libnccl), and check nothing on LD_LIBRARY_PATH or \
         NCCL's plugin path overrides it on some nodes.",
    );
    f.confirm = Some(
        "On every node, `python -c 'import torch; print(torch.cuda.nccl.version())'` or the \
         first `NCCL version` line with NCCL_DEBUG=VERSION."
            .into(),
    );
    out.push(f);
}

/// NCCL_TOPO_FILE or NCCL_GRAPH_FILE set: NCCL reads the machine's topology (or, with
/// NCCL_GRAPH_FILE, its very rings and trees) from a file instead of the machine. A file for
/// another VM size or a subset of GPUs breaks init or picks bad paths. An error where the log
/// shows a WARN besides (something failed); else a note.
pub(super) fn topology_file(lines: &[Line], out: &mut Vec<Finding>) {
    let set: Vec<(&Line, &str, &str)> = lines
        .iter()
        .filter_map(|l| {
            ["NCCL_GRAPH_FILE", "NCCL_TOPO_FILE"]
                .into_iter()
                .find_map(|n| env_setting(l.m, n).map(|v| (l, n, v)))
        })
        .collect();
    let Some((_, name, value)) = set.first() else {
        return;
    };
    let failed = lines.iter().any(|l| l.p.level == nccl_log::Level::Warn);
    let graph = set.iter().any(|(_, n, _)| *n == "NCCL_GRAPH_FILE");
    let mut f = Finding::error(
        Kind::TopoFile,
        format!(
            "{name}={value} is set: NCCL takes {} from that file instead of detecting this \
             machine, so a file written for another machine (another VM size, all GPUs where \
             the job sees a subset) breaks init or picks bad paths{}",
            if graph {
                "its rings and trees (NCCL_GRAPH_FILE is for experiments, not production)"
            } else {
                "the topology"
            },
            if failed {
                ""
            } else {
                " (the log shows no failure, so this is only a note)"
            }
        ),
        set.iter().map(|(l, ..)| l.evidence()).collect(),
        "Unset the variable (images such as Azure's set it in /etc/nccl.conf or the \
         environment) and let NCCL detect the machine; keep a topology file only where it was \
         written for exactly this machine and GPU set.",
    );
    f.confirm = Some(format!(
        "Run once without {name} (and check /etc/nccl.conf, ~/.nccl.conf): if the job then \
         starts, the file was the cause."
    ));
    if !failed {
        f.severity = Severity::Note;
    }
    out.push(f);
}
