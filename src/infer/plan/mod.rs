//! The vLLM launch planner: a cluster and a model in; TP, PP, a memory check, the
//! communication bill per decode token, and the exact commands for every node out.
//!
//! The rule it applies (and says when to break): TP = GPUs per node when that divides the
//! attention and KV heads, else the largest power of two that does; PP = nodes.

use std::fmt::Write;
use std::str::FromStr;

use serde::Serialize;

use super::model::ModelConfig;
use super::tp::{Check, Level, allreduce_schedule, link_time, tp_checks};
use crate::collective::{
    Algorithm, Collective, Dtype, LINK_PRESETS, Link, Schedule, Spec, estimate,
};

mod text;
pub use text::shell_lines;

/// vLLM's default `--gpu-memory-utilization`: the share of GPU memory it may use.
pub const GPU_MEMORY_UTILIZATION: f64 = 0.9;

/// GPU sizes as sold (GB) and what `nvidia-smi` reports for them (MiB), where checked: an
/// H100 80GB HBM3 shows 81559 MiB, 85 520 809 984 B (lesson 05). The planner's one figure.
pub const REPORTED_MIB: &[(f64, u64)] = &[(80.0, 81_559)];

/// The bytes of a GPU sold as `gb` GB: what `nvidia-smi` reports ([`REPORTED_MIB`]) where
/// known, else `gb` × 10⁹ B.
pub fn gpu_memory_bytes(gb: f64) -> u64 {
    REPORTED_MIB
        .iter()
        .find(|&&(sold, _)| sold == gb)
        .map_or((gb * 1e9) as u64, |&(_, mib)| mib << 20)
}

/// The share of one GPU vLLM may fill by default: [`GPU_MEMORY_UTILIZATION`] × its bytes.
pub fn gpu_budget_bytes(gb: f64) -> u64 {
    (gpu_memory_bytes(gb) as f64 * GPU_MEMORY_UTILIZATION) as u64
}
/// Planner limits.
pub const MAX_NODES: usize = 64;
pub const MAX_GPUS_PER_NODE: usize = 16;
/// Ray's default port for `ray start --head`.
pub const RAY_PORT: u16 = 6379;
/// Ranks up to which the "TP across every node" comparison is computed.
const MAX_COMPARE_RANKS: usize = 256;

/// vLLM's distributed executor backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Python multiprocessing: one process per local GPU; the default on one node.
    Mp,
    /// Ray: a cluster formed with `ray start`, one `vllm serve` on the head.
    Ray,
}

impl Backend {
    pub const ALL: [Backend; 2] = [Backend::Mp, Backend::Ray];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Mp => "mp",
            Backend::Ray => "ray",
        }
    }

    pub fn next(self) -> Self {
        match self {
            Backend::Mp => Backend::Ray,
            Backend::Ray => Backend::Mp,
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "mp" | "multiprocessing" => Ok(Backend::Mp),
            "ray" => Ok(Backend::Ray),
            _ => Err(format!("unknown backend \"{s}\"; expected mp or ray")),
        }
    }
}

/// A link preset by a short name: `nvlink`, `pcie`, `ib` (InfiniBand), `ethernet`, or a preset
/// name. Returns the index into [`LINK_PRESETS`].
pub fn find_link(name: &str) -> Result<usize, PlanError> {
    let key = name.trim().to_ascii_lowercase();
    let short = match key.as_str() {
        "nvlink" => Some(0),
        "pcie" => Some(1),
        "ib" | "infiniband" => Some(2),
        "ethernet" | "eth" | "tcp" => Some(3),
        _ => None,
    };
    short
        .or_else(|| {
            LINK_PRESETS
                .iter()
                .position(|l| l.name.to_ascii_lowercase() == key)
        })
        .ok_or_else(|| PlanError::UnknownLink(name.to_string()))
}

