//! The data: [`Spec`] in, [`Schedule`] (steps of [`Transfer`]s) out, plus the chunk partition.
//!
//! Buffer model (nccl-tests' in-place layout): every rank has ONE buffer of `count` elements,
//! split into N chunks by [`chunk_range`]. All-gather: rank r starts owning chunk r. Reduce-scatter:
//! rank r ends owning the reduced chunk r. Transfers inside one step are simultaneous: they all read
//! the buffers as they were before the step.
//!
//! All-to-all is the one collective whose data changes place: block j of rank r (what r means for
//! j) lands in block r of rank j, so its transfers carry a `dst_offset`. Its blocks are equal,
//! ⌊count/N⌋ elements each ([`block_range`]); the last count mod N elements are not moved and not
//! defined, as nccl-tests rounds its alltoall count down to a multiple of the ranks
//! (src/alltoall.cu, `AlltoAllGetCollByteCount`).
//!
//! Conventions: with one rank every schedule has zero steps. With N ≥ 2 the step count depends only
//! on (collective, algorithm, N), never on `count`; zero-length transfers are omitted, so a step
//! may carry no transfers (count < N or count = 0). Every transfer covers whole chunks.

use std::ops::Range;

use serde::Serialize;

use super::kinds::{Algorithm, Collective};
use super::{alltoall, dtree, naive, rdouble, ring, tree, twolevel};

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
    /// The algorithm has no schedule for this collective (see [`Algorithm::supports`]).
    #[error(
        "{algo} has no schedule for {op}: it is an all-reduce algorithm (use ring, naive or tree)"
    )]
    Unsupported { op: Collective, algo: Algorithm },
    /// The two-level ring needs every node to hold the same number of GPUs.
    #[error("{ranks} ranks cannot be split into nodes of {per_node} GPUs")]
    BadNodeShape { ranks: usize, per_node: usize },
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
    pub coll: Collective,
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
    /// GPUs per node, for the two-level ring (and topology-aware costs): ranks
    /// `k·G .. (k+1)·G` are node k. 0 = the default, [`default_gpus_per_node`].
    pub gpus_per_node: usize,
}

impl Spec {
    /// A spec with root 0.
    pub fn new(
        coll: Collective,
        algo: Algorithm,
        ranks: usize,
        count: usize,
        elem_size: usize,
    ) -> Self {
        Spec {
            coll,
            algo,
            ranks,
            count,
            elem_size,
            root: 0,
            gpus_per_node: 0,
        }
    }

    /// GPUs per node this spec means: `gpus_per_node`, or [`default_gpus_per_node`] when 0.
    pub fn node_size(&self) -> usize {
        match self.gpus_per_node {
            0 => default_gpus_per_node(self.ranks),
            g => g,
        }
    }

    /// Number of nodes: ranks ÷ [`Spec::node_size`] (rounded up).
    pub fn nodes(&self) -> usize {
        self.ranks.div_ceil(self.node_size().max(1))
    }

    /// Bytes in one rank's buffer: M = count × elem_size (saturating; `build` rejects overflow).
    pub fn bytes(&self) -> u64 {
        (self.count as u64).saturating_mul(self.elem_size as u64)
    }
}

/// With N ranks and no `gpus_per_node` given: nodes = the smallest prime factor of N, so an
/// even N is two nodes of N/2 GPUs (8 → 2 × 4, 16 → 2 × 8) and a prime N is N nodes of one GPU.
pub fn default_gpus_per_node(ranks: usize) -> usize {
    if ranks < 2 {
        return 1;
    }
    let p = (2..)
        .take_while(|d| d * d <= ranks)
        .find(|d| ranks.is_multiple_of(*d))
        .unwrap_or(ranks);
    ranks / p
}

