//! Scaled dot-product attention, five ways (`AttentionPath`; Auto picks by shape):
//! - flash: 64 query rows per workgroup, K/V tiles in workgroup memory, online softmax, causal
//!   tiles skipped, optional additive mask; no score matrix, so any sequence length. Auto's
//!   choice for more than `DECODE_MAX_LQ` queries with D, Dv <= 64, with a mask, and for scores
//!   too big for the matmul path — except over a KV cache's prefix on a CPU adapter (split-KV
//!   there: SwiftShader's memory grows without bound on the flash kernels). Two kernels: for D,
//!   Dv <= 64 the register-blocked one
//!   (`shaders/flash_attention_blocked.wgsl`: S = q kᵀ and p v as small matmuls, 4 x 4 scores
//!   and 4 rows x 8 output columns per thread), else one query row per thread
//!   (`shaders/flash_attention.wgsl`; `with_flash_blocking(false, ..)` forces it). Measured on
//!   the H100 at 8x8x1024x64 / 4x16x4096x64 causal, f32: 13.6 / 15.8 TFLOP/s blocked, 7.9 / 9.3
//!   one row per thread, with the softmax-range exp2 of `shaders/flash_exp2.wgsl` (9.5 / 10.8 and
//!   5.6 / 6.4 with the shared k_exp2; the matmul path 6.48 / cannot hold the scores); at D = 128
//!   the one-row kernel gives only 3.3 against the matmuls' 9.3 (q and the accumulators spill).
//! - split-KV (`shaders/flash_attention_split.wgsl` + `flash_attention_combine.wgsl`): a
//!   workgroup per (query row, key range), then a combine pass; for decode (few queries, long
//!   cache), where a workgroup per row leaves the GPU idle: 0.076 ms against 2.25 for the
//!   per-row kernel at 64 rows x 4096 keys (vec4 kernel `flash_attention_decode.wgsl` where D
//!   and Dv are multiples of 4). Also the masked path for D or Dv over `FLASH_MAX_D`. The vec4
//!   kernel runs in one dispatch: the last workgroup of each row to finish merges the row's
//!   splits (`flash_attention_decode_merge.wgsl`, counted in the device's self-resetting
//!   counters) — the combine pass's code, so the same bits — rather than a second dispatch,
//!   whose boundary cost more than the merge (SmolLM2 decode: 2 dispatches' latency were 44% of
//!   a token's GPU time). Chosen over one workgroup per row walking every key, which would be
//!   serial in the cache length (32 steps at 2048 keys for 9 rows) on a GPU with 132 SMs.
//!   `KILN_DECODE_FUSE=0` keeps the second dispatch.
//! - through the f32 matmul kernels (f16 operands cast to f32 and the result back): s = q kᵀ, a
//!   masked softmax over each row (`shaders/attention_softmax.wgsl`), then p v; the score matrix
//!   must fit in `SCORES_MAX_BYTES`. Auto's choice, without a mask, for D or Dv over 64 from
//!   `MIN_SCORES` scores and `MIN_KEYS` keys on.
//! - fused, one workgroup per query row (`shaders/attention.wgsl`): any D, no mask; Auto's
//!   choice for small problems with D or Dv over 64, and for D over `FLASH_MAX_D`.
//!
//! - native (f16, head size 64 or 128, no mask or score options, where the device was opened with
//!   NV cooperative matrix 2): the flash loop on the native tier, its softmax on the score
//!   accumulators (shaders/native/attention_f16_cm2.comp); Auto's first choice where it fits.
//!
//! The files, one concern each: `choice` (which path runs), `flash` + `flash_wgsl` (prefill),
//! `coop` + `coop_wgsl` (f16 flash on cooperative matrices), `native` (the native tier's kernel), `decode` + `decode_wgsl` (split-KV
//! and its merge), `fused`, `through_matmul`, `geometry` (the sizes and WGSL every kernel
//! shares) and `knobs` (every `KILN_*` measurement and tuning knob the paths read: no other
//! file of attention reads the environment).
//! This file is the public op: its entry points, the operands' checks, and the dispatch.

mod choice;
mod coop;
mod coop_wgsl;
mod decode;
mod decode_wgsl;
mod flash;
mod flash_wgsl;
mod fused;
mod geometry;
mod knobs;
mod native;
mod through_matmul;

