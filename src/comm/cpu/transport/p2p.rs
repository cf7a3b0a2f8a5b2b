//! P2P: single copy between ranks of one node. The receiver reads a large message straight out
//! of the sender's buffer with cross-memory attach ([`crate::comm::cpu::cma`]), as NCCL's P2P
//! transport reads a peer GPU's buffer (`P2P/direct pointer`, `P2P/CUMEM`); small messages still
//! go through the pair's shared-memory FIFO. It needs everything SHM needs, single copy allowed
//! on both sides (no `NCCL_P2P_DISABLE=1`), and the kernel's permission to read the partner's
//! memory (the ptrace access rule: same user, and Yama's `ptrace_scope` allowing it). Each side
//! can only probe its own direction, so the pair is P2P only once both have said they read the
//! other (its connect, in `shm.rs`); otherwise it stays SHM.

use std::io;

use super::shm::{FifoLink, recv_fifo};
use super::{Connector, Decline, PeerInfo, Transport, shm::Shm};
use crate::comm::cpu::cma;
use crate::comm::cpu::engine::{EngineError, Pass, PeerLink, Run, STAGE_WINDOW};
use crate::comm::cpu::shm::Pipe;

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
        crate::comm::cpu::cma::can_read(pid, peer.probe_addr, peer.probe_value)
            .map_err(|e| Decline::Because(e.to_string()))
    }
}

/// P2P's progress: a large message goes by single copy (the sender posts descriptors of where
/// its bytes lie and is done once the partner has read them all; the receiver reads them out
/// of the sender's mapped region, or with cross-memory attach); the rest, and the header, go
/// through the pair's FIFO as on SHM.
#[derive(Clone, Copy)]
pub struct CmaLink<'a> {
    pub fifo: FifoLink<'a>,
}

impl PeerLink for CmaLink<'_> {
    fn send(
        &self,
        run: &mut Run,
        pass: &mut Pass,
        p: usize,
        i: usize,
        ready: usize,
    ) -> Result<bool, EngineError> {
        let (pipe, o) = (self.fifo.pipe, run.op(i));
        if !(pipe.cma_to && run.single(o)) {
            return self.fifo.send(run, pass, p, i, ready);
        }
        // Post where the ready bytes lie; the send is done when the partner has read them
        // all, and not before: until then they must not change.
        let (len, posted) = (o.range.len(), run.st[i].got);
        if ready > posted && (ready - posted >= cma::QUANTUM || ready == len) {
            let bytes = run.send_bytes(i, posted, ready);
            let (at, n) = (bytes.as_ptr() as usize, bytes.len().min(cma::MAX_DESC));
            let d = run.io.regions.desc(p, at, n);
            if pipe.tx.push_whole(&d.encode()) {
                pipe.peer_bell.ring();
                run.st[i].got += n;
                pass.moved = true;
            }
        }
        let read = (pipe.tx.acked().wrapping_sub(run.ack_base[p]) as usize).min(len);
        if read > run.st[i].done {
            run.st[i].done = read;
            pass.moved = true;
        }
        if run.st[i].done == len {
            run.ack_base[p] += len as u64;
        } else {
            pass.active_sends += 1;
            pass.shm_wait = true;
        }
        Ok(false)
    }

    fn recv_header(
        &self,
        run: &mut Run,
        pass: &mut Pass,
        p: usize,
        i: usize,
    ) -> Result<usize, EngineError> {
        self.fifo.recv_header(run, pass, p, i)
    }

    fn recv(
        &self,
        run: &mut Run,
        pass: &mut Pass,
        p: usize,
        i: usize,
        lim: usize,
    ) -> Result<(), EngineError> {
        let pipe = self.fifo.pipe;
        let k = match pipe.cma_from {
            Some(pid) if run.single(run.op(i)) => {
                recv_cma(pipe, pid, run, p, i, lim).map_err(|err| match err.raw_os_error() {
                    Some(libc::ESRCH) => EngineError::Closed { op: i, peer: p },
                    _ => EngineError::Io {
                        op: i,
                        peer: p,
                        err,
                    },
                })?
            }
            _ => recv_fifo(pipe, run, i, lim),
        };
        self.fifo.received(run, pass, i, lim, k);
        Ok(())
    }

    fn pending(&self) -> Option<usize> {
        self.fifo.pending()
    }
    fn liveness_fd(&self) -> Option<i32> {
        self.fifo.liveness_fd()
    }
    fn acked(&self) -> u64 {
        self.fifo.acked()
    }
}

