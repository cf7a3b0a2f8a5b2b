//! NCCL's log, as a grammar: one typed [`Msg`] for each line ringlab writes or reads, with
//! [`Msg::format`] for a given release and [`parse_line`] / [`parse_msg`] for any release.
//! The emulated NCCL (comm::log) writes through it; the doctor, the hang lab's analysis and
//! its screen read through it. (The doctor's checks still test a few message prefixes of
//! lines this grammar parses as text: `src/lab/doctor/checks.rs`.)
//!
//! A line is `host:pid:tid [dev] NCCL INFO msg`; a WARN starts with an empty line and carries
//! the source place, `\n[2026-12-03 10:11:12] host:pid:tid [0] misc/socket.cc:582 NCCL WARN msg`
//! (the timestamp from 2.26, on WARN by default: src/debug.cc at v2.26.2-1); a TRACE carries a
//! time in ms and the place; the banner at NCCL_DEBUG=VERSION (and up to 2.21 at INFO too)
//! is bare: `NCCL version 2.21.5+cuda12.4` (src/init.cc showVersion).

pub mod input;
pub mod release;
pub mod warnings;

pub use release::{
    BootstrapShape, PROFILES, Profile, Release, ReleaseError, Releases, RetryPolicy, SUPPORTED,
    Site,
};

/// NCCL_DEBUG_SUBSYS flags (src/include/nccl_common.h at v2.28.9-1).
pub mod subsys {
    pub const INIT: u64 = 0x1;
    pub const COLL: u64 = 0x2;
    pub const P2P: u64 = 0x4;
    pub const SHM: u64 = 0x8;
    pub const NET: u64 = 0x10;
    pub const GRAPH: u64 = 0x20;
    pub const TUNING: u64 = 0x40;
    pub const ENV: u64 = 0x80;
    pub const ALLOC: u64 = 0x100;
    pub const CALL: u64 = 0x200;
    pub const PROXY: u64 = 0x400;
    pub const NVLS: u64 = 0x800;
    pub const BOOTSTRAP: u64 = 0x1000;
    pub const REG: u64 = 0x2000;
    pub const PROFILE: u64 = 0x4000;
    pub const RAS: u64 = 0x8000;
    pub const ALL: u64 = u64::MAX;

    const NAMES: [(&str, u64); 17] = [
        ("INIT", INIT),
        ("COLL", COLL),
        ("P2P", P2P),
        ("SHM", SHM),
        ("NET", NET),
        ("GRAPH", GRAPH),
        ("TUNING", TUNING),
        ("ENV", ENV),
        ("ALLOC", ALLOC),
        ("CALL", CALL),
        ("PROXY", PROXY),
        ("NVLS", NVLS),
        ("BOOTSTRAP", BOOTSTRAP),
        ("REG", REG),
        ("PROFILE", PROFILE),
        ("RAS", RAS),
        ("ALL", ALL),
    ];

    /// NCCL_DEBUG_SUBSYS as NCCL reads it: names, comma-separated, case-insensitive; a leading
    /// `^` inverts; unknown names are ignored (src/debug.cc).
    pub fn parse(spec: &str) -> u64 {
        let (invert, list) = match spec.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, spec),
        };
        let mut mask = if invert { ALL } else { 0 };
        for name in list.split(',') {
            let name = name.trim();
            if let Some((_, m)) = NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
                if invert {
                    mask &= !m;
                } else {
                    mask |= m;
                }
            }
        }
        mask
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    Version,
    Warn,
    Info,
    Trace,
}

impl Level {
    pub fn tag(self) -> &'static str {
        match self {
            Self::Version => "VERSION",
            Self::Warn => "WARN",
            Self::Info => "INFO",
            Self::Trace => "TRACE",
        }
    }
}

/// Which `… : Using …` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UsingWhat {
    Bootstrap,
    NetSocket,
}

impl UsingWhat {
    pub fn name(self) -> &'static str {
        match self {
            Self::Bootstrap => "Bootstrap",
            Self::NetSocket => "NET/Socket",
        }
    }
}

/// One interface in a `Using` line: `eth0:10.0.0.1<0>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Iface {
    pub name: String,
    pub addr: String,
    pub port: u16,
}

impl Iface {
    fn shown(&self) -> String {
        format!("{}:{}<{}>", self.name, self.addr, self.port)
    }
}

/// A connect that failed and will be tried again.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Retry {
    /// `socketPollConnect` (2.24+); None in the ≤ 2.23 line.
    pub func: Option<String>,
    /// `172.17.0.1<43215>` (2.27+).
    pub addr: Option<String>,
    /// `Connection refused`.
    pub error: String,
    /// (k, n) in `retrying (k/n)` (2.24+).
    pub count: Option<(u64, u64)>,
    /// `after sleep for N msec` (2.24+).
    pub sleep_ms: Option<u64>,
}

impl Retry {
    /// The ≤ 2.23 line, which stands for 1000 refused attempts 1 ms apart.
    pub fn legacy(&self) -> bool {
        self.count.is_none()
    }
}

/// The dialler gave up.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GaveUp {
    pub func: String,
    pub addr: Option<String>,
    pub error: Option<String>,
    pub attempts: u64,
    /// ≤ 2.23: after timeouts (`exceeded timeouts (3)`) rather than refusals.
    pub timeouts: bool,
}

