//! The imitation of NCCL: its log lines for a chosen release and the virtual network the hang
//! lab stages on. Nothing here moves data; it makes the CPU backend look and fail as NCCL does.

pub mod log;
pub mod vnet;
