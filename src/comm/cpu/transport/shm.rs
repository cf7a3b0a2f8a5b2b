//! SHM: shared-memory FIFOs between ranks of one node ([`crate::comm::cpu::shm`]), as NCCL's SHM
//! transport (`via SHM/direct/direct`). Two ranks can use it when they share a host and a
//! /dev/shm and neither sets `NCCL_SHM_DISABLE=1`. Connecting is one round among the node's
//! partners: each rank makes its segment (a FIFO per partner), partners map it and say so,
//! then its name is unlinked, so nothing is left behind whatever happens to the ranks. P2P
//! pairs ([`super::p2p`]) are connected here too: they use the FIFO for small messages.

use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

use super::{Connector, Decline, PeerInfo, Transport};
use crate::comm::cpu::engine::{EngineError, Pass, PeerLink, Run};
use crate::comm::cpu::shm::Pipe;
use crate::comm::cpu::tcp::{
    CommError, RankEnv, SETUP_WAIT, channel, connected, log_shm_error, swap_frames,
    swap_frames_each,
};
use crate::comm::emu::log;
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
    pub pipes: Vec<Option<crate::comm::cpu::shm::Pipe>>,
    pub bell: crate::comm::cpu::shm::Bell,
    _mine: crate::comm::cpu::shm::Segment,
    _theirs: Vec<crate::comm::cpu::shm::Segment>,
}

/// A rank's segment: its shape, and which FIFO in it belongs to whom. The segment itself goes
/// to each partner as a descriptor over their Unix connection ([`crate::comm::cpu::fdpass`]); the
/// name is for the log only and is never opened.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Offer {
    pub(crate) path: String,
    pub(crate) len: usize,
    pub(crate) fifo: usize,
    /// Slot k is the FIFO rank `slots[k]` writes into.
    pub(crate) slots: Vec<usize>,
}

/// What a rank says once it has mapped its partners' segments and probed them.
#[derive(serde::Serialize, serde::Deserialize, Default)]
pub(crate) struct Ack {
    /// Empty, or why a segment could not be mapped.
    pub(crate) error: String,
    /// This rank will read the partner's large messages from its memory.
    pub(crate) reads: bool,
}

/// Why a partner's segment was not mapped (said to the partner, and this rank's setup error).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unmapped {
    #[error("rank {0} has no local connection to hand its segment")]
    NoConnection(usize),
    #[error("rank {p}'s shared-memory segment did not come: {source}")]
    NotHanded { p: usize, source: std::io::Error },
    #[error("rank {p}'s segment has FIFOs of {theirs} bytes, this rank's {mine}")]
    FifoSize {
        p: usize,
        theirs: usize,
        mine: usize,
    },
    #[error("rank {0}'s segment names a rank outside the job")]
    OutsideJob(usize),
    #[error("rank {p}'s segment is announced as {len} bytes, its {fifos} FIFOs take {want}")]
    Length {
        p: usize,
        len: usize,
        fifos: usize,
        want: usize,
    },
    #[error(transparent)]
    Map(#[from] crate::comm::cpu::shm::ShmError),
    #[error("rank {p}'s segment has no FIFO for rank {rank}")]
    NoSlot { p: usize, rank: usize },
    #[error("rank {0}'s segment is too small")]
    TooSmall(usize),
    #[error("this rank's segment is too small")]
    MineTooSmall,
}

/// The descriptor of partner `p`'s segment, taken from their Unix connection, mapped once
/// it proves to be what `offer` describes for this job's FIFO size `fifo`.
fn take_segment(
    p: usize,
    unix: Option<&UnixStream>,
    offer: &Offer,
    fifo: usize,
    world: usize,
) -> Result<crate::comm::cpu::shm::Segment, Unmapped> {
    use crate::comm::cpu::shm::{Segment, segment_len};
    let s = unix.ok_or(Unmapped::NoConnection(p))?;
    let fd = crate::comm::cpu::fdpass::recv_fd(s, SETUP_WAIT)
        .map_err(|source| Unmapped::NotHanded { p, source })?;
    if offer.fifo != fifo {
        return Err(Unmapped::FifoSize {
            p,
            theirs: offer.fifo,
            mine: fifo,
        });
    }
    if offer.slots.iter().any(|&r| r >= world) {
        return Err(Unmapped::OutsideJob(p));
    }
    let want = segment_len(offer.slots.len(), fifo);
    if offer.len != want {
        return Err(Unmapped::Length {
            p,
            len: offer.len,
            fifos: offer.slots.len(),
            want,
        });
    }
    Ok(Segment::from_fd(fd, want, &format!("rank {p}'s segment"))?)
}

