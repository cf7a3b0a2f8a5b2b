//! The CPU backend: one OS process per rank and one link per pair of ranks that the schedules
//! need. Ranks of one node (same host and, in the hang lab, same node namespace) move their bytes
//! through shared-memory FIFOs ([`super::shm`]), large messages by single copy where the kernel
//! allows it (P2P); ranks of different nodes, or every pair when NCCL_SHM_DISABLE=1, over a
//! full-duplex TCP connection, which also carries the setup frames. This file sets the links up
//! (rendezvous, hello, NCCL-shaped log lines; the transport choice is [`super::transport`]'s)
//! and hands the schedule to the progress engine ([`super::engine`]), which runs it as a
//! byte-exact dataflow through each peer's link. There is no second implementation of any algorithm here: only the schedule's
//! transfers move bytes.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::engine::{EngineError, Io, Link, Plan, Regions, STAGE_WINDOW, execute};
use super::ifaces;
use super::net::{connect_retry, tune};
use super::p2p::{PeerRegion, Region, SharedBuf};
use super::reduce::{AlignedBuf, divide, kernel};
use super::store::{StoreClient, StoreError};
use super::transport::net::{sys_recv, sys_send};
use super::wire::{Hello, Role, Token};
use crate::collective::{Dtype, Op, Schedule};
use crate::comm::emu::log;
use crate::nccl_log::{Channel, Iface as NcclIface, Init, Msg, Site, UsingWhat};
use std::sync::Arc;

pub use super::transport::{Transport, Transports};

/// Set by the launcher when every rank of this host has a CPU of its own: the CPU to pin to.
pub const CPU_ENV: &str = "RINGLAB_CPU";

/// Set by the launcher: how many ranks it started on this host. On a virtual cluster (the hang
/// lab's nodes are namespaces or processes of one host) that is every node's ranks, not the
/// node's own `local_world`, and they all share this host's CPUs.
pub const HOST_RANKS_ENV: &str = "RINGLAB_HOST_RANKS";

/// Whether a rank busy-polls before it blocks: when it has a CPU of its own (pinned), or the
/// host has a CPU for every rank on it. Ranks that spin while more ranks than CPUs share the
/// host take the CPU their peer needs to send what they wait for (a 4-rank, two-node training
/// loop on 2 cores: 5.3 s spinning, 0.26 s blocking).
fn spins(pinned: bool, host_ranks: Option<usize>, local_world: usize, cores: usize) -> bool {
    pinned || host_ranks.unwrap_or(local_world).max(local_world) <= cores
}

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
    /// As NCCL reports a failed shared-memory setup: the user sees "unhandled system error",
    /// the WARN line (NCCL_DEBUG=WARN or INFO) says which file and why.
    #[error("rank {rank}: unhandled system error (run with NCCL_DEBUG=INFO for details): {source}")]
    Shm {
        rank: usize,
        source: super::shm::ShmError,
    },
    #[error("rank {rank}: {what}")]
    Setup { rank: usize, what: String },
    #[error("rank {rank}: rank {peer} published a bad address `{addr}`")]
    BadAddress {
        rank: usize,
        peer: usize,
        addr: String,
    },
    /// The engine found no step it could take: the plan is inconsistent.
    #[error("rank {rank}: the schedule cannot make progress (inconsistent plan)")]
    Stuck { rank: usize },
    /// A peer's frame was not one (bad magic, too large, malformed, …).
    #[error("rank {rank}: {what}: {source}")]
    Wire {
        rank: usize,
        what: String,
        source: super::wire::WireError,
    },
    /// A peer's call is not this rank's ([`super::header`]).
    #[error("{0}")]
    Mismatch(String),
    #[error("buffer of {got} bytes, the schedule needs {need}")]
    BadBuffer { got: usize, need: usize },
    #[error(
        "{dtype} elements are {size} bytes, but the schedule was built for {elem}-byte elements"
    )]
    BadDtype {
        dtype: &'static str,
        size: usize,
        elem: usize,
    },
}

/// How long a connection to a rank's listener may take to greet before it is dropped.
pub const GREETING_DEADLINE: Duration = Duration::from_secs(5);

/// Connections from one address that may be greeting at once (at least the ranks that will
/// dial); beyond that a newer one closes the longest-silent ([`super::net::Greeters`]).
pub const PENDING_PER_ADDRESS: usize = 8;

