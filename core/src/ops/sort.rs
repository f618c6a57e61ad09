//! sort, argsort and topk along one axis: a bitonic sorting network over (key, index) pairs
//! (shaders/sort_*.wgsl); topk reads the first k pairs of each sorted row (shaders/topk.wgsl).
//!
//! Why bitonic rather than radix: the network is data-independent (the same dispatches and
//! compare-exchanges whatever the values), needs no scans, atomics or per-digit histograms, and
//! sorts every row of a batch in the same launches, so it is deterministic by construction and
//! small enough to trust on every WebGPU device (lavapipe, SwiftShader in the browser). It costs
//! O(n log² n) against radix's O(n · passes); for the row lengths Kiln serves that is a small
//! factor, and the block kernel does every stage with j < 512 in workgroup memory, so a row of
//! 2^20 elements takes 66 global passes and 11 workgroup-memory ones.
//!
//! Stability: each key carries its position along the axis, which breaks ties, so no two pairs
//! compare equal and the (unstable) network has one possible result: the stable order.
//! Descending sorts complement the key and keep the index ascending, which is
//! array-api-strict's descending order (the reverse of the ascending sort of the reversed row):
//! NaNs first, ties in index order.

use crate::dtype::DType;
use crate::exec::{check_f16, check_indexable, enables, grid, groups_1d, Launch, Params};
use crate::pipeline::render;
use crate::shape::{mul, normalize_axis};
use crate::tensor::Tensor;
use crate::{Error, Result};

const KEYS: &str = include_str!("../../../shaders/sort_keys.wgsl");
/// `float_key`, shared with search.wgsl (appended: `enable` comes first).
pub(crate) const KEY_COMMON: &str = include_str!("../../../shaders/sort_key_common.wgsl");
const BITONIC: &str = include_str!("../../../shaders/sort_bitonic.wgsl");
const INDICES: &str = include_str!("../../../shaders/sort_indices.wgsl");
const SCATTER: &str = include_str!("../../../shaders/sort_scatter.wgsl");
const TOPK: &str = include_str!("../../../shaders/topk.wgsl");

/// Pairs one workgroup sorts in workgroup memory (the block kernel's tile).
const BLOCK: usize = 512;

/// The WGSL body of `key(v)`: an unsigned integer in the sort's order (shared with search.wgsl).
pub(crate) fn key_expr(dt: DType) -> &'static str {
    match dt {
        DType::F32 => "return float_key(bitcast<u32>(v));",
        // f16 widens exactly to f32, whose bits then order it.
        DType::F16 => "return float_key(bitcast<u32>(f32(v)));",
        DType::I32 => "return bitcast<u32>(v) ^ 0x80000000u;",
        DType::U32 => "return v;",
        DType::Bool => "return min(v, 1u);",
    }
}

/// i32 indices that sort `x` along `axis`, stably (equal elements keep their order, for
/// `descending` too). Order: -inf < … < -0 == +0 < … < inf < NaN (numpy's); descending is the
/// exact reverse of that order with ties still in index order (NaNs first).
pub fn argsort(x: &Tensor, axis: isize, descending: bool) -> Result<Tensor> {
    let ax = normalize_axis(axis, x.ndim())?;
    let last = x.ndim() - 1;
    if ax != last {
        let mut perm: Vec<isize> = (0..x.ndim() as isize).collect();
        perm.swap(ax, last);
        let moved = crate::ops::permute(x, &perm)?;
        let idx = argsort_last(&moved, descending)?;
        return crate::ops::permute(&idx, &perm);
    }
    argsort_last(x, descending)
}

/// `x` sorted along `axis` (stable; the order of [`argsort`]). NaN payloads and the signs of
/// zeros are kept: the values are gathered, never recomputed.
pub fn sort(x: &Tensor, axis: isize, descending: bool) -> Result<Tensor> {
    let idx = argsort(x, axis, descending)?;
    crate::ops::gather(x, axis, &idx)
}

/// The `k` largest (or, `largest = false`, smallest) elements of `x` along `axis` and their i32
/// positions, both of x's shape with the axis `k` long, sorted: the first `k` of
/// [`argsort`]`(x, axis, descending = largest)` (ties: the lower index first; NaN is the largest
/// value, as in sort; -0 == +0). The values are gathered, never recomputed (NaN payloads and
/// zeros' signs kept). `k` past the axis' length is INVALID_ARGUMENT; `k = 0` gives empty tensors.
pub fn topk(x: &Tensor, k: usize, axis: isize, largest: bool) -> Result<(Tensor, Tensor)> {
    let ax = normalize_axis(axis, x.ndim())?;
    let n = x.shape()[ax];
    if k > n {
        return Err(Error::InvalidArgument(format!("topk: k = {k} is larger than axis {axis}'s length {n}")));
    }
    let last = x.ndim() - 1;
    if ax != last {
        let mut perm: Vec<isize> = (0..x.ndim() as isize).collect();
        perm.swap(ax, last);
        let (v, i) = topk_last(&crate::ops::permute(x, &perm)?, k, largest)?;
        return Ok((crate::ops::permute(&v, &perm)?, crate::ops::permute(&i, &perm)?));
    }
    topk_last(x, k, largest)
}