use crate::dtype::DType;
use crate::exec::{check_f16, check_same_device};
use crate::shape::{broadcast_shapes, numel};
use crate::tensor::Tensor;
use crate::{Error, Result};
pub use choice::AttentionPath;
use choice::{Problem, SCORES_MAX_BYTES};
pub use coop::coop_layout_probe;
pub use coop_wgsl::source_for_tests as flash_coop_source_for_tests;
pub use flash_wgsl::flash_part_sources_for_tests;
// What `coop` and `coop_wgsl` take from their parent (`super::`), and the checks below.
pub use geometry::ScoreOptions;
use geometry::{Geometry, ATTENTION_COMMON, FLASH_MAX_D, FLASH_PARAMS};
pub(crate) use knobs::decode_fusion;
pub use knobs::{with_decode_fusion, with_flash_blocking};
pub use native::{attention_native_available, attention_native_variants, with_attention_native};

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

/// Whether f16 attention with head sizes `d`, `dv` can take (and Auto takes, for more than
/// `DECODE_MAX_LQ` queries) the cooperative-matrix flash kernel on `device`.
pub fn uses_flash_coop(device: &crate::device::Device, d: usize, dv: usize) -> bool {
    coop::pick(device, DType::F16, d, dv).is_some()
}

/// Whether f16 attention with head sizes `d`, `dv` can take (and Auto takes, without score
/// options, for more than `DECODE_MAX_LQ` queries) the native-tier kernel on `device` (with a
/// mask: where its strides suit the kernel's loads, see `native::pick`).
pub fn uses_attention_native(device: &crate::device::Device, d: usize, dv: usize) -> bool {
    native::pick(device, DType::F16, d, dv, None).is_some()
}

/// [`attention_prefix_on_path`] with [`ScoreOptions`] (`kv_len` None: all of K's and V's rows).
#[allow(clippy::too_many_arguments)]
pub fn attention_scored(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    kv_len: Option<usize>,
    causal: bool,
    scale: Option<f32>,
    options: ScoreOptions,
    path: AttentionPath,
) -> Result<Tensor> {
    options.check()?;
    attention_impl(q, k, v, mask, causal, scale, path, kv_len, options)
}

/// Attention of q [..., Lq, D] over the first `len` rows of k [..., Lmax, D] and v [...,
/// Lmax, Dv]: what [`attention`] gives on `k[..., :len, :]` and `v[..., :len, :]`, read in
/// place — a KV cache allocated for Lmax positions and filled up to `len` (see
/// [`crate::ops::rope_qkv_to_cache`]) needs no copy of its prefix per step. Causal masking is
/// top-left aligned, as in `attention`.
pub fn attention_prefix(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    len: usize,
    causal: bool,
    scale: Option<f32>,
) -> Result<Tensor> {
    attention_impl(q, k, v, None, causal, scale, AttentionPath::Auto, Some(len), ScoreOptions::default())
}

/// [`attention_prefix`] with an additive mask broadcastable to [..., Lq, len] (as
/// [`attention_with_mask`]'s): batched decode reads B sequences' caches filled to different
/// lengths in one dispatch, `len` their longest and -inf past each one's own length.
#[allow(clippy::too_many_arguments)]
pub fn attention_prefix_masked(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    len: usize,
    causal: bool,
    scale: Option<f32>,
) -> Result<Tensor> {
    attention_impl(q, k, v, mask, causal, scale, AttentionPath::Auto, Some(len), ScoreOptions::default())
}

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
    attention_impl(q, k, v, mask, causal, scale, path, None, ScoreOptions::default())
}

/// [`attention_prefix_masked`] on a chosen path (tests: Auto takes split-KV for a prefix on a
/// CPU adapter, where the flash kernels over a prefix are still checked by naming them).
#[allow(clippy::too_many_arguments)]
pub fn attention_prefix_on_path(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    len: usize,
    causal: bool,
    scale: Option<f32>,
    path: AttentionPath,
) -> Result<Tensor> {
    attention_impl(q, k, v, mask, causal, scale, path, Some(len), ScoreOptions::default())
}

