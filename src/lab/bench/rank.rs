//! The rank process (`ringlab __rank`, spawned by the launcher, like torchrun's workers): meet
//! the others through the store, connect, run the job, report JSON lines on stdout.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use crate::collective::{Schedule, Spec};
use crate::comm::Setup;
use crate::comm::cpu::p2p::SharedBuf;
use crate::comm::cpu::store::StoreClient;
use crate::comm::cpu::tcp::{RankEnv, TcpComm, partners};
use crate::comm::cpu::wire::token_from_hex;
use crate::comm::{cpu::tcp::CommError, emu::log};
use crate::lab::bench::measure::{self, Call, Fault, Which};
use crate::lab::{Event, Job, JobKind, Phase};

pub fn emit(ev: &Event) {
    if let Ok(mut line) = serde_json::to_vec(ev) {
        line.push(b'\n');
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(&line);
        let _ = out.flush();
    }
}

/// Why a rank could not read what `ringlab bench` hands it in the environment.
#[derive(Debug, thiserror::Error)]
enum EnvError {
    #[error("{0} is not set (this command is started by `ringlab bench`)")]
    Unset(&'static str),
    #[error("{0} is not a number")]
    NotANumber(&'static str),
    #[error("RINGLAB_TOKEN is not 32 hex digits")]
    Token,
    #[error("RINGLAB_STORE is not host:port")]
    Store,
    #[error("RINGLAB_JOB: {0}")]
    Job(serde_json::Error),
}

fn env_var(name: &'static str) -> Result<String, EnvError> {
    std::env::var(name).map_err(|_| EnvError::Unset(name))
}

fn read_env() -> Result<(RankEnv, Job), EnvError> {
    let num = |n: &'static str| -> Result<usize, EnvError> {
        env_var(n)?.parse().map_err(|_| EnvError::NotANumber(n))
    };
    let token = token_from_hex(&env_var("RINGLAB_TOKEN")?).ok_or(EnvError::Token)?;
    let store: SocketAddr = env_var("RINGLAB_STORE")?
        .parse()
        .map_err(|_| EnvError::Store)?;
    let job: Job = serde_json::from_str(&env_var("RINGLAB_JOB")?).map_err(EnvError::Job)?;
    let env = RankEnv {
        rank: num("RINGLAB_RANK")?,
        world: num("RINGLAB_WORLD")?,
        local_rank: num("RINGLAB_LOCAL_RANK")?,
        local_world: num("RINGLAB_LOCAL_WORLD")?,
        token,
        store,
        multi_node: env_var("RINGLAB_MULTI_NODE").is_ok_and(|v| v == "1"),
        shm: !crate::comm::cpu::shm::disabled_by_env(),
    };
    Ok((env, job))
}

/// Die with the launcher: a parent-death signal, and a check that closes the race with fork.
fn tie_to_parent() {
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    if let Ok(p) = std::env::var("RINGLAB_PARENT")
        && let Ok(p) = p.parse::<i32>()
        && nix::unistd::getppid().as_raw() != p
    {
        std::process::exit(1);
    }
}

/// How a training job's rank runs its loop (the hang lab's, handed in by the command that
/// starts the rank: the bench does not name the hang lab).
pub type TrainLoop = fn(
    &RankEnv,
    &Job,
    &mut StoreClient,
    &dyn Fn(Phase),
    &mut dyn FnMut(Event),
) -> Result<(), Fault>;

pub fn main(train: TrainLoop) -> ExitCode {
    tie_to_parent();
    if let Err(e) = crate::lab::job::launch::pin_to_planned_cpu() {
        crate::comm::emu::log::warn(&e.to_string());
    }
    let (env, job) = match read_env() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("ringlab __rank: {e}");
            return ExitCode::from(2);
        }
    };
    log::init(env.local_rank);
    let rank = env.rank;
    match run(&env, &job, train) {
        Ok(()) => {
            emit(&Event::Done { rank });
            ExitCode::SUCCESS
        }
        Err(Failed::Reported) => ExitCode::from(1),
        Err(Failed::Fault(fault)) => {
            report(rank, &fault);
            ExitCode::from(1)
        }
    }
}

