//! `ringlab doctor --log`: read real `NCCL_DEBUG=INFO` (or TRACE) logs and point out the known
//! misconfigurations, each with the log lines it rests on and the fix. Pure: text in, findings
//! out. Lines look like `host:pid:tid [dev] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>`; the
//! host is what comes before the first ':'.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::nccl_log::{self, Msg, Releases};

/// What a finding is about; its stable name (`local-interface`, …) is what `--json` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    LocalInterface,
    ContainerBridge,
    IfaceNamesDiffer,
    SubnetsDiffer,
    ConnectRetry,
    NoSocketInterface,
    IbDisabled,
    SocketFallback,
    P2pDisabled,
    ShmFallback,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::LocalInterface => "local-interface",
            Kind::ContainerBridge => "container-bridge",
            Kind::IfaceNamesDiffer => "iface-names-differ",
            Kind::SubnetsDiffer => "subnets-differ",
            Kind::ConnectRetry => "connect-retry",
            Kind::NoSocketInterface => "no-socket-interface",
            Kind::IbDisabled => "ib-disabled",
            Kind::SocketFallback => "socket-fallback",
            Kind::P2pDisabled => "p2p-disabled",
            Kind::ShmFallback => "shm-fallback",
        }
    }
}

named!(Kind);

/// One misconfiguration found in the logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: Kind,
    pub summary: String,
    /// (file, 1-based line number, the line) for every line the finding rests on.
    pub evidence: Vec<(String, usize, String)>,
    pub fix: String,
}

/// One NCCL log line: where it is and what it says (read by [`crate::nccl_log`]).
#[derive(Debug, Clone)]
struct Line<'a> {
    file: &'a str,
    no: usize,
    text: &'a str,
    host: &'a str,
    pid: u32,
    /// What follows `NCCL INFO ` / `NCCL WARN ` / `NCCL TRACE `.
    msg: &'a str,
    /// The message, typed.
    m: &'a Msg,
    /// The whole line, parsed.
    p: &'a nccl_log::Line,
}

impl Line<'_> {
    fn evidence(&self) -> (String, usize, String) {
        (
            self.file.to_string(),
            self.no,
            self.text.trim_end().to_string(),
        )
    }
}

/// A file's line, parsed, with where it is.
struct Parsed<'a> {
    file: &'a str,
    no: usize,
    text: &'a str,
    line: nccl_log::Line,
}

/// Every NCCL line of every file, parsed, in order (empty lines, such as the one before each
/// WARN, and other programs' output are skipped).
fn parse_files(files: &[(String, String)]) -> Vec<Parsed<'_>> {
    files
        .iter()
        .flat_map(|(file, text)| {
            text.lines().enumerate().filter_map(move |(i, t)| {
                Some(Parsed {
                    file,
                    no: i + 1,
                    text: t,
                    line: nccl_log::parse_line(t)?,
                })
            })
        })
        .collect()
}

fn lines_of<'a>(parsed: &'a [Parsed<'a>]) -> Vec<Line<'a>> {
    parsed
        .iter()
        .map(|p| Line {
            file: p.file,
            no: p.no,
            text: p.text,
            host: &p.line.host,
            pid: p.line.pid,
            msg: &p.line.text,
            m: &p.line.msg,
            p: &p.line,
        })
        .collect()
}

/// An interface a rank said it uses: `Bootstrap: Using eth0:10.0.0.1<0>`,
/// `Bootstrap : Using [0]docker0:172.17.0.1<0>`, `NET/Socket : Using [0]eth0:10.0.0.1<0>`.
#[derive(Debug, Clone)]
struct IfaceUse<'a> {
    line: Line<'a>,
    what: &'static str,
    name: String,
    addr: String,
}

fn iface_uses<'a>(l: &Line<'a>) -> Vec<IfaceUse<'a>> {
    let Msg::Using { what, ifaces } = l.m else {
        return Vec::new();
    };
    ifaces
        .iter()
        .map(|f| IfaceUse {
            line: l.clone(),
            what: what.name(),
            name: f.name.clone(),
            addr: f.addr.clone(),
        })
        .collect()
}

/// The interfaces a raw NCCL log line says are in use (`Bootstrap: Using …`,
/// `NET/Socket : Using …`): (what, interface, address).
pub fn interfaces_used(line: &str) -> Vec<(String, String, String)> {
    match nccl_log::parse_line(line).map(|l| l.msg) {
        Some(Msg::Using { what, ifaces }) => ifaces
            .into_iter()
            .map(|f| (what.name().to_string(), f.name, f.addr))
            .collect(),
        _ => Vec::new(),
    }
}

/// docker*, lo and virbr* exist on every host and reach nothing beyond it.
fn host_local_iface(name: &str) -> bool {
    name == "lo" || name.starts_with("docker") || name.starts_with("virbr")
}

