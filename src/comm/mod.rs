//! Processes and bytes on the wire, in three rooms that match the three systems:
//! - `cpu/`: ringlab's own backend (rendezvous store, the engine that runs a schedule, the NET,
//!   SHM and P2P transports) moving real bytes between real processes;
//! - `nccl/`: real NCCL, loaded at run time (`find`: which libnccl to trust) and driven over FFI;
//! - `emu/`: the imitation of NCCL (its log lines per release, the virtual network of the hang
//!   lab) that makes the CPU backend look and fail as NCCL does.

pub mod cpu;
pub mod emu;
pub mod nccl;