/// How a rank's run failed: a fault still to report, or one reported already (before the
/// rig's teardown, which can block behind a kernel that never completes).
enum Failed {
    Fault(Fault),
    Reported,
}

impl From<Fault> for Failed {
    fn from(f: Fault) -> Self {
        Self::Fault(f)
    }
}

fn report(rank: usize, fault: &Fault) {
    emit(&Event::Error {
        rank,
        message: fault.message().to_string(),
        hang: fault.is_hang(),
    });
}

fn run(env: &RankEnv, job: &Job, train: TrainLoop) -> Result<(), Failed> {
    let rank = env.rank;
    let phase = |p: Phase| phase_of(rank, p);
    phase(Phase::Spawned);
    let mut store = StoreClient::connect(env.store, &env.token, rank as u32).map_err(error)?;
    let mut out = |ev: Event| emit(&ev);
    if job.kind == JobKind::Train {
        return Ok(train(env, job, &mut store, &phase, &mut out)?);
    }
    same_calls_as_rank_0(&mut store, rank, job)?;
    let mut rig: Box<dyn Rig + '_> = match job.backend {
        crate::lab::Backend::Tcp => Box::new(TcpRig::init(env, job, &mut store, phase)?),
        crate::lab::Backend::Nccl => Box::new(NcclRig::init(env, job, &mut store, phase)?),
    };
    phase(Phase::InitDone);
    if let Some(transport) = rig.transport() {
        emit(&Event::Transport { rank, transport });
    }
    // Under a launcher each rank has a process (and a launcher) of its own: rows go to rank 0,
    // whose process prints the one table.
    let mut rows = if job.one_table {
        Some(StoreClient::connect(env.store, &env.token, rank as u32).map_err(error)?)
    } else {
        None
    };
    let mut shared_err: Option<Fault> = None;
    let mut out = |ev: Event| match (&mut rows, &ev) {
        (Some(store), Event::Row { .. }) if shared_err.is_none() => {
            match share_row(store, env, &ev) {
                Ok(all) => all.iter().for_each(emit),
                Err(e) => shared_err = Some(e),
            }
        }
        _ => emit(&ev),
    };
    let result = match job.kind {
        JobKind::Sanity => measure::sanity(rig.as_mut(), &mut out),
        JobKind::Bench => measure::bench(rig.as_mut(), job, &mut out),
        JobKind::Train => Err(error("a training job runs before any rig")),
    }
    .and_then(|()| shared_err.map_or(Ok(()), Err))
    .and_then(|()| rig.finish());
    if let Err(fault) = result {
        // The report goes out while the rig still stands: tearing down CUDA (streams, the
        // context) can wait on a kernel that never completes, and the report must not wait
        // with it.
        report(rank, &fault);
        drop(rig);
        return Err(Failed::Reported);
    }
    Ok(())
}

/// Publish this rank's row; rank 0 then reads every rank's, in rank order, for its table
/// (the others pass nothing on). Keyed by size and placement, so a row is never mixed up
/// with another.
fn share_row(store: &mut StoreClient, env: &RankEnv, ev: &Event) -> Result<Vec<Event>, Fault> {
    let Event::Row { size, in_place, .. } = ev else {
        return Ok(vec![ev.clone()]);
    };
    let key = |r: usize| format!("row/{size}/{in_place}/{r}");
    let text = serde_json::to_string(ev).map_err(error)?;
    store.set(&key(env.rank), &text).map_err(error)?;
    if env.rank != 0 {
        return Ok(Vec::new());
    }
    (0..env.world)
        .map(|r| {
            let got = store
                .get(&key(r), crate::comm::cpu::store::PATIENCE)
                .map_err(error)?;
            serde_json::from_str(&got).map_err(|e| error(format!("rank {r}'s row: {e}")))
        })
        .collect()
}

