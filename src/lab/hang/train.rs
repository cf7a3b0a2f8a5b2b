//! A training loop of collectives, as a real job would call them: every step, two tensor-
//! parallel all-reduces (after attention and after the MLP) and one data-parallel all-reduce of
//! the gradients. It is what run-time hangs happen in: thousands of steps in, one rank skips a
//! collective, calls it with another size, stops, or dies, and the others wait.
//!
//! Before each collective every rank tells its ring neighbours its sequence number and what it
//! is calling: the lab's stand-in for the bytes NCCL's kernels exchange. The ranks behave as
//! NCCL does, which compares nothing across ranks: a neighbour whose call differs is not an
//! error, the rank enters its own call and waits in it (the launcher's watchdog then calls the
//! hang, and the flight recorders show the two calls side by side). A neighbour that never
//! sends is waited for likewise until the rank's own timeout.
//!
//! Each rank keeps a flight recorder ([`crate::lab::hang::trace::Recorder`]) and, with a trace folder,
//! writes it to `rank<r>.json` when a collective is called, starts and completes, so its last
//! state is there even when the process is then stopped or killed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::collective::{Algorithm, Collective, Dtype, Op, Schedule, Spec};
use crate::comm::cpu::reduce::AlignedBuf;
use crate::comm::cpu::store::StoreClient;
use crate::comm::cpu::tcp::{RankEnv, TcpComm, partners};
use crate::lab::Phase;
use crate::lab::hang::trace::{Call, Recorder};
use crate::lab::job::Fault;
use crate::lab::{Event, Job};

/// What the loop runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainSpec {
    pub steps: usize,
    /// Bytes of each tensor-parallel all-reduce (the activations of the step's tokens).
    pub tp_bytes: u64,
    /// Bytes of the data-parallel all-reduce (the gradients).
    pub dp_bytes: u64,
    /// A fault one rank stages.
    #[serde(default)]
    pub fault: Option<Injected>,
    /// Where each rank keeps its flight recorder (`rank<r>.json`).
    #[serde(default)]
    pub trace_dir: Option<String>,
    /// Each step's own work before its collectives (forward and backward on the GPU), in
    /// milliseconds: the rank waits that long, as a CPU waits on its GPU. 0: none.
    #[serde(default)]
    pub compute_ms: u64,
}

/// How much slower a straggler's work is ([`FaultKind::Straggle`]): a GPU throttled to a third
/// of its clocks, a noisy neighbour, a slow data loader.
pub const STRAGGLE_FACTOR: u64 = 3;

/// What goes wrong, on which rank, at which step (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Injected {
    pub kind: FaultKind,
    pub rank: usize,
    pub step: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The rank skips the step's MLP all-reduce (`if rank != 2:` around it).
    SkipCollective,
    /// The rank's MLP all-reduce is half the size (an uneven last batch).
    WrongSize,
    /// The rank stops itself (SIGSTOP) inside the step's gradient all-reduce.
    Stop,
    /// The rank dies before the step's gradient all-reduce (out of memory).
    Exit,
    /// From this step on the rank's own work takes [`STRAGGLE_FACTOR`] times as long.
    Straggle,
}

/// The collectives of one step, in order: what the program calls them, and their bytes.
pub fn step_calls(spec: &TrainSpec) -> [(&'static str, u64); 3] {
    [
        ("tp attention", spec.tp_bytes),
        ("tp mlp", spec.tp_bytes),
        ("dp gradients", spec.dp_bytes),
    ]
}

/// The header a rank sends its neighbours before a collective.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Header {
    seq: u64,
    call: Call,
    label: String,
}

fn call_of(count: u64) -> Call {
    Call {
        coll: Collective::AllReduce.name().into(),
        algo: Algorithm::Ring.name().into(),
        count,
        dtype: Dtype::F32.name().into(),
        op: Op::Sum.name().into(),
        root: -1,
        shape: None,
    }
}

/// What a rank whose neighbour called something else is waiting on, in the terms PyTorch's
/// TORCH_DISTRIBUTED_DEBUG=DETAIL check uses (the rank's own timeout says it, if the
/// watchdog has not already).
pub fn mismatch_report(
    me: usize,
    mine: &(u64, Call, String),
    peer: usize,
    theirs: &(u64, Call, String),
) -> String {
    format!(
        "collective mismatch: rank {peer} is at collective #{} {} ({}), rank {me} at #{} {} ({}). \
         Every rank must call the same collectives in the same order with the same sizes",
        theirs.0,
        theirs.1.describe(),
        theirs.2,
        mine.0,
        mine.1.describe(),
        mine.2
    )
}

