//! The launcher, like torchrun: spawn one rank process per local slot, host the rendezvous
//! store (node 0), stream every rank's reports, and watch for a hang. Rank processes never
//! outlive the launcher: they carry a parent-death signal and share a process group the
//! launcher kills on every way out.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::comm::cpu::ifaces;
use crate::comm::cpu::store::StoreServer;
use crate::comm::cpu::wire::{Token, new_token, token_from_hex, token_hex};
use crate::lab::{Event, Job, Phase};

/// Where the job runs.
#[derive(Debug, Clone)]
pub struct Launch {
    pub nproc_per_node: usize,
    pub nnodes: usize,
    pub node_rank: usize,
    pub master_addr: String,
    pub master_port: u16,
    /// No progress from a rank for this long is a hang.
    pub timeout: Duration,
    /// The least a rank's NCCL init (its `nccl init on GPU` phase) is given, where more than
    /// `timeout`: a real init (NVML, topology, proxies, the network) in a VM can outlast a
    /// lab's short watchdog, and must not read as a hang on a run meant to pass.
    pub nccl_init_grace: Duration,
    /// Extra environment for every rank (the hang lab stages NCCL_SOCKET_IFNAME this way).
    pub env: Vec<(String, String)>,
    /// Set to stop the job: the ranks are killed and `run` returns `cancelled`.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Run the whole job here, each node in its own network namespace (the hang lab).
    pub placement: Option<Placement>,
    /// The job's token when a launcher's world gave one ([`super::world::World::token`]);
    /// else multi-node jobs read RINGLAB_TOKEN.
    pub token: Option<crate::comm::cpu::wire::Token>,
    /// Under a launcher: this process runs one rank (`node_rank`), the launcher's local rank
    /// and local size; None when ringlab starts every rank of the node itself.
    pub local: Option<(usize, usize)>,
}

/// Where each node of a virtual cluster lives and what is staged on it.
#[derive(Debug, Clone)]
pub struct Placement {
    pub nodes: usize,
    /// The network namespace of each node; empty on the emulated cluster (ranks run on this
    /// host and carry their node's virtual view in their environment).
    pub netns: Vec<String>,
    /// Per node: the mount namespace of a node with a /dev/shm of its own (a container's).
    pub mntns: Vec<Option<String>>,
    /// Per node: its UTS namespace (its own host name), where it has one.
    pub utsns: Vec<Option<String>>,
    /// Where the store listens, inside node 0 (port 0: any).
    pub store_bind: SocketAddr,
    /// A listener already bound there (the emulated cluster's, which shares this host's
    /// ports with everything else); the store takes it instead of binding again.
    pub store_listener: Option<std::sync::Arc<std::net::TcpListener>>,
    /// Node 0's fabric address: what the ranks dial for the store.
    pub store_ip: IpAddr,
    /// Per node: dial this address for the store instead (a wrong --master-addr).
    pub store_ip_for_node: Vec<Option<IpAddr>>,
    /// Per node: extra environment (the staged misconfiguration).
    pub env_for_node: Vec<Vec<(String, String)>>,
    pub ranks_per_node: usize,
    /// Ranks actually started (fewer than the world size stages a missing rank).
    pub start: usize,
}

impl Launch {
    pub fn single(nproc: usize) -> Self {
        Self {
            nproc_per_node: nproc,
            nnodes: 1,
            node_rank: 0,
            master_addr: "127.0.0.1".into(),
            master_port: 0,
            timeout: Duration::from_secs(60),
            nccl_init_grace: Duration::ZERO,
            env: Vec::new(),
            cancel: None,
            placement: None,
            token: None,
            local: None,
        }
    }
    /// Whether ranks pick a network interface as NCCL does (several nodes, or a virtual
    /// cluster) rather than loopback. A launcher's world on one host is one node.
    pub fn multi_node(&self) -> bool {
        self.placement.is_some()
            || (self.nnodes > 1 && self.local.is_none_or(|(_, size)| size < self.world()))
    }

    pub fn world(&self) -> usize {
        match &self.placement {
            Some(p) => p.nodes * p.ranks_per_node,
            None => self.nproc_per_node * self.nnodes,
        }
    }
}

/// Everything the launcher hears, in order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Msg {
    Event(Event),
    /// A line a rank wrote to stderr (NCCL_DEBUG output, errors).
    Log {
        rank: usize,
        line: String,
    },
    Exit {
        rank: usize,
        code: Option<i32>,
    },
}

/// How a job ended badly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FailKind {
    /// A rank reported an error (NCCL's reason, a socket error…).
    Error,
    /// No progress: the launcher's watchdog, or a rank's own, gave up waiting.
    Hang,
    /// A rank's process ended without saying done.
    Exit,
}

