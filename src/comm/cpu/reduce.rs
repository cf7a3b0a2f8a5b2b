//! Reduction kernels over raw buffer bytes: one tight, vectorisable loop per (type, op). The
//! buffers are 8-byte aligned by construction ([`AlignedBuf`]); a misaligned slice still works
//! through a slower path, never a panic.

use bytemuck::Pod;
use half::{bf16, f16};

use crate::collective::simulate::Element;
use crate::collective::{Dtype, Op};

/// `dst[i] = op(dst[i], src[i])` over whole elements.
pub type ReduceFn = fn(Op, &mut [u8], &[u8]);

/// A byte buffer whose start is 8-byte aligned, so any element type can view it.
#[derive(Debug, Clone, Default)]
pub struct AlignedBuf {
    words: Vec<u64>,
    len: usize,
}

/// A buffer the allocator refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("allocating {len} bytes: {source}")]
pub struct AllocError {
    pub len: usize,
    pub source: std::collections::TryReserveError,
}

impl AlignedBuf {
    pub fn zeroed(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(8)],
            len,
        }
    }
    /// Like [`AlignedBuf::zeroed`], but a failed allocation is an error, not an abort.
    pub fn try_zeroed(len: usize) -> Result<Self, AllocError> {
        let n = len.div_ceil(8);
        let mut words = Vec::new();
        words
            .try_reserve_exact(n)
            .map_err(|source| AllocError { len, source })?;
        words.resize(n, 0);
        Ok(Self { words, len })
    }

    /// Grow (never shrink) to at least `len` bytes.
    pub fn reserve_len(&mut self, len: usize) {
        if len > self.len {
            self.words.resize(len.div_ceil(8), 0);
            self.len = len;
        }
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }
}

#[inline]
fn apply<T: Pod>(dst: &mut [u8], src: &[u8], f: impl Fn(T, T) -> T) {
    match (
        bytemuck::try_cast_slice_mut::<u8, T>(dst),
        bytemuck::try_cast_slice::<u8, T>(src),
    ) {
        (Ok(d), Ok(s)) => d.iter_mut().zip(s).for_each(|(a, &b)| *a = f(*a, b)),
        _ => {
            let size = std::mem::size_of::<T>();
            for (d, s) in dst.chunks_exact_mut(size).zip(src.chunks_exact(size)) {
                let v = f(
                    bytemuck::pod_read_unaligned(d),
                    bytemuck::pod_read_unaligned(s),
                );
                d.copy_from_slice(bytemuck::bytes_of(&v));
            }
        }
    }
}

/// Monomorphic loops per op: the compiler vectorises each one.
fn typed<T: Pod + Element>(op: Op, dst: &mut [u8], src: &[u8]) {
    match op {
        Op::Sum | Op::Avg => apply::<T>(dst, src, |a, b| T::combine(Op::Sum, a, b)),
        Op::Prod => apply::<T>(dst, src, |a, b| T::combine(Op::Prod, a, b)),
        Op::Max => apply::<T>(dst, src, |a, b| T::combine(Op::Max, a, b)),
        Op::Min => apply::<T>(dst, src, |a, b| T::combine(Op::Min, a, b)),
    }
}

pub fn kernel(dtype: Dtype) -> ReduceFn {
    match dtype {
        Dtype::U8 => typed::<u8>,
        Dtype::I8 => typed::<i8>,
        Dtype::I32 => typed::<i32>,
        Dtype::U32 => typed::<u32>,
        Dtype::I64 => typed::<i64>,
        Dtype::U64 => typed::<u64>,
        Dtype::F16 => typed::<f16>,
        Dtype::Bf16 => typed::<bf16>,
        Dtype::F32 => typed::<f32>,
        Dtype::F64 => typed::<f64>,
    }
}

fn div_typed<T: Pod + Element>(buf: &mut [u8], n: usize) {
    let size = std::mem::size_of::<T>();
    for c in buf.chunks_exact_mut(size) {
        let v: T = bytemuck::pod_read_unaligned(c);
        c.copy_from_slice(bytemuck::bytes_of(&v.div_ranks(n)));
    }
}

/// The end of `Op::Avg`: divide every element by the number of ranks.
pub fn divide(dtype: Dtype, buf: &mut [u8], n: usize) {
    match dtype {
        Dtype::U8 => div_typed::<u8>(buf, n),
        Dtype::I8 => div_typed::<i8>(buf, n),
        Dtype::I32 => div_typed::<i32>(buf, n),
        Dtype::U32 => div_typed::<u32>(buf, n),
        Dtype::I64 => div_typed::<i64>(buf, n),
        Dtype::U64 => div_typed::<u64>(buf, n),
        Dtype::F16 => div_typed::<f16>(buf, n),
        Dtype::Bf16 => div_typed::<bf16>(buf, n),
        Dtype::F32 => div_typed::<f32>(buf, n),
        Dtype::F64 => div_typed::<f64>(buf, n),
    }
}

macro_rules! half_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn combine(op: Op, a: Self, b: Self) -> Self {
                let (x, y) = (a.to_f32(), b.to_f32());
                <$t>::from_f32(match op {
                    Op::Sum | Op::Avg => x + y,
                    Op::Prod => x * y,
                    Op::Max => x.max(y),
                    Op::Min => x.min(y),
                })
            }
            fn div_ranks(self, n: usize) -> Self {
                <$t>::from_f32(self.to_f32() / n.max(1) as f32)
            }
        }
    )*};
}
half_element!(f16, bf16);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_sum_and_max() {
        let mut a = AlignedBuf::zeroed(16);
        a.bytes_mut()
            .copy_from_slice(bytemuck::cast_slice(&[1.0f32, 2.0, 3.0, 4.0]));
        let b: Vec<u8> = bytemuck::cast_slice(&[10.0f32, 0.5, 3.5, -1.0]).to_vec();
        kernel(Dtype::F32)(Op::Sum, a.bytes_mut(), &b);
        assert_eq!(
            bytemuck::cast_slice::<u8, f32>(a.bytes()),
            &[11.0, 2.5, 6.5, 3.0]
        );
        kernel(Dtype::F32)(Op::Max, a.bytes_mut(), &b);
        assert_eq!(
            bytemuck::cast_slice::<u8, f32>(a.bytes()),
            &[11.0, 2.5, 6.5, 3.0]
        );
    }

    #[test]
    fn misaligned_slices_take_the_slow_path_not_a_panic() {
        let mut a = [0u8; 9];
        let b = [1u8; 9];
        kernel(Dtype::I32)(Op::Sum, &mut a[1..9], &b[1..9]);
        assert_eq!(i32::from_le_bytes([a[1], a[2], a[3], a[4]]), 0x01010101);
    }

    #[test]
    fn bf16_sum_and_avg() {
        let mut a: Vec<u8> = bytemuck::cast_slice(&[bf16::from_f32(3.0)]).to_vec();
        let b: Vec<u8> = bytemuck::cast_slice(&[bf16::from_f32(5.0)]).to_vec();
        kernel(Dtype::Bf16)(Op::Sum, &mut a, &b);
        divide(Dtype::Bf16, &mut a, 2);
        assert_eq!(bytemuck::pod_read_unaligned::<bf16>(&a).to_f32(), 4.0);
    }
}
