//! Scaled dot-product attention, two ways:
//! - through the f32 matmul kernels (f16 operands cast to f32 and the result back), when the
//!   score matrix is big enough to pay for four launches and small enough to hold: s = q kᵀ, a
//!   masked softmax over each row (`shaders/attention_softmax.wgsl`), then p v. Measured on the H200 at 64x1024x64 causal:
//!   about 10x the fused kernel, since the tiled matmuls reuse each loaded K and V row many times.
//! - fused into one kernel (`shaders/attention.wgsl`): one workgroup per query row with an online
//!   softmax, so the Lq x Lk score matrix never exists. For small problems and score matrices
//!   over `SCORES_MAX_BYTES`.

use crate::dtype::DType;
use crate::exec::grid;
use crate::exec::{check_f16, check_same_device, enables, Launch, Params};
use crate::pipeline::render;
use crate::shape::{broadcast_shapes, numel};
use crate::tensor::Tensor;
use crate::{Error, Result};

const TEMPLATE: &str = include_str!("../../../shaders/attention.wgsl");
const SOFTMAX: &str = include_str!("../../../shaders/attention_softmax.wgsl");
/// Threads per workgroup of the attention kernel (the shader's WG).
const WG: usize = 64;
/// The matmul path holds the f32 score matrix (and its softmax) only up to this size.
const SCORES_MAX_BYTES: usize = 1 << 30;
/// ... and is taken only from this many scores on, and for rows at least `MIN_KEYS` long
/// (below, four launches and a workgroup per short row cost more than the fused kernel).
const MIN_SCORES: usize = 1 << 16;
const MIN_KEYS: usize = 64;

/// softmax(q kᵀ · scale) v for q [..., Lq, D], k [..., Lk, D], v [..., Lk, Dv] (leading
/// dimensions broadcast, numpy style), giving [..., Lq, Dv]. `scale` defaults to 1/sqrt(D).
/// `causal` masks key j > query i (top-left aligned, as PyTorch's `is_causal`). A query with no
/// key (Lk = 0) gives zeros. f32 and f16 (computed in f32).
pub fn attention(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool, scale: Option<f32>) -> Result<Tensor> {
    let device = check_same_device(&[q, k, v])?;
    let dtype = q.dtype();
    if k.dtype() != dtype || v.dtype() != dtype {
        return Err(Error::DTypeMismatch(format!(
            "attention: q {dtype}, k {}, v {}: dtypes must match",
            k.dtype(),
            v.dtype()
        )));
    }
    if !dtype.is_float() {
        return Err(Error::DTypeMismatch(format!("attention needs float tensors (f32 or f16), got {dtype}")));
    }
    check_f16(&device, &[dtype])?;
    if q.ndim() < 2 || k.ndim() < 2 || v.ndim() < 2 {
        return Err(Error::ShapeMismatch(format!(
            "attention: q, k and v need at least 2 dimensions, got {:?}, {:?}, {:?}",
            q.shape(),
            k.shape(),
            v.shape()
        )));
    }
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    let (lq, d) = (qs[qs.len() - 2], qs[qs.len() - 1]);
    let (lk, dk) = (ks[ks.len() - 2], ks[ks.len() - 1]);
    let (lv, dv) = (vs[vs.len() - 2], vs[vs.len() - 1]);
    if d != dk {
        return Err(Error::ShapeMismatch(format!("attention: q {qs:?} and k {ks:?} differ in the last dimension")));
    }
    if lk != lv {
        return Err(Error::ShapeMismatch(format!("attention: k {ks:?} and v {vs:?} differ in the key dimension")));
    }
    let (qb, kb, vb) = (&qs[..qs.len() - 2], &ks[..ks.len() - 2], &vs[..vs.len() - 2]);
    let batch_shape = broadcast_shapes(&broadcast_shapes(qb, kb)?, vb)?;
    let mut out_shape = batch_shape.clone();
    out_shape.push(lq);
    out_shape.push(dv);
    let out = Tensor::empty_on(&device, &out_shape, dtype)?;
    if out.numel() == 0 {
        return Ok(out);
    }
    for t in [q, k, v, &out] {
        if t.numel() > u32::MAX as usize {
            return Err(Error::InvalidArgument("attention: operands of more than 2^32 elements".into()));
        }
    }
    let rows = numel(&batch_shape) * lq;
    let scale = scale.unwrap_or(1.0 / (d as f32).sqrt());
    let scores = rows * lk;
    if lk >= MIN_KEYS && scores >= MIN_SCORES && scores * 4 <= SCORES_MAX_BYTES.min(device.max_tensor_bytes() as usize)
    {
        if dtype == DType::F32 {
            return through_matmul(q, k, v, rows, lq, lk, causal, scale);
        }
        // f16: the same path in f32 (as the fused kernel computes), rounded once at the end.
        let f = |t: &Tensor| crate::ops::cast(t, DType::F32);
        let y = through_matmul(&f(q)?, &f(k)?, &f(v)?, rows, lq, lk, causal, scale)?;
        return crate::ops::cast(&y, dtype);
    }
    let params = Params::new()
        .u32(lq)
        .u32(lk)
        .u32(d)
        .u32(dv)
        .u32(rows)
        .u32(causal as u32)
        .f32(scale)
        .u32(batch_shape.len())
        .dims8(&batch_shape, 1)
        .dims8(&crate::shape::batch_strides(qb, &batch_shape, lq * d), 0)
        .dims8(&crate::shape::batch_strides(kb, &batch_shape, lk * d), 0)
        .dims8(&crate::shape::batch_strides(vb, &batch_shape, lk * dv), 0);
    let dvt = dv.div_ceil(WG).max(1);
    let tensors = [q, k, v, &out];
    Launch {
        key: format!("attention:{dtype}:{dvt}"),
        source: Box::new(move || {
            render(TEMPLATE, &[("ENABLE", enables(&[dtype])), ("T", dtype.wgsl()), ("DVT", &dvt.to_string())])
        }),
        tensors: &tensors,
        params: Some(params),
        groups: grid(rows as u64, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run(&device)?;
    Ok(out)
}

/// softmax(q kᵀ · scale, masked) v with the matmul kernels; `rows` = batch * Lq, all f32.
#[allow(clippy::too_many_arguments)]
fn through_matmul(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    rows: usize,
    lq: usize,
    lk: usize,
    causal: bool,
    scale: f32,
) -> Result<Tensor> {
    let device = q.device().clone();
    let s = crate::ops::matmul(q, &crate::ops::transpose(k, -1, -2)?)?;
    let probs = Tensor::empty_on(&device, s.shape(), DType::F32)?;
    let params = Params::new().u32(rows).u32(lq).u32(lk).u32(causal as u32).f32(scale).u32(0).u32(0).u32(0);
    Launch {
        key: "attention_softmax".into(),
        source: Box::new(|| SOFTMAX.to_string()),
        tensors: &[&s, &probs],
        params: Some(params),
        groups: grid(rows as u64, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run(&device)?;
    drop(s);
    crate::ops::matmul(&probs, v)
}
