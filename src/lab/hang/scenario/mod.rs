//! The hang lab: scenarios are data (`labs/*.toml`). A scenario is staged on a virtual cluster,
//! its job (a training loop) runs under it, the watchdog declares the hang, evidence is gathered
//! while the ranks still wait (interface tables, advertised addresses, a reachability matrix,
//! last log lines), a culprit is named from that evidence, and the fix is applied and re-run.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use include_dir::{Dir, include_dir};
use serde::{Deserialize, Serialize};

use crate::lab::hang::cluster::{self, Cluster};
use crate::lab::job::launch::{self, Failure, Launch, LaunchError, Msg, Placement};
use crate::lab::{Event, Job};
use crate::nccl_log;

mod evidence;
mod report;
mod run;
pub mod slow;
#[cfg(test)]
mod tests;

use evidence::*;
pub use report::*;
pub use run::*;

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
    /// Slow scenarios: this node's staged links back at full speed (a new cable, a reseated
    /// optic, the node replaced); the other nodes' stay as staged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unshape: Option<usize>,
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
    /// Slow: one node's link carries less than the others' (every pair with it is slow).
    SlowLink,
    /// Slow: NCCL's interface order picked a slow NIC while a fast one sits unused.
    WrongNic,
    /// Slow: one rank is slower at its own work; the others wait for it inside collectives.
    Straggler,
    #[default]
    Unknown,
}

impl Culprit {
    /// Every culprit (the tests round-trip their ids).
    #[cfg(test)]
    pub const ALL: [Culprit; 14] = [
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
        Culprit::SlowLink,
        Culprit::WrongNic,
        Culprit::Straggler,
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
            Culprit::SlowLink => "slow-link",
            Culprit::WrongNic => "wrong-nic",
            Culprit::Straggler => "straggler",
            Culprit::Unknown => "unknown",
        }
    }

    /// From an id; anything else is Unknown (the tests' inverse of [`Culprit::id`]).
    #[cfg(test)]
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
            Culprit::SlowLink => "one node's link is degraded",
            Culprit::WrongNic => "NCCL uses the slow NIC",
            Culprit::Straggler => "one rank is slower at its own work",
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
    /// The job runs to the end, slowly.
    Slow,
}

/// How a run ended: `ok` (went through), `hang` (the watchdog fired), `error` (a rank or the
/// setup failed); a fix's re-run is `pass` when it went through with the right all-reduce
/// (`ok` there means it went through with a wrong result).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumString,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Outcome {
    Ok,
    Pass,
    Hang,
    Error,
    /// Went through, at the speed of its slowest part.
    Slow,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        self.into()
    }
}

impl Scenario {
    /// A run-time hang (a training loop that stops mid-run), not one at start-up.
    pub fn run_time(&self) -> bool {
        self.train.is_some() && !self.slow_job()
    }

    /// A job that runs to the end, slowly (`expect = "slow"`), not one that hangs or fails.
    pub fn slow_job(&self) -> bool {
        self.expect == Expect::Slow
    }

    /// What a passing run proved: the check its job makes.
    pub fn pass_claim(&self) -> String {
        if self.slow_job() {
            return match &self.train {
                Some(_) => "every step ran, and the flight recorders show no rank waited on by the others".into(),
                None => "no interface the ranks' NET/Socket used is shaped on any node any more, and the all-reduce's results were checked".into(),
            };
        }
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
            Expect::Slow => Outcome::Slow,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
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
    pub train: Option<crate::lab::hang::train::TrainSpec>,
    /// Every node a container with a /dev/shm of this size (tmpfs units: `64m` is Docker's
    /// default without --shm-size or --ipc=host).
    #[serde(default)]
    pub stage_shm: Option<String>,
    /// A slow scenario's measurement and staged links.
    #[serde(default)]
    pub slow: Option<slow::SlowSpec>,
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

/// The store's port on the namespace cluster: PyTorch's default MASTER_PORT. Each run has
/// fresh namespaces, so it is always free there.
pub const MASTER_PORT: u16 = 29500;

/// One file that did not parse, with where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    pub message: String,
}

/// The names of the scenarios shipped in the binary (parsed once; the course map counts the
/// solved ones).
pub fn names() -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| all().0.into_iter().map(|s| s.name).collect())
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
            Err(e) => bad.push(ScenarioError {
                file,
                message: e.to_string(),
            }),
        }
    }
    // Hangs first, then the jobs that run slowly: the lab's two halves, each by name.
    ok.sort_by_key(|s: &Scenario| s.slow_job());
    if let Some(Err(e)) = watchdog {
        bad.push(ScenarioError {
            file: WATCHDOG_ENV.into(),
            message: e.to_string(),
        });
    }
    (ok, bad)
}

/// Seconds without progress before every scenario's watchdog fires, instead of each
/// scenario's own (6 s for most): shorter waits for a demo or the test suite, longer on a slow
/// machine. `lab run --timeout` still wins for one run.
pub const WATCHDOG_ENV: &str = "RINGLAB_LAB_TIMEOUT";

