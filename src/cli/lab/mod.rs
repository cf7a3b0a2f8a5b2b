//! `ringlab bench`, `ringlab sanity`, the loopback ceiling and the hang lab (`ringlab lab`): the
//! live labs on the command line, with nccl-tests' flags and table. This module holds what they
//! share (where the ranks run, which backend, how a failed launch is said); each command has
//! its own file.

mod bench;
mod hang;
mod loopback;
mod pairs;
mod sanity;

pub use bench::{BenchArgs, bench};
pub use hang::{HangLab, hang_lab};
pub use loopback::{LoopbackArgs, loopback};
pub use sanity::{SanityArgs, sanity};

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use crate::collective::{Algorithm, Collective, Dtype, Op};
use crate::lab::bench::gpu;
use crate::lab::bench::{Average, Collector, sizes};
use crate::lab::job::launch::{self, Launch, LaunchError, Msg};
use crate::lab::{Backend, BackendChoice, Event, Job};
use crate::units::parse_size;

/// Where the ranks run (torchrun's flags).
#[derive(Debug, Clone, clap::Args)]
pub struct LaunchArgs {
    /// Rank processes on this node [default: 2 with tcp; one per GPU with nccl].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub nproc_per_node: Option<u64>,
    /// Nodes in the job (multi-node needs the same RINGLAB_TOKEN on every node).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub nnodes: u64,
    /// This node's index, 0..nnodes.
    #[arg(long, default_value_t = 0)]
    pub node_rank: u64,
    /// Address of node 0, where the rendezvous store listens.
    #[arg(long, default_value = "127.0.0.1")]
    pub master_addr: String,
    /// Port of the rendezvous store (0 picks a free one; single node only).
    #[arg(long, default_value_t = 0)]
    pub master_port: u16,
    /// Seconds without progress from a rank before the job is declared hung and killed.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout: u64,
    /// Under a launcher across hosts without RINGLAB_TOKEN, run anyway with a token derived
    /// from the launcher's public variables, which anyone who can reach the store can derive
    /// too (warned on every run).
    #[arg(long)]
    pub insecure_token: bool,
}

impl LaunchArgs {
    /// The launch, with `default_nproc` ranks on this node unless --nproc-per-node says.
    pub fn launch(&self, default_nproc: usize) -> Result<Launch, String> {
        if self.node_rank >= self.nnodes {
            return Err(format!(
                "--node-rank {} is not a node: with --nnodes {} it is 0..{}",
                self.node_rank,
                self.nnodes,
                self.nnodes - 1
            ));
        }
        if self.nnodes > 1 && self.master_port == 0 {
            return Err(
                "multi-node jobs need --master-port (the port node 0's store listens on)".into(),
            );
        }
        Ok(Launch {
            nproc_per_node: self
                .nproc_per_node
                .map_or(default_nproc.max(1), |n| n as usize),
            nnodes: self.nnodes as usize,
            node_rank: self.node_rank as usize,
            master_addr: self.master_addr.clone(),
            master_port: self.master_port,
            timeout: Duration::from_secs(self.timeout),
            nccl_init_grace: Duration::ZERO,
            env: Vec::new(),
            cancel: None,
            placement: None,
            token: None,
            local: None,
        })
    }
}

/// Which backend carries the bytes.
#[derive(Debug, Clone, clap::Args)]
pub struct GpuArgs {
    /// tcp (any machine), nccl (GPUs), or auto (nccl with 2 or more GPUs, else tcp).
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// NCCL: K local ranks share each GPU, each a host of its own to NCCL (NCCL_HOSTID), so
    /// their bytes cross NET/Socket through host memory. Two ranks on a one-GPU machine:
    /// --ranks-per-gpu 2 --nproc-per-node 2. Not NVLink bandwidth.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub ranks_per_gpu: Option<u64>,
}

/// A resolved backend and what it means for the launch.
struct Plan {
    backend: Backend,
    /// Ranks per node when --nproc-per-node is not given.
    default_nproc: usize,
    /// The machine, when NCCL runs (it is handed to `gpu::prepare`).
    machine: Option<gpu::Machine>,
}

/// Resolve `--backend`: the probe runs only when NCCL might be used, and loads NCCL only with
/// a GPU to use it on or when asked. Prints which backend and why on stderr; `Err(message)`
/// means exit 2.
fn plan(g: &GpuArgs) -> Result<Plan, String> {
    // Asking for shared GPUs is asking for NCCL.
    let asked = match (g.backend, g.ranks_per_gpu) {
        (BackendChoice::Tcp, Some(_)) => {
            return Err(
                "--ranks-per-gpu shares GPUs between NCCL ranks: it needs --backend nccl".into(),
            );
        }
        (BackendChoice::Auto, Some(_)) => BackendChoice::Nccl,
        (b, _) => b,
    };
    if asked == BackendChoice::Tcp {
        return Ok(Plan {
            backend: Backend::Tcp,
            default_nproc: 2,
            machine: None,
        });
    }
    let m = gpu::machine(if asked == BackendChoice::Nccl {
        gpu::LoadNccl::Asked
    } else {
        gpu::LoadNccl::IfGpu
    });
    let (backend, why) = gpu::choose(asked, &m)?;
    eprintln!("# {why}");
    Ok(match backend {
        Backend::Tcp => Plan {
            backend,
            default_nproc: 2,
            machine: None,
        },
        Backend::Nccl => Plan {
            backend,
            default_nproc: m.gpus() * g.ranks_per_gpu.unwrap_or(1) as usize,
            machine: Some(m),
        },
    })
}

/// Prepare an NCCL launch (nothing to do on TCP); the notes go to stderr.
fn prepare(
    p: &mut Plan,
    job: &mut Job,
    l: &mut Launch,
    g: &GpuArgs,
    algo: Option<Algorithm>,
) -> Result<Option<gpu::Prepared>, String> {
    let Some(m) = p.machine.take() else {
        return Ok(None);
    };
    let ask = gpu::GpuAsk {
        ranks_per_gpu: g.ranks_per_gpu.map(|k| k as usize),
        algo,
    };
    let prepared = gpu::prepare(job, l, m, &ask)?;
    if let Some(w) = prepared.machine.two_nccls() {
        eprintln!("# warning: {w}");
    }
    for n in &prepared.notes {
        eprintln!("# note: {n}");
    }
    Ok(Some(prepared))
}

fn exit2(e: String) -> anyhow::Result<ExitCode> {
    eprintln!("ringlab: {e}");
    Ok(ExitCode::from(2))
}

fn fail(e: LaunchError) -> anyhow::Result<ExitCode> {
    match e {
        LaunchError::Setup(s) => anyhow::bail!(s),
        LaunchError::Failed(f) => {
            eprintln!(
                "ringlab: job failed: {}",
                crate::cli::printable(&f.to_string())
            );
            Ok(ExitCode::from(1))
        }
    }
}

/// NCCL's tuning lines seen since the last table line (algorithm and protocol per call).
#[derive(Default)]
struct Tuning {
    last: Option<(u64, String, String)>,
}

/// Forward a rank's log line to stderr; NCCL's tuning lines are kept for the table instead
/// (there is one per call).
fn forward_log(msg: &Msg, tuning: &mut Tuning) {
    if let Msg::Log { rank, line } = msg {
        if let Some(t) = gpu::tuning_line(line) {
            tuning.last = Some(t);
            return;
        }
        eprintln!("[rank {rank}] {line}");
    }
}
