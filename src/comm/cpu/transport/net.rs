//! NET: the partner's TCP socket carries its bytes (NCCL's net transport over its Socket
//! plugin). It connects any pair, so it is last in the table; the socket itself was dialled
//! during rendezvous ([`super::super::tcp::TcpComm::init`]).

use std::io;

use nix::errno::Errno;
use nix::sys::socket::{self, MsgFlags};

use super::{Connector, Decline, PeerInfo, Transport};
use crate::comm::cpu::engine::{EngineError, Pass, PeerLink, Run, SPIN, STAGE_WINDOW};
use crate::comm::cpu::tcp::{RankEnv, channel, connected};
use crate::nccl_log::Msg;

pub struct Net;

impl Connector for Net {
    fn kind(&self) -> Transport {
        Transport::NET
    }
    fn can_connect(&self, _: &PeerInfo, _: &PeerInfo) -> Result<(), Decline> {
        Ok(())
    }
}

/// The pair's two channel lines, as NCCL prints a net connection: `[send] via NET/Socket/0`
/// from this rank and `[receive]` into it.
pub(crate) fn connect(env: &RankEnv, peer: usize, theirs: &PeerInfo, deferred: &mut Vec<Msg>) {
    let (rank, dev) = (env.rank, env.local_rank);
    connected(
        deferred,
        channel(rank, dev, peer, theirs.dev, Some("send"), "NET/Socket/0"),
    );
    connected(
        deferred,
        channel(peer, theirs.dev, rank, dev, Some("receive"), "NET/Socket/0"),
    );
}

/// NET's progress: the bytes go through the partner's TCP socket, nonblocking, a slice at a
/// time ([`SEND_SLICE`](crate::comm::cpu::engine::SEND_SLICE)); a header goes out corked with the
/// call's first bytes, and comes in with them, in one system call where it can.
#[derive(Clone, Copy)]
pub struct TcpLink {
    pub fd: i32,
}