/// `Channel 00 : 0[0] -> 1[1] via SHM/direct/direct`,
/// `Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Channel {
    pub channel: u32,
    /// The connection index after `/` (NET lines).
    pub conn: Option<u32>,
    pub from: u32,
    pub from_dev: String,
    pub to: u32,
    pub to_dev: String,
    /// `send` or `receive`.
    pub dir: Option<String>,
    /// `SHM/direct/direct`, `NET/Socket/0`, `P2P/CUMEM`.
    pub via: String,
}

/// Which transport carries a connection's bytes, as NCCL names it: the one type for a log's
/// channel lines, the doctor's counts and ringlab's own CPU transports (whose network is TCP
/// sockets, [`Transport::NET`]). In NCCL's order of preference (src/transport.cc: P2P, SHM,
/// NET; the first that can connect wins), the network by its plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Transport {
    /// GPU to GPU over NVLink or PCIe (`P2P/CUMEM`, `P2P/IPC`, `P2P/direct pointer`, …); on
    /// the CPU backend, single copy between processes of one node.
    P2p,
    /// Through host shared memory (`/dev/shm`).
    Shm,
    /// The network, by plugin (`NET/IB/…`, `NET/Socket/…`, `NET/<name>/…`).
    Net(NetPlugin),
}

/// The network plugin of a `NET/…` connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NetPlugin {
    /// The InfiniBand/RoCE verbs plugin (`NET/IB/…`).
    Ib,
    /// TCP sockets (`NET/Socket/…`).
    Socket,
    /// Any other plugin.
    Other,
}

impl Transport {
    /// NCCL's network over TCP sockets: what ringlab's CPU backend uses between nodes.
    pub const NET: Transport = Transport::Net(NetPlugin::Socket);
    /// One of each kind, in NCCL's order (the network as sockets).
    pub const ALL: [Transport; 3] = [Transport::P2p, Transport::Shm, Transport::NET];

    /// NCCL's word for its kind: `P2P`, `SHM`, `NET`.
    pub fn name(self) -> &'static str {
        match self {
            Transport::P2p => "P2P",
            Transport::Shm => "SHM",
            Transport::Net(_) => "NET",
        }
    }

    /// With the network's plugin: `NET/IB`, `NET/Socket`, `NET (other plugin)`.
    pub fn detail(self) -> &'static str {
        match self {
            Transport::Net(NetPlugin::Ib) => "NET/IB",
            Transport::Net(NetPlugin::Socket) => "NET/Socket",
            Transport::Net(NetPlugin::Other) => "NET (other plugin)",
            t => t.name(),
        }
    }

    /// Its place among the kinds ([`Transport::ALL`]): 0, 1, 2.
    pub fn kind_index(self) -> usize {
        match self {
            Transport::P2p => 0,
            Transport::Shm => 1,
            Transport::Net(_) => 2,
        }
    }

    /// The transport a channel line's `via` text names (`P2P/CUMEM`, `SHM/direct/direct`,
    /// `NET/IB/0/GDRDMA`); None for a word NCCL does not use.
    pub fn from_via(via: &str) -> Option<Self> {
        let mut parts = via.split('/');
        Some(match parts.next()? {
            "P2P" => Transport::P2p,
            "SHM" => Transport::Shm,
            "NET" => Transport::Net(match parts.next() {
                Some("IB") => NetPlugin::Ib,
                Some("Socket") => NetPlugin::Socket,
                _ => NetPlugin::Other,
            }),
            _ => return None,
        })
    }
}

/// As the doctor's JSON has always named them: `p2p`, `shm`, `net_ib`, `net_socket`,
/// `net_other`.
impl serde::Serialize for Transport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            Transport::P2p => "p2p",
            Transport::Shm => "shm",
            Transport::Net(NetPlugin::Ib) => "net_ib",
            Transport::Net(NetPlugin::Socket) => "net_socket",
            Transport::Net(NetPlugin::Other) => "net_other",
        })
    }
}

impl Channel {
    /// The transport this line names; None for a `via` NCCL does not write.
    pub fn transport(&self) -> Option<Transport> {
        Transport::from_via(&self.via)
    }
}

/// `ncclCommInitRank comm 0x… rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x… - Init START`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Init {
    pub complete: bool,
    pub func: String,
    pub comm: u64,
    pub rank: u32,
    pub nranks: u32,
    pub dev: u32,
    pub bus: u64,
    pub comm_id: u64,
}

