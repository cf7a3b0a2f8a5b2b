//! The data: [`Spec`] in, [`Schedule`] (steps of [`Transfer`]s) out, plus the chunk partition.
//!
//! Buffer model (nccl-tests' in-place layout): every rank has ONE buffer of `count` elements,
//! split into N chunks by [`chunk_range`]. All-gather: rank r starts owning chunk r. Reduce-scatter:
//! rank r ends owning the reduced chunk r. Transfers inside one step are simultaneous: they all read
//! the buffers as they were before the step.
//!
//! Conventions: with one rank every schedule has zero steps. With N ≥ 2 the step count depends only
//! on (collective, algorithm, N), never on `count`; zero-length transfers are omitted, so a step
//! may carry no transfers (count < N or count = 0). Every transfer covers whole chunks.

use std::ops::Range;

use serde::Serialize;

use super::kinds::{Algorithm, Collective};
use super::{naive, ring, tree};

/// Most ranks a schedule may have.
pub const MAX_RANKS: usize = 65_536;
/// Most bytes one rank's buffer may hold (1 TiB); keeps every byte count far from overflow.
pub const MAX_BUFFER_BYTES: u64 = 1 << 40;
/// Most transfers one schedule may hold (16 Mi transfers, 512 MiB); ring all-reduce reaches it near N = 2900.
pub const MAX_TRANSFERS: u64 = 1 << 24;

/// Why a schedule cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// A collective needs at least one rank.
    #[error("a collective needs at least 1 rank, got 0")]
    NoRanks,
    /// More ranks than [`MAX_RANKS`].
    #[error("{ranks} ranks is more than ringlab models (at most {max})")]
    TooManyRanks { ranks: usize, max: usize },
    /// The root is not one of the ranks.
    #[error("root {root} is not a rank: ranks are 0..{ranks}")]
    RootOutOfRange { root: usize, ranks: usize },
    /// Elements must have a size.
    #[error("element size must be at least 1 byte")]
    ZeroElemSize,
    /// `count × elem_size` exceeds [`MAX_BUFFER_BYTES`].
    #[error("buffer of {count} elements × {elem_size} bytes exceeds the 1 TiB limit")]
    BufferTooLarge { count: usize, elem_size: usize },
    /// The schedule would hold more than [`MAX_TRANSFERS`] transfers.
    #[error(
        "{op} {algo} on {ranks} ranks needs about {transfers} transfers (limit {max}); use fewer ranks"
    )]
    TooManyTransfers {
        op: Collective,
        algo: Algorithm,
        ranks: usize,
        transfers: u64,
        max: u64,
    },
}

/// What to build: a collective, an algorithm and the buffer shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Spec {
    /// The collective.
    pub op: Collective,
    /// The algorithm.
    pub algo: Algorithm,
    /// Number of ranks N.
    pub ranks: usize,
    /// Elements in each rank's buffer (the whole array, also for all-gather and reduce-scatter).
    pub count: usize,
    /// Bytes per element.
    pub elem_size: usize,
    /// Root of broadcast/reduce; also the hub of naive and the tree root of tree for every collective.
    pub root: usize,
}

impl Spec {
    /// A spec with root 0.
    pub fn new(
        op: Collective,
        algo: Algorithm,
        ranks: usize,
        count: usize,
        elem_size: usize,
    ) -> Self {
        Spec {
            op,
            algo,
            ranks,
            count,
            elem_size,
            root: 0,
        }
    }

    /// Bytes in one rank's buffer: M = count × elem_size (saturating; `build` rejects overflow).
    pub fn bytes(&self) -> u64 {
        (self.count as u64).saturating_mul(self.elem_size as u64)
    }
}

/// One point-to-point move of a contiguous element range, `offset..offset+len`, of the buffer.
/// The destination overwrites its range (`reduce == false`) or combines into it (`reduce == true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Transfer {
    /// Sending rank.
    pub src: u32,
    /// Receiving rank.
    pub dst: u32,
    /// First element (same offset on sender and receiver).
    pub offset: u64,
    /// Number of elements (never 0 in a built schedule).
    pub len: u64,
    /// Receiver reduces into its buffer instead of overwriting.
    pub reduce: bool,
}

impl Transfer {
    /// The element range this transfer reads on `src` and writes on `dst`.
    pub fn range(&self) -> Range<usize> {
        self.offset as usize..self.offset.saturating_add(self.len) as usize
    }
}

