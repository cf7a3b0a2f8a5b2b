//! `ringlab doctor --log`: read real `NCCL_DEBUG=INFO` (or TRACE) logs and point out the known
//! misconfigurations, each with the log lines it rests on and the fix. Pure: text in, findings
//! out. Lines look like `host:pid:tid [dev] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>`; the
//! host is what comes before the first ':'.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::nccl_log::warnings::Severity;
use crate::nccl_log::{self, Msg, NetPlugin, Releases, Transport};

pub mod bench;
mod checks;
mod named;
mod one_host;
mod release;
#[cfg(test)]
mod tests;
mod transports;

use checks::*;
use named::*;
use one_host::*;
pub use release::*;
use transports::parse_transport;
pub use transports::*;

/// What a finding is about; its stable name (`local-interface`, …) is what `--json` prints.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumString,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
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
    VirtualInterface,
    ContainerNetwork,
    IfnameNoMatch,
    DuplicateGpu,
    ShmTooSmall,
    IbRetryExceeded,
    IbGdrPci,
    UnreachablePeer,
    RoceGid,
    Memlock,
    CudaOom,
    FabricManager,
    NcclTooOld,
    CollectiveMismatch,
    VersionsDiffer,
    PeerGone,
    ForeignConnection,
    TopoFile,
    InvalidUsage,
    CudaError,
    /// A WARN the table of NCCL's messages names, with no more specific check.
    NcclWarning,
    /// A WARN the table does not know: listed with its line, never dropped.
    UnknownWarning,
}

impl Kind {
    /// Its stable name (`local-interface`, …): the words `--json` prints, from strum.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// One misconfiguration found in the logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: Kind,
    /// `error`: the cause of a failure (exit 1); `note`: worth knowing, not a fault (exit 0).
    pub severity: Severity,
    pub summary: String,
    /// (file, 1-based line number, the line) for every line the finding rests on.
    pub evidence: Vec<(String, usize, String)>,
    pub fix: String,
    /// How to confirm the cause on the machine, where the finding says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirm: Option<String>,
    /// The rows of NCCL's message table behind the finding.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<MessageRef>,
}

impl Finding {
    /// A finding of `kind` at error severity, with no confirmation step or table rows.
    fn error(
        kind: Kind,
        summary: String,
        evidence: Vec<(String, usize, String)>,
        fix: &str,
    ) -> Self {
        Finding {
            kind,
            severity: Severity::Error,
            summary,
            evidence,
            fix: fix.to_string(),
            confirm: None,
            messages: Vec::new(),
        }
    }
}

/// A row of NCCL's message table, as a finding cites it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MessageRef {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub format: String,
    pub family: String,
    pub releases: String,
    /// The newest release's source place: `2.28.9 init.cc:1234`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
}

impl MessageRef {
    fn of(r: &nccl_log::warnings::Row) -> Self {
        MessageRef {
            id: r.id.clone(),
            format: r.format.clone(),
            family: r.family.clone(),
            releases: r.releases.clone(),
            site: r.sites.first().cloned(),
        }
    }
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
    /// A WARN's row in NCCL's message table, and how it matched.
    row: Option<Named>,
}

/// A row of NCCL's message table and how a line matched it.
type Named = (&'static nccl_log::warnings::Row, nccl_log::warnings::Match);

impl Line<'_> {
    /// The id of the table row that names this WARN, where it has one.
    fn row_id(&self) -> Option<&'static str> {
        self.row.and_then(|(r, _)| r.id.as_deref())
    }

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
    row: Option<Named>,
}

/// A WARN's row: by the WARN rows, else by the INFO ones (NCCL prints a WARN as an INFO inside
/// NOWARN, 2.28.9 src/debug.cc:280, and some builds the other way).
fn name_warning(text: &str) -> Option<Named> {
    let table = nccl_log::warnings::Table::shipped();
    table
        .name(nccl_log::Level::Warn, text)
        .or_else(|| table.name(nccl_log::Level::Info, text))
}