/// What a rank does when its neighbour's call is not its own: what NCCL does. NCCL checks a
/// call against nothing but itself (v2.28.9 src/misc/argcheck.cc:45 `ArgsCheck`: root, type,
/// op, pointers); the one cross-rank size check, NET/Socket's `message truncated`
/// (src/transport/net_socket.cc:565), fires only when a sender's chunk over the socket network
/// is larger than what its receiver posted, on the Simple protocol. At the lab's sizes (16 to
/// 64 KiB, where NCCL's tuner picks LL) nothing checks: the kernels spin on flags that never
/// come. So the rank waits inside its call until `wait` (the launcher's watchdog, set to the
/// same timeout, normally ends it first) and then reports a hang.
fn wait_as_nccl(wait: Duration, what: &str) -> Fault {
    std::thread::sleep(wait);
    Fault::Hang(format!("no progress in {}s: {what}", wait.as_secs()))
}

/// The flight recorder, journaled on disk as the rank runs when there is a trace folder
/// (one appended line per event, [`crate::lab::hang::trace::JournalFile`]).
enum Journal {
    Memory(Recorder),
    File(crate::lab::hang::trace::JournalFile),
}

/// A journal write's result, its error said as the flight recorder's.
fn wrote<T>(r: std::io::Result<T>) -> Result<T, Fault> {
    r.map_err(|e| Fault::Error(format!("writing the flight recorder: {e}")))
}

impl Journal {
    fn io(path: &Path) -> impl Fn(std::io::Error) -> Fault + '_ {
        move |e| {
            Fault::Error(format!(
                "writing the flight recorder {}: {e}",
                path.display()
            ))
        }
    }

    fn new(rec: Recorder, path: Option<PathBuf>) -> Result<Self, Fault> {
        match path {
            None => Ok(Self::Memory(rec)),
            Some(p) => crate::lab::hang::trace::JournalFile::create(&p, rec)
                .map(Self::File)
                .map_err(Self::io(&p)),
        }
    }

    fn schedule(&mut self, call: Call, label: String) -> Result<u64, Fault> {
        match self {
            Self::Memory(r) => Ok(r.schedule(call, Some(label))),
            Self::File(j) => wrote(j.schedule(call, Some(label))),
        }
    }

    fn start(&mut self, seq: u64) -> Result<(), Fault> {
        match self {
            Self::Memory(r) => {
                r.start(seq);
                Ok(())
            }
            Self::File(j) => wrote(j.start(seq)),
        }
    }

    fn complete(&mut self, seq: u64) -> Result<(), Fault> {
        match self {
            Self::Memory(r) => {
                r.complete(seq);
                Ok(())
            }
            Self::File(j) => wrote(j.complete(seq)),
        }
    }

    fn next_seq(&self) -> u64 {
        match self {
            Self::Memory(r) => r.next_seq(),
            Self::File(j) => j.recorder().next_seq(),
        }
    }
}

/// A training job's rank: its loop ([`run`]), from the job's `train` spec.
pub fn run_job(
    env: &RankEnv,
    job: &Job,
    store: &mut StoreClient,
    phase: &dyn Fn(Phase),
    emit: &mut dyn FnMut(Event),
) -> Result<(), Fault> {
    let spec = job
        .train
        .as_ref()
        .ok_or_else(|| Fault::Error("a training job without its loop (job.train)".into()))?;
    run(env, job, spec, store, phase, emit)
}

