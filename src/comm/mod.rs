//! Processes and bytes on the wire: the rendezvous store, NCCL-style interface selection and
//! logging, and the TCP backend that executes collective schedules between real processes.

pub mod cma;
pub mod engine;
pub mod fdpass;
pub mod header;
pub mod ifaces;
pub mod log;
pub mod nccl;
pub mod ncclfind;
pub mod net;
pub mod owner;
pub mod p2p;
pub mod reduce;
pub mod shm;
pub mod store;
pub mod tcp;
pub mod transport;
pub mod vnet;
pub mod wire;