/// What [`default_gpus_per_node`] did, in words, when that is not the obvious two nodes of
/// N/2 (an odd N): "9 ranks: 3 nodes of 3 GPUs …", or for a prime N that every node holds
/// one GPU and the two-level all-reduce is a flat ring. `None` for N < 2 and for even N.
pub fn node_shape_note(ranks: usize) -> Option<String> {
    if ranks < 2 || ranks.is_multiple_of(2) {
        return None;
    }
    let g = default_gpus_per_node(ranks);
    let nodes = ranks / g;
    Some(if g == 1 {
        format!(
            "{ranks} ranks is prime: {nodes} nodes of 1 GPU, so the two-level all-reduce has no \
             inside-node phase and is a ring over nodes; set GPUs per node (--gpus-per-node) for \
             another shape"
        )
    } else {
        format!(
            "{ranks} ranks: {nodes} nodes of {g} GPUs (as many nodes as N's smallest prime \
             factor); set GPUs per node (--gpus-per-node) for another shape"
        )
    })
}

/// One point-to-point move of a contiguous element range of `len` elements: read at `offset` on
/// `src`, written at `offset` on `dst` (at `dst_offset` instead where given: all-to-all only).
/// The destination overwrites its range (`reduce == false`) or combines into it (`reduce == true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Transfer {
    /// Sending rank.
    pub src: u32,
    /// Receiving rank.
    pub dst: u32,
    /// First element read on the sender (and written on the receiver, unless `dst_offset`).
    pub offset: u64,
    /// Number of elements (never 0 in a built schedule).
    pub len: u64,
    /// Receiver reduces into its buffer instead of overwriting.
    pub reduce: bool,
    /// Where the receiver writes when that is not `offset` (all-to-all); absent from the JSON
    /// when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst_offset: Option<u64>,
}

impl Transfer {
    /// The element range this transfer reads on `src`.
    pub fn src_range(&self) -> Range<usize> {
        self.offset as usize..self.offset.saturating_add(self.len) as usize
    }