/// What decides how many calls a rank makes, as its flags say: the same on every rank, or
/// one waits in a barrier while the others are still in collectives it never joins.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Calls {
    sizes: Vec<u64>,
    iters: usize,
    warmup: usize,
    check: bool,
    repeat: usize,
}

impl Calls {
    fn of(job: &Job) -> Self {
        Calls {
            sizes: job.sizes.clone(),
            iters: job.iters,
            warmup: job.warmup,
            check: job.check,
            repeat: job.repeat,
        }
    }

    /// The flags that differ, in words: `-n 200 where rank 0 has 100`.
    fn differences(&self, zero: &Calls) -> Vec<String> {
        let mut d = Vec::new();
        let size = |c: &Calls| match (c.sizes.first(), c.sizes.last()) {
            (Some(a), Some(b)) => format!("{} sizes from {a} to {b} B", c.sizes.len()),
            _ => "no sizes".into(),
        };
        if self.sizes != zero.sizes {
            d.push(format!(
                "-b/-e/-f: {} where rank 0 has {}",
                size(self),
                size(zero)
            ));
        }
        for (flag, mine, theirs) in [
            ("-n", self.iters, zero.iters),
            ("-w", self.warmup, zero.warmup),
            ("-R", self.repeat, zero.repeat),
            ("-c", usize::from(self.check), usize::from(zero.check)),
        ] {
            if mine != theirs {
                d.push(format!("{flag} {mine} where rank 0 has {theirs}"));
            }
        }
        d
    }
}

/// Every rank's calls must be rank 0's (finding L2): rank 0 publishes what its flags say, the
/// others compare and fail at once, naming the flags, instead of waiting out the timeout.
fn same_calls_as_rank_0(store: &mut StoreClient, rank: usize, job: &Job) -> Result<(), Fault> {
    if job.kind == JobKind::Train {
        return Ok(());
    }
    let mine = Calls::of(job);
    if rank == 0 {
        let text = serde_json::to_string(&mine).map_err(error)?;
        return store.set("calls/0", &text).map_err(error);
    }
    let wait = Duration::from_secs(job.timeout_s.max(1));
    let text = store.get("calls/0", wait).map_err(error)?;
    let zero: Calls =
        serde_json::from_str(&text).map_err(|e| error(format!("rank 0's calls: {e}")))?;
    let d = mine.differences(&zero);
    if d.is_empty() {
        return Ok(());
    }
    Err(error(format!(
        "rank {rank} would make other calls than rank 0 ({}): every rank must be given the same \
         -b/-e/-f/-n/-w/-c/-R, or one waits for collectives the others never call",
        d.join("; ")
    )))
}

fn error(e: impl std::fmt::Display) -> Fault {
    Fault::Error(e.to_string())
}

/// NCCL's failure as the run's fault: what never settled is a hang (M1), the rest an error.
fn nccl_fault(w: crate::comm::nccl::WaitFault) -> Fault {
    use crate::comm::nccl;
    match w {
        nccl::WaitFault::Error(m) => Fault::Error(m),
        nccl::WaitFault::Timeout(m) => Fault::Hang(m),
    }
}

/// One-byte collectives a TCP barrier ends with (see `TcpRig::barrier`).
const SYNC_ROUNDS: usize = 4;

/// How long a barrier between ranks may wait (the launcher's watchdog ends a hung job first).
const BARRIER_WAIT: Duration = crate::comm::cpu::store::PATIENCE;

/// A backend as this rank process runs it: the measurement hooks plus a way to leave.
trait Rig: measure::Rig {
    /// Leave the job cleanly once everything is measured.
    fn finish(&mut self) -> Result<(), Fault> {
        Ok(())
    }
}

