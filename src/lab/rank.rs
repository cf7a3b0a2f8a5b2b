//! The rank process (`ringlab __rank`, spawned by the launcher, like torchrun's workers): meet
//! the others through the store, connect, run the job, report JSON lines on stdout.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use super::pattern::{self, Check};
use super::{Event, Job, JobKind, counts};
use crate::collective::{Schedule, Spec};
use crate::comm::reduce::AlignedBuf;
use crate::comm::store::StoreClient;
use crate::comm::tcp::{RankEnv, TcpComm, partners};
use crate::comm::wire::token_from_hex;
use crate::comm::{log, tcp::CommError};

pub fn emit(ev: &Event) {
    if let Ok(mut line) = serde_json::to_vec(ev) {
        line.push(b'\n');
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(&line);
        let _ = out.flush();
    }
}

fn env_var(name: &str) -> Result<String, String> {
    std::env::var(name)
        .map_err(|_| format!("{name} is not set (this command is started by `ringlab bench`)"))
}

fn read_env() -> Result<(RankEnv, Job), String> {
    let num = |n: &str| -> Result<usize, String> {
        env_var(n)?
            .parse()
            .map_err(|_| format!("{n} is not a number"))
    };
    let token =
        token_from_hex(&env_var("RINGLAB_TOKEN")?).ok_or("RINGLAB_TOKEN is not 32 hex digits")?;
    let store: SocketAddr = env_var("RINGLAB_STORE")?
        .parse()
        .map_err(|_| "RINGLAB_STORE is not host:port")?;
    let job: Job =
        serde_json::from_str(&env_var("RINGLAB_JOB")?).map_err(|e| format!("RINGLAB_JOB: {e}"))?;
    let env = RankEnv {
        rank: num("RINGLAB_RANK")?,
        world: num("RINGLAB_WORLD")?,
        local_rank: num("RINGLAB_LOCAL_RANK")?,
        local_world: num("RINGLAB_LOCAL_WORLD")?,
        token,
        store,
        multi_node: env_var("RINGLAB_MULTI_NODE").is_ok_and(|v| v == "1"),
    };
    Ok((env, job))
}

/// Die with the launcher: a parent-death signal, and a check that closes the race with fork.
fn tie_to_parent() {
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag on this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    if let Ok(p) = std::env::var("RINGLAB_PARENT")
        && let Ok(p) = p.parse::<i32>()
        // SAFETY: getppid has no preconditions.
        && unsafe { libc::getppid() } != p
    {
        std::process::exit(1);
    }
}

pub fn main() -> ExitCode {
    tie_to_parent();
    let (env, job) = match read_env() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("ringlab __rank: {e}");
            return ExitCode::from(2);
        }
    };
    log::init(env.local_rank);
    let rank = env.rank;
    match run(&env, &job) {
        Ok(()) => {
            emit(&Event::Done { rank });
            ExitCode::SUCCESS
        }
        Err(message) => {
            emit(&Event::Error { rank, message });
            ExitCode::from(1)
        }
    }
}

fn run(env: &RankEnv, job: &Job) -> Result<(), String> {
    let rank = env.rank;
    let phase = |p: &str| {
        emit(&Event::Phase {
            rank,
            phase: p.to_string(),
        })
    };
    phase("spawned");
    let mut store =
        StoreClient::connect(env.store, &env.token, rank as u32).map_err(|e| e.to_string())?;
    if job.backend == super::Backend::Nccl {
        return nccl_job(env, job, &mut store, phase);
    }
    // Who talks to whom comes from the schedule itself (one element per chunk is enough).
    let shape = Schedule::build(&Spec {
        root: job.root,
        ..Spec::new(job.coll, job.algo, env.world, env.world, 1)
    })
    .map_err(|e| e.to_string())?;
    let mut comm = TcpComm::init(env, &mut store, &partners(rank, &[&shape]), phase)
        .map_err(|e: CommError| e.to_string())?;
    phase("init done");
    match job.kind {
        JobKind::Sanity => sanity(&mut comm, job, rank),
        JobKind::Bench => bench(&mut comm, &mut store, job, env),
    }
}