/// Make this rank's segment, map every local partner's, agree, and unlink: the FIFOs of every
/// pair in `local`, and each pair's final transport (P2P confirmed, or SHM) in `transports`.
pub(crate) fn connect(
    env: &RankEnv,
    peers: &mut [Option<TcpStream>],
    unix: &[Option<UnixStream>],
    local: &[Partner],
    transports: &mut [Option<Transport>],
    deferred: &mut Vec<Msg>,
) -> Result<Links, CommError> {
    let rank = env.rank;
    let ranks: Vec<usize> = local.iter().map(|p| p.rank).collect();
    let (mut mine, offer, fifo) = make_segment(rank, &ranks)?;
    let offers = swap_frames(
        rank,
        peers,
        &ranks,
        &offer,
        "shared-memory segment",
        SETUP_WAIT,
    )?;
    hand_segment(rank, unix, &ranks, &mine)?;
    let mapped = map_partners(env, peers, unix, local, &offers, &mine, fifo)?;
    let Mapped {
        mut pipes,
        theirs,
        failure,
    } = mapped;
    // Everyone says whether it mapped its partners' segments (and will read their memory);
    // then each name can go. One frame per partner: what this rank says to that one.
    let setup = |what: String| CommError::Setup { rank, what };
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
    settle_transports(env, local, &acks, &mut pipes, transports, deferred)?;
    let bell = mine
        .bell()
        .ok_or_else(|| setup(Unmapped::MineTooSmall.to_string()))?;
    Ok(Links {
        pipes,
        bell,
        _mine: mine,
        _theirs: theirs,
    })
}

/// This rank's segment (a FIFO per partner in `ranks`, in their order), and the offer that
/// describes it to them; with the FIFO size.
fn make_segment(
    rank: usize,
    ranks: &[usize],
) -> Result<(crate::comm::cpu::shm::Segment, Vec<u8>, usize), CommError> {
    use crate::comm::cpu::shm::{Segment, fifo_size, segment_len};
    let fifo = fifo_size().map_err(|e| CommError::Setup {
        rank,
        what: e.to_string(),
    })?;
    let len = segment_len(ranks.len(), fifo);
    let mine = Segment::create(&crate::comm::cpu::shm::dir(), len).map_err(|source| {
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
        slots: ranks.to_vec(),
    })
    .map_err(|e| CommError::Setup {
        rank,
        what: e.to_string(),
    })?;
    Ok((mine, offer, fifo))
}

/// The segment itself goes to each partner as a descriptor (a send does not wait for the
/// partner to take it).
fn hand_segment(
    rank: usize,
    unix: &[Option<UnixStream>],
    ranks: &[usize],
    mine: &crate::comm::cpu::shm::Segment,
) -> Result<(), CommError> {
    let setup = |what: String| CommError::Setup { rank, what };
    let Some(my_fd) = mine.fd().map(|f| f.as_raw_fd()) else {
        return Err(setup("this rank's segment has no descriptor".into()));
    };
    for &p in ranks {
        let s = unix
            .get(p)
            .and_then(Option::as_ref)
            .ok_or_else(|| setup(format!("no local connection to rank {p}")))?;
        crate::comm::cpu::fdpass::send_fds(s, &[my_fd]).map_err(|source| CommError::Io {
            rank,
            what: format!("handing rank {p} this rank's segment"),
            source,
        })?;
    }
    Ok(())
}

/// What mapping the partners' segments left: a pipe per partner mapped, the segments, and the
/// first failure (said to every partner, then this rank's error).
struct Mapped {
    pipes: Vec<Option<Pipe>>,
    theirs: Vec<crate::comm::cpu::shm::Segment>,
    failure: Option<String>,
}