/// Run the loop on this rank. `emit` reports phases, progress and the final value.
pub fn run(
    env: &RankEnv,
    job: &Job,
    spec: &TrainSpec,
    store: &mut StoreClient,
    phase: impl Fn(Phase),
    emit: &mut dyn FnMut(Event),
) -> Result<(), Fault> {
    let err = |e: &dyn std::fmt::Display| Fault::Error(e.to_string());
    let rank = env.rank;
    let world = env.world;
    let es = Dtype::F32.size();
    let shape = ring(world, world).map_err(|e| err(&e))?;
    let neighbours = partners(rank, &[&shape]);
    let mut comm =
        TcpComm::init(env, store, &neighbours, |s| phase(Phase::Setup(s))).map_err(|e| err(&e))?;
    emit(Event::Transport {
        rank,
        transport: comm.transport_set(),
    });
    let mut journal = Journal::new(
        // Eight steps' worth: enough to line the ranks up around where one diverged.
        Recorder::new(rank, world, 24),
        spec.trace_dir
            .as_deref()
            .map(|d| Path::new(d).join(format!("rank{rank}.jsonl"))),
    )?;
    let wait = Duration::from_secs(job.timeout_s.max(1));
    let mut schedules: std::collections::HashMap<usize, Schedule> = Default::default();
    let mut buf = AlignedBuf::default();
    let mut last_value = 0.0;
    for step in 1..=spec.steps {
        emit(Event::Step {
            rank,
            step,
            steps: spec.steps,
        });
        std::thread::sleep(work(spec, rank, step));
        for (label, bytes) in step_calls(spec) {
            let fault = spec
                .fault
                .filter(|f| f.rank == rank && f.step == step)
                .map(|f| f.kind);
            let Some(count) = staged_count(
                fault,
                label,
                step,
                rank,
                ((bytes as usize / es).max(world), world),
            ) else {
                continue;
            };
            let call = call_of(count as u64);
            let label = format!("step {step} {label}");
            let seq = journal.schedule(call.clone(), label.clone())?;
            // The header check: every neighbour must be at the same collective.
            let mine = Header {
                seq,
                call: call.clone(),
                label: label.clone(),
            };
            // Started as NCCL's kernel starts: at once, then waiting inside for the
            // neighbours (PyTorch's recorder marks it started when the kernel runs).
            journal.start(seq)?;
            let differs = exchange_headers(&mut comm, &neighbours, &mine, wait)?;
            if let Some((peer, theirs)) = differs {
                return Err(mismatch(rank, mine, peer, theirs, wait));
            }
            if fault == Some(FaultKind::Stop) && label.ends_with("dp gradients") {
                // Staged silently, as a debugger or a job scheduler stops a process: the
                // evidence (state T in /proc, the flight recorders) has to find it.
                let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
            }
            let schedule = match schedules.entry(count) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(ring(world, count).map_err(|e| err(&e))?)
                }
            };
            // The values only matter for the last collective, which is checked: ones summed
            // over the world. Before it the buffer holds whatever the last sum left.
            let last = step == spec.steps && label.ends_with("dp gradients");
            last_value = all_reduce(&mut comm, schedule, &mut buf, count, last)
                .map_err(|e| err(&format!("collective #{seq} ({label}): {e}")))?;
            journal.complete(seq)?;
        }
        emit(Event::Beat {
            rank,
            done: journal.next_seq() - 1,
        });
    }
    // The sanity of the last collective: ones summed over the world.
    emit(Event::Value {
        rank,
        value: last_value,
    });
    Ok(())
}

/// The rank's own work in `step`: the spec's compute time, [`STRAGGLE_FACTOR`] times as long on
/// a straggler from its fault's step on.
pub fn work(spec: &TrainSpec, rank: usize, step: usize) -> Duration {
    let slow = spec
        .fault
        .is_some_and(|f| f.kind == FaultKind::Straggle && f.rank == rank && step >= f.step);
    Duration::from_millis(spec.compute_ms * if slow { STRAGGLE_FACTOR } else { 1 })
}

/// The ring all-reduce of `count` f32 elements on `world` ranks.
fn ring(world: usize, count: usize) -> Result<Schedule, crate::collective::ScheduleError> {
    Schedule::build(&Spec::new(
        Collective::AllReduce,
        Algorithm::Ring,
        world,
        count,
        Dtype::F32.size(),
    ))
}

/// A neighbour at another collective: NCCL compares nothing across ranks, so each launches its
/// own call and waits for bytes that never line up (see `wait_as_nccl`).
fn mismatch(rank: usize, mine: Header, peer: usize, theirs: Header, wait: Duration) -> Fault {
    wait_as_nccl(
        wait,
        &mismatch_report(
            rank,
            &(mine.seq, mine.call, mine.label),
            peer,
            &(theirs.seq, theirs.call, theirs.label),
        ),
    )
}

/// The element count this rank uses for the call `label` at `step` (`count` unless a staged
/// fault shrinks it); None where the rank skips the call. A staged exit ends the process here.
fn staged_count(
    fault: Option<FaultKind>,
    label: &str,
    step: usize,
    rank: usize,
    (count, world): (usize, usize),
) -> Option<usize> {
    match (fault, label) {
        (Some(FaultKind::SkipCollective), "tp mlp") => None,
        (Some(FaultKind::WrongSize), "tp mlp") => Some((count / 2).max(world)),
        (Some(FaultKind::Exit), "dp gradients") => {
            crate::comm::emu::log::warn(&format!(
                "step {step}: RuntimeError: out of memory allocating the gradient buckets (staged); rank {rank} exits"
            ));
            std::process::exit(1);
        }
        _ => Some(count),
    }
}

