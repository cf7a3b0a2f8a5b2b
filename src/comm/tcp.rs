//! The TCP backend: one OS process per rank, one full-duplex TCP connection per pair of ranks
//! that the schedules need, and a single-threaded progress engine that executes a schedule step
//! by step. Within a step every send and receive of this rank progresses together (nonblocking
//! sends and receives over `poll`), and received bytes are reduced slice by slice as they land,
//! so receiving and reducing overlap. There is no second implementation of any algorithm here:
//! the engine only does what the schedule's transfers say.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use super::ifaces;
use super::log;
use super::net::{connect_retry, describe, tune};
use super::reduce::{AlignedBuf, ReduceFn, divide, kernel};
use super::store::{StoreClient, StoreError};
use super::wire::{Hello, Role, Token};
use crate::collective::{Dtype, Op, Schedule};

#[derive(Debug, thiserror::Error)]
pub enum CommError {
    #[error("{0}")]
    Iface(#[from] ifaces::SelectError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("rank {rank}: {what}: {source}")]
    Io {
        rank: usize,
        what: String,
        source: io::Error,
    },
    #[error("rank {peer} closed the connection during {phase} step {step}")]
    PeerClosed {
        peer: usize,
        phase: String,
        step: usize,
    },
    #[error("buffer of {got} bytes, the schedule needs {need}")]
    BadBuffer { got: usize, need: usize },
}

/// Who this rank is and how to reach the job.
#[derive(Debug, Clone)]
pub struct RankEnv {
    pub rank: usize,
    pub world: usize,
    pub local_rank: usize,
    /// Ranks on this machine (they share its cores).
    pub local_world: usize,
    pub token: Token,
    pub store: SocketAddr,
    /// Multi-node jobs pick an interface like NCCL; single-node jobs bind loopback only.
    pub multi_node: bool,
}

pub struct TcpComm {
    rank: usize,
    world: usize,
    peers: Vec<Option<TcpStream>>,
    staging: AlignedBuf,
    send_stage: AlignedBuf,
    /// Spin briefly before sleeping in a receive: only when every local rank has a core.
    spin: bool,
}

/// The address this rank listens on and how it was chosen (logged like NCCL).
pub fn choose_address(multi_node: bool) -> Result<(IpAddr, String), CommError> {
    if !multi_node {
        return Ok((
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            "lo:127.0.0.1<0> (single node: loopback only)".into(),
        ));
    }
    let all = ifaces::list().map_err(|source| CommError::Io {
        rank: 0,
        what: "listing interfaces".into(),
        source,
    })?;
    let ifname = std::env::var("NCCL_SOCKET_IFNAME").ok();
    let (chosen, why) = ifaces::select(&all, ifname.as_deref())?;
    log::info(&why);
    Ok((chosen[0].addr, chosen[0].to_string()))
}

impl TcpComm {
    /// Meet the other ranks through the store and connect to every partner the schedules need.
    /// The higher rank of a pair dials the lower; every dial opens with this job's hello.
    pub fn init(
        env: &RankEnv,
        store: &mut StoreClient,
        partners: &[usize],
        mut phase: impl FnMut(&str),
    ) -> Result<Self, CommError> {
        let io_err = |what: &str| {
            let what = what.to_string();
            let rank = env.rank;
            move |source| CommError::Io { rank, what, source }
        };
        log::info(&format!(
            "Init START rank {} nranks {}",
            env.rank, env.world
        ));
        let (ip, shown) = choose_address(env.multi_node)?;
        log::info(&format!("Bootstrap: Using {shown}"));
        let listener =
            TcpListener::bind(SocketAddr::new(ip, 0)).map_err(io_err("binding the listener"))?;
        let me = listener
            .local_addr()
            .map_err(io_err("reading the listener address"))?;
        log::info(&format!("NET/Socket : Using [0]{shown}"));
        log::info("Using network Socket");
        phase("rendezvous");
        store.set(&format!("addr/{}", env.rank), &me.to_string())?;
        let mut peers: Vec<Option<TcpStream>> = (0..env.world).map(|_| None).collect();
        let lower: Vec<usize> = partners.iter().copied().filter(|&p| p < env.rank).collect();
        let higher: Vec<usize> = partners.iter().copied().filter(|&p| p > env.rank).collect();
        for &p in &lower {
            let addr_s = store.get(&format!("addr/{p}"), Duration::from_secs(3600))?;
            let addr: SocketAddr = addr_s.parse().map_err(|_| CommError::Io {
                rank: env.rank,
                what: format!("rank {p} published a bad address `{addr_s}`"),
                source: io::Error::from(io::ErrorKind::InvalidData),
            })?;
            phase(&format!("connect to {addr}"));
            log::info(&format!("Connecting to rank {p} at {addr}"));
            let mut s = connect_retry(addr, Duration::from_secs(10))
                .map_err(io_err(&format!("connecting to rank {p}")))?;
            tune(&s).map_err(io_err("tuning a socket"))?;
            s.write_all(
                &Hello {
                    token: env.token,
                    role: Role::Peer,
                    rank: env.rank as u32,
                }
                .encode(),
            )
            .map_err(io_err(&format!("greeting rank {p}")))?;
            peers[p] = Some(s);
        }
        phase("accept");
        let mut missing = higher.len();
        while missing > 0 {
            let (mut s, from) = listener.accept().map_err(io_err("accepting"))?;
            s.set_read_timeout(Some(Duration::from_secs(5)))
                .map_err(io_err("socket option"))?;
            match Hello::read_checked(&mut s, &env.token) {
                Ok(h)
                    if h.role == Role::Peer
                        && higher.contains(&(h.rank as usize))
                        && peers[h.rank as usize].is_none() =>
                {
                    s.set_read_timeout(None).map_err(io_err("socket option"))?;
                    tune(&s).map_err(io_err("tuning a socket"))?;
                    peers[h.rank as usize] = Some(s);
                    missing -= 1;
                }
                Ok(h) => log::warn(&format!(
                    "dropped connection from {from}: unexpected rank {} / role",
                    h.rank
                )),
                Err(e) => log::warn(&format!("dropped connection from {from}: {e}")),
            }
        }
        log::info(&format!(
            "Init COMPLETE rank {} nranks {}",
            env.rank, env.world
        ));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(Self {
            rank: env.rank,
            world: env.world,
            peers,
            staging: AlignedBuf::default(),
            send_stage: AlignedBuf::default(),
            spin: env.local_world <= cores,
        })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }
    pub fn world(&self) -> usize {
        self.world
    }

