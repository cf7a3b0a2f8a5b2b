//! Experiments composed from the comm layer, returning results as data: the same structs the
//! TUI shows and `--json` prints.

pub mod bench;
pub mod doctor;
pub mod fork;
pub mod hang;
pub mod job;

use serde::{Deserialize, Serialize};

use crate::collective::{Algorithm, Collective, Dtype, Op};

/// This very binary, to start ranks and helpers from. `/proc/self/exe` still names the running
/// program when the file on disk has been replaced (a rebuild during a run).
pub fn self_exe() -> std::io::Result<std::path::PathBuf> {
    let p = std::path::PathBuf::from("/proc/self/exe");
    if p.exists() {
        Ok(p)
    } else {
        std::env::current_exe()
    }
}

/// What every rank of a job runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub kind: JobKind,
    pub coll: Collective,
    /// The TCP backend's schedule (NCCL chooses its own, or obeys NCCL_ALGO); with `tuned`,
    /// the schedule of calls the tuner leaves alone ([`Job::algo_at`]).
    pub algo: Algorithm,
    /// No `--algo` given: the tuner picks the schedule of each call by its size
    /// ([`crate::collective::tune`]).
    #[serde(default)]
    pub tuned: bool,
    pub op: Op,
    pub dtype: Dtype,
    pub root: usize,
    /// nccl-tests' size column, bytes: the whole array for all-gather and reduce-scatter.
    pub sizes: Vec<u64>,
    pub iters: usize,
    pub warmup: usize,
    pub check: bool,
    /// What carries the bytes.
    #[serde(default)]
    pub backend: Backend,
    /// NCCL single-process mode: the one rank process drives this many GPUs (0: one GPU per
    /// rank process).
    #[serde(default)]
    pub devices: usize,
    /// NCCL: local ranks sharing one GPU (each made a host of its own with NCCL_HOSTID, so
    /// NCCL accepts them and moves their bytes over NET/Socket). 1: one GPU per rank.
    #[serde(default = "one")]
    pub ranks_per_gpu: usize,
    /// NCCL: seconds a rank waits for its GPU work before it calls the run hung and aborts
    /// its communicator (the launcher's watchdog backs it up).
    #[serde(default = "default_timeout")]
    pub timeout_s: u64,
    /// The training loop a `Train` job runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train: Option<hang::train::TrainSpec>,
    /// `-R K`: time each row's `iters` K times; the row shows the median and the spread.
    #[serde(default = "one")]
    pub repeat: usize,
    /// Under a launcher (one rank per process, each with a launcher of its own): every rank
    /// sends its rows to rank 0 through the store, and only rank 0's process prints them,
    /// as one table of the whole world.
    #[serde(default)]
    pub one_table: bool,
}

fn one() -> usize {
    1
}

fn default_timeout() -> u64 {
    60
}

/// The transport of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The TCP backend: processes on any machine.
    #[default]
    Tcp,
    /// NCCL on GPUs (one rank per GPU).
    Nccl,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Nccl => "nccl",
        }
    }
}

/// `--backend` as asked: a backend, or auto (nccl with 2 or more GPUs, else tcp).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BackendChoice {
    #[default]
    Auto,
    Tcp,
    Nccl,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    Bench,
    Sanity,
    /// A training loop of collectives ([`train`]), with its spec in `Job::train`.
    Train,
}

/// nccl-tests' defaults (`-n 20 -w 1`): timed iterations and warm-up iterations per size.
pub const DEFAULT_ITERS: usize = 20;
pub const DEFAULT_WARMUP: usize = 1;

impl Job {
    /// A bench sweep over `sizes` with nccl-tests' defaults: sum, root 0, 20 timed iterations
    /// after 1 warm-up, results checked, the TCP backend. The command line and the lab screen
    /// both start here and change only what their user chose.
    pub fn bench(coll: Collective, algo: Algorithm, dtype: Dtype, sizes: Vec<u64>) -> Self {
        Self {
            kind: JobKind::Bench,
            coll,
            algo,
            dtype,
            sizes,
            iters: DEFAULT_ITERS,
            warmup: DEFAULT_WARMUP,
            ..Self::sanity()
        }
    }

    /// The schedule a call of `bytes` bytes runs: the tuner's pick for its size when the job
    /// is tuned, else the job's algorithm.
    pub fn algo_at(&self, bytes: u64) -> Algorithm {
        self.tuned
            .then(|| crate::collective::tune::by_size(self.coll, bytes))
            .flatten()
            .unwrap_or(self.algo)
    }

    /// The classic sanity check: an all-reduce (sum) of 128 ones must give the world size.
    pub fn sanity() -> Self {
        Self {
            kind: JobKind::Sanity,
            coll: Collective::AllReduce,
            algo: Algorithm::Ring,
            tuned: false,
            op: Op::Sum,
            dtype: Dtype::F32,
            root: 0,
            sizes: vec![(bench::measure::SANITY_COUNT * Dtype::F32.size()) as u64],
            iters: 1,
            warmup: 0,
            check: true,
            backend: Backend::Tcp,
            devices: 0,
            ranks_per_gpu: 1,
            timeout_s: default_timeout(),
            train: None,
            repeat: 1,
            one_table: false,
        }
    }