/// Each partner's segment comes in and is mapped; a pipe to and from each one that maps.
fn map_partners(
    env: &RankEnv,
    peers: &[Option<TcpStream>],
    unix: &[Option<UnixStream>],
    local: &[Partner],
    offers: &[Vec<u8>],
    mine: &crate::comm::cpu::shm::Segment,
    fifo: usize,
) -> Result<Mapped, CommError> {
    let rank = env.rank;
    let mut out = Mapped {
        pipes: (0..env.world).map(|_| None).collect(),
        theirs: Vec::with_capacity(local.len()),
        failure: None,
    };
    for (k, (partner, o)) in local.iter().zip(offers).enumerate() {
        let p = partner.rank;
        let offer: Offer = serde_json::from_slice(o).map_err(|e| CommError::Setup {
            rank,
            what: format!("rank {p}'s segment: {e}"),
        })?;
        let unix = unix.get(p).and_then(Option::as_ref);
        let opened = take_segment(p, unix, &offer, fifo, env.world).and_then(|seg| {
            let rx = mine.fifo(k, fifo).ok_or(Unmapped::MineTooSmall)?;
            let fd = peers[p].as_ref().map_or(-1, |s| s.as_raw_fd());
            let pipe = pipe_into(rank, partner, &offer, &seg, rx, fd)?;
            out.pipes[p] = Some(pipe);
            Ok(seg)
        });
        match opened {
            Ok(seg) => {
                log::info(&format!(
                    "MMAP imported shareable host buffer {} size {}",
                    offer.path.escape_debug(),
                    offer.len
                ));
                out.theirs.push(seg);
            }
            Err(e) => {
                let e = e.to_string();
                log::warn(&e);
                out.failure.get_or_insert(e);
            }
        }
    }
    Ok(out)
}

/// The pipe to `partner` through its segment `seg` (this rank's FIFO in it, as `offer` lays it
/// out), reading from `rx`; `fd` is their TCP connection.
fn pipe_into(
    rank: usize,
    partner: &Partner,
    offer: &Offer,
    seg: &crate::comm::cpu::shm::Segment,
    rx: crate::comm::cpu::shm::Fifo,
    fd: i32,
) -> Result<Pipe, Unmapped> {
    let p = partner.rank;
    let slot = offer
        .slots
        .iter()
        .position(|&r| r == rank)
        .ok_or(Unmapped::NoSlot { p, rank })?;
    let tx = seg.fifo(slot, offer.fifo).ok_or(Unmapped::TooSmall(p))?;
    let peer_bell = seg.bell().ok_or(Unmapped::TooSmall(p))?;
    // Single copy from p where the table chose P2P (both allow it, and this rank has read
    // p's memory).
    let cma_from = partner
        .p2p
        .then(|| libc::pid_t::try_from(partner.info.pid).ok())
        .flatten();
    Ok(Pipe {
        tx,
        rx,
        peer_bell,
        fd,
        cma_from,
        cma_to: false,
    })
}