    /// Execute `schedule` on this rank's buffer (`count × elem_size` bytes), in place.
    pub fn run(
        &mut self,
        schedule: &Schedule,
        buf: &mut [u8],
        dtype: Dtype,
        op: Op,
    ) -> Result<(), CommError> {
        let spec = schedule.spec();
        let need = spec.count * spec.elem_size;
        if buf.len() != need {
            return Err(CommError::BadBuffer {
                got: buf.len(),
                need,
            });
        }
        let reduce = kernel(dtype);
        for (i, step) in schedule.steps().iter().enumerate() {
            self.step(schedule, i, buf, reduce, op)
                .map_err(|e| match e {
                    StepError::Closed(peer) => CommError::PeerClosed {
                        peer,
                        phase: step.phase.label().into(),
                        step: i + 1,
                    },
                    StepError::Io(peer, source) => CommError::Io {
                        rank: self.rank,
                        what: format!(
                            "{} step {} with rank {peer}: {}",
                            step.phase.label(),
                            i + 1,
                            describe(&source)
                        ),
                        source,
                    },
                })?;
        }
        if op == Op::Avg {
            let r = schedule.defined_range(self.rank);
            divide(
                dtype,
                &mut buf[r.start * spec.elem_size..r.end * spec.elem_size],
                self.world,
            );
        }
        Ok(())
    }