/// Addresses every node has: Docker's default bridge and loopback.
fn everywhere_addr(ip: &str) -> bool {
    ip.starts_with("172.17.") || ip.starts_with("127.") || ip == "::1" || ip == "[::1]"
}

/// `a.b.c.d` → `a.b.c`; None for anything that is not IPv4.
fn prefix24(ip: &str) -> Option<String> {
    let v: std::net::Ipv4Addr = ip.parse().ok()?;
    let o = v.octets();
    Some(format!("{}.{}.{}", o[0], o[1], o[2]))
}

/// `NAME set by environment to VALUE` (NCCL adds a '.' after numbers).
fn env_setting<'a>(m: &'a Msg, name: &str) -> Option<&'a str> {
    match m {
        Msg::EnvSet { name: n, value } if n == name => Some(value.trim()),
        _ => None,
    }
}

fn env_is_one(m: &Msg, name: &str) -> bool {
    env_setting(m, name).is_some_and(|v| v.trim_end_matches('.') == "1")
}

/// A connect-retry line, in any release's form:
/// - NCCL ≤ 2.23: `Call to connect returned Connection refused, retrying` (one per 1000
///   attempts, no address, no count; src/misc/socket.cc@v2.21.5-1);
/// - 2.24–2.26: `socketPollConnect: connect returned Connection refused, retrying (3/34) after
///   sleep for 300 msec` (no address; @v2.24.3-1);
/// - 2.27 and later: `… connect to 172.17.0.1<43215> returned Connection refused, retrying
///   (3/34) …` (@v2.27.3-1).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Retry {
    addr: Option<String>,
    error: String,
    k: u64,
    n: u64,
    /// The `Call to connect` form: each line stands for 1000 attempts 1 ms apart.
    legacy: bool,
}

fn parse_retry(m: &Msg) -> Option<Retry> {
    let Msg::Retry(r) = m else { return None };
    let (k, n) = r.count.unwrap_or((0, 0));
    Some(Retry {
        addr: r.addr.clone(),
        error: r.error.clone(),
        k,
        n,
        legacy: r.legacy(),
    })
}

/// The dialler gave up (then ncclRemoteError): `socketPollConnect: exceeded retries (20000)`
/// or `exceeded timeouts (3)` (≤ 2.23), `connect returned …, exceeded error retry count (35)`
/// (2.24–2.26), `connect to ADDR returned …, exceeded error retry count after 35 attempts`
/// (2.27+). The address, where the line has one.
fn parse_give_up(m: &Msg) -> Option<Option<String>> {
    match m {
        Msg::GaveUp(g) => Some(g.addr.clone()),
        _ => None,
    }
}

/// Which NCCL release the logs look like they come from, and the lines that say so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseGuess {
    pub summary: String,
    /// Whether every host's lines fit one release range.
    pub consistent: bool,
    pub evidence: Vec<(String, usize, String)>,
}

/// The NCCL release the lines' shapes point to (the bootstrap line, the connect-retry lines,
/// a `NCCL version` line), per host; None when no line tells.
pub fn nccl_release(files: &[(String, String)]) -> Option<ReleaseGuess> {
    let parsed = parse_files(files);
    let lines = lines_of(&parsed);
    // Per host: each distinct shape once, with its first line.
    let mut per_host: BTreeMap<&str, BTreeMap<String, (Releases, &Line)>> = BTreeMap::new();
    for l in &lines {
        if let Some((shape, r)) = l.p.releases() {
            per_host
                .entry(l.host)
                .or_default()
                .entry(shape)
                .or_insert((r, l));
        }
    }
    if per_host.is_empty() {
        return None;
    }
    let mut evidence = Vec::new();
    let mut verdicts: BTreeMap<&str, Option<Releases>> = BTreeMap::new();
    for (host, shapes) in &per_host {
        let mut range = Some(Releases::new(0, Releases::OPEN));
        for (r, l) in shapes.values() {
            range = range.and_then(|x| x.meet(*r));
            evidence.push(l.evidence());
        }
        verdicts.insert(host, range);
    }
    evidence.sort();
    evidence.dedup();
    let shapes = |host: &str| -> String {
        join(
            per_host[host]
                .iter()
                .map(|(shape, (r, _))| format!("{shape} ({r})")),
        )
    };
    // Hosts whose ranges overlap may well run one release: only disjoint ranges disagree.
    let overall = verdicts
        .values()
        .try_fold(Releases::new(0, Releases::OPEN), |acc, v| acc.meet((*v)?));
    let (summary, consistent) = match overall {
        Some(r) => {
            let all: BTreeMap<String, Releases> = per_host
                .values()
                .flat_map(|m| m.iter().map(|(s, (r, _))| (s.clone(), *r)))
                .collect();
            (
                format!(
                    "these logs look like {r}: {}",
                    join(all.iter().map(|(s, r)| format!("{s} ({r})")))
                ),
                true,
            )
        }
        _ => {
            let mixed: Vec<&str> = verdicts
                .iter()
                .filter(|(_, v)| v.is_none())
                .map(|(h, _)| *h)
                .collect();
            let mut parts = Vec::new();
            for h in &mixed {
                parts.push(format!(
                    "{h}'s lines fit no single NCCL release: {} (logs of several releases \
                     mixed, or lines not written by NCCL itself)",
                    shapes(h)
                ));
            }
            let fitting: Vec<String> = verdicts
                .iter()
                .filter_map(|(h, v)| v.map(|r| format!("{h} looks like {r}")))
                .collect();
            if !fitting.is_empty() {
                parts.push(join(&fitting));
            }
            if mixed.is_empty() {
                parts.push(
                    "the hosts run different NCCL releases; every rank of a job should load \
                     the same one"
                        .into(),
                );
            }
            (parts.join("; "), false)
        }
    };
    Some(ReleaseGuess {
        summary,
        consistent,
        evidence,
    })
}