    /// A training loop of collectives on the TCP backend.
    pub fn train(spec: hang::train::TrainSpec) -> Self {
        Self {
            kind: JobKind::Train,
            train: Some(spec),
            ..Self::sanity()
        }
    }
}

/// Where a rank is, as its launcher's board, watchdog and report say it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The launcher started the process; it has said nothing yet.
    Starting,
    /// The rank's first word: it is up, before its store connection.
    Spawned,
    /// Its communicator's set-up.
    Setup(crate::comm::Setup),
    /// The communicator is up.
    InitDone,
    /// Allocating and filling one size's buffers.
    Preparing { coll: Collective, size: u64 },
    /// Timing one size in one placement.
    Timing {
        coll: Collective,
        size: u64,
        in_place: bool,
    },
    /// The sanity job's one all-reduce.
    Sanity,
    /// A training loop's step (from [`Event::Step`]).
    Step { step: usize, steps: usize },
    /// The closing barrier: no rank leaves while a partner is still inside the last call.
    Closing,
    /// Finished.
    Done,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Phase::Starting => f.write_str("starting"),
            Phase::Spawned => f.write_str("spawned"),
            Phase::Setup(s) => write!(f, "{s}"),
            Phase::InitDone => f.write_str("init done"),
            Phase::Preparing { coll, size } => {
                write!(f, "{} {size} B: preparing buffers", coll.name())
            }
            Phase::Timing {
                coll,
                size,
                in_place,
            } => write!(
                f,
                "{} {size} B ({})",
                coll.name(),
                if *in_place {
                    "in-place"
                } else {
                    "out-of-place"
                }
            ),
            Phase::Sanity => f.write_str("all-reduce"),
            Phase::Step { step, steps } => write!(f, "step {step}/{steps}"),
            Phase::Closing => f.write_str("closing barrier"),
            Phase::Done => f.write_str("done"),
        }
    }
}

/// What a rank reports to its launcher, one JSON object per stdout line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Event {
    Phase {
        rank: usize,
        phase: Phase,
    },
    /// A training loop began step `step` of `steps`: progress, and where a hang happened.
    Step {
        rank: usize,
        step: usize,
        steps: usize,
    },
    Row {
        rank: usize,
        size: u64,
        count: u64,
        in_place: bool,
        /// NaN for a placement that did not run (N/A); JSON carries it as null.
        #[serde(deserialize_with = "nan_if_null")]
        time_us: f64,
        /// Elements that differ from the collective's definition, summed over this process's
        /// ranks; None where the result was not checked (`-c 0`, or what nccl-tests does not
        /// check either: [`bench::measure::checked`]). JSON carries it as null.
        wrong: Option<u64>,
        /// With `-R K` (K > 1): (slowest − fastest) / median of the K timings.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        spread: Option<f64>,
    },
    Value {
        rank: usize,
        value: f64,
    },
    /// Still making progress inside a long row (iterations completing): what the launcher's
    /// watchdog watches, at most every half second.
    Beat {
        rank: usize,
        /// Collectives completed so far in this run.
        done: u64,
    },
    Done {
        rank: usize,
    },
    /// How this rank's bytes travel, once its communicator is up: `P2P`, `SHM`, `NET` or a mix such as `P2P+NET`
    /// (the TCP backend; NCCL names its own choice in its log).
    Transport {
        rank: usize,
        transport: crate::comm::cpu::tcp::Transports,
    },
    Error {
        rank: usize,
        message: String,
        /// The rank's own watchdog gave up waiting (a hang), rather than an error reported.
        #[serde(default)]
        hang: bool,
    },
}

impl Event {
    /// Where a rank is: a phase, or the step of a training loop. None for other events.
    pub fn phase(&self) -> Option<Phase> {
        match self {
            Self::Phase { phase, .. } => Some(phase.clone()),
            Self::Step { step, steps, .. } => Some(Phase::Step {
                step: *step,
                steps: *steps,
            }),
            _ => None,
        }
    }

    /// [`Event::phase`] as the boards and the watchdog's report say it.
    pub fn phase_text(&self) -> Option<String> {
        self.phase().map(|p| p.to_string())
    }

    pub fn rank(&self) -> usize {
        match self {
            Self::Phase { rank, .. }
            | Self::Step { rank, .. }
            | Self::Row { rank, .. }
            | Self::Value { rank, .. }
            | Self::Beat { rank, .. }
            | Self::Done { rank }
            | Self::Transport { rank, .. }
            | Self::Error { rank, .. } => *rank,
        }
    }
}