/// What is wrong with a scenario file, or with the watchdog time of [`WATCHDOG_ENV`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioParseError {
    /// The TOML does not read as a scenario, at `line:col` (1-based).
    #[error("{line}:{col}: {message}")]
    Toml {
        line: usize,
        col: usize,
        message: String,
    },
    #[error("nodes must be {fewest}..=8, got {got}")]
    Nodes { fewest: usize, got: usize },
    #[error("ranks_per_node must be 1..=8, got {0}")]
    RanksPerNode(usize),
    #[error("[train]: steps, tp_bytes and dp_bytes must be at least 1")]
    TrainEmpty,
    #[error(
        "[train] fault: rank {rank} step {step} is outside the job ({world} ranks, steps 1..={steps})"
    )]
    FaultOutside {
        rank: usize,
        step: usize,
        world: usize,
        steps: usize,
    },
    #[error("[slow] shape: node {node} is outside the cluster (nodes 0..{nodes})")]
    ShapeOutside { node: usize, nodes: usize },
    #[error(
        "expect = \"slow\" needs a [slow] section (links to shape) or a [train] loop with a straggler"
    )]
    SlowWithoutStaging,
    #[error("[slow] and the straggler fault need expect = \"slow\"")]
    SlowNotExpected,
    #[error("`{0}` is not a watchdog time: give whole seconds, 1 to 3600")]
    Watchdog(String),
    #[error("no scenario `{name}`; known: {known}")]
    Unknown { name: String, known: String },
}

/// [`WATCHDOG_ENV`], if set: whole seconds 1..=3600, else an error naming the variable.
fn watchdog_from_env() -> Option<Result<u64, ScenarioParseError>> {
    let v = std::env::var(WATCHDOG_ENV).ok()?;
    Some(
        v.trim()
            .parse::<u64>()
            .ok()
            .filter(|t| (1..=3600).contains(t))
            .ok_or(ScenarioParseError::Watchdog(v)),
    )
}

pub fn parse(text: &str) -> Result<Scenario, ScenarioParseError> {
    let s: Scenario = toml::from_str(text).map_err(|e| {
        let (line, col) = e.span().map_or((1, 1), |sp| {
            crate::course::block::offset_to_line_col(text, sp.start)
        });
        ScenarioParseError::Toml {
            line,
            col,
            message: e.message().to_string(),
        }
    })?;
    // One node is a cluster only when the node itself is the trap (a container's /dev/shm).
    let fewest = if s.stage_shm.is_some() { 1 } else { 2 };
    if !(fewest..=8).contains(&s.nodes) {
        return Err(ScenarioParseError::Nodes {
            fewest,
            got: s.nodes,
        });
    }
    if !(1..=8).contains(&s.ranks_per_node) {
        return Err(ScenarioParseError::RanksPerNode(s.ranks_per_node));
    }
    if let Some(t) = &s.train {
        let world = s.nodes * s.ranks_per_node;
        if t.steps == 0 || t.tp_bytes == 0 || t.dp_bytes == 0 {
            return Err(ScenarioParseError::TrainEmpty);
        }
        if let Some(f) = &t.fault
            && (f.rank >= world || f.step == 0 || f.step > t.steps)
        {
            return Err(ScenarioParseError::FaultOutside {
                rank: f.rank,
                step: f.step,
                world,
                steps: t.steps,
            });
        }
    }
    check_slow(&s)?;
    Ok(s)
}

/// A slow scenario stages something slow, and only a slow scenario does.
fn check_slow(s: &Scenario) -> Result<(), ScenarioParseError> {
    let straggles = s
        .train
        .as_ref()
        .and_then(|t| t.fault)
        .is_some_and(|f| f.kind == crate::lab::hang::train::FaultKind::Straggle);
    let slow = s.expect == Expect::Slow;
    if !slow && (s.slow.is_some() || straggles) {
        return Err(ScenarioParseError::SlowNotExpected);
    }
    if slow && s.slow.is_none() && !straggles {
        return Err(ScenarioParseError::SlowWithoutStaging);
    }
    let fixed = s.fix.unshape;
    for n in s
        .slow
        .iter()
        .flat_map(|x| &x.shape)
        .filter_map(|sh| sh.node)
        .chain(fixed)
    {
        if n >= s.nodes {
            return Err(ScenarioParseError::ShapeOutside {
                node: n,
                nodes: s.nodes,
            });
        }
    }
    Ok(())
}

pub fn find(name: &str) -> Result<Scenario, ScenarioParseError> {
    let (all, _) = all();
    let names: Vec<String> = all.iter().map(|s| s.name.clone()).collect();
    all.into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| ScenarioParseError::Unknown {
            name: name.into(),
            known: names.join(", "),
        })
}
