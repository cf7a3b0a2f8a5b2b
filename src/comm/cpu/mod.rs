//! The CPU backend: ringlab's own collectives between real processes. The rendezvous store,
//! the engine that runs a schedule, and its transports (NET over TCP, SHM FIFOs, P2P single
//! copy), each bringing its own progress (`transport/`).

pub mod cma;
pub mod engine;
pub mod fdpass;
pub mod header;
pub mod ifaces;
pub mod net;
pub mod owner;
pub mod p2p;
pub mod pace;
pub mod reduce;
pub mod shm;
pub mod store;
pub mod tcp;
pub mod transport;
pub mod wire;