/// The link presets' names, for a message.
fn preset_names() -> String {
    LINK_PRESETS
        .iter()
        .map(|l| l.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What to plan for.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanInput {
    pub model: ModelConfig,
    pub nodes: usize,
    pub gpus_per_node: usize,
    /// Weight element type (bf16 by default).
    pub dtype: Dtype,
    /// Memory of one GPU in GB (1e9 bytes).
    pub gpu_mem_gb: f64,
    /// Link inside a node (index into [`LINK_PRESETS`]).
    pub intra: usize,
    /// Link between nodes (index into [`LINK_PRESETS`]).
    pub inter: usize,
    /// The head node's IP address; `HEAD_IP` in the commands when not given.
    pub head_ip: Option<String>,
    /// The network interface the nodes reach each other on.
    pub iface: String,
}

impl PlanInput {
    /// bf16, 80 GB GPUs, NVLink inside a node, InfiniBand between nodes, eth0.
    pub fn new(model: ModelConfig, nodes: usize, gpus_per_node: usize) -> Self {
        Self {
            model,
            nodes,
            gpus_per_node,
            dtype: Dtype::Bf16,
            gpu_mem_gb: 80.0,
            intra: 0,
            inter: 2,
            head_ip: None,
            iface: "eth0".into(),
        }
    }
}

/// Inputs the planner cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("--nodes must be 1..={MAX_NODES}, got {0}")]
    Nodes(usize),
    #[error("--gpus-per-node must be 1..={MAX_GPUS_PER_NODE}, got {0}")]
    GpusPerNode(usize),
    #[error("GPU memory must be a positive number of GB, got {0}")]
    GpuMemory(String),
    #[error("--head-ip \"{0}\" is not an IP address (e.g. 10.0.0.1)")]
    HeadIp(String),
    #[error("--iface \"{0}\" is not one interface name (e.g. eth0, ens5, ib0)")]
    Iface(String),
    #[error("unknown link \"{0}\"; expected nvlink, pcie, ib or ethernet ({presets})", presets = preset_names())]
    UnknownLink(String),
    #[error("link index {0} is not a preset")]
    Link(usize),
    #[error("{0}")]
    Schedule(String),
}

/// Weights against GPU memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Memory {
    /// params × bytes per param (0 when the parameter count is unknown).
    pub weight_bytes: u64,
    /// weight_bytes / (TP × PP), rounded up.
    pub per_gpu_bytes: u64,
    pub gpu_bytes: u64,
    /// gpu_bytes × [`GPU_MEMORY_UTILIZATION`].
    pub budget_bytes: u64,
    /// budget − per GPU weights: what is left for the KV cache and activations.
    pub headroom_bytes: i64,
    /// None when the parameter count is unknown.
    pub fits: Option<bool>,
    /// Whether the weights alone would fit on one node at TP = GPUs per node.
    pub fits_one_node: Option<bool>,
}

/// Communication per decode token (one token, one sequence), estimated from schedules.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommCost {
    pub tp_link: &'static str,
    /// Bytes of one TP all-reduce (hidden × dtype).
    pub tp_allreduce_bytes: u64,
    pub tp_allreduces: u64,
    pub tp_per_token_s: f64,
    pub pp_link: &'static str,
    /// Bytes of one stage-to-stage handoff (hidden × dtype).
    pub pp_handoff_bytes: u64,
    pub pp_handoffs: u64,
    pub pp_per_token_s: f64,
    /// If TP instead spanned every used GPU, with the ring paced by the link between nodes.
    pub tp_across_nodes_per_token_s: Option<f64>,
}

/// One environment variable to set, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

/// What one node runs, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeStep {
    pub node: usize,
    /// "head", "worker", or "head (after every worker joined)".
    pub role: String,
    pub env: Vec<EnvVar>,
    pub commands: Vec<String>,
}

/// The launch for one backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Launch {
    pub backend: Backend,
    pub steps: Vec<NodeStep>,
}

