//! Inputs crafted so the exact result is known, as nccl-tests does: small integers whose sums,
//! products, maxima and minima are exact in every type (bf16 included, for up to 64 ranks),
//! and the checker that counts wrong elements against the collective's definition.

use bytemuck::Pod;
use half::{bf16, f16};

use crate::collective::simulate::{Element, expected_at};
use crate::collective::{Collective, Dtype, Op};

/// The value rank `rank` puts at element `i`, before conversion to the element type.
pub fn value(op: Op, n: usize, rank: usize, i: usize) -> f64 {
    match op {
        // Sums stay ≤ 2N: exact in bf16 (8-bit mantissa) up to N = 64.
        Op::Sum | Op::Avg => ((rank + i) % 3) as f64,
        // Exactly one rank contributes a 2 per element: every product is 2.
        Op::Prod => {
            if (i + rank).is_multiple_of(n.max(1)) {
                2.0
            } else {
                1.0
            }
        }
        Op::Max | Op::Min => ((rank * 7 + i) % 5) as f64,
    }
}

trait FromF64: Pod + Element {
    fn from_f64(v: f64) -> Self;
}
macro_rules! from_f64 {
    ($($t:ty),*) => {$( impl FromF64 for $t { fn from_f64(v: f64) -> Self { v as $t } } )*};
}
from_f64!(u8, i8, i32, u32, i64, u64, f32, f64);
impl FromF64 for f16 {
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
}
impl FromF64 for bf16 {
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
}

fn fill_typed<T: FromF64>(buf: &mut [u8], op: Op, n: usize, rank: usize) {
    let size = std::mem::size_of::<T>();
    for (i, c) in buf.chunks_exact_mut(size).enumerate() {
        c.copy_from_slice(bytemuck::bytes_of(&T::from_f64(value(op, n, rank, i))));
    }
}

/// What a checked run needs to know.
#[derive(Debug, Clone, Copy)]
pub struct Check {
    pub coll: Collective,
    pub op: Op,
    pub dtype: Dtype,
    pub ranks: usize,
    pub root: usize,
    pub rank: usize,
}

#[allow(clippy::too_many_arguments)]
fn wrong_typed<T: FromF64>(buf: &[u8], c: &Check) -> u64 {
    let size = std::mem::size_of::<T>();
    let count = buf.len() / size;
    let input = |r: usize, i: usize| T::from_f64(value(c.op, c.ranks, r, i));
    buf.chunks_exact(size)
        .enumerate()
        .filter(|(i, got)| {
            expected_at(c.op, c.coll, c.ranks, c.root, count, c.rank, *i, input)
                .is_some_and(|want| bytemuck::pod_read_unaligned::<T>(got) != want)
        })
        .count() as u64
}

macro_rules! by_dtype {
    ($dtype:expr, $f:ident, $($arg:expr),*) => {
        match $dtype {
            Dtype::U8 => $f::<u8>($($arg),*),
            Dtype::I8 => $f::<i8>($($arg),*),
            Dtype::I32 => $f::<i32>($($arg),*),
            Dtype::U32 => $f::<u32>($($arg),*),
            Dtype::I64 => $f::<i64>($($arg),*),
            Dtype::U64 => $f::<u64>($($arg),*),
            Dtype::F16 => $f::<f16>($($arg),*),
            Dtype::Bf16 => $f::<bf16>($($arg),*),
            Dtype::F32 => $f::<f32>($($arg),*),
            Dtype::F64 => $f::<f64>($($arg),*),
        }
    };
}

/// Fill `buf` with this rank's input.
pub fn fill(buf: &mut [u8], c: &Check) {
    by_dtype!(c.dtype, fill_typed, buf, c.op, c.ranks, c.rank)
}

/// Elements of `buf` (this rank's result) that differ from the definition (nccl-tests' #wrong).
pub fn wrong(buf: &[u8], c: &Check) -> u64 {
    by_dtype!(c.dtype, wrong_typed, buf, c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Algorithm, Schedule, Spec, simulate};

    /// The crafted inputs, run through the simulator, check as zero wrong on every rank, and a
    /// flipped element is caught.
    #[test]
    fn simulated_results_check_clean_and_corruption_is_counted() {
        for coll in Collective::ALL {
            for op in [Op::Sum, Op::Prod, Op::Max, Op::Avg] {
                let (n, count) = (4, 10);
                let spec = Spec::new(coll, Algorithm::Ring, n, count, 4);
                let schedule = Schedule::build(&spec).expect("schedule");
                let inputs: Vec<Vec<f32>> = (0..n)
                    .map(|r| (0..count).map(|i| value(op, n, r, i) as f32).collect())
                    .collect();
                let out = simulate::simulate(&schedule, op, &inputs).expect("simulate");
                for (r, buf) in out.iter().enumerate() {
                    let c = Check {
                        coll,
                        op,
                        dtype: Dtype::F32,
                        ranks: n,
                        root: 0,
                        rank: r,
                    };
                    let bytes: &[u8] = bytemuck::cast_slice(buf);
                    assert_eq!(wrong(bytes, &c), 0, "{coll:?} {op:?} rank {r}");
                }
                let mut bad = out[0].clone();
                bad[0] += 100.0;
                let c = Check {
                    coll,
                    op,
                    dtype: Dtype::F32,
                    ranks: n,
                    root: 0,
                    rank: 0,
                };
                let defined = !matches!(coll, Collective::ReduceScatter | Collective::Reduce)
                    || coll == Collective::Reduce;
                if defined {
                    assert_eq!(wrong(bytemuck::cast_slice(&bad), &c), 1, "{coll:?} {op:?}");
                }
            }
        }
    }
}
