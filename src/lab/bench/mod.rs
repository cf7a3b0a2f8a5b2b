//! `ringlab bench` as data: the sizes nccl-tests would sweep, rows aggregated across ranks,
//! and algbw/busbw exactly as nccl-tests defines them (collective::cost).

pub mod gpu;
pub mod measure;
pub mod out;
pub mod pairs;
pub mod pattern;
pub mod rank;
pub mod table;

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Event, Job};
use crate::collective::{Collective, algbw_gbps, busbw_gbps};

/// nccl-tests' sweep (it lives with the byte units: lesson presets check it too).
pub use crate::units::sweep as sizes;

/// One line of the table for one placement: what `--json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub coll: Collective,
    pub backend: &'static str,
    pub algo: String,
    pub ranks: usize,
    pub size: u64,
    pub count: u64,
    #[serde(rename = "type")]
    pub dtype: &'static str,
    pub redop: &'static str,
    pub root: i64,
    pub in_place: bool,
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// None where nothing was checked (nccl-tests prints N/A): JSON null.
    pub wrong: Option<u64>,
    /// How the bytes travelled (`P2P`, `SHM`, `NET`, or a mix such as `P2P+NET`), as the ranks reported it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<crate::comm::cpu::tcp::Transports>,
    /// Several ranks took turns on one GPU (`--ranks-per-gpu`): the bytes crossed host
    /// memory, so the row is not the GPUs' interconnect bandwidth.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shared_gpu: bool,
    /// With `-R K`: (slowest − fastest) / median of the K timings, the widest any rank saw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub summary: bool,
    pub avg_busbw_gbps: f64,
    /// Over the checked rows; None where no row was checked (JSON null).
    pub wrong_total: Option<u64>,
    pub ranks: usize,
    pub backend: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<crate::comm::cpu::tcp::Transports>,
}

/// nccl-tests prints `none` for collectives without a reduction and -1 as the root of
/// collectives without one.
pub fn redop_and_root(job: &Job) -> (&'static str, i64) {
    let redop = if job.coll.is_reducing() {
        job.op.name()
    } else {
        "none"
    };
    let root = if job.coll.has_root() {
        job.root as i64
    } else {
        -1
    };
    (redop, root)
}

/// Two #wrong counts together: a sum of those checked, None where neither was.
pub fn add_wrong(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x + y),
        (x, y) => x.or(y),
    }
}

/// How one row's time is made from the ranks' times: nccl-tests' `-a/--average`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Average {
    /// Rank 0's time (0).
    Rank0,
    /// The mean over ranks (1, nccl-tests' default).
    #[default]
    Mean,
    /// The fastest rank's (2).
    Min,
    /// The slowest rank's (3).
    Max,
}

impl Average {
    pub fn from_flag(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Rank0,
            1 => Self::Mean,
            2 => Self::Min,
            3 => Self::Max,
            _ => return None,
        })
    }

    fn of(self, times: &[(usize, f64)]) -> f64 {
        let ts = times.iter().map(|t| t.1);
        match self {
            Self::Rank0 => times.iter().min_by_key(|t| t.0).map_or(0.0, |t| t.1),
            Self::Mean => ts.sum::<f64>() / times.len().max(1) as f64,
            Self::Min => ts.fold(f64::INFINITY, f64::min),
            Self::Max => ts.fold(0.0, f64::max),
        }
    }
}

/// Buffers of the largest size one rank keeps in host memory: its send and receive buffers on
/// TCP (on NCCL they are on the GPU), plus the measurement's host copies
/// ([`measure::HOST_COPIES`]).
fn host_buffers(job: &Job) -> u64 {
    let copies = measure::HOST_COPIES as u64;
    match job.backend {
        super::Backend::Tcp => 2 + copies,
        super::Backend::Nccl => copies,
    }
}

/// Bytes of memory one rank of `job` needs at its largest size: (host, GPU).
pub fn memory_per_rank(job: &Job, ranks: usize) -> (u64, u64) {
    let max = job.sizes.iter().copied().max().unwrap_or(0);
    let (count, _) = super::counts(job.coll, max, job.dtype.size(), ranks);
    let bytes = (count * job.dtype.size()) as u64;
    let gpu = match job.backend {
        super::Backend::Tcp => 0,
        super::Backend::Nccl => 2 * bytes,
    };
    (host_buffers(job) * bytes, gpu)
}

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