/// One NCCL message (what follows `NCCL INFO ` / `NCCL WARN `).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Msg {
    /// `NCCL version 2.21.5+cuda12.4`.
    Version {
        version: String,
    },
    /// `NCCL_SOCKET_IFNAME set by environment to docker0`.
    EnvSet {
        name: String,
        value: String,
    },
    /// `Bootstrap: Using eth0:10.0.0.1<0>`, `NET/Socket : Using [0]eth0:10.0.0.1<0>`.
    Using {
        what: UsingWhat,
        ifaces: Vec<Iface>,
    },
    /// `Using network Socket`.
    UsingNetwork {
        name: String,
    },
    Init(Init),
    Retry(Retry),
    GaveUp(GaveUp),
    /// A connect error that is not retried: `socketPollConnect: connect to ADDR failed : ERR`.
    ConnectFailed {
        func: String,
        addr: String,
        error: String,
    },
    /// `Bootstrap : no socket interface found`.
    NoSocketInterface,
    /// `Net : No interface found in the same subnet as remote address 10.0.0.1<29500>`
    /// (NCCL_COMM_ID given; src/misc/socket.cc).
    NoSubnetInterface {
        remote: String,
    },
    Channel(Channel),
    /// `Error: failed to extend /dev/shm/nccl-X to 9637892 bytes, error: No space left on device (28)`
    /// (≤ 2.7: `Error while creating shared memory segment … (size N)`).
    ShmFailed {
        path: String,
        bytes: u64,
        error: Option<(String, i32)>,
    },
    /// `AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..15}` (TUNING).
    Tuning {
        coll: Option<String>,
        bytes: u64,
        algo: String,
        proto: String,
        /// What follows the protocol, verbatim.
        rest: String,
    },
    /// `AllReduce: opCount 0 sendbuff … count 1024 datatype 7 op 0 root 0 comm … [nranks=2] …` (COLL).
    Coll {
        func: String,
        op_count: u64,
        count: u64,
        datatype: u32,
        nranks: u32,
        text: String,
    },
    /// `misc/socket.cc:582 -> 6 (Connection refused)`: an error passing up NCCL's stack.
    ErrorTrace {
        file: String,
        line: u32,
        code: i32,
        errno: Option<String>,
    },
    /// Anything else, verbatim.
    Other(String),
}

/// A rank's address as NCCL writes it: `10.0.0.1<29500>`.
pub fn addr(sa: std::net::SocketAddr) -> String {
    format!("{}<{}>", sa.ip(), sa.port())
}

impl Msg {
    /// The message as `p` prints it.
    pub fn format(&self, p: Profile) -> String {
        self.as_printed_by(p).format_fields(p)
    }

    /// The fields as they are, in `p`'s shapes.
    fn format_fields(&self, p: Profile) -> String {
        match self {
            Msg::Version { version } => format!("NCCL version {version}"),
            Msg::EnvSet { name, value } => format!("{name} set by environment to {value}"),
            Msg::Using { what, ifaces } => using_text(*what, ifaces, p),
            Msg::UsingNetwork { name } => format!("Using network {name}"),
            Msg::Init(i) => i.text(p),
            Msg::Retry(r) => r.text(),
            Msg::GaveUp(g) => g.text(p),
            Msg::ConnectFailed { func, addr, error } => match p.minor() {
                ..=7 => format!("Connect to {addr} failed : {error}"),
                8..=26 => format!("{func}: Connect to {addr} failed : {error}"),
                _ => format!("{func}: connect to {addr} failed : {error}"),
            },
            Msg::NoSocketInterface => "Bootstrap : no socket interface found".into(),
            Msg::NoSubnetInterface { remote } => {
                format!("Net : No interface found in the same subnet as remote address {remote}")
            }
            Msg::Channel(c) => c.text(),
            Msg::ShmFailed { path, bytes, error } => match (p.minor(), error) {
                (..=7, _) => {
                    format!("Error while creating shared memory segment {path} (size {bytes})")
                }
                (8..=21, _) | (_, None) => {
                    format!("Error: failed to extend {path} to {bytes} bytes")
                }
                (_, Some((e, n))) => {
                    format!("Error: failed to extend {path} to {bytes} bytes, error: {e} ({n})")
                }
            },
            Msg::Tuning {
                coll,
                bytes,
                algo,
                proto,
                rest,
            } => {
                let c = coll.as_ref().map(|c| format!("{c}: ")).unwrap_or_default();
                format!("{c}{bytes} Bytes -> Algo {algo} proto {proto}{rest}")
            }
            Msg::Coll { text, .. } => text.clone(),
            Msg::ErrorTrace {
                file,
                line,
                code,
                errno,
            } => match errno {
                Some(e) => format!("{file}:{line} -> {code} ({e})"),
                None => format!("{file}:{line} -> {code}"),
            },
            Msg::Other(s) => s.clone(),
        }
    }

    /// The message as `p` would carry it: what that release does not print is dropped (the
    /// address before 2.27, the count before 2.24, the errno before 2.22).
    pub fn as_printed_by(&self, p: Profile) -> Msg {
        let mut m = self.clone();
        match &mut m {
            Msg::Retry(r) => match p.retry_policy() {
                RetryPolicy::Legacy => {
                    r.func = None;
                    r.addr = None;
                    r.count = None;
                    r.sleep_ms = None;
                }
                RetryPolicy::Counted => r.addr = None,
                RetryPolicy::CountedWithAddress => {}
            },
            Msg::GaveUp(g) => match p.retry_policy() {
                RetryPolicy::Legacy if p.minor() <= 7 => {
                    g.func = String::new();
                    g.attempts = 0;
                    g.timeouts = false;
                }
                RetryPolicy::Legacy => {
                    g.addr = None;
                    g.error = None;
                }
                RetryPolicy::Counted => {
                    g.addr = None;
                    g.timeouts = false;
                }
                RetryPolicy::CountedWithAddress => g.timeouts = false,
            },
            Msg::ConnectFailed { addr, error, .. } if p.minor() <= 7 => {
                // ≤ 2.7 has one line for both: `Connect to ADDR failed : ERR`.
                m = Msg::GaveUp(GaveUp {
                    func: String::new(),
                    addr: Some(addr.clone()),
                    error: Some(error.clone()),
                    attempts: 0,
                    timeouts: false,
                });
            }
            Msg::ShmFailed { error, .. } if p.minor() <= 21 => *error = None,
            Msg::Init(i) if p.minor() <= 7 => {
                i.func.clear();
                i.comm_id = 0;
            }
            Msg::Using {
                what: UsingWhat::Bootstrap,
                ifaces,
            } if p.bootstrap_shape() != BootstrapShape::Indexed => ifaces.truncate(1),
            _ => {}
        }
        m
    }