/// Every entry point: `kv_len` Some(len) reads only the first `len` of K's and V's rows.
#[allow(clippy::too_many_arguments)]
fn attention_impl(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    causal: bool,
    scale: Option<f32>,
    path: AttentionPath,
    kv_len: Option<usize>,
    opts: ScoreOptions,
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
    let (kv_rows, dk) = (ks[ks.len() - 2], ks[ks.len() - 1]);
    let (lv, dv) = (vs[vs.len() - 2], vs[vs.len() - 1]);
    if d != dk {
        return Err(Error::ShapeMismatch(format!("attention: q {qs:?} and k {ks:?} differ in the last dimension")));
    }
    if kv_rows != lv {
        return Err(Error::ShapeMismatch(format!("attention: k {ks:?} and v {vs:?} differ in the key dimension")));
    }
    let lk = match kv_len {
        Some(len) if len > kv_rows => {
            return Err(Error::InvalidArgument(format!(
                "attention: the first {len} keys of k {ks:?}: there are {kv_rows}"
            )))
        }
        Some(len) => len,
        None => kv_rows,
    };
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
    // Its real work: every query row against every key, D multiply-adds for the score and Dv
    // for the output (whatever the path; causal masking skips at most half).
    crate::exec::charge_work("attention", crate::exec::work_of(&[rows, lk, d + dv]))?;
    let matmul_fits = choice::matmul_fits(&device, scores);
    let flash_tile = flash::flash_keys_per_tile(&device, d, dv);
    let flash_coop = coop::pick(&device, dtype, d, dv);
    let flash_native = native::pick(&device, dtype, d, dv, mask_strides.as_deref());
    let problem = Problem {
        device: &device,
        lq,
        lk,
        d,
        dv,
        scores,
        masked: mask.is_some(),
        prefix: kv_len.is_some(),
        matmul_fits,
        flash_fits: flash_tile.is_some(),
        coop_fits: flash_coop.is_some(),
        native_fits: flash_native.is_some(),
        scored: !opts.is_off(),
    };
    let path = choice::choose(path, &problem)?;
    if kv_len.is_some() && matches!(path, AttentionPath::Matmul) {
        return Err(Error::InvalidArgument("attention: the matmul path reads whole K and V, not a prefix".into()));
    }
    if kv_len.is_some() && (mask.is_some() || !matches!(path, AttentionPath::SplitKv)) {
        // A plan could not move this path's keys on with the position (`plan.rs`): only
        // the one-pass split-KV kernel says how (`split_kv`).
        crate::device::capture::refuse(&device, "attention over a cache prefix off the one-pass split-KV kernel");
    }
    let geom = Geometry { lq, lk, kv_rows, d, dv, rows, causal, scale, opts, batch_shape: &batch_shape, qb, kb, vb };
    match path {
        AttentionPath::Flash => {
            let bc = flash_tile.ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "attention: the flash kernel takes D and Dv up to {FLASH_MAX_D} within the workgroup memory \
                     limit, got D {d}, Dv {dv}"
                ))
            })?;
            flash::flash(&geom, q, k, v, mask.zip(mask_strides.as_deref()), &out, bc)?;
            Ok(out)
        }
        AttentionPath::FlashCoop => {
            let c = flash_coop.ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "attention: the cooperative-matrix flash kernel takes f16 with D and Dv multiples of 16 up to \
                     {FLASH_MAX_D} on a device with cooperative matrices, got {dtype}, D {d}, Dv {dv}"
                ))
            })?;
            coop::run(&geom, c, q, k, v, mask.zip(mask_strides.as_deref()), &out)?;
            Ok(out)
        }
        AttentionPath::Native => {
            let a = flash_native.ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "attention: the native-tier kernel takes f16 with head sizes it was compiled for (64, 128) on a \
                     device with NV cooperative matrix 2, and a mask only contiguous along the keys with strides of \
                     whole 16 bytes; got {dtype}, D {d}, Dv {dv}"
                ))
            })?;
            native::run(&geom, a, q, k, v, mask.zip(mask_strides.as_deref()), &out)?;
            Ok(out)
        }
        AttentionPath::SplitKv => {
            decode::split_kv(&geom, q, k, v, mask.zip(mask_strides.as_deref()), &out)?;
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
                return through_matmul::through_matmul(q, k, v, rows, lq, lk, causal, scale);
            }
            // f16: the same path in f32 (as the fused kernel computes), rounded once at the end.
            let f = |t: &Tensor| crate::ops::cast(t, DType::F32);
            let y = through_matmul::through_matmul(&f(q)?, &f(k)?, &f(v)?, rows, lq, lk, causal, scale)?;
            crate::ops::cast(&y, dtype)
        }
        _ => {
            fused::fused(&geom, q, k, v, &out)?;
            Ok(out)
        }
    }
}