/// Send `mine` to every neighbour and read theirs: the first neighbour whose header differs,
/// if any. A neighbour that does not answer in `wait` is a hang.
fn exchange_headers(
    comm: &mut TcpComm,
    neighbours: &[usize],
    mine: &Header,
    wait: Duration,
) -> Result<Option<(usize, Header)>, Fault> {
    let err = |e: &dyn std::fmt::Display| Fault::Error(e.to_string());
    let payload = serde_json::to_vec(mine).map_err(|e| err(&e))?;
    let replies = comm
        .exchange_frames(neighbours, &payload, wait)
        .map_err(|e| {
            if matches!(&e, crate::comm::cpu::tcp::CommError::Io { source, .. } if matches!(source.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)) {
                Fault::Hang(format!("collective #{} ({}): {e}", mine.seq, mine.label))
            } else {
                err(&e)
            }
        })?;
    let mut differs = None;
    for (peer, frame) in replies {
        let theirs: Header = serde_json::from_slice(&frame)
            .map_err(|e| err(&format!("rank {peer}'s header: {e}")))?;
        if theirs != *mine && differs.is_none() {
            differs = Some((peer, theirs));
        }
    }
    Ok(differs)
}

/// Sum `count` f32 elements of `buf` over the ranks (ones where `ones`, else what the buffer
/// holds); the first element of the result.
fn all_reduce(
    comm: &mut TcpComm,
    schedule: &Schedule,
    buf: &mut AlignedBuf,
    count: usize,
    ones: bool,
) -> Result<f64, crate::comm::cpu::tcp::CommError> {
    let es = Dtype::F32.size();
    buf.reserve_len(count * es);
    let data = &mut buf.bytes_mut()[..count * es];
    if ones {
        for x in data.chunks_exact_mut(es) {
            x.copy_from_slice(&1.0f32.to_le_bytes());
        }
    }
    comm.run(schedule, data, Dtype::F32, Op::Sum)?;
    Ok(f64::from(f32::from_le_bytes([
        data[0], data[1], data[2], data[3],
    ])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_two_tp_all_reduces_and_one_dp() {
        let spec = TrainSpec {
            steps: 3,
            tp_bytes: 64 << 10,
            dp_bytes: 1 << 20,
            fault: None,
            trace_dir: None,
            compute_ms: 0,
        };
        let calls = step_calls(&spec);
        assert_eq!(calls.iter().filter(|(l, _)| l.starts_with("tp")).count(), 2);
        assert_eq!(calls[2], ("dp gradients", 1 << 20));
    }

    #[test]
    fn a_straggler_works_three_times_as_long_from_its_step_on() {
        let spec: TrainSpec = serde_json::from_str(
            r#"{"steps":9,"tp_bytes":1,"dp_bytes":1,"compute_ms":20,"fault":{"kind":"straggle","rank":1,"step":4}}"#,
        )
        .expect("spec");
        assert_eq!(work(&spec, 0, 5), Duration::from_millis(20));
        assert_eq!(work(&spec, 1, 3), Duration::from_millis(20));
        assert_eq!(work(&spec, 1, 4), Duration::from_millis(60));
        assert_eq!(work(&spec, 1, 9), Duration::from_millis(60));
    }

    #[test]
    fn the_spec_reads_from_json_and_refuses_unknown_faults() {
        let s: TrainSpec = serde_json::from_str(
            r#"{"steps":200,"tp_bytes":65536,"dp_bytes":1048576,"fault":{"kind":"skip-collective","rank":2,"step":57}}"#,
        )
        .expect("parses");
        assert_eq!(
            s.fault,
            Some(Injected {
                kind: FaultKind::SkipCollective,
                rank: 2,
                step: 57
            })
        );
        assert!(
            serde_json::from_str::<TrainSpec>(
                r#"{"steps":1,"tp_bytes":1,"dp_bytes":1,"fault":{"kind":"explode","rank":0,"step":1}}"#
            )
            .is_err()
        );
    }

    #[test]
    fn the_mismatch_report_names_both_ranks_and_collectives() {
        let r = mismatch_report(
            0,
            &(57, call_of(16384), "step 19 tp mlp".into()),
            3,
            &(57, call_of(262144), "step 19 dp gradients".into()),
        );
        assert!(
            r.contains(
                "rank 3 is at collective #57 all-reduce 262144 × f32 sum (step 19 dp gradients)"
            ),
            "{r}"
        );
        assert!(
            r.contains("rank 0 at #57 all-reduce 16384 × f32 sum (step 19 tp mlp)"),
            "{r}"
        );
    }
}
