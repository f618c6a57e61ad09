//! A decoder's KV cache written in place (`shaders/rope_kv_cache.wgsl`): the fused QKV
//! projection of new positions is split into heads, RoPE'd, and its keys and values stored into
//! caches allocated once for many positions, so that a decode step neither copies the cache
//! (as concatenation would, O(len) bytes per token) nor spends dispatches on splits and
//! transposes. [`crate::ops::attention_prefix`] then reads the filled prefix in place.

use crate::exec::{check_f16, check_indexable, check_same_device, enables, groups_1d, Launch, Params};
use crate::ops::elementwise::with_special;
use crate::pipeline::render;
use crate::tensor::Tensor;
use crate::{Error, Result};

const ROPE_KV_CACHE: &str = include_str!("../../../shaders/rope_kv_cache.wgsl");
/// The rotation angles, the same source as `ops::rope`'s (appended: `enable` comes first).
const ROPE_COMMON: &str = include_str!("../../../shaders/rope_common.wgsl");

/// Splits `qkv` [L, (H + 2·Hkv)·D] — per position the H query heads, then the Hkv key heads,
/// then the Hkv value heads, D values each — applies [`crate::ops::rope`]'s rotation (positions
/// `pos .. pos + L`, `base`) to queries and keys, writes keys and values **into** `k_cache` and
/// `v_cache` ([Hkv, Lmax, D] each) at rows `pos .. pos + L`, and returns the queries [H, L, D].
/// Rows of the caches outside that range are left as they are. Float dtypes; all of one dtype.
pub fn rope_qkv_to_cache(
    qkv: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    n_heads: usize,
    pos: usize,
    base: f32,
) -> Result<Tensor> {
    let device = check_same_device(&[qkv, k_cache, v_cache])?;
    let dtype = qkv.dtype();
    if !dtype.is_float() || k_cache.dtype() != dtype || v_cache.dtype() != dtype {
        return Err(Error::DTypeMismatch(format!(
            "rope_qkv_to_cache: qkv {dtype}, caches {} and {}: one float dtype",
            k_cache.dtype(),
            v_cache.dtype()
        )));
    }
    check_f16(&device, &[dtype])?;
    let cs = k_cache.shape();
    if cs.len() != 3 || v_cache.shape() != cs {
        return Err(Error::ShapeMismatch(format!(
            "rope_qkv_to_cache: caches must both be [Hkv, Lmax, D], got {cs:?} and {:?}",
            v_cache.shape()
        )));
    }
    let (nkv, cap, d) = (cs[0], cs[1], cs[2]);
    if d == 0 || d % 2 != 0 {
        return Err(Error::InvalidArgument(format!("rope_qkv_to_cache: head dimension {d} must be even and > 0")));
    }
    let width = (n_heads + 2 * nkv) * d;
    if qkv.ndim() != 2 || qkv.shape()[1] != width {
        return Err(Error::ShapeMismatch(format!(
            "rope_qkv_to_cache: qkv must be [L, {width}] for {n_heads} heads and {nkv} KV heads of {d}, got {:?}",
            qkv.shape()
        )));
    }
    let len = qkv.shape()[0];
    if pos.checked_add(len).is_none_or(|end| end > cap) {
        return Err(Error::InvalidArgument(format!(
            "rope_qkv_to_cache: rows {pos}..{pos}+{len} do not fit a cache of {cap} rows"
        )));
    }
    if !(base.is_finite() && base > 0.0) {
        return Err(Error::InvalidArgument(format!("rope_qkv_to_cache: base must be positive and finite, got {base}")));
    }
    if k_cache.shares_buffer(v_cache) || k_cache.shares_buffer(qkv) || v_cache.shares_buffer(qkv) {
        return Err(Error::InvalidArgument(
            "rope_qkv_to_cache: qkv and the two caches must be distinct tensors".into(),
        ));
    }
    for t in [qkv, k_cache, v_cache] {
        check_indexable(t.numel())?;
    }
    let q = Tensor::empty_on(&device, &[n_heads, len, d], dtype)?;
    let half = d / 2;
    let pairs = len * (n_heads + 2 * nkv) * half;
    if pairs == 0 {
        return Ok(q);
    }
    let params = Params::new()
        .u32(pairs)
        .u32(half)
        .u32(len)
        .u32(pos)
        .f32((base as f64).log2() as f32)
        .f32((1.0 / half as f64) as f32)
        .u32(n_heads)
        .u32(nkv)
        .u32(cap)
        .u32(0u32)
        .u32(0u32)
        .u32(0u32);
    let enable = enables(&[dtype]);
    Launch {
        key: format!("rope_kv_cache:{dtype}"),
        source: Box::new(move || {
            with_special(render(ROPE_KV_CACHE, &[("ENABLE", enable), ("T", dtype.wgsl())]) + ROPE_COMMON)
        }),
        tensors: &[qkv, &q, k_cache, v_cache],
        params: Some(params),
        groups: groups_1d(&device, pairs)?,
    }
    .run(&device)?;
    Ok(q)
}