/// Accept the greetings of `higher` ranks on `listener`, each connection on a thread of its
/// own with [`GREETING_DEADLINE`], so a stranger that connects and says nothing holds up no
/// one; at most [`PENDING_PER_ADDRESS`] greetings at a time from one address (a new one closes
/// the longest-silent). Every dropped connection is logged at WARN.
fn accept_peers(
    listener: &TcpListener,
    env: &RankEnv,
    higher: &[usize],
    peers: &mut [Option<TcpStream>],
) -> io::Result<()> {
    use std::sync::{Arc, mpsc};
    if higher.is_empty() {
        return Ok(());
    }
    let (tx, rx) = mpsc::channel::<(usize, TcpStream)>();
    // Ranks of one node share an address: room for all of them at once.
    let greeters = Arc::new(super::net::Greeters::new(
        PENDING_PER_ADDRESS.max(higher.len()),
    ));
    let acceptor = listener.try_clone()?;
    let token = env.token;
    let wanted: Vec<usize> = higher.to_vec();
    let accept_thread = std::thread::Builder::new()
        .name("accept".into())
        .spawn(move || {
            loop {
                let Ok((s, from)) = acceptor.accept() else {
                    return;
                };
                let ticket = match greeters.admit(&s) {
                    Ok(t) => t,
                    Err(e) => {
                        log::warn(&format!("dropped connection from {from}: {e}"));
                        continue;
                    }
                };
                let (tx, mine, wanted) = (tx.clone(), greeters.clone(), wanted.clone());
                let spawned = std::thread::Builder::new()
                    .name("greet".into())
                    .spawn(move || {
                        let mut s = s;
                        let r = s
                            .set_read_timeout(Some(GREETING_DEADLINE))
                            .map_err(|e| e.to_string())
                            .and_then(|()| {
                                Hello::read_checked(&mut s, &token).map_err(|e| e.to_string())
                            });
                        // Still ours, or closed meanwhile as the longest-silent?
                        let r = if mine.greeted(ticket) {
                            r
                        } else {
                            r.and(Err("closed as the longest-silent connection".to_string()))
                        };
                        match r {
                            Ok(h)
                                if h.role == Role::Peer && wanted.contains(&(h.rank as usize)) =>
                            {
                                let _ = tx.send((h.rank as usize, s));
                            }
                            Ok(h) => log::warn(&format!(
                                "dropped connection from {from}: unexpected rank {} / role",
                                h.rank
                            )),
                            Err(e) => log::warn(&format!("dropped connection from {from}: {e}")),
                        }
                    });
                if spawned.is_err() {
                    greeters.greeted(ticket);
                    log::warn(&format!("dropped connection from {from}: no thread for it"));
                }
            }
        })?;
    let mut missing = higher.len();
    let mut result = Ok(());
    while missing > 0 {
        let Ok((rank, s)) = rx.recv() else {
            result = Err(io::Error::other("the accept loop stopped"));
            break;
        };
        if peers[rank].is_some() {
            log::warn(&format!("dropped a second connection claiming rank {rank}"));
            continue;
        }
        let set = s.set_read_timeout(None).and_then(|()| tune(&s));
        if let Err(e) = set {
            result = Err(e);
            break;
        }
        peers[rank] = Some(s);
        missing -= 1;
    }
    // Stop accepting: shutdown makes the blocked accept return.
    let fd = std::os::fd::AsRawFd::as_raw_fd(listener);
    let _ = nix::sys::socket::shutdown(fd, nix::sys::socket::Shutdown::Both);
    let _ = accept_thread.join();
    result
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
    /// Shared memory allowed for partners on this node (false: NCCL_SHM_DISABLE=1).
    pub shm: bool,
}

pub struct TcpComm {
    rank: usize,
    world: usize,
    peers: Vec<Option<TcpStream>>,
    shm: Option<super::transport::shm::Links>,
    /// Per peer: how its bytes travel (None: not a partner).
    transports: Vec<Option<Transport>>,
    /// Per peer of this node: the Unix connection its memory comes over as descriptors
    /// ([`super::fdpass`]).
    unix: super::transport::UnixLinks,
    staging: AlignedBuf,
    send_stage: AlignedBuf,
    /// Spin briefly before sleeping in a receive: only when every local rank has a core.
    spin: bool,
    /// The most bytes one send call hands the kernel (`RINGLAB_SEND_SLICE`, 0 = unbounded).
    send_slice: usize,
    /// Each schedule's plan, built on first use.
    plans: std::collections::HashMap<crate::collective::Spec, Plan>,
    /// Channel lines a release with runtime connection (2.22+) prints at the first
    /// collective, not at init ([`connected`]).
    deferred: Vec<Msg>,
    /// Collectives called on this communicator so far: the next call's number in its header.
    calls: u32,
    /// This rank's regions partners may map ([`TcpComm::alloc_shared`]), kept mapped here
    /// while they are registered, and their address ranges.
    mine: Vec<(u32, Arc<Region>)>,
    spans: Vec<(u32, std::ops::Range<usize>)>,
    /// Per peer: which of this rank's regions it mapped; its regions mapped here.
    mapped_by: Vec<Vec<u32>>,
    theirs: Vec<Vec<PeerRegion>>,
    next_region: u32,
}

