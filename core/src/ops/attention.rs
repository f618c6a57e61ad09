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
const FLASH: &str = include_str!("../../../shaders/flash_attention.wgsl");
const SPLIT: &str = include_str!("../../../shaders/flash_attention_split.wgsl");
const COMBINE: &str = include_str!("../../../shaders/flash_attention_combine.wgsl");
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
    attention_on_path(q, k, v, None, causal, scale, AttentionPath::Auto)
}

/// `attention` with an optional additive mask (a bias added to the scaled scores before the
/// softmax), of q's dtype and broadcastable to [..., Lq, Lk]: 0 keeps a key, -inf drops it (key
/// padding: a [batch, 1, 1, Lk] mask). A query row whose keys are all dropped (every mask entry
/// -inf, or all hidden by `causal`) gives zeros, as a row with Lk = 0 does (PyTorch's math
/// backend gives NaN there, its fused kernels zeros).
pub fn attention_with_mask(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    causal: bool,
    scale: Option<f32>,
) -> Result<Tensor> {
    attention_on_path(q, k, v, mask, causal, scale, AttentionPath::Auto)
}

/// Which kernel computes attention. `Auto` picks by shape (measured on the H200, see
/// BENCHMARKS.md); the others force one, for tests and benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionPath {
    Auto,
    /// Tiled flash kernel (`shaders/flash_attention.wgsl`): BR query rows per workgroup, K/V
    /// tiles in workgroup memory, online softmax. D and Dv up to `FLASH_MAX_D`.
    Flash,
    /// Split over the key length with a combine pass (`shaders/flash_attention_split.wgsl`):
    /// for few queries against many keys (decode). Any D and Dv.
    SplitKv,
    /// One workgroup per query row (`shaders/attention.wgsl`); no mask.
    Fused,
    /// q kᵀ, a softmax, p v through the matmul kernels; no mask, score matrix under 1 GiB.
    Matmul,
}

/// Flash kernel's query rows per workgroup (one per thread).
const FLASH_BR: usize = 64;
/// ... and the largest D and Dv it takes: q and the output accumulators live in registers.
const FLASH_MAX_D: usize = 256;
/// Auto takes the split-KV path for at most this many queries per batch entry.
const DECODE_MAX_LQ: usize = 4;
/// Split-KV: workgroups to aim for (several per SM on a big GPU).
const SPLIT_TARGET_GROUPS: usize = 1024;

/// `attention_with_mask` on a chosen path. Forcing `Fused` or `Matmul` with a mask, `Flash`
/// with D or Dv over 256, or `Matmul` past its score-matrix limit is InvalidArgument.
#[allow(clippy::too_many_arguments)]
pub fn attention_on_path(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    causal: bool,
    scale: Option<f32>,
    path: AttentionPath,
) -> Result<Tensor> {
    let mut all = vec![q, k, v];
    all.extend(mask);
    let device = check_same_device(&all)?;
    let dtype = q.dtype();
    if k.dtype() != dtype || v.dtype() != dtype || mask.is_some_and(|m| m.dtype() != dtype) {
        return Err(Error::DTypeMismatch(format!(
            "attention: q {dtype}, k {}, v {}{}: dtypes must match",
            k.dtype(),
            v.dtype(),
            mask.map_or(String::new(), |m| format!(", mask {}", m.dtype()))
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
    let mut scores_shape = batch_shape.clone();
    scores_shape.extend([lq, lk]);
    let mask_strides = match mask {
        Some(m) => {
            if m.ndim() > scores_shape.len()
                || broadcast_shapes(m.shape(), &scores_shape).ok() != Some(scores_shape.clone())
            {
                return Err(Error::ShapeMismatch(format!(
                    "attention: mask {:?} does not broadcast to the scores' shape {scores_shape:?}",
                    m.shape()
                )));
            }
            Some(crate::shape::broadcast_strides(m.shape(), &scores_shape))
        }
        None => None,
    };
    let mut out_shape = batch_shape.clone();
    out_shape.push(lq);
    out_shape.push(dv);
    let out = Tensor::empty_on(&device, &out_shape, dtype)?;
    if out.numel() == 0 {
        return Ok(out);
    }
    for t in all.iter().copied().chain([&out]) {
        if t.numel() > u32::MAX as usize {
            return Err(Error::InvalidArgument("attention: operands of more than 2^32 elements".into()));
        }
    }
    let rows = numel(&batch_shape) * lq;
    let scale = scale.unwrap_or(1.0 / (d as f32).sqrt());
    let scores = rows * lk;
    let matmul_fits = scores * 4 <= SCORES_MAX_BYTES.min(device.max_tensor_bytes() as usize);
    let flash_tile = flash_keys_per_tile(&device, d, dv);
    let path = match path {
        AttentionPath::Auto if lq <= DECODE_MAX_LQ => AttentionPath::SplitKv,
        AttentionPath::Auto if flash_tile.is_some() && d <= 128 && dv <= 128 => AttentionPath::Flash,
        AttentionPath::Auto if mask.is_some() => AttentionPath::SplitKv,
        AttentionPath::Auto if lk >= MIN_KEYS && scores >= MIN_SCORES && matmul_fits => AttentionPath::Matmul,
        AttentionPath::Auto => AttentionPath::Fused,
        p => p,
    };
    let geom = Geometry { lq, lk, d, dv, rows, causal, scale, batch_shape: &batch_shape, qb, kb, vb };
    match path {
        AttentionPath::Flash => {
            let bc = flash_tile.ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "attention: the flash kernel takes D and Dv up to {FLASH_MAX_D} within the workgroup memory \
                     limit, got D {d}, Dv {dv}"
                ))
            })?;
            flash(&geom, q, k, v, mask.zip(mask_strides.as_deref()), &out, bc)?;
            Ok(out)
        }
        AttentionPath::SplitKv => {
            split_kv(&geom, q, k, v, mask.zip(mask_strides.as_deref()), &out)?;
            Ok(out)
        }
        AttentionPath::Fused | AttentionPath::Matmul if mask.is_some() => {
            Err(Error::InvalidArgument(format!("attention: the {path:?} path takes no mask (Flash and SplitKv do)")))
        }
        AttentionPath::Matmul => {
            if !matmul_fits {
                return Err(Error::InvalidArgument(format!(
                    "attention: the matmul path holds the score matrix only up to {SCORES_MAX_BYTES} bytes"
                )));
            }
            if dtype == DType::F32 {
                return through_matmul(q, k, v, rows, lq, lk, causal, scale);
            }
            // f16: the same path in f32 (as the fused kernel computes), rounded once at the end.
            let f = |t: &Tensor| crate::ops::cast(t, DType::F32);
            let y = through_matmul(&f(q)?, &f(k)?, &f(v)?, rows, lq, lk, causal, scale)?;
            crate::ops::cast(&y, dtype)
        }
        _ => {
            fused(&geom, q, k, v, &out)?;
            Ok(out)
        }
    }
}