/// Refuse a sweep this machine cannot hold, with the numbers: `local_ranks` rank processes
/// (or GPUs in single-process mode) need [`memory_per_rank`] each, against `available` bytes
/// of host memory.
pub fn check_memory(
    job: &Job,
    ranks: usize,
    local_ranks: usize,
    available: u64,
) -> Result<(), MemoryError> {
    let (host, _) = memory_per_rank(job, ranks);
    let need = host.saturating_mul(local_ranks as u64);
    if need <= available {
        return Ok(());
    }
    Err(MemoryError::Host {
        max: job.sizes.iter().copied().max().unwrap_or(0),
        per_rank: host,
        buffers: host_buffers(job),
        local_ranks,
        need,
        available,
    })
}

/// A sweep whose buffers do not fit this machine, with the numbers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    #[error(
        "-e {} ({max} B) needs about {:.1} GiB of memory per rank ({buffers} × the largest \
         buffer: send, receive, the input kept for the check, the poison pattern, the result), \
         {:.1} GiB for {local_ranks} rank(s) on this machine, which has {:.1} GiB available. Use a \
         smaller -e/--maxbytes",
        crate::units::format_bytes(*max),
        gib(*per_rank),
        gib(*need),
        gib(*available)
    )]
    Host {
        max: u64,
        per_rank: u64,
        buffers: u64,
        local_ranks: usize,
        need: u64,
        available: u64,
    },
    #[error(
        "the largest size needs {:.1} GiB of GPU memory per rank (send and receive buffers), \
         {:.1} GiB for the {per_gpu} rank(s) on each GPU, and the GPU has {:.1} GiB: use a \
         smaller -e/--maxbytes",
        gib(*per_rank),
        gib(*need),
        gib(*gpu_bytes)
    )]
    Gpu {
        per_rank: u64,
        per_gpu: usize,
        need: u64,
        gpu_bytes: u64,
    },
}

/// Refuse an NCCL sweep whose buffers do not fit the GPU: `per_gpu` ranks share each GPU
/// (`--ranks-per-gpu`), each with a send and a receive buffer of the largest size.
pub fn check_gpu_memory(
    job: &Job,
    ranks: usize,
    per_gpu: usize,
    gpu_bytes: u64,
) -> Result<(), MemoryError> {
    let (_, dev) = memory_per_rank(job, ranks);
    let need = dev.saturating_mul(per_gpu.max(1) as u64);
    if gpu_bytes == 0 || need <= gpu_bytes {
        return Ok(());
    }
    Err(MemoryError::Gpu {
        per_rank: dev,
        per_gpu: per_gpu.max(1),
        need,
        gpu_bytes,
    })
}

/// MemAvailable from /proc/meminfo, in bytes (None where it cannot be read).
pub fn available_memory() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// Pairs each size's out-of-place row with its in-place row, the way nccl-tests prints them on
/// one line: the command line's table and the lab screen both read rows through this.
#[derive(Debug, Default)]
pub struct Pairs {
    pending: Option<Row>,
}

impl Pairs {
    /// The (out-of-place, in-place) pair once a size's in-place row comes; None before.
    pub fn push(&mut self, row: Row) -> Option<(Row, Row)> {
        if row.in_place {
            self.pending.take().map(|out| (out, row))
        } else {
            self.pending = Some(row);
            None
        }
    }
}

/// One row still being reported: (rank, time) so far, #wrong so far, nccl-tests' count.
/// Per row: each rank's time, #wrong summed, the count, the widest spread a rank saw.
type Pending = (Vec<(usize, f64)>, Option<u64>, u64, Option<f64>);

/// Collects per-rank reports into rows: the time as `average` says (the mean over the ranks
/// by default, as nccl-tests), #wrong the sum over ranks.
pub struct Collector {
    job: Job,
    ranks: usize,
    /// Ranks on this node: a row is complete when all of them have reported it.
    local_ranks: usize,
    backend: &'static str,
    /// What the algorithm column says when it is not the schedule each row ran ("nccl" when
    /// NCCL chooses).
    algo: Option<String>,
    average: Average,
    pending: BTreeMap<(u64, bool), Pending>,
    pub rows: Vec<Row>,
    /// Per rank, the transport it reported.
    transports: BTreeMap<usize, crate::comm::cpu::tcp::Transports>,
}

impl Collector {
    pub fn new(job: &Job, ranks: usize, local_ranks: usize, backend: &'static str) -> Self {
        Self {
            local_ranks,
            job: job.clone(),
            ranks,
            backend,
            algo: None,
            average: Average::default(),
            pending: BTreeMap::new(),
            rows: Vec::new(),
            transports: BTreeMap::new(),
        }
    }

    pub fn with_average(mut self, a: Average) -> Self {
        self.average = a;
        self
    }