/// A rank's buffers as it offers them to a P2P partner: (id, bytes) each, in the order their
/// descriptors follow over the pair's Unix connection ([`super::fdpass`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct RegionOffer {
    regions: Vec<(u32, usize)>,
}

/// A connection's channel line, where the emulated release prints it: at once (up to 2.21,
/// connections are made during init) or, from 2.22 (`NCCL_RUNTIME_CONNECT`, default 1), kept
/// in `deferred` for the first collective, after `Init COMPLETE`
/// ([`crate::nccl_log::Profile::runtime_connect`]).
pub(crate) fn connected(deferred: &mut Vec<Msg>, line: Msg) {
    let profile = log::profile();
    let at_init = !profile.runtime_connect() || env_is("NCCL_RUNTIME_CONNECT", "0");
    if at_init {
        log::info_msg(&line);
    } else {
        deferred.push(line);
    }
}

/// Is `name` set to exactly `value`?
fn env_is(name: &str, value: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v.trim() == value)
}

/// The address this rank listens on, as NCCL's `Using` lines show it. NCCL logs the choice
/// only where NCCL_SOCKET_IFNAME made it (`… set by environment to …`), and a filter that
/// matches nothing as `Bootstrap : no socket interface found`.
pub fn choose_address(multi_node: bool) -> Result<(IpAddr, NcclIface), CommError> {
    if !multi_node {
        return Ok((
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            NcclIface {
                name: "lo".into(),
                addr: "127.0.0.1".into(),
                port: 0,
            },
        ));
    }
    let all = ifaces::list().map_err(|source| CommError::Io {
        rank: 0,
        what: "listing interfaces".into(),
        source,
    })?;
    let ifname = std::env::var("NCCL_SOCKET_IFNAME").ok();
    if let Some(spec) = ifname.as_deref().filter(|s| !s.trim().is_empty()) {
        log::info_msg(&Msg::EnvSet {
            name: "NCCL_SOCKET_IFNAME".into(),
            value: spec.to_string(),
        });
    }
    let (chosen, _why) = ifaces::select(&all, ifname.as_deref()).inspect_err(|_| {
        log::nccl(
            log::Level::Warn,
            Some(Site::NoSocketInterface),
            &Msg::NoSocketInterface,
        );
    })?;
    let c = &chosen[0];
    Ok((
        c.addr,
        NcclIface {
            name: c.name.clone(),
            addr: c.addr.to_string(),
            port: 0,
        },
    ))
}

/// `ncclCommInitRank comm 0x… rank R nranks N cudaDev D nvmlDev D busId … commId 0x… - Init …`:
/// the emulated communicator's numbers (no GPU: the bus id is the device's slot, the comm
/// pointer and id this process's).
fn init_line(env: &RankEnv, complete: bool) -> Msg {
    Msg::Init(Init {
        complete,
        func: "ncclCommInitRank".into(),
        comm: 0x5500_0000_0000 | u64::from(std::process::id()) << 12,
        rank: env.rank as u32,
        nranks: env.world as u32,
        dev: env.local_rank as u32,
        bus: (env.local_rank as u64 + 1) << 12,
        comm_id: u64::from_le_bytes(env.token[..8].try_into().unwrap_or([0; 8])),
    })
}

/// A channel line: `Channel 00 : 0[0] -> 1[1] via SHM/direct/direct`, or for NET the
/// `00/0 … [send]` form.
pub(crate) fn channel(
    from: usize,
    from_dev: usize,
    to: usize,
    to_dev: usize,
    dir: Option<&str>,
    via: &str,
) -> Msg {
    Msg::Channel(Channel {
        channel: 0,
        conn: dir.map(|_| 0),
        from: from as u32,
        from_dev: from_dev.to_string(),
        to: to as u32,
        to_dev: to_dev.to_string(),
        dir: dir.map(str::to_string),
        via: via.into(),
    })
}

/// A shared-memory failure as NCCL WARNs it (`Error: failed to extend … (28)`), or ringlab's text.
pub(crate) fn log_shm_error(e: &super::shm::ShmError) {
    match e {
        super::shm::ShmError::Extend { path, len, err } => log::nccl(
            log::Level::Warn,
            Some(Site::ShmFailed),
            &Msg::ShmFailed {
                path: path.clone(),
                bytes: *len as u64,
                error: Some((os_error_text(err), err.raw_os_error().unwrap_or(0))),
            },
        ),
        other => log::warn(&other.to_string()),
    }
}