impl PeerLink for TcpLink {
    fn send(
        &self,
        run: &mut Run,
        pass: &mut Pass,
        p: usize,
        i: usize,
        ready: usize,
    ) -> Result<bool, EngineError> {
        let (fd, o) = (self.fd, run.op(i));
        if ready <= run.st[i].done {
            return Ok(true);
        }
        let slice = run.io.send_slice;
        // The header goes out corked when the call's first bytes follow at once.
        let next = run.next_send(p);
        let more = o.header
            && next.is_some_and(|j| {
                let l = run.limit(j);
                if run.op(j).stage_at.is_some() {
                    l == run.op(j).range.len()
                } else {
                    l > 0
                }
            });
        // Better still, header and first bytes in one call (the next op reads the buffer
        // directly; one staged aside goes by MSG_MORE alone).
        let next = next.filter(|&j| more && run.op(j).stage_at.is_none() && run.st[j].done == 0);
        let done = run.st[i].done;
        let data = run.send_bytes(i, done, ready);
        let data = &data[..data.len().min(slice)];
        // A shaped link (the emulated cluster's tc): only what the bucket holds goes now.
        let pacer = crate::comm::cpu::pace::active();
        let (data, next) = match pacer.map(paced(data.len())) {
            Some(0) => {
                pass.active_sends += 1;
                pass.pace_wait(pacer, data.len());
                return Ok(true);
            }
            Some(n) => (&data[..n], None),
            None => (data, next),
        };
        // Nothing corked behind a paced send: the next bytes may wait for the bucket.
        let more = more && pacer.is_none();
        let second: &[u8] = match next {
            Some(j) => {
                let a = run.op(j).range.start;
                let b = run.source(j, a, a + run.limit(j));
                &b[..b.len().min(slice)]
            }
            None => &[],
        };
        let first = data.len();
        let sent = if second.is_empty() {
            sys_send_flags(fd, data, more)
        } else {
            sys_send_two(fd, data, second)
        };
        if let Some(p) = pacer {
            let went = sent.as_ref().map_or(0, |&n| n);
            p.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .give_back(first - went.min(first));
        }
        match sent {
            Ok(n) => {
                let k = n.min(first);
                run.st[i].done += k;
                if let Some(j) = next.filter(|_| n > k) {
                    run.st[j].done += n - k;
                }
                pass.moved |= n > 0;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => {
                return Err(EngineError::Io {
                    op: i,
                    peer: p,
                    err,
                });
            }
        }
        if run.st[i].done < ready {
            pass.active_sends += 1;
            pass.wait_fd(fd, libc::POLLOUT, i, p);
        }
        Ok(true)
    }

    fn recv_header(
        &self,
        run: &mut Run,
        pass: &mut Pass,
        p: usize,
        i: usize,
    ) -> Result<usize, EngineError> {
        let fd = self.fd;
        let len = run.op(i).range.len();
        let got = run.st[i].got;
        // The call's first bytes usually came in the same segment: read them with the header,
        // one system call (where they may land yet).
        let next = run.next_recv(p);
        let only = pass.may_block(run);
        let w = run.window(p);
        let (room, at, reduce) = match next {
            Some(j) if run.op(j).reduce => {
                let sj = &run.st[j];
                let room = (STAGE_WINDOW - (sj.got - sj.done)).min(run.op(j).range.len() - sj.got);
                (room, w + sj.got - sj.done, true)
            }
            Some(j) => {
                let room = run.limit(j).saturating_sub(run.st[j].got);
                (room, run.op(j).range.start + run.st[j].got, false)
            }
            None => (0, 0, false),
        };
        let Run {
            heard,
            staging,
            buf,
            io,
            ..
        } = run;
        let slot = &mut heard[p][got..];
        let dst: &mut [u8] = match (next, reduce) {
            (Some(_), true) => staging.get_mut(at..at + room).unwrap_or(&mut []),
            (Some(_), false) => &mut buf[at..at + room],
            (None, _) => &mut [],
        };
        let extra_room = dst.len();
        // Nothing to send and one peer to hear from: spin, then block, as for the call's bytes.
        let r = if only && io.spin {
            recv_two_spin_then_block(fd, slot, dst)
        } else {
            sys_recv_two(fd, slot, dst, !only)
        };
        let n = took(r, fd, (i, p), pass)?;
        let k = n.min(len - got);
        if let Some(j) = next.filter(|_| n > k && extra_room > 0) {
            let reduce = run.op(j).reduce;
            run.st[j].received(n - k, reduce);
        }
        Ok(k)
    }

    fn recv(
        &self,
        run: &mut Run,
        pass: &mut Pass,
        p: usize,
        i: usize,
        lim: usize,
    ) -> Result<(), EngineError> {
        let (fd, o) = (self.fd, run.op(i));
        let len = o.range.len();
        let w = run.window(p);
        let got = run.st[i].got;
        // Where the next bytes may land.
        let (target, room) = if o.reduce {
            let held = got - run.st[i].done;
            (w + held, (STAGE_WINDOW - held).min(len - got))
        } else {
            (0, lim.saturating_sub(got))
        };
        if room > 0 {
            // Nothing to send and one peer to hear from: a (spinning, then) blocking read saves
            // a poll and a wake-up, which is most of a small message's latency. Not after
            // another receive moved in this pass: a send it freed (to this very peer, perhaps,
            // which may be blocked reading from us) goes out first.
            let only = pass.may_block(run);
            let spin = run.io.spin;
            let dst = if o.reduce {
                &mut run.staging[target..target + room]
            } else {
                &mut run.buf[o.range.start + got..o.range.start + got + room]
            };
            let r = match (only, spin) {
                (true, true) => recv_spin_then_block(fd, dst),
                (true, false) => sys_recv(fd, dst, false),
                _ => sys_recv(fd, dst, true),
            };
            let k = took(r, fd, (i, p), pass)?;
            if k > 0 {
                run.st[i].received(k, o.reduce);
                pass.moved = true;
                pass.received = true;
            }
        }
        if o.reduce {
            reduce_staged(run, pass, i, w, lim);
        }
        Ok(())
    }
}

/// Reduce every whole element of op `i` that waits in its staging window (at `w`), as far as
/// the buffer allows.
fn reduce_staged(run: &mut Run, pass: &mut Pass, i: usize, w: usize, lim: usize) {
    let es = run.io.es.max(1);
    let o = run.op(i);
    let held = run.st[i].got - run.st[i].done;
    let whole = (held / es * es).min(lim.saturating_sub(run.st[i].done) / es * es);
    if whole == 0 {
        return;
    }
    let at = o.range.start + run.st[i].done;
    // Where this is the first write, the output starts as the input.
    run.first_write(i, at, whole);
    let win = &mut run.staging[w..w + held];
    (run.io.reduce)(run.io.op, &mut run.buf[at..at + whole], &win[..whole]);
    win.copy_within(whole..held, 0);
    run.st[i].done += whole;
    pass.moved = true;
    pass.received = true;
}

/// What one receive from a socket took: its bytes; 0 when it would block (the socket joins the
/// poll); the peer's end of the stream, or any other error, stops the run at `(op, peer)`.
fn took(
    r: io::Result<usize>,
    fd: i32,
    (op, peer): (usize, usize),
    pass: &mut Pass,
) -> Result<usize, EngineError> {
    match r {
        Ok(0) => Err(EngineError::Closed { op, peer }),
        Ok(k) => Ok(k),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            pass.wait_fd(fd, libc::POLLIN, op, peer);
            Ok(0)
        }
        Err(err) => Err(EngineError::Io { op, peer, err }),
    }
}