/// The planner's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub model: String,
    pub hf_id: String,
    pub nodes: usize,
    pub gpus_per_node: usize,
    pub total_gpus: usize,
    pub tp: usize,
    pub pp: usize,
    pub gpus_used: usize,
    /// Fewest and most layers on one pipeline stage.
    pub layers_per_stage: (u64, u64),
    pub dtype: &'static str,
    pub intra_link: &'static str,
    pub inter_link: &'static str,
    pub reasons: Vec<String>,
    pub checks: Vec<Check>,
    pub memory: Memory,
    pub comm: CommCost,
    pub launches: Vec<Launch>,
    /// False when any check is an error.
    pub valid: bool,
}

/// True when `tp` splits both the attention heads and the KV heads evenly.
pub fn divides_heads(model: &ModelConfig, tp: usize) -> bool {
    let t = tp as u64;
    t > 0 && model.heads.is_multiple_of(t) && model.kv_heads.is_multiple_of(t)
}

/// TP = GPUs per node if it divides the heads and KV heads, else the largest power of two at
/// most that which does (1 always does). Returns the degree and the reason in words.
pub fn recommend_tp(model: &ModelConfig, gpus_per_node: usize) -> (usize, String) {
    let heads = format!(
        "the {} attention heads and {} KV heads",
        model.heads, model.kv_heads
    );
    if gpus_per_node == 1 {
        return (
            1,
            "TP = 1: one GPU per node holds whole layers, so there is no all-reduce".to_string(),
        );
    }
    if divides_heads(model, gpus_per_node) {
        return (
            gpus_per_node,
            format!(
                "TP = GPUs per node = {gpus_per_node}: it divides {heads}, and every all-reduce stays inside the node"
            ),
        );
    }
    let mut p = 1usize;
    while p * 2 <= gpus_per_node && divides_heads(model, p * 2) {
        p *= 2;
    }
    // Name what fails to divide: "16 does not divide the 8 KV heads" (16 divides 128 heads).
    let g = gpus_per_node as u64;
    let fails = match (
        model.heads.is_multiple_of(g.max(1)),
        model.kv_heads.is_multiple_of(g.max(1)),
    ) {
        (true, false) => format!("the {} KV heads", model.kv_heads),
        (false, true) => format!("the {} attention heads", model.heads),
        _ => heads.clone(),
    };
    (
        p,
        format!(
            "TP = {p}: {gpus_per_node} GPUs per node do not divide {fails}; {p} is the largest power of two that divides {heads}"
        ),
    )
}

fn valid_iface(s: &str) -> bool {
    (1..=15).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@'))
}

/// Makes the plan.
pub fn plan(input: &PlanInput) -> Result<Plan, PlanError> {
    let m = &input.model;
    let (intra, inter) = check_input(input)?;
    let (nodes, gpn) = (input.nodes, input.gpus_per_node);

    let (tp, tp_reason) = recommend_tp(m, gpn);
    let pp = nodes;
    let mut reasons = vec![tp_reason];
    reasons.push(if pp == 1 {
        "PP = nodes = 1: one node, no pipeline".to_string()
    } else {
        format!(
            "PP = nodes = {pp}: consecutive layers live on different nodes, and only each token's activations cross a node boundary, point to point"
        )
    });
    let gpus_used = tp * pp;
    let layers_per_stage = (m.layers / pp as u64, m.layers.div_ceil(pp as u64));

    let mut checks: Vec<Check> = tp_checks(m, tp, gpn)
        .into_iter()
        .filter(|c| c.level != Level::Ok)
        .collect();
    let mut check = |level, message: String| checks.push(Check { level, message });
    if pp as u64 > m.layers {
        check(
            Level::Error,
            format!(
                "PP {pp} is more than the {} layers: some stages would be empty",
                m.layers
            ),
        );
    }
    if tp < gpn {
        check(
            Level::Warn,
            format!(
                "TP {tp} leaves {} of the {gpn} GPUs on each node idle: run a second replica on them (its own CUDA_VISIBLE_DEVICES and port)",
                gpn - tp
            ),
        );
    }
    let memory = memory(input, gpus_used, &mut check);
    link_checks(input, intra, &mut check);
    let comm = comm_cost(input, tp, pp, intra, inter)?;
    let launches = Backend::ALL
        .iter()
        .map(|&b| launch(b, input, tp, pp))
        .collect();
    let valid = checks.iter().all(|c| c.level != Level::Error);
    Ok(Plan {
        model: m.name.clone(),
        hf_id: m.hf_id.clone(),
        nodes,
        gpus_per_node: gpn,
        total_gpus: nodes * gpn,
        tp,
        pp,
        gpus_used,
        layers_per_stage,
        dtype: input.dtype.name(),
        intra_link: intra.name,
        inter_link: inter.name,
        reasons,
        checks,
        memory,
        comm,
        launches,
        valid,
    })
}