    /// The subsystem NCCL logs this message under (for NCCL_DEBUG_SUBSYS).
    pub fn subsys(&self, p: Profile) -> u64 {
        use subsys::*;
        match self {
            Msg::EnvSet { .. } => ENV,
            Msg::Using {
                what: UsingWhat::Bootstrap,
                ..
            } if p.minor() >= 24 => BOOTSTRAP,
            Msg::Using {
                what: UsingWhat::NetSocket,
                ..
            }
            | Msg::UsingNetwork { .. } => INIT | NET,
            Msg::Retry(_) if p.minor() >= 27 => NET | INIT,
            Msg::Channel(c) => match c.transport() {
                Some(Transport::Shm) => INIT | SHM,
                Some(Transport::P2p) => INIT | P2P,
                _ => INIT | NET,
            },
            Msg::Tuning { .. } => TUNING,
            Msg::Coll { .. } => COLL,
            Msg::Version { .. } | Msg::Retry(_) | Msg::ErrorTrace { .. } | Msg::Other(_) => ALL,
            _ => INIT,
        }
    }

    /// What this message's shape says about the release that wrote it: (the shape, in
    /// words; the releases that print it). Sources as in [`release`].
    pub fn releases(&self) -> Option<(String, Releases)> {
        let open = Releases::OPEN;
        Some(match self {
            Msg::Version { version } => {
                let r = Release::parse(version).ok()?;
                (
                    format!("`NCCL version {version}`"),
                    Releases::new(r.minor, r.minor),
                )
            }
            Msg::Using {
                what: UsingWhat::Bootstrap,
                ..
            } => return None,
            Msg::Retry(r) if r.legacy() => (
                "`Call to connect returned …, retrying`".into(),
                Releases::new(0, 23),
            ),
            Msg::Retry(r) if r.addr.is_some() => (
                "`connect to ADDR returned …, retrying (k/n)`".into(),
                Releases::new(27, open),
            ),
            Msg::Retry(_) => (
                "`connect returned …, retrying (k/n)` (no address)".into(),
                Releases::new(24, 26),
            ),
            Msg::GaveUp(g) if g.attempts > 0 && g.error.is_none() => {
                ("`exceeded retries/timeouts`".into(), Releases::new(8, 23))
            }
            Msg::GaveUp(g) if g.addr.is_some() && g.attempts > 0 => (
                "`connect to ADDR returned …, exceeded error retry count`".into(),
                Releases::new(27, open),
            ),
            Msg::GaveUp(g) if g.attempts > 0 => (
                "`connect returned …, exceeded error retry count` (no address)".into(),
                Releases::new(24, 26),
            ),
            Msg::Channel(c) if c.transport() == Some(Transport::Shm) => {
                // `via SHM/%s/%s` up to 2.29, `via SHM/direct` from 2.30 (src/transport/shm.cc
                // at v2.29.7-1 and v2.30.7-1).
                if c.via.matches('/').count() >= 2 {
                    ("`via SHM/…/…`".into(), Releases::new(0, 29))
                } else {
                    ("`via SHM/direct`".into(), Releases::new(30, open))
                }
            }
            _ => return None,
        })
    }
}

/// `NET/Socket : Using …` and `Bootstrap : Using …`, as release `p` writes them.
fn using_text(what: UsingWhat, ifaces: &[Iface], p: Profile) -> String {
    let indexed = |ifaces: &[Iface]| {
        ifaces
            .iter()
            .enumerate()
            .map(|(i, f)| format!(" [{i}]{}", f.shown()))
            .collect::<String>()
    };
    match (what, p.bootstrap_shape()) {
        (UsingWhat::NetSocket, _) => format!("NET/Socket : Using{}", indexed(ifaces)),
        (UsingWhat::Bootstrap, BootstrapShape::Indexed) => {
            format!("Bootstrap : Using{}", indexed(ifaces))
        }
        (UsingWhat::Bootstrap, shape) => {
            let sep = if shape == BootstrapShape::Spaced {
                " : "
            } else {
                ": "
            };
            let list: String = ifaces.iter().map(|f| format!(" {}", f.shown())).collect();
            format!("Bootstrap{sep}Using{list}")
        }
    }
}

impl Init {
    /// The init line's text (after `NCCL INFO`), as release `p` writes it.
    fn text(&self, p: Profile) -> String {
        let phase = if self.complete { "COMPLETE" } else { "START" };
        if p.minor() <= 7 {
            format!(
                "comm 0x{:x} rank {} nranks {} cudaDev {} busId {:x} - Init {phase}",
                self.comm, self.rank, self.nranks, self.dev, self.bus
            )
        } else {
            format!(
                "{} comm 0x{:x} rank {} nranks {} cudaDev {} nvmlDev {} busId {:x} commId 0x{:x} - Init {phase}",
                self.func,
                self.comm,
                self.rank,
                self.nranks,
                self.dev,
                self.dev,
                self.bus,
                self.comm_id
            )
        }
    }
}