/// The TCP backend: this process is one rank, and a collective is the schedule executed over
/// real sockets, synchronously (so `complete` has nothing left to wait for).
struct TcpRig<'s> {
    comm: TcpComm,
    store: &'s mut StoreClient,
    /// The job's collective on one byte per rank: what re-synchronizes the ranks over their
    /// own connections after the store's barrier.
    shape: Schedule,
    /// In memory the node's P2P partners map, so large messages move with one copy.
    send: SharedBuf,
    recv: SharedBuf,
    schedule: Option<Schedule>,
}

impl<'s> TcpRig<'s> {
    fn init(
        env: &RankEnv,
        job: &Job,
        store: &'s mut StoreClient,
        phase: impl Fn(Phase),
    ) -> Result<Self, Fault> {
        // Who talks to whom comes from the schedules themselves (one element per chunk is
        // enough): the job's, and the tuner's for small calls.
        let shape_of = |algo| {
            Schedule::build(&Spec {
                root: job.root,
                ..Spec::new(job.coll, algo, env.world, env.world, 1)
            })
            .map_err(error)
        };
        let shape = shape_of(job.algo)?;
        let small = match job.algo_at(0) {
            a if a != job.algo => Some(shape_of(a)?),
            _ => None,
        };
        let shapes: Vec<&Schedule> = std::iter::once(&shape).chain(small.as_ref()).collect();
        let comm = TcpComm::init(env, store, &partners(env.rank, &shapes), |s| {
            phase(Phase::Setup(s))
        })
        .map_err(|e: CommError| error(e))?;
        Ok(Self {
            comm,
            store,
            shape,
            send: SharedBuf::default(),
            recv: SharedBuf::default(),
            schedule: None,
        })
    }

    fn buf(&mut self, which: Which) -> &mut SharedBuf {
        match which {
            Which::Send => &mut self.send,
            Which::Recv => &mut self.recv,
        }
    }
}