/// The part of the collective a step belongs to; `label()` is what the UI prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Phase {
    /// Ring reduce-scatter: partial sums travel around the ring.
    #[serde(rename = "reduce-scatter")]
    ReduceScatter,
    /// Ring all-gather: finished chunks travel around the ring.
    #[serde(rename = "all-gather")]
    AllGather,
    /// Data flows toward the root and is combined there (naive, tree, ring chain).
    #[serde(rename = "reduce")]
    Reduce,
    /// Data flows away from the root and is copied (naive, tree, ring chain).
    #[serde(rename = "broadcast")]
    Broadcast,
    /// Chunks are collected toward the root without combining.
    #[serde(rename = "gather")]
    Gather,
    /// The root hands each rank its own chunk(s).
    #[serde(rename = "scatter")]
    Scatter,
    /// Point to point shift.
    #[serde(rename = "send/recv")]
    SendRecv,
}

impl Phase {
    /// "reduce-scatter", "all-gather", "reduce", "broadcast", "gather", "scatter", "send/recv".
    pub fn label(self) -> &'static str {
        match self {
            Phase::ReduceScatter => "reduce-scatter",
            Phase::AllGather => "all-gather",
            Phase::Reduce => "reduce",
            Phase::Broadcast => "broadcast",
            Phase::Gather => "gather",
            Phase::Scatter => "scatter",
            Phase::SendRecv => "send/recv",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// One step: transfers that happen at the same time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// Position in the schedule, from 0.
    pub index: usize,
    /// Which part of the collective this step belongs to.
    pub phase: Phase,
    /// The simultaneous transfers (each reads the state before the step).
    pub transfers: Vec<Transfer>,
}

/// Elements of chunk `i` when `count` elements are split in `n` chunks: sizes differ by at most
/// one, the first `count % n` chunks are the larger ones. Out-of-range `i` (or `n == 0`) gives an
/// empty range at the end.
pub fn chunk_range(count: usize, n: usize, i: usize) -> Range<usize> {
    if n == 0 {
        return count..count;
    }
    let (base, rem) = (count / n, count % n);
    let i = i.min(n);
    let start = i * base + i.min(rem);
    let len = if i < n {
        base + usize::from(i < rem)
    } else {
        0
    };
    start..start + len
}

/// The chunk holding element `elem` (inverse of [`chunk_range`]); `None` if `elem >= count`.
pub fn chunk_of(count: usize, n: usize, elem: usize) -> Option<usize> {
    if elem >= count || n == 0 {
        return None;
    }
    let (base, rem) = (count / n, count % n);
    let big = rem * (base + 1);
    Some(if elem < big {
        elem / (base + 1)
    } else {
        rem + (elem - big) / base
    })
}

/// A built schedule: the spec and its steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    spec: Spec,
    steps: Vec<Step>,
}

impl Schedule {
    /// Builds the schedule for `spec`, or says why it cannot.
    pub fn build(spec: &Spec) -> Result<Schedule, ScheduleError> {
        validate(spec)?;
        let mut b = Builder::new(spec);
        if spec.ranks > 1 {
            match (spec.op, spec.algo) {
                (Collective::SendRecv, _) => shift(&mut b),
                (_, Algorithm::Ring) => ring::build(&mut b),
                (_, Algorithm::Naive) => naive::build(&mut b),
                (_, Algorithm::Tree) => tree::build(&mut b),
            }
        }
        Ok(Schedule {
            spec: *spec,
            steps: b.steps,
        })
    }

    /// Whether [`Schedule::build`] would accept `spec`, without building it (cheap: what
    /// lesson loading and `ringlab check` need).
    pub fn check(spec: &Spec) -> Result<(), ScheduleError> {
        validate(spec)
    }

    /// The spec this schedule was built from.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// All steps, in order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// True when there are no steps (always so for one rank).
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Total number of transfers over all steps.
    pub fn transfer_count(&self) -> usize {
        self.steps.iter().map(|s| s.transfers.len()).sum()
    }

    /// Element range of chunk `i` of this schedule's buffer.
    pub fn chunk(&self, i: usize) -> Range<usize> {
        chunk_range(self.spec.count, self.spec.ranks, i)
    }

    /// The chunks a transfer carries (a transfer always covers whole chunks).
    pub fn chunks_of(&self, t: &Transfer) -> Range<usize> {
        let (count, n) = (self.spec.count, self.spec.ranks);
        let r = t.range();
        match (
            chunk_of(count, n, r.start),
            r.end.checked_sub(1).and_then(|e| chunk_of(count, n, e)),
        ) {
            (Some(a), Some(b)) if !r.is_empty() => a..b + 1,
            _ => 0..0,
        }
    }

    /// Bytes a transfer moves: len × elem_size.
    pub fn transfer_bytes(&self, t: &Transfer) -> u64 {
        t.len.saturating_mul(self.spec.elem_size as u64)
    }