/// The input's numbers and names in range; the intra- and inter-node links it names.
fn check_input(input: &PlanInput) -> Result<(&'static Link, &'static Link), PlanError> {
    if !(1..=MAX_NODES).contains(&input.nodes) {
        return Err(PlanError::Nodes(input.nodes));
    }
    if !(1..=MAX_GPUS_PER_NODE).contains(&input.gpus_per_node) {
        return Err(PlanError::GpusPerNode(input.gpus_per_node));
    }
    if !(input.gpu_mem_gb.is_finite() && input.gpu_mem_gb > 0.0) {
        return Err(PlanError::GpuMemory(input.gpu_mem_gb.to_string()));
    }
    if let Some(ip) = &input.head_ip
        && ip.parse::<std::net::IpAddr>().is_err()
    {
        return Err(PlanError::HeadIp(ip.clone()));
    }
    if !valid_iface(&input.iface) {
        return Err(PlanError::Iface(input.iface.clone()));
    }
    let intra = LINK_PRESETS
        .get(input.intra)
        .ok_or(PlanError::Link(input.intra))?;
    let inter = LINK_PRESETS
        .get(input.inter)
        .ok_or(PlanError::Link(input.inter))?;
    Ok((intra, inter))
}

/// The weights against GPU memory on `gpus_used` GPUs, with what does not fit (or fits
/// needlessly across nodes) told through `check`.
fn memory(input: &PlanInput, gpus_used: usize, check: &mut impl FnMut(Level, String)) -> Memory {
    let (m, nodes, gpn) = (&input.model, input.nodes, input.gpus_per_node);
    let bpp = input.dtype.size() as u64;
    let weight_bytes = m.weight_bytes(bpp);
    let gpu_bytes = gpu_memory_bytes(input.gpu_mem_gb);
    let budget_bytes = gpu_budget_bytes(input.gpu_mem_gb);
    let per_gpu_bytes = weight_bytes.div_ceil(gpus_used as u64);
    let known = m.params > 0;
    let fits = known.then_some(per_gpu_bytes <= budget_bytes);
    let one_node = weight_bytes.div_ceil(gpn as u64);
    let fits_one_node = known.then_some(one_node <= budget_bytes);
    let headroom_bytes = budget_bytes as i64 - per_gpu_bytes as i64;
    let gb = |b: u64| format!("{:.1} GB", b as f64 / 1e9);
    match fits {
        None => check(
            Level::Warn,
            "parameter count unknown: memory not checked (give --params)".into(),
        ),
        Some(false) => check(
            Level::Error,
            format!(
                "won't fit: {} of weights per GPU is more than the {} budget ({} × {}); add nodes, use bigger GPUs or quantize (fp8 halves it)",
                gb(per_gpu_bytes),
                gb(budget_bytes),
                GPU_MEMORY_UTILIZATION,
                gb(gpu_bytes)
            ),
        ),
        Some(true) if (headroom_bytes as f64) < 0.1 * gpu_bytes as f64 => check(
            Level::Warn,
            format!(
                "fits, but only {} per GPU is left for the KV cache: short contexts, few sequences at once",
                gb(headroom_bytes.max(0) as u64)
            ),
        ),
        Some(true) => {}
    }
    if nodes > 1 && fits_one_node == Some(true) {
        check(
            Level::Warn,
            format!(
                "the weights fit on one node ({} per GPU at TP {gpn}): PP across nodes buys memory you do not need; one replica per node keeps all traffic on NVLink",
                gb(one_node)
            ),
        );
    }

    Memory {
        weight_bytes,
        per_gpu_bytes,
        gpu_bytes,
        budget_bytes,
        headroom_bytes,
        fits,
        fits_one_node,
    }
}