/// Spin briefly on a nonblocking receive, then block.
/// Take up to `want` bytes from a pacer's bucket (0: none yet).
fn paced(want: usize) -> impl FnOnce(&std::sync::Mutex<crate::comm::cpu::pace::Pacer>) -> usize {
    move |p| {
        p.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take(want, std::time::Instant::now())
    }
}

fn recv_spin_then_block(fd: i32, data: &mut [u8]) -> io::Result<usize> {
    let start = std::time::Instant::now();
    let mut k = 0u32;
    loop {
        match sys_recv(fd, data, true) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            other => return other,
        }
        k += 1;
        if k.is_multiple_of(16) && start.elapsed() > SPIN {
            return sys_recv(fd, data, false);
        }
        std::hint::spin_loop();
    }
}

/// One nonblocking send (a full socket buffer is `WouldBlock`).
pub(crate) fn sys_send(fd: i32, data: &[u8]) -> io::Result<usize> {
    sys_send_flags(fd, data, false)
}

/// [`sys_send`], with `more`: more bytes follow at once, so the kernel may hold these for the
/// same segment (MSG_MORE).
fn sys_send_flags(fd: i32, data: &[u8], more: bool) -> io::Result<usize> {
    let mut flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
    // nix names no MSG_MORE: the kernel's bit, as is.
    flags.set(MsgFlags::from_bits_retain(libc::MSG_MORE), more);
    // MSG_NOSIGNAL turns SIGPIPE into EPIPE.
    Ok(socket::send(fd, data, flags)?)
}

/// One nonblocking send of `a` then `b` (writev); a full socket buffer is `WouldBlock`.
fn sys_send_two(fd: i32, a: &[u8], b: &[u8]) -> io::Result<usize> {
    let iov = [io::IoSlice::new(a), io::IoSlice::new(b)];
    // No control messages: nix's buffer for them is empty and allocates nothing. MSG_NOSIGNAL
    // turns SIGPIPE into EPIPE.
    let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
    Ok(socket::sendmsg::<()>(fd, &iov, &[], flags, None)?)
}

/// [`recv_spin_then_block`] into `a`, then `b`.
fn recv_two_spin_then_block(fd: i32, a: &mut [u8], b: &mut [u8]) -> io::Result<usize> {
    let start = std::time::Instant::now();
    let mut k = 0u32;
    loop {
        match sys_recv_two(fd, a, b, true) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            other => return other,
        }
        k += 1;
        if k.is_multiple_of(16) && start.elapsed() > SPIN {
            return sys_recv_two(fd, a, b, false);
        }
        std::hint::spin_loop();
    }
}

/// One receive into `a`, then `b` (readv), nonblocking or not, retried on EINTR.
fn sys_recv_two(fd: i32, a: &mut [u8], b: &mut [u8], nonblocking: bool) -> io::Result<usize> {
    let mut iov = [io::IoSliceMut::new(a), io::IoSliceMut::new(b)];
    let flags = dontwait(nonblocking);
    loop {
        match socket::recvmsg::<()>(fd, &mut iov, None, flags) {
            Ok(m) => return Ok(m.bytes),
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

fn dontwait(nonblocking: bool) -> MsgFlags {
    if nonblocking {
        MsgFlags::MSG_DONTWAIT
    } else {
        MsgFlags::empty()
    }
}

/// One receive, nonblocking or not, retried on EINTR.
pub(crate) fn sys_recv(fd: i32, data: &mut [u8], nonblocking: bool) -> io::Result<usize> {
    let flags = dontwait(nonblocking);
    loop {
        match socket::recv(fd, data, flags) {
            Ok(n) => return Ok(n),
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}
