//! The hang lab: scenarios are data (`labs/*.toml`). A scenario is staged on a virtual cluster,
//! the sanity all-reduce runs under it, the watchdog declares the hang, evidence is gathered
//! while the ranks still wait (interface tables, advertised addresses, a reachability matrix,
//! last log lines), a culprit is named from that evidence, and the fix is applied and re-run.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use include_dir::{Dir, include_dir};
use serde::{Deserialize, Serialize};

use super::cluster::{self, Cluster};
use super::launch::{self, Failure, Launch, LaunchError, Msg, Placement};
use super::{Event, Job};
use crate::nccl_log;

static LABS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/labs");

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fix {
    pub text: String,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Give every node the right master address.
    #[serde(default)]
    pub master_addr: bool,
    /// Start every rank of the world.
    #[serde(default)]
    pub start_all: bool,
    /// Remove the staged firewall.
    #[serde(default)]
    pub open_firewall: bool,
    /// Run-time scenarios: the code change that removes the staged fault.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remove_fault: bool,
    /// Multiply the watchdog's timeout (the tempting non-fix for a hang).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_factor: Option<u64>,
    /// A bigger /dev/shm for every node (`docker run --shm-size=SIZE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shm_size: Option<String>,
    /// The host's /dev/shm for every node (`docker run --ipc=host`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ipc_host: bool,
}

/// What the evidence of an init hang blames. Scenario files name the one they stage; the
/// diagnosis names the one it found; JSON carries the kebab-case id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Culprit {
    UnroutableAddress,
    IfaceNotFound,
    ConnectionDropped,
    StoreUnreachable,
    MissingRank,
    /// Run time: a rank's collective #k is another call than the others' #k.
    CallMismatch,
    /// Run time: a rank never entered the collective the others wait in.
    NeverEntered,
    /// Run time: a rank is stopped or stuck inside a collective.
    StuckRank,
    /// Run time: a rank's process is gone.
    RankGone,
    /// Init: a rank could not reserve its shared-memory segment (a container's small /dev/shm).
    ShmFull,
    #[default]
    Unknown,
}

impl Culprit {
    pub const ALL: [Culprit; 11] = [
        Culprit::UnroutableAddress,
        Culprit::IfaceNotFound,
        Culprit::ConnectionDropped,
        Culprit::StoreUnreachable,
        Culprit::MissingRank,
        Culprit::CallMismatch,
        Culprit::NeverEntered,
        Culprit::StuckRank,
        Culprit::RankGone,
        Culprit::ShmFull,
        Culprit::Unknown,
    ];

    /// The id in files and JSON.
    pub fn id(self) -> &'static str {
        match self {
            Culprit::UnroutableAddress => "unroutable-address",
            Culprit::IfaceNotFound => "iface-not-found",
            Culprit::ConnectionDropped => "connection-dropped",
            Culprit::StoreUnreachable => "store-unreachable",
            Culprit::MissingRank => "missing-rank",
            Culprit::CallMismatch => "call-mismatch",
            Culprit::NeverEntered => "never-entered",
            Culprit::StuckRank => "stuck-rank",
            Culprit::RankGone => "rank-gone",
            Culprit::ShmFull => "shm-full",
            Culprit::Unknown => "unknown",
        }
    }

    /// From an id (doctor's analyser speaks ids); anything else is Unknown.
    pub fn from_id(id: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|c| c.id() == id)
            .unwrap_or(Culprit::Unknown)
    }

    /// The culprit's name for people.
    pub fn title(self) -> &'static str {
        match self {
            Culprit::UnroutableAddress => "an advertised address the peers cannot reach",
            Culprit::IfaceNotFound => "the named interface does not exist on a node",
            Culprit::ConnectionDropped => "connections silently dropped between nodes",
            Culprit::StoreUnreachable => "a rank cannot reach the rendezvous store",
            Culprit::MissingRank => "a rank of the world never started",
            Culprit::CallMismatch => "a rank called a different collective at the same number",
            Culprit::NeverEntered => "a rank never entered the collective the others wait in",
            Culprit::StuckRank => "a rank is stopped inside a collective",
            Culprit::RankGone => "a rank's process is gone",
            Culprit::ShmFull => "/dev/shm too small for the ranks' shared-memory buffers",
            Culprit::Unknown => "no known misconfiguration",
        }
    }
}

impl std::fmt::Display for Culprit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// How a scenario's staged run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    Hang,
    Error,
}

/// How a run ended: `ok` (went through), `hang` (the watchdog fired), `error` (a rank or the
/// setup failed); a fix's re-run is `pass` when it went through with the right all-reduce
/// (`ok` there means it went through with a wrong result).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Ok,
    Pass,
    Hang,
    Error,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Pass => "pass",
            Outcome::Hang => "hang",
            Outcome::Error => "error",
        }
    }
}

named!(Outcome);

impl Scenario {
    /// A run-time hang (a training loop that stops mid-run), not one at start-up.
    pub fn run_time(&self) -> bool {
        self.train.is_some()
    }

    /// What a passing run proved: the check its job makes.
    pub fn pass_claim(&self) -> String {
        match &self.train {
            Some(t) => format!(
                "all {} training steps ran, and the last gradient all-reduce (of ones) summed to the world size on every rank",
                t.steps
            ),
            None => "the all-reduce of ones gave the world size on every rank".into(),
        }
    }
}

impl Expect {
    /// The run outcome it corresponds to.
    pub fn outcome(self) -> Outcome {
        match self {
            Expect::Hang => Outcome::Hang,
            Expect::Error => Outcome::Error,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    pub title: String,
    pub story: String,
    /// What a report of the incident would say, without its cause or the setting behind it:
    /// the story shown in blind mode (a class diagnosing from evidence alone).
    pub brief: String,
    pub nodes: usize,
    pub ranks_per_node: usize,
    /// Seconds without progress before the watchdog calls it a hang.
    pub timeout: u64,
    /// What the staged run does.
    pub expect: Expect,
    pub symptom: String,
    /// The culprit the diagnosis must find.
    pub culprit: Culprit,
    pub hints: Vec<String>,
    #[serde(default)]
    pub fabric: Vec<String>,
    #[serde(default)]
    pub stage_env: BTreeMap<String, String>,
    /// Nodes other than node 0 dial this address for the master.
    #[serde(default)]
    pub stage_master_addr: Option<IpAddr>,
    /// Ranks started (fewer than nodes × ranks_per_node stages a missing rank).
    #[serde(default)]
    pub stage_start: Option<usize>,
    /// A firewall on every node that silently drops new connections from other nodes except
    /// to the store's port (the master port), like a cloud security group opened for 29500 only.
    #[serde(default)]
    pub stage_firewall: bool,
    /// A run-time scenario: the training loop it runs (with its staged fault) instead of the
    /// init sanity check.
    #[serde(default)]
    pub train: Option<super::train::TrainSpec>,
    /// Every node a container with a /dev/shm of this size (tmpfs units: `64m` is Docker's
    /// default without --shm-size or --ipc=host).
    #[serde(default)]
    pub stage_shm: Option<String>,
    pub fix: Fix,
    /// The NCCL release the emulated ranks behave and log as (`--nccl-version`; not in the
    /// scenario file). None: 2.28.9.
    #[serde(skip)]
    pub emulate: Option<crate::nccl_log::Release>,
}

/// One line of `ringlab lab run --events`: what the hang screen reads from the lab it runs
/// in a child process. One JSON object per line, `{"msg": …}`, `{"report": …}`, `{"fixed": …}`
/// or `{"error": "…"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamLine {
    /// A rank's phase, value, log line or exit, as it happens.
    Msg(Msg),
    /// The staged run's report (the last line of a staging).
    Report(Box<LabReport>),
    /// A fix's re-run (the last line of `--try-fix`).
    Fixed(Box<Fixed>),
    /// The lab could not run.
    Error(String),
}

impl StreamLine {
    /// The line to print (without its newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| {
            serde_json::json!({ "error": format!("encoding an event: {e}") }).to_string()
        })
    }
}