/// Elements in the sanity all-reduce of ones (float32).
const SANITY_COUNT: usize = 128;

/// The mean of a float32 buffer: what the torch sanity test asserts on.
fn mean_f32(bytes: &[u8]) -> f64 {
    let vals: &[f32] = bytemuck::cast_slice(bytes);
    vals.iter().map(|&v| v as f64).sum::<f64>() / vals.len().max(1) as f64
}

/// What rank `rank` of `ranks` feeds in and must get back, for `job`.
fn check_for(job: &Job, ranks: usize, rank: usize) -> Check {
    Check {
        coll: job.coll,
        op: job.op,
        dtype: job.dtype,
        ranks,
        root: job.root,
        rank,
    }
}

/// The phase a rank reports while it times one size and placement.
fn placement_label(job: &Job, size: u64, in_place: bool) -> String {
    format!(
        "{} {} B ({})",
        job.coll.name(),
        size,
        if in_place { "in-place" } else { "out-of-place" }
    )
}

fn sanity(comm: &mut TcpComm, job: &Job, rank: usize) -> Result<(), String> {
    emit(&Event::Phase {
        rank,
        phase: "all-reduce".into(),
    });
    let n = SANITY_COUNT;
    let mut buf = AlignedBuf::zeroed(n * 4);
    buf.bytes_mut()
        .copy_from_slice(bytemuck::cast_slice(&vec![1.0f32; n]));
    let spec = Spec::new(job.coll, job.algo, comm.world(), n, 4);
    let schedule = Schedule::build(&spec).map_err(|e| e.to_string())?;
    comm.run(&schedule, buf.bytes_mut(), job.dtype, job.op)
        .map_err(|e| e.to_string())?;
    let mean = mean_f32(buf.bytes());
    emit(&Event::Value { rank, value: mean });
    Ok(())
}

fn bench(
    comm: &mut TcpComm,
    store: &mut StoreClient,
    job: &Job,
    env: &RankEnv,
) -> Result<(), String> {
    let (rank, world) = (env.rank, env.world);
    let es = job.dtype.size();
    for (k, &size) in job.sizes.iter().enumerate() {
        let (count, shown) = counts(job.coll, size, es, world);
        let spec = Spec {
            root: job.root,
            ..Spec::new(job.coll, job.algo, world, count, es)
        };
        let schedule = Schedule::build(&spec).map_err(|e| e.to_string())?;
        let check = check_for(job, world, rank);
        let bytes = count * es;
        let mut send = AlignedBuf::zeroed(bytes);
        let mut recv = AlignedBuf::zeroed(bytes);
        pattern::fill(send.bytes_mut(), &check);
        store
            .barrier(&format!("size{k}"), world, Duration::from_secs(3600))
            .map_err(|e| e.to_string())?;
        for in_place in [false, true] {
            let label = placement_label(job, size, in_place);
            emit(&Event::Phase { rank, phase: label });
            let mut once = |send: &mut AlignedBuf, recv: &mut AlignedBuf| -> Result<(), String> {
                if in_place {
                    comm.run(&schedule, send.bytes_mut(), job.dtype, job.op)
                } else {
                    comm.run_from(&schedule, send.bytes(), recv.bytes_mut(), job.dtype, job.op)
                }
                .map_err(|e| e.to_string())
            };
            for _ in 0..job.warmup {
                once(&mut send, &mut recv)?;
            }
            let t0 = Instant::now();
            for _ in 0..job.iters.max(1) {
                once(&mut send, &mut recv)?;
            }
            let time_us = t0.elapsed().as_secs_f64() * 1e6 / job.iters.max(1) as f64;
            let wrong = if job.check {
                pattern::fill(send.bytes_mut(), &check);
                once(&mut send, &mut recv)?;
                let got = if in_place { send.bytes() } else { recv.bytes() };
                pattern::wrong(got, &check)
            } else {
                0
            };
            // In-place runs overwrite the input: restore it for the next placement and size.
            pattern::fill(send.bytes_mut(), &check);
            emit(&Event::Row {
                rank,
                size,
                count: shown,
                in_place,
                time_us,
                wrong,
            });
        }
    }
    Ok(())
}

