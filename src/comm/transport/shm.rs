//! SHM: shared-memory FIFOs between ranks of one node ([`crate::comm::shm`]), as NCCL's SHM
//! transport (`via SHM/direct/direct`). Two ranks can use it when they share a host and a
//! /dev/shm and neither sets `NCCL_SHM_DISABLE=1`. Connecting is one round among the node's
//! partners: each rank makes its segment (a FIFO per partner), partners map it and say so,
//! then its name is unlinked, so nothing is left behind whatever happens to the ranks. P2P
//! pairs ([`super::p2p`]) are connected here too: they use the FIFO for small messages.

use std::net::TcpStream;
use std::os::fd::AsRawFd;

use super::{Connector, Decline, PeerInfo, Transport};
use crate::comm::log;
use crate::comm::tcp::{
    CommError, RankEnv, SETUP_WAIT, channel, connected, log_shm_error, swap_frames,
    swap_frames_each,
};
use crate::nccl_log::Msg;

pub struct Shm;

impl Connector for Shm {
    fn kind(&self) -> Transport {
        Transport::Shm
    }
    fn can_connect(&self, me: &PeerInfo, peer: &PeerInfo) -> Result<(), Decline> {
        if me.locality.shm_with(&peer.locality) {
            Ok(())
        } else {
            Err(Decline::Quietly)
        }
    }
}

/// A partner of this node, with what the table chose for it (P2P or SHM).
pub struct Partner {
    pub rank: usize,
    pub info: PeerInfo,
    pub p2p: bool,
}

/// The shared-memory side of a communicator: this rank's segment, its partners', and a pipe
/// per local partner. The pipes point into the segments, which live exactly as long.
pub struct Links {
    pub pipes: Vec<Option<crate::comm::shm::Pipe>>,
    pub bell: crate::comm::shm::Bell,
    _mine: crate::comm::shm::Segment,
    _theirs: Vec<crate::comm::shm::Segment>,
}

/// Where a rank's segment is and which FIFO in it belongs to whom.
#[derive(serde::Serialize, serde::Deserialize)]
struct Offer {
    path: String,
    len: usize,
    fifo: usize,
    /// Slot k is the FIFO rank `slots[k]` writes into.
    slots: Vec<usize>,
}

/// What a rank says once it has mapped its partners' segments and probed them.
#[derive(serde::Serialize, serde::Deserialize, Default)]
struct Ack {
    /// Empty, or why a segment could not be mapped.
    error: String,
    /// This rank will read the partner's large messages from its memory.
    reads: bool,
}