    /// For step `step`: its phase, its 1-based position within that phase, and the phase's length,
    /// e.g. `(ReduceScatter, 2, 3)` = "reduce-scatter step 2 of 3". `None` past the end.
    pub fn phase_position(&self, step: usize) -> Option<(Phase, usize, usize)> {
        let phase = self.steps.get(step)?.phase;
        let first = self.steps[..step]
            .iter()
            .rposition(|s| s.phase != phase)
            .map_or(0, |i| i + 1);
        let end = self.steps[step..]
            .iter()
            .position(|s| s.phase != phase)
            .map_or(self.steps.len(), |i| step + i);
        Some((phase, step - first + 1, end - first))
    }

    /// The part of `rank`'s buffer the collective defines when it completes: everything, except
    /// chunk `rank` only for reduce-scatter and nothing on non-root ranks for reduce.
    pub fn defined_range(&self, rank: usize) -> Range<usize> {
        let s = &self.spec;
        defined_range(s.op, s.count, s.ranks, rank, s.root)
    }
}

/// See [`Schedule::defined_range`]; usable without building a schedule.
pub fn defined_range(
    op: Collective,
    count: usize,
    ranks: usize,
    rank: usize,
    root: usize,
) -> Range<usize> {
    match op {
        Collective::ReduceScatter => chunk_range(count, ranks, rank),
        Collective::Reduce if rank != root => 0..0,
        _ => 0..count,
    }
}

fn validate(spec: &Spec) -> Result<(), ScheduleError> {
    let n = spec.ranks;
    if n == 0 {
        return Err(ScheduleError::NoRanks);
    }
    if n > MAX_RANKS {
        return Err(ScheduleError::TooManyRanks {
            ranks: n,
            max: MAX_RANKS,
        });
    }
    if spec.root >= n {
        return Err(ScheduleError::RootOutOfRange {
            root: spec.root,
            ranks: n,
        });
    }
    if spec.elem_size == 0 {
        return Err(ScheduleError::ZeroElemSize);
    }
    let bytes = (spec.count as u64).checked_mul(spec.elem_size as u64);
    if bytes.is_none_or(|b| b > MAX_BUFFER_BYTES) {
        return Err(ScheduleError::BufferTooLarge {
            count: spec.count,
            elem_size: spec.elem_size,
        });
    }
    let transfers = transfer_bound(spec.op, spec.algo, n as u64);
    if transfers > MAX_TRANSFERS {
        return Err(ScheduleError::TooManyTransfers {
            op: spec.op,
            algo: spec.algo,
            ranks: n,
            transfers,
            max: MAX_TRANSFERS,
        });
    }
    Ok(())
}

/// An upper bound on the transfers of a schedule (exact for ring and naive).
fn transfer_bound(op: Collective, algo: Algorithm, n: u64) -> u64 {
    let depth = u64::from(n.max(1).ilog2());
    match (op, algo) {
        (Collective::SendRecv, _) => n,
        (Collective::AllReduce, Algorithm::Ring) => 2 * (n - 1) * n,
        (_, Algorithm::Ring) => (n - 1) * n,
        (_, Algorithm::Naive) => 3 * (n - 1),
        (_, Algorithm::Tree) => 2 * (n - 1) * (depth + 3),
    }
}

/// Accumulates steps for the algorithm builders; skips zero-length transfers.
pub(super) struct Builder {
    pub(super) spec: Spec,
    pub(super) steps: Vec<Step>,
}

impl Builder {
    fn new(spec: &Spec) -> Self {
        Builder {
            spec: *spec,
            steps: Vec::new(),
        }
    }

    /// Opens a new step with room for `capacity` transfers and returns its transfer list.
    pub(super) fn step(&mut self, phase: Phase, capacity: usize) -> &mut Vec<Transfer> {
        let index = self.steps.len();
        self.steps.push(Step {
            index,
            phase,
            transfers: Vec::with_capacity(capacity),
        });
        &mut self.steps[index].transfers
    }
}

/// Appends `src → dst` of element range `r` unless it is empty.
#[inline]
pub(super) fn push(t: &mut Vec<Transfer>, src: usize, dst: usize, r: Range<usize>, reduce: bool) {
    if r.end > r.start {
        t.push(Transfer {
            src: src as u32,
            dst: dst as u32,
            offset: r.start as u64,
            len: (r.end - r.start) as u64,
            reduce,
        });
    }
}

/// Element range of the chunk range `chunks` (contiguous because chunks are in order).
pub(super) fn chunks_span(count: usize, n: usize, chunks: Range<usize>) -> Range<usize> {
    if chunks.is_empty() {
        return 0..0;
    }
    chunk_range(count, n, chunks.start).start..chunk_range(count, n, chunks.end - 1).end
}

/// SendRecv for every algorithm: one step, rank r sends its whole buffer to (r+1) mod N.
fn shift(b: &mut Builder) {
    let (n, count) = (b.spec.ranks, b.spec.count);
    let t = b.step(Phase::SendRecv, n);
    for r in 0..n {
        push(t, r, (r + 1) % n, 0..count, false);
    }
}