impl measure::Rig for TcpRig<'_> {
    fn transport(&self) -> Option<crate::comm::cpu::tcp::Transports> {
        Some(self.comm.transport_set())
    }
    fn world(&self) -> usize {
        self.comm.world()
    }
    fn ranks(&self) -> std::ops::Range<usize> {
        let r = self.comm.rank();
        r..r + 1
    }
    fn alloc(&mut self, bytes: usize) -> Result<(), Fault> {
        // Buffers sized for the sweep's top row serve every row; otherwise free the old ones
        // first, then ask: a refusal is a report, not an abort.
        if self.send.bytes().len() >= bytes && self.recv.bytes().len() >= bytes {
            return Ok(());
        }
        self.send = SharedBuf::default();
        self.recv = SharedBuf::default();
        let mut bufs = self.comm.alloc_shared(&[bytes, bytes]).map_err(error)?;
        self.recv = bufs.pop().ok_or_else(|| error("no receive buffer"))?;
        self.send = bufs.pop().ok_or_else(|| error("no send buffer"))?;
        Ok(())
    }
    fn upload(&mut self, _: usize, which: Which, at: usize, data: &[u8]) -> Result<(), Fault> {
        let b = self.buf(which).bytes_mut();
        b.get_mut(at..at + data.len())
            .ok_or_else(|| error(format!("{} bytes at {at} overrun the buffer", data.len())))?
            .copy_from_slice(data);
        Ok(())
    }
    fn download(&mut self, _: usize, which: Which, out: &mut [u8]) -> Result<(), Fault> {
        let n = out.len();
        let b = self.buf(which).bytes();
        out.copy_from_slice(
            b.get(..n)
                .ok_or_else(|| error(format!("{n} bytes asked of a {}-byte buffer", b.len())))?,
        );
        Ok(())
    }
    fn launch(&mut self, c: &Call) -> Result<(), Fault> {
        let spec = Spec {
            root: c.root,
            ..Spec::new(c.coll, c.algo, self.comm.world(), c.count, c.dtype.size())
        };
        if self.schedule.as_ref().is_none_or(|s| *s.spec() != spec) {
            self.schedule = Some(Schedule::build(&spec).map_err(error)?);
        }
        let Some(schedule) = &self.schedule else {
            return Err(error("no schedule"));
        };
        // The call's array: `count` elements at the iteration's shift.
        let span = c.shift..c.shift + c.count * c.dtype.size();
        let overrun = |len: usize| {
            error(format!(
                "{} bytes at {} overrun a {len}-byte buffer",
                span.len(),
                span.start
            ))
        };
        let rlen = self.recv.bytes().len();
        let recv = self
            .recv
            .bytes_mut()
            .get_mut(span.clone())
            .ok_or_else(|| overrun(rlen))?;
        if c.in_place {
            self.comm.run(schedule, recv, c.dtype, c.op)
        } else {
            let send = self
                .send
                .bytes()
                .get(span.clone())
                .ok_or_else(|| overrun(self.send.bytes().len()))?;
            self.comm.run_from(schedule, send, recv, c.dtype, c.op)
        }
        .map_err(error)
    }
    fn complete(&mut self, _: &mut dyn FnMut()) -> Result<(), Fault> {
        Ok(())
    }
    fn barrier(&mut self, name: &str) -> Result<(), Fault> {
        // Spin like the engine does while the others arrive (when every local rank has a core
        // of its own): a rank that sleeps here comes back slow into the timed loop.
        let spin = if self.comm.spins() {
            Duration::from_millis(2)
        } else {
            Duration::ZERO
        };
        self.store
            .barrier_spinning(name, self.comm.world(), BARRIER_WAIT, spin)
            .map_err(error)?;
        // Leaving the store's barrier, ranks are up to a few hundred µs apart and may have
        // slept: a few one-byte rounds of the job's own collective over the data connections
        // bring them back in step before anything is timed.
        let mut scratch = vec![0u8; self.shape.spec().count];
        for _ in 0..SYNC_ROUNDS {
            self.comm
                .run(
                    &self.shape,
                    &mut scratch,
                    crate::collective::Dtype::U8,
                    crate::collective::Op::Max,
                )
                .map_err(error)?;
        }
        Ok(())
    }
    fn abort(&mut self) {}
}

impl Rig for TcpRig<'_> {
    /// A closing barrier: no rank leaves (closing its connections and its segment) while a
    /// partner is still inside the last collective, where a departure reads as a failure.
    fn finish(&mut self) -> Result<(), Fault> {
        phase_of(self.comm.rank(), Phase::Closing);
        self.store
            .barrier("tcp/done", self.comm.world(), BARRIER_WAIT)
            .map_err(error)?;
        // Done with the store: its host (under a launcher, rank 0's process) may go.
        self.store
            .set(&crate::lab::job::launch::left_key(self.comm.rank()), "1")
            .map_err(error)
    }
}

/// Tell the launcher which phase this rank is in (its watchdog names it when a rank hangs).
fn phase_of(rank: usize, phase: Phase) {
    emit(&Event::Phase { rank, phase })
}

/// NCCL, one rank per process (`gs` holds one communicator) or every GPU of the machine from
/// this one process (nccl-tests' `-g N`: ncclCommInitAll, each collective launched on all of
/// them inside one group).
struct NcclRig<'s> {
    gs: Vec<crate::comm::nccl::NcclRank>,
    bufs: Vec<(crate::comm::nccl::DevBuf, crate::comm::nccl::DevBuf)>,
    store: &'s mut StoreClient,
    /// The job's ranks, and the first of those this process holds.
    world: usize,
    first: usize,
    /// Processes in the job (what a barrier waits for).
    processes: usize,
    /// How long one wait for the GPU may take before this rank calls it a hang.
    patience: Duration,
}

/// The GPU a rank uses: `ranks_per_gpu` consecutive local ranks share one.
pub fn gpu_of(local_rank: usize, ranks_per_gpu: usize) -> usize {
    local_rank / ranks_per_gpu.max(1)
}