/// The interface and the link inside a node: a loopback or a bridge across nodes, no NVLink.
fn link_checks(input: &PlanInput, intra: &Link, check: &mut impl FnMut(Level, String)) {
    let nodes = input.nodes;
    let iface = input.iface.as_str();
    match node_local(iface) {
        Some(NodeLocal::Loopback) if nodes > 1 => check(
            Level::Error,
            format!(
                "--iface {iface} is the loopback: it cannot reach another node, so the bootstrap retries and hangs"
            ),
        ),
        Some(NodeLocal::Bridge) if nodes > 1 => check(
            Level::Error,
            format!(
                "--iface {iface} is a local bridge (docker0 is 172.17.0.1 on every Docker host): peers would dial themselves"
            ),
        ),
        _ => {}
    }
    if input.intra != 0 {
        check(
            Level::Warn,
            format!(
                "no NVLink inside the node: TP's all-reduces run over {}",
                intra.name
            ),
        );
    }
}

/// Communication per decode token: TP's all-reduces on `intra`, PP's hand-offs on `inter`,
/// and what TP across all nodes would cost instead.
fn comm_cost(
    input: &PlanInput,
    tp: usize,
    pp: usize,
    intra: &Link,
    inter: &Link,
) -> Result<CommCost, PlanError> {
    let (m, nodes, gpus_used) = (&input.model, input.nodes, tp * pp);
    let bpp = input.dtype.size() as u64;
    let tp_sched = allreduce_schedule(m, tp, 1, input.dtype)
        .map_err(|e| PlanError::Schedule(e.to_string()))?;
    let calls = super::tp::allreduces_per_forward(m.layers, tp);
    let tp_time = link_time(&tp_sched, intra, calls);
    let handoff = Schedule::build(&Spec::new(
        Collective::SendRecv,
        Algorithm::Ring,
        2,
        m.hidden_size as usize,
        input.dtype.size(),
    ))
    .map_err(|e| PlanError::Schedule(e.to_string()))?;
    let handoffs = (pp - 1) as u64;
    let across = (nodes > 1 && gpus_used <= MAX_COMPARE_RANKS)
        .then(|| allreduce_schedule(m, gpus_used, 1, input.dtype).ok())
        .flatten()
        .map(|s| {
            let calls = super::tp::allreduces_per_forward(m.layers, gpus_used);
            link_time(&s, inter, calls).per_forward_s
        });
    Ok(CommCost {
        tp_link: intra.name,
        tp_allreduce_bytes: tp_sched.spec().bytes(),
        tp_allreduces: calls,
        tp_per_token_s: tp_time.per_forward_s,
        pp_link: inter.name,
        pp_handoff_bytes: m.hidden_size * bpp,
        pp_handoffs: handoffs,
        pp_per_token_s: estimate(&handoff, inter).total_s * handoffs as f64,
        tp_across_nodes_per_token_s: across,
    })
}

/// The environment each node needs when the job spans nodes.
fn node_env(input: &PlanInput, node: usize) -> Vec<EnvVar> {
    let var = |name: &str, value: String| EnvVar {
        name: name.into(),
        value,
    };
    let ip = if node == 0 {
        head(input)
    } else {
        format!(
            "$(ip -4 -br addr show dev {} | awk '{{print $3}}' | cut -d/ -f1)",
            input.iface
        )
    };
    vec![
        var("NCCL_SOCKET_IFNAME", input.iface.clone()),
        var("GLOO_SOCKET_IFNAME", input.iface.clone()),
        var("VLLM_HOST_IP", ip),
    ]
}