/// `No space left on device`, without Rust's ` (os error 28)`.
fn os_error_text(e: &io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// This rank's listener, on the interface NCCL's rules choose, and the address partners dial
/// (said in NCCL's `Bootstrap`/`NET/Socket` lines).
fn listen(env: &RankEnv) -> Result<(TcpListener, SocketAddr), CommError> {
    let rank = env.rank;
    let io_err = |what: &'static str| {
        move |source| CommError::Io {
            rank,
            what: what.to_string(),
            source,
        }
    };
    let (ip, chosen) = choose_address(env.multi_node)?;
    // The emulated cluster's shaped link: this rank's sends leave through `chosen`.
    super::pace::activate(&chosen.name).map_err(|e| CommError::Io {
        rank,
        what: "reading the link's shape".into(),
        source: io::Error::new(io::ErrorKind::InvalidInput, e),
    })?;
    log::info_msg(&Msg::Using {
        what: UsingWhat::Bootstrap,
        ifaces: vec![chosen.clone()],
    });
    let listener = TcpListener::bind(SocketAddr::new(crate::comm::emu::vnet::bind_ip(ip), 0))
        .map_err(io_err("binding the listener"))?;
    let me = crate::comm::emu::vnet::advertised(
        listener
            .local_addr()
            .map_err(io_err("reading the listener address"))?,
    );
    log::info_msg(&Msg::Using {
        what: UsingWhat::NetSocket,
        ifaces: vec![chosen],
    });
    log::info_msg(&Msg::UsingNetwork {
        name: "Socket".into(),
    });
    Ok((listener, me))
}

/// Dial rank `p` (lower than this one) at the address it published, tune the socket and
/// greet it with this job's hello.
fn dial(
    env: &RankEnv,
    store: &mut StoreClient,
    p: usize,
    phase: &mut impl FnMut(crate::comm::Setup),
) -> Result<TcpStream, CommError> {
    let rank = env.rank;
    let io_err = |what: String| move |source| CommError::Io { rank, what, source };
    let addr_s = store.get(&format!("addr/{p}"), super::store::PATIENCE)?;
    let addr: SocketAddr = addr_s.parse().map_err(|_| CommError::BadAddress {
        rank,
        peer: p,
        addr: addr_s.clone(),
    })?;
    phase(crate::comm::Setup::Connect { to: addr });
    let mut s = connect_retry(addr, Duration::from_secs(10))
        .map_err(io_err(format!("connecting to rank {p}")))?;
    tune(&s).map_err(io_err("tuning a socket".into()))?;
    let hello = Hello {
        token: env.token,
        role: Role::Peer,
        rank: rank as u32,
    };
    s.write_all(&hello.encode())
        .map_err(io_err(format!("greeting rank {p}")))?;
    Ok(s)
}

impl TcpComm {
    /// Meet the other ranks through the store and connect to every partner the schedules need.
    /// The higher rank of a pair dials the lower; every dial opens with this job's hello.
    pub fn init(
        env: &RankEnv,
        store: &mut StoreClient,
        partners: &[usize],
        mut phase: impl FnMut(crate::comm::Setup),
    ) -> Result<Self, CommError> {
        let io_err = |what: &str| {
            let what = what.to_string();
            let rank = env.rank;
            move |source| CommError::Io { rank, what, source }
        };
        log::banner();
        log::info_msg(&init_line(env, false));
        let (listener, me) = listen(env)?;
        phase(crate::comm::Setup::Rendezvous);
        store.set(&format!("addr/{}", env.rank), &me.to_string())?;
        let mut peers: Vec<Option<TcpStream>> = (0..env.world).map(|_| None).collect();
        let lower: Vec<usize> = partners.iter().copied().filter(|&p| p < env.rank).collect();
        let higher: Vec<usize> = partners.iter().copied().filter(|&p| p > env.rank).collect();
        for &p in &lower {
            peers[p] = Some(dial(env, store, p, &mut phase)?);
        }
        phase(crate::comm::Setup::Accept);
        accept_peers(&listener, env, &higher, &mut peers).map_err(io_err("accepting"))?;
        phase(crate::comm::Setup::Transports);
        let mut deferred = Vec::new();
        let (shm, transports, unix) =
            super::transport::connect(env, &mut peers, partners, &mut deferred)?;
        phase(crate::comm::Setup::WarmUp);
        // Only sockets that will carry a collective's bytes need their windows opened.
        let net: Vec<Option<TcpStream>> = peers
            .iter()
            .enumerate()
            .map(|(p, s)| match transports.get(p) {
                Some(Some(Transport::NET)) => s.as_ref().and_then(|s| s.try_clone().ok()),
                _ => None,
            })
            .collect();
        warm_up(&net, WARM_UP_BYTES).map_err(io_err("warming up the connections"))?;
        log::info_msg(&init_line(env, true));
        // Pinned by the launcher, a rank has a CPU of its own (and available_parallelism,
        // which reads the affinity mask, would say 1).
        let pinned = std::env::var_os(CPU_ENV).is_some();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let here = std::env::var(HOST_RANKS_ENV)
            .ok()
            .and_then(|v| v.parse::<usize>().ok());
        Ok(Self {
            rank: env.rank,
            world: env.world,
            peers,
            shm,
            transports,
            unix,
            staging: AlignedBuf::default(),
            send_stage: AlignedBuf::default(),
            spin: spins(pinned, here, env.local_world, cores),
            send_slice: send_slice(),
            plans: std::collections::HashMap::new(),
            deferred,
            calls: 0,
            mine: Vec::new(),
            spans: Vec::new(),
            mapped_by: vec![Vec::new(); env.world],
            theirs: (0..env.world).map(|_| Vec::new()).collect(),
            next_region: 0,
        })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }
    pub fn world(&self) -> usize {
        self.world
    }

