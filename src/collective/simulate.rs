//! Running a schedule on real numbers, and the answer it must give, computed independently.
//!
//! [`simulate`] replays a [`Schedule`] on per-rank buffers. [`reference`] computes the expected
//! result straight from the definitions (NCCL's documentation of each collective), never from a schedule; [`count_wrong`] compares
//! the two the way nccl-tests' `#wrong` column does.
//!
//! `Op::Avg` is a sum followed by one division by N at the end, applied to the part of each buffer
//! the collective defines (all of it for all-reduce, the root's for reduce, chunk r for
//! reduce-scatter). Integer sum and product wrap; integer average truncates toward zero.

use std::fmt::Debug;

use super::kinds::{Collective, Op};
use super::schedule::{Schedule, Step, chunk_of, chunk_range, defined_range};

/// Why buffers could not be simulated or checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The number of buffers is not the number of ranks.
    #[error("expected {expected} rank buffers, got {got}")]
    WrongRankCount { expected: usize, got: usize },
    /// A buffer has the wrong length.
    #[error("rank {rank}'s buffer has {got} elements, expected {expected}")]
    WrongLength {
        rank: usize,
        expected: usize,
        got: usize,
    },
    /// The root is not one of the ranks.
    #[error("root {root} is not a rank: ranks are 0..{ranks}")]
    RootOutOfRange { root: usize, ranks: usize },
}

/// A number the simulator can reduce.
pub trait Element: Copy + PartialEq + Debug {
    /// `op` applied to two elements (`Avg` combines like `Sum`).
    fn combine(op: Op, a: Self, b: Self) -> Self;
    /// Divides by the number of ranks (the end of `Op::Avg`).
    fn div_ranks(self, n: usize) -> Self;
}

macro_rules! int_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn combine(op: Op, a: Self, b: Self) -> Self {
                match op {
                    Op::Sum | Op::Avg => a.wrapping_add(b),
                    Op::Prod => a.wrapping_mul(b),
                    Op::Max => a.max(b),
                    Op::Min => a.min(b),
                }
            }
            fn div_ranks(self, n: usize) -> Self {
                // Through i128 so that n never truncates to the element width.
                (self as i128 / (n.max(1) as i128)) as $t
            }
        }
    )*};
}
int_element!(u8, i8, u32, i32, u64, i64);

macro_rules! float_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn combine(op: Op, a: Self, b: Self) -> Self {
                match op {
                    Op::Sum | Op::Avg => a + b,
                    Op::Prod => a * b,
                    Op::Max => a.max(b),
                    Op::Min => a.min(b),
                }
            }
            fn div_ranks(self, n: usize) -> Self {
                self / (n.max(1) as $t)
            }
        }
    )*};
}
float_element!(f32, f64);

fn check_shape<T>(ranks: usize, count: usize, bufs: &[Vec<T>]) -> Result<(), SimError> {
    if bufs.len() != ranks {
        return Err(SimError::WrongRankCount {
            expected: ranks,
            got: bufs.len(),
        });
    }
    match bufs.iter().position(|b| b.len() != count) {
        Some(rank) => Err(SimError::WrongLength {
            rank,
            expected: count,
            got: bufs[rank].len(),
        }),
        None => Ok(()),
    }
}

/// Applies one step to `bufs`: every transfer reads the state before the step (the sources are
/// copied to `scratch` first), then writes (`reduce == false`) or combines with `combine`.
/// Buffers must have the schedule's shape (callers check it first).
fn apply_step<T: Copy>(
    bufs: &mut [Vec<T>],
    step: &Step,
    scratch: &mut Vec<T>,
    combine: impl Fn(T, T) -> T,
) {
    scratch.clear();
    for t in &step.transfers {
        scratch.extend_from_slice(&bufs[t.src as usize][t.src_range()]);
    }
    let mut at = 0;
    for t in &step.transfers {
        let data = &scratch[at..at + t.len as usize];
        at += t.len as usize;
        let dst = &mut bufs[t.dst as usize][t.dst_range()];
        if t.reduce {
            dst.iter_mut()
                .zip(data)
                .for_each(|(d, &s)| *d = combine(*d, s));
        } else {
            dst.copy_from_slice(data);
        }
    }
}