impl Retry {
    /// The retry line's text: counted (2.24 and later) or legacy.
    fn text(&self) -> String {
        match (self.count, self.sleep_ms) {
            (Some((k, n)), Some(ms)) => {
                let func = self.func.as_deref().unwrap_or("socketPollConnect");
                let target = match &self.addr {
                    Some(a) => format!("connect to {a}"),
                    None => "connect".into(),
                };
                format!(
                    "{func}: {target} returned {}, retrying ({k}/{n}) after sleep for {ms} msec",
                    self.error
                )
            }
            _ => format!("Call to connect returned {}, retrying", self.error),
        }
    }
}

impl GaveUp {
    /// The give-up line's text, as release `p` writes it.
    fn text(&self, p: Profile) -> String {
        let err = self.error.as_deref().unwrap_or("");
        match p.retry_policy() {
            RetryPolicy::Legacy if p.minor() <= 7 => format!(
                "Connect to {} failed : {err}",
                self.addr.as_deref().unwrap_or("")
            ),
            RetryPolicy::Legacy => format!(
                "{}: exceeded {} ({})",
                self.func,
                if self.timeouts { "timeouts" } else { "retries" },
                self.attempts
            ),
            RetryPolicy::Counted => format!(
                "{}: connect returned {err}, exceeded error retry count ({})",
                self.func, self.attempts
            ),
            RetryPolicy::CountedWithAddress => format!(
                "{}: connect to {} returned {err}, exceeded error retry count after {} attempts",
                self.func,
                self.addr.as_deref().unwrap_or(""),
                self.attempts
            ),
        }
    }
}

impl Channel {
    /// `Channel 00/0 : 0[0] -> 1[1] via P2P/IPC`.
    fn text(&self) -> String {
        let ch = match self.conn {
            Some(k) => format!("{:02}/{k}", self.channel),
            None => format!("{:02}", self.channel),
        };
        let dir = self
            .dir
            .as_ref()
            .map(|d| format!(" [{d}]"))
            .unwrap_or_default();
        format!(
            "Channel {ch} : {}[{}] -> {}[{}]{dir} via {}",
            self.from, self.from_dev, self.to, self.to_dev, self.via
        )
    }
}

/// The shape of the bootstrap line, from its raw text (the typed `Using` forgets it).
fn bootstrap_releases(msg: &str) -> Option<(String, Releases)> {
    if msg.starts_with("NET : Using interface ") {
        Some(("`NET : Using interface …`".into(), Releases::new(0, 3)))
    } else if msg.starts_with("Bootstrap : Using [") {
        Some(("`Bootstrap : Using [0]…`".into(), Releases::new(0, 7)))
    } else if msg.starts_with("Bootstrap : Using ") {
        Some(("`Bootstrap : Using …`".into(), Releases::new(8, 23)))
    } else if msg.starts_with("Bootstrap: Using ") {
        Some((
            "`Bootstrap: Using …`".into(),
            Releases::new(24, Releases::OPEN),
        ))
    } else {
        None
    }
}

/// One parsed log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// `[2026-12-03 10:11:12]`, where the line has one.
    pub timestamp: Option<String>,
    /// Empty for a bare banner.
    pub host: String,
    pub pid: u32,
    pub tid: u32,
    pub dev: Option<i32>,
    pub level: Level,
    /// A WARN's or TRACE's `misc/socket.cc:582`.
    pub place: Option<(String, u32)>,
    /// The message text, as written.
    pub text: String,
    pub msg: Msg,
    /// Who the launcher's prefix says wrote it (`[1,0]<stdout>:` → rank 0), where there was one.
    pub source: Option<input::Source>,
}

impl Line {
    /// A message seen without NCCL's header: quoted by PyTorch after `Last error:`, or a line
    /// whose `host:pid:tid [dev] … NCCL WARN` was cut off when it was pasted.
    pub fn bare(level: Level, text: &str) -> Line {
        let text = text.trim().to_string();
        Line {
            timestamp: None,
            host: String::new(),
            pid: 0,
            tid: 0,
            dev: None,
            level,
            place: None,
            msg: parse_msg(&text),
            text,
            source: None,
        }
    }

    /// What this line's shape says about the release that wrote it.
    pub fn releases(&self) -> Option<(String, Releases)> {
        bootstrap_releases(&self.text).or_else(|| self.msg.releases())
    }
}

/// Everything a writer needs besides the message: who writes, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    pub host: String,
    pub pid: u32,
    pub tid: u32,
    pub dev: i32,
}

impl Writer {
    /// The whole line as `p` writes it (no trailing newline; a WARN's leading empty line is
    /// included): `timestamp` is used where the release stamps this level.
    pub fn line(
        &self,
        p: Profile,
        level: Level,
        place: (&str, u32),
        timestamp: Option<&str>,
        msg: &Msg,
    ) -> String {
        let text = msg.format(p);
        let host = format!("{}:{}:{}", self.host, self.pid, self.tid);
        let ts = timestamp.map(|t| format!("{t} ")).unwrap_or_default();
        match level {
            Level::Version => format!("{ts}{text}"),
            Level::Info => format!("{ts}{host} [{}] NCCL INFO {text}", self.dev),
            Level::Warn => format!(
                "\n{ts}{host} [{}] {}:{} NCCL WARN {text}",
                self.dev, place.0, place.1
            ),
            Level::Trace => format!(
                "{ts}{host} [{}] 0.000000 {}:{} NCCL TRACE {text}",
                self.dev, place.0, place.1
            ),
        }
    }
}