    pub fn with_algo(mut self, algo: impl Into<String>) -> Self {
        self.algo = Some(algo.into());
        self
    }

    /// The bytes a row of sweep size `size` moves ([`super::row_bytes`]): its size column.
    fn row_bytes(&self, size: u64) -> u64 {
        super::row_bytes(self.job.coll, size, self.job.dtype.size(), self.ranks)
    }

    /// The first size of the sweep that has not got both its rows: where a failed job stopped.
    pub fn unfinished_size(&self) -> Option<u64> {
        self.job.sizes.iter().copied().find(|&size| {
            let bytes = self.row_bytes(size);
            [false, true].iter().any(|&ip| {
                !self
                    .rows
                    .iter()
                    .any(|r| r.size == bytes && r.in_place == ip)
            })
        })
    }

    /// The transports the ranks reported, together (shown `P2P`, `SHM`, `NET`, or a mix such as `P2P+NET`).
    pub fn transport(&self) -> Option<crate::comm::cpu::tcp::Transports> {
        (!self.transports.is_empty()).then(|| {
            self.transports
                .values()
                .fold(crate::comm::cpu::tcp::Transports::default(), |a, &t| {
                    a.union(t)
                })
        })
    }

    /// Feed an event; returns a finished row when the last local rank has reported it.
    pub fn feed(&mut self, ev: &Event) -> Option<Row> {
        if let Event::Transport { rank, transport } = ev {
            self.transports.insert(*rank, *transport);
            return None;
        }
        let Event::Row {
            rank,
            size,
            count,
            in_place,
            time_us,
            wrong,
            spread,
        } = ev
        else {
            return None;
        };
        let e = self
            .pending
            .entry((*size, *in_place))
            .or_insert((Vec::new(), None, *count, None));
        e.0.push((*rank, *time_us));
        e.1 = add_wrong(e.1, *wrong);
        e.3 = match (e.3, *spread) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if e.0.len() < self.local_ranks {
            return None;
        }
        let (times, w, count, spread) = self.pending.remove(&(*size, *in_place))?;
        let t = self.average.of(&times);
        let secs = t * 1e-6;
        // The size nccl-tests prints and divides by: the bytes the row really moved, after
        // its count was cut to whole 16-byte units per rank.
        let bytes = self.row_bytes(*size);
        // A placement that did not run (N/A: NaN time) has no bandwidth either.
        let (algbw, busbw) = if t.is_finite() {
            (
                algbw_gbps(bytes, secs),
                busbw_gbps(self.job.coll, self.ranks, bytes, secs),
            )
        } else {
            (f64::NAN, f64::NAN)
        };
        let (redop, root) = redop_and_root(&self.job);
        let row = Row {
            coll: self.job.coll,
            backend: self.backend,
            algo: self
                .algo
                .clone()
                .unwrap_or_else(|| self.job.algo_at(bytes).name().to_string()),
            ranks: self.ranks,
            size: bytes,
            count,
            dtype: self.job.dtype.nccl_name(),
            redop,
            root,
            in_place: *in_place,
            time_us: t,
            algbw_gbps: algbw,
            busbw_gbps: busbw,
            wrong: w,
            transport: self.transport(),
            shared_gpu: self.job.backend == super::Backend::Nccl && self.job.ranks_per_gpu > 1,
            spread,
        };
        self.rows.push(row.clone());
        Some(row)
    }