impl FailKind {
    /// What a table row says for the size that was running.
    pub fn label(self) -> &'static str {
        match self {
            Self::Error => "ERROR",
            Self::Hang => "HANG",
            Self::Exit => "EXIT",
        }
    }
}

/// Why a job ended badly, with what each rank was doing.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub kind: FailKind,
    pub reason: String,
    /// (rank, last phase, seconds since its last progress)
    pub ranks: Vec<(usize, Phase, f64)>,
    /// The last log lines per rank.
    pub logs: Vec<(usize, Vec<String>)>,
    /// Each rank's process when the job failed: running, stopped (state T), or gone.
    pub processes: Vec<(usize, crate::lab::job::Process)>,
    /// Each rank's state in /proc/PID/stat when the job failed (R, S, D, T, …), or gone.
    pub states: Vec<(usize, crate::lab::job::ProcState)>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}", self.reason)?;
        for (r, phase, idle) in &self.ranks {
            writeln!(f, "  rank {r}: {phase} (no progress for {idle:.1} s)")?;
        }
        for (r, lines) in &self.logs {
            for l in lines {
                writeln!(f, "  [rank {r}] {l}")?;
            }
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{0}")]
    Setup(String),
    #[error("{0}")]
    Failed(Box<Failure>),
}

fn setup<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> LaunchError + '_ {
    move |e| LaunchError::Setup(format!("{what}: {e}"))
}

/// The address the store listens on. Single node: loopback only. Multi-node: the master
/// address (GLOO_SOCKET_IFNAME may name the interface, as with PyTorch's Gloo).
fn store_bind(l: &Launch) -> Result<SocketAddr, LaunchError> {
    if l.nnodes == 1 {
        return Ok(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            l.master_port,
        ));
    }
    if let Ok(spec) = std::env::var("GLOO_SOCKET_IFNAME")
        && !spec.is_empty()
    {
        let all = ifaces::list().map_err(setup("listing interfaces"))?;
        let (chosen, _) = ifaces::select(&all, Some(&spec))
            .map_err(|e| LaunchError::Setup(format!("GLOO_SOCKET_IFNAME={spec}: {e}")))?;
        return Ok(SocketAddr::new(chosen[0].addr, l.master_port));
    }
    master(l)
}

fn master(l: &Launch) -> Result<SocketAddr, LaunchError> {
    (l.master_addr.as_str(), l.master_port)
        .to_socket_addrs()
        .map_err(setup(&format!("--master-addr {}", l.master_addr)))?
        .next()
        .ok_or_else(|| {
            LaunchError::Setup(format!("--master-addr {} does not resolve", l.master_addr))
        })
}

/// How long a rank may take to say its first word before the watchdog counts it as hung,
/// whatever the job's timeout: starting a process on a loaded machine can take a second or more.
const START_GRACE: Duration = Duration::from_secs(10);

struct Ranks {
    children: Vec<(usize, Child)>,
    pgid: i32,
    /// Where each rank in this mount namespace makes its shared-memory segments: a rank
    /// killed before its partners mapped a segment leaves the name behind, and the
    /// launcher removes it once the rank is gone.
    shm: Vec<(u32, std::path::PathBuf)>,
}