const TAGS: [(&str, Level); 3] = [
    (" NCCL INFO ", Level::Info),
    (" NCCL WARN ", Level::Warn),
    (" NCCL TRACE ", Level::Trace),
];

/// `host:pid:tid`, where the host may carry a launcher's prefix (`[default0]:host`, `[1,0]<stderr>:host`).
fn host_pid_tid(tok: &str) -> Option<(String, u32, u32)> {
    let mut it = tok.rsplitn(3, ':');
    let tid = it.next()?.parse().ok()?;
    let pid = it.next()?.parse().ok()?;
    let host = it.next()?;
    let host = match host.rfind("]:") {
        Some(i) => &host[i + 2..],
        None => host,
    };
    let host = match host.rfind(">:") {
        Some(i) => &host[i + 2..],
        None => host,
    };
    (!host.is_empty()).then(|| (host.to_string(), pid, tid))
}

/// One line of an NCCL log, in any release's shape: None for lines that are not NCCL's (an
/// empty line, a program's own output).
pub fn parse_line(raw: &str) -> Option<Line> {
    parse_cleaned(&input::clean(raw))
}

/// [`parse_line`] on a line [`input::clean`] has already taken apart.
pub fn parse_cleaned(cleaned: &input::Cleaned) -> Option<Line> {
    let mut line = parse_clean(&cleaned.text)?;
    line.source = cleaned.source.clone();
    if line.timestamp.is_none() {
        line.timestamp = cleaned.stamp.clone();
    }
    Some(line)
}

/// Before 2.3 (the releases shipped as binaries, 2.0 to 2.2) the level had no `NCCL` before
/// it: `host:pid:tid [0] INFO NET : Using interface eth0:10.0.0.1<0>`. Where `s` has that
/// shape: the tag's offset, the tag and the level.
fn legacy_tag(s: &str) -> Option<(usize, &'static str, Level)> {
    [(" INFO ", Level::Info), (" WARN ", Level::Warn)]
        .into_iter()
        .find_map(|(tag, level)| {
            let at = s.find(tag)?;
            let head: Vec<&str> = s[..at].split_whitespace().collect();
            let last = head.last()?;
            // `host:pid:tid [dev] INFO`, or a WARN pasted from its place on: `file.cc:344 WARN`.
            let who = head.len().checked_sub(2).and_then(|i| head.get(i));
            let dev_and_host = last.starts_with('[')
                && last.ends_with(']')
                && who.is_some_and(|w| host_pid_tid(w).is_some());
            let place = level == Level::Warn
                && last.rsplit_once(':').is_some_and(|(f, l)| {
                    f.contains('.') && !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit())
                });
            (dev_and_host || place).then_some((at, tag, level))
        })
}

/// [`parse_line`] on a line with its prefixes, colour and line end already gone.
fn parse_clean(text: &str) -> Option<Line> {
    if text.trim().is_empty() {
        return None;
    }
    // A line pasted without its `host:pid:tid [dev]` starts at the tag itself.
    let padded;
    let text = if text.starts_with("NCCL ") {
        padded = format!(" {text}");
        padded.as_str()
    } else {
        text
    };
    let Some((at, tag, level)) = TAGS
        .iter()
        .find_map(|(tag, level)| text.find(tag).map(|i| (i, *tag, *level)))
        .or_else(|| legacy_tag(text))
    else {
        // The bare banner (NCCL_DEBUG=VERSION; ≤ 2.21 at INFO), maybe behind a prefix.
        let i = text.find("NCCL version ")?;
        let rest = &text[i..];
        let msg = parse_msg(rest);
        if !matches!(msg, Msg::Version { .. }) {
            return None;
        }
        let before = text[..i].trim();
        return Some(Line {
            timestamp: (before.starts_with('[') && before.ends_with(']'))
                .then(|| before.to_string()),
            host: String::new(),
            pid: 0,
            tid: 0,
            dev: None,
            level: Level::Version,
            place: None,
            text: rest.to_string(),
            msg,
            source: None,
        });
    };
    let head = &text[..at];
    let body = text[at + tag.len()..].trim_end().to_string();
    let toks: Vec<&str> = head.split_whitespace().collect();
    let who = toks.iter().position(|t| host_pid_tid(t).is_some());
    let (host, pid, tid) = who
        .and_then(|i| host_pid_tid(toks[i]))
        .unwrap_or_else(|| (String::new(), 0, 0));
    let timestamp = who.filter(|&i| i > 0).map(|i| toks[..i].join(" "));
    let after = who.map_or(&toks[..], |i| &toks[i + 1..]);
    let dev = after
        .first()
        .and_then(|t| t.strip_prefix('['))
        .and_then(|t| t.strip_suffix(']'))
        .and_then(|t| t.parse().ok());
    let place = after.last().and_then(|t| {
        let (f, l) = t.rsplit_once(':')?;
        Some((f.to_string(), l.parse().ok()?)).filter(|(f, _)| f.contains('.'))
    });
    let msg = parse_msg(&body);
    Some(Line {
        timestamp,
        host,
        pid,
        tid,
        dev,
        level,
        place,
        text: body,
        msg,
        source: None,
    })
}

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    s.trim().parse().ok()
}

fn hex(s: &str) -> Option<u64> {
    let s = s.trim();
    u64::from_str_radix(s.strip_prefix("0x").unwrap_or(s), 16).ok()
}

/// The word after `key ` in `text` (`nNodes 2` → `2`).
pub fn after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == key {
            return words.next();
        }
    }
    None
}

