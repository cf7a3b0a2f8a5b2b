//! The measurement, written once. nccl-tests drives every collective through the same hooks
//! (allocate, fill the input, clear the output, run in place or out of place, time N
//! iterations, copy back, check); [`Rig`] is those hooks, implemented by the TCP backend and by
//! NCCL (one rank per process, or every GPU from one process), and [`bench`] and [`sanity`] are
//! the one loop all of them run.
//!
//! Timing follows nccl-tests' `BenchTime`: one untimed collective run to completion, a barrier
//! across every process of the job (the rendezvous store), then the timed iterations launched
//! back to back and completed once, measured with the host's monotonic clock around launch and
//! completion. The same clock serves every backend, so a TCP row and an NCCL row measure the
//! same thing. One difference: the `-w` warm-up iterations run after the barrier, not once
//! before all sizes, because a rank that has just slept in the store's barrier (and its vCPU)
//! needs a few collectives to be back at speed; timed at once, a 1 KiB TCP row read 10-25×
//! slower on a 2-core VM.
//!
//! The check follows nccl-tests too, with one difference that makes it stricter: before the
//! checked run the output is filled with a poison pattern (all bits set: NaN in the float
//! types, a value no crafted input can produce in the integer ones) instead of zeros, so a
//! collective that writes nothing cannot pass.

use std::time::Instant;

use crate::collective::{Algorithm, Collective, Dtype, Op, chunk_range};
use crate::lab::bench::pattern::{self, Check};
use crate::lab::{Event, Job, Phase, counts, iteration_shift, row_bytes};

/// Which of a rank's two buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The input of an out-of-place run.
    Send,
    /// The output, and both input and output of an in-place run.
    Recv,
}

pub use crate::lab::job::Fault;

/// One collective call, the same on every local rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub coll: Collective,
    /// The schedule the TCP backend executes; NCCL chooses its own (or obeys NCCL_ALGO).
    pub algo: Algorithm,
    pub op: Op,
    pub dtype: Dtype,
    pub root: usize,
    /// Elements of the whole array (nccl-tests' size column / element size).
    pub count: usize,
    /// In place: the receive buffer is input and output (at the rank's chunk for all-gather).
    pub in_place: bool,
    /// Where in both buffers this call's array starts, in bytes (nccl-tests' per-iteration
    /// shift, [`crate::lab::iteration_shift`]); staging, the checked run and the download use 0.
    pub shift: usize,
}

/// nccl-tests' per-collective hooks, for one process of a job.
pub trait Rig {
    /// Ranks in the job.
    fn world(&self) -> usize;
    /// How this rank's bytes travel (`P2P`, `SHM`, `NET`, or a mix such as `P2P+NET`), where the rig knows.
    fn transport(&self) -> Option<crate::comm::cpu::tcp::Transports> {
        None
    }
    /// The ranks whose buffers this process holds: one, or every GPU in single-process mode.
    fn ranks(&self) -> std::ops::Range<usize>;
    /// Give every local rank a send and a receive buffer of at least `bytes` (a rig may keep
    /// larger buffers it already has).
    fn alloc(&mut self, bytes: usize) -> Result<(), Fault>;
    /// Copy `data` into local rank `slot`'s buffer at byte `offset`.
    fn upload(
        &mut self,
        slot: usize,
        which: Which,
        offset: usize,
        data: &[u8],
    ) -> Result<(), Fault>;
    /// Copy the start of local rank `slot`'s buffer into `out`.
    fn download(&mut self, slot: usize, which: Which, out: &mut [u8]) -> Result<(), Fault>;
    /// Start one collective on every local rank.
    fn launch(&mut self, call: &Call) -> Result<(), Fault>;
    /// Wait until everything launched has finished; `on_progress` runs whenever some of it
    /// is seen to finish (what keeps the launcher's watchdog from calling a long row hung).
    fn complete(&mut self, on_progress: &mut dyn FnMut()) -> Result<(), Fault>;
    /// Wait for every process of the job (`name` is unique per use).
    fn barrier(&mut self, name: &str) -> Result<(), Fault>;
    /// Tear down after a fault without waiting on work that may never finish (NCCL:
    /// ncclCommAbort, never a destroy that blocks on a hung stream).
    fn abort(&mut self);
}

/// What rank `rank` of `ranks` feeds in and must get back, for `job`.
pub fn check_for(job: &Job, ranks: usize, rank: usize) -> Check {
    Check {
        coll: job.coll,
        op: job.op,
        dtype: job.dtype,
        ranks,
        root: job.root,
        rank,
    }
}