    /// The element range this transfer writes (or reduces into) on `dst`.
    pub fn dst_range(&self) -> Range<usize> {
        let at = self.dst_offset.unwrap_or(self.offset);
        at as usize..at.saturating_add(self.len) as usize
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
    /// Pipelined tree: later chunks still go up while earlier ones already come down.
    #[serde(rename = "reduce + broadcast")]
    ReduceBroadcast,
    /// Two-level ring, first level: reduce-scatter among the GPUs of each node.
    #[serde(rename = "intra-node reduce-scatter")]
    IntraReduceScatter,
    /// Two-level ring, second level: all-reduce among the ranks with the same local index.
    #[serde(rename = "inter-node all-reduce")]
    InterAllReduce,
    /// Two-level ring, last level: all-gather among the GPUs of each node.
    #[serde(rename = "intra-node all-gather")]
    IntraAllGather,
    /// All-to-all: ranks swap blocks with the ranks a given distance away.
    #[serde(rename = "all-to-all")]
    AllToAll,
    /// Recursive doubling: pairs of ranks swap whole buffers and both reduce.
    #[serde(rename = "exchange")]
    Exchange,
}

impl Phase {
    /// "reduce-scatter", "all-gather", "reduce", "broadcast", "gather", "scatter", "send/recv",
    /// "reduce + broadcast", "intra-node reduce-scatter", "inter-node all-reduce",
    /// "intra-node all-gather", "all-to-all", "exchange".
    pub fn label(self) -> &'static str {
        match self {
            Phase::ReduceScatter => "reduce-scatter",
            Phase::AllGather => "all-gather",
            Phase::Reduce => "reduce",
            Phase::Broadcast => "broadcast",
            Phase::Gather => "gather",
            Phase::Scatter => "scatter",
            Phase::SendRecv => "send/recv",
            Phase::ReduceBroadcast => "reduce + broadcast",
            Phase::IntraReduceScatter => "intra-node reduce-scatter",
            Phase::InterAllReduce => "inter-node all-reduce",
            Phase::IntraAllGather => "intra-node all-gather",
            Phase::AllToAll => "all-to-all",
            Phase::Exchange => "exchange",
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

/// All-to-all's block `i`: ⌊count/n⌋ elements at i·⌊count/n⌋ (all blocks equal; the tail of
/// count mod n elements belongs to no block). Out-of-range `i` (or `n == 0`) gives an empty range.
pub fn block_range(count: usize, n: usize, i: usize) -> Range<usize> {
    if n == 0 || i >= n {
        return 0..0;
    }
    let b = count / n;
    i * b..(i + 1) * b
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
            match (spec.coll, spec.algo) {
                (Collective::SendRecv, _) => shift(&mut b),
                (Collective::AllToAll, _) => alltoall::build(&mut b),
                (_, Algorithm::Ring) => ring::build(&mut b),
                (_, Algorithm::Naive) => naive::build(&mut b),
                (_, Algorithm::Tree) => tree::build(&mut b),
                (_, Algorithm::DoubleTree) => dtree::build(&mut b),
                (_, Algorithm::TwoLevel) => twolevel::build(&mut b),
                (_, Algorithm::RecursiveDoubling) => rdouble::build(&mut b),
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

    /// Total number of transfers over all steps (the unit tests' count).
    #[cfg(test)]
    pub fn transfer_count(&self) -> usize {
        self.steps.iter().map(|s| s.transfers.len()).sum()
    }

    /// Element range of chunk `i` of this schedule's buffer ([`block_range`] for all-to-all,
    /// [`chunk_range`] for everything else).
    pub fn chunk(&self, i: usize) -> Range<usize> {
        let (count, n) = (self.spec.count, self.spec.ranks);
        if self.spec.coll == Collective::AllToAll {
            block_range(count, n, i)
        } else {
            chunk_range(count, n, i)
        }
    }

    /// The chunks a transfer carries, as read on the sender (a transfer always covers whole
    /// chunks; for all-to-all, block j of the sender is the one meant for rank j).
    pub fn chunks_of(&self, t: &Transfer) -> Range<usize> {
        let (count, n) = (self.spec.count, self.spec.ranks);
        let r = t.src_range();
        if self.spec.coll == Collective::AllToAll {
            let b = (count / n.max(1)).max(1);
            return if r.is_empty() {
                0..0
            } else {
                r.start / b..(r.end - 1) / b + 1
            };
        }
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
    /// chunk `rank` only for reduce-scatter, nothing on non-root ranks for reduce, and the N
    /// whole blocks (not the tail) for all-to-all.
    pub fn defined_range(&self, rank: usize) -> Range<usize> {
        let s = &self.spec;
        defined_range(s.coll, s.count, s.ranks, rank, s.root)
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
        Collective::AllToAll => 0..count / ranks.max(1) * ranks,
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
    if !spec.algo.supports(spec.coll) {
        return Err(ScheduleError::Unsupported {
            op: spec.coll,
            algo: spec.algo,
        });
    }
    if spec.algo == Algorithm::TwoLevel && spec.coll == Collective::AllReduce {
        let g = spec.node_size();
        if g == 0 || !n.is_multiple_of(g) {
            return Err(ScheduleError::BadNodeShape {
                ranks: n,
                per_node: g,
            });
        }
    }
    let transfers = transfer_bound(spec.coll, spec.algo, n as u64);
    if transfers > MAX_TRANSFERS {
        return Err(ScheduleError::TooManyTransfers {
            op: spec.coll,
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
        (Collective::AllToAll, _) => (n - 1) * n,
        (Collective::AllReduce, Algorithm::Ring) => 2 * (n - 1) * n,
        (_, Algorithm::Ring) => (n - 1) * n,
        (_, Algorithm::Naive) => 3 * (n - 1),
        (_, Algorithm::Tree) => 2 * (n - 1) * (depth + 3),
        // Every chunk crosses every tree edge twice; the two levels send at most a ring's worth.
        (_, Algorithm::DoubleTree | Algorithm::TwoLevel) => 2 * (n - 1) * n,
        // log2 P exchanges among P ranks, and the extra ranks folded in and out.
        (_, Algorithm::RecursiveDoubling) => n * (depth + 2),
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
            dst_offset: None,
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