/// Make this rank's segment, map every local partner's, agree, and unlink: the FIFOs of every
/// pair in `local`, and each pair's final transport (P2P confirmed, or SHM) in `transports`.
pub(crate) fn connect(
    env: &RankEnv,
    peers: &mut [Option<TcpStream>],
    local: &[Partner],
    transports: &mut [Option<Transport>],
    deferred: &mut Vec<Msg>,
) -> Result<Links, CommError> {
    use crate::comm::shm::{Pipe, Segment, fifo_size, segment_len};
    let rank = env.rank;
    let setup = |what: String| CommError::Setup { rank, what };
    let ranks: Vec<usize> = local.iter().map(|p| p.rank).collect();
    let fifo = fifo_size().map_err(setup)?;
    let len = segment_len(local.len(), fifo);
    let mut mine = Segment::create(&crate::comm::shm::dir(), len).map_err(|source| {
        log_shm_error(&source);
        CommError::Shm { rank, source }
    })?;
    log::info(&format!(
        "MMAP allocated shareable host buffer {} size {len}",
        mine.path().display()
    ));
    let offer = serde_json::to_vec(&Offer {
        path: mine.path().display().to_string(),
        len,
        fifo,
        slots: ranks.clone(),
    })
    .map_err(|e| setup(e.to_string()))?;
    let offers = swap_frames(
        rank,
        peers,
        &ranks,
        &offer,
        "shared-memory segment",
        SETUP_WAIT,
    )?;
    let mut theirs = Vec::with_capacity(local.len());
    let mut pipes: Vec<Option<Pipe>> = (0..env.world).map(|_| None).collect();
    let mut failure: Option<String> = None;
    for (k, (partner, o)) in local.iter().zip(&offers).enumerate() {
        let p = partner.rank;
        let offer: Offer =
            serde_json::from_slice(o).map_err(|e| setup(format!("rank {p}'s segment: {e}")))?;
        let opened = Segment::open(std::path::Path::new(&offer.path), offer.len)
            .map_err(|e| e.to_string())
            .and_then(|seg| {
                let slot = offer
                    .slots
                    .iter()
                    .position(|&r| r == rank)
                    .ok_or_else(|| format!("rank {p}'s segment has no FIFO for rank {rank}"))?;
                let tx = seg
                    .fifo(slot, offer.fifo)
                    .ok_or_else(|| format!("rank {p}'s segment is too small"))?;
                let rx = mine
                    .fifo(k, fifo)
                    .ok_or_else(|| "this rank's segment is too small".to_string())?;
                let fd = peers[p].as_ref().map_or(-1, |s| s.as_raw_fd());
                // Single copy from p where the table chose P2P (both allow it, and this rank
                // has read p's memory).
                let cma_from = partner
                    .p2p
                    .then(|| libc::pid_t::try_from(partner.info.pid).ok())
                    .flatten();
                pipes[p] = Some(Pipe {
                    tx,
                    rx,
                    peer_bell: seg.bell(),
                    fd,
                    cma_from,
                    cma_to: false,
                });
                Ok(seg)
            });
        match opened {
            Ok(seg) => {
                log::info(&format!(
                    "MMAP imported shareable host buffer {} size {}",
                    offer.path, offer.len
                ));
                theirs.push(seg);
            }
            Err(e) => {
                log::warn(&e);
                failure.get_or_insert(e);
            }
        }
    }
    // Everyone says whether it mapped its partners' segments (and will read their memory);
    // then each name can go. One frame per partner: what this rank says to that one.
    let mut frames = Vec::with_capacity(local.len());
    for &p in &ranks {
        let ack = Ack {
            error: failure.clone().unwrap_or_default(),
            reads: pipes[p].as_ref().is_some_and(|x| x.cma_from.is_some()),
        };
        frames.push(serde_json::to_vec(&ack).map_err(|e| setup(e.to_string()))?);
    }
    let acks = swap_frames_each(
        rank,
        peers,
        &ranks,
        |k| &frames[k],
        "shared-memory check",
        SETUP_WAIT,
    )?;
    mine.release_name();
    if let Some(e) = failure {
        return Err(setup(e));
    }
    for (partner, a) in local.iter().zip(&acks) {
        let p = partner.rank;
        let ack: Ack = serde_json::from_slice(a)
            .map_err(|e| setup(format!("rank {p}'s shared-memory check: {e}")))?;
        if !ack.error.is_empty() {
            return Err(setup(format!(
                "rank {p} could not map this rank's segment: {}",
                ack.error
            )));
        }
        let Some(pipe) = pipes[p].as_mut() else {
            continue;
        };
        // P2P when single copy works both ways, as NCCL's P2P transport connects a pair;
        // its line has a connection index, SHM's has none (src/transport/p2p.cc, shm.cc).
        let p2p = super::p2p::confirm(partner.p2p, ack.reads);
        pipe.cma_to = p2p;
        if !p2p {
            pipe.cma_from = None;
        }
        let via = if p2p { "P2P/CMA" } else { "SHM/direct/direct" };
        let mut line = channel(rank, env.local_rank, p, partner.info.dev, None, via);
        transports[p] = Some(if p2p { Transport::P2p } else { Transport::Shm });
        if p2p && let Msg::Channel(c) = &mut line {
            c.conn = Some(0);
        }
        connected(deferred, line);
    }
    let bell = mine.bell();
    Ok(Links {
        pipes,
        bell,
        _mine: mine,
        _theirs: theirs,
    })
}