fn join<I: IntoIterator<Item = S>, S: AsRef<str>>(items: I) -> String {
    items
        .into_iter()
        .map(|s| s.as_ref().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Read every file's NCCL lines and return the findings, in a fixed order.
pub fn analyze(files: &[(String, String)]) -> Vec<Finding> {
    let parsed = parse_files(files);
    let lines = lines_of(&parsed);
    let hosts: BTreeSet<&str> = lines
        .iter()
        .map(|l| l.host)
        .filter(|h| !h.is_empty())
        .collect();
    let uses: Vec<IfaceUse> = lines.iter().flat_map(iface_uses).collect();
    let ifname_env: Vec<(&Line, &str)> = lines
        .iter()
        .filter_map(|l| env_setting(l.m, "NCCL_SOCKET_IFNAME").map(|v| (l, v)))
        .collect();

    let cx = Context {
        lines: &lines,
        hosts: &hosts,
        uses: &uses,
        ifname_env: &ifname_env,
    };
    let mut out = Vec::new();
    for check in CHECKS {
        (check.run)(&cx, &mut out);
        debug_assert!(
            out.iter()
                .all(|f| CHECKS.iter().any(|c| c.kinds.contains(&f.kind)))
        );
    }
    out
}

/// What every check reads: the lines, the hosts, the interfaces in use, NCCL_SOCKET_IFNAME.
struct Context<'a> {
    lines: &'a [Line<'a>],
    hosts: &'a BTreeSet<&'a str>,
    uses: &'a [IfaceUse<'a>],
    ifname_env: &'a [(&'a Line<'a>, &'a str)],
}

/// One check of the logs: the findings it can make, and how it looks.
struct Check {
    kinds: &'static [Kind],
    run: fn(&Context, &mut Vec<Finding>),
}

/// The checks, in the order their findings are reported.
const CHECKS: &[Check] = &[
    Check {
        kinds: &[Kind::LocalInterface],
        run: |c, out| local_interface(c.hosts, c.uses, c.ifname_env, out),
    },
    Check {
        kinds: &[Kind::ContainerBridge],
        run: |c, out| container_bridge(c.hosts, c.uses, out),
    },
    Check {
        kinds: &[Kind::IfaceNamesDiffer, Kind::SubnetsDiffer],
        run: |c, out| names_and_subnets(c.uses, out),
    },
    Check {
        kinds: &[Kind::ConnectRetry],
        run: |c, out| connect_retries(c.lines, out),
    },
    Check {
        kinds: &[Kind::NoSocketInterface],
        run: |c, out| no_socket_interface(c.lines, c.ifname_env, out),
    },
    Check {
        kinds: &[Kind::IbDisabled, Kind::SocketFallback, Kind::P2pDisabled],
        run: |c, out| ib_and_p2p(c.lines, c.uses, out),
    },
    Check {
        kinds: &[Kind::ShmFallback],
        run: |c, out| shm_fallback(c.lines, out),
    },
];

/// The transport of one connection, from an init line such as
/// `Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read`, `Channel 00 : 0[0] -> 1[1] via
/// SHM/direct/direct` (2.30: `via SHM/direct`) or `Channel 00/0 : 7[7] -> 8[0] [send] via
/// NET/IB/0/GDRDMA` (NVIDIA/nccl src/transport/p2p.cc, shm.cc, net.cc at v2.27.3-1:
/// `Channel %02d/%d : %d[%d] -> %d[%d] via %s…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// GPU to GPU over NVLink or PCIe (`P2P/CUMEM`, `P2P/IPC`, `P2P/direct pointer`, …).
    P2p,
    /// Through host shared memory (`/dev/shm`).
    Shm,
    /// The InfiniBand/RoCE verbs plugin (`NET/IB/…`).
    NetIb,
    /// TCP sockets (`NET/Socket/…`).
    NetSocket,
    /// Any other network plugin (`NET/<name>/…`).
    NetOther,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::P2p => "P2P",
            Transport::Shm => "SHM",
            Transport::NetIb => "NET/IB",
            Transport::NetSocket => "NET/Socket",
            Transport::NetOther => "NET (other plugin)",
        }
    }
}