fn parse_ifaces(list: &str) -> Vec<Iface> {
    list.split_whitespace()
        .filter_map(|tok| {
            let tok = match tok.strip_prefix('[') {
                Some(rest) => rest.split_once(']').map_or(rest, |(_, r)| r),
                None => tok,
            };
            let (name, rest) = tok.split_once(':')?;
            let (addr, port) = match rest.split_once('<') {
                Some((a, p)) => (a, p.trim_end_matches('>').parse().unwrap_or(0)),
                None => (rest, 0),
            };
            (!name.is_empty() && !addr.is_empty()).then(|| Iface {
                name: name.to_string(),
                addr: addr.to_string(),
                port,
            })
        })
        .collect()
}

fn parse_retry(msg: &str) -> Option<Retry> {
    if let Some(rest) = msg.strip_prefix("Call to connect returned ") {
        let (error, _) = rest.split_once(", retrying")?;
        return Some(Retry {
            func: None,
            addr: None,
            error: error.trim().to_string(),
            count: None,
            sleep_ms: None,
        });
    }
    let (func, rest) = msg.split_once(": ")?;
    let (addr, rest) = if let Some(r) = rest.strip_prefix("connect to ") {
        let (a, r) = r.split_once(" returned ")?;
        (Some(a.trim().to_string()), r)
    } else {
        (None, rest.strip_prefix("connect returned ")?)
    };
    let (error, rest) = rest.split_once(", retrying (")?;
    let (kn, rest) = rest.split_once(')')?;
    let (k, n) = kn.split_once('/')?;
    let sleep_ms = rest
        .trim()
        .strip_prefix("after sleep for ")
        .and_then(|r| r.strip_suffix(" msec"))
        .and_then(num);
    Some(Retry {
        func: Some(func.to_string()),
        addr,
        error: error.trim().to_string(),
        count: Some((num(k)?, num(n)?)),
        sleep_ms,
    })
}

fn parse_gave_up(msg: &str) -> Option<GaveUp> {
    if let Some(rest) = msg.strip_prefix("Connect to ") {
        let (addr, err) = rest.split_once(" failed : ")?;
        return Some(GaveUp {
            func: String::new(),
            addr: Some(addr.to_string()),
            error: Some(err.to_string()),
            attempts: 0,
            timeouts: false,
        });
    }
    let (func, rest) = msg.split_once(": ")?;
    for (what, timeouts) in [("exceeded retries (", false), ("exceeded timeouts (", true)] {
        if let Some(n) = rest.strip_prefix(what) {
            return Some(GaveUp {
                func: func.to_string(),
                addr: None,
                error: None,
                attempts: num(n.trim_end_matches(')'))?,
                timeouts,
            });
        }
    }
    let (addr, rest) = if let Some(r) = rest.strip_prefix("connect to ") {
        let (a, r) = r.split_once(" returned ")?;
        (Some(a.to_string()), r)
    } else {
        (None, rest.strip_prefix("connect returned ")?)
    };
    let (error, rest) = rest.split_once(", exceeded error retry count")?;
    let n = rest
        .trim()
        .strip_prefix("after ")
        .and_then(|r| r.strip_suffix(" attempts"))
        .or_else(|| rest.trim().strip_prefix('(')?.strip_suffix(')'))?;
    Some(GaveUp {
        func: func.to_string(),
        addr,
        error: Some(error.to_string()),
        attempts: num(n)?,
        timeouts: false,
    })
}

fn parse_channel(msg: &str) -> Option<Channel> {
    let rest = msg.strip_prefix("Channel ")?;
    let (ch, rest) = rest.split_once(" : ")?;
    let (channel, conn) = match ch.split_once('/') {
        Some((c, k)) => (num(c)?, Some(num(k)?)),
        None => (num(ch)?, None),
    };
    let (ends, via) = rest.split_once(" via ")?;
    let (pair, dir) = match ends.split_once(" [") {
        Some((p, d)) => (p, Some(d.trim_end_matches(']').to_string())),
        None => (ends, None),
    };
    let (a, b) = pair.split_once(" -> ")?;
    let end = |s: &str| -> Option<(u32, String)> {
        let (r, d) = s.trim().split_once('[')?;
        Some((num(r)?, d.trim_end_matches(']').to_string()))
    };
    let (from, from_dev) = end(a)?;
    let (to, to_dev) = end(b)?;
    Some(Channel {
        channel,
        conn,
        from,
        from_dev,
        to,
        to_dev,
        dir,
        via: via.trim().to_string(),
    })
}

fn parse_init(msg: &str) -> Option<Init> {
    let complete = if msg.ends_with("- Init COMPLETE") {
        true
    } else if msg.ends_with("- Init START") {
        false
    } else {
        return None;
    };
    let func = msg.split_whitespace().next()?;
    let func = if func == "comm" { "" } else { func };
    Some(Init {
        complete,
        func: func.to_string(),
        comm: after(msg, "comm").and_then(hex).unwrap_or(0),
        rank: after(msg, "rank").and_then(num)?,
        nranks: after(msg, "nranks").and_then(num)?,
        dev: after(msg, "cudaDev").and_then(num).unwrap_or(0),
        bus: after(msg, "busId").and_then(hex).unwrap_or(0),
        comm_id: after(msg, "commId").and_then(hex).unwrap_or(0),
    })
}

