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

/// The value rank `rank` puts at element `i` of a `count`-element buffer for the call `c`:
/// [`value`], except for all-to-all, where what a rank sends is only moved, never combined, so
/// the value can name its block instead: rank r's element o of block j (what r means for j)
/// is (r·N + j + o) mod 128. Any block delivered to the wrong rank or the wrong place differs
/// (for N ≤ 11 always, as r·N + j < 128; beyond that unless 128 divides the difference), and
/// 0..128 is exact in every type, i8 and bf16 included.
pub fn input(c: &Check, count: usize, rank: usize, i: usize) -> f64 {
    if c.coll != Collective::AllToAll {
        return value(c.op, c.ranks, rank, i);
    }
    let b = (count / c.ranks.max(1)).max(1);
    ((rank * c.ranks + i / b + i % b) % 128) as f64
}

trait FromF64: Pod + Element {
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    /// The unit roundoff of a floating type (2^-p for p significant bits); None for integers.
    const ROUNDOFF: Option<f64>;
}
macro_rules! from_f64 {
    ($($t:ty => $u:expr),*) => {$( impl FromF64 for $t {
        fn from_f64(v: f64) -> Self { v as $t }
        fn to_f64(self) -> f64 { self as f64 }
        const ROUNDOFF: Option<f64> = $u;
    } )*};
}
from_f64!(u8 => None, i8 => None, i32 => None, u32 => None, i64 => None, u64 => None,
    f32 => Some(f32::EPSILON as f64 / 2.0), f64 => Some(f64::EPSILON / 2.0));
impl FromF64 for f16 {
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
    fn to_f64(self) -> f64 {
        f16::to_f64(self)
    }
    const ROUNDOFF: Option<f64> = Some(1.0 / 2048.0);
}
impl FromF64 for bf16 {
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
    const ROUNDOFF: Option<f64> = Some(1.0 / 256.0);
}

/// How far a float average may be from the exact one and still be right. NCCL computes
/// ncclAvg on floating types as a sum of pre-multiplied terms, Σ fl(x_r · fl(1/n)) in the
/// element type (enqueue.cc: `ncclDevPreMulSum` with `1.0/nRanks`): one rounding for 1/n, one
/// per product and one per addition. With u the unit roundoff and non-negative inputs, the
/// error is at most about (n + 1)·u·avg; the checker's own expected value adds one more
/// rounding, so the bound is (n + 2)·u·|want|. Exact (zero) for integer types, and in practice
/// for n a power of two, where 1/n and every product are exact.
pub fn avg_tolerance(n: usize, roundoff: f64, want: f64) -> f64 {
    (n as f64 + 2.0) * roundoff * want.abs()
}