/// The same job on NCCL: rank 0 makes the unique id and publishes it through the store (and,
/// as the bootstrap root, stays alive until everyone is done); every rank opens the GPU of its
/// local rank and joins.
fn nccl_job(
    env: &RankEnv,
    job: &Job,
    store: &mut StoreClient,
    phase: impl Fn(&str),
) -> Result<(), String> {
    use crate::comm::nccl::{self, Bufs, NcclRank};
    if job.devices > 0 {
        return nccl_single_process(job, store, phase);
    }
    let (rank, world) = (env.rank, env.world);
    let id = if rank == 0 {
        let id = nccl::new_id()?;
        store
            .set("nccl/id", &nccl::id_hex(&id))
            .map_err(|e| e.to_string())?;
        id
    } else {
        phase("rendezvous");
        let hex = store
            .get("nccl/id", Duration::from_secs(3600))
            .map_err(|e| e.to_string())?;
        nccl::id_from_hex(&hex)?
    };
    phase(&format!("nccl init on GPU {}", env.local_rank));
    let mut g = NcclRank::init(env.local_rank, rank, world, &id)?;
    phase("init done");
    match job.kind {
        JobKind::Sanity => {
            phase("all-reduce");
            let n = SANITY_COUNT;
            let ones: Vec<u8> = bytemuck::cast_slice(&vec![1.0f32; n]).to_vec();
            let mut buf = g.alloc(n * 4)?;
            g.upload(&ones, &mut buf)?;
            g.enqueue(
                job.coll,
                job.op,
                job.root,
                crate::collective::Dtype::F32,
                n,
                Bufs::InPlace(&mut buf),
            )?;
            let mut host = vec![0u8; n * 4];
            g.download(&buf, &mut host)?;
            let mean = mean_f32(&host);
            emit(&Event::Value { rank, value: mean });
        }
        JobKind::Bench => {
            let es = job.dtype.size();
            for (k, &size) in job.sizes.iter().enumerate() {
                let (count, shown) = counts(job.coll, size, es, world);
                let bytes = count * es;
                let check = check_for(job, world, rank);
                let mut input = vec![0u8; bytes];
                pattern::fill(&mut input, &check);
                let mut send = g.alloc(bytes)?;
                let mut recv = g.alloc(bytes)?;
                store
                    .barrier(&format!("size{k}"), world, Duration::from_secs(3600))
                    .map_err(|e| e.to_string())?;
                for in_place in [false, true] {
                    emit(&Event::Phase {
                        rank,
                        phase: placement_label(job, size, in_place),
                    });
                    g.upload(&input, &mut send)?;
                    g.synchronize()?;
                    let once =
                        |g: &mut NcclRank, send: &mut nccl::DevBuf, recv: &mut nccl::DevBuf| {
                            let bufs = if in_place {
                                Bufs::InPlace(send)
                            } else {
                                Bufs::OutOfPlace(send, recv)
                            };
                            g.enqueue(job.coll, job.op, job.root, job.dtype, count, bufs)
                        };
                    for _ in 0..job.warmup {
                        once(&mut g, &mut send, &mut recv)?;
                    }
                    g.synchronize()?;
                    let time_us = g.time(job.iters, |g| once(g, &mut send, &mut recv))?;
                    let wrong = if job.check {
                        // One more run from a fresh input, checked exactly.
                        g.upload(&input, &mut send)?;
                        once(&mut g, &mut send, &mut recv)?;
                        let mut got = vec![0u8; bytes];
                        g.download(if in_place { &send } else { &recv }, &mut got)?;
                        pattern::wrong(&got, &check)
                    } else {
                        0
                    };
                    emit(&Event::Row {
                        rank,
                        size,
                        count: shown,
                        in_place,
                        time_us,
                        wrong,
                    });
                }
            }
        }
    }
    // Rank 0 hosts NCCL's bootstrap root: nobody leaves before everybody is done.
    store
        .barrier("nccl/done", world, Duration::from_secs(3600))
        .map_err(|e| e.to_string())?;
    drop(g);
    Ok(())
}

