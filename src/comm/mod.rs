//! Processes and bytes on the wire, three ways to run a collective between real processes:
//!
//! - the TCP backend ([`tcp`], [`engine`], [`transport`]), ringlab's imitation of NCCL: the
//!   rendezvous [`store`], NCCL-style interface selection ([`ifaces`]) and logging ([`log`]),
//!   and per pair of ranks a transport as NCCL picks one: NET (TCP), SHM (shared-memory FIFOs,
//!   [`shm`]) or P2P (single copy: mapped buffers [`p2p`], cross-memory attach [`cma`], handed
//!   over as descriptors [`fdpass`]);
//! - real NCCL on GPUs ([`nccl`], the library found by [`ncclfind`]);
//! - the emulated cluster's network ([`vnet`]) that lets one machine stand in for several.

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
