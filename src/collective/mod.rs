//! Collective schedules: the one source of truth for who sends what to whom.
//!
//! A collective is a [`Schedule`]: ordered [`Step`]s, each a list of simultaneous [`Transfer`]s
//! (src rank, dst rank, element range, reduce-or-copy). [`Schedule::build`] makes one for every
//! [`Collective`] × [`Algorithm`]; the animation, the cost model, quizzes, lesson tables, the JSON
//! report and the TCP backend all read it. Nothing outside this module computes chunk ranges or
//! bytes per rank: use [`chunk_range`], [`Schedule::chunk`], [`traffic`], [`sent_through`].
//!
//! Step counts (N ranks; every schedule with N = 1 has 0 steps; D = ⌊log2 N⌋):
//!
//! | collective     | ring                 | naive | tree |
//! |----------------|----------------------|-------|------|
//! | all-reduce     | 2(N−1)               | 2     | 2D   |
//! | reduce-scatter | N−1                  | 2     | 2D   |
//! | all-gather     | N−1                  | 2     | 2D   |
//! | broadcast      | 2N−2 (pipelined chain, N chunks) | 1 | D |
//! | reduce         | 2N−2 (pipelined chain, N chunks) | 1 | D |
//! | sendrecv       | 1                    | 1     | 1    |
//! | all-to-all     | ⌊N/2⌋ (every algorithm: swaps at ring distance 1, 2, …) | | |
//!
//! All-reduce only: double-tree (NCCL's two trees, pipelined) max over the trees of 2·h + K − 1
//! (h its height, K its chunks, ⌈N/2⌉ and ⌊N/2⌋); two-level (N = nodes P × GPUs G) 2(G−1) + 2(P−1).
//! Other collectives on those two are [`ScheduleError::Unsupported`].
//!
//! Modules: `schedule` (data and chunking), `ring`/`naive`/`tree`/`dtree`/`twolevel`/`alltoall`
//! (builders), `simulate` (numbers and the independent reference), `contrib` (who holds whose
//! data), `cost` (bytes, busbw, alpha–beta, topology), `report` (JSON).

mod alltoall;
pub mod contrib;
pub mod cost;
pub mod dtree;
pub mod kinds;
mod naive;
pub mod rdouble;
pub mod report;
mod ring;
pub mod schedule;
pub mod simulate;
mod tree;
pub mod tune;
mod twolevel;

pub use contrib::{ContribError, Contributions, MAX_CONTRIB_RANKS};
pub use cost::{
    Estimate, LINK_PRESETS, Link, RankBytes, SlowNode, Topology, Traffic, algbw_gbps, busbw_factor,
    busbw_gbps, dtree_pipelined_estimate, estimate, estimate_on, estimate_shaped,
    ring_allreduce_bytes_per_rank, sent_through, traffic, tree_ring_crossover_bytes,
};
pub use kinds::{Algorithm, Collective, Dtype, Op, ParseError};
pub use report::{Report, report};
pub use schedule::{
    MAX_BUFFER_BYTES, MAX_RANKS, MAX_TRANSFERS, Phase, Schedule, ScheduleError, Spec, Step,
    Transfer, block_range, chunk_of, chunk_range, default_gpus_per_node, defined_range,
    node_shape_note,
};
pub use simulate::{Element, SimError, count_wrong, reference, replay, simulate};