/// The problem's sizes, shared by the kernels' parameter blocks.
struct Geometry<'a> {
    lq: usize,
    lk: usize,
    d: usize,
    dv: usize,
    rows: usize,
    causal: bool,
    scale: f32,
    batch_shape: &'a [usize],
    qb: &'a [usize],
    kb: &'a [usize],
    vb: &'a [usize],
}

impl Geometry<'_> {
    /// The batch dimensions and each operand's batch strides (dims8 lists), mask's last.
    fn batch_params(&self, params: Params, mask: Option<&[usize]>) -> Params {
        let bs = self.batch_shape;
        let mstride: Vec<usize> = mask.map_or(vec![], |m| m[..m.len() - 2].to_vec());
        params
            .dims8(bs, 1)
            .dims8(&crate::shape::batch_strides(self.qb, bs, self.lq * self.d), 0)
            .dims8(&crate::shape::batch_strides(self.kb, bs, self.lk * self.d), 0)
            .dims8(&crate::shape::batch_strides(self.vb, bs, self.lk * self.dv), 0)
            .dims8(&mstride, 0)
    }
}

/// Keys per tile of the flash kernel for these D and Dv (K and V tiles of f32 vec4s in workgroup
/// memory), or None where even 16 keys do not fit or D, Dv exceed `FLASH_MAX_D`.
fn flash_keys_per_tile(device: &crate::device::Device, d: usize, dv: usize) -> Option<usize> {
    if d > FLASH_MAX_D || dv > FLASH_MAX_D {
        return None;
    }
    let row = (d.div_ceil(4).max(1) + dv.div_ceil(4).max(1)) * 16;
    let limit = device.limits().max_compute_workgroup_storage_size as usize;
    [64, 32, 16].into_iter().find(|bc| bc * row <= limit)
}