impl Ranks {
    fn kill_all(&mut self) {
        if self.pgid > 0 {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(self.pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for (pid, dir) in self.shm.drain(..) {
            crate::comm::cpu::shm::remove_of(&dir, pid);
        }
    }
}

impl Drop for Ranks {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Run `job` on this node's ranks, calling `on` for everything heard. Returns when every rank
/// is done; a rank that fails or stalls ends the job at once with a report.
pub fn run(job: &Job, l: &Launch, on: impl FnMut(&Msg)) -> Result<(), LaunchError> {
    run_with(job, l, on, |_, _| {})
}

/// One rank to start: who it is, where it runs, whom it dials for the store.
struct Slot {
    rank: usize,
    local: usize,
    local_world: usize,
    netns: Option<String>,
    mntns: Option<String>,
    utsns: Option<String>,
    store: SocketAddr,
    env: Vec<(String, String)>,
}

/// [`run`], with a look at the job before a hung or failed job's ranks are killed (the hang
/// lab gathers its evidence there, while the ranks still listen).
pub fn run_with(
    job: &Job,
    l: &Launch,
    mut on: impl FnMut(&Msg),
    mut before_kill: impl FnMut(&Failure, Option<&StoreServer>),
) -> Result<(), LaunchError> {
    let world = l.world();
    let multi = l.multi_node();
    if let Some(p) = &l.placement {
        let token = new_token().map_err(setup("making a job token"))?;
        let bind = p.store_bind;
        // Nodes in namespaces of their own: the placement's maker binds the store's listener
        // inside node 0 (only it can enter the namespace); the launcher serves on it.
        let server = match (p.netns.first(), &p.store_listener) {
            (_, Some(bound)) => StoreServer::serve(bound.clone(), token),
            (Some(node0), None) => {
                return Err(LaunchError::Setup(format!(
                    "the nodes run in network namespaces ({node0}, …) but the placement brought \
                     no store listener bound in node 0"
                )));
            }
            (None, None) => StoreServer::start(bind, token),
        }
        .map_err(setup("starting the rendezvous store on node 0"))?;
        let slots = placement_slots(p, world, server.addr().port());
        return spawn_and_watch(
            job,
            l,
            world,
            token,
            slots,
            Some(&server),
            &mut on,
            &mut before_kill,
        );
    }
    let token = job_token(l, multi)?;
    // Node 0 hosts the store; everyone else dials it.
    let (_server, store_addr) = if l.node_rank == 0 {
        let s = StoreServer::start(store_bind(l)?, token)
            .map_err(setup("starting the rendezvous store"))?;
        let a = s.addr();
        (
            Some(s),
            if multi {
                master(l).map(|m| SocketAddr::new(m.ip(), a.port()))?
            } else {
                a
            },
        )
    } else {
        (None, master(l)?)
    };
    let slots = (0..l.nproc_per_node)
        .map(|local| Slot {
            rank: l.node_rank * l.nproc_per_node + local,
            local: l.local.map_or(local, |(r, _)| r),
            local_world: l.local.map_or(l.nproc_per_node, |(_, n)| n),
            netns: None,
            mntns: None,
            utsns: None,
            store: store_addr,
            env: Vec::new(),
        })
        .collect();
    spawn_and_watch(
        job,
        l,
        world,
        token,
        slots,
        _server.as_ref(),
        &mut on,
        &mut before_kill,
    )
}

/// The ranks a placement starts (`start` of them, up to the world), each in its node's
/// namespaces, dialling the store at `port` on its node's address.
fn placement_slots(p: &Placement, world: usize, port: u16) -> Vec<Slot> {
    (0..p.start.min(world))
        .map(|rank| {
            let node = rank / p.ranks_per_node.max(1);
            let ip = p
                .store_ip_for_node
                .get(node)
                .copied()
                .flatten()
                .unwrap_or(p.store_ip);
            Slot {
                rank,
                local: rank % p.ranks_per_node.max(1),
                local_world: p.ranks_per_node,
                netns: p.netns.get(node).cloned(),
                mntns: p.mntns.get(node).cloned().flatten(),
                utsns: p.utsns.get(node).cloned().flatten(),
                store: SocketAddr::new(ip, port),
                // Each node of the cluster is a host of its own to the transport
                // selection (ranks of one node share memory, others use the network).
                env: std::iter::once((
                    crate::comm::cpu::shm::NODE_ENV.to_string(),
                    node.to_string(),
                ))
                .chain(p.env_for_node.get(node).cloned().unwrap_or_default())
                .collect(),
            }
        })
        .collect()
}

/// The job's secret: the launch's own, RINGLAB_TOKEN across nodes, else a fresh one.
fn job_token(l: &Launch, multi: bool) -> Result<Token, LaunchError> {
    if let Some(t) = l.token {
        Ok(t)
    } else if multi {
        let hex = std::env::var("RINGLAB_TOKEN").map_err(|_| {
            LaunchError::Setup("multi-node jobs need the same RINGLAB_TOKEN (32 hex digits) on every node, e.g. `export RINGLAB_TOKEN=$(openssl rand -hex 16)`".into())
        })?;
        token_from_hex(&hex)
            .ok_or_else(|| LaunchError::Setup("RINGLAB_TOKEN must be 32 hex digits".into()))
    } else {
        new_token().map_err(setup("making a job token"))
    }
}

#[allow(clippy::too_many_arguments)]
fn spawn_and_watch(
    job: &Job,
    l: &Launch,
    world: usize,
    token: crate::comm::cpu::wire::Token,
    slots: Vec<Slot>,
    server: Option<&StoreServer>,
    on: &mut impl FnMut(&Msg),
    before_kill: &mut impl FnMut(&Failure, Option<&StoreServer>),
) -> Result<(), LaunchError> {
    let multi = l.multi_node();
    let exe = crate::lab::self_exe().map_err(setup("finding the ringlab binary"))?;
    let job_json = serde_json::to_string(job).map_err(setup("encoding the job"))?;
    let (tx, rx) = mpsc::channel::<Inner>();
    let mut ranks = Ranks {
        children: Vec::new(),
        pgid: 0,
        shm: Vec::new(),
    };
    // Under a launcher the host's other ranks are other processes' children: count them, and
    // leave CPU binding to the launcher (mpirun binds; pinning each lone rank to the first
    // CPU it may use would stack them all on one).
    let spawned = slots.len();
    let (here, cpus) = match l.local {
        Some((_, n)) => (n, Vec::new()),
        None => (slots.len(), cpu_plan(job, slots.len())),
    };
    for (i, slot) in slots.into_iter().enumerate() {
        let rank = slot.rank;
        let mut cmd = Command::new(&exe);
        if let Some(cpu) = cpus.get(i) {
            cmd.env(CPU_ENV, cpu.to_string());
        }
        cmd.env(crate::comm::cpu::tcp::HOST_RANKS_ENV, here.to_string());
        cmd.arg("__rank")
            .env("RINGLAB_RANK", rank.to_string())
            .env("RINGLAB_WORLD", world.to_string())
            .env("RINGLAB_LOCAL_RANK", slot.local.to_string())
            .env("RINGLAB_LOCAL_WORLD", slot.local_world.to_string())
            .env("RINGLAB_STORE", slot.store.to_string())
            .env("RINGLAB_TOKEN", token_hex(&token))
            .env("RINGLAB_JOB", &job_json)
            .env("RINGLAB_MULTI_NODE", if multi { "1" } else { "0" })
            .env("RINGLAB_PARENT", std::process::id().to_string())
            .envs(l.env.iter().map(|(k, v)| (k, v)))
            .envs(slot.env.iter().map(|(k, v)| (k, v)))
            .envs(rank_env(job, rank))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(ranks.pgid);
        // Keep the namespace files open until the child has entered them.
        let _ns_files = enter_slot_namespaces(&mut cmd, &slot)?;
        let mut child = cmd
            .spawn()
            .map_err(setup(&format!("starting rank {rank}")))?;
        if ranks.pgid == 0 {
            ranks.pgid = child.id() as i32;
        }
        if slot.mntns.is_none() {
            let shm_dir = slot
                .env
                .iter()
                .chain(&l.env)
                .find(|(k, _)| k == crate::comm::cpu::shm::DIR_ENV)
                .map_or_else(crate::comm::cpu::shm::dir, |(_, v)| v.into());
            ranks.shm.push((child.id(), shm_dir));
        }
        read_output(&mut child, rank, &tx);
        ranks.children.push((rank, child));
    }
    drop(tx);
    watch(&mut ranks, &rx, l, on, &mut |f: &Failure| {
        before_kill(f, server)
    })?;
    // Ranks this process did not start (a launcher's, or other nodes') may still be reading
    // the closing barrier's answer from this process's store.
    if let Some(server) = server
        && spawned < world
    {
        wait_until_all_left(server, world, l.timeout);
    }
    Ok(())
}

/// Have the child `cmd` enter the slot's node's namespaces: its network namespace, then its
/// mount namespace where it has a /dev/shm of its own, and its UTS namespace. The files
/// returned must stay open until the child has been spawned.
fn enter_slot_namespaces(
    cmd: &mut Command,
    slot: &Slot,
) -> Result<[Option<std::fs::File>; 3], LaunchError> {
    let open = |path: &Option<String>| -> Result<Option<std::fs::File>, LaunchError> {
        path.as_ref()
            .map(|p| std::fs::File::open(p).map_err(setup(&format!("opening {p}"))))
            .transpose()
    };
    let ns_files = [
        (open(&slot.netns)?, libc::CLONE_NEWNET),
        (open(&slot.mntns)?, libc::CLONE_NEWNS),
        (open(&slot.utsns)?, libc::CLONE_NEWUTS),
    ];
    let fds: Vec<(i32, i32)> = ns_files
        .iter()
        .filter_map(|(f, kind)| {
            f.as_ref()
                .map(|f| (std::os::fd::AsRawFd::as_raw_fd(f), *kind))
        })
        .collect();
    // The files stay open across the fork (closed at exec).
    crate::lab::fork::enter_namespaces(cmd, fds);
    Ok(ns_files.map(|(f, _)| f))
}

/// Forward the rank's stdout (events, else log lines) and stderr (log lines) to `tx`, each on
/// a thread of its own; stdout's thread ends with [`Inner::Eof`].
fn read_output(child: &mut Child, rank: usize, tx: &mpsc::Sender<Inner>) {
    if let Some(out) = child.stdout.take() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let msg = match serde_json::from_str::<Event>(&line) {
                    Ok(ev) => Msg::Event(ev),
                    Err(_) => Msg::Log { rank, line },
                };
                if tx.send(Inner::Msg(msg)).is_err() {
                    break;
                }
            }
            let _ = tx.send(Inner::Eof(rank));
        });
    }
    if let Some(err) = child.stderr.take() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                // NCCL starts every WARN with an empty line: it says nothing on its own
                // and would take a place among the last lines kept as evidence.
                if line.trim().is_empty() {
                    continue;
                }
                if tx.send(Inner::Msg(Msg::Log { rank, line })).is_err() {
                    break;
                }
            }
        });
    }
}

