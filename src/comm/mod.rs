//! Processes and bytes on the wire, in three rooms that match the three systems:
//! - `cpu/`: ringlab's own backend (rendezvous store, the engine that runs a schedule, the NET,
//!   SHM and P2P transports) moving real bytes between real processes;
//! - `nccl/`: real NCCL, loaded at run time (`find`: which libnccl to trust) and driven over FFI;
//! - `emu/`: the imitation of NCCL (its log lines per release, the virtual network of the hang
//!   lab) that makes the CPU backend look and fail as NCCL does.

pub mod cpu;
pub mod emu;
pub mod nccl;

/// How far a communicator's set-up has come: what a rank tells its launcher while it meets its
/// peers, so the watchdog can name the step a hang is in and give each its own patience.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Setup {
    /// Publishing this rank's address and waiting for the others' (NCCL's bootstrap).
    Rendezvous,
    /// Dialling a lower rank.
    Connect { to: std::net::SocketAddr },
    /// Waiting for the higher ranks to dial in.
    Accept,
    /// Choosing and connecting each pair's transport (P2P, SHM, NET).
    Transports,
    /// Opening the TCP windows of the connections that carry data.
    WarmUp,
    /// Creating the CUDA context on a GPU (not NCCL's init: a big GPU's first takes seconds).
    CudaInit { gpu: usize },
    /// NCCL's communicator init on a GPU.
    NcclInit { gpu: usize },
    /// One process, many GPUs: contexts and ncclCommInitAll in one call.
    CudaAndInitAll { gpus: usize },
}

impl std::fmt::Display for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use nccl::{CUDA_INIT, NCCL_INIT};
        match self {
            Setup::Rendezvous => f.write_str("rendezvous"),
            Setup::Connect { to } => write!(f, "connect to {to}"),
            Setup::Accept => f.write_str("accept"),
            Setup::Transports => f.write_str("transports"),
            Setup::WarmUp => f.write_str("warm up connections"),
            Setup::CudaInit { gpu } => write!(f, "{CUDA_INIT} on GPU {gpu}"),
            Setup::NcclInit { gpu } => write!(f, "{NCCL_INIT} on GPU {gpu}"),
            Setup::CudaAndInitAll { gpus } => {
                write!(
                    f,
                    "{CUDA_INIT} and ncclCommInitAll on {gpus} GPUs (one process)"
                )
            }
        }
    }
}