/// Where the hang lab builds its cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Mode {
    /// Network namespaces where this process may make them, else the emulated cluster.
    #[default]
    Auto,
    Netns,
    Emulated,
}

/// The hang lab on real NCCL: what every rank needs besides the staged environment.
#[derive(Debug, Clone, Default)]
pub struct NcclLab {
    /// The ranks' environment from `gpu::prepare` (NCCL's library path, NCCL_DEBUG_FILE).
    pub env: Vec<(String, String)>,
    /// Ranks of one node sharing each GPU.
    pub ranks_per_gpu: usize,
}

impl NcclLab {
    /// NCCL's own log, and its connect retries made finer and longer (NCCL ≥ 2.24 sleeps
    /// RETRY_SLEEP_MSEC × k before try k): by default 34 tries, about 60 s in all, after which
    /// NCCL gives up on its own; here 1000 tries at 10 ms × k, 109 of them in the first minute
    /// and about 83 minutes in all, so that the lab's watchdog, not NCCL's give-up, calls the
    /// hang while NCCL is still dialing; INIT, BOOTSTRAP and NET lines are the evidence.
    pub fn lab_env() -> Vec<(String, String)> {
        [
            ("NCCL_DEBUG_SUBSYS", "INIT,BOOTSTRAP,NET"),
            ("NCCL_SOCKET_RETRY_CNT", "1000"),
            ("NCCL_SOCKET_RETRY_SLEEP_MSEC", "10"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}

/// A doctor finding that names a culprit: (finding, the culprit, a test its evidence must pass).
type NcclRule = (super::doctor::Kind, Culprit, fn(&nccl_log::Msg) -> bool);

/// What `doctor --log`'s findings name as a scenario's culprit, in order.
const NCCL_RULES: &[NcclRule] = &[
    (
        super::doctor::Kind::NoSocketInterface,
        Culprit::IfaceNotFound,
        |_| true,
    ),
    (
        super::doctor::Kind::LocalInterface,
        Culprit::UnroutableAddress,
        |_| true,
    ),
    (
        super::doctor::Kind::ConnectRetry,
        Culprit::ConnectionDropped,
        |m| matches!(m, nccl_log::Msg::Retry(r) if r.error == "Connection timed out"),
    ),
];

/// The culprit NCCL's own log names, read by `doctor --log`'s analyser: each node's ranks'
/// lines as one file (each node has its own host name, as on a real cluster). Returns
/// (culprit, explanation, the lines it rests on).
pub fn nccl_culprit(
    ranks_per_node: usize,
    logs: &BTreeMap<usize, Vec<String>>,
) -> Option<(Culprit, String, Vec<String>)> {
    let mut files: BTreeMap<usize, String> = BTreeMap::new();
    for (rank, lines) in logs {
        let f = files.entry(rank / ranks_per_node.max(1)).or_default();
        for l in lines {
            f.push_str(l);
            f.push('\n');
        }
    }
    let files: Vec<(String, String)> = files
        .into_iter()
        .map(|(n, t)| (format!("node{n}"), t))
        .collect();
    let findings = super::doctor::analyze(&files);
    NCCL_RULES.iter().find_map(|(kind, culprit, test)| {
        let f = findings.iter().find(|f| f.kind == *kind)?;
        let holds = f
            .evidence
            .iter()
            .any(|(_, _, l)| nccl_log::parse_line(l).is_some_and(|p| test(&p.msg)));
        holds.then(|| {
            (
                *culprit,
                format!("NCCL's log: {}", f.summary),
                f.evidence.iter().map(|(_, _, l)| l.clone()).collect(),
            )
        })
    })
}

/// The address each rank's NCCL said it uses for its sockets (`NET/Socket : Using …`, else
/// `Bootstrap: Using …`), as `addr (iface)`.
fn nccl_advertised(logs: &BTreeMap<usize, Vec<String>>) -> BTreeMap<usize, String> {
    let mut out = BTreeMap::new();
    for (rank, lines) in logs {
        let mut best: Option<String> = None;
        for l in lines {
            for (what, name, addr) in super::doctor::interfaces_used(l) {
                if what == "NET/Socket" || best.is_none() {
                    best = Some(format!("{addr} ({name})"));
                }
            }
        }
        if let Some(b) = best {
            out.insert(*rank, b);
        }
    }
    out
}

/// The store's port on the namespace cluster: PyTorch's default MASTER_PORT. Each run has
/// fresh namespaces, so it is always free there.
pub const MASTER_PORT: u16 = 29500;

/// One file that did not parse, with where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    pub message: String,
}

/// All scenarios shipped in the binary, by name.
pub fn all() -> (Vec<Scenario>, Vec<ScenarioError>) {
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    let watchdog = watchdog_from_env();
    let mut files: Vec<_> = LABS
        .files()
        .filter(|f| f.path().extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort_by_key(|f| f.path().to_path_buf());
    for f in files {
        let file = format!("labs/{}", f.path().display());
        match parse(&String::from_utf8_lossy(f.contents())) {
            Ok(mut s) => {
                if let Some(Ok(t)) = watchdog {
                    s.timeout = t;
                }
                ok.push(s)
            }
            Err(message) => bad.push(ScenarioError { file, message }),
        }
    }
    if let Some(Err(e)) = watchdog {
        bad.push(ScenarioError {
            file: WATCHDOG_ENV.into(),
            message: e,
        });
    }
    (ok, bad)
}

/// Seconds without progress before every scenario's watchdog fires, instead of each
/// scenario's own (6 s for most): shorter waits for a demo or the test suite, longer on a slow
/// machine. `lab run --timeout` still wins for one run.
pub const WATCHDOG_ENV: &str = "RINGLAB_LAB_TIMEOUT";

/// [`WATCHDOG_ENV`], if set: whole seconds 1..=3600, else an error naming the variable.
fn watchdog_from_env() -> Option<Result<u64, String>> {
    let v = std::env::var(WATCHDOG_ENV).ok()?;
    Some(
        v.trim()
            .parse::<u64>()
            .ok()
            .filter(|t| (1..=3600).contains(t))
            .ok_or_else(|| format!("`{v}` is not a watchdog time: give whole seconds, 1 to 3600")),
    )
}

pub fn parse(text: &str) -> Result<Scenario, String> {
    let s: Scenario = toml::from_str(text).map_err(|e| {
        let (line, col) = e.span().map_or((1, 1), |sp| {
            crate::course::block::offset_to_line_col(text, sp.start)
        });
        format!("{line}:{col}: {}", e.message())
    })?;
    // One node is a cluster only when the node itself is the trap (a container's /dev/shm).
    let fewest = if s.stage_shm.is_some() { 1 } else { 2 };
    if !(fewest..=8).contains(&s.nodes) {
        return Err(format!("nodes must be {fewest}..=8, got {}", s.nodes));
    }
    if !(1..=8).contains(&s.ranks_per_node) {
        return Err(format!(
            "ranks_per_node must be 1..=8, got {}",
            s.ranks_per_node
        ));
    }
    if let Some(t) = &s.train {
        let world = s.nodes * s.ranks_per_node;
        if t.steps == 0 || t.tp_bytes == 0 || t.dp_bytes == 0 {
            return Err("[train]: steps, tp_bytes and dp_bytes must be at least 1".into());
        }
        if let Some(f) = &t.fault
            && (f.rank >= world || f.step == 0 || f.step > t.steps)
        {
            return Err(format!(
                "[train] fault: rank {} step {} is outside the job ({world} ranks, steps 1..={})",
                f.rank, f.step, t.steps
            ));
        }
    }
    Ok(s)
}

pub fn find(name: &str) -> Result<Scenario, String> {
    let (all, _) = all();
    let names: Vec<String> = all.iter().map(|s| s.name.clone()).collect();
    all.into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| format!("no scenario `{name}`; known: {}", names.join(", ")))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankReport {
    pub rank: usize,
    pub node: usize,
    pub phase: String,
    pub advertised: Option<String>,
    /// The rank's process state when the job was stopped, read from /proc/PID/stat: `R`
    /// running, `S` sleeping (waiting on a socket), `T` stopped, `gone` ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Staged {
    pub outcome: Outcome,
    pub stuck_phase: Option<String>,
    /// When the watchdog fired (or the error came): counted from the start for an init hang,
    /// from the last progress for a run-time one.
    pub detected_after_s: Option<f64>,
    /// How long the whole staged run took, start to end.
    #[serde(default)]
    pub run_s: f64,
    pub ranks: Vec<RankReport>,
    pub reason: Option<String>,
    /// How the ranks' bytes travelled (`SHM` within a node, `NET` across), where they got
    /// that far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IfaceRow {
    pub node: usize,
    pub name: String,
    pub addr: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reach {
    pub from_node: usize,
    pub to_rank: usize,
    pub addr: String,
    pub result: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Diagnosis {
    pub interfaces: Vec<IfaceRow>,
    pub reachability: Vec<Reach>,
    /// What the evidence blames and, in `explanation`, what it shows.
    pub culprit: Culprit,
    pub explanation: String,
    pub fix: String,
    pub last_logs: Vec<(usize, Vec<String>)>,
    /// On NCCL: the address each rank's NCCL said it uses (`addr (iface)`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub advertised: Vec<(usize, String)>,
    /// Run time: the flight recorders lined up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceEvidence>,
}

/// The flight-recorder evidence of a run-time hang.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TraceEvidence {
    /// Where the per-rank dumps are (`ringlab doctor --trace DIR` reads them again).
    pub dir: String,
    /// The rank the analysis blames, the collective and what the program called it.
    pub rank: Option<usize>,
    pub seq: Option<u64>,
    pub label: Option<String>,
    /// The dumps side by side around the divergence (`trace::table`).
    pub table: Vec<super::trace::Row>,
}

impl Diagnosis {
    /// What each rank advertised, once per rank: `rank 0: 127.0.0.1:40123 (lo)`, the interface
    /// looked up on the rank's node.
    pub fn advertised_by_rank(&self, ranks_per_node: usize) -> Vec<String> {
        let mut seen = std::collections::BTreeMap::new();
        for x in &self.reachability {
            seen.entry(x.to_rank).or_insert_with(|| x.addr.clone());
        }
        for (r, a) in &self.advertised {
            seen.entry(*r).or_insert_with(|| a.clone());
        }
        seen.into_iter()
            .map(|(r, addr)| {
                let node = r / ranks_per_node.max(1);
                let ip = addr
                    .parse::<SocketAddr>()
                    .map(|a| a.ip().to_string())
                    .unwrap_or_else(|_| addr.clone());
                match self
                    .interfaces
                    .iter()
                    .find(|i| i.node == node && i.addr == ip)
                {
                    Some(i) => format!("rank {r}: {addr} ({})", i.name),
                    None => format!("rank {r}: {addr}"),
                }
            })
            .collect()
    }

    /// The interfaces the ranks advertised, without ports: what a fix of the interface choice
    /// changes (or does not).
    pub fn advertised_ifaces(&self, ranks_per_node: usize) -> Vec<String> {
        self.advertised_by_rank(ranks_per_node)
            .iter()
            .map(|l| {
                let rank = l.split(':').next().unwrap_or("");
                let iface = l
                    .rsplit_once(" (")
                    .map_or("?", |(_, i)| i.trim_end_matches(')'));
                format!("{rank} {iface}")
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fixed {
    pub outcome: Outcome,
    pub allreduce_correct: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Seconds until the watchdog (or an error) ended a failed re-run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected_after_s: Option<f64>,
    /// How long the re-run took, start to end.
    #[serde(default)]
    pub run_s: f64,
    /// What the re-run showed when it failed: interfaces, what each rank advertised, who could
    /// reach it, and the diagnosis of this run (not the staged one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Diagnosis>,
    /// How the re-run's bytes travelled (`SHM+NET`: shared memory within each node, the
    /// network between them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabReport {
    pub scenario: String,
    /// "netns" or "emulated".
    pub mode: String,
    /// Why the cluster is emulated (absent on real namespaces).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulated_because: Option<String>,
    pub staged: Staged,
    pub diagnosis: Diagnosis,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed: Option<Fixed>,
    /// The iproute2 commands that built the cluster.
    pub commands: Vec<String>,
}

/// The staged run's times, saying what each measures: `the watchdog fired 6.0 s after the
/// start; the run took 6.2 s`, or for a run-time hang `… after 6.0 s without progress`.
pub fn timing(st: &Staged, run_time: bool) -> String {
    let total = format!("the run took {:.1} s", st.run_s);
    match (st.outcome, st.detected_after_s) {
        (Outcome::Hang, Some(x)) if run_time => {
            format!("the watchdog fired after {x:.1} s without progress; {total}")
        }
        (Outcome::Hang, Some(x)) => {
            format!("the watchdog fired {x:.1} s after the start; {total}")
        }
        (Outcome::Error, _) => format!("failed {:.1} s after the start", st.run_s),
        _ => total,
    }
}

/// What one run of the sanity all-reduce on the cluster did.
struct RunResult {
    outcome: Outcome,
    /// The run's length, start to end.
    run_s: f64,
    failure: Option<Failure>,
    detected_after: Option<f64>,
    phases: BTreeMap<usize, String>,
    values: Vec<(usize, f64)>,
    evidence: Option<Diagnosis>,
    /// How the ranks' bytes travelled (`SHM`, `NET`, `SHM+NET`), as they reported it.
    transport: Option<String>,
}

/// The staged cluster (`fix` None) or the staged cluster with a fix applied.
fn placement(s: &Scenario, c: &Cluster, fix: Option<&Fix>, port: u16, nccl: bool) -> Placement {
    let mut env: Vec<(String, String)> = vec![("NCCL_DEBUG".into(), "INFO".into())];
    if nccl {
        env.extend(NcclLab::lab_env());
    } else if let Some(r) = s.emulate {
        env.push((crate::comm::log::VERSION_ENV.into(), r.to_string()));
    }
    // A fix replaces the staged variables it names; what it does not mention stays staged.
    let mut merged = s.stage_env.clone();
    if let Some(f) = fix {
        merged.extend(f.env.clone());
    }
    env.extend(merged);
    let wrong: Option<IpAddr> = s.stage_master_addr;
    let use_wrong = !fix.is_some_and(|f| f.master_addr);
    let world = s.nodes * s.ranks_per_node;
    let start = match (!fix.is_some_and(|f| f.start_all), s.stage_start) {
        (true, Some(n)) => n,
        _ => world,
    };
    let store_ip = IpAddr::V4(c.nodes[0].ip);
    Placement {
        nodes: s.nodes,
        netns: (0..s.nodes).filter_map(|i| c.netns_path(i)).collect(),
        mntns: (0..s.nodes).map(|i| c.mntns_path(i)).collect(),
        utsns: (0..s.nodes).map(|i| c.utsns_path(i)).collect(),
        store_bind: SocketAddr::new(c.bind_ip(store_ip), port),
        store_listener: None,
        store_ip,
        store_ip_for_node: (0..s.nodes)
            .map(|i| if i > 0 && use_wrong { wrong } else { None })
            .collect(),
        env_for_node: (0..s.nodes)
            .map(|i| {
                let mut e = env.clone();
                e.extend(c.node_env(i));
                if nccl {
                    // The nodes share this host's name and boot id: without a host id of their
                    // own NCCL would take them for one machine and skip the network.
                    e.push(("NCCL_HOSTID".into(), format!("rlab-node{i}")));
                }
                e
            })
            .collect(),
        ranks_per_node: s.ranks_per_node,
        start,
    }
}

fn run_once(
    s: &Scenario,
    c: &mut Cluster,
    fix: Option<&Fix>,
    nccl: Option<&NcclLab>,
    on: &mut dyn FnMut(&Msg),
) -> RunResult {
    let (port, store_listener) = match store_port(c) {
        Ok(p) => p,
        Err(e) => return RunResult::setup_error(e),
    };
    if s.stage_firewall {
        let open = fix.is_some_and(|f| f.open_firewall);
        for node in 0..s.nodes {
            let r = c
                .firewall(node, port)
                .and_then(|()| if open { c.open_fabric(node) } else { Ok(()) });
            if let Err(e) = r {
                return RunResult::setup_error(e.to_string());
            }
        }
    }
    if let Some(f) = fix {
        let change = match (&f.shm_size, f.ipc_host) {
            (_, true) => Some(cluster::ShmChange::Host),
            (Some(size), false) => Some(cluster::ShmChange::Size(size)),
            (None, false) => None,
        };
        for node in 0..s.nodes {
            if let Some(ch) = change
                && let Err(e) = c.change_shm(node, ch)
            {
                return RunResult::setup_error(e.to_string());
            }
        }
    }
    let c = &*c;
    let mut l = Launch::single(s.ranks_per_node);
    // Raising the timeout is a choice a learner may try: the watchdog then waits longer.
    let timeout = s.timeout * fix.and_then(|f| f.timeout_factor).unwrap_or(1).max(1);
    l.timeout = Duration::from_secs(timeout);
    let mut place = placement(s, c, fix, port, nccl.is_some());
    place.store_listener = store_listener;
    l.placement = Some(place);
    let mut job = Job::sanity();
    if let Some(n) = nccl {
        l.env.extend(n.env.iter().cloned());
        job.backend = super::Backend::Nccl;
        job.ranks_per_gpu = n.ranks_per_gpu;
        job.timeout_s = timeout + 5;
    }
    // A run-time scenario runs its training loop, each rank keeping its flight recorder in a
    // fresh folder; the right fix removes the staged fault.
    let trace_dir = match &s.train {
        Some(spec) => {
            let dir = match fresh_trace_dir(&s.name) {
                Ok(d) => d,
                Err(e) => return RunResult::setup_error(e),
            };
            let mut spec = spec.clone();
            spec.trace_dir = Some(dir.display().to_string());
            if fix.is_some_and(|f| f.remove_fault) {
                spec.fault = None;
            }
            job = Job::train(spec);
            // The ranks' own wait for a neighbour's header outlasts the launcher's watchdog.
            job.timeout_s = timeout + 10;
            Some(dir)
        }
        None => None,
    };
    let started = Instant::now();
    // A run-time hang starts when the loop stops moving, not when the job started.
    let progress = std::cell::Cell::new(started);
    let phases = std::cell::RefCell::new(BTreeMap::new());
    // Every line each rank logged (NCCL's INIT/NET lines come early and would scroll out of
    // the launcher's last lines).
    let logs = std::cell::RefCell::new(BTreeMap::<usize, Vec<String>>::new());
    let mut values = Vec::new();
    let mut evidence = None;
    let mut detected = None;
    let mut transports: BTreeMap<usize, String> = BTreeMap::new();
    let world = s.nodes * s.ranks_per_node;
    let r = launch::run_with(
        &job,
        &l,
        |m| {
            match m {
                Msg::Event(Event::Beat { .. }) => progress.set(Instant::now()),
                Msg::Event(Event::Phase { rank, phase }) => {
                    progress.set(Instant::now());
                    phases.borrow_mut().insert(*rank, phase.clone());
                }
                Msg::Event(Event::Value { rank, value }) => values.push((*rank, *value)),
                Msg::Event(Event::Transport { rank, transport }) => {
                    transports.insert(*rank, transport.clone());
                }
                Msg::Event(Event::Done { rank }) => {
                    phases.borrow_mut().insert(*rank, "done".into());
                }
                Msg::Log { rank, line } if nccl.is_some() => {
                    logs.borrow_mut()
                        .entry(*rank)
                        .or_default()
                        .push(line.clone());
                }
                _ => {}
            }
            on(m);
        },
        |f, server| {
            // The watchdog has just fired: that is when the hang was detected, counted from
            // the start (init) or from the last progress (a training loop).
            let from = if trace_dir.is_some() {
                progress.get()
            } else {
                started
            };
            detected = Some(from.elapsed().as_secs_f64());
            let mut d = match &trace_dir {
                Some(dir) => train_evidence(s, c, dir, f),
                None => gather(s, c, f, server, world),
            };
            if nccl.is_some() && trace_dir.is_none() {
                nccl_evidence(s, &mut d, &logs.borrow(), &phases.borrow());
            }
            evidence = Some(d);
        },
    );
    let phases = phases.into_inner();
    let transport = crate::comm::tcp::combine_transports(transports.values().map(String::as_str));
    let run_s = started.elapsed().as_secs_f64();
    let detected_after = detected.or(Some(run_s));
    // A run that went through leaves no evidence to read: its flight recorders go.
    if r.is_ok()
        && let Some(dir) = &trace_dir
    {
        let _ = std::fs::remove_dir_all(dir);
    }
    match r {
        Ok(()) => RunResult {
            outcome: Outcome::Ok,
            run_s,
            failure: None,
            detected_after: None,
            phases,
            values,
            evidence,
            transport,
        },
        Err(LaunchError::Failed(f)) => {
            let outcome = if f.kind == crate::lab::launch::FailKind::Hang {
                Outcome::Hang
            } else {
                Outcome::Error
            };
            RunResult {
                outcome,
                run_s,
                failure: Some(*f),
                detected_after,
                phases,
                values,
                evidence,
                transport,
            }
        }
        Err(LaunchError::Setup(e)) => RunResult {
            outcome: Outcome::Error,
            run_s,
            failure: Some(Failure {
                kind: crate::lab::launch::FailKind::Error,
                reason: e,
                ranks: Vec::new(),
                logs: Vec::new(),
                processes: Vec::new(),
                states: Vec::new(),
            }),
            detected_after,
            phases,
            values,
            evidence,
            transport,
        },
    }
}

impl RunResult {
    fn setup_error(reason: String) -> Self {
        Self {
            outcome: Outcome::Error,
            run_s: 0.0,
            failure: Some(Failure {
                kind: crate::lab::launch::FailKind::Error,
                reason,
                ranks: Vec::new(),
                logs: Vec::new(),
                processes: Vec::new(),
                states: Vec::new(),
            }),
            detected_after: None,
            phases: BTreeMap::new(),
            values: Vec::new(),
            evidence: None,
            transport: None,
        }
    }
}

/// Every node's interfaces, as the evidence lists them.
fn interface_rows(c: &Cluster) -> Vec<IfaceRow> {
    c.nodes
        .iter()
        .flat_map(|n| {
            c.interfaces(n.index).into_iter().map(|i| IfaceRow {
                node: n.index,
                name: i.name,
                addr: i.addr.to_string(),
            })
        })
        .collect()
}

/// A new folder, readable only by this user, for one run's flight recorders: in /dev/shm where
/// there is one (memory: the ranks rewrite their recorder three times per collective, which on
/// a disk file system costs more than the collective), else the temporary folder.
fn fresh_trace_dir(scenario: &str) -> Result<std::path::PathBuf, String> {
    let shm = std::path::Path::new("/dev/shm");
    let base = if shm.is_dir() && std::fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly())
    {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    crate::private::fresh_dir(&base, &format!("ringlab-trace-{scenario}-"))
        .map_err(|e| e.to_string())
}

/// How long a flight-recorder folder must be untouched before `lab cleanup` takes it: a
/// running lab rewrites its folder at every collective.
pub const TRACE_DIR_QUIET: std::time::Duration = std::time::Duration::from_secs(120);

/// Flight-recorder folders this user's earlier labs left (a failed run keeps its dumps for
/// `doctor --trace`), untouched for [`TRACE_DIR_QUIET`]. Returns what was removed, and the
/// folders kept because they changed more recently (a lab may still be writing them).
pub fn remove_old_trace_dirs() -> (Vec<String>, Vec<String>) {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let mut removed = Vec::new();
    let mut kept = Vec::new();
    for base in [std::path::PathBuf::from("/dev/shm"), std::env::temp_dir()] {
        let Ok(entries) = std::fs::read_dir(&base) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let ours = e
                .file_name()
                .to_string_lossy()
                .starts_with("ringlab-trace-");
            let Ok(m) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if !ours || !m.is_dir() || m.uid() != me {
                continue;
            }
            let old = m
                .modified()
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > TRACE_DIR_QUIET);
            if !old {
                kept.push(path.display().to_string());
            } else if std::fs::remove_dir_all(&path).is_ok() {
                removed.push(format!("flight recorders {}", path.display()));
            }
        }
    }
    (removed, kept)
}

/// Run time: the evidence is each rank's flight recorder. The launcher knows which processes
/// were stopped or gone (they cannot say so themselves): that goes into their dumps, which are
/// then lined up by sequence number.
fn train_evidence(s: &Scenario, c: &Cluster, dir: &std::path::Path, f: &Failure) -> Diagnosis {
    use super::trace;
    let mut d = Diagnosis {
        last_logs: f.logs.clone(),
        interfaces: interface_rows(c),
        fix: s.fix.text.clone(),
        ..Default::default()
    };
    let mut traces = match trace::read_paths(&[dir.to_path_buf()]) {
        Ok(t) => t,
        Err(e) => {
            d.explanation = format!("no flight recorder to read: {e}");
            return d;
        }
    };
    for t in &mut traces {
        if let Some((_, p)) = f.processes.iter().find(|(r, _)| *r == t.rank) {
            t.process = p.clone();
            // The dump as the watchdog leaves it: with what the launcher saw of the process.
            if let Ok(text) = serde_json::to_string_pretty(&*t) {
                let _ = std::fs::write(dir.join(format!("rank{}.json", t.rank)), text);
            }
        }
    }
    let a = trace::analyse(&traces);
    d.culprit = match &a.culprit {
        Some(trace::Culprit::Mismatch { .. }) => Culprit::CallMismatch,
        Some(trace::Culprit::NeverEntered { .. }) => Culprit::NeverEntered,
        Some(trace::Culprit::StuckInside { .. }) => Culprit::StuckRank,
        Some(trace::Culprit::Gone { .. }) => Culprit::RankGone,
        None => Culprit::Unknown,
    };
    let rank = a.culprit.as_ref().map(trace::Culprit::rank);
    let seq = a.culprit.as_ref().and_then(trace::Culprit::seq);
    // What the program called that collective: the culprit's own label, else the others'.
    let label = seq.and_then(|q| {
        let of = |t: &trace::RankTrace| {
            t.entries
                .iter()
                .find(|e| e.seq == q)
                .and_then(|e| e.label.clone())
        };
        traces
            .iter()
            .find(|t| Some(t.rank) == rank)
            .and_then(of)
            .or_else(|| traces.iter().find_map(of))
    });
    // "step 57" from "step 57 tp mlp": where in the training loop it went wrong.
    let step = label
        .as_deref()
        .and_then(|l| l.split_whitespace().nth(1))
        .map(|n| format!(" at step {n}"))
        .unwrap_or_default();
    d.explanation = match rank {
        Some(r) => format!("rank {r}{step}: {}", a.explanation),
        None => a.explanation.clone(),
    };
    d.trace = Some(TraceEvidence {
        dir: dir.display().to_string(),
        rank,
        seq,
        label,
        table: trace::table(&traces, &a, 6),
    });
    d
}

/// The store's port: the master port in fresh namespaces; on the emulated cluster, which
/// shares this host's loopback with everything else (other runs, other tests), a port the
/// kernel picks, bound here and handed to the store as it is: a port found free and released
/// could be taken by anyone before the store binds it again.
fn store_port(c: &Cluster) -> Result<(u16, Option<std::sync::Arc<std::net::TcpListener>>), String> {
    if c.mode() == "netns" {
        return Ok((MASTER_PORT, None));
    }
    let ip = c.bind_ip(IpAddr::V4(c.nodes[0].ip));
    std::net::TcpListener::bind(SocketAddr::new(ip, 0))
        .and_then(|l| Ok((l.local_addr()?.port(), Some(std::sync::Arc::new(l)))))
        .map_err(|e| format!("binding the store on {ip}: {e}"))
}

/// Evidence, gathered while the ranks still wait.
/// What a failed staged run left to read: the scenario, the cluster, the launcher's report,
/// each rank's log lines (parsed) and what each rank advertised in the store.
struct Evidence<'a> {
    s: &'a Scenario,
    c: &'a Cluster,
    f: &'a Failure,
    d: &'a Diagnosis,
    logs: &'a [(usize, nccl_log::Line)],
    advertised: &'a [(usize, Option<SocketAddr>)],
    world: usize,
}

impl Evidence<'_> {
    fn node_of(&self, r: usize) -> usize {
        r / self.s.ranks_per_node.max(1)
    }
    fn iface_of(&self, node: usize, ip: &IpAddr) -> Option<String> {
        self.d
            .interfaces
            .iter()
            .find(|i| i.node == node && i.addr == ip.to_string())
            .map(|i| i.name.clone())
    }
    fn log_line(&self, want: impl Fn(&nccl_log::Msg) -> bool) -> Option<(usize, &nccl_log::Line)> {
        self.logs
            .iter()
            .find(|(_, l)| want(&l.msg))
            .map(|(r, l)| (*r, l))
    }
    fn published(&self) -> usize {
        self.advertised.iter().filter(|(_, a)| a.is_some()).count()
    }
}

/// One thing the evidence can show: the culprit, and the test that finds it there (its
/// explanation, from the evidence). The first rule that holds names the culprit.
struct Rule {
    culprit: Culprit,
    test: fn(&Evidence) -> Option<String>,
}

const RULES: &[Rule] = &[
    Rule {
        culprit: Culprit::ShmFull,
        test: |e| {
            let (r, l) = e.log_line(|m| matches!(m, nccl_log::Msg::ShmFailed { .. }))?;
            Some(format!("rank {r} on node {}: {}", e.node_of(r), l.text))
        },
    },
    Rule {
        culprit: Culprit::IfaceNotFound,
        test: |e| {
            let (r, l) = e.log_line(|m| matches!(m, nccl_log::Msg::NoSocketInterface))?;
            // The rank's own report says what the filter was and what the node has.
            let why =
                e.f.reason
                    .split_once(": ")
                    .map_or(l.text.as_str(), |(_, w)| w);
            Some(format!("rank {r} on node {}: {why}", e.node_of(r)))
        },
    },
    Rule {
        culprit: Culprit::UnroutableAddress,
        test: |e| {
            let (r, a) = e
                .advertised
                .iter()
                .find_map(|(r, a)| a.filter(|a| !cluster::is_fabric(&a.ip())).map(|a| (*r, a)))?;
            let name = e
                .iface_of(e.node_of(r), &a.ip())
                .unwrap_or_else(|| "?".into());
            let everywhere =
                e.c.nodes
                    .iter()
                    .all(|n| e.iface_of(n.index, &a.ip()).is_some());
            Some(format!(
                "rank {r} advertised {a} on {name}{}; a peer that dials it reaches its own node, not rank {r}",
                if everywhere {
                    ", an address every node has"
                } else {
                    ""
                }
            ))
        },
    },
    Rule {
        culprit: Culprit::ConnectionDropped,
        test: |e| {
            let x = e.d.reachability.iter().find(|x| {
                x.result == "Connection timed out" && x.from_node != e.node_of(x.to_rank)
            })?;
            Some(format!(
                "node {} → rank {} at {}: Connection timed out. The address is on the fabric and \
                 the store's port answered, so the host is up: new connections to the job's \
                 other ports are dropped without a reply (a firewall)",
                x.from_node, x.to_rank, x.addr
            ))
        },
    },
    Rule {
        culprit: Culprit::StoreUnreachable,
        test: |e| {
            let spawned = |p: &str| p == "spawned";
            if e.published() >= e.f.ranks.len().max(1)
                || !e.f.ranks.iter().any(|(_, p, _)| spawned(p))
            {
                return None;
            }
            let stuck: Vec<String> =
                e.f.ranks
                    .iter()
                    .filter(|(_, p, _)| spawned(p))
                    .map(|(r, _, _)| format!("rank {r} (node {})", e.node_of(*r)))
                    .collect();
            Some(format!(
                "{} never reached the rendezvous store: check --master-addr on that node",
                stuck.join(", ")
            ))
        },
    },
    Rule {
        culprit: Culprit::MissingRank,
        test: |e| {
            if e.published() >= e.world {
                return None;
            }
            let missing: Vec<String> = e
                .advertised
                .iter()
                .filter(|(_, a)| a.is_none())
                .map(|(r, _)| r.to_string())
                .collect();
            Some(format!(
                "world size {}, but rank(s) {} never arrived; the others wait for them",
                e.world,
                missing.join(", ")
            ))
        },
    },
];

fn gather(
    s: &Scenario,
    c: &Cluster,
    f: &Failure,
    server: Option<&crate::comm::store::StoreServer>,
    world: usize,
) -> Diagnosis {
    let mut d = Diagnosis {
        last_logs: f.logs.clone(),
        interfaces: interface_rows(c),
        ..Default::default()
    };
    let advertised: Vec<(usize, Option<SocketAddr>)> = (0..world)
        .map(|r| {
            (
                r,
                server
                    .and_then(|sv| sv.peek(&format!("addr/{r}")))
                    .and_then(|a| a.parse().ok()),
            )
        })
        .collect();
    for (r, a) in &advertised {
        let Some(a) = a else { continue };
        for n in &c.nodes {
            d.reachability.push(Reach {
                from_node: n.index,
                to_rank: *r,
                addr: a.to_string(),
                result: c.probe(n.index, *a),
            });
        }
    }
    let logs: Vec<(usize, nccl_log::Line)> = f
        .logs
        .iter()
        .flat_map(|(r, l)| {
            l.iter()
                .filter_map(move |x| nccl_log::parse_line(x).map(|p| (*r, p)))
        })
        .collect();
    let ev = Evidence {
        s,
        c,
        f,
        d: &d,
        logs: &logs,
        advertised: &advertised,
        world,
    };
    let (culprit, explanation) = RULES
        .iter()
        .find_map(|rule| (rule.test)(&ev).map(|why| (rule.culprit, why)))
        .unwrap_or((
            Culprit::Unknown,
            "no known misconfiguration in the evidence".to_string(),
        ));
    d.culprit = culprit;
    d.explanation = explanation;
    d.fix = s.fix.text.clone();
    d
}

/// On NCCL the ranks publish nothing in ringlab's store: the evidence is NCCL's own log.
/// Its culprit (from `doctor --log`'s analyser) comes first; a rank that never started is a
/// missing rank; otherwise what the store saw stands (a rank stuck before the rendezvous).
fn nccl_evidence(
    s: &Scenario,
    d: &mut Diagnosis,
    logs: &BTreeMap<usize, Vec<String>>,
    phases: &BTreeMap<usize, String>,
) {
    let world = s.nodes * s.ranks_per_node;
    d.advertised = nccl_advertised(logs).into_iter().collect();
    if let Some((culprit, explanation, lines)) = nccl_culprit(s.ranks_per_node, logs) {
        d.culprit = culprit;
        d.explanation = explanation;
        // The lines it rests on, under the rank that logged the first of them.
        let first = lines.first().cloned().unwrap_or_default();
        let rank = logs
            .iter()
            .find(|(_, ls)| ls.contains(&first))
            .map_or(0, |(r, _)| *r);
        d.last_logs = vec![(rank, lines)];
        return;
    }
    let missing: Vec<String> = (0..world)
        .filter(|r| !phases.contains_key(r))
        .map(|r| r.to_string())
        .collect();
    if !missing.is_empty() && missing.len() < world {
        d.culprit = Culprit::MissingRank;
        d.explanation = format!(
            "world size {world}, but rank(s) {} never started; the others wait inside ncclCommInitRank for them",
            missing.join(", ")
        );
    } else if d.culprit == Culprit::MissingRank {
        // The store-based guess: no NCCL rank publishes an address there.
        d.culprit = Culprit::Unknown;
        d.explanation = "no known misconfiguration in NCCL's log".into();
    }
}

/// Build the cluster `s` needs: namespaces where they can be made (and, for a firewall, where
/// iptables is there), else the emulated cluster, saying why.
pub fn cluster_for(s: &Scenario, mode: Mode) -> Result<Cluster, String> {
    let netns = || -> Result<(), String> {
        cluster::available().map_err(|e| e.to_string())?;
        if s.stage_firewall {
            cluster::firewall_available()?;
        }
        Ok(())
    };
    let shm = s.stage_shm.as_deref();
    let emulate = |why: &str| Cluster::emulated_with_shm(s.nodes, &s.fabric, why, shm);
    match mode {
        Mode::Emulated => emulate("asked for with --mode emulated"),
        Mode::Netns => {
            netns().map_err(|e| format!("{e}, or pass --mode emulated"))?;
            Cluster::create_with_shm(s.nodes, &s.fabric, shm).map_err(|e| e.to_string())
        }
        Mode::Auto => match netns() {
            Ok(()) => Cluster::create_with_shm(s.nodes, &s.fabric, shm)
                .or_else(|e| emulate(&e.to_string())),
            Err(e) => emulate(&e),
        },
    }
}

/// Stage `s` on `c` (from [`cluster_for`]), run it, diagnose; with `fix`, apply the fix and run
/// again.
pub fn run_on(
    s: &Scenario,
    mut c: Cluster,
    fix: bool,
    nccl: Option<&NcclLab>,
    on: &mut dyn FnMut(&Msg),
) -> LabReport {
    let staged = run_once(s, &mut c, None, nccl, on);
    let ranks = (0..s.nodes * s.ranks_per_node)
        .map(|r| RankReport {
            rank: r,
            node: r / s.ranks_per_node,
            phase: staged
                .phases
                .get(&r)
                .cloned()
                .unwrap_or_else(|| "not started".into()),
            advertised: None,
            state: staged.failure.as_ref().and_then(|f| {
                f.states
                    .iter()
                    .find(|(pr, _)| *pr == r)
                    .map(|(_, p)| p.clone())
            }),
        })
        .collect::<Vec<_>>();
    let mut diagnosis = staged.evidence.clone().unwrap_or_default();
    let ranks = ranks
        .into_iter()
        .map(|mut rr| {
            rr.advertised = diagnosis
                .reachability
                .iter()
                .find(|x| x.to_rank == rr.rank)
                .map(|x| x.addr.clone())
                .or_else(|| {
                    diagnosis
                        .advertised
                        .iter()
                        .find(|(r, _)| *r == rr.rank)
                        .map(|(_, a)| a.clone())
                });
            rr
        })
        .collect();
    if diagnosis.fix.is_empty() {
        diagnosis.fix = s.fix.text.clone();
    }
    // The most telling stuck phase: a rank dialing someone, else the first stuck rank's.
    let stuck_phase = staged.failure.as_ref().and_then(|f| {
        f.ranks
            .iter()
            .find(|(_, p, _)| p.starts_with("connect"))
            .or(f.ranks.first())
            .map(|(_, p, _)| p.clone())
    });
    let report_staged = Staged {
        outcome: staged.outcome,
        run_s: staged.run_s,
        stuck_phase,
        detected_after_s: staged.detected_after,
        ranks,
        reason: staged.failure.as_ref().map(|f| f.reason.clone()),
        transport: staged.transport.clone(),
    };
    let fixed = fix.then(|| fixed_run(s, &mut c, &s.fix, nccl, on));
    LabReport {
        scenario: s.name.clone(),
        mode: c.mode().into(),
        emulated_because: c.emulated_because.clone(),
        staged: report_staged,
        diagnosis,
        fixed,
        commands: c.commands.clone(),
    }
}

fn fixed_run(
    s: &Scenario,
    c: &mut Cluster,
    fix: &Fix,
    nccl: Option<&NcclLab>,
    on: &mut dyn FnMut(&Msg),
) -> Fixed {
    let r = run_once(s, c, Some(fix), nccl, on);
    let world = (s.nodes * s.ranks_per_node) as f64;
    let correct =
        r.values.len() == s.nodes * s.ranks_per_node && r.values.iter().all(|(_, v)| *v == world);
    let passed = r.outcome == Outcome::Ok && correct;
    Fixed {
        outcome: if passed { Outcome::Pass } else { r.outcome },
        allreduce_correct: correct,
        reason: r.failure.map(|f| f.to_string()),
        detected_after_s: if passed { None } else { r.detected_after },
        run_s: r.run_s,
        evidence: if passed { None } else { r.evidence },
        transport: r.transport,
    }
}

/// Try a fix (the scenario's, or one the learner picked) on a freshly staged cluster `c` (from
/// [`cluster_for`]).
pub fn try_fix_on(
    s: &Scenario,
    mut c: Cluster,
    fix: &Fix,
    nccl: Option<&NcclLab>,
    on: &mut dyn FnMut(&Msg),
) -> Fixed {
    fixed_run(s, &mut c, fix, nccl, on)
}

/// Fixes a learner might reach for: the right one and tempting wrong ones, in a stable order.
pub fn fix_choices(s: &Scenario) -> Vec<Fix> {
    // Every choice reads alike, "what it does: the setting", the wrong ones as the right one.
    let env = |what: &str, k: &str, v: &str| Fix {
        text: format!("{what}: {k}={v}"),
        env: [(k.to_string(), v.to_string())].into_iter().collect(),
        ..Default::default()
    };
    let mut v = if s.stage_shm.is_some() {
        vec![
            env(
                "Keep NCCL off shared memory, use sockets",
                "NCCL_SHM_DISABLE",
                "1",
            ),
            env("Turn off GPU peer-to-peer copies", "NCCL_P2P_DISABLE", "1"),
            Fix {
                text: "Share the host's IPC namespace and its /dev/shm: docker run --ipc=host"
                    .into(),
                ipc_host: true,
                ..Default::default()
            },
            s.fix.clone(),
        ]
    } else if s.train.is_some() {
        vec![
            Fix {
                text: "Give the job more time: init_process_group(timeout=timedelta(minutes=30))"
                    .into(),
                timeout_factor: Some(2),
                ..Default::default()
            },
            env("Turn off GPU peer-to-peer copies", "NCCL_P2P_DISABLE", "1"),
            Fix {
                text: "Restart from the last checkpoint: run the same job again".into(),
                ..Default::default()
            },
            s.fix.clone(),
        ]
    } else {
        vec![
            env("Turn off GPU peer-to-peer copies", "NCCL_P2P_DISABLE", "1"),
            env("Turn off InfiniBand, use sockets", "NCCL_IB_DISABLE", "1"),
            env(
                "Keep NCCL off the Docker bridge",
                "NCCL_SOCKET_IFNAME",
                "^docker0",
            ),
            s.fix.clone(),
        ]
    };
    // Choices that do the same thing are one choice.
    let effect = |f: &Fix| Fix {
        text: String::new(),
        ..f.clone()
    };
    v.dedup_by(|a, b| effect(a) == effect(b));
    // A stable but not always-last position for the right answer.
    let at = s.name.len() % v.len();
    let right = v.pop();
    if let Some(r) = right {
        v.insert(at.min(v.len()), r);
    }
    v
}

/// Did the run end as the scenario expects? (Staged: its symptom and culprit; fixed: pass.)
pub fn as_expected(s: &Scenario, r: &LabReport) -> bool {
    r.staged.outcome == s.expect.outcome()
        && r.diagnosis.culprit == s.culprit
        && r.fixed.as_ref().is_none_or(|f| f.outcome == Outcome::Pass)
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_nccl_labs_retries_outlast_the_watchdog_as_the_docs_say() {
        use crate::comm::net::Retrier;
        let env = NcclLab::lab_env();
        let get = |k: &str| -> u64 {
            env.iter()
                .find(|(n, _)| n == k)
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or_else(|| panic!("{k} in {env:?}"))
        };
        let minute = Duration::from_secs(60);
        let (total, first_minute) = Retrier::counted_schedule(
            get("NCCL_SOCKET_RETRY_CNT"),
            get("NCCL_SOCKET_RETRY_SLEEP_MSEC"),
            minute,
        );
        // README and NcclLab::lab_env: 109 tries in the first minute, about 83 minutes in all.
        assert_eq!(first_minute, 109);
        assert_eq!(total.as_secs() / 60, 83);
        // NCCL's default: 34 tries, about 60 s, after which it gives up by itself.
        let (default_total, _) = Retrier::counted_schedule(34, 100, minute);
        assert_eq!(default_total.as_millis(), 59_500);
    }
    use super::*;

    #[test]
    fn every_shipped_scenario_parses() {
        let (ok, bad) = all();
        assert!(bad.is_empty(), "{bad:?}");
        let names: Vec<&str> = ok.iter().map(|s| s.name.as_str()).collect();
        for n in [
            "docker0",
            "exclude-docker-picks-lo",
            "lo-across-nodes",
            "iface-names-differ",
            "wrong-master-addr",
            "missing-rank",
            "silent-drop",
        ] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
    }

    /// A blind class sees the brief: it must not name the setting that was staged, nor the
    /// fix; and no fix choice stands out by being the only one described.
    #[test]
    fn briefs_do_not_give_the_cause_away_and_choices_read_alike() {
        let words = |t: &str| -> Vec<String> {
            t.to_lowercase()
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                .filter(|w| !w.is_empty())
                .map(|w| w.trim_end_matches('.').to_string())
                .collect()
        };
        for s in all().0 {
            let brief = words(&s.brief);
            assert!(!s.brief.contains("NCCL_"), "{}: {}", s.name, s.brief);
            let master: Vec<String> = s.stage_master_addr.iter().map(|a| a.to_string()).collect();
            let staged = s
                .stage_env
                .values()
                .chain(s.fix.env.values())
                .chain(master.iter())
                .flat_map(|v| {
                    v.split([',', '^'])
                        .map(str::to_lowercase)
                        .collect::<Vec<_>>()
                })
                .filter(|v| !v.is_empty());
            for v in staged {
                assert!(!brief.contains(&v), "{}: brief names `{v}`", s.name);
            }
            for c in fix_choices(&s) {
                let (what, how) = c.text.split_once(": ").unwrap_or(("", ""));
                assert!(
                    !what.is_empty() && !how.is_empty(),
                    "{}: choice `{}` is not `what it does: the setting`",
                    s.name,
                    c.text
                );
            }
        }
    }

    /// The culprit, the expected outcome and the staged master address are typed: a typo in
    /// a scenario file is an error at its line when the file is loaded, not a run that can
    /// never match.
    #[test]
    fn scenario_fields_are_typed_and_checked_at_load() {
        let good = |extra: &str| {
            format!(
                "name = \"x\"\ntitle = \"t\"\nstory = \"s\"\nbrief = \"b\"\nnodes = 2\n\
                 ranks_per_node = 1\ntimeout = 6\nsymptom = \"y\"\nhints = []\n{extra}\n\
                 [fix]\ntext = \"f\"\n"
            )
        };
        let s = parse(&good(
            "expect = \"hang\"\nculprit = \"missing-rank\"\nstage_master_addr = \"10.0.0.9\"",
        ))
        .expect("parses");
        assert_eq!(s.culprit, Culprit::MissingRank);
        assert_eq!(s.expect, Expect::Hang);
        assert_eq!(s.stage_master_addr, Some("10.0.0.9".parse().expect("ip")));
        let e = parse(&good("expect = \"hang\"\nculprit = \"missing-rnak\""))
            .expect_err("typo in the culprit");
        assert!(e.starts_with("11:") && e.contains("missing-rnak"), "{e}");
        let e = parse(&good("expect = \"stall\"\nculprit = \"unknown\"")).expect_err("bad outcome");
        assert!(e.starts_with("10:") && e.contains("stall"), "{e}");
        let e = parse(&good(
            "expect = \"hang\"\nculprit = \"unknown\"\nstage_master_addr = \"10.0.0.999\"",
        ))
        .expect_err("not an address");
        assert!(e.starts_with("12:"), "{e}");
        for c in Culprit::ALL {
            assert_eq!(Culprit::from_id(c.id()), c);
        }
    }

    #[test]
    fn the_event_stream_is_one_typed_object_per_line() {
        let line = StreamLine::Error("no namespaces".into()).to_line();
        assert_eq!(line, r#"{"error":"no namespaces"}"#);
        let m = StreamLine::Msg(Msg::Log {
            rank: 1,
            line: "NCCL INFO x".into(),
        });
        let back: StreamLine = serde_json::from_str(&m.to_line()).expect("round trip");
        assert_eq!(back, m);
        assert!(m.to_line().starts_with(r#"{"msg":"#), "{}", m.to_line());
        assert!(serde_json::from_str::<StreamLine>(r#"{"bogus":1}"#).is_err());
    }

    #[test]
    fn a_bad_scenario_names_the_line() {
        let e = parse("name = \"x\"\nnodes = \"two\"\n").expect_err("bad");
        assert!(e.starts_with("2:"), "{e}");
    }

    fn logs(per_rank: &[&[&str]]) -> BTreeMap<usize, Vec<String>> {
        per_rank
            .iter()
            .enumerate()
            .map(|(r, ls)| (r, ls.iter().map(|l| l.to_string()).collect()))
            .collect()
    }

    /// NCCL 2.28-shaped logs of a two-node run (each node its own host, as the namespace
    /// nodes are) name the culprit through `doctor --log`'s analyser.
    #[test]
    fn nccls_own_log_names_the_culprit_of_each_scenario() {
        let docker0 = logs(&[
            &[
                "n0:101:101 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to docker0",
                "n0:101:101 [0] NCCL INFO Bootstrap: Using docker0:172.17.0.1<0>",
                "n0:101:101 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>",
            ],
            &[
                "n1:202:202 [0] NCCL INFO Bootstrap: Using docker0:172.17.0.1<0>",
                "n1:202:202 [0] NCCL INFO socketPollConnect: connect to 172.17.0.1<40163> returned Connection refused, retrying (3/1000) after sleep for 30 msec",
            ],
        ]);
        let (c, why, lines) = nccl_culprit(1, &docker0).expect("a culprit");
        assert_eq!(c, Culprit::UnroutableAddress);
        assert!(
            why.contains("docker0") && why.contains("172.17.0.1"),
            "{why}"
        );
        assert!(!lines.is_empty());
        let adv = nccl_advertised(&docker0);
        assert_eq!(adv[&0], "172.17.0.1 (docker0)");

        let names = logs(&[
            &["n0:101:101 [0] NCCL INFO Bootstrap: Using eth0:10.77.0.1<0>"],
            &[
                "n1:202:202 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
                "[2026-12-03 10:11:12] n1:202:202 [0] bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found",
            ],
        ]);
        assert_eq!(
            nccl_culprit(1, &names).expect("culprit").0,
            Culprit::IfaceNotFound
        );

        let dropped = logs(&[
            &["n0:101:101 [0] NCCL INFO Bootstrap: Using eth0:10.77.0.1<0>"],
            &[
                "n1:202:202 [0] NCCL INFO Bootstrap: Using eth0:10.77.0.2<0>",
                "n1:202:202 [0] NCCL INFO socketPollConnect: connect to 10.77.0.1<41877> returned Connection timed out, retrying (1/1000) after sleep for 10 msec",
            ],
        ]);
        assert_eq!(
            nccl_culprit(1, &dropped).expect("culprit").0,
            Culprit::ConnectionDropped
        );

        let healthy = logs(&[
            &["n0:101:101 [0] NCCL INFO Bootstrap: Using eth0:10.77.0.1<0>"],
            &["n1:202:202 [0] NCCL INFO Bootstrap: Using eth0:10.77.0.2<0>"],
        ]);
        assert_eq!(
            nccl_culprit(1, &healthy),
            None,
            "a healthy log names nothing"
        );
    }
}