/// [`gpu_of`] among the GPUs this process can see: a launcher that binds one GPU per task
/// (`srun --gpus-per-task=1`, Slurm's `CUDA_VISIBLE_DEVICES` per task) leaves each rank only
/// its own, as device 0, whatever its local rank. `visible` is CUDA_VISIBLE_DEVICES.
pub fn gpu_among(local_rank: usize, ranks_per_gpu: usize, visible: Option<&str>) -> usize {
    let gpu = gpu_of(local_rank, ranks_per_gpu);
    match visible.map(|v| v.split(',').filter(|d| !d.trim().is_empty()).count()) {
        Some(n) if n > 0 && gpu >= n => gpu % n,
        _ => gpu,
    }
}

impl<'s> NcclRig<'s> {
    fn init(
        env: &RankEnv,
        job: &Job,
        store: &'s mut StoreClient,
        phase: impl Fn(Phase),
    ) -> Result<Self, Fault> {
        use crate::comm::nccl::{self, NcclRank};
        let patience = Duration::from_secs(job.timeout_s.max(1));
        if job.devices > 0 {
            // Contexts and ncclCommInitAll in one call: the CUDA-init allowance covers both.
            phase(Phase::Setup(Setup::CudaAndInitAll { gpus: job.devices }));
            let gs = NcclRank::all(job.devices).map_err(error)?;
            return Ok(Self {
                gs,
                bufs: Vec::new(),
                store,
                world: job.devices,
                first: 0,
                processes: 1,
                patience,
            });
        }
        let (rank, world) = (env.rank, env.world);
        // Rank 0 makes the unique id and publishes it through the store (and, as NCCL's
        // bootstrap root, stays alive until everyone is done: see `finish`).
        let id = if rank == 0 {
            let id = nccl::new_id().map_err(error)?;
            store.set("nccl/id", &nccl::id_hex(&id)).map_err(error)?;
            id
        } else {
            phase(Phase::Setup(Setup::Rendezvous));
            let hex = store.get("nccl/id", BARRIER_WAIT).map_err(error)?;
            nccl::id_from_hex(&hex).map_err(error)?
        };
        let gpu = gpu_among(
            env.local_rank,
            job.ranks_per_gpu,
            std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref(),
        );
        // Phases "cuda init on GPU g" (the launcher's watchdog allows a slow first context)
        // and "nccl init on GPU g" (the job's timeout; this rank aborts a stuck init itself
        // after its own patience, with NCCL's state in its report).
        let setup = |s| phase(Phase::Setup(s));
        let g = NcclRank::init(gpu, rank, world, &id, patience, &setup).map_err(nccl_fault)?;
        Ok(Self {
            gs: vec![g],
            bufs: Vec::new(),
            store,
            world,
            first: rank,
            processes: world,
            patience,
        })
    }
}

