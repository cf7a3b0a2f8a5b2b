//! P2P: single copy between ranks of one node. The receiver reads a large message straight out
//! of the sender's buffer with cross-memory attach ([`crate::comm::cma`]), as NCCL's P2P
//! transport reads a peer GPU's buffer (`P2P/direct pointer`, `P2P/CUMEM`); small messages still
//! go through the pair's shared-memory FIFO. It needs everything SHM needs, single copy allowed
//! on both sides (no `NCCL_P2P_DISABLE=1`), and the kernel's permission to read the partner's
//! memory (the ptrace access rule: same user, and Yama's `ptrace_scope` allowing it). Each side
//! can only probe its own direction, so the pair is P2P only once both have said they read the
//! other ([`confirm`]); otherwise it stays SHM.

use super::{Connector, Decline, PeerInfo, Transport, shm::Shm};

pub struct P2p;

impl Connector for P2p {
    fn kind(&self) -> Transport {
        Transport::P2p
    }
    fn can_connect(&self, me: &PeerInfo, peer: &PeerInfo) -> Result<(), Decline> {
        Shm.can_connect(me, peer)?;
        if !(me.p2p && peer.p2p) {
            return Err(Decline::Quietly);
        }
        let pid = libc::pid_t::try_from(peer.pid)
            .map_err(|_| Decline::Because(format!("process id {} is out of range", peer.pid)))?;
        crate::comm::cma::can_read(pid, peer.probe_addr, peer.probe_value).map_err(Decline::Because)
    }
}

/// A pair this rank chose P2P for is P2P when the partner reads this rank's memory too.
pub fn confirm(chosen_here: bool, partner_reads: bool) -> bool {
    chosen_here && partner_reads
}