/// A number, or NaN where the JSON says null (serde_json writes a NaN as null).
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Elements in each rank's buffer for a size, and the count nccl-tests prints: for all-gather
/// and reduce-scatter the size is the whole array and the printed count is per rank.
pub fn counts(coll: Collective, size: u64, elem: usize, ranks: usize) -> (usize, u64) {
    let elems = (size / elem.max(1) as u64) as usize;
    match coll {
        // nccl-tests' all_gather.cu, reduce_scatter.cu and alltoall.cu (*GetCollByteCount):
        // the count is per rank (per peer for all-to-all), cut down to whole 16-byte units,
        // and the row shows that count.
        Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => {
            let unit = (16 / elem.max(1)).max(1);
            let per = elems / ranks.max(1) / unit * unit;
            (per * ranks, per as u64)
        }
        _ => (elems, elems as u64),
    }
}

/// The bytes a row of `size` really moves per rank buffer, after [`counts`]' rounding: the size
/// nccl-tests prints (max(sendBytes, expectedBytes)) and computes algbw from.
pub fn row_bytes(coll: Collective, size: u64, elem: usize, ranks: usize) -> u64 {
    (counts(coll, size, elem, ranks).0 * elem.max(1)) as u64
}

/// nccl-tests' per-iteration shift (common.cu `startColl`): iteration `iter` of a row of
/// `bytes` starts `bytes × (iter mod ⌊top / bytes⌋)` into buffers sized for the sweep's top
/// row, so back-to-back iterations of a small size do not reuse the same cached bytes.
pub fn iteration_shift(bytes: usize, top: usize, iter: usize) -> usize {
    if bytes == 0 {
        return 0;
    }
    let steps = (top / bytes).max(1);
    bytes * (iter % steps)
}

#[cfg(test)]
mod counts_tests {
    use super::counts;
    use crate::collective::Collective;

    #[test]
    fn rows_count_elements_as_nccl_tests_prints_them() {
        // 64 KiB of f32 on 4 ranks: all-reduce 16384, all-gather 4096 per rank.
        assert_eq!(counts(Collective::AllReduce, 65536, 4, 4), (16384, 16384));
        assert_eq!(counts(Collective::AllGather, 65536, 4, 4), (16384, 4096));
        // all-to-all: per peer, in whole 16-byte units (nccl-tests' alltoall.cu).
        assert_eq!(counts(Collective::AllToAll, 65536, 4, 4), (16384, 4096));
        assert_eq!(counts(Collective::AllToAll, 1000, 4, 3), (240, 80));
        assert_eq!(counts(Collective::AllToAll, 1000, 1, 3), (960, 320));
        // all-gather and reduce-scatter round the same way: 1000 B of u8 on 3 ranks is 320
        // per rank (333 cut to whole 16-byte units), a 960-byte row.
        assert_eq!(counts(Collective::AllGather, 1000, 1, 3), (960, 320));
        assert_eq!(counts(Collective::ReduceScatter, 1000, 8, 3), (120, 40));
        assert_eq!(super::row_bytes(Collective::ReduceScatter, 1000, 8, 3), 960);
        assert_eq!(super::row_bytes(Collective::AllReduce, 1000, 8, 3), 1000);
    }

    #[test]
    fn iterations_walk_through_the_top_rows_buffer_as_nccl_tests_does() {
        use super::iteration_shift as shift;
        // 1 KiB rows in a 4 KiB buffer: offsets 0, 1K, 2K, 3K, then round again.
        let got: Vec<usize> = (0..6).map(|i| shift(1024, 4096, i)).collect();
        assert_eq!(got, vec![0, 1024, 2048, 3072, 0, 1024]);
        // The top row itself, and an empty row, never move.
        assert_eq!(shift(4096, 4096, 3), 0);
        assert_eq!(shift(0, 4096, 3), 0);
        // A shifted row always fits the buffer.
        for bytes in [1usize, 3, 1000, 1024, 4095] {
            for i in 0..50 {
                assert!(shift(bytes, 4096, i) + bytes <= 4096, "{bytes} at {i}");
            }
        }
    }

    #[test]
    fn a_step_travels_typed_and_reads_as_its_phase() {
        use crate::lab::Event;
        let ev = Event::Step {
            rank: 3,
            step: 80,
            steps: 200,
        };
        let line = serde_json::to_string(&ev).expect("json");
        assert_eq!(line, r#"{"ev":"step","rank":3,"step":80,"steps":200}"#);
        let back: Event = serde_json::from_str(&line).expect("back");
        assert_eq!(back, ev);
        assert_eq!(back.rank(), 3);
        assert_eq!(back.phase_text().as_deref(), Some("step 80/200"));
        let phase = Event::Phase {
            rank: 0,
            phase: super::Phase::Setup(crate::comm::Setup::Rendezvous),
        };
        assert_eq!(phase.phase_text().as_deref(), Some("rendezvous"));
        assert_eq!(Event::Done { rank: 0 }.phase_text(), None);
    }
}