/// (transport, the text after `via `) of a `Channel … via …` line.
fn parse_transport(m: &Msg) -> Option<(Transport, &str)> {
    let Msg::Channel(c) = m else { return None };
    let mut parts = c.via.split('/');
    let t = match parts.next()? {
        "P2P" => Transport::P2p,
        "SHM" => Transport::Shm,
        "NET" => match parts.next()? {
            "IB" => Transport::NetIb,
            "Socket" => Transport::NetSocket,
            _ => Transport::NetOther,
        },
        _ => return None,
    };
    Some((t, &c.via))
}

/// The transports one host's logged connections used, counted by kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostTransports {
    pub host: String,
    /// (transport, connections) for each transport seen, in a fixed order.
    pub counts: Vec<(Transport, usize)>,
    /// Network connections that use GPUDirect RDMA (`/GDRDMA`).
    pub gdrdma: usize,
}

/// Per host, how its ranks' connections were made (the `Channel … via …` init lines).
pub fn transports(files: &[(String, String)]) -> Vec<HostTransports> {
    let parsed = parse_files(files);
    let lines = lines_of(&parsed);
    let mut per: BTreeMap<&str, (BTreeMap<Transport, usize>, usize)> = BTreeMap::new();
    for l in &lines {
        if let Some((t, via)) = parse_transport(l.m) {
            let e = per.entry(l.host).or_default();
            *e.0.entry(t).or_default() += 1;
            if via.contains("/GDRDMA") {
                e.1 += 1;
            }
        }
    }
    per.into_iter()
        .map(|(host, (counts, gdrdma))| HostTransports {
            host: host.to_string(),
            counts: counts.into_iter().collect(),
            gdrdma,
        })
        .collect()
}

/// One line of text per host: `n1: 24 P2P, 8 NET/IB (8 with GPUDirect RDMA)`.
pub fn transports_summary(t: &[HostTransports]) -> Vec<String> {
    t.iter()
        .map(|h| {
            let mut s = format!(
                "{}: {}",
                h.host,
                join(h.counts.iter().map(|(t, n)| format!("{n} {}", t.name())))
            );
            if h.gdrdma > 0 {
                s.push_str(&format!(" ({} with GPUDirect RDMA)", h.gdrdma));
            }
            s
        })
        .collect()
}

/// Docker's default bridge network (172.17.0.0/16): a container without host networking
/// sees its end as `eth0` with such an address, which name-based exclusion cannot catch.
fn bridge_addr(ip: &str) -> bool {
    ip.starts_with("172.17.")
}

fn container_bridge(hosts: &BTreeSet<&str>, uses: &[IfaceUse], out: &mut Vec<Finding>) {
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
fn p2p_off_env(m: &Msg) -> bool {
    env_is_one(m, "NCCL_P2P_DISABLE")
        || env_setting(m, "NCCL_P2P_LEVEL").is_some_and(|v| v.trim_end_matches('.') == "LOC")
}

/// A line that says this host has NVSwitch: `NVLS multicast support is available on dev 0
/// (NVLS_NCHANNELS 16)` (src/transport/nvls.cc@v2.27.3-1). A `via P2P/…` line does not say
/// whether the path is NVLink or PCIe, so NVLS is the only proof a log gives.
fn nvlink_hint(msg: &str) -> bool {
    msg.starts_with("NVLS multicast support is available")
}

fn shm_fallback(lines: &[Line], out: &mut Vec<Finding>) {
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

fn local_interface(
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
        kind: Kind::LocalInterface,
        summary,
        evidence,
        fix,
    });
}