fn topk_last(x: &Tensor, k: usize, largest: bool) -> Result<(Tensor, Tensor)> {
    let device = x.device().clone();
    let dt = x.dtype();
    check_f16(&device, &[dt])?;
    let mut shape = x.shape().to_vec();
    let last = shape.len() - 1;
    let n = shape[last];
    shape[last] = k;
    let values = Tensor::empty_on(&device, &shape, dt)?;
    let indices = Tensor::empty_on(&device, &shape, DType::I32)?;
    if values.numel() == 0 {
        return Ok((values, indices));
    }
    let (pairs, p2) = sorted_pairs(x, largest, "topk")?;
    let total = values.numel();
    Launch {
        key: crate::pipeline::PipelineKey::new("topk", &[dt as u32]),
        source: Box::new(move || render(TOPK, &[("ENABLE", enables(&[dt])), ("T", dt.wgsl())])),
        tensors: &[x, &pairs, &values, &indices],
        params: Some(Params::new().u32(total).u32(k).u32(n).u32(p2)),
        groups: groups_1d(&device, total)?,
    }
    .run(&device)?;
    Ok((values, indices))
}

fn argsort_last(x: &Tensor, descending: bool) -> Result<Tensor> {
    let device = x.device().clone();
    check_f16(&device, &[x.dtype()])?;
    if x.numel() == 0 {
        return Tensor::empty_on(&device, x.shape(), DType::I32);
    }
    let n = *x.shape().last().unwrap_or(&1);
    let rows = x.numel() / n;
    let (pairs, p2) = sorted_pairs(x, descending, "argsort")?;
    let out = Tensor::empty_on(&device, x.shape(), DType::I32)?;
    Launch {
        key: crate::pipeline::PipelineKey::new("sort_indices", &[]),
        source: Box::new(|| INDICES.to_string()),
        tensors: &[&pairs, &out],
        params: Some(Params::new().u32(rows * n).u32(n).u32(p2).u32(0)),
        groups: groups_1d(&device, rows * n)?,
    }
    .run(&device)?;
    Ok(out)
}

/// The (key, index) pairs of every row of the non-empty `x` along its last axis, each row padded
/// to the power of two P at or above its length and sorted (stable; `descending` complements the
/// keys), and P. `op` names the caller in errors.
fn sorted_pairs(x: &Tensor, descending: bool, op: &str) -> Result<(Tensor, usize)> {
    let device = x.device().clone();
    let dt = x.dtype();
    let n = *x.shape().last().unwrap_or(&1);
    if n > i32::MAX as usize {
        return Err(Error::InvalidArgument(format!("{op}: a run of {n} is longer than an i32 index reaches")));
    }
    let rows = x.numel() / n;
    let p2 = n.next_power_of_two();
    let total = mul(rows, p2, "sort: rows padded to a power of two")?;
    check_indexable(mul(total, 2, "sort: key/index pairs")?)?;
    let pairs = Tensor::empty_on(&device, &[total * 2], DType::U32)?;

    let desc = if descending { u32::MAX } else { 0 };
    Launch {
        key: format!("sort_keys:{dt}"),
        source: Box::new(move || {
            render(KEYS, &[("ENABLE", enables(&[dt])), ("T", dt.wgsl()), ("KEY", key_expr(dt))]) + KEY_COMMON
        }),
        tensors: &[x, &pairs],
        params: Some(Params::new().u32(total).u32(n).u32(p2).u32(desc).u32(0).u32(0).u32(0).u32(0)),
        groups: groups_1d(&device, total)?,
    }
    .run(&device)?;

    let max_groups = device.limits().max_compute_workgroups_per_dimension;
    let block = |k_lo: usize, k_hi: usize| -> Result<()> {
        Launch {
            key: crate::pipeline::PipelineKey::new("sort_bitonic:block", &[]),
            source: Box::new(|| render(BITONIC, &[("STEP_ENTRY", "unused_step"), ("BLOCK_ENTRY", "main")])),
            tensors: &[&pairs],
            params: Some(Params::new().u32(total).u32(p2).u32(k_lo).u32(k_hi).u32(0).u32(0).u32(0).u32(0)),
            groups: grid(total.div_ceil(BLOCK) as u64, max_groups)?,
        }
        .run(&device)
    };
    if p2 > 1 {
        block(2, p2.min(BLOCK))?;
    }
    let mut k = 2 * BLOCK;
    while k <= p2 {
        let mut j = k / 2;
        while j >= BLOCK {
            Launch {
                key: crate::pipeline::PipelineKey::new("sort_bitonic:step", &[]),
                source: Box::new(|| render(BITONIC, &[("STEP_ENTRY", "main"), ("BLOCK_ENTRY", "unused_block")])),
                tensors: &[&pairs],
                params: Some(Params::new().u32(total).u32(p2).u32(k).u32(j).u32(0).u32(0).u32(0).u32(0)),
                groups: groups_1d(&device, total / 2)?,
            }
            .run(&device)?;
            j /= 2;
        }
        block(k, k)?;
        k *= 2;
    }
    Ok((pairs, p2))
}

/// The inverse of the 1-D i32 permutation `perm` of 0..n (an argsort's result): `out[perm[i]] = i`,
/// one scatter instead of a second sort.
pub(crate) fn invert_permutation(perm: &Tensor) -> Result<Tensor> {
    let device = perm.device().clone();
    let n = perm.numel();
    let out = Tensor::empty_on(&device, &[n], DType::I32)?;
    Launch {
        key: crate::pipeline::PipelineKey::new("sort_scatter", &[]),
        source: Box::new(|| SCATTER.to_string()),
        tensors: &[perm, &out],
        params: Some(Params::new().u32(n).u32(0).u32(0).u32(0)),
        groups: groups_1d(&device, n)?,
    }
    .run(&device)?;
    Ok(out)
}