/// Each partner's word on this rank's segment: an error ends the setup; otherwise the pair is
/// P2P when single copy works both ways, else SHM, said on its channel line.
fn settle_transports(
    env: &RankEnv,
    local: &[Partner],
    acks: &[Vec<u8>],
    pipes: &mut [Option<Pipe>],
    transports: &mut [Option<Transport>],
    deferred: &mut Vec<Msg>,
) -> Result<(), CommError> {
    let rank = env.rank;
    let setup = |what: String| CommError::Setup { rank, what };
    for (partner, a) in local.iter().zip(acks) {
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
        // P2P when single copy works both ways (this rank chose it, and the partner reads this
        // rank's memory too), as NCCL's P2P transport connects a pair; its line has a
        // connection index, SHM's has none (src/transport/p2p.cc, shm.cc).
        let p2p = partner.p2p && ack.reads;
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
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Finding H4: a partner that names a file, or hands over a descriptor that is not a
    //! segment, gets nothing mapped; the file it names is never opened.
    use super::*;
    use crate::comm::cpu::fdpass;
    use crate::comm::cpu::shm::{fifo_size, segment_len};
    use crate::comm::cpu::wire::{read_frame, write_frame};
    use std::io::Write as _;
    use std::net::TcpListener;
    use std::os::fd::OwnedFd;
    use std::time::Duration;

    /// What the fake partner hands over as its "segment".
    enum Hand {
        Nothing,
        Fd(OwnedFd),
    }

    /// Rank 0 connects as usual with a fake rank 1 that sends `offer` and then `hand` over
    /// their Unix connection; returns rank 0's result as text.
    fn against(offer: &Offer, hand: Hand) -> Result<(), String> {
        let listener = TcpListener::bind("127.0.0.1:0").expect("listener");
        let addr = listener.local_addr().expect("addr");
        let fake_tcp = TcpStream::connect(addr).expect("dial");
        let (real_tcp, _) = listener.accept().expect("accept");
        let (real_unix, fake_unix) = UnixStream::pair().expect("unix pair");
        let env = RankEnv {
            rank: 0,
            world: 2,
            local_rank: 0,
            local_world: 2,
            token: [7; crate::comm::cpu::wire::TOKEN_LEN],
            store: addr,
            multi_node: false,
            shm: true,
        };
        let me = crate::comm::cpu::transport::PeerInfo::here(&env);
        let local = [Partner {
            rank: 1,
            info: me,
            p2p: false,
        }];
        let frame = serde_json::to_vec(offer).expect("json");
        let fake = std::thread::spawn(move || {
            let mut s = fake_tcp;
            let _theirs = read_frame(&mut s).expect("rank 0's offer");
            write_frame(&mut s, &frame).expect("offer");
            // Rank 0's own segment comes over the Unix connection: taken, never used.
            let _seg = fdpass::recv_fd(&fake_unix, Duration::from_secs(10));
            match hand {
                Hand::Nothing => drop(fake_unix),
                Hand::Fd(fd) => {
                    fdpass::send_fds(&fake_unix, &[fd.as_raw_fd()]).expect("send");
                    drop(fd);
                }
            }
            let _ack = read_frame(&mut s);
            let ack = serde_json::to_vec(&Ack::default()).expect("json");
            let _ = write_frame(&mut s, &ack);
            let _ = s.flush();
        });
        let mut peers = vec![None, Some(real_tcp)];
        let unix = vec![None, Some(real_unix)];
        let mut transports = vec![None, None];
        let mut deferred = Vec::new();
        let res = connect(
            &env,
            &mut peers,
            &unix,
            &local,
            &mut transports,
            &mut deferred,
        )
        .map(|_| ())
        .map_err(|e| e.to_string());
        fake.join().expect("fake partner");
        res
    }

    fn victim(dir: &std::path::Path, len: usize) -> std::path::PathBuf {
        let p = dir.join("victim");
        std::fs::write(&p, vec![b'A'; len]).expect("victim");
        p
    }

    fn untouched(p: &std::path::Path, len: usize) {
        assert_eq!(std::fs::read(p).expect("read victim"), vec![b'A'; len]);
    }

    #[test]
    fn a_named_file_is_never_opened_and_a_wrong_descriptor_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = fifo_size().expect("fifo");
        let want = segment_len(1, fifo);
        let v = victim(dir.path(), 4096);
        let link = dir.path().join("ringlab-shm-1-link");
        std::os::unix::fs::symlink(&v, &link).expect("symlink");
        let offer = |path: &std::path::Path, len: usize| Offer {
            path: path.display().to_string(),
            len,
            fifo,
            slots: vec![0],
        };
        let rw = |p: &std::path::Path| -> OwnedFd {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(p)
                .expect("open")
                .into()
        };

        // The repro's offer: the victim's own name and size, and no descriptor at all.
        let e = against(&offer(&v, 4096), Hand::Nothing).expect_err("a name alone");
        assert!(
            e.contains("rank 1's shared-memory segment did not come"),
            "{e}"
        );
        untouched(&v, 4096);

        // A link to the victim, and the victim's descriptor: refused for its size.
        let e = against(&offer(&link, want), Hand::Fd(rw(&v))).expect_err("wrong size");
        assert!(e.contains("refusing to map rank 1's segment"), "{e}");
        assert!(
            e.contains(&format!("4096 bytes, expected exactly {want}")),
            "{e}"
        );
        untouched(&v, 4096);

        // Announced at the victim's size: not what a segment of one FIFO is.
        let e = against(&offer(&v, 4096), Hand::Fd(rw(&v))).expect_err("announced size");
        assert!(e.contains("announced as 4096 bytes"), "{e}");
        untouched(&v, 4096);

        // Not a file at all.
        let (r, _w) = nix::unistd::pipe().expect("pipe");
        let e = against(&offer(&v, want), Hand::Fd(r)).expect_err("a pipe");
        assert!(e.contains("not a regular file"), "{e}");
        untouched(&v, 4096);

        // Another user's file of exactly the right size (as root: chowned to uid 65534).
        if fdpass::euid() == 0 {
            let other = dir.path().join("other");
            std::fs::write(&other, vec![b'A'; want]).expect("sized victim");
            std::os::unix::fs::chown(&other, Some(65534), Some(65534)).expect("chown");
            let e = against(&offer(&other, want), Hand::Fd(rw(&other))).expect_err("uid");
            assert!(e.contains("owned by uid 65534"), "{e}");
            untouched(&other, want);
        }
    }
}

/// SHM's progress: the bytes go through the pair's shared-memory FIFOs, and each side rings
/// the other's doorbell when it has written or read; a reduction adds the partner's bytes
/// where they lie in the FIFO, with no staging copy.
#[derive(Clone, Copy)]
pub struct FifoLink<'a> {
    pub pipe: &'a Pipe,
}