/// Whether a placement's result is checked (nccl-tests' `reportErrors`): with `-c 1`, except
/// in-place send/recv and all-to-all on NCCL, whose sends and receives of one buffer run at
/// once on a GPU and leave an undefined result (H2, L2: NVIDIA/nccl v2.28.9-1
/// `src/device/sendrecv.h:143-169`; nccl-tests v2.19.6 times both and reports N/A,
/// `src/sendrecv.cu:33-34`, `src/alltoall.cu:43-44`). ringlab's own backend delivers them
/// exactly, so they are checked there.
pub fn checked(job: &Job, in_place: bool) -> bool {
    job.check
        && !(in_place
            && job.backend == crate::lab::Backend::Nccl
            && matches!(job.coll, Collective::SendRecv | Collective::AllToAll))
}

/// The byte every poisoned output element is made of.
pub const POISON: u8 = 0xFF;

/// A host buffer of `bytes`, each byte `fill`; a failed allocation is an error, not an abort.
fn host_buf(bytes: usize, fill: u8) -> Result<Vec<u8>, Fault> {
    let mut v = Vec::new();
    v.try_reserve_exact(bytes)
        .map_err(|e| Fault::Error(format!("allocating {bytes} bytes on the host: {e}")))?;
    v.resize(bytes, fill);
    Ok(v)
}

/// Host memory one process needs for a size of `bytes` per rank, over and above the backend's
/// own buffers: per local rank its input (kept to re-stage and to check against), the poison
/// pattern and the downloaded result.
pub const HOST_COPIES: usize = 3;

/// Put the inputs where `call` reads them. In place, all-gather reads only the rank's own
/// chunk, so the rest of the buffer gets the poison; out of place, the output gets the poison
/// when `poison` is set (before a checked run).
fn stage(
    rig: &mut dyn Rig,
    call: &Call,
    inputs: &[Vec<u8>],
    poison: &[u8],
    poison_out: bool,
) -> Result<(), Fault> {
    let es = call.dtype.size();
    let (first, world) = (rig.ranks().start, rig.world());
    for (slot, input) in inputs.iter().enumerate() {
        if !call.in_place {
            rig.upload(slot, Which::Send, 0, input)?;
            if poison_out {
                rig.upload(slot, Which::Recv, 0, poison)?;
            }
        } else if call.coll == Collective::AllGather {
            rig.upload(slot, Which::Recv, 0, poison)?;
            let mine = chunk_range(call.count, world, first + slot);
            let bytes = mine.start * es..mine.end * es;
            rig.upload(slot, Which::Recv, bytes.start, &input[bytes])?;
        } else {
            rig.upload(slot, Which::Recv, 0, input)?;
        }
    }
    Ok(())
}

/// The bench sweep of `job` on `rig`: for every size, out of place then in place, one
/// [`Event::Row`] per process (time and #wrong over its local ranks). On a fault the rig is
/// aborted before the fault is returned.
pub fn bench(rig: &mut dyn Rig, job: &Job, emit: &mut dyn FnMut(Event)) -> Result<(), Fault> {
    let r = bench_inner(rig, job, emit);
    if r.is_err() {
        rig.abort();
    }
    r
}

/// Tells the launcher's watchdog that iterations still complete, at most every `BEAT`.
struct Heart {
    rank: usize,
    done: u64,
    last: Instant,
}

/// How often a long row reports that it is alive.
const BEAT: std::time::Duration = std::time::Duration::from_millis(500);

impl Heart {
    fn tick(&mut self, emit: &mut dyn FnMut(Event)) {
        self.done += 1;
        self.beat(emit);
    }

    fn beat(&mut self, emit: &mut dyn FnMut(Event)) {
        if self.last.elapsed() >= BEAT {
            self.last = Instant::now();
            emit(Event::Beat {
                rank: self.rank,
                done: self.done,
            });
        }
    }
}