    pub fn summary(&self) -> Summary {
        // Rows that did not run (N/A: NaN) count in neither the sum nor the number.
        let ran: Vec<f64> = self
            .rows
            .iter()
            .map(|r| r.busbw_gbps)
            .filter(|b| b.is_finite())
            .collect();
        let n = ran.len().max(1) as f64;
        Summary {
            summary: true,
            avg_busbw_gbps: ran.iter().sum::<f64>() / n,
            wrong_total: self.rows.iter().fold(None, |t, r| add_wrong(t, r.wrong)),
            ranks: self.ranks,
            backend: self.backend,
            transport: self.transport(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_time_is_the_mean_over_ranks_unless_asked_otherwise() {
        let job = Job::sanity();
        let feed = |a: Average| {
            let mut c = Collector::new(&job, 2, 2, "tcp").with_average(a);
            let row = |rank, t| Event::Row {
                rank,
                size: 512,
                count: 128,
                in_place: true,
                time_us: t,
                wrong: Some(rank as u64),
                spread: None,
            };
            assert!(c.feed(&row(1, 30.0)).is_none());
            c.feed(&row(0, 10.0)).expect("complete")
        };
        assert_eq!(feed(Average::Mean).time_us, 20.0);
        assert_eq!(feed(Average::Rank0).time_us, 10.0);
        assert_eq!(feed(Average::Min).time_us, 10.0);
        let max = feed(Average::Max);
        assert_eq!(max.time_us, 30.0);
        assert_eq!(max.wrong, Some(1), "#wrong adds up over ranks");
        assert_eq!(Average::from_flag(1), Some(Average::Mean));
        assert_eq!(Average::from_flag(4), None);
    }

    #[test]
    fn pairs_join_each_sizes_two_placements_in_order() {
        let job = Job {
            sizes: vec![1024, 2048],
            ..Job::sanity()
        };
        let mut c = Collector::new(&job, 2, 1, "tcp");
        let ev = |size, in_place| Event::Row {
            rank: 0,
            size,
            count: size / 4,
            in_place,
            time_us: 1.0,
            wrong: Some(0),
            spread: None,
        };
        let mut p = Pairs::default();
        // An in-place row with no out-of-place row before it pairs with nothing.
        assert!(p.push(c.feed(&ev(512, true)).expect("row")).is_none());
        assert!(p.push(c.feed(&ev(1024, false)).expect("row")).is_none());
        let (o, i) = p
            .push(c.feed(&ev(1024, true)).expect("row"))
            .expect("a pair");
        assert_eq!(
            (o.size, o.in_place, i.size, i.in_place),
            (1024, false, 1024, true)
        );
        assert!(p.push(c.feed(&ev(2048, false)).expect("row")).is_none());
        let (o, i) = p
            .push(c.feed(&ev(2048, true)).expect("row"))
            .expect("a pair");
        assert_eq!((o.size, i.size), (2048, 2048));
    }

    #[test]
    fn a_row_shows_and_divides_by_the_bytes_it_really_moved() {
        let job = Job {
            coll: Collective::AllGather,
            sizes: vec![1000],
            ..Job::sanity()
        };
        let mut c = Collector::new(&job, 3, 1, "tcp");
        assert!(c.unfinished_size().is_some());
        let ev = |in_place| Event::Row {
            rank: 0,
            size: 1000,
            count: 80,
            in_place,
            time_us: 1.0,
            wrong: Some(0),
            spread: None,
        };
        let row = c.feed(&ev(false)).expect("one local rank");
        // 1000 B of float on 3 ranks: 83 per rank cut to 80 (whole 16-byte units), 960 B.
        assert_eq!(row.size, 960);
        assert!(
            (row.algbw_gbps - 960.0 / 1e9 / 1e-6).abs() < 1e-9,
            "{row:?}"
        );
        assert!(!row.shared_gpu);
        c.feed(&ev(true)).expect("in place");
        assert_eq!(
            c.unfinished_size(),
            None,
            "both rows of the sweep's size are in"
        );
    }

    #[test]
    fn a_sweep_the_machine_cannot_hold_is_refused_with_the_numbers() {
        let job = Job {
            kind: super::super::JobKind::Bench,
            sizes: vec![1 << 20, 10 << 30],
            ..Job::sanity()
        };
        assert_eq!(memory_per_rank(&job, 2).0, 5 * (10u64 << 30));
        let e = check_memory(&job, 2, 2, 23 << 30)
            .expect_err("100 GiB on 23")
            .to_string();
        assert!(
            e.contains("50.0 GiB") && e.contains("100.0 GiB") && e.contains("23.0 GiB"),
            "{e}"
        );
        let small = Job {
            sizes: vec![1 << 20],
            ..job
        };
        assert!(check_memory(&small, 2, 2, 23 << 30).is_ok());
        let gpu = Job {
            backend: super::super::Backend::Nccl,
            sizes: vec![64 << 30],
            ..small
        };
        let e = check_gpu_memory(&gpu, 2, 2, 141 << 30)
            .expect_err("2 x 128 GiB on 141")
            .to_string();
        assert!(e.contains("256.0 GiB") && e.contains("141.0 GiB"), "{e}");
        assert!(check_gpu_memory(&gpu, 2, 1, 141 << 30).is_ok());
    }

    #[test]
    fn sweep_matches_nccl_tests() {
        assert_eq!(
            sizes(1024, 65536, 4).expect("ok"),
            vec![1024, 4096, 16384, 65536]
        );
        assert_eq!(sizes(8, 8, 2).expect("ok"), vec![8]);
        assert!(sizes(0, 8, 2).is_err());
        assert!(sizes(16, 8, 2).expect_err("bad").contains("smaller"));
        assert!(sizes(1, 8, 1).is_err());
    }
}