fn fill_typed<T: FromF64>(buf: &mut [u8], c: &Check) {
    let size = std::mem::size_of::<T>();
    let count = buf.len() / size;
    for (i, e) in buf.chunks_exact_mut(size).enumerate() {
        e.copy_from_slice(bytemuck::bytes_of(&T::from_f64(input(c, count, c.rank, i))));
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
    let input = |r: usize, i: usize| T::from_f64(input(c, count, r, i));
    let tolerant = if c.op == Op::Avg { T::ROUNDOFF } else { None };
    buf.chunks_exact(size)
        .enumerate()
        .filter(|(i, got)| {
            expected_at(c.op, c.coll, c.ranks, c.root, count, c.rank, *i, input).is_some_and(
                |want| {
                    let got = bytemuck::pod_read_unaligned::<T>(got);
                    match tolerant {
                        // NaN (the poison) is never within any tolerance.
                        Some(u) => {
                            let (g, w) = (got.to_f64(), want.to_f64());
                            let off = (g - w).abs();
                            off.is_nan() || off > avg_tolerance(c.ranks, u, w)
                        }
                        None => got != want,
                    }
                },
            )
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
    by_dtype!(c.dtype, fill_typed, buf, c)
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
                let c = |rank| Check {
                    coll,
                    op,
                    dtype: Dtype::F32,
                    ranks: n,
                    root: 0,
                    rank,
                };
                let inputs: Vec<Vec<f32>> = (0..n)
                    .map(|r| {
                        (0..count)
                            .map(|i| input(&c(r), count, r, i) as f32)
                            .collect()
                    })
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

    /// NCCL's float average: every term pre-multiplied by fl(1/n) in the element type, then
    /// summed in the element type, as ncclDevPreMulSum does.
    fn nccl_avg<T: FromF64>(xs: &[f64]) -> T {
        let n = xs.len();
        let inv = T::from_f64(1.0 / n as f64);
        let mut acc = T::from_f64(0.0);
        for &x in xs {
            let term = T::from_f64(T::from_f64(x).to_f64() * inv.to_f64());
            acc = T::from_f64(acc.to_f64() + term.to_f64());
        }
        acc
    }

    fn avg_wrong<T: FromF64>(dtype: Dtype, n: usize, count: usize) -> u64 {
        let mut out = Vec::new();
        for i in 0..count {
            let xs: Vec<f64> = (0..n).map(|r| value(Op::Avg, n, r, i)).collect();
            out.extend_from_slice(bytemuck::bytes_of(&nccl_avg::<T>(&xs)));
        }
        let c = Check {
            coll: Collective::AllReduce,
            op: Op::Avg,
            dtype,
            ranks: n,
            root: 0,
            rank: 0,
        };
        wrong(&out, &c)
    }

    #[test]
    fn ncclavg_rounding_is_not_counted_wrong_but_a_wrong_average_is() {
        for n in [2, 3, 5, 6, 7, 12] {
            assert_eq!(avg_wrong::<f32>(Dtype::F32, n, 64), 0, "f32 n={n}");
            assert_eq!(avg_wrong::<f64>(Dtype::F64, n, 64), 0, "f64 n={n}");
            assert_eq!(avg_wrong::<f16>(Dtype::F16, n, 64), 0, "f16 n={n}");
            assert_eq!(avg_wrong::<bf16>(Dtype::Bf16, n, 64), 0, "bf16 n={n}");
        }
        // The tolerance is tight enough to catch a wrong divisor or a missing contribution.
        let c = Check {
            coll: Collective::AllReduce,
            op: Op::Avg,
            dtype: Dtype::Bf16,
            ranks: 3,
            root: 0,
            rank: 0,
        };
        let sum_of = |i: usize| (0..3).map(|r| value(Op::Avg, 3, r, i)).sum::<f64>();
        let off: Vec<u8> = (0..16)
            .flat_map(|i| bf16::from_f64(sum_of(i) / 2.0).to_ne_bytes())
            .collect();
        let nonzero = (0..16).filter(|&i| sum_of(i) != 0.0).count() as u64;
        assert_eq!(
            wrong(&off, &c),
            nonzero,
            "a sum over 2 is not an average over 3"
        );
        let nan: Vec<u8> = vec![0xFF; 32];
        assert_eq!(wrong(&nan, &c), 16, "the poison is always wrong");
    }
}

#[cfg(test)]
mod alltoall_tests {
    use super::*;

    /// Every wrong delivery of a block is counted: a block from the wrong peer, or the right
    /// peer's block meant for someone else, or shifted by one element.
    #[test]
    fn alltoall_misdelivery_is_always_wrong() {
        for n in [2usize, 3, 5, 8, 11] {
            let count = 4 * n + 3;
            let b = count / n;
            let c = |rank| Check {
                coll: Collective::AllToAll,
                op: Op::Sum,
                dtype: Dtype::I8,
                ranks: n,
                root: 0,
                rank,
            };
            let sent = |r: usize, i: usize| input(&c(r), count, r, i) as i8;
            for j in 0..n {
                // The right answer: block r of rank j is block j of rank r.
                let good: Vec<i8> = (0..count)
                    .map(|i| {
                        if i < n * b {
                            sent(i / b, j * b + i % b)
                        } else {
                            0
                        }
                    })
                    .collect();
                assert_eq!(
                    wrong(bytemuck::cast_slice(&good), &c(j)),
                    0,
                    "n={n} rank {j}"
                );
                for r in 0..n {
                    for k in (0..n).filter(|&k| k != j) {
                        let mut bad = good.clone();
                        for o in 0..b {
                            bad[r * b + o] = sent(r, k * b + o);
                        }
                        assert_eq!(wrong(bytemuck::cast_slice(&bad), &c(j)), b as u64);
                    }
                    let mut shifted = good.clone();
                    shifted[r * b..(r + 1) * b].rotate_left(1);
                    assert_eq!(wrong(bytemuck::cast_slice(&shifted), &c(j)), b as u64);
                }
            }
        }
    }
}