    /// Send `payload` to each of `peers` and read one frame back from each: the header check a
    /// training loop runs before each collective. Every send goes out before any read, so no
    /// two ranks wait on each other; a peer silent for `wait` is an error naming it.
    pub fn exchange_frames(
        &mut self,
        peers: &[usize],
        payload: &[u8],
        wait: Duration,
    ) -> Result<Vec<(usize, Vec<u8>)>, CommError> {
        let frames = swap_frames(self.rank, &mut self.peers, peers, payload, "header", wait)?;
        Ok(peers.iter().copied().zip(frames).collect())
    }

    /// The transports this rank's peers got, as one set (shown `P2P+NET`, `-` with no
    /// partner).
    pub fn transport_set(&self) -> Transports {
        self.transports.iter().flatten().copied().collect()
    }

    /// Collective buffers of `lens` bytes each that this node's P2P partners map read-only,
    /// so a large message moves with one copy, out of the sender's buffer into the
    /// receiver's (as NCCL's P2P transport maps a peer GPU's buffer). Every rank calls it at
    /// the same point of the job. Buffers registered by an earlier call are forgotten (their
    /// messages go by cross-memory attach). Where this rank has no P2P partner, or no memory
    /// file can be made, the buffers are plain heap memory.
    pub fn alloc_shared(&mut self, lens: &[usize]) -> Result<Vec<SharedBuf>, CommError> {
        let rank = self.rank;
        let setup = |what: String| CommError::Setup { rank, what };
        self.mine.clear();
        self.spans.clear();
        self.mapped_by.iter_mut().for_each(Vec::clear);
        self.theirs.iter_mut().for_each(Vec::clear);
        let heap = |len: usize| {
            AlignedBuf::try_zeroed(len)
                .map(SharedBuf::Heap)
                .map_err(|e| setup(e.to_string()))
        };
        let p2p: Vec<usize> = (0..self.world)
            .filter(|&p| self.transports.get(p) == Some(&Some(Transport::P2p)))
            .collect();
        if p2p.is_empty() {
            return lens.iter().map(|&l| heap(l)).collect();
        }
        let (made, offer, fds) = self.make_regions(lens);
        let frame = serde_json::to_vec(&offer).map_err(|e| setup(e.to_string()))?;
        let replies = swap_frames(
            rank,
            &mut self.peers,
            &p2p,
            &frame,
            "buffer offer",
            SETUP_WAIT,
        )?;
        // The buffers themselves go as descriptors (a send does not wait for the partner).
        for &p in &p2p {
            super::fdpass::send_fds(self.unix_to(p)?, &fds).map_err(|source| CommError::Io {
                rank,
                what: format!("handing rank {p} this rank's buffers"),
                source,
            })?;
        }
        let mut acks: Vec<Vec<u8>> = Vec::with_capacity(p2p.len());
        for (&p, r) in p2p.iter().zip(&replies) {
            let theirs: RegionOffer = serde_json::from_slice(r)
                .map_err(|e| setup(format!("rank {p}'s buffer offer: {e}")))?;
            let ids = self.map_regions(p, &theirs)?;
            acks.push(serde_json::to_vec(&ids).map_err(|e| setup(e.to_string()))?);
        }
        let back = swap_frames_each(
            rank,
            &mut self.peers,
            &p2p,
            |k| &acks[k],
            "buffer mapping",
            SETUP_WAIT,
        )?;
        for (&p, b) in p2p.iter().zip(&back) {
            self.mapped_by[p] = serde_json::from_slice(b)
                .map_err(|e| setup(format!("rank {p}'s buffer mapping: {e}")))?;
        }
        made.into_iter()
            .zip(lens)
            .map(|(r, &len)| match r {
                Some(r) => Ok(SharedBuf::Region(r)),
                None => heap(len),
            })
            .collect()
    }