fn bench_inner(rig: &mut dyn Rig, job: &Job, emit: &mut dyn FnMut(Event)) -> Result<(), Fault> {
    let world = rig.world();
    let local = rig.ranks();
    let me = local.start;
    let mut heart = Heart {
        rank: me,
        done: 0,
        last: Instant::now(),
    };
    let es = job.dtype.size();
    // Buffers sized for the sweep's real top row (after rounding), as nccl-tests allocates
    // them once: every smaller row's iterations walk through them.
    let top = job
        .sizes
        .iter()
        .map(|&s| row_bytes(job.coll, s, es, world) as usize)
        .max()
        .unwrap_or(0);
    for (k, &size) in job.sizes.iter().enumerate() {
        let (count, shown) = counts(job.coll, size, es, world);
        let bytes = count * es;
        emit(Event::Phase {
            rank: me,
            phase: Phase::Preparing {
                coll: job.coll,
                size,
            },
        });
        rig.alloc(top.max(bytes))?;
        let checks: Vec<Check> = local.clone().map(|r| check_for(job, world, r)).collect();
        let inputs: Vec<Vec<u8>> = checks
            .iter()
            .map(|c| {
                let mut v = host_buf(bytes, 0)?;
                pattern::fill(&mut v, c);
                Ok(v)
            })
            .collect::<Result<_, Fault>>()?;
        let poison = host_buf(bytes, POISON)?;
        rig.barrier(&format!("size{k}"))?;
        for in_place in [false, true] {
            emit(Event::Phase {
                rank: me,
                phase: Phase::Timing {
                    coll: job.coll,
                    size,
                    in_place,
                },
            });
            let call = Call {
                coll: job.coll,
                algo: job.algo_at(bytes as u64),
                op: job.op,
                dtype: job.dtype,
                root: job.root,
                count,
                in_place,
                shift: 0,
            };
            // Iteration i of the warm-up and of the timed loop runs at nccl-tests' shift.
            let at = |i: usize| Call {
                shift: iteration_shift(bytes, top, i),
                ..call
            };
            stage(rig, &call, &inputs, &poison, false)?;
            // nccl-tests' BenchTime: one untimed collective to completion, then a barrier, so
            // no rank starts its clock while another is still busy with the last size.
            rig.launch(&call)?;
            rig.complete(&mut || heart.beat(emit))?;
            rig.barrier(&format!("size{k}/{}", u8::from(in_place)))?;
            let mut runs = warm_up_and_time(rig, job, &at, &mut heart, emit)?;
            let (time_us, spread) = median_and_spread(&mut runs);
            let wrong = if checked(job, in_place) {
                stage(rig, &call, &inputs, &poison, true)?;
                rig.launch(&call)?;
                rig.complete(&mut || heart.beat(emit))?;
                Some(count_wrong(rig, &checks, bytes)?)
            } else {
                None
            };
            emit(Event::Row {
                rank: me,
                size,
                count: shown,
                in_place,
                time_us,
                wrong,
                spread,
            });
        }
    }
    Ok(())
}

/// The warm-up (after the barrier: nccl-tests runs it once before all sizes, but a rank that
/// has just slept in the store's barrier, and its vCPU, need a few collectives to be back at
/// speed, and those must not be timed), then the timed loop `-R` times: microseconds per
/// iteration of each run. Iteration i runs `at(i)`.
fn warm_up_and_time(
    rig: &mut dyn Rig,
    job: &Job,
    at: &dyn Fn(usize) -> Call,
    heart: &mut Heart,
    emit: &mut dyn FnMut(Event),
) -> Result<Vec<f64>, Fault> {
    for i in 0..job.warmup {
        rig.launch(&at(i))?;
        heart.tick(emit);
    }
    rig.complete(&mut || heart.beat(emit))?;
    let iters = job.iters.max(1);
    // `-R K`: the timed loop K times; the row is the median, with its spread.
    let mut runs = Vec::with_capacity(job.repeat.max(1));
    for _ in 0..job.repeat.max(1) {
        let t0 = Instant::now();
        for i in 0..iters {
            rig.launch(&at(i))?;
            heart.tick(emit);
        }
        rig.complete(&mut || heart.beat(emit))?;
        runs.push(t0.elapsed().as_secs_f64() * 1e6 / iters as f64);
    }
    Ok(runs)
}

/// Wrong elements in the receive buffers of this process's ranks (`bytes` each), against
/// each rank's expected pattern.
fn count_wrong(rig: &mut dyn Rig, checks: &[Check], bytes: usize) -> Result<u64, Fault> {
    let mut got = host_buf(bytes, 0)?;
    let mut n = 0;
    for (slot, c) in checks.iter().enumerate() {
        rig.download(slot, Which::Recv, &mut got)?;
        n += pattern::wrong(&got, c);
    }
    Ok(n)
}