fn flash(
    g: &Geometry,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<(&Tensor, &[usize])>,
    out: &Tensor,
    bc: usize,
) -> Result<()> {
    let device = q.device().clone();
    let dtype = q.dtype();
    let nqb = g.lq.div_ceil(FLASH_BR);
    let blocks = numel(g.batch_shape) * nqb;
    let (msq, msk) = mask.map_or((0, 0), |(_, s)| (s[s.len() - 2], s[s.len() - 1]));
    let params = Params::new()
        .u32(g.lq)
        .u32(g.lk)
        .u32(g.d)
        .u32(g.dv)
        .u32(nqb)
        .u32(blocks)
        .u32(g.causal as u32)
        .f32(g.scale * std::f32::consts::LOG2_E)
        .u32(msq)
        .u32(msk)
        .u32(g.batch_shape.len())
        .u32(0);
    let params = g.batch_params(params, mask.map(|(_, s)| s));
    let (dp, dvp) = (g.d.div_ceil(4).max(1), g.dv.div_ceil(4).max(1));
    let has_mask = mask.is_some();
    let tensors = [q, k, v, mask.map_or(q, |(m, _)| m), out];
    Launch {
        key: format!("flash_attention:{dtype}:{dp}:{dvp}:{bc}:{has_mask}"),
        source: Box::new(move || {
            render(
                FLASH,
                &[
                    ("ENABLE", enables(&[dtype])),
                    ("T", dtype.wgsl()),
                    ("BR", &FLASH_BR.to_string()),
                    ("BC", &bc.to_string()),
                    ("DP", &dp.to_string()),
                    ("DVP", &dvp.to_string()),
                    ("HAS_MASK", if has_mask { "true" } else { "false" }),
                ],
            )
        }),
        tensors: &tensors,
        params: Some(params),
        groups: grid(blocks as u64, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run(&device)
}

/// Keys per split of the split-KV path: enough splits for about `SPLIT_TARGET_GROUPS`
/// workgroups, a multiple of the kernel's `kc` keys per step.
fn split_chunk(rows: usize, lk: usize, kc: usize) -> usize {
    let splits = SPLIT_TARGET_GROUPS.div_ceil(rows).clamp(1, lk.div_ceil(kc).max(1));
    lk.div_ceil(splits).div_ceil(kc).max(1) * kc
}

fn split_kv(
    g: &Geometry,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<(&Tensor, &[usize])>,
    out: &Tensor,
) -> Result<()> {
    let device = q.device().clone();
    let dtype = q.dtype();
    // K rows of D + 1 floats in workgroup memory, q's row beside them, up to 64 keys a step.
    let limit = device.limits().max_compute_workgroup_storage_size as usize;
    let kc = [64usize, 32, 16, 8, 4, 2, 1]
        .into_iter()
        .find(|kc| (kc * (g.d + 1) + (g.d + 1) + 64 + kc) * 4 <= limit)
        .ok_or_else(|| {
        Error::InvalidArgument(format!("attention: D {} is more than workgroup memory holds for a mask", g.d))
    })?;
    let chunk = split_chunk(g.rows, g.lk, kc);
    let nsplit = g.lk.div_ceil(chunk).max(1);
    let part_len = crate::shape::mul(g.rows * nsplit, g.dv + 2, "attention partials")?;
    let part = Tensor::empty_on(&device, &[part_len], DType::F32)?;
    let (msq, msk) = mask.map_or((0, 0), |(_, s)| (s[s.len() - 2], s[s.len() - 1]));
    let params = Params::new()
        .u32(g.lq)
        .u32(g.lk)
        .u32(g.d)
        .u32(g.dv)
        .u32(g.rows)
        .u32(nsplit)
        .u32(chunk)
        .u32(g.causal as u32)
        .f32(g.scale)
        .u32(msq)
        .u32(msk)
        .u32(g.batch_shape.len());
    let params = g.batch_params(params, mask.map(|(_, s)| s));
    let dvt = g.dv.div_ceil(WG).max(1);
    let ds = g.d + 1;
    let has_mask = mask.is_some();
    let tensors = [q, k, v, mask.map_or(q, |(m, _)| m), &part];
    let groups = (g.rows * nsplit) as u64;
    Launch {
        key: format!("flash_attention_split:{dtype}:{kc}:{ds}:{dvt}:{has_mask}"),
        source: Box::new(move || {
            render(
                SPLIT,
                &[
                    ("ENABLE", enables(&[dtype])),
                    ("T", dtype.wgsl()),
                    ("KC", &kc.to_string()),
                    ("DS", &ds.to_string()),
                    ("DVT", &dvt.to_string()),
                    ("HAS_MASK", if has_mask { "true" } else { "false" }),
                ],
            )
        }),
        tensors: &tensors,
        params: Some(params),
        groups: grid(groups, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run(&device)?;
    let params = Params::new().u32(g.rows).u32(nsplit).u32(g.dv).u32(0);
    Launch {
        key: format!("flash_attention_combine:{dtype}"),
        source: Box::new(move || render(COMBINE, &[("ENABLE", enables(&[dtype])), ("T", dtype.wgsl())])),
        tensors: &[&part, out],
        params: Some(params),
        groups: grid(g.rows as u64, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run(&device)
}

/// The one-workgroup-per-row kernel, no mask.
fn fused(g: &Geometry, q: &Tensor, k: &Tensor, v: &Tensor, out: &Tensor) -> Result<()> {
    let device = q.device().clone();
    let dtype = q.dtype();
    let bs = g.batch_shape;
    let params = Params::new()
        .u32(g.lq)
        .u32(g.lk)
        .u32(g.d)
        .u32(g.dv)
        .u32(g.rows)
        .u32(g.causal as u32)
        .f32(g.scale)
        .u32(bs.len())
        .dims8(bs, 1)
        .dims8(&crate::shape::batch_strides(g.qb, bs, g.lq * g.d), 0)
        .dims8(&crate::shape::batch_strides(g.kb, bs, g.lk * g.d), 0)
        .dims8(&crate::shape::batch_strides(g.vb, bs, g.lk * g.dv), 0);
    let dvt = g.dv.div_ceil(WG).max(1);
    let tensors = [q, k, v, out];
    Launch {
        key: format!("attention:{dtype}:{dvt}"),
        source: Box::new(move || {
            render(TEMPLATE, &[("ENABLE", enables(&[dtype])), ("T", dtype.wgsl()), ("DVT", &dvt.to_string())])
        }),
        tensors: &tensors,
        params: Some(params),
        groups: grid(g.rows as u64, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run(&device)
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