/// The store key a rank sets once it is done with the store (after the closing barrier).
pub fn left_key(rank: usize) -> String {
    format!("left/{rank}")
}

/// Under a launcher (or on node 0 of a multi-node job) the store lives in this process, whose
/// own ranks are done: it stays up until every rank has left it (`left/R`, set after the
/// closing barrier), or a rank still reading the barrier's answer would find it gone.
fn wait_until_all_left(server: &StoreServer, world: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let mut waiting: Vec<usize> = (0..world).collect();
    loop {
        waiting.retain(|&r| server.peek(&left_key(r)).is_none());
        if waiting.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            crate::comm::emu::log::warn(&format!(
                "ranks {waiting:?} did not leave the store within {} s",
                timeout.as_secs()
            ));
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Is process `pid` stopped (state T or t in /proc/PID/stat)?
fn process_stopped(pid: u32) -> bool {
    matches!(process_state(pid), Some('T' | 't'))
}

/// Has process `pid` ended, though not yet reaped (a zombie), or gone altogether?
fn process_ended(pid: u32) -> bool {
    matches!(process_state(pid), None | Some('Z' | 'X'))
}

/// The state letter of process `pid` in /proc/PID/stat (None: no such process).
fn process_state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the command name, which is in parentheses and may hold spaces.
    let after = s.rsplit_once(')')?.1;
    after.split_whitespace().next()?.chars().next()
}

/// For `wait`: forward what the ranks report (noting who reports an error of its own) and
/// reap the processes that end, before a failure is written down.
fn settle(
    ranks: &mut Ranks,
    st: &mut [(usize, RankState)],
    rx: &mpsc::Receiver<Inner>,
    on: &mut impl FnMut(&Msg),
    wait: Duration,
) {
    let end = Instant::now() + wait;
    loop {
        while let Ok(m) = rx.try_recv() {
            match m {
                Inner::Msg(msg) => {
                    // What comes in now is often the cause (a rank that could not set up says
                    // why just after its partner reported the broken link): keep it as evidence.
                    match &msg {
                        Msg::Event(Event::Error { rank, message, .. }) => {
                            if let Some((_, s)) = st.iter_mut().find(|(r, _)| r == rank) {
                                s.failed = true;
                                s.log(message);
                            }
                        }
                        Msg::Log { rank, line } => {
                            if let Some((_, s)) = st.iter_mut().find(|(r, _)| r == rank) {
                                s.log(line);
                            }
                        }
                        _ => {}
                    }
                    on(&msg);
                }
                Inner::Eof(rank) => {
                    if let Some((_, s)) = st.iter_mut().find(|(r, _)| *r == rank) {
                        s.eof = true;
                    }
                }
            }
        }
        for (rank, child) in &mut ranks.children {
            if let Some((_, s)) = st.iter_mut().find(|(r, _)| r == rank)
                && s.exited.is_none()
                && let Ok(Some(status)) = child.try_wait()
            {
                s.exited = Some(status);
            }
        }
        let all_read = st.iter().all(|(_, s)| s.exited.is_some() && s.eof);
        if all_read || Instant::now() >= end {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The CPU a rank process pins itself to (see [`cpu_plan`]).
pub use crate::comm::cpu::tcp::CPU_ENV;

/// One CPU per rank of the TCP backend when there are at least as many CPUs (this process's
/// affinity mask) as ranks on this host, none otherwise. The ranks spin while they wait for
/// each other; woken from a futex, the scheduler tends to put a rank on the CPU of the rank that
/// woke it, and two spinning ranks sharing one CPU run several times slower until the load
/// balancer parts them. NCCL's ranks are left alone: NCCL sets its own affinity per GPU.
/// `RINGLAB_PIN=0` turns it off.
pub fn cpu_plan(job: &Job, ranks_here: usize) -> Vec<usize> {
    if job.backend != crate::lab::Backend::Tcp
        || std::env::var("RINGLAB_PIN").is_ok_and(|v| v == "0")
    {
        return Vec::new();
    }
    use nix::sched::CpuSet;
    let Ok(set) = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) else {
        return Vec::new();
    };
    let cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect();
    if ranks_here == 0 || ranks_here > cpus.len() {
        return Vec::new();
    }
    cpus[..ranks_here].to_vec()
}

/// In a rank process: pin to the CPU the launcher chose, if any. A failure only costs speed.
pub fn pin_to_planned_cpu() -> Result<(), PinError> {
    let Ok(v) = std::env::var(CPU_ENV) else {
        return Ok(());
    };
    let cpu: usize = v.parse().map_err(|_| PinError::NotACpu(v.clone()))?;
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).map_err(|_| PinError::NoSuchCpu(v))?;
    // Only changes this process.
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .map_err(|e| PinError::Pin { cpu, err: e.into() })
}

/// Why a rank did not pin itself to its planned CPU.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("{CPU_ENV}={0}: not a CPU number")]
    NotACpu(String),
    #[error("{CPU_ENV}={0}: no such CPU")]
    NoSuchCpu(String),
    #[error("pinning to CPU {cpu}: {err}")]
    Pin { cpu: usize, err: std::io::Error },
}

/// What the reader threads send: a message, or the end of a rank's report stream.
enum Inner {
    Msg(Msg),
    Eof(usize),
}

struct RankState {
    /// The rank reported an error of its own (its exit is the consequence, not the cause).
    failed: bool,
    eof: bool,
    phase: Phase,
    last: Instant,
    done: bool,
    exited: Option<ExitStatus>,
    logs: Vec<String>,
}

/// The last lines of a rank's log kept as evidence.
const LOG_LINES: usize = 8;

impl RankState {
    fn log(&mut self, line: &str) {
        self.logs.push(line.to_string());
        if self.logs.len() > LOG_LINES {
            self.logs.remove(0);
        }
    }
}

/// A rank other than `reporter` whose process was killed by a signal before saying done: the
/// sentence that says so. (A rank that exits with a status after its peer's failure is a
/// consequence, not a cause: NCCL's abort, a broken link.)
fn died_first(st: &[(usize, RankState)], reporter: usize) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    st.iter().find_map(|(r, s)| {
        let sig = s.exited?.signal()?;
        (*r != reporter && !s.done)
            .then(|| format!("rank {r} was killed by signal {sig} during {}", s.phase))
    })
}

