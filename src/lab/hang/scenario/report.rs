//! What a staged run reports: each rank's state, the evidence, the diagnosis and the fixed re-run.

use super::*;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankReport {
    pub rank: usize,
    pub node: usize,
    pub phase: String,
    pub advertised: Option<String>,
    /// The rank's process state when the job was stopped, read from /proc/PID/stat: `R`
    /// running, `S` sleeping (waiting on a socket), `T` stopped, `gone` ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<crate::lab::job::ProcState>,
    /// What `nvidia-smi` would show of the rank's GPU while the job is stuck, as NCCL behaves
    /// (absent when the run did not get stuck).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_util: Option<crate::lab::hang::trace::GpuUtil>,
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
    pub transport: Option<crate::comm::cpu::tcp::Transports>,
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
    pub result: Reached,
}

/// What a connect from a node to a rank's address did: the kernel's answer, in its words
/// (strerror's) when it is one the evidence reads, else the text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum Reached {
    Ok,
    Refused,
    TimedOut,
    NoRoute,
    NetworkUnreachable,
    NoSuchNode,
    Other(String),
}

impl Reached {
    const WORDS: [(Reached, &'static str); 6] = [
        (Reached::Ok, "ok"),
        (Reached::Refused, "Connection refused"),
        (Reached::TimedOut, "Connection timed out"),
        (Reached::NoRoute, "No route to host"),
        (Reached::NetworkUnreachable, "Network is unreachable"),
        (Reached::NoSuchNode, "no such node"),
    ];

    /// A connect's failure.
    pub fn from_io(e: &std::io::Error) -> Reached {
        Reached::from(crate::comm::cpu::net::describe(e))
    }
}

impl std::fmt::Display for Reached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reached::Other(t) => f.write_str(t),
            known => {
                let w = Reached::WORDS.iter().find(|(r, _)| r == known);
                f.write_str(w.map_or("", |(_, w)| w))
            }
        }
    }
}

impl From<Reached> for String {
    fn from(r: Reached) -> String {
        r.to_string()
    }
}

impl From<String> for Reached {
    fn from(s: String) -> Reached {
        Reached::WORDS
            .iter()
            .find(|(_, w)| *w == s)
            .map_or(Reached::Other(s), |(r, _)| r.clone())
    }
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
    /// A slow scenario's measurements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow: Option<slow::SlowEvidence>,
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
    pub table: Vec<crate::lab::hang::trace::Row>,
    /// Per rank (index = rank), its GPU as NCCL would leave it ([`crate::lab::hang::trace::GpuUtil::of`]).
    #[serde(default)]
    pub gpu_util: Vec<crate::lab::hang::trace::GpuUtil>,
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
    pub transport: Option<crate::comm::cpu::tcp::Transports>,
    /// A slow scenario's re-run: what it measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow: Option<slow::SlowEvidence>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabReport {
    pub scenario: String,
    pub mode: crate::lab::hang::cluster::ClusterMode,
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
