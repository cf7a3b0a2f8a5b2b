//! `ringlab doctor --log`: read real `NCCL_DEBUG=INFO` (or TRACE) logs and point out the known
//! misconfigurations, each with the log lines it rests on and the fix. Pure: text in, findings
//! out. Lines look like `host:pid:tid [dev] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>`; the
//! host is what comes before the first ':'.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::nccl_log::{self, Msg, Releases};

mod checks;
mod release;
#[cfg(test)]
mod tests;
mod transports;

use checks::*;
pub use release::*;
use transports::parse_transport;
pub use transports::*;

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