/// A gap between two rounds of the watch loop longer than this means the launcher itself was
/// stopped: ten of its 200 ms rounds.
const STOPPED_GAP: Duration = Duration::from_secs(2);

fn watch(
    ranks: &mut Ranks,
    rx: &mpsc::Receiver<Inner>,
    l: &Launch,
    on: &mut impl FnMut(&Msg),
    before_kill: &mut impl FnMut(&Failure),
) -> Result<(), LaunchError> {
    let mut st: Vec<(usize, RankState)> = ranks
        .children
        .iter()
        .map(|(r, _)| {
            (
                *r,
                RankState {
                    failed: false,
                    eof: false,
                    phase: Phase::Starting,
                    last: Instant::now(),
                    done: false,
                    exited: None,
                    logs: Vec::new(),
                },
            )
        })
        .collect();
    let mut failed = |st: &[(usize, RankState)], ranks: &mut Ranks, kind, reason| {
        let failure = failure(st, ranks, kind, reason);
        before_kill(&failure);
        ranks.kill_all();
        Err(LaunchError::Failed(Box::new(failure)))
    };
    // The loop comes round every 200 ms at most. A much longer gap means this process was
    // stopped (Ctrl-Z, SIGSTOP) and the ranks, blocked on its pipes, were held with it: their
    // silence is the launcher's, so every progress clock starts again (finding M2).
    let mut came_round = Instant::now();
    loop {
        if st
            .iter()
            .all(|(_, s)| s.done && s.exited.is_some() && s.eof)
        {
            return Ok(());
        }
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(Inner::Eof(rank)) => {
                if let Some((_, s)) = st.iter_mut().find(|(r, _)| *r == rank) {
                    s.eof = true;
                }
            }
            Ok(Inner::Msg(msg)) => {
                on(&msg);
                if let Some((rank, kind, reason)) = take(&mut st, &msg) {
                    // An error is often the echo of another rank's death (a broken pipe): let
                    // the exits and the other reports of this moment come in, so the failure
                    // says who died, as torchrun's agent sees it.
                    settle(ranks, &mut st, rx, on, Duration::from_secs(1));
                    // A rank killed meanwhile is the cause: it comes first (M1).
                    let (kind, reason) = match died_first(&st, rank) {
                        Some(died) => (FailKind::Exit, format!("{died}; then {reason}")),
                        None => (kind, reason),
                    };
                    return failed(&st, ranks, kind, reason);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) | Err(mpsc::RecvTimeoutError::Disconnected) => {}
        }
        reap(ranks, &mut st, on);
        if let Some(reason) = exited_without_done(&st) {
            return failed(&st, ranks, FailKind::Exit, reason);
        }
        if l.cancel
            .as_ref()
            .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
        {
            ranks.kill_all();
            return Err(LaunchError::Setup("cancelled".into()));
        }
        let now = Instant::now();
        if now - came_round > STOPPED_GAP {
            for (_, s) in st.iter_mut() {
                s.last = now;
            }
        }
        came_round = now;
        if let Some(reason) = hung(l, &st, ranks, now) {
            return failed(&st, ranks, FailKind::Hang, reason);
        }
    }
}