fn parse_shm(msg: &str) -> Option<Msg> {
    if let Some(rest) = msg.strip_prefix("Error while creating shared memory segment ") {
        let (path, size) = rest.split_once(" (size ")?;
        return Some(Msg::ShmFailed {
            path: path.to_string(),
            bytes: num(size.trim_end_matches(')'))?,
            error: None,
        });
    }
    let rest = msg.strip_prefix("Error: failed to extend ")?;
    let (path, rest) = rest.split_once(" to ")?;
    let (bytes, rest) = rest.split_once(" bytes")?;
    let error = rest.strip_prefix(", error: ").and_then(|e| {
        let (text, n) = e.rsplit_once(" (")?;
        Some((text.to_string(), num(n.trim_end_matches(')'))?))
    });
    Some(Msg::ShmFailed {
        path: path.to_string(),
        bytes: num(bytes)?,
        error,
    })
}

fn parse_tuning(msg: &str) -> Option<Msg> {
    let at = msg.find(" Bytes -> Algo ")?;
    let head = &msg[..at];
    let (coll, bytes) = match head.rsplit_once(": ") {
        Some((c, b)) => (Some(c.to_string()), b),
        None => (None, head),
    };
    let rest = &msg[at + " Bytes -> Algo ".len()..];
    let (algo, rest) = rest.split_once(" proto ")?;
    let (proto, rest) = match rest.find(' ') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    Some(Msg::Tuning {
        coll,
        bytes: num(bytes)?,
        algo: algo.to_string(),
        proto: proto.to_string(),
        rest: rest.to_string(),
    })
}

fn parse_coll(msg: &str) -> Option<Msg> {
    let (func, rest) = msg.split_once(": opCount ")?;
    let nranks = rest
        .split("[nranks=")
        .nth(1)
        .and_then(|r| r.split(']').next())
        .and_then(num)?;
    Some(Msg::Coll {
        func: func.to_string(),
        op_count: hex(rest.split_whitespace().next()?)?,
        count: after(rest, "count").and_then(num)?,
        datatype: after(rest, "datatype").and_then(num)?,
        nranks,
        text: msg.to_string(),
    })
}

fn parse_error_trace(msg: &str) -> Option<Msg> {
    let (place, rest) = msg.split_once(" -> ")?;
    let (file, line) = place.rsplit_once(':')?;
    if file.contains(' ') || !file.contains('.') {
        return None;
    }
    let (code, errno) = match rest.split_once(" (") {
        Some((c, e)) => (c, Some(e.trim_end_matches(')').to_string())),
        None => (rest, None),
    };
    Some(Msg::ErrorTrace {
        file: file.to_string(),
        line: num(line)?,
        code: num(code)?,
        errno,
    })
}

/// An NCCL message, typed; anything unknown is [`Msg::Other`].
pub fn parse_msg(msg: &str) -> Msg {
    let msg = msg.trim_end();
    if let Some(v) = msg.strip_prefix("NCCL version ") {
        return Msg::Version {
            version: v.split_whitespace().next().unwrap_or("").to_string(),
        };
    }
    if msg == "Bootstrap : no socket interface found" {
        return Msg::NoSocketInterface;
    }
    if let Some(remote) =
        msg.strip_prefix("Net : No interface found in the same subnet as remote address ")
    {
        return Msg::NoSubnetInterface {
            remote: remote.to_string(),
        };
    }
    if let Some((name, value)) = msg.split_once(" set by environment to ").or_else(|| {
        msg.split_once(" set to ")
            .filter(|(n, _)| n.starts_with("NCCL_"))
    }) && !name.contains(' ')
    {
        return Msg::EnvSet {
            name: name.to_string(),
            value: value.to_string(),
        };
    }
    for (prefix, what) in [
        // ≤ 2.3: one list for bootstrap and sockets (src/include/socket.h at v2.3.7-1).
        ("NET : Using interface", UsingWhat::Bootstrap),
        ("Bootstrap : Using", UsingWhat::Bootstrap),
        ("Bootstrap: Using", UsingWhat::Bootstrap),
        ("NET/Socket : Using", UsingWhat::NetSocket),
    ] {
        if let Some(rest) = msg.strip_prefix(prefix) {
            return Msg::Using {
                what,
                ifaces: parse_ifaces(rest),
            };
        }
    }
    if let Some(name) = msg.strip_prefix("Using network ") {
        return Msg::UsingNetwork {
            name: name.to_string(),
        };
    }
    if let Some(i) = parse_init(msg) {
        return Msg::Init(i);
    }
    if let Some(r) = parse_retry(msg) {
        return Msg::Retry(r);
    }
    if let Some(g) = parse_gave_up(msg) {
        return Msg::GaveUp(g);
    }
    if let Some((func, rest)) = msg.split_once(": ")
        && let Some(rest) = rest
            .strip_prefix("connect to ")
            .or_else(|| rest.strip_prefix("Connect to "))
        && let Some((addr, error)) = rest.split_once(" failed : ")
    {
        return Msg::ConnectFailed {
            func: func.to_string(),
            addr: addr.to_string(),
            error: error.to_string(),
        };
    }
    if let Some(c) = parse_channel(msg) {
        return Msg::Channel(c);
    }
    if let Some(m) = parse_shm(msg)
        .or_else(|| parse_tuning(msg))
        .or_else(|| parse_coll(msg))
        .or_else(|| parse_error_trace(msg))
    {
        return m;
    }
    Msg::Other(msg.to_string())
}

#[cfg(test)]
mod tests;