    /// A region per length, each given the next id (the offer says which ids and lengths, and
    /// their descriptors go in the same order); None where no memory file could be made.
    fn make_regions(
        &mut self,
        lens: &[usize],
    ) -> (Vec<Option<Arc<Region>>>, RegionOffer, Vec<i32>) {
        let mut made: Vec<Option<Arc<Region>>> = Vec::with_capacity(lens.len());
        let mut offer = RegionOffer {
            regions: Vec::new(),
        };
        let mut fds = Vec::new();
        for &len in lens {
            match Region::new(len) {
                Ok(r) => {
                    let id = self.next_region;
                    self.next_region = self.next_region.wrapping_add(1);
                    offer.regions.push((id, len));
                    fds.push(r.fd());
                    let r = Arc::new(r);
                    self.spans.push((id, r.span()));
                    self.mine.push((id, r.clone()));
                    made.push(Some(r));
                }
                Err(e) => {
                    log::info(&format!(
                        "P2P: no shareable buffer of {len} bytes ({e}): large messages from it \
                         go by cross-memory attach"
                    ));
                    made.push(None);
                }
            }
        }
        (made, offer, fds)
    }

    /// The Unix connection to local partner `p`.
    fn unix_to(&self, p: usize) -> Result<&UnixStream, CommError> {
        self.unix
            .get(p)
            .and_then(Option::as_ref)
            .ok_or_else(|| CommError::Setup {
                rank: self.rank,
                what: format!("no local connection to rank {p}"),
            })
    }

    /// Take the descriptor of every buffer partner `p` offers and map what may be mapped: the
    /// ids mapped. Every announced descriptor is taken, so the next call finds the connection
    /// in step; a refused one falls back to cross-memory attach.
    fn map_regions(&mut self, p: usize, theirs: &RegionOffer) -> Result<Vec<u32>, CommError> {
        let rank = self.rank;
        let mut ids = Vec::new();
        for &(id, len) in &theirs.regions {
            let fd = super::fdpass::recv_fd(self.unix_to(p)?, SETUP_WAIT).map_err(|e| {
                CommError::Setup {
                    rank,
                    what: format!("rank {p}'s buffer {id} did not come: {e}"),
                }
            })?;
            match PeerRegion::from_fd(fd, len, id) {
                Ok(m) => {
                    ids.push(id);
                    self.theirs[p].push(m);
                }
                Err(e) => log::warn(&format!(
                    "P2P: cannot map rank {p}'s buffer {id}: {e}: its large messages come by \
                     cross-memory attach"
                )),
            }
        }
        Ok(ids)
    }

    /// Whether this rank busy-polls before sleeping (every local rank has a core of its own).
    pub fn spins(&self) -> bool {
        self.spin
    }

    /// Execute `schedule` on this rank's buffer (`count × elem_size` bytes), in place.
    pub fn run(
        &mut self,
        schedule: &Schedule,
        buf: &mut [u8],
        dtype: Dtype,
        op: Op,
    ) -> Result<(), CommError> {
        self.execute(schedule, None, buf, dtype, op)
    }

    /// Execute `schedule` out of place: `input` is read, never written; the result lands in
    /// `output` (both `count × elem_size` bytes). No copy of the input comes first: each byte
    /// is read from the input until the schedule has written it to the output.
    pub fn run_from(
        &mut self,
        schedule: &Schedule,
        input: &[u8],
        output: &mut [u8],
        dtype: Dtype,
        op: Op,
    ) -> Result<(), CommError> {
        self.execute(schedule, Some(input), output, dtype, op)
    }

    fn execute(
        &mut self,
        schedule: &Schedule,
        input: Option<&[u8]>,
        buf: &mut [u8],
        dtype: Dtype,
        op: Op,
    ) -> Result<(), CommError> {
        // A release with runtime connection logs its connections at the first collective.
        for line in self.deferred.drain(..) {
            log::info_msg(&line);
        }
        let spec = schedule.spec();
        check_call(spec, dtype, input, buf)?;
        let reduce = kernel(dtype);
        let header = super::header::Header::new(self.calls, spec, dtype, op);
        self.calls = self.calls.wrapping_add(1);
        let Self {
            plans,
            peers,
            shm,
            staging,
            send_stage,
            spin,
            rank,
            ..
        } = self;
        let plan = plans
            .entry(*spec)
            .or_insert_with(|| Plan::build(schedule, *rank));
        send_stage.reserve_len(plan.send_stage_len());
        staging.reserve_len(plan.reduce_peers() * STAGE_WINDOW);
        let links = links(peers, shm.as_ref());
        let io = Io {
            links: &links,
            bell: shm.as_ref().map(|l| l.bell),
            spin: *spin,
            reduce,
            op,
            es: spec.elem_size,
            send_slice: self.send_slice,
            regions: Regions {
                mine: &self.spans,
                mapped_by: &self.mapped_by,
                theirs: &self.theirs,
            },
        };
        let rank = *rank;
        execute(
            plan,
            &io,
            &header.encode(),
            input,
            buf,
            send_stage.bytes_mut(),
            staging.bytes_mut(),
        )
        .map_err(|e| engine_error(e, rank, plan, schedule, &header))?;
        if op == Op::Avg && spec.coll.is_reducing() {
            let r = schedule.defined_range(self.rank);
            divide(
                dtype,
                &mut buf[r.start * spec.elem_size..r.end * spec.elem_size],
                self.world,
            );
        }
        Ok(())
    }
}