    fn step(
        &mut self,
        schedule: &Schedule,
        index: usize,
        buf: &mut [u8],
        reduce: ReduceFn,
        op: Op,
    ) -> Result<(), StepError> {
        let es = schedule.spec().elem_size;
        let me = self.rank as u32;
        let step = &schedule.steps()[index];
        let mut recvs: Vec<Recv> = Vec::new();
        let mut stage_len = 0;
        for t in step.transfers.iter().filter(|t| t.dst == me && t.len > 0) {
            let r = t.offset as usize * es..(t.offset + t.len) as usize * es;
            recvs.push(Recv {
                peer: t.src as usize,
                dst: r.clone(),
                reduce: t.reduce,
                got: 0,
                done: 0,
                stage: stage_len,
            });
            if t.reduce {
                // A cache-sized window per reducing receive: bytes are reduced while hot.
                stage_len += STAGE_WINDOW;
            }
        }
        let mut sends: Vec<Send> = Vec::new();
        let mut send_stage_len = 0;
        for t in step.transfers.iter().filter(|t| t.src == me && t.len > 0) {
            let r = t.offset as usize * es..(t.offset + t.len) as usize * es;
            // Transfers read the state before the step: stage what a receive could overwrite.
            let overlaps = recvs
                .iter()
                .any(|v| v.dst.start < r.end && r.start < v.dst.end);
            sends.push(Send {
                peer: t.dst as usize,
                src: r.clone(),
                staged: overlaps.then_some(send_stage_len),
                sent: 0,
            });
            if overlaps {
                send_stage_len += r.len();
            }
        }
        if send_stage_len > 0 {
            self.send_stage.reserve_len(send_stage_len);
            for s in &sends {
                if let Some(at) = s.staged {
                    self.send_stage.bytes_mut()[at..at + s.src.len()]
                        .copy_from_slice(&buf[s.src.clone()]);
                }
            }
        }
        self.staging.reserve_len(stage_len);
        let staging = self.staging.bytes_mut();
        let send_stage = self.send_stage.bytes();
        let peers = &self.peers;
        let fd = |p: usize| peers[p].as_ref().map(|s| s.as_raw_fd());
        let mut pollfds: Vec<libc::pollfd> = Vec::new();
        loop {
            let mut moved = false;
            // Sends: the first unfinished send to each peer goes, in transfer order.
            for i in 0..sends.len() {
                let s = &sends[i];
                if s.sent == s.src.len()
                    || sends[..i]
                        .iter()
                        .any(|o| o.peer == s.peer && o.sent < o.src.len())
                {
                    continue;
                }
                let Some(f) = fd(s.peer) else {
                    return Err(StepError::Io(
                        s.peer,
                        io::Error::from(io::ErrorKind::NotConnected),
                    ));
                };
                let data = match s.staged {
                    Some(at) => &send_stage[at + s.sent..at + s.src.len()],
                    None => &buf[s.src.start + s.sent..s.src.end],
                };
                match sys_send(f, data) {
                    Ok(n) => {
                        sends[i].sent += n;
                        moved |= n > 0;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(StepError::Io(s.peer, e)),
                }
            }
            let sends_done = sends.iter().all(|s| s.sent == s.src.len());
            let open: Vec<usize> = (0..recvs.len())
                .filter(|&i| {
                    let r = &recvs[i];
                    r.done < r.dst.len()
                        && !recvs[..i]
                            .iter()
                            .any(|o| o.peer == r.peer && o.done < o.dst.len())
                })
                .collect();
            if open.is_empty() && sends_done {
                return Ok(());
            }
            // With nothing left to send and one peer to hear from, a blocking read saves a poll.
            let block = sends_done && open.len() == 1;
            for &i in &open {
                let r = &mut recvs[i];
                let Some(f) = fd(r.peer) else {
                    return Err(StepError::Io(
                        r.peer,
                        io::Error::from(io::ErrorKind::NotConnected),
                    ));
                };
                let target = if r.reduce {
                    // staging[stage..] holds bytes done..got (less than one element).
                    let held = r.got - r.done;
                    let room = (STAGE_WINDOW - held).min(r.dst.len() - r.got);
                    &mut staging[r.stage + held..r.stage + held + room]
                } else {
                    &mut buf[r.dst.start + r.got..r.dst.end]
                };
                let got = match (block, self.spin) {
                    (true, true) => recv_spin_then_block(f, target),
                    (true, false) => sys_recv(f, target, false),
                    _ => sys_recv(f, target, true),
                };
                match got {
                    Ok(0) => return Err(StepError::Closed(r.peer)),
                    Ok(n) => {
                        r.got += n;
                        moved = true;
                        if r.reduce {
                            // Reduce every whole element that has arrived, while it is in cache.
                            let held = r.got - r.done;
                            let whole = held / elem(es) * elem(es);
                            if whole > 0 {
                                let win = &mut staging[r.stage..r.stage + held];
                                reduce(
                                    op,
                                    &mut buf[r.dst.start + r.done..r.dst.start + r.done + whole],
                                    &win[..whole],
                                );
                                win.copy_within(whole..held, 0);
                                r.done += whole;
                            }
                        } else {
                            r.done = r.got;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(StepError::Io(r.peer, e)),
                }
            }
            if moved {
                continue;
            }
            pollfds.clear();
            for s in sends.iter().filter(|s| s.sent < s.src.len()) {
                if let Some(f) = fd(s.peer) {
                    pollfds.push(libc::pollfd {
                        fd: f,
                        events: libc::POLLOUT,
                        revents: 0,
                    });
                }
            }
            for &i in &open {
                if let Some(f) = fd(recvs[i].peer) {
                    pollfds.push(libc::pollfd {
                        fd: f,
                        events: libc::POLLIN,
                        revents: 0,
                    });
                }
            }
            // SAFETY: pollfds is a valid array of pollfd for the duration of the call.
            let rc =
                unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, 1000) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(StepError::Io(self.rank, e));
                }
            }
        }
    }
}

/// Bytes of staging per reducing receive: small enough to stay in L2 while it is reduced.
const STAGE_WINDOW: usize = 256 << 10;

/// How long a receive spins before it sleeps in the kernel: a wake-up costs more than this
/// on a busy machine, and small messages arrive within it.
const SPIN: std::time::Duration = std::time::Duration::from_micros(30);

/// Spin briefly on a nonblocking receive, then block.
fn recv_spin_then_block(fd: i32, data: &mut [u8]) -> io::Result<usize> {
    let start = std::time::Instant::now();
    let mut k = 0u32;
    loop {
        match sys_recv(fd, data, true) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            other => return other,
        }
        k += 1;
        if k % 16 == 0 && start.elapsed() > SPIN {
            return sys_recv(fd, data, false);
        }
        std::hint::spin_loop();
    }
}