/// A rank's message, taken into its state: its phase, its progress, its log. A reported error
/// is the job's failure: (rank, kind, reason).
fn take(st: &mut [(usize, RankState)], msg: &Msg) -> Option<(usize, FailKind, String)> {
    let rank = match msg {
        Msg::Event(ev) => ev.rank(),
        Msg::Log { rank, .. } | Msg::Exit { rank, .. } => *rank,
    };
    let (_, s) = st.iter_mut().find(|(r, _)| *r == rank)?;
    match msg {
        Msg::Event(ev @ (Event::Phase { .. } | Event::Step { .. })) => {
            if let Some(p) = ev.phase() {
                s.phase = p;
            }
            s.last = Instant::now();
        }
        Msg::Event(Event::Done { .. }) => {
            s.phase = Phase::Done;
            s.done = true;
        }
        Msg::Event(Event::Error { message, hang, .. }) => {
            s.log(message);
            s.failed = true;
            let (kind, reason) = error_reason(rank, s, message, *hang);
            return Some((rank, kind, reason));
        }
        Msg::Event(_) => s.last = Instant::now(),
        Msg::Log { line, .. } => s.log(line),
        Msg::Exit { .. } => {}
    }
    None
}

/// What a rank's reported error makes of the job: a HANG where its own watchdog gave up, else
/// an ERROR, with where it was.
fn error_reason(rank: usize, s: &RankState, message: &str, hang: bool) -> (FailKind, String) {
    if hang {
        (
            FailKind::Hang,
            format!(
                "HANG: rank {rank} gave up waiting during {} and aborted its communicator: {}",
                s.phase,
                // The rank's own text says HANG already.
                message.strip_prefix("HANG: ").unwrap_or(message)
            ),
        )
    } else {
        // Spawned is the phase before any: say start-up.
        let during = match &s.phase {
            Phase::Spawned => "start-up".to_string(),
            p => p.to_string(),
        };
        (
            FailKind::Error,
            format!("rank {rank} failed during {during}: {message}"),
        )
    }
}

