//! Rotary position embedding (`shaders/rope.wgsl`).

use super::check_u32;
use crate::exec::{check_f16, enables, groups_1d, Launch, Params};
use crate::ops::elementwise::with_special;
use crate::pipeline::render;
use crate::tensor::Tensor;
use crate::{Error, Result};

const ROPE: &str = include_str!("../../../../shaders/rope.wgsl");
/// The rotation angles, the same source as `ops::rope_qkv_to_cache`'s (appended: `enable` comes
/// first).
const ROPE_COMMON: &str = include_str!("../../../../shaders/rope_common.wgsl");

/// Rotary position embedding over the last axis of x [..., L, D], rotate-half convention:
/// for i < D/2 the pair (x[i], x[i + D/2]) at position l is rotated by the angle
/// (pos_offset + l) * base^(-2i/D). D must be even. Float dtypes; f16 computes in f32.
pub fn rope(x: &Tensor, pos_offset: usize, base: f32) -> Result<Tensor> {
    let dtype = x.dtype();
    if !dtype.is_float() {
        return Err(Error::DTypeMismatch(format!("rope needs a float tensor (f32 or f16), got {dtype}")));
    }
    let rank = x.ndim();
    if rank < 2 {
        return Err(Error::InvalidArgument(format!("rope: x must be [..., L, D], got shape {:?}", x.shape())));
    }
    let (len, d) = (x.shape()[rank - 2], x.shape()[rank - 1]);
    if d % 2 != 0 {
        return Err(Error::InvalidArgument(format!("rope: the last dimension must be even, got {d}")));
    }
    if !(base.is_finite() && base > 0.0) {
        return Err(Error::InvalidArgument(format!("rope: base must be positive and finite, got {base}")));
    }
    if pos_offset.checked_add(len).is_none_or(|p| p > u32::MAX as usize) {
        return Err(Error::InvalidArgument(format!("rope: positions up to {pos_offset} + {len} do not fit in u32")));
    }
    let device = x.device().clone();
    check_f16(&device, &[dtype])?;
    let out = Tensor::empty_on(&device, x.shape(), dtype)?;
    let pairs = x.numel() / 2;
    if pairs == 0 {
        return Ok(out);
    }
    check_u32("rope", x.numel())?;
    let half = d / 2;
    let params = Params::new()
        .u32(pairs)
        .u32(half)
        .u32(len)
        .u32(pos_offset)
        .f32((base as f64).log2() as f32)
        .f32((1.0 / half as f64) as f32)
        .u32(0u32)
        .u32(0u32);
    let enable = enables(&[dtype]);
    Launch {
        key: format!("rope:{dtype}"),
        source: Box::new(move || with_special(render(ROPE, &[("ENABLE", enable), ("T", dtype.wgsl())]) + ROPE_COMMON)),
        tensors: &[x, &out],
        params: Some(params),
        groups: groups_1d(&device, pairs)?,
    }
    .run(&device)?;
    Ok(out)
}