/// The median of `runs`, and (slowest − fastest) / median where there is more than one.
pub fn median_and_spread(runs: &mut [f64]) -> (f64, Option<f64>) {
    runs.sort_by(f64::total_cmp);
    let n = runs.len();
    if n == 0 {
        return (f64::NAN, None);
    }
    let median = if n % 2 == 1 {
        runs[n / 2]
    } else {
        (runs[n / 2 - 1] + runs[n / 2]) / 2.0
    };
    let spread = (n > 1 && median > 0.0).then(|| (runs[n - 1] - runs[0]) / median);
    (median, spread)
}

/// A spread over which one run of a row says little: the slowest run took more than half
/// the median longer than the fastest.
pub const WIDE_SPREAD: f64 = 0.5;

/// Elements in the sanity all-reduce of ones (float32).
pub const SANITY_COUNT: usize = 128;

/// The mean of a float32 buffer: what the torch sanity test asserts on.
pub fn mean_f32(bytes: &[u8]) -> f64 {
    let vals: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    vals.iter().map(|&v| v as f64).sum::<f64>() / vals.len().max(1) as f64
}

/// The classic sanity check on `rig`: an all-reduce (sum) of ones in place; every local rank
/// reports the mean of what it got back ([`Event::Value`]), which must be the world size.
pub fn sanity(rig: &mut dyn Rig, emit: &mut dyn FnMut(Event)) -> Result<(), Fault> {
    let r = sanity_inner(rig, emit);
    if r.is_err() {
        rig.abort();
    }
    r
}