/// A call's buffers and dtype against its schedule: a reduction reads elements of the dtype's
/// size (a schedule of another element size would cut them apart), and every buffer holds
/// exactly the schedule's elements.
fn check_call(
    spec: &crate::collective::schedule::Spec,
    dtype: Dtype,
    input: Option<&[u8]>,
    buf: &[u8],
) -> Result<(), CommError> {
    if dtype.size() != spec.elem_size {
        return Err(CommError::BadDtype {
            dtype: dtype.name(),
            size: dtype.size(),
            elem: spec.elem_size,
        });
    }
    let need = spec.count * spec.elem_size;
    for got in [Some(buf.len()), input.map(<[u8]>::len)]
        .into_iter()
        .flatten()
    {
        if got != need {
            return Err(CommError::BadBuffer { got, need });
        }
    }
    Ok(())
}

/// How the engine reaches each peer: its shared-memory pipe (single copy where the pair has
/// P2P), else its TCP socket, else nothing.
fn links<'a>(
    peers: &[Option<TcpStream>],
    shm: Option<&'a super::transport::shm::Links>,
) -> Vec<Link<'a>> {
    peers
        .iter()
        .enumerate()
        .map(
            |(p, s)| match (shm.and_then(|l| l.pipes.get(p)).and_then(Option::as_ref), s) {
                (Some(pipe), _) => {
                    let fifo = super::transport::shm::FifoLink { pipe };
                    if pipe.cma_to || pipe.cma_from.is_some() {
                        Link::P2p(super::transport::p2p::CmaLink { fifo })
                    } else {
                        Link::Fifo(fifo)
                    }
                }
                (None, Some(s)) => Link::Tcp(super::transport::net::TcpLink { fd: s.as_raw_fd() }),
                (None, None) => Link::None,
            },
        )
        .collect()
}

/// The engine's failure as this rank's error, naming the phase and step it happened in.
fn engine_error(
    e: EngineError,
    rank: usize,
    plan: &Plan,
    schedule: &Schedule,
    header: &super::header::Header,
) -> CommError {
    let where_ = |op: usize| {
        let k = plan.step_of(op);
        let phase = schedule.steps().get(k).map_or("", |st| st.phase.label());
        (phase.to_string(), k + 1)
    };
    match e {
        EngineError::Closed { op, peer } => {
            let (phase, step) = where_(op);
            CommError::PeerClosed { peer, phase, step }
        }
        EngineError::Io { op, peer, err } => {
            let (phase, step) = where_(op);
            CommError::Io {
                rank,
                what: format!("{phase} step {step} with rank {peer}"),
                source: err,
            }
        }
        EngineError::Mismatch { peer, theirs } => {
            CommError::Mismatch(super::header::mismatch(rank, header, peer, &theirs))
        }
        EngineError::Stuck => CommError::Stuck { rank },
    }
}

/// How long a partner may take to answer during transport setup.
pub(crate) const SETUP_WAIT: Duration = Duration::from_secs(300);

/// Send one frame to each of `to` (every send before any read, so no two ranks wait on each
/// other), then read one frame from each; a peer silent for `wait`, or gone, is an error that
/// names it and `what` was awaited.
pub(crate) fn swap_frames(
    rank: usize,
    peers: &mut [Option<TcpStream>],
    to: &[usize],
    payload: &[u8],
    what: &str,
    wait: Duration,
) -> Result<Vec<Vec<u8>>, CommError> {
    swap_frames_each(rank, peers, to, |_| payload, what, wait)
}

/// [`swap_frames`] with a frame of its own for each peer (`payload(k)` for `to[k]`).
pub(crate) fn swap_frames_each<'a>(
    rank: usize,
    peers: &mut [Option<TcpStream>],
    to: &[usize],
    payload: impl Fn(usize) -> &'a [u8],
    what: &str,
    wait: Duration,
) -> Result<Vec<Vec<u8>>, CommError> {
    let io_err = |what: String| move |source| CommError::Io { rank, what, source };
    for (k, &p) in to.iter().enumerate() {
        let s = peer_mut(rank, peers, p)?;
        super::wire::write_frame(s, payload(k)).map_err(|e| {
            let what = format!("sending a {what} to rank {p}");
            match e {
                super::wire::WireError::Io(source) => CommError::Io { rank, what, source },
                source => CommError::Wire { rank, what, source },
            }
        })?;
    }
    let mut out = Vec::with_capacity(to.len());
    for &p in to {
        let s = peer_mut(rank, peers, p)?;
        s.set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .map_err(io_err(format!(
                "setting a timeout on rank {p}'s connection"
            )))?;
        let got = super::wire::read_frame(s);
        let _ = s.set_read_timeout(None);
        let frame = got.map_err(|e| match e {
            super::wire::WireError::Io(source)
                if matches!(
                    source.kind(),
                    io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
                ) =>
            {
                CommError::Io {
                    rank,
                    what: format!("rank {p} closed the connection before its {what}"),
                    source,
                }
            }
            super::wire::WireError::Io(source) => CommError::Io {
                rank,
                what: format!("waiting for rank {p}'s {what}"),
                source,
            },
            source => CommError::Wire {
                rank,
                what: format!("rank {p}'s {what}"),
                source,
            },
        })?;
        out.push(frame);
    }
    Ok(out)
}