impl PeerLink for FifoLink<'_> {
    fn send(
        &self,
        run: &mut Run,
        pass: &mut Pass,
        _: usize,
        i: usize,
        ready: usize,
    ) -> Result<bool, EngineError> {
        let done = run.st[i].done;
        if ready > done {
            let data = run.send_bytes(i, done, ready);
            let data = &data[..data.len().min(run.io.send_slice)];
            let k = self.pipe.tx.push(data);
            if k > 0 {
                self.pipe.peer_bell.ring();
                run.st[i].done += k;
                pass.moved = true;
            }
            if run.st[i].done < ready {
                pass.active_sends += 1;
                pass.shm_wait = true;
            }
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
        let got = run.st[i].got;
        let k = self.pipe.rx.pop_into(&mut run.heard[p][got..]);
        if k > 0 {
            self.pipe.peer_bell.ring();
        } else {
            pass.shm_wait = true;
        }
        Ok(k)
    }

    fn recv(
        &self,
        run: &mut Run,
        pass: &mut Pass,
        _: usize,
        i: usize,
        lim: usize,
    ) -> Result<(), EngineError> {
        let k = recv_fifo(self.pipe, run, i, lim);
        self.received(run, pass, i, lim, k);
        Ok(())
    }

    fn pending(&self) -> Option<usize> {
        Some(self.pipe.rx.pending())
    }
    fn liveness_fd(&self) -> Option<i32> {
        Some(self.pipe.fd)
    }
    fn acked(&self) -> u64 {
        self.pipe.tx.acked()
    }
}

impl FifoLink<'_> {
    /// After a receive took `k` bytes of op `i`: wake the partner (it has room again), or wait
    /// for its doorbell.
    pub(crate) fn received(&self, run: &Run, pass: &mut Pass, i: usize, lim: usize, k: usize) {
        if k > 0 {
            self.pipe.peer_bell.ring();
            pass.moved = true;
            pass.received = true;
        } else if run.st[i].done < lim {
            pass.shm_wait = true;
        }
    }
}

/// One pass of a receive from a shared-memory partner: a copy lands straight in the buffer;
/// a reduction reads the partner's bytes where they lie in the FIFO and adds them into the
/// buffer, with no staging copy. Returns the bytes taken from the FIFO.
pub(crate) fn recv_fifo(pipe: &Pipe, run: &mut Run, i: usize, lim: usize) -> usize {
    let (o, es) = (run.op(i), run.io.es.max(1));
    let st = &run.st[i];
    // A slice at a time, so the sender gets room back while its bytes are still in cache.
    let lim = lim.min(st.done.saturating_add(run.io.send_slice.max(es)));
    if !o.reduce {
        let room = lim.saturating_sub(st.got);
        if room == 0 {
            return 0;
        }
        let at = o.range.start + st.got;
        let k = pipe.rx.pop_into(&mut run.buf[at..at + room]);
        let st = &mut run.st[i];
        st.got += k;
        st.done = st.got;
        return k;
    }
    // Whole elements only. Ops of other element sizes went before on this FIFO, so an element
    // may straddle its wrap: that one is put together aside.
    let room = lim.saturating_sub(st.done) / es * es;
    let (a, b) = pipe.rx.peek(room);
    let whole = (a.len() + b.len()) / es * es;
    if whole == 0 {
        return 0;
    }
    let at = o.range.start + st.done;
    run.first_write(i, at, whole);
    let (reduce, op, buf) = (run.io.reduce, run.io.op, &mut *run.buf);
    let fa = a.len().min(whole) / es * es;
    reduce(op, &mut buf[at..at + fa], &a[..fa]);
    let mut from_b = 0;
    if whole > fa && a.len() > fa {
        // The straddling element: its head ends `a`, its tail starts `b`.
        let mut one = [0u8; 16];
        let head = a.len() - fa;
        one[..head].copy_from_slice(&a[fa..]);
        one[head..es].copy_from_slice(&b[..es - head]);
        reduce(op, &mut buf[at + fa..at + fa + es], &one[..es]);
        from_b = es - head;
    }
    let done_a = (fa + if a.len() > fa && whole > fa { es } else { 0 }).min(whole);
    if whole > done_a {
        reduce(
            op,
            &mut buf[at + done_a..at + whole],
            &b[from_b..from_b + whole - done_a],
        );
    }
    pipe.rx.consume(whole);
    let st = &mut run.st[i];
    st.done += whole;
    st.got = st.done;
    whole
}