fn head(input: &PlanInput) -> String {
    input.head_ip.clone().unwrap_or_else(|| "HEAD_IP".into())
}

fn launch(backend: Backend, input: &PlanInput, tp: usize, pp: usize) -> Launch {
    let mut serve = format!(
        "vllm serve {} --tensor-parallel-size {tp}",
        input.model.hf_id
    );
    if pp > 1 {
        let _ = write!(serve, " --pipeline-parallel-size {pp}");
    }
    let nodes = input.nodes;
    let role = |r: usize| if r == 0 { "head" } else { "worker" }.to_string();
    let steps = match (backend, nodes) {
        (Backend::Mp, 1) => vec![NodeStep {
            node: 0,
            role: "the only node".into(),
            env: Vec::new(),
            commands: vec![serve],
        }],
        (Backend::Ray, 1) => vec![NodeStep {
            node: 0,
            role: "the only node".into(),
            env: Vec::new(),
            commands: vec![format!("{serve} --distributed-executor-backend ray")],
        }],
        (Backend::Mp, n) => (0..n)
            .map(|r| NodeStep {
                node: r,
                role: role(r),
                env: node_env(input, r),
                commands: vec![format!(
                    "{serve} --nnodes {n} --node-rank {r} --master-addr {}{}",
                    head(input),
                    if r > 0 { " --headless" } else { "" }
                )],
            })
            .collect(),
        (Backend::Ray, n) => {
            let mut steps: Vec<NodeStep> = (0..n)
                .map(|r| NodeStep {
                    node: r,
                    role: role(r),
                    env: node_env(input, r),
                    commands: vec![if r == 0 {
                        format!("ray start --head --port={RAY_PORT}")
                    } else {
                        format!("ray start --address={}:{RAY_PORT}", head(input))
                    }],
                })
                .collect();
            steps.push(NodeStep {
                node: 0,
                role: format!("head, once `ray status` shows all {n} nodes"),
                env: Vec::new(),
                commands: vec![format!("{serve} --distributed-executor-backend ray")],
            });
            steps
        }
    };
    Launch { backend, steps }
}

/// Why an interface cannot carry traffic between nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeLocal {
    /// `lo`: only this host.
    Loopback,
    /// `docker0`, `virbr0`: a bridge every host has, with the same address.
    Bridge,
}