/// Reap the ranks' exits, each said to `on`.
fn reap(ranks: &mut Ranks, st: &mut [(usize, RankState)], on: &mut impl FnMut(&Msg)) {
    for (rank, child) in &mut ranks.children {
        if let Some((_, s)) = st.iter_mut().find(|(r, _)| r == rank)
            && s.exited.is_none()
            && let Ok(Some(status)) = child.try_wait()
        {
            s.exited = Some(status);
            on(&Msg::Exit {
                rank: *rank,
                code: status.code(),
            });
        }
    }
}

/// A rank whose process ended and whose reports are all read, without saying done: the
/// sentence that says so (it fails the job at once).
fn exited_without_done(st: &[(usize, RankState)]) -> Option<String> {
    st.iter().find_map(|(rank, s)| {
        let status = s.exited.filter(|_| s.eof && !s.done)?;
        let how = match status.code() {
            Some(c) => format!("exited with status {c}"),
            None => "was killed by a signal".into(),
        };
        Some(format!("rank {rank} {how} during {}", s.phase))
    })
}

/// A rank silent for longer than its phase's patience: the HANG sentence. A rank that has not
/// said its first word is still starting (exec, loading, a busy machine): that is not a hang
/// until START_GRACE has passed as well. Everyone waits on a stopped rank: it is named rather
/// than the first that waits.
fn hung(l: &Launch, st: &[(usize, RankState)], ranks: &Ranks, now: Instant) -> Option<String> {
    let (rank, s) = st
        .iter()
        .find(|(_, s)| !s.done && now - s.last > patience(l, &s.phase))?;
    let stopped = st.iter().find(|(r, s)| {
        !s.done
            && ranks
                .children
                .iter()
                .find(|(cr, _)| cr == r)
                .is_some_and(|(_, c)| process_stopped(c.id()))
    });
    Some(match stopped {
        Some((r, sr)) => format!(
            "HANG: rank {r} is stopped (process state T: SIGSTOP, a debugger or job \
             control) during {}; the others wait for it. No progress for {} s; killed the job",
            sr.phase,
            l.timeout.as_secs()
        ),
        None => format!(
            "HANG: rank {rank} made no progress for {} s (stuck in {}); killed the job",
            patience(l, &s.phase).as_secs(),
            s.phase
        ),
    })
}