fn sanity_inner(rig: &mut dyn Rig, emit: &mut dyn FnMut(Event)) -> Result<(), Fault> {
    let local = rig.ranks();
    emit(Event::Phase {
        rank: local.start,
        phase: Phase::Sanity,
    });
    let n = SANITY_COUNT;
    let ones: Vec<u8> = std::iter::repeat_n(1.0f32.to_ne_bytes(), n)
        .flatten()
        .collect();
    rig.alloc(n * 4)?;
    for slot in 0..local.len() {
        rig.upload(slot, Which::Recv, 0, &ones)?;
    }
    rig.launch(&Call {
        coll: Collective::AllReduce,
        algo: Algorithm::Ring,
        op: Op::Sum,
        dtype: Dtype::F32,
        root: 0,
        count: n,
        in_place: true,
        shift: 0,
    })?;
    rig.complete(&mut || {})?;
    let mut got = vec![0u8; n * 4];
    for (slot, rank) in local.enumerate() {
        rig.download(slot, Which::Recv, &mut got)?;
        emit(Event::Value {
            rank,
            value: mean_f32(&got),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::simulate::expected_at;
    use crate::lab::JobKind;

    /// A rig for one process that holds every rank of the job and computes each collective
    /// from the definitions, with switches for the faults the loop must handle.
    struct Fake {
        world: usize,
        bufs: Vec<(Vec<u8>, Vec<u8>)>,
        /// Launches so far; fail the launch with this number.
        launches: usize,
        fail_at: Option<usize>,
        /// Compute nothing: the output keeps whatever was there.
        lazy: bool,
        aborted: bool,
        log: Vec<String>,
        /// (count, shift) of every launch.
        shifts: Vec<(usize, usize)>,
    }

    impl Fake {
        fn new(world: usize) -> Self {
            Self {
                world,
                bufs: Vec::new(),
                launches: 0,
                fail_at: None,
                lazy: false,
                aborted: false,
                log: Vec::new(),
                shifts: Vec::new(),
            }
        }
    }

    impl Rig for Fake {
        fn world(&self) -> usize {
            self.world
        }
        fn ranks(&self) -> std::ops::Range<usize> {
            0..self.world
        }
        fn alloc(&mut self, bytes: usize) -> Result<(), Fault> {
            self.bufs = vec![(vec![0; bytes], vec![0; bytes]); self.world];
            Ok(())
        }
        fn upload(&mut self, s: usize, w: Which, off: usize, d: &[u8]) -> Result<(), Fault> {
            let b = match w {
                Which::Send => &mut self.bufs[s].0,
                Which::Recv => &mut self.bufs[s].1,
            };
            b[off..off + d.len()].copy_from_slice(d);
            Ok(())
        }
        fn download(&mut self, s: usize, w: Which, out: &mut [u8]) -> Result<(), Fault> {
            let b = match w {
                Which::Send => &self.bufs[s].0,
                Which::Recv => &self.bufs[s].1,
            };
            out.copy_from_slice(&b[..out.len()]);
            Ok(())
        }
        fn launch(&mut self, c: &Call) -> Result<(), Fault> {
            self.launches += 1;
            self.log.push("launch".into());
            self.shifts.push((c.count, c.shift));
            if self.fail_at == Some(self.launches) {
                return Err(Fault::Error(
                    "ncclAllReduce failed: ncclUnhandledCudaError (1)".into(),
                ));
            }
            if self.lazy {
                return Ok(());
            }
            assert_eq!(c.dtype, Dtype::F32, "the fake computes f32 only");
            let n = self.world;
            let ins: Vec<Vec<f32>> = self
                .bufs
                .iter()
                .map(|(s, r)| {
                    let src = if c.in_place { r } else { s };
                    src[c.shift..c.shift + c.count * 4]
                        .chunks_exact(4)
                        .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                        .collect::<Vec<f32>>()
                })
                .collect();
            for (rank, (_, r)) in self.bufs.iter_mut().enumerate() {
                let out: &mut [f32] =
                    bytemuck::cast_slice_mut(&mut r[c.shift..c.shift + c.count * 4]);
                for (i, o) in out.iter_mut().enumerate() {
                    if let Some(v) =
                        expected_at(c.op, c.coll, n, c.root, c.count, rank, i, |r, i| ins[r][i])
                    {
                        *o = v;
                    }
                }
            }
            Ok(())
        }
        fn complete(&mut self, _: &mut dyn FnMut()) -> Result<(), Fault> {
            self.log.push("complete".into());
            Ok(())
        }
        fn barrier(&mut self, name: &str) -> Result<(), Fault> {
            self.log.push(format!("barrier {name}"));
            Ok(())
        }
        fn abort(&mut self) {
            self.aborted = true;
        }
    }

    fn job(coll: Collective) -> Job {
        Job {
            kind: JobKind::Bench,
            coll,
            sizes: vec![4096],
            iters: 3,
            warmup: 2,
            ..Job::sanity()
        }
    }

    fn rows(rig: &mut Fake, job: &Job) -> (Result<(), Fault>, Vec<Event>) {
        let mut evs = Vec::new();
        let r = bench(rig, job, &mut |e| evs.push(e));
        (
            r,
            evs.into_iter()
                .filter(|e| matches!(e, Event::Row { .. }))
                .collect(),
        )
    }

    #[test]
    fn a_correct_backend_checks_clean_for_every_collective_in_both_placements() {
        for coll in Collective::ALL {
            let mut rig = Fake::new(3);
            let (r, rows) = rows(&mut rig, &job(coll));
            r.expect("runs");
            assert_eq!(rows.len(), 2, "{coll:?}");
            for row in rows {
                let Event::Row { wrong, .. } = row else {
                    unreachable!()
                };
                assert_eq!(wrong, Some(0), "{coll:?}");
            }
        }
    }

    #[test]
    fn repeated_rows_report_the_median_and_the_spread() {
        assert_eq!(median_and_spread(&mut [3.0]), (3.0, None));
        let (m, s) = median_and_spread(&mut [90.0, 904.0, 100.0, 110.0, 95.0]);
        assert_eq!(m, 100.0);
        assert!((s.expect("spread") - 8.14).abs() < 1e-9);
        let (m, s) = median_and_spread(&mut [1.0, 3.0]);
        assert_eq!((m, s), (2.0, Some(1.0)));
        // The loop runs the timed section once per repeat.
        let mut rig = Fake::new(2);
        let j = Job {
            iters: 4,
            warmup: 0,
            repeat: 3,
            ..job(Collective::AllReduce)
        };
        let (r, rows) = rows(&mut rig, &j);
        r.expect("runs");
        // Per placement: the untimed run, 3 × 4 timed, the checked run.
        assert_eq!(rig.shifts.len(), 2 * (1 + 12 + 1));
        for row in rows {
            let Event::Row { spread, .. } = row else {
                unreachable!()
            };
            assert!(spread.is_some_and(|s| s >= 0.0), "{spread:?}");
        }
    }

    #[test]
    fn small_rows_walk_the_top_rows_buffers_and_the_checked_run_starts_at_zero() {
        let mut rig = Fake::new(2);
        let j = Job {
            sizes: vec![1024, 4096],
            iters: 5,
            warmup: 1,
            ..job(Collective::AllReduce)
        };
        let (r, rows) = rows(&mut rig, &j);
        r.expect("runs");
        assert_eq!(rows.len(), 4);
        // Both placements of 1 KiB: the untimed run at 0, warm-up 0, timed 0, 1K, 2K, 3K, 0,
        // then the checked run at 0 (nccl-tests' iter 0); the 4 KiB row never moves.
        let row_1k = [0, 0, 0, 1024, 2048, 3072, 0, 0];
        let want: Vec<(usize, usize)> = row_1k
            .iter()
            .chain(row_1k.iter())
            .map(|&s| (256, s))
            .chain(std::iter::repeat_n((1024, 0), 16))
            .collect();
        assert_eq!(rig.shifts, want);
        assert!(rig.bufs[0].0.len() >= 4096, "buffers sized for the top row");
    }

    #[test]
    fn a_collective_that_writes_nothing_cannot_pass() {
        for coll in Collective::ALL {
            let mut rig = Fake::new(2);
            rig.lazy = true;
            let (r, rows) = rows(&mut rig, &job(coll));
            r.expect("runs");
            let Event::Row { wrong, .. } = rows[0] else {
                unreachable!()
            };
            // Out of place, the poisoned output is left as it was: every defined element is
            // wrong (1024 f32 per rank; reduce defines only the root's).
            let want = match coll {
                Collective::Reduce => 1024,
                Collective::ReduceScatter => 1024,
                _ => 2048,
            };
            assert_eq!(wrong, Some(want), "{coll:?} out of place");
        }
    }

    #[test]
    fn the_timed_loop_is_timed_like_nccl_tests() {
        let mut rig = Fake::new(2);
        let j = job(Collective::AllReduce);
        rows(&mut rig, &j).0.expect("runs");
        // Out of place: the untimed collective and its completion, the barrier, 2 warm-ups,
        // then 3 timed launches completed once, then the checked run.
        let start = rig
            .log
            .iter()
            .position(|l| l == "barrier size0")
            .expect("size barrier");
        let want = [
            "barrier size0",
            "launch",
            "complete",
            "barrier size0/0",
            "launch",
            "launch",
            "complete",
            "launch",
            "launch",
            "launch",
            "complete",
            "launch",
            "complete",
        ];
        assert_eq!(&rig.log[start..start + want.len()], want);
    }

    #[test]
    fn an_error_aborts_the_backend_and_is_reported_as_an_error_not_a_hang() {
        let mut rig = Fake::new(2);
        rig.fail_at = Some(4);
        let (r, rows) = rows(&mut rig, &job(Collective::AllReduce));
        let e = r.expect_err("fails");
        assert!(!e.is_hang(), "{e}");
        assert!(e.to_string().contains("ncclUnhandledCudaError"), "{e}");
        assert!(rig.aborted, "the communicator is aborted, not destroyed");
        assert!(rows.is_empty(), "no row for a failed size");
        assert!(Fault::Hang("x".into()).to_string().starts_with("HANG"));
    }

    /// H2, L1, L2: what nccl-tests does not check, ringlab does not count: -c 0 rows, and on
    /// NCCL in-place send/recv and all-to-all (timed all the same, never skipped).
    #[test]
    fn unchecked_rows_carry_no_wrong_count_and_still_run() {
        for coll in Collective::ALL {
            let mut rig = Fake::new(2);
            let (r, rows) = rows(
                &mut rig,
                &Job {
                    check: false,
                    ..job(coll)
                },
            );
            r.expect("runs");
            assert_eq!(rows.len(), 2, "{coll:?}");
            for row in &rows {
                let Event::Row { wrong, time_us, .. } = row else {
                    unreachable!()
                };
                assert_eq!(*wrong, None, "{coll:?}: -c 0 counts nothing");
                assert!(time_us.is_finite(), "{coll:?}: timed");
            }
        }
        let nccl = |coll| Job {
            backend: crate::lab::Backend::Nccl,
            ..job(coll)
        };
        for coll in [Collective::SendRecv, Collective::AllToAll] {
            assert!(checked(&nccl(coll), false), "{coll:?} out of place");
            assert!(!checked(&nccl(coll), true), "{coll:?} in place on NCCL");
            assert!(
                checked(&job(coll), true),
                "{coll:?} in place on ringlab's own backend"
            );
        }
        assert!(checked(&nccl(Collective::AllReduce), true));
    }

    #[test]
    fn sanity_reports_the_world_size_from_every_local_rank() {
        let mut rig = Fake::new(2);
        let mut evs = Vec::new();
        sanity(&mut rig, &mut |e| evs.push(e)).expect("runs");
        let values: Vec<f64> = evs
            .iter()
            .filter_map(|e| match e {
                Event::Value { value, .. } => Some(*value),
                _ => None,
            })
            .collect();
        assert_eq!(values, vec![2.0, 2.0]);
    }
}