/// One pass of a single-copy receive: take the partner's next descriptor from the FIFO and
/// read as much of it as the buffer allows now: out of the partner's region mapped here
/// (copied, or reduced straight from it), or with cross-memory attach (into the buffer, or
/// through this peer's staging window for a reduction). Acknowledges what it read; the
/// descriptor leaves the FIFO once read whole. Returns the bytes read.
fn recv_cma(
    pipe: &Pipe,
    pid: libc::pid_t,
    run: &mut Run,
    p: usize,
    i: usize,
    lim: usize,
) -> io::Result<usize> {
    use crate::comm::cpu::p2p::{DESC, Desc};
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let (a, b) = pipe.rx.peek(DESC);
    if a.len() + b.len() < DESC {
        return Ok(0);
    }
    let mut raw = [0u8; DESC];
    raw[..a.len()].copy_from_slice(a);
    raw[a.len()..].copy_from_slice(b);
    let d = Desc::decode(&raw).ok_or_else(|| bad(format!("not a descriptor: {raw:02x?}")))?;
    let o = run.op(i);
    let (len, off) = (o.range.len(), run.desc_off[p]);
    if d.is_empty() || off >= d.len() || d.len() - off > len - run.st[i].got {
        return Err(bad(format!(
            "a descriptor of {} bytes for a message with {} to go",
            d.len(),
            len - run.st[i].got
        )));
    }
    let d = d.skip(off);
    let theirs = run.io.regions.theirs.get(p).map_or(&[][..], Vec::as_slice);
    // The partner's bytes where they lie, when its region is mapped here.
    let mapped = |k: usize| -> io::Result<Option<&[u8]>> {
        match d {
            Desc::Addr { .. } => Ok(None),
            Desc::Region { id, off, .. } => theirs
                .iter()
                .find(|r| r.id == id)
                .and_then(|r| r.get(off, k))
                .map(Some)
                .ok_or_else(|| bad(format!("region {id} bytes {off}+{k} are not mapped here"))),
        }
    };
    let k = if o.reduce {
        let es = run.io.es.max(1);
        let done = run.st[i].done;
        // A reduction by cross-memory attach lands in this peer's staging window (there is
        // one only for peers this rank reduces from).
        let w = run.window(p);
        let mut k = d.len().min(lim.saturating_sub(done));
        if mapped(0)?.is_none() {
            k = k.min(run.staging.get(w..w + STAGE_WINDOW).map_or(0, <[u8]>::len));
        }
        let k = k / es * es;
        if k == 0 {
            return Ok(0);
        }
        let at = o.range.start + done;
        run.first_write(i, at, k);
        let src: &[u8] = match (mapped(k)?, d) {
            (Some(s), _) => s,
            (None, Desc::Addr { addr, .. }) => {
                let win = &mut run.staging[w..w + k];
                cma::read(pid, win, addr)?;
                &run.staging[w..w + k]
            }
            (None, Desc::Region { .. }) => return Err(bad("unmapped region".into())),
        };
        (run.io.reduce)(run.io.op, &mut run.buf[at..at + k], src);
        run.st[i].done += k;
        run.st[i].got = run.st[i].done;
        k
    } else {
        let got = run.st[i].got;
        let k = d.len().min(lim.saturating_sub(got));
        if k == 0 {
            return Ok(0);
        }
        let at = o.range.start + got;
        match (mapped(k)?, d) {
            (Some(s), _) => run.buf[at..at + k].copy_from_slice(s),
            (None, Desc::Addr { addr, .. }) => cma::read(pid, &mut run.buf[at..at + k], addr)?,
            (None, Desc::Region { .. }) => return Err(bad("unmapped region".into())),
        }
        run.st[i].got += k;
        run.st[i].done = run.st[i].got;
        k
    };
    run.desc_off[p] += k;
    pipe.rx.ack(k);
    if k == d.len() {
        pipe.rx.consume(DESC);
        run.desc_off[p] = 0;
    }
    Ok(k)
}