/// Every NCCL line of every file, parsed, in order (empty lines, such as the one before each
/// WARN, and other programs' output are skipped). Two kinds of line without NCCL's header are
/// kept as WARNs: the message PyTorch quotes after `Last error:`, and a line that is, whole,
/// one of NCCL's WARN messages (its header lost when it was pasted).
fn parse_files(files: &[(String, String)]) -> Vec<Parsed<'_>> {
    let mut out = Vec::new();
    for (file, text) in files {
        let mut quoted = false;
        for (i, t) in text.lines().enumerate() {
            let after_last_error = std::mem::take(&mut quoted);
            // Each WARN is named once, here (what was named to find it is kept).
            let at = |line: nccl_log::Line, row: Option<Option<Named>>| Parsed {
                file,
                no: i + 1,
                text: t,
                row: row.unwrap_or_else(|| {
                    (line.level == nccl_log::Level::Warn)
                        .then(|| name_warning(&line.text))
                        .flatten()
                }),
                line,
            };
            let c = nccl_log::input::clean(t);
            // PyTorch's message run into one line: `… NCCL version 2.18.5 … Last error: …`.
            if let Some(inline) = nccl_log::input::inline_last_error(&c.text) {
                out.push(at(
                    nccl_log::Line::bare(nccl_log::Level::Warn, &inline),
                    None,
                ));
            }
            match nccl_log::parse_cleaned(&c) {
                Some(l) => out.push(at(l, None)),
                None => {
                    quoted = nccl_log::input::announces_last_error(&c.text);
                    if let Some((l, row)) = bare_warning(&c.text, after_last_error) {
                        out.push(at(l, row));
                    }
                }
            }
        }
    }
    out
}

/// A line that is one of NCCL's WARN messages without NCCL's header: the message PyTorch
/// quotes after `Last error:`, nccl-tests' `HOST: Test CUDA failure common.cu:941 '…'`, or a
/// line that is, whole, a WARN of the table with enough literal text to be sure.
/// With the row that named it where naming is how it was found (None: name it later).
fn bare_warning(text: &str, quoted: bool) -> Option<(nccl_log::Line, Option<Option<Named>>)> {
    let text = text.trim();
    if text.is_empty() || text.len() > 512 {
        return None;
    }
    let warn = |t: &str| nccl_log::Line::bare(nccl_log::Level::Warn, t);
    if quoted {
        return Some((warn(text), None));
    }
    if let Some(t) = nccl_log::input::nccl_tests_failure(text) {
        return Some((warn(t), None));
    }
    nccl_log::warnings::Table::shipped()
        .name(nccl_log::Level::Warn, text)
        // Whole, with enough literal text; or cut (a message split over lines when it was
        // pasted) where the part before its first value is long enough to be NCCL's alone.
        .filter(|(r, how)| match how {
            nccl_log::warnings::Match::Whole => r.literal >= 24,
            nccl_log::warnings::Match::Cut => r.lead_len >= 32,
        })
        .map(|named| (warn(text), Some(Some(named))))
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
            row: p.row,
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
    analyze_report(files).findings
}

/// One WARN line of the logs and the row of NCCL's message table that names it (None: not in
/// the table).
#[derive(Debug, Clone, Serialize)]
pub struct WarnLine {
    pub file: String,
    pub line: usize,
    pub text: String,
    pub named: Option<MessageRef>,
    /// `whole`, or `cut` for a line cut short and named by its start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<nccl_log::warnings::Match>,
}

/// What `doctor --log` reports: the findings, every WARN line named, and how many NCCL lines
/// the files held.
#[derive(Debug, Clone)]
pub struct Report {
    pub findings: Vec<Finding>,
    pub warnings: Vec<WarnLine>,
    /// NCCL lines read per file, in the files' order.
    pub nccl_lines: Vec<usize>,
}