/// Replays the first `steps` steps (clamped to the schedule's length) on copies of `inputs`,
/// combining with `combine`; no `Avg` division. The state at step k is exact whatever came before.
pub fn replay<T: Copy>(
    schedule: &Schedule,
    inputs: &[Vec<T>],
    steps: usize,
    combine: impl Fn(T, T) -> T,
) -> Result<Vec<Vec<T>>, SimError> {
    let spec = schedule.spec();
    check_shape(spec.ranks, spec.count, inputs)?;
    let mut bufs = inputs.to_vec();
    let mut scratch = Vec::new();
    for step in schedule.steps().iter().take(steps) {
        apply_step(&mut bufs, step, &mut scratch, &combine);
    }
    Ok(bufs)
}

/// Runs the whole schedule with `op` and returns every rank's final buffer (Avg divided).
pub fn simulate<T: Element>(
    schedule: &Schedule,
    op: Op,
    inputs: &[Vec<T>],
) -> Result<Vec<Vec<T>>, SimError> {
    let mut bufs = replay(schedule, inputs, schedule.len(), |a, b| {
        T::combine(op, a, b)
    })?;
    let spec = schedule.spec();
    if op == Op::Avg && spec.coll.is_reducing() {
        for (rank, buf) in bufs.iter_mut().enumerate() {
            buf[schedule.defined_range(rank)]
                .iter_mut()
                .for_each(|x| *x = x.div_ranks(spec.ranks));
        }
    }
    Ok(bufs)
}

/// The element a collective defines at index `i` of `rank`'s buffer, straight from the
/// definitions (NCCL's collective operations documentation), given every rank's input through `input(rank, i)`; `None` where the
/// collective leaves the element undefined (outside chunk r for reduce-scatter, non-root ranks
/// for reduce) and for out-of-range arguments (n = 0, root/rank ≥ n, i ≥ count). Streaming, so a
/// checker never needs every rank's buffer in memory.
#[allow(clippy::too_many_arguments)]
pub fn expected_at<T: Element>(
    op: Op,
    collective: Collective,
    n: usize,
    root: usize,
    count: usize,
    rank: usize,
    i: usize,
    input: impl Fn(usize, usize) -> T,
) -> Option<T> {
    if n == 0 || root >= n || rank >= n || i >= count {
        return None;
    }
    let fold = || {
        let mut acc = input(0, i);
        for r in 1..n {
            acc = T::combine(op, acc, input(r, i));
        }
        if op == Op::Avg { acc.div_ranks(n) } else { acc }
    };
    match collective {
        Collective::AllReduce => Some(fold()),
        Collective::ReduceScatter => chunk_range(count, n, rank).contains(&i).then(fold),
        Collective::Reduce => (rank == root).then(fold),
        Collective::Broadcast => Some(input(root, i)),
        Collective::AllGather => chunk_of(count, n, i).map(|c| input(c, i)),
        Collective::SendRecv => Some(input((rank + n - 1) % n, i)),
        // Block r of rank j holds block j of rank r; the tail past N whole blocks is undefined.
        Collective::AllToAll => {
            let b = count / n;
            (i < b * n).then(|| input(i / b, rank * b + i % b))
        }
    }
}

/// What each rank must hold after the collective, from the definitions (never from a
/// schedule): the defined part of every rank's buffer (see [`expected_at`]).
pub fn reference<T: Element>(
    op: Op,
    collective: Collective,
    inputs: &[Vec<T>],
    root: usize,
) -> Result<Vec<Vec<T>>, SimError> {
    let n = inputs.len();
    let count = inputs.first().map_or(0, Vec::len);
    check_shape(n, count, inputs)?;
    if root >= n {
        return Err(SimError::RootOutOfRange { root, ranks: n });
    }
    Ok((0..n)
        .map(|r| {
            (0..count)
                .filter_map(|i| {
                    expected_at(op, collective, n, root, count, r, i, |src, j| {
                        inputs[src][j]
                    })
                })
                .collect()
        })
        .collect())
}