impl measure::Rig for NcclRig<'_> {
    fn world(&self) -> usize {
        self.world
    }
    fn ranks(&self) -> std::ops::Range<usize> {
        self.first..self.first + self.gs.len()
    }
    fn alloc(&mut self, bytes: usize) -> Result<(), Fault> {
        if self.bufs.first().is_some_and(|b| b.0.len() >= bytes) {
            return Ok(());
        }
        self.bufs.clear();
        for g in &self.gs {
            self.bufs.push((
                g.alloc(bytes).map_err(error)?,
                g.alloc(bytes).map_err(error)?,
            ));
        }
        Ok(())
    }
    fn upload(&mut self, slot: usize, which: Which, at: usize, data: &[u8]) -> Result<(), Fault> {
        let (Some(g), Some(b)) = (self.gs.get(slot), self.bufs.get_mut(slot)) else {
            return Err(error(format!("no buffers for local rank {slot}")));
        };
        let dst = match which {
            Which::Send => &mut b.0,
            Which::Recv => &mut b.1,
        };
        g.upload(data, dst, at).map_err(error)
    }
    fn download(&mut self, slot: usize, which: Which, out: &mut [u8]) -> Result<(), Fault> {
        let (Some(g), Some(b)) = (self.gs.get(slot), self.bufs.get(slot)) else {
            return Err(error(format!("no buffers for local rank {slot}")));
        };
        let src = match which {
            Which::Send => &b.0,
            Which::Recv => &b.1,
        };
        g.download(src, out).map_err(error)
    }
    fn launch(&mut self, c: &Call) -> Result<(), Fault> {
        use crate::comm::nccl::{Bufs, group};
        let one =
            |g: &mut crate::comm::nccl::NcclRank,
             (s, r): &mut (crate::comm::nccl::DevBuf, crate::comm::nccl::DevBuf)| {
                let b = if c.in_place {
                    Bufs::InPlace(r)
                } else {
                    Bufs::OutOfPlace(s, r)
                };
                g.enqueue(c.coll, c.op, c.root, c.dtype, c.count, c.shift, b)
            };
        if self.bufs.len() != self.gs.len() {
            return Err(error("launch before the buffers were allocated"));
        }
        if let ([g], [b]) = (self.gs.as_mut_slice(), self.bufs.as_mut_slice()) {
            one(g, b).map_err(nccl_fault)?;
        } else {
            let (gs, bufs) = (&mut self.gs, &mut self.bufs);
            let ((), in_progress) = group(|| {
                gs.iter_mut()
                    .zip(bufs.iter_mut())
                    .try_for_each(|(g, b)| one(g, b))
            })
            .map_err(nccl_fault)?;
            if in_progress {
                gs.iter()
                    .try_for_each(|g| g.settle_launch())
                    .map_err(nccl_fault)?;
            }
        }
        // Progress marks after the group has launched the work, never inside it.
        self.gs
            .iter_mut()
            .try_for_each(|g| g.mark_progress())
            .map_err(error)
    }
    fn complete(&mut self, on_progress: &mut dyn FnMut()) -> Result<(), Fault> {
        for g in &mut self.gs {
            g.wait(self.patience, on_progress).map_err(nccl_fault)?;
        }
        Ok(())
    }
    fn barrier(&mut self, name: &str) -> Result<(), Fault> {
        self.store
            .barrier(name, self.processes, BARRIER_WAIT)
            .map_err(error)
    }
    fn abort(&mut self) {
        self.gs.iter_mut().for_each(|g| g.abort());
    }
}

impl Rig for NcclRig<'_> {
    /// Rank 0 hosts NCCL's bootstrap root: nobody leaves before everybody is done.
    fn finish(&mut self) -> Result<(), Fault> {
        measure::Rig::barrier(self, "nccl/done")?;
        // Torn down here, where a failure can still be reported (L9), not in Drop.
        for g in &mut self.gs {
            g.close().map_err(error)?;
        }
        // Done with the store (see TcpRig::finish): one key per rank this process drives.
        for r in self.first..self.first + self.gs.len() {
            self.store
                .set(&crate::lab::job::launch::left_key(r), "1")
                .map_err(error)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::gpu_among;

    #[test]
    fn a_rank_takes_its_local_gpu_or_the_one_its_launcher_left_it() {
        // Every GPU visible (srun --gpus-per-node, torchrun): the local rank's.
        assert_eq!(gpu_among(3, 1, None), 3);
        assert_eq!(gpu_among(3, 1, Some("0,1,2,3,4,5,6,7")), 3);
        // Two ranks per GPU.
        assert_eq!(gpu_among(3, 2, None), 1);
        // srun --gpus-per-task=1: each task sees one GPU, as device 0.
        assert_eq!(gpu_among(5, 1, Some("5")), 0);
        // An empty list is not a count.
        assert_eq!(gpu_among(2, 1, Some("")), 2);
    }
}