/// [`analyze`], with every WARN line named and the NCCL lines counted.
pub fn analyze_report(files: &[(String, String)]) -> Report {
    let parsed = parse_files(files);
    let nccl_lines = files
        .iter()
        .map(|(f, _)| parsed.iter().filter(|p| p.file == f.as_str()).count())
        .collect();
    let lines = lines_of(&parsed);
    let warnings = warnings(&lines)
        .into_iter()
        .map(|w| WarnLine {
            file: w.line.file.to_string(),
            line: w.line.no,
            text: w.line.text.trim_end().to_string(),
            named: w.row.map(|(r, _)| MessageRef::of(r)),
            matched: w.row.map(|(_, m)| m),
        })
        .collect();
    Report {
        findings: findings(&lines),
        warnings,
        nccl_lines,
    }
}

fn findings(lines: &[Line]) -> Vec<Finding> {
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

    let span = span(lines, &hosts);
    let cx = Context {
        lines,
        hosts: &hosts,
        uses: &uses,
        ifname_env: &ifname_env,
        span,
    };
    let mut out = Vec::new();
    for check in CHECKS {
        (check.run)(&cx, &mut out);
        debug_assert!(
            out.iter()
                .all(|f| CHECKS.iter().any(|c| c.kinds.contains(&f.kind)))
        );
    }
    // Every WARN line no check above rests on, named through NCCL's message table.
    let claimed: BTreeSet<(String, usize)> = out
        .iter()
        .flat_map(|f| f.evidence.iter().map(|(file, no, _)| (file.clone(), *no)))
        .collect();
    named_warnings(lines, &claimed, &mut out);
    out
}

/// Does a finding already rest on this line (cite it as evidence)?
fn rests_on(out: &[Finding], l: &Line) -> bool {
    out.iter().any(|f| {
        f.evidence
            .iter()
            .any(|(file, no, _)| file == l.file && *no == l.no)
    })
}

/// Exit status of `doctor --log`: 1 when any finding is an error, else 0.
pub fn any_error(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.severity == Severity::Error)
}

/// What every check reads: the lines, the hosts, the interfaces in use, NCCL_SOCKET_IFNAME.
struct Context<'a> {
    lines: &'a [Line<'a>],
    hosts: &'a BTreeSet<&'a str>,
    uses: &'a [IfaceUse<'a>],
    ifname_env: &'a [(&'a Line<'a>, &'a str)],
    /// How far the job reaches: one host, several, or the log does not say.
    span: Span,
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
        kinds: &[Kind::ContainerNetwork],
        run: |c, out| container_network(c.lines, c.uses, out),
    },
    Check {
        kinds: &[Kind::NoSocketInterface, Kind::IfnameNoMatch],
        run: |c, out| no_socket_interface(c.lines, c.ifname_env, out),
    },
    Check {
        kinds: &[Kind::IbDisabled, Kind::SocketFallback, Kind::P2pDisabled],
        run: |c, out| ib_and_p2p(c.lines, c.uses, c.span, out),
    },
    Check {
        kinds: &[Kind::VirtualInterface],
        run: |c, out| virtual_interface(c.span, c.uses, out),
    },
    Check {
        kinds: &[Kind::UnreachablePeer, Kind::LocalInterface],
        run: |c, out| unreachable_peer(c.lines, c.span, out),
    },
    Check {
        kinds: &[Kind::CollectiveMismatch],
        run: |c, out| collective_mismatch(c.lines, out),
    },
    Check {
        kinds: &[Kind::VersionsDiffer],
        run: |c, out| versions_differ(c.lines, out),
    },
    Check {
        kinds: &[Kind::TopoFile],
        run: |c, out| topology_file(c.lines, out),
    },
    Check {
        kinds: &[Kind::ShmFallback],
        run: |c, out| shm_fallback(c.lines, out),
    },
];