fn elem(es: usize) -> usize {
    es.max(1)
}

struct Send {
    peer: usize,
    src: std::ops::Range<usize>,
    /// Offset in the send stage when the data had to be copied out first.
    staged: Option<usize>,
    sent: usize,
}

struct Recv {
    peer: usize,
    dst: std::ops::Range<usize>,
    reduce: bool,
    got: usize,
    /// Bytes already placed (copied or reduced) into `dst`.
    done: usize,
    /// Offset in the staging buffer (reduce only).
    stage: usize,
}

enum StepError {
    Closed(usize),
    Io(usize, io::Error),
}

fn sys_send(fd: i32, data: &[u8]) -> io::Result<usize> {
    // SAFETY: data is a valid readable slice; MSG_NOSIGNAL turns SIGPIPE into EPIPE.
    let n = unsafe {
        libc::send(
            fd,
            data.as_ptr().cast(),
            data.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn sys_recv(fd: i32, data: &mut [u8], nonblocking: bool) -> io::Result<usize> {
    let flags = if nonblocking { libc::MSG_DONTWAIT } else { 0 };
    loop {
        // SAFETY: data is a valid writable slice of data.len() bytes.
        let n = unsafe { libc::recv(fd, data.as_mut_ptr().cast(), data.len(), flags) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Every rank this rank exchanges data with in `schedules`.
pub fn partners(rank: usize, schedules: &[&Schedule]) -> Vec<usize> {
    let mut p: Vec<usize> = schedules
        .iter()
        .flat_map(|s| s.steps().iter().flat_map(|st| &st.transfers))
        .filter_map(|t| match (t.src as usize, t.dst as usize) {
            (s, d) if s == rank => Some(d),
            (s, d) if d == rank => Some(s),
            _ => None,
        })
        .collect();
    p.sort_unstable();
    p.dedup();
    p
}