/// NCCL single-process mode (nccl-tests' `-g N`): this process opens every GPU, makes their
/// communicators at once (ncclCommInitAll) and launches each collective on all of them inside
/// one group. Timed like nccl-tests does there: the CPU clock around the iterations, between
/// synchronizations of every stream. Rows are reported as rank 0's, #wrong summed over GPUs.
fn nccl_single_process(
    job: &Job,
    store: &mut StoreClient,
    phase: impl Fn(&str),
) -> Result<(), String> {
    use crate::comm::nccl::{self, Bufs, DevBuf, NcclRank};
    let n = job.devices;
    phase(&format!("nccl init on {n} GPUs (one process)"));
    let mut gs = NcclRank::all(n)?;
    phase("init done");
    let es = job.dtype.size();
    let sync = |gs: &[NcclRank]| gs.iter().try_for_each(NcclRank::synchronize);
    for &size in &job.sizes {
        let (count, shown) = counts(job.coll, size, es, n);
        let bytes = count * es;
        let checks: Vec<Check> = (0..n).map(|r| check_for(job, n, r)).collect();
        let inputs: Vec<Vec<u8>> = checks
            .iter()
            .map(|c| {
                let mut v = vec![0u8; bytes];
                pattern::fill(&mut v, c);
                v
            })
            .collect();
        let mut bufs: Vec<(DevBuf, DevBuf)> = gs
            .iter()
            .map(|g| Ok((g.alloc(bytes)?, g.alloc(bytes)?)))
            .collect::<Result<_, String>>()?;
        for in_place in [false, true] {
            phase(&placement_label(job, size, in_place));
            let upload = |gs: &[NcclRank], bufs: &mut [(DevBuf, DevBuf)]| {
                gs.iter()
                    .zip(bufs.iter_mut())
                    .zip(&inputs)
                    .try_for_each(|((g, b), input)| g.upload(input, &mut b.0))
            };
            let once = |gs: &mut [NcclRank], bufs: &mut [(DevBuf, DevBuf)]| {
                nccl::group(|| {
                    gs.iter_mut()
                        .zip(bufs.iter_mut())
                        .try_for_each(|(g, (s, r))| {
                            let b = if in_place {
                                Bufs::InPlace(s)
                            } else {
                                Bufs::OutOfPlace(s, r)
                            };
                            g.enqueue(job.coll, job.op, job.root, job.dtype, count, b)
                        })
                })
            };
            upload(&gs, &mut bufs)?;
            for _ in 0..job.warmup {
                once(&mut gs, &mut bufs)?;
            }
            sync(&gs)?;
            let t0 = Instant::now();
            for _ in 0..job.iters.max(1) {
                once(&mut gs, &mut bufs)?;
            }
            sync(&gs)?;
            let time_us = t0.elapsed().as_secs_f64() * 1e6 / job.iters.max(1) as f64;
            let mut wrong = 0;
            if job.check {
                upload(&gs, &mut bufs)?;
                once(&mut gs, &mut bufs)?;
                for ((g, (s, r)), c) in gs.iter().zip(&bufs).zip(&checks) {
                    let mut got = vec![0u8; bytes];
                    g.download(if in_place { s } else { r }, &mut got)?;
                    wrong += pattern::wrong(&got, c);
                }
            }
            emit(&Event::Row {
                rank: 0,
                size,
                count: shown,
                in_place,
                time_us,
                wrong,
            });
        }
    }
    drop(gs);
    store
        .barrier("nccl/done", 1, Duration::from_secs(3600))
        .map_err(|e| e.to_string())
}