fn names_and_subnets(uses: &[IfaceUse], out: &mut Vec<Finding>) {
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

fn connect_retries(lines: &[Line], out: &mut Vec<Finding>) {
    struct Acc<'a> {
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
    let mut by_addr: BTreeMap<(String, String), Acc> = BTreeMap::new();
    for l in lines {
        let Some(r) = parse_retry(l.m) else {
            continue;
        };
        if r.addr.is_none() && named.contains(&(l.file, l.host, l.pid)) {
            continue;
        }
        let acc = by_addr.entry(key(&r.addr, l)).or_insert(Acc {
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
    for ((addr, _), a) in by_addr {
        let known = !addr.is_empty();
        let ip = addr.split('<').next().unwrap_or(&addr).to_string();
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
            "a connect whose address this NCCL release does not print (2.26 and earlier)"
                .to_string()
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
        let fix = if local {
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
        };
        let mut evidence = vec![a.first.evidence()];
        if a.last.no != a.first.no || a.last.file != a.first.file {
            evidence.push(a.last.evidence());
        }
        if let Some(g) = a.gave_up {
            evidence.push(g.evidence());
        }
        out.push(Finding {
            kind: Kind::ConnectRetry,
            summary,
            evidence,
            fix,
        });
    }
}

fn no_socket_interface(lines: &[Line], ifname_env: &[(&Line, &str)], out: &mut Vec<Finding>) {
    let hits: Vec<&Line> = lines
        .iter()
        .filter(|l| matches!(l.m, Msg::NoSocketInterface | Msg::NoSubnetInterface { .. }))
        .collect();
    if hits.is_empty() {
        return;
    }
    let mut evidence: Vec<_> = Vec::new();
    let mut values = BTreeSet::new();
    let hosts: BTreeSet<&str> = hits.iter().map(|l| l.host).collect();
    for h in &hits {
        if let Some((l, v)) = ifname_env
            .iter()
            .find(|(l, _)| l.file == h.file && l.host == h.host && l.pid == h.pid)
            .or_else(|| ifname_env.iter().find(|(l, _)| l.host == h.host))
        {
            evidence.push(l.evidence());
            values.insert(*v);
        }
        evidence.push(h.evidence());
    }
    evidence.sort();
    evidence.dedup();
    let summary = if values.is_empty() {
        format!(
            "NCCL found no usable socket interface on {} and stopped at init",
            join(&hosts)
        )
    } else {
        format!(
            "NCCL_SOCKET_IFNAME={} matches no interface on {}, so NCCL stopped at init (a set \
             value is find-or-fail)",
            join(&values),
            join(&hosts)
        )
    };
    out.push(Finding {
        kind: Kind::NoSocketInterface,
        summary,
        evidence,
        fix: "Run `ip -br addr` on that host and set NCCL_SOCKET_IFNAME to a prefix that \
              matches its fabric NIC (`eth` matches eth0; `=eth0` is exact; `^` excludes; a \
              comma-separated list covers hosts whose names differ)."
            .to_string(),
    });
}

fn ib_and_p2p(lines: &[Line], uses: &[IfaceUse], out: &mut Vec<Finding>) {
    let ib_env: Vec<&Line> = lines
        .iter()
        .filter(|l| env_is_one(l.m, "NCCL_IB_DISABLE"))
        .collect();
    let socket: Vec<&Line> = lines
        .iter()
        .filter(|l| l.msg.starts_with("Using network Socket"))
        .collect();
    let no_ib: Vec<&Line> = lines
        .iter()
        .filter(|l| l.msg.starts_with("NET/IB") && l.msg.contains("No device found"))
        .collect();
    let socket_in = |files: &BTreeSet<&str>| -> Vec<(String, usize, String)> {
        socket
            .iter()
            .filter(|l| files.contains(l.file))
            .map(|l| l.evidence())
            .collect()
    };
    const SLOW: &str = "inter-node traffic goes over TCP sockets, far slower than InfiniBand/RoCE";
    if !ib_env.is_empty() {
        let files: BTreeSet<&str> = ib_env.iter().map(|l| l.file).collect();
        let mut evidence: Vec<_> = ib_env.iter().map(|l| l.evidence()).collect();
        evidence.extend(socket_in(&files));
        evidence.sort();
        evidence.dedup();
        out.push(Finding {
            kind: Kind::IbDisabled,
            summary: format!("NCCL_IB_DISABLE=1 is set: {SLOW}"),
            evidence,
            fix: "NCCL_IB_DISABLE=1 is a diagnostic, not a fix: use it to tell whether the IB \
                  transport is at fault, then repair that transport (drivers, NCCL_IB_HCA, \
                  ports up with `ibstat`) and remove the variable."
                .to_string(),
        });
    } else if !no_ib.is_empty() {
        // Fallen back: "NET/IB : No device found." followed by "Using network Socket", and
        // the first `via NET/Socket` connection of that process.
        let mut evidence: BTreeSet<(String, usize, String)> = BTreeSet::new();
        let mut fell: BTreeSet<&str> = BTreeSet::new();
        // One pass each, per process (file, pid): its `Using network Socket` lines in line
        // order, and its first socket connection. (A search per "No device found" line was
        // quadratic in a long log.)
        let mut socket_by: BTreeMap<(&str, u32), Vec<&Line>> = BTreeMap::new();
        for s in &socket {
            socket_by.entry((s.file, s.pid)).or_default().push(s);
        }
        let mut first_socket_conn: BTreeMap<(&str, u32), &Line> = BTreeMap::new();
        for c in lines {
            if matches!(parse_transport(c.m), Some((Transport::NetSocket, _))) {
                first_socket_conn.entry((c.file, c.pid)).or_insert(c);
            }
        }
        for ib in &no_ib {
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
        if !evidence.is_empty() {
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
                        || matches!(parse_transport(l.m), Some((Transport::NetIb, _)))
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
            out.push(Finding {
                kind: Kind::SocketFallback,
                summary,
                evidence: evidence.into_iter().collect(),
                fix: "If the nodes have IB or RoCE NICs, make them visible to NCCL: in a \
                      container --device=/dev/infiniband, the rdma-core libraries in the image, \
                      --ulimit memlock=-1 and --cap-add=IPC_LOCK; check with `ibv_devinfo` \
                      where the job runs, and NCCL_IB_HCA if set. If the nodes have none, \
                      sockets are expected and this is only a note on speed."
                    .to_string(),
            });
        }
    }
    let p2p: Vec<&Line> = lines.iter().filter(|l| p2p_off_env(l.m)).collect();
    if !p2p.is_empty() {
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
        out.push(Finding {
            kind: Kind::P2pDisabled,
            summary,
            evidence,
            fix: "NCCL_P2P_DISABLE=1 (or NCCL_P2P_LEVEL=LOC) is a diagnostic, not a fix: once \
                  the hang is understood (often PCI ACS or the IOMMU blocking peer-to-peer), \
                  fix that and remove the variable."
                .to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str, text: &str) -> Vec<Finding> {
        analyze(&[(name.to_string(), text.to_string())])
    }

    fn kinds(f: &[Finding]) -> Vec<&'static str> {
        f.iter().map(|f| f.kind.name()).collect()
    }

    #[test]
    fn parses_nccl_lines() {
        let l =
            nccl_log::parse_line("n1:4711:4711 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>")
                .unwrap();
        assert_eq!(
            (l.host.as_str(), l.pid, l.text.as_str()),
            ("n1", 4711, "Bootstrap: Using eth0:10.0.0.1<0>")
        );
        assert!(nccl_log::parse_line("just some output").is_none());
    }

    #[test]
    fn docker0_across_hosts_single_host_fine() {
        let two = "a:1:1 [0] NCCL INFO Bootstrap : Using [0]docker0:172.17.0.1<0>\n\
                   b:2:2 [0] NCCL INFO Bootstrap : Using [0]docker0:172.17.0.1<0>\n";
        let f = one("x.log", two);
        assert_eq!(kinds(&f), ["local-interface"]);
        assert_eq!(f[0].evidence.len(), 2);
        let single = "a:1:1 [0] NCCL INFO Bootstrap: Using lo:127.0.0.1<0>\n";
        assert!(one("x.log", single).is_empty());
    }

    #[test]
    fn names_differ_and_retry() {
        let t = "a:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n\
                 b:2:2 [0] NCCL INFO Bootstrap: Using eno1:10.0.0.2<0>\n\
                 b:2:2 [0] NCCL WARN socketProgress: connect to 10.0.0.1<5000> returned Connection refused, retrying (1/34) after sleep for 100 msec\n\
                 b:2:2 [0] NCCL WARN socketProgress: connect to 10.0.0.1<5000> returned Connection refused, retrying (2/34) after sleep for 200 msec\n";
        let f = one("x.log", t);
        assert_eq!(kinds(&f), ["iface-names-differ", "connect-retry"]);
        assert!(f[0].fix.contains("eno1,eth0"), "{}", f[0].fix);
        assert!(f[1].summary.contains("2/34"), "{}", f[1].summary);
        assert_eq!(f[1].evidence[0].1, 3);
        assert_eq!(f[1].evidence[1].1, 4);
    }

    #[test]
    fn subnets_differ() {
        let t = "a:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n\
                 b:2:2 [0] NCCL INFO Bootstrap: Using eth0:192.168.5.2<0>\n";
        assert_eq!(kinds(&one("x.log", t)), ["subnets-differ"]);
    }

    #[test]
    fn env_lines() {
        let t = "a:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ens5\n\
                 a:1:1 [0] NCCL WARN Bootstrap : no socket interface found\n\
                 a:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.\n\
                 a:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.\n";
        let f = one("x.log", t);
        assert_eq!(kinds(&f), ["no-socket-interface", "p2p-disabled"]);
        assert!(f[0].summary.contains("ens5"));
    }

    #[test]
    fn retry_lines_of_every_release_parse() {
        let legacy = parse_retry(&nccl_log::parse_msg(
            "Call to connect returned Connection refused, retrying",
        ))
        .unwrap();
        assert_eq!((legacy.addr, legacy.legacy, legacy.k), (None, true, 0));
        assert_eq!(legacy.error, "Connection refused");
        let counted = parse_retry(&nccl_log::parse_msg(
            "socketPollConnect: connect returned Connection refused, retrying (3/34) after sleep for 300 msec",
        ))
        .unwrap();
        assert_eq!((counted.addr, counted.k, counted.n), (None, 3, 34));
        let named = parse_retry(&nccl_log::parse_msg(
            "socketPollConnect: connect to 10.0.0.1<5000> returned No route to host, retrying (2/34) after sleep for 200 msec",
        ))
        .unwrap();
        assert_eq!(named.addr.as_deref(), Some("10.0.0.1<5000>"));
        assert_eq!((named.error.as_str(), named.k), ("No route to host", 2));
        assert!(
            parse_retry(&nccl_log::parse_msg(
                "Call to accept returned Connection reset, retrying"
            ))
            .is_none()
        );
        assert_eq!(
            parse_give_up(&nccl_log::parse_msg(
                "socketStartConnect: exceeded retries (20000)"
            )),
            Some(None)
        );
        assert_eq!(
            parse_give_up(&nccl_log::parse_msg(
                "socketPollConnect: connect to 10.0.0.1<5000> returned Connection refused, exceeded error retry count after 35 attempts"
            )),
            Some(Some("10.0.0.1<5000>".into()))
        );
        assert_eq!(parse_give_up(&nccl_log::parse_msg("Init COMPLETE")), None);
    }

    fn release(text: &str) -> ReleaseGuess {
        nccl_release(&[("x.log".to_string(), text.to_string())]).expect("a guess")
    }

    #[test]
    fn the_release_follows_the_line_shapes() {
        let r = release(
            "a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n\
             a:1:2 [0] NCCL INFO Call to connect returned Connection refused, retrying\n",
        );
        assert!(r.consistent);
        assert!(
            r.summary.starts_with("these logs look like NCCL 2.8-2.23:"),
            "{}",
            r.summary
        );
        assert_eq!(r.evidence.len(), 2);
        let r = release("a:1:1 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.1<0>\n");
        assert!(r.summary.contains("NCCL 2.7 or earlier"), "{}", r.summary);
        let r = release(
            "a:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n\
             a:1:1 [0] NCCL INFO socketPollConnect: connect returned Connection refused, retrying (1/34) after sleep for 100 msec\n",
        );
        assert!(
            r.summary.contains("look like NCCL 2.24-2.26"),
            "{}",
            r.summary
        );
        let r = release(
            "a:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n\
             a:1:1 [0] NCCL INFO socketPollConnect: connect to 10.0.0.2<5000> returned Connection refused, retrying (1/34) after sleep for 100 msec\n",
        );
        assert!(
            r.summary.contains("look like NCCL 2.27 or later"),
            "{}",
            r.summary
        );
        let r = release(
            "a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n\
             a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n",
        );
        assert!(r.summary.contains("look like NCCL 2.21:"), "{}", r.summary);
        assert!(
            nccl_release(&[("x".into(), "a:1:1 [0] NCCL INFO Init COMPLETE\n".into())]).is_none()
        );
    }

    #[test]
    fn shapes_of_different_releases_are_called_out() {
        // One host, a 2.21 version line and a 2.24+ bootstrap line.
        let r = release(
            "a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n\
             a:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n",
        );
        assert!(!r.consistent);
        assert!(
            r.summary.contains("fit no single NCCL release"),
            "{}",
            r.summary
        );
        // Two hosts, each consistent, on different releases.
        let r = release(
            "a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n\
             b:2:2 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.2<0>\n",
        );
        assert!(!r.consistent);
        assert!(
            r.summary.contains("a looks like NCCL 2.8-2.23")
                && r.summary.contains("b looks like NCCL 2.24 or later")
                && r.summary.contains("different NCCL releases"),
            "{}",
            r.summary
        );
    }

    #[test]
    fn legacy_retries_without_an_address_are_a_finding_with_the_give_up() {
        let t = "a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n\
                 b:2:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n\
                 b:2:3 [0] NCCL INFO Call to connect returned Connection refused, retrying\n\
                 b:2:3 [0] NCCL INFO Call to connect returned Connection refused, retrying\n\
                 b:2:3 [0] NCCL WARN socketStartConnect: exceeded retries (20000)\n";
        let f = one("x.log", t);
        assert_eq!(kinds(&f), ["connect-retry"]);
        let s = &f[0].summary;
        assert!(s.contains("does not print"), "{s}");
        assert!(s.contains("about 2000 attempts"), "{s}");
        assert!(s.contains("gave up (ncclRemoteError)"), "{s}");
        let lines: Vec<usize> = f[0].evidence.iter().map(|e| e.1).collect();
        assert_eq!(lines, [3, 4, 5]);
        assert!(f[0].fix.contains("advertised"), "{}", f[0].fix);
    }

    #[test]
    fn counted_retries_without_address_group_per_host_and_named_ones_win() {
        let t = "b:2:2 [0] NCCL INFO socketPollConnect: connect returned Connection refused, retrying (1/34) after sleep for 100 msec\n\
                 b:2:2 [0] NCCL INFO socketPollConnect: connect returned Connection refused, retrying (2/34) after sleep for 200 msec\n\
                 b:2:2 [0] NCCL WARN socketPollConnect: connect returned Connection refused, exceeded error retry count (35)\n";
        let f = one("x.log", t);
        assert_eq!(kinds(&f), ["connect-retry"]);
        assert!(f[0].summary.contains("reached 2/34"), "{}", f[0].summary);
        assert!(f[0].summary.contains("gave up"), "{}", f[0].summary);
        // A process whose lines name the address: its address-less lines add nothing.
        let t = "b:2:2 [0] NCCL INFO Call to connect returned Connection refused, retrying\n\
                 b:2:2 [0] NCCL WARN socketProgress: connect to 127.0.0.1<1> returned Connection refused, retrying (1/34) after sleep for 100 msec\n";
        let f = one("x.log", t);
        assert_eq!(kinds(&f), ["connect-retry"]);
        assert!(f[0].summary.contains("127.0.0.1<1>"), "{}", f[0].summary);
    }

    #[test]
    fn transport_lines_of_every_kind_parse() {
        let p = |m: &str| parse_transport(&nccl_log::parse_msg(m)).map(|(t, _)| t);
        assert_eq!(
            p("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read"),
            Some(Transport::P2p)
        );
        assert_eq!(
            p("Channel 02/0 : 0[0] -> 1[1] via P2P/IPC"),
            Some(Transport::P2p)
        );
        assert_eq!(
            p("Channel 00 : 0[0] -> 1[1] via SHM/direct/direct"),
            Some(Transport::Shm)
        );
        assert_eq!(
            p("Channel 00 : 0[0] -> 1[1] via SHM/direct"),
            Some(Transport::Shm)
        );
        assert_eq!(
            p("Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA"),
            Some(Transport::NetIb)
        );
        assert_eq!(
            p("Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0"),
            Some(Transport::NetSocket)
        );
        assert_eq!(
            p("Channel 00/0 : 1[0] -> 0[0] [send] via NET/AWS Libfabric/0"),
            Some(Transport::NetOther)
        );
        assert_eq!(p("Channel 00/24 : 0 1 2 3"), None);
        assert_eq!(p("Connected all rings, use ring PXN 0 GDR 1"), None);
        let t = transports(&[(
            "x".into(),
            "a:1:1 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA\n\
             a:1:1 [0] NCCL INFO Channel 00/0 : 6[6] -> 7[7] via P2P/CUMEM\n"
                .into(),
        )]);
        assert_eq!(
            transports_summary(&t),
            ["a: 1 P2P, 1 NET/IB (1 with GPUDirect RDMA)"]
        );
    }

    #[test]
    fn p2p_level_loc_is_p2p_off_and_shm_alone_is_a_fallback_only_without_p2p() {
        let off = "a:1:1 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC\n\
                   a:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n";
        assert_eq!(kinds(&one("x.log", off)), ["p2p-disabled"]);
        let shm = "a:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct\n";
        assert_eq!(kinds(&one("x.log", shm)), ["shm-fallback"]);
        // A two-socket PCIe box: some pairs P2P, the pairs across sockets SHM, by design.
        let mixed = "a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n\
                     a:2:3 [1] NCCL INFO Channel 00 : 1[1] -> 2[2] via SHM/direct/direct\n";
        assert!(one("x.log", mixed).is_empty());
    }

    #[test]
    fn the_shm_line_tells_2_30_from_earlier() {
        let r = release("a:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct\n");
        assert!(r.summary.contains("NCCL 2.30 or later"), "{}", r.summary);
        let r = release("a:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n");
        assert!(r.summary.contains("NCCL 2.29 or earlier"), "{}", r.summary);
    }

    #[test]
    fn a_bridge_address_on_eth0_across_hosts_is_a_container_without_host_network() {
        let t = "a:1:1 [0] NCCL INFO Bootstrap: Using eth0:172.17.0.2<0>\n\
                 b:2:2 [0] NCCL INFO Bootstrap: Using eth0:172.17.0.2<0>\n";
        let f = one("x.log", t);
        assert_eq!(kinds(&f), ["container-bridge"]);
        assert!(f[0].fix.contains("--network=host"), "{}", f[0].fix);
        // One host alone: the bridge is fine for a single-node job.
        assert!(
            one(
                "x.log",
                "a:1:1 [0] NCCL INFO Bootstrap: Using eth0:172.17.0.2<0>\n"
            )
            .is_empty()
        );
    }
}