/// The one home of "is this NIC node-local" (by name, as NCCL's default exclusion does).
pub fn node_local(iface: &str) -> Option<NodeLocal> {
    if iface.starts_with("lo") {
        Some(NodeLocal::Loopback)
    } else if iface.starts_with("docker") || iface.starts_with("virbr") {
        Some(NodeLocal::Bridge)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::model::find_model;

    fn input(model: &str, nodes: usize, gpn: usize) -> PlanInput {
        PlanInput::new(find_model(model).expect("preset"), nodes, gpn)
    }

    /// Lesson 05's budget and its 405B table are the planner's: 0.9 × 81559 MiB ≈ 77.0 GB, and
    /// per GPU 101.5 / 50.7 / 25.4 GB on 1, 2 and 4 nodes of 8, with 26.2 and 51.6 GB left.
    #[test]
    fn lesson_05s_budget_and_405b_table_are_the_planners() {
        let gb = |b: u64| format!("{:.1} GB", b as f64 / 1e9);
        let lesson = include_str!("../../../lessons/05-vllm-launch.md");
        assert_eq!(gpu_memory_bytes(80.0), 85_520_809_984);
        let budget = gb(gpu_budget_bytes(80.0));
        assert_eq!(budget, "77.0 GB");
        assert!(lesson.contains(&format!("fits in {budget}?")), "{budget}");
        for (nodes, per_gpu, left) in [
            (1, "101.5 GB", None),
            (2, "50.7 GB", Some("26.2 GB")),
            (4, "25.4 GB", Some("51.6 GB")),
        ] {
            let p = plan(&input("llama-3.1-405b", nodes, 8)).expect("plan");
            assert_eq!(gb(p.memory.per_gpu_bytes), per_gpu, "{nodes} nodes");
            assert_eq!(p.memory.fits, Some(left.is_some()), "{nodes} nodes");
            let row = lesson
                .lines()
                .find(|l| l.starts_with(&format!("| {nodes} node")))
                .expect("a table row");
            assert!(row.contains(per_gpu), "{row}");
            if let Some(left) = left {
                assert_eq!(gb(p.memory.headroom_bytes as u64), left, "{nodes} nodes");
                assert!(row.contains(&format!("yes, {left} left")), "{row}");
            }
        }
    }

    #[test]
    fn llama_70b_on_2x8_is_tp8_pp2() {
        let p = plan(&input("llama-3.1-70b", 2, 8)).expect("plan");
        assert_eq!((p.tp, p.pp, p.gpus_used), (8, 2, 16));
        assert_eq!(p.layers_per_stage, (40, 40));
        assert_eq!(p.memory.weight_bytes, 141_107_412_992);
        assert_eq!(p.memory.per_gpu_bytes, 8_819_213_312);
        assert_eq!(p.memory.fits, Some(true));
        assert!(p.valid);
        // It fits on one node too, so the planner says when to break the rule.
        assert!(
            p.checks
                .iter()
                .any(|c| c.message.contains("fit on one node"))
        );
    }

    #[test]
    fn decode_bill_comes_from_the_schedules() {
        let p = plan(&input("llama-3.1-70b", 2, 8)).expect("plan");
        assert_eq!(p.comm.tp_allreduce_bytes, 16384);
        assert_eq!(p.comm.tp_allreduces, 160);
        assert_eq!(p.comm.pp_handoff_bytes, 16384);
        assert_eq!(p.comm.pp_handoffs, 1);
        // One IB step: 5 µs + 16384 B / 50 GB/s.
        assert!((p.comm.pp_per_token_s - (5e-6 + 16384.0 / 50e9)).abs() < 1e-12);
        let across = p.comm.tp_across_nodes_per_token_s.expect("computed");
        assert!(across > p.comm.tp_per_token_s * 2.0, "{across}");
    }

    #[test]
    fn qwen_7b_falls_back_to_tp4() {
        let p = plan(&input("qwen2.5-7b", 1, 8)).expect("plan");
        assert_eq!(p.tp, 4);
        assert!(p.reasons[0].contains("largest power of two"));
        assert!(
            p.checks
                .iter()
                .any(|c| c.message.contains("4 of the 8 GPUs"))
        );
    }

    #[test]
    fn recommend_tp_never_exceeds_the_node_and_always_divides() {
        for m in crate::infer::presets() {
            for gpn in 1..=MAX_GPUS_PER_NODE {
                let (tp, _) = recommend_tp(&m, gpn);
                assert!(tp <= gpn && divides_heads(&m, tp), "{} {gpn}", m.name);
            }
        }
    }

    #[test]
    fn llama_405b_does_not_fit_on_one_node_of_80gb() {
        let p = plan(&input("llama-3.1-405b", 1, 8)).expect("plan");
        assert_eq!(p.memory.fits, Some(false));
        assert!(!p.valid);
        assert!(p.checks.iter().any(|c| c.message.starts_with("won't fit")));
        let p2 = plan(&input("llama-3.1-405b", 2, 8)).expect("plan");
        assert_eq!(p2.memory.fits, Some(true));
        assert_eq!(p2.layers_per_stage, (63, 63));
    }

    #[test]
    fn mp_commands_for_every_node() {
        let mut i = input("llama-3.1-70b", 2, 8);
        i.head_ip = Some("10.0.0.1".into());
        let p = plan(&i).expect("plan");
        let mp = p.launch(Backend::Mp).expect("mp");
        assert_eq!(mp.steps.len(), 2);
        assert_eq!(
            mp.steps[0].commands[0],
            "vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 8 --pipeline-parallel-size 2 --nnodes 2 --node-rank 0 --master-addr 10.0.0.1"
        );
        assert!(
            mp.steps[1].commands[0].ends_with("--node-rank 1 --master-addr 10.0.0.1 --headless")
        );
        let env: Vec<_> = mp.steps[0].env.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            env,
            ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "VLLM_HOST_IP"]
        );
        assert_eq!(mp.steps[0].env[2].value, "10.0.0.1");
        assert!(mp.steps[1].env[2].value.contains("dev eth0"));
    }

    #[test]
    fn ray_forms_the_cluster_then_serves_once() {
        let mut i = input("llama-3.1-70b", 2, 8);
        i.head_ip = Some("10.0.0.1".into());
        let p = plan(&i).expect("plan");
        let ray = p.launch(Backend::Ray).expect("ray");
        let cmds: Vec<&str> = ray
            .steps
            .iter()
            .flat_map(|s| s.commands.iter().map(String::as_str))
            .collect();
        assert_eq!(
            cmds,
            [
                "ray start --head --port=6379",
                "ray start --address=10.0.0.1:6379",
                "vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 8 --pipeline-parallel-size 2 --distributed-executor-backend ray",
            ]
        );
    }

    #[test]
    fn one_node_needs_no_network_env() {
        let p = plan(&input("llama-3.1-8b", 1, 4)).expect("plan");
        let mp = p.launch(Backend::Mp).expect("mp");
        assert_eq!(
            mp.steps[0].commands,
            ["vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 4"]
        );
        assert!(mp.steps[0].env.is_empty());
    }

    #[test]
    fn bad_inputs_are_clear_errors() {
        assert_eq!(plan(&input("llama-3.1-8b", 0, 8)), Err(PlanError::Nodes(0)));
        assert_eq!(
            plan(&input("llama-3.1-8b", 1, 17)),
            Err(PlanError::GpusPerNode(17))
        );
        let mut i = input("llama-3.1-8b", 2, 8);
        i.head_ip = Some("10.0.0".into());
        assert!(matches!(plan(&i), Err(PlanError::HeadIp(_))));
        let mut i = input("llama-3.1-8b", 2, 8);
        i.iface = "eth0 eth1".into();
        assert!(matches!(plan(&i), Err(PlanError::Iface(_))));
    }

    #[test]
    fn loopback_across_nodes_is_an_error() {
        let mut i = input("llama-3.1-70b", 2, 8);
        i.iface = "lo".into();
        let p = plan(&i).expect("plan");
        assert!(!p.valid);
        i.iface = "docker0".into();
        assert!(!plan(&i).expect("plan").valid);
    }

    #[test]
    fn links_by_short_name() {
        assert_eq!(find_link("nvlink"), Ok(0));
        assert_eq!(find_link("PCIe"), Ok(1));
        assert_eq!(find_link("ib"), Ok(2));
        assert_eq!(find_link("100G Ethernet"), Ok(3));
        assert!(find_link("carrier pigeon").is_err());
    }

    #[test]
    fn long_commands_wrap_with_backslashes() {
        let lines = shell_lines(
            "vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 8 --pipeline-parallel-size 2 --nnodes 2 --node-rank 0 --master-addr 10.0.0.1",
            80,
            "  ",
        );
        assert!(lines.len() > 1);
        for l in &lines {
            assert!(l.chars().count() <= 80, "{l}");
        }
        assert!(lines[0].ends_with(" \\"));
    }

    #[test]
    fn text_fits_80_columns() {
        for (m, n) in [
            ("llama-3.1-405b", 2),
            ("qwen2.5-7b", 3),
            ("mixtral-8x7b", 1),
        ] {
            let text = plan(&input(m, n, 8)).expect("plan").to_text(None);
            for l in text.lines() {
                // The worker's VLLM_HOST_IP shell expression is the one long line.
                if l.contains("VLLM_HOST_IP=$(") {
                    continue;
                }
                assert!(l.chars().count() <= 80, "{m}: {l}");
            }
        }
    }
}