/// The connection to rank `p`, or an error saying there is none.
fn peer_mut(
    rank: usize,
    peers: &mut [Option<TcpStream>],
    p: usize,
) -> Result<&mut TcpStream, CommError> {
    peers
        .get_mut(p)
        .and_then(Option::as_mut)
        .ok_or_else(|| CommError::Io {
            rank,
            what: format!("no connection to rank {p}"),
            source: io::Error::from(io::ErrorKind::NotConnected),
        })
}

/// Bytes each connection carries each way before the first collective. A fresh TCP
/// connection advertises a small receive window and grows it only as data arrives, so without
/// this a job's first calls of a few hundred KiB run several times slower than later ones
/// (measured here on loopback: a 256 KiB all-reduce took 500-750 us in its first iterations
/// and 70-90 us once the windows had opened).
const WARM_UP_BYTES: usize = 8 << 20;

/// Send `bytes` to every connected peer and receive as many from each, all at once (every
/// rank does the same, so nobody waits on a peer that is busy with a third rank).
fn warm_up(peers: &[Option<TcpStream>], bytes: usize) -> io::Result<()> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let fds: Vec<_> = peers.iter().flatten().map(|s| s.as_fd()).collect();
    let block = vec![0u8; 256 << 10];
    let mut sink = vec![0u8; 256 << 10];
    let mut sent = vec![0usize; fds.len()];
    let mut got = vec![0usize; fds.len()];
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let again = |e: &io::Error| {
        matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
        )
    };
    while sent.iter().chain(&got).any(|&n| n < bytes) {
        let mut pollfds = Vec::with_capacity(fds.len());
        let mut moved = false;
        for (k, &fd) in fds.iter().enumerate() {
            let mut events = PollFlags::empty();
            if sent[k] < bytes {
                let n = (bytes - sent[k]).min(block.len());
                match sys_send(fd.as_raw_fd(), &block[..n]) {
                    Ok(r) => {
                        sent[k] += r;
                        moved |= r > 0;
                    }
                    Err(e) if again(&e) => events |= PollFlags::POLLOUT,
                    Err(e) => return Err(e),
                }
            }
            if got[k] < bytes {
                let n = (bytes - got[k]).min(sink.len());
                match sys_recv(fd.as_raw_fd(), &mut sink[..n], true) {
                    Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                    Ok(r) => {
                        got[k] += r;
                        moved = true;
                    }
                    Err(e) if again(&e) => events |= PollFlags::POLLIN,
                    Err(e) => return Err(e),
                }
            }
            if !events.is_empty() {
                pollfds.push(PollFd::new(fd, events));
            }
        }
        if std::time::Instant::now() > deadline {
            return Err(io::Error::from(io::ErrorKind::TimedOut));
        }
        if !moved && !pollfds.is_empty() {
            let _ = poll(&mut pollfds, PollTimeout::from(100u8));
        }
    }
    Ok(())
}

/// The send slice: `RINGLAB_SEND_SLICE` ([`Tuning`](super::tuning::Tuning)) or the default;
/// a value that cannot be read is said once, as NCCL says an ignored variable.
fn send_slice() -> usize {
    let t = super::tuning::Tuning::get();
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| t.refused.iter().for_each(|r| log::warn(r)));
    t.send_slice
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

#[cfg(test)]
mod tests {
    use super::spins;

    #[test]
    fn ranks_spin_only_when_the_host_has_a_cpu_for_each() {
        // A two-node virtual cluster of 2 ranks per node on 2 cores: 4 ranks share 2 CPUs.
        assert!(!spins(false, Some(4), 2, 2));
        assert!(spins(false, Some(2), 2, 2));
        // Without the launcher's count, the node's own ranks.
        assert!(spins(false, None, 2, 2));
        assert!(!spins(false, None, 3, 2));
        // A count below the node's own is not believed.
        assert!(!spins(false, Some(1), 3, 2));
        // A pinned rank has its CPU.
        assert!(spins(true, Some(64), 64, 2));
    }
}