/// The failure of the job, with what each rank was doing, its process and its last lines.
fn failure(st: &[(usize, RankState)], ranks: &Ranks, kind: FailKind, reason: String) -> Failure {
    let now = Instant::now();
    let child = |r: &usize| {
        ranks
            .children
            .iter()
            .find(|(cr, _)| cr == r)
            .map(|(_, c)| c)
    };
    let processes = st
        .iter()
        .map(|(r, s)| {
            let child = child(r);
            let p = match s.exited {
                Some(_) if s.failed => crate::lab::job::Process::Running,
                Some(status) => crate::lab::job::Process::Gone {
                    code: status.code(),
                    signal: std::os::unix::process::ExitStatusExt::signal(&status),
                },
                None if child.is_some_and(|c| process_stopped(c.id())) => {
                    crate::lab::job::Process::Stopped
                }
                // Ended, not yet reaped: the exit the watch loop has not seen yet.
                None if !s.failed && child.is_some_and(|c| process_ended(c.id())) => {
                    crate::lab::job::Process::Gone {
                        code: None,
                        signal: None,
                    }
                }
                None => crate::lab::job::Process::Running,
            };
            (*r, p)
        })
        .collect();
    let states = st
        .iter()
        .map(|(r, s)| {
            let letter = match s.exited {
                Some(_) => None,
                None => child(r).and_then(|c| process_state(c.id())),
            };
            let state = letter.map_or(
                crate::lab::job::ProcState::Gone,
                crate::lab::job::ProcState::from_letter,
            );
            (*r, state)
        })
        .collect();
    Failure {
        processes,
        states,
        kind,
        reason,
        ranks: st
            .iter()
            .filter(|(_, s)| !s.done)
            .map(|(r, s)| (*r, s.phase.clone(), (now - s.last).as_secs_f64()))
            .collect(),
        logs: st
            .iter()
            .filter(|(_, s)| !s.logs.is_empty())
            .map(|(r, s)| (*r, s.logs.clone()))
            .collect(),
    }
}

/// How long a rank in `phase` may go without a word before the watchdog calls it hung.
fn patience(l: &Launch, phase: &Phase) -> Duration {
    use crate::comm::Setup;
    match phase {
        Phase::Starting => l.timeout.max(START_GRACE),
        // Creating a CUDA context is not NCCL's init: a big GPU's first one can take
        // seconds, and the scenario's short watchdog is for what comes after.
        Phase::Setup(Setup::CudaInit { .. } | Setup::CudaAndInitAll { .. }) => {
            l.timeout.max(crate::comm::nccl::CUDA_INIT_GRACE)
        }
        Phase::Setup(Setup::NcclInit { .. }) => l.timeout.max(l.nccl_init_grace),
        _ => l.timeout,
    }
}

/// The per-rank environment of an NCCL job: ranks that share a GPU each get a host id of
/// their own (NCCL_HOSTID replaces the host hash NCCL compares in its duplicate-GPU check,
/// and ranks on different "hosts" talk over NET).
pub fn rank_env(job: &crate::lab::Job, rank: usize) -> Vec<(String, String)> {
    if job.backend == crate::lab::Backend::Nccl && job.ranks_per_gpu > 1 {
        let host = crate::comm::emu::log::hostname();
        vec![("NCCL_HOSTID".into(), format!("{host}-ringlab-rank{rank}"))]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod cpu_tests {
    use super::*;

    /// L8: a run given an NCCL-init grace (the hang lab's fix runs: 30 s) waits that long in
    /// `nccl init`, and only there; without one the job's timeout rules, as before.
    #[test]
    fn nccl_init_gets_its_grace_and_nothing_else_does() {
        let mut l = Launch::single(2);
        l.timeout = Duration::from_secs(6);
        use crate::comm::Setup;
        let init = Phase::Setup(Setup::NcclInit { gpu: 0 });
        assert_eq!(patience(&l, &init), Duration::from_secs(6));
        l.nccl_init_grace = Duration::from_secs(30);
        assert_eq!(patience(&l, &init), Duration::from_secs(30));
        let timing = Phase::Timing {
            coll: crate::collective::Collective::AllReduce,
            size: 8,
            in_place: true,
        };
        assert_eq!(patience(&l, &timing), Duration::from_secs(6));
        let cuda = Phase::Setup(Setup::CudaInit { gpu: 0 });
        assert_eq!(patience(&l, &cuda), crate::comm::nccl::CUDA_INIT_GRACE);
        assert_eq!(patience(&l, &Phase::Starting), START_GRACE);
    }
    use crate::lab::Job;

    #[test]
    fn tcp_ranks_get_distinct_cpus_only_when_there_are_enough() {
        let job = Job::sanity();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let one = cpu_plan(&job, 1);
        assert_eq!(one.len(), 1);
        let all = cpu_plan(&job, cpus);
        assert_eq!(all.len(), cpus);
        let mut distinct = all.clone();
        distinct.dedup();
        assert_eq!(distinct, all, "one CPU each");
        assert!(
            cpu_plan(&job, cpus + 1).is_empty(),
            "oversubscribed: no pinning"
        );
        let nccl = Job {
            backend: crate::lab::Backend::Nccl,
            ..Job::sanity()
        };
        assert!(cpu_plan(&nccl, 1).is_empty(), "NCCL sets its own affinity");
    }
}