/// Elements of `outputs` that differ from `expected` (a [`reference`] result), counting only each
/// rank's defined range, like nccl-tests' `#wrong`.
pub fn count_wrong<T: Element>(
    collective: Collective,
    root: usize,
    outputs: &[Vec<T>],
    expected: &[Vec<T>],
) -> Result<usize, SimError> {
    let n = outputs.len();
    let count = outputs.first().map_or(0, Vec::len);
    check_shape(n, count, outputs)?;
    if expected.len() != n {
        return Err(SimError::WrongRankCount {
            expected: n,
            got: expected.len(),
        });
    }
    let mut wrong = 0;
    for (rank, (out, exp)) in outputs.iter().zip(expected).enumerate() {
        let got = &out[defined_range(collective, count, n, rank, root)];
        if got.len() != exp.len() {
            return Err(SimError::WrongLength {
                rank,
                expected: got.len(),
                got: exp.len(),
            });
        }
        wrong += got.iter().zip(exp).filter(|(a, b)| a != b).count();
    }
    Ok(wrong)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Algorithm, Spec};

    fn inputs(n: usize, count: usize) -> Vec<Vec<i64>> {
        (0..n)
            .map(|r| (0..count).map(|i| (r * 100 + i) as i64).collect())
            .collect()
    }

    #[test]
    fn ring_allreduce_sums_on_every_rank() {
        let s =
            Schedule::build(&Spec::new(Collective::AllReduce, Algorithm::Ring, 3, 5, 8)).unwrap();
        let out = simulate(&s, Op::Sum, &inputs(3, 5)).unwrap();
        let want: Vec<i64> = (0..5).map(|i| 300 + 3 * i).collect();
        assert!(out.iter().all(|b| *b == want), "{out:?}");
    }

    #[test]
    fn sendrecv_with_two_ranks_swaps_simultaneously() {
        let s =
            Schedule::build(&Spec::new(Collective::SendRecv, Algorithm::Ring, 2, 2, 8)).unwrap();
        let out = simulate(&s, Op::Sum, &inputs(2, 2)).unwrap();
        assert_eq!(out, vec![vec![100, 101], vec![0, 1]]);
    }

    #[test]
    fn avg_divides_once_at_the_end() {
        let s =
            Schedule::build(&Spec::new(Collective::AllReduce, Algorithm::Tree, 4, 2, 4)).unwrap();
        let ins: Vec<Vec<i32>> = (0..4).map(|r| vec![r * 4, 3]).collect();
        let out = simulate(&s, Op::Avg, &ins).unwrap();
        assert!(out.iter().all(|b| *b == vec![6, 3]), "{out:?}");
        assert_eq!(
            reference(Op::Avg, Collective::AllReduce, &ins, 0).unwrap()[2],
            vec![6, 3]
        );
    }

    #[test]
    fn wrong_shapes_are_errors_not_panics() {
        let s =
            Schedule::build(&Spec::new(Collective::AllReduce, Algorithm::Ring, 3, 5, 8)).unwrap();
        assert_eq!(
            simulate(&s, Op::Sum, &inputs(2, 5)),
            Err(SimError::WrongRankCount {
                expected: 3,
                got: 2
            })
        );
        assert!(matches!(
            simulate(&s, Op::Sum, &inputs(3, 4)),
            Err(SimError::WrongLength { .. })
        ));
        assert!(reference(Op::Sum, Collective::Reduce, &inputs(3, 4), 3).is_err());
    }

    #[test]
    fn count_wrong_ignores_undefined_regions() {
        let ins = inputs(3, 6);
        let exp = reference(Op::Sum, Collective::ReduceScatter, &ins, 0).unwrap();
        let mut out = vec![vec![0; 6]; 3];
        for (r, e) in exp.iter().enumerate() {
            out[r][chunk_range(6, 3, r)].copy_from_slice(e);
        }
        assert_eq!(count_wrong(Collective::ReduceScatter, 0, &out, &exp), Ok(0));
        out[1][2] += 1;
        assert_eq!(count_wrong(Collective::ReduceScatter, 0, &out, &exp), Ok(1));
    }
}
