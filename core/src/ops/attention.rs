//! Scaled dot-product attention, four ways (`AttentionPath`; Auto picks by shape):
//! - flash: 64 query rows per workgroup, K/V tiles in workgroup memory, online softmax, causal
//!   tiles skipped, optional additive mask; no score matrix, so any sequence length. Auto's
//!   choice for more than `DECODE_MAX_LQ` queries with D, Dv <= 64, with a mask, and for scores
//!   too big for the matmul path — except over a KV cache's prefix on a CPU adapter (split-KV
//!   there: SwiftShader's memory grows without bound on the flash kernels). Two kernels: for D, Dv <= 64 the register-blocked one
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

mod coop;

use crate::device::Binding;
use crate::dtype::DType;
use crate::exec::grid;
use crate::exec::{check_f16, check_same_device, enables, Launch, Params};
use crate::ops::elementwise::with_special;
use crate::pipeline::render;
use crate::shape::{broadcast_shapes, numel};
use crate::tensor::Tensor;
use crate::{Error, Result};
pub use coop::{coop_layout_probe, source_for_tests as flash_coop_source_for_tests};

const TEMPLATE: &str = include_str!("../../../shaders/attention.wgsl");
const SOFTMAX: &str = include_str!("../../../shaders/attention_softmax.wgsl");
const FLASH: &str = include_str!("../../../shaders/flash_attention.wgsl");
const FLASH_BLOCKED: &str = include_str!("../../../shaders/flash_attention_blocked.wgsl");
const FLASH_EXP2: &str = include_str!("../../../shaders/flash_exp2.wgsl");
const SPLIT: &str = include_str!("../../../shaders/flash_attention_split.wgsl");
const COMBINE: &str = include_str!("../../../shaders/flash_attention_combine.wgsl");
const COMBINE_SERIAL: &str = include_str!("../../../shaders/flash_attention_combine_serial.wgsl");
const DECODE: &str = include_str!("../../../shaders/flash_attention_decode.wgsl");
const DECODE_MERGE: &str = include_str!("../../../shaders/flash_attention_decode_merge.wgsl");
/// One row's merge of split-KV partials, shared by COMBINE and DECODE_MERGE (the same bits).
const MERGE_ROW: &str = include_str!("../../../shaders/flash_attention_merge_row.wgsl");
/// `batch_offsets`, rendered into every attention kernel after its Params.
pub(super) const ATTENTION_COMMON: &str = include_str!("../../../shaders/attention_common.wgsl");
/// The parameter block shared by the flash kernels.
pub(super) const FLASH_PARAMS: &str = include_str!("../../../shaders/flash_params.wgsl");
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
    /// The flash kernel for f16 on cooperative matrices (`shaders/flash_attention_coop.wgsl`):
    /// where the device has them, D and Dv multiples of 16 up to `FLASH_MAX_D`
    /// ([`uses_flash_coop`]).
    FlashCoop,
    /// Split over the key length with a combine pass (`shaders/flash_attention_split.wgsl`):
    /// for few queries against many keys (decode). Any D and Dv.
    SplitKv,
    /// One workgroup per query row (`shaders/attention.wgsl`); no mask.
    Fused,
    /// q kᵀ, a softmax, p v through the matmul kernels; no mask, score matrix under 1 GiB.
    Matmul,
}

/// Whether f16 attention with head sizes `d`, `dv` can take (and Auto takes, for more than
/// `DECODE_MAX_LQ` queries) the cooperative-matrix flash kernel on `device`.
pub fn uses_flash_coop(device: &crate::device::Device, d: usize, dv: usize) -> bool {
    coop::pick(device, DType::F16, d, dv).is_some()
}

/// Optional changes to the scores, for Gemma 2/3's attention; the default changes nothing (the
/// kernels are then exactly those without options: the same source, the same bits).
/// Taken by the flash (one row per thread) and split-KV kernels only: forcing `Fused`,
/// `Matmul` or `FlashCoop` with an option set is InvalidArgument, and Auto avoids them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ScoreOptions {
    /// Logit soft-capping: each scaled score s becomes cap * tanh(s / cap) before the mask is
    /// added (Gemma 2's `attn_logit_softcapping`, as llama.cpp applies it). Positive, finite.
    pub softcap: Option<f32>,
    /// Sliding-window attention: a query sees only the last `window` of the keys it would see
    /// without it (under `causal`, keys i - window + 1 ..= i of query i; over a KV cache's
    /// prefix without `causal`, the last `window` of the `len` keys: a decode step's query at
    /// position len - 1 sees positions len - window ..= len - 1, llama.cpp's standard SWA).
    /// At least 1.
    pub window: Option<usize>,
}

impl ScoreOptions {
    fn is_off(&self) -> bool {
        self.softcap.is_none() && self.window.is_none()
    }

    /// Their part of a pipeline key (the options are constants of the kernel's source).
    fn key(&self) -> String {
        if self.is_off() {
            return String::new();
        }
        format!(":{:?}:{:?}", self.softcap.map(f32::to_bits), self.window)
    }

    /// WGSL replacing score `var` (scaled by `base`: 1, or log2(e) for the base-2 flash kernel)
    /// by its soft-capped value; empty without soft-capping.
    fn softcap_wgsl(&self, var: &str, base: f32, indent: &str) -> String {
        match self.softcap {
            None => String::new(),
            Some(cap) => {
                let c = format!("bitcast<f32>({}u)", (cap * base).to_bits());
                format!("{indent}{var} = {c} * k_tanh({var} / {c});\n")
            }
        }
    }

    /// WGSL moving `jbeg` up to the row's window start (keys seen: [0, `nk`)); empty without a
    /// window.
    fn window_wgsl(&self, jbeg: &str, nk: &str, indent: &str) -> String {
        match self.window {
            None => String::new(),
            Some(w) => format!("{indent}{jbeg} = max({jbeg}, select(0u, {nk} - {w}u, {nk} > {w}u));\n"),
        }
    }

    fn check(&self) -> Result<()> {
        if let Some(c) = self.softcap.filter(|c| !(c.is_finite() && *c > 0.0)) {
            return Err(Error::InvalidArgument(format!("attention: soft-cap {c} must be positive and finite")));
        }
        if let Some(w) = self.window.filter(|&w| w == 0 || w > u32::MAX as usize) {
            return Err(Error::InvalidArgument(format!("attention: window {w} must be 1 to 2^32 - 1 keys")));
        }
        Ok(())
    }
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

/// Flash kernel's query rows per workgroup (one per thread).
const FLASH_BR: usize = 64;
/// ... and the largest D and Dv it takes: q and the output accumulators live in registers.
const FLASH_MAX_D: usize = 256;
/// Auto takes the split-KV path for at most this many queries per batch entry.
const DECODE_MAX_LQ: usize = 4;
/// Split-KV: below this many splits a row the combine walks them serially (less setup than the
/// parallel merge's weights and reductions).
const SERIAL_COMBINE_BELOW: usize = 8;
/// Split-KV: workgroups to aim for (several per SM on a big GPU).
const SPLIT_TARGET_GROUPS: usize = 1024;

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
    let matmul_fits = scores * 4 <= SCORES_MAX_BYTES.min(device.max_tensor_bytes() as usize);
    let flash_tile = flash_keys_per_tile(&device, d, dv);
    let flash_coop = coop::pick(&device, dtype, d, dv);
    // Measured on the H100 (BENCHMARKS.md): flash beats the matmul path at D = 64 (8.25 vs 7.77
    // TFLOP/s) but not at D = 128 (3.2 vs 10.6: q and the accumulators no longer fit in
    // registers), where it still beats the per-row kernel for scores too big for the matmuls.
    let auto = path == AttentionPath::Auto;
    let path = match path {
        AttentionPath::Auto if lq <= DECODE_MAX_LQ => AttentionPath::SplitKv,
        // A KV cache's prefix (a decoder's prefill) on a CPU adapter: split-KV, not flash.
        // SwiftShader (Chromium's adapter) runs the flash kernels with its memory growing
        // without bound (natively through its Vulkan ICD too: > 3 GB within a minute on
        // SmolLM2's prefill and on the flash tests), until Chromium's GPU process dies and
        // the page's device is lost. Split-KV runs there; on a CPU the flash kernel's
        // workgroup tiling buys nothing anyway.
        AttentionPath::Auto if kv_len.is_some() && device.info().device_type == "Cpu" => AttentionPath::SplitKv,
        AttentionPath::Auto if flash_coop.is_some() => AttentionPath::FlashCoop,
        // A prefix of K and V is read in place only by the kernels that take batch strides.
        AttentionPath::Auto if kv_len.is_some() && flash_tile.is_some() => AttentionPath::Flash,
        AttentionPath::Auto if kv_len.is_some() => AttentionPath::SplitKv,
        AttentionPath::Auto if flash_tile.is_some() && d <= 64 && dv <= 64 => AttentionPath::Flash,
        AttentionPath::Auto if mask.is_some() && flash_tile.is_some() => AttentionPath::Flash,
        AttentionPath::Auto if mask.is_some() => AttentionPath::SplitKv,
        AttentionPath::Auto if lk >= MIN_KEYS && scores >= MIN_SCORES && matmul_fits => AttentionPath::Matmul,
        AttentionPath::Auto if flash_tile.is_some() && !matmul_fits => AttentionPath::Flash,
        AttentionPath::Auto => AttentionPath::Fused,
        p => p,
    };
    // Score options live in the one-row flash and split-KV kernels only.
    let path = match path {
        AttentionPath::Fused | AttentionPath::Matmul | AttentionPath::FlashCoop if !opts.is_off() => {
            if !auto {
                return Err(Error::InvalidArgument(format!(
                    "attention: the {path:?} path takes no soft-cap or window (Flash and SplitKv do)"
                )));
            }
            if flash_tile.is_some() && !(kv_len.is_some() && device.info().device_type == "Cpu") {
                AttentionPath::Flash
            } else {
                AttentionPath::SplitKv
            }
        }
        p => p,
    };
    // The flash and per-row kernels walk every key in one invocation: past llvmpipe's loop
    // limiter (core/src/loop_budget.rs) they would stop early without an error, so where Auto
    // chose them a CPU adapter takes split-KV, whose splits are bounded there
    // (`split_keys_cap`), and where a caller chose them it is told.
    let path = match path {
        AttentionPath::Flash | AttentionPath::Fused
            if !crate::loop_budget::fits(&device, one_invocation_passes(path, lk, d, dv)) =>
        {
            if !auto {
                return Err(Error::InvalidArgument(format!(
                    "attention: the {path:?} kernel cannot walk {lk} keys (D {d}, Dv {dv}) in one invocation on \
                     this CPU adapter (llvmpipe's loop limiter); Auto and SplitKv can"
                )));
            }
            AttentionPath::SplitKv
        }
        p => p,
    };
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
            flash(&geom, q, k, v, mask.zip(mask_strides.as_deref()), &out, bc)?;
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
    /// Keys attended to ...
    lk: usize,
    /// ... of the rows K and V hold per batch entry (their batch stride).
    kv_rows: usize,
    d: usize,
    dv: usize,
    rows: usize,
    causal: bool,
    scale: f32,
    opts: ScoreOptions,
    batch_shape: &'a [usize],
    qb: &'a [usize],
    kb: &'a [usize],
    vb: &'a [usize],
}

impl Geometry<'_> {
    /// The parameter block of the flash kernels (`nqb` query blocks per batch entry).
    fn flash_params(&self, nqb: usize, blocks: usize, mask: Option<&[usize]>) -> Params {
        let (msq, msk) = mask.map_or((0, 0), |s| (s[s.len() - 2], s[s.len() - 1]));
        let params = Params::new()
            .u32(self.lq)
            .u32(self.lk)
            .u32(self.d)
            .u32(self.dv)
            .u32(nqb)
            .u32(blocks)
            .u32(self.causal as u32)
            .f32(self.scale * std::f32::consts::LOG2_E)
            .u32(msq)
            .u32(msk)
            .u32(self.batch_shape.len())
            .u32(0);
        self.batch_params(params, mask)
    }

    /// The batch dimensions and each operand's batch strides (dims8 lists), mask's last.
    fn batch_params(&self, params: Params, mask: Option<&[usize]>) -> Params {
        let bs = self.batch_shape;
        let mstride: Vec<usize> = mask.map_or(vec![], |m| m[..m.len() - 2].to_vec());
        params
            .dims8(bs, 1)
            .dims8(&crate::shape::batch_strides(self.qb, bs, self.lq * self.d), 0)
            .dims8(&crate::shape::batch_strides(self.kb, bs, self.kv_rows * self.d), 0)
            .dims8(&crate::shape::batch_strides(self.vb, bs, self.kv_rows * self.dv), 0)
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
    let params = g.flash_params(nqb, blocks, mask.map(|(_, s)| s));
    let (dp, dvp) = (g.d.div_ceil(4).max(1), g.dv.div_ceil(4).max(1));
    let has_mask = mask.is_some();
    let vec = g.d.is_multiple_of(4) && g.dv.is_multiple_of(4);
    let mut tensors = vec![q, k, v];
    tensors.extend(mask.map(|(m, _)| m));
    tensors.push(out);
    // Score options are in the one-row kernel only.
    let blocked = flash_blocked_fits(&device, dp, dvp) && flash_blocking_wanted() && g.opts.is_off();
    let opts = g.opts;
    let source: Box<dyn FnOnce() -> String> = if blocked {
        let part = flash_part();
        Box::new(move || with_special(timing_part(flash_blocked_source(dtype, dp, dvp, has_mask, vec), part)))
    } else {
        Box::new(move || with_special(flash_source(dtype, dp, dvp, bc, has_mask, vec, opts)))
    };
    Launch {
        key: format!(
            "flash_attention:{dtype}:{dp}:{dvp}:{bc}:{has_mask}:{vec}:{blocked}:{}:{:?}:{}:{}{}",
            flash_prefetch(),
            flash_exp2_kind(),
            flash_skip_rescale(),
            flash_part(),
            opts.key()
        ),
        source,
        tensors: &tensors,
        params: Some(params),
        groups: grid(blocks as u64, device.limits().max_compute_workgroups_per_dimension)?,
    }
    // Every index is in range by construction or guarded (tile loads by Lk and D, scores and
    // p v by the row's key count, stores by Lq and Dv), and the tests run ragged shapes through
    // both loaders: naga's clamps cost a fifth of the time (8.25 vs 7.3 TFLOP/s measured).
    .run_with(&device, crate::pipeline::Checks::Unchecked)
}

thread_local! {
    /// `with_flash_blocking`'s choice for this thread (None: the default, blocked where it fits).
    static FLASH_BLOCKING: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with the flash path's register-blocked kernel allowed (`true`, the default) or not
/// (the one-row-per-thread kernel) on this thread: tests and `kiln bench` compare the two.
#[doc(hidden)]
pub fn with_flash_blocking<R>(blocked: bool, f: impl FnOnce() -> R) -> R {
    let before = FLASH_BLOCKING.with(|c| c.replace(Some(blocked)));
    let r = f();
    FLASH_BLOCKING.with(|c| c.set(before));
    r
}

/// Whether the blocked kernel issues the next tile's loads before this tile's arithmetic
/// (`KILN_FLASH_PREFETCH=1`; measured on the H100 at 8x8x1024x64 / 4x16x4096x64 causal: 8.33 /
/// 10.10 TFLOP/s against 8.80 / 10.70 without: its 32 registers cost more than the latency
/// they hide, as in the matmul).
fn flash_prefetch() -> bool {
    static ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENV.get_or_init(|| std::env::var("KILN_FLASH_PREFETCH").is_ok_and(|v| v == "1"))
}

/// Which exp2 the flash kernels' softmax uses (`KILN_FLASH_EXP2`, for measurement). Measured on
/// the H100 at 8x8x1024x64 / 4x16x4096x64 causal (blocked kernel): softmax 13.6 / 15.8 TFLOP/s
/// (13.9 / 16.3 before its two k_keep), special 9.5 / 10.8, builtin 14.5 / 17.2.
#[derive(Clone, Copy, Debug, PartialEq)]
enum FlashExp2 {
    /// `shaders/flash_exp2.wgsl`: builtin-free, for the softmax's range only (the default).
    Softmax,
    /// `special`: the shared builtin-free `k_exp2`, every input to a few ULP (the cost before).
    Special,
    /// `builtin`: WGSL's `exp2`, whose precision WGSL leaves to the device, so its bits differ
    /// between backends: only to measure what the builtin-free exp2 costs.
    Builtin,
}

fn flash_exp2_kind() -> FlashExp2 {
    static ENV: std::sync::OnceLock<FlashExp2> = std::sync::OnceLock::new();
    *ENV.get_or_init(|| match std::env::var("KILN_FLASH_EXP2").as_deref() {
        Ok("special") => FlashExp2::Special,
        Ok("builtin") => FlashExp2::Builtin,
        _ => FlashExp2::Softmax,
    })
}

/// The FLASH_EXP2 block of the flash kernels: `flash_exp2` and `flash_exp2_4`.
fn flash_exp2_source() -> String {
    let (scalar, vec4) = match flash_exp2_kind() {
        FlashExp2::Softmax => return FLASH_EXP2.to_string(),
        FlashExp2::Special => ("k_exp2(x)", "vec4<f32>(k_exp2(x.x), k_exp2(x.y), k_exp2(x.z), k_exp2(x.w))"),
        FlashExp2::Builtin => ("exp2(x)", "exp2(x)"),
    };
    format!(
        "fn flash_exp2(x: f32) -> f32 {{ return {scalar}; }}\n\
         fn flash_exp2_4(x: vec4<f32>) -> vec4<f32> {{ return {vec4}; }}\n"
    )
}

/// Whether the blocked kernel skips the accumulators' rescale where no row of the thread has a
/// new maximum in this tile (`KILN_FLASH_SKIP_RESCALE=1`; the same bits: the factor is exactly 1
/// there). Measured on the H100 at 8x8x1024x64 / 4x16x4096x64 causal: 13.7 / 16.0 TFLOP/s against
/// 14.0 / 16.4 without (twice, an earlier flash_exp2), then 13.67 / 15.93 against 13.56 / 15.82
/// (the final one): within noise either way. A warp holds 16 rows, so some row still grows in
/// most tiles.
fn flash_skip_rescale() -> bool {
    static ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENV.get_or_init(|| std::env::var("KILN_FLASH_SKIP_RESCALE").is_ok_and(|v| v == "1"))
}

/// Timing-only variants of the register-blocked kernel that drop a part of it (results are
/// wrong): `KILN_FLASH_PART=nored` (each thread's own row maxima instead of the round trip
/// through `red` and its barrier), `nos` (no Q K^T products), `noexp` (p = s - m, no exp2),
/// `nopv` (no P V products). Splits the kernel's time the way `KILN_COOP_PART` splits the f16
/// matmul's (BENCHMARKS.md item 40).
fn flash_part() -> &'static str {
    static P: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    P.get_or_init(|| std::env::var("KILN_FLASH_PART").unwrap_or_default())
}

/// `src` with the part `part` names cut out (unchanged for "" or an unknown name).
fn timing_part(src: String, part: &str) -> String {
    match part {
        "nored" => match (src.find("        red[rr + half][lane] = max4(s0);"), src.find("        m = mn;")) {
            (Some(a), Some(b)) if a < b => {
                let rescale_at = src[a..b].find("        let alpha").map_or(b, |r| a + r);
                format!(
                    "{}        let mn = max(m, vec4<f32>(max4(s0), max4(s1), max4(s2), max4(s3)));\n{}",
                    &src[..a],
                    &src[rescale_at..]
                )
            }
            _ => src,
        },
        "nos" => src.replacen("for (var d = 0u; d < DP * 4u; d += 4u) {", "for (var d = 0u; d < 0u; d += 4u) {", 1),
        "noexp" => src.replace("= flash_exp2_4(s", "= (s"),
        "nopv" => src.replacen("for (var j = 0u; j < jfull; j++) {", "for (var j = 0u; j < 0u; j++) {", 1).replacen(
            "for (var j = jfull; j < jmax; j++) {",
            "for (var j = jfull; j < jfull; j++) {",
            1,
        ),
        _ => src,
    }
}

/// The timing-only variants each change the blocked kernel's source (so a measurement under one
/// is never silently the whole kernel), and every variant still validates.
#[doc(hidden)]
pub fn flash_part_sources_for_tests() -> Vec<(&'static str, String, String)> {
    let whole = flash_blocked_source(DType::F32, 16, 16, false, true);
    ["nored", "nos", "noexp", "nopv"]
        .into_iter()
        .map(|p| (p, with_special(whole.clone()), with_special(timing_part(whole.clone(), p))))
        .collect()
}

fn flash_blocking_wanted() -> bool {
    static ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    FLASH_BLOCKING
        .with(|c| c.get())
        .unwrap_or_else(|| *ENV.get_or_init(|| std::env::var("KILN_FLASH_BLOCKED").map_or(true, |v| v != "0")))
}

/// Whether the register-blocked flash kernel takes these padded head sizes (vec4s) on `device`:
/// D and Dv up to 64, its tiles within the workgroup memory.
fn flash_blocked_fits(device: &crate::device::Device, dp: usize, dvp: usize) -> bool {
    let bytes = (dp * 4 * 16 + dp * 4 * 8 + 32 * dvp + 32 * 17 + 128) * 16;
    dp <= 16 && dvp <= 16 && bytes <= device.limits().max_compute_workgroup_storage_size as usize
}

/// The register-blocked flash kernel (`shaders/flash_attention_blocked.wgsl`): the per-thread
/// output block (4 rows x `dvp.div_ceil(8)` vec4s) as plain variables, the k steps unrolled.
fn flash_blocked_source(dtype: DType, dp: usize, dvp: usize, has_mask: bool, vec: bool) -> String {
    use std::fmt::Write;
    let t = dtype.wgsl();
    let lanes = ["x", "y", "z", "w"];
    let no = dvp.div_ceil(8);
    let mut declare = String::new();
    let mut rescale = String::new();
    for (x, lane) in lanes.iter().enumerate() {
        for c in 0..no {
            let _ = writeln!(declare, "    var o{x}_{c} = vec4<f32>(0.0);");
            let _ = writeln!(rescale, "        o{x}_{c} *= alpha.{lane};");
        }
    }
    rescale = if flash_skip_rescale() {
        format!(
            "        var alpha = vec4<f32>(1.0);\n        if (any(mn != m)) {{\n            alpha = flash_exp2_4(m - mn);\n{rescale}        }}\n"
        )
    } else {
        format!("        let alpha = flash_exp2_4(m - mn);\n{rescale}")
    };
    let mut s_steps = String::new();
    for dd in 0..4 {
        let _ = writeln!(
            s_steps,
            "            {{\n                let a = qt[(d + {dd}u) * 16u + ty];\n                let b = kt[(d + {dd}u) * 8u + tx];"
        );
        for (x, lane) in lanes.iter().enumerate() {
            let _ = writeln!(s_steps, "                s{x} = fma(vec4<f32>(a.{lane}), b, s{x});");
        }
        let _ = writeln!(s_steps, "            }}");
    }
    let mut mask_add = String::new();
    if has_mask {
        for (x, row_lane) in lanes.iter().enumerate() {
            for key_lane in lanes {
                let _ = writeln!(
                    mask_add,
                    "        if (r0 + {x}u < p.lq && jv.{key_lane} < lim.{row_lane}) {{ s{x}.{key_lane} += f32(mask[moff + (r0 + {x}u) * p.msq + jv.{key_lane} * p.msk]) * LOG2E; }}"
                );
            }
        }
    }
    let col = |c: usize| {
        if 8 * c + 8 <= dvp {
            format!("tx + {}u", 8 * c)
        } else {
            format!("min(tx + {}u, DVP - 1u)", 8 * c)
        }
    };
    let mut pv = String::new();
    let mut pv_guarded = String::new();
    for c in 0..no {
        let _ = writeln!(pv, "            let b{c} = vt[j * DVP + {}];", col(c));
        let _ = writeln!(pv_guarded, "            let b{c} = vt[j * DVP + {}];", col(c));
        for (x, lane) in lanes.iter().enumerate() {
            let _ = writeln!(pv, "            o{x}_{c} = fma(vec4<f32>(a.{lane}), b{c}, o{x}_{c});");
            let _ = writeln!(
                pv_guarded,
                "            o{x}_{c} = select(o{x}_{c}, fma(vec4<f32>(a.{lane}), b{c}, o{x}_{c}), vis.{lane});"
            );
        }
    }
    // Tile loads: every load of the thread issued, then the stores; with `prefetch` the next
    // tile's loads are issued before this tile's arithmetic and stored after it.
    let nt = 128;
    let (kt_tasks, vt_tasks) = (8 * dp, 32 * dvp);
    let (mut regs, mut fetch, mut store) = (String::new(), String::new(), String::new());
    for s in 0..kt_tasks.div_ceil(nt) {
        let guard =
            if (s + 1) * nt <= kt_tasks { "true".to_string() } else { format!("lid + {}u < {kt_tasks}u", s * nt) };
        let _ = writeln!(regs, "    let lk{s} = lid + {}u;", s * nt);
        for x in 0..4 {
            let _ = writeln!(regs, "    var k{s}_{x} = vec4<f32>(0.0);");
            let _ = writeln!(fetch, "        k{s}_{x} = vec4<f32>(0.0);");
        }
        let _ = writeln!(fetch, "        if ({guard}) {{");
        for x in 0..4 {
            let _ = writeln!(
                fetch,
                "            if (jn + lk{s} % 8u + {}u < p.lk) {{ k{s}_{x} = ldk(koff + (jn + lk{s} % 8u + {}u) * p.d, lk{s} / 8u); }}",
                8 * x,
                8 * x
            );
        }
        let _ = writeln!(fetch, "        }}");
        let _ = writeln!(store, "        if ({guard}) {{\n            let kb = (lk{s} / 8u) * 32u + lk{s} % 8u;");
        for (dd, lane) in lanes.iter().enumerate() {
            let _ = writeln!(
                store,
                "            kt[kb + {}u] = vec4<f32>(k{s}_0.{lane}, k{s}_1.{lane}, k{s}_2.{lane}, k{s}_3.{lane});",
                dd * 8
            );
        }
        let _ = writeln!(store, "        }}");
    }
    for s in 0..vt_tasks.div_ceil(nt) {
        let guard =
            if (s + 1) * nt <= vt_tasks { "true".to_string() } else { format!("lid + {}u < {vt_tasks}u", s * nt) };
        let _ = writeln!(regs, "    let lv{s} = lid + {}u;\n    var v{s} = vec4<f32>(0.0);", s * nt);
        let _ = writeln!(
            fetch,
            "        v{s} = vec4<f32>(0.0);\n        if ({guard} && jn + lv{s} / DVP < p.lk) {{ v{s} = ldv(voff + (jn + lv{s} / DVP) * p.dv, lv{s} % DVP); }}"
        );
        let _ = writeln!(store, "        if ({guard}) {{ vt[lv{s}] = v{s}; }}");
    }
    let (fetch_first, load_tiles, fetch_next) = if flash_prefetch() {
        (
            format!("    {{\n        let jn = 0u;\n{fetch}    }}\n"),
            store,
            format!("        if (j0 + BC < nk_block) {{\n        let jn = j0 + BC;\n{fetch}        }}\n"),
        )
    } else {
        (String::new(), format!("        {{\n        let jn = j0;\n{fetch}        }}\n{store}"), String::new())
    };
    let mut out = String::new();
    for (x, lane) in lanes.iter().enumerate() {
        for c in 0..no {
            let _ = writeln!(
                out,
                "    {{\n        let i = r0 + {x}u;\n        let cq = tx + {}u;\n        if (i < p.lq && cq < DVP) {{\n            let o = o{x}_{c} * inv.{lane};\n            let ob = (bi * p.lq + i) * p.dv + cq * 4u;",
                8 * c
            );
            for (e, el) in lanes.iter().enumerate() {
                let _ = writeln!(out, "            if (cq * 4u + {e}u < p.dv) {{ out[ob + {e}u] = {t}(o.{el}); }}");
            }
            let _ = writeln!(out, "        }}\n    }}");
        }
    }
    let lt = if vec { format!("vec4<{t}>") } else { t.to_string() };
    render(
        FLASH_BLOCKED,
        &[
            ("FLASH_PARAMS", FLASH_PARAMS),
            ("ATTENTION_COMMON", ATTENTION_COMMON),
            ("ENABLE", enables(&[dtype])),
            ("T", t),
            ("LT", &lt),
            ("DP", &dp.to_string()),
            ("DVP", &dvp.to_string()),
            (
                "MASK_BINDING",
                &if has_mask {
                    format!("@group(0) @binding(3) var<storage, read> mask: array<{t}>;")
                } else {
                    String::new()
                },
            ),
            ("OUT_SLOT", if has_mask { "4" } else { "3" }),
            ("P_SLOT", if has_mask { "5" } else { "4" }),
            ("LOADERS", &flash_loaders(vec)),
            ("FLASH_EXP2", &flash_exp2_source()),
            ("DECLARE", &declare),
            ("TILE_REGS", &regs),
            ("FETCH_FIRST", &fetch_first),
            ("LOAD_TILES", &load_tiles),
            ("FETCH_NEXT", &fetch_next),
            ("S_STEPS", &s_steps),
            ("MASK_ADD", &mask_add),
            ("RESCALE", &rescale),
            ("PV_STEP", &pv),
            ("PV_GUARDED", &pv_guarded),
            ("STORE", &out),
        ],
    )
}

/// The q, k and v loaders of the flash kernels: vec4 reads where D and Dv are multiples of 4,
/// else element by element with zeros past D (Dv).
fn flash_loaders(vec: bool) -> String {
    use std::fmt::Write;
    if vec {
        "fn ldq(base: u32, c: u32) -> vec4<f32> { return vec4<f32>(q[base / 4u + c]); }\n\
         fn ldk(base: u32, c: u32) -> vec4<f32> { return vec4<f32>(k[base / 4u + c]); }\n\
         fn ldv(base: u32, c: u32) -> vec4<f32> { return vec4<f32>(v[base / 4u + c]); }\n"
            .to_string()
    } else {
        let mut l = String::new();
        for (name, buf, n) in [("ldq", "q", "p.d"), ("ldk", "k", "p.d"), ("ldv", "v", "p.dv")] {
            let _ = write!(
                l,
                "fn {name}(base: u32, c: u32) -> vec4<f32> {{\n    var r = vec4<f32>(0.0);\n    \
                 for (var x = 0u; x < 4u; x++) {{\n        if (c * 4u + x < {n}) {{\n            \
                 r[x] = f32({buf}[base + c * 4u + x]);\n        }}\n    }}\n    return r;\n}}\n"
            );
        }
        l
    }
}

/// The flash kernel with its per-row state unrolled into plain variables: q in `q0..`, the
/// output accumulators in `a0..` (see the shader's header).
fn flash_source(
    dtype: DType,
    dp: usize,
    dvp: usize,
    bc: usize,
    has_mask: bool,
    vec: bool,
    opts: ScoreOptions,
) -> String {
    use std::fmt::Write;
    let t = dtype.wgsl();
    let loaders = flash_loaders(vec);
    let mut declare = String::new();
    for c in 0..dp {
        let _ = writeln!(declare, "    var q{c} = vec4<f32>(0.0);");
    }
    for c in 0..dvp {
        let _ = writeln!(declare, "    var a{c} = vec4<f32>(0.0);");
    }
    // The row's window start: keys before it are skipped.
    if opts.window.is_some() {
        declare.push_str("    var wbeg = 0u;\n");
        declare.push_str(&opts.window_wgsl("wbeg", "nk", "    "));
    }
    let mut load_q = String::new();
    for c in 0..dp {
        let _ = writeln!(load_q, "        q{c} = ldq(qbase, {c}u) * p.scale2;");
    }
    // Tile loads in groups of 8 per thread: all 8 issued, then stored.
    let mut tiles = String::new();
    for (name, per_key, f) in [("kt", dp, "tile_k(koff"), ("vt", dvp, "tile_v(voff")] {
        let n = (bc * per_key).div_ceil(FLASH_BR);
        for g0 in (0..n).step_by(8) {
            let g1 = (g0 + 8).min(n);
            let _ = writeln!(tiles, "        {{");
            for e in g0..g1 {
                let _ = writeln!(tiles, "            let x{e} = {f}, j0, lid + {}u);", e * FLASH_BR);
            }
            for e in g0..g1 {
                let idx = format!("lid + {}u", e * FLASH_BR);
                if (e + 1) * FLASH_BR <= bc * per_key {
                    let _ = writeln!(tiles, "            {name}[{idx}] = x{e};");
                } else {
                    let _ = writeln!(tiles, "            if ({idx} < {}u) {{ {name}[{idx}] = x{e}; }}", bc * per_key);
                }
            }
            let _ = writeln!(tiles, "        }}");
        }
    }
    // Key by key, rescaling only when the maximum grows (rarely, after the first keys). Measured
    // against 16-key sub-tiles (scores first, one rescale per sub-tile): 8.25 vs 5.6 TFLOP/s,
    // and far less code for software adapters to compile.
    let per_key = {
        let mut b = String::new();
        if opts.window.is_some() {
            b.push_str("            if (j0 + j < wbeg) {\n                continue;\n            }\n");
        }
        b.push_str("            let kb = j * DP;\n");
        let _ = writeln!(b, "            var sc = dot(q0, kt[kb]);");
        for c in 1..dp {
            let _ = writeln!(b, "            sc += dot(q{c}, kt[kb + {c}u]);");
        }
        // Scores here are in base 2 (q pre-scaled by scale * log2(e)): so is the cap.
        b.push_str(&opts.softcap_wgsl("sc", std::f32::consts::LOG2_E, "            "));
        if has_mask {
            let _ = writeln!(b, "            sc += f32(mask[moff + i * p.msq + (j0 + j) * p.msk]) * LOG2E;");
        }
        b.push_str("            if (sc > m) {\n                let alpha = flash_exp2(m - sc);\n                m = sc;\n                l *= alpha;\n");
        for c in 0..dvp {
            let _ = writeln!(b, "                a{c} *= alpha;");
        }
        b.push_str(
            "            }\n            let pj = flash_exp2(sc - m);\n            l += pj;\n            let vb = j * DVP;\n",
        );
        for c in 0..dvp {
            let _ = writeln!(b, "            a{c} = fma(vec4<f32>(pj), vt[vb + {c}u], a{c});");
        }
        b
    };
    let mut store = String::new();
    for c in 0..dvp {
        let _ = writeln!(store, "        let o{c} = a{c} * inv;");
        for x in 0..4 {
            let _ = writeln!(
                store,
                "        if ({}u < p.dv) {{ out[obase + {}u] = {t}(o{c}[{x}]); }}",
                c * 4 + x,
                c * 4 + x
            );
        }
    }
    let lt = if vec { format!("vec4<{t}>") } else { t.to_string() };
    render(
        FLASH,
        &[
            ("FLASH_PARAMS", FLASH_PARAMS),
            ("ATTENTION_COMMON", ATTENTION_COMMON),
            ("ENABLE", enables(&[dtype])),
            ("T", t),
            ("LT", &lt),
            ("BR", &FLASH_BR.to_string()),
            ("BC", &bc.to_string()),
            ("DP", &dp.to_string()),
            ("DVP", &dvp.to_string()),
            (
                "MASK_BINDING",
                &if has_mask {
                    format!("@group(0) @binding(3) var<storage, read> mask: array<{t}>;")
                } else {
                    String::new()
                },
            ),
            ("OUT_SLOT", if has_mask { "4" } else { "3" }),
            ("P_SLOT", if has_mask { "5" } else { "4" }),
            ("LOADERS", &loaders),
            ("FLASH_EXP2", &flash_exp2_source()),
            ("DECLARE", &declare),
            ("LOAD_Q", &load_q),
            ("LOAD_TILES", &tiles),
            ("PER_KEY", &per_key),
            ("STORE", &store),
        ],
    )
}

/// Keys per split of the split-KV path: enough splits for about `SPLIT_TARGET_GROUPS`
/// workgroups, a multiple of the kernel's `kc` keys per step. A function of the shape alone, so
/// every device sums in the same order. `KILN_DECODE_CHUNK` overrides it (tuning; at most
/// `SPLIT_TARGET_GROUPS` splits a row, which the combine kernel's weights array holds).
/// Loop passes one invocation of the flash (`Flash`) or per-row (`Fused`) kernel makes over `lk`
/// keys, for core/src/loop_budget.rs: measured on lavapipe (8 queries; the first wrong result
/// at): Flash 63062 keys at D 4, 64463 at D 64 (a pass a key); Fused 54793 at D 4, 29197 at
/// D 64 (~290 + 4.5 D a step of 256 keys). Over-counted here, to stay on the safe side.
fn one_invocation_passes(path: AttentionPath, lk: usize, d: usize, dv: usize) -> u64 {
    let (lk, d, dv) = (lk as u64, d as u64, dv as u64);
    match path {
        AttentionPath::Flash => lk + lk / 8 + 1024,
        _ => (lk / 256 + 1) * (300 + 5 * (d + dv)),
    }
}

/// `cap` (where given) bounds the keys of one split: a multiple of `kc`, from
/// [`split_keys_cap`].
fn split_chunk(rows: usize, lk: usize, kc: usize, cap: Option<usize>) -> usize {
    let chunk = if let Some(c) = decode_knobs().chunk {
        c.max(lk.div_ceil(SPLIT_TARGET_GROUPS)).div_ceil(kc).max(1) * kc
    } else {
        let splits = SPLIT_TARGET_GROUPS.div_ceil(rows).clamp(1, lk.div_ceil(kc).max(1));
        lk.div_ceil(splits).div_ceil(kc).max(1) * kc
    };
    cap.map_or(chunk, |c| chunk.min(c))
}

/// The most keys one split-KV workgroup may walk on `device` (None: any): on CPU adapters,
/// llvmpipe's loop limiter (core/src/loop_budget.rs) counts every loop pass of the split
/// kernels' invocation, so a split's keys are bounded there (and the splits grow in number).
/// Counted per step of `kc` keys, generously: the step loop, the K tile's copy, the score's
/// loop over D (once per key at most), Dv's per-thread loops over the step's keys, the
/// per-step reductions.
fn split_keys_cap(device: &crate::device::Device, kc: usize, d: usize, dv: usize) -> Option<usize> {
    let wg = WG;
    let per_step = 16 + 2 * kc * (d + 1) / wg.min(kc * 4) + (d * kc).div_ceil(4 * wg) + dv.div_ceil(wg) * (kc + 4);
    let fixed = 2 * (d.div_ceil(wg) + dv.div_ceil(wg)) + 8;
    crate::loop_budget::steps_per_dispatch(device, per_step as u64, fixed as u64).map(|s| s as usize * kc)
}

/// The split-KV path's tuning and timing knobs, read once.
struct DecodeKnobs {
    /// `KILN_DECODE_CHUNK=N`: keys per split.
    chunk: Option<usize>,
    /// `KILN_DECODE_KLOAD=row|block`: the vec4 kernel reads each key's K row in its own thread,
    /// or the step's rows as one block (default: block for f32, row for f16).
    block_loads: Option<bool>,
    /// `KILN_DECODE_HOIST=0`: the vec4 kernel's loads stay inside their bounds checks.
    hoist: bool,
    /// `KILN_DECODE_PART=nocombine|serialcombine|parallelcombine`: the two-pass vec4 path
    /// without its combine pass (results are wrong; for splitting the time only), or with the
    /// given merge.
    part: String,
    /// `KILN_DECODE_FUSE=0`: the vec4 kernel's splits merged by a second dispatch (the two-pass
    /// path) rather than by the last workgroup of each row, and RoPE with the cache write as a
    /// dispatch of its own rather than the QKV matvec's epilogue (`ops::kv_cache`): a decoder
    /// layer's 7 dispatches of before, for A/B timing.
    fuse: bool,
}

thread_local! {
    /// `with_decode_fusion`'s choice for this thread (None: `KILN_DECODE_FUSE`).
    static DECODE_FUSION: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Whether decode's fusions are on: `with_decode_fusion`'s choice on this thread, else
/// `KILN_DECODE_FUSE` (read once; on unless 0).
pub(crate) fn decode_fusion() -> bool {
    DECODE_FUSION.with(|c| c.get()).unwrap_or(decode_knobs().fuse)
}

/// Runs `f` with decode's fusions on or off on this thread, whatever `KILN_DECODE_FUSE` says:
/// tests hold the fused kernels to the unfused ones in one process.
#[doc(hidden)]
pub fn with_decode_fusion<R>(on: bool, f: impl FnOnce() -> R) -> R {
    let before = DECODE_FUSION.with(|c| c.replace(Some(on)));
    let r = f();
    DECODE_FUSION.with(|c| c.set(before));
    r
}

fn decode_knobs() -> &'static DecodeKnobs {
    static K: std::sync::OnceLock<DecodeKnobs> = std::sync::OnceLock::new();
    K.get_or_init(|| DecodeKnobs {
        chunk: Some(crate::env::env_or("KILN_DECODE_CHUNK", 0usize)).filter(|&c| c > 0),
        block_loads: match crate::env::env_or("KILN_DECODE_KLOAD", String::new()).as_str() {
            "row" => Some(false),
            "block" => Some(true),
            _ => None,
        },
        hoist: crate::env::env_or("KILN_DECODE_HOIST", 1u32) != 0,
        part: crate::env::env_or("KILN_DECODE_PART", String::new()),
        fuse: crate::env::env_or("KILN_DECODE_FUSE", 1u32) != 0,
    })
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
    // The vec4 kernel: D and Dv multiples of 4, q's row and a thread's dims in registers.
    let vec = g.d.is_multiple_of(4)
        && g.dv.is_multiple_of(4)
        && (4..=FLASH_MAX_D).contains(&g.d)
        && (4..=FLASH_MAX_D).contains(&g.dv);
    let kc = [64usize, 32, 16, 8, 4, 2, 1]
        .into_iter()
        .find(|kc| vec || (kc * (g.d + 1) + (g.d + 1) + 64 + kc) * 4 <= limit)
        .ok_or_else(|| {
            Error::InvalidArgument(format!("attention: D {} is more than workgroup memory holds for a mask", g.d))
        })?;
    let cap = split_keys_cap(&device, kc, g.d, g.dv);
    let chunk = split_chunk(g.rows, g.lk, kc, cap);
    let nsplit = g.lk.div_ceil(chunk).max(1);
    if cap.is_some() && nsplit > SPLIT_TARGET_GROUPS {
        return Err(Error::InvalidArgument(format!(
            "attention: {} keys are more than this CPU adapter's split-KV kernel takes ({} splits of {chunk}: \
             llvmpipe's loop limiter bounds each split)",
            g.lk, SPLIT_TARGET_GROUPS
        )));
    }
    let part_len = crate::shape::mul(g.rows * nsplit, g.dv + 2, "attention partials")?;
    let part = Tensor::empty_on(&device, &[part_len], DType::F32)?;
    let (msq, msk) = mask.map_or((0, 0), |(_, s)| (s[s.len() - 2], s[s.len() - 1]));
    let params = Params::new().u32(g.lq);
    let lk_word = params.len();
    let params = params
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
    let groups = (g.rows * nsplit) as u64;
    if vec {
        let mut tensors = vec![q, k, v];
        tensors.extend(mask.map(|(m, _)| m));
        tensors.push(&part);
        let (dp, dvp) = (g.d / 4, g.dv / 4);
        // Coalesced score loads need a step's 64 rows to split evenly into vec4s per thread, and
        // their DP + 1 products a key (padded against bank conflicts) in workgroup memory.
        // Measured on the H100 (8x8x1x64, 4096 keys, loads issued before their guards): block
        // loads 1657 -> 2043 GB/s in f32, but 1377 -> 1056 in f16, which keeps a row per thread.
        let knobs = decode_knobs();
        let block_default = dtype == DType::F32;
        let coalesced = WG.is_multiple_of(dp) && dp <= 32 && knobs.block_loads.unwrap_or(block_default);
        let hoist = knobs.hoist;
        let one_pass = decode_fusion() && knobs.part.is_empty();
        let mut spec =
            vec![dtype as u32, dp as u32, dvp as u32, has_mask as u32, coalesced as u32, hoist as u32, one_pass as u32];
        if !g.opts.is_off() {
            // 0 is neither a valid cap nor a valid window.
            spec.extend([g.opts.softcap.map_or(0, f32::to_bits), g.opts.window.map_or(0, |w| w as u32)]);
        }
        let key = crate::pipeline::PipelineKey::new("flash_attention_decode", &spec);
        let opts = g.opts;
        let source = move || with_special(decode_source(dtype, dp, dvp, has_mask, coalesced, hoist, one_pass, opts));
        let groups = grid(groups, device.limits().max_compute_workgroups_per_dimension)?;
        if crate::device::capture::capturing(&device) {
            if !one_pass || g.causal || has_mask {
                crate::device::capture::refuse(&device, "split-KV attention off its one-pass, unmasked kernel");
            } else {
                // A plan attends to one more key a position on, while the splits stay as they
                // are (`split_chunk` gives the same chunk and count); else capture again.
                let (rows, lk, kv_rows) = (g.rows, g.lk, g.kv_rows);
                crate::device::capture::follow(
                    &device,
                    Box::new(move |delta, w| {
                        let lk2 = lk.checked_add(delta).filter(|&l| l <= kv_rows)?;
                        let chunk2 = split_chunk(rows, lk2, kc, cap);
                        if chunk2 != chunk || lk2.div_ceil(chunk2).max(1) != nsplit {
                            return None;
                        }
                        w[lk_word] = lk2 as u32;
                        Some(groups)
                    }),
                );
            }
        }
        if !one_pass {
            Launch { key, source: Box::new(source), tensors: &tensors, params: Some(params), groups }.run(&device)?;
            return combine(g, &part, nsplit, out);
        }
        // One dispatch: the last workgroup of each row merges it (the shader's header); the
        // counters are the device's self-resetting ones, one per row.
        let counters = device.self_resetting_counters(g.rows)?;
        tensors.push(out);
        let mut bindings: Vec<Binding<'_>> =
            tensors.iter().enumerate().map(|(i, t)| Binding { slot: i as u32, buffer: t.raw(), size: None }).collect();
        bindings.push(Binding { slot: tensors.len() as u32, buffer: &counters, size: None });
        let pipe = device.pipeline_typed(key, crate::pipeline::Checks::Bounded, source)?;
        return device.dispatch(&pipe, &bindings, Some((bindings.len() as u32, params.bytes())), groups, None);
    }
    crate::device::capture::refuse(&device, "split-KV attention off its one-pass, unmasked kernel");
    let tensors = [q, k, v, mask.map_or(q, |(m, _)| m), &part];
    let opts = g.opts;
    Launch {
        key: format!("flash_attention_split:{dtype}:{kc}:{ds}:{dvt}:{has_mask}{}", opts.key()),
        source: Box::new(move || {
            with_special(render(
                SPLIT,
                &[
                    ("ATTENTION_COMMON", ATTENTION_COMMON),
                    ("ENABLE", enables(&[dtype])),
                    ("T", dtype.wgsl()),
                    ("KC", &kc.to_string()),
                    ("DS", &ds.to_string()),
                    ("DVT", &dvt.to_string()),
                    ("HAS_MASK", if has_mask { "true" } else { "false" }),
                    ("WINDOW", &opts.window_wgsl("jbeg", "nk", "    ")),
                    ("SOFTCAP", &opts.softcap_wgsl("s", 1.0, "            ")),
                ],
            ))
        }),
        tensors: &tensors,
        params: Some(params),
        groups: grid(groups, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run(&device)?;
    combine(g, &part, nsplit, out)
}

/// The split-KV kernel with vec4 loads, q and the score's loads unrolled over D and p v over a
/// thread's keys (see the shader's header).
/// `one_pass`: the row's last workgroup merges the splits (`flash_attention_decode_merge.wgsl`,
/// bound after `part`: `out`, then the counters); else `combine` runs after it.
#[allow(clippy::too_many_arguments)]
fn decode_source(
    dtype: DType,
    dp: usize,
    dvp: usize,
    has_mask: bool,
    coalesced: bool,
    hoist: bool,
    one_pass: bool,
    opts: ScoreOptions,
) -> String {
    use std::fmt::Write;
    let t = dtype.wgsl();
    let (mut load_q, mut score_pre, mut score, mut scratch) =
        (String::new(), String::new(), String::new(), String::new());
    if coalesced {
        // Key (lid + r WG) / DP = lid / DP + r WG / DP of the step, dims vec4 lid % DP.
        let _ = writeln!(load_q, "    let qv = vec4<f32>(q[qb + lid % DP]) * p.scale;");
        let _ = writeln!(scratch, "var<workgroup> sc: array<f32, {}>;", WG * (dp + 1));
        let _ = writeln!(score_pre, "        let kblk = (koff + j0 * p.d) / 4u;");
        for r in 0..dp {
            let (key, at) = (r * WG / dp, r * WG);
            if hoist {
                let _ = writeln!(
                    score_pre,
                    "        let k{r} = k[kblk + min(lid + {at}u, n * DP - 1u)];\n        \
                     if (lid / DP + {key}u < n) {{ sc[(lid / DP + {key}u) * (DP + 1u) + lid % DP] = \
                     dot(qv, vec4<f32>(k{r})); }}"
                );
            } else {
                let _ = writeln!(
                    score_pre,
                    "        {{ let key = lid / DP + {key}u; if (key < n) {{ sc[key * (DP + 1u) + lid % DP] = \
                     dot(qv, vec4<f32>(k[kblk + lid + {at}u])); }} }}"
                );
            }
        }
        score_pre.push_str("        workgroupBarrier();\n");
        score.push_str("            let sb = lid * (DP + 1u);\n");
        for c in 0..dp {
            let (op, eq) = if c == 0 { ("var ", "=") } else { ("", "+=") };
            let _ = writeln!(score, "            {op}sd {eq} sc[sb + {c}u];");
        }
    } else {
        for c in 0..dp {
            let _ = writeln!(load_q, "    let q{c} = vec4<f32>(q[qb + {c}u]) * p.scale;");
        }
        score.push_str("            let kb = (koff + (j0 + lid) * p.d) / 4u;\n");
        for c in 0..dp {
            let (op, eq) = if c == 0 { ("var ", "=") } else { ("", "+=") };
            let _ = writeln!(score, "            {op}sd {eq} dot(q{c}, vec4<f32>(k[kb + {c}u]));");
        }
    }
    score.push_str("            s = sd;\n");
    score.push_str(&opts.softcap_wgsl("s", 1.0, "            "));
    if has_mask {
        score.push_str("            s += f32(mask[moff + i * p.msq + (j0 + lid) * p.msk]);\n");
    }
    let groups = 64 / dvp;
    let mut pv = String::new();
    let steps = 64usize.div_ceil(groups);
    if hoist {
        // Every load first, unconditionally (a step's last valid row stands in past `n`), so
        // they are all in flight at once: loads inside the guards went out one round trip
        // after another. The same sums in the same order as with the guards around the loads.
        for jj in 0..steps {
            let _ =
                writeln!(pv, "            let v{jj} = v[(voff + (j0 + min(g + {jj}u * G, n - 1u)) * p.dv) / 4u + c];");
        }
    }
    for jj in 0..steps {
        let load = if hoist { format!("v{jj}") } else { "v[(voff + (j0 + kj) * p.dv) / 4u + c]".to_string() };
        let _ = writeln!(
            pv,
            "            {{ let kj = g + {jj}u * G; if (kj < n) {{ acc = fma(vec4<f32>(probs[kj]), \
             vec4<f32>({load}), acc); }} }}"
        );
    }
    let part_slot = if has_mask { 4 } else { 3 };
    let ending = if one_pass {
        render(
            DECODE_MERGE,
            &[
                ("T", t),
                ("OUT_SLOT", &(part_slot + 1).to_string()),
                ("CNT_SLOT", &(part_slot + 2).to_string()),
                ("MAXS", &SPLIT_TARGET_GROUPS.to_string()),
            ],
        ) + &render(MERGE_ROW, &[("T", t)])
    } else {
        "fn put(i: u32, x: f32) { part[i] = x; }\nfn finish(row: u32, lid: u32) {}\n".to_string()
    };
    render(
        DECODE,
        &[
            ("ATTENTION_COMMON", ATTENTION_COMMON),
            ("ENABLE", enables(&[dtype])),
            ("T", t),
            (
                "MASK_BINDING",
                &if has_mask {
                    format!("@group(0) @binding(3) var<storage, read> mask: array<{t}>;")
                } else {
                    String::new()
                },
            ),
            ("PART_SLOT", &part_slot.to_string()),
            ("PART_ELEM", if one_pass { "atomic<u32>" } else { "f32" }),
            ("P_SLOT", &(part_slot + if one_pass { 3 } else { 1 }).to_string()),
            ("ENDING", &ending),
            ("DP", &dp.to_string()),
            ("DVP", &dvp.to_string()),
            ("LOAD_Q", &load_q),
            ("SCORE_SCRATCH", &scratch),
            ("SCORE_PRE", &score_pre),
            ("SCORE", &score),
            ("PV", &pv),
            ("WINDOW", &opts.window_wgsl("jbeg", "nk", "    ")),
        ],
    )
}

/// The second pass of split-KV: the splits' partials of each row merged into `out`.
fn combine(g: &Geometry, part: &Tensor, nsplit: usize, out: &Tensor) -> Result<()> {
    let device = out.device().clone();
    let dtype = out.dtype();
    // Measured on the H100: the parallel merge 14.2 vs 10.2 us at 2 splits (9 rows, 128 keys),
    // 26.4 vs 32.4 at 32 splits, 64.8 vs 66.6 at 16 (64 rows, the whole op's time).
    let serial = match decode_knobs().part.as_str() {
        "nocombine" => return Ok(()),
        "serialcombine" => true,
        "parallelcombine" => false,
        _ => nsplit < SERIAL_COMBINE_BELOW,
    };
    let params = Params::new().u32(g.rows).u32(nsplit).u32(g.dv).u32(0);
    Launch {
        key: format!("flash_attention_combine:{dtype}:{serial}"),
        source: Box::new(move || {
            let (template, maxs) =
                if serial { (COMBINE_SERIAL, String::new()) } else { (COMBINE, SPLIT_TARGET_GROUPS.to_string()) };
            let mut src = render(template, &[("ENABLE", enables(&[dtype])), ("T", dtype.wgsl()), ("MAXS", &maxs)]);
            if !serial {
                src += &render(MERGE_ROW, &[("T", dtype.wgsl())]);
            }
            with_special(src)
        }),
        tensors: &[part, out],
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
        .u32(bs.len());
    let params = g.batch_params(params, None);
    let dvt = g.dv.div_ceil(WG).max(1);
    let tensors = [q, k, v, out];
    Launch {
        key: format!("attention:{dtype}:{dvt}"),
        source: Box::new(move || {
            with_special(render(
                TEMPLATE,
                &[
                    ("ATTENTION_COMMON", ATTENTION_COMMON),
                    ("ENABLE", enables(&[dtype])),
                    ("T", dtype.wgsl()),
                    ("DVT", &dvt.to_string()),
                ],
            ))
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
        key: crate::pipeline::PipelineKey::new("attention_softmax", &[]),
        source: Box::new(|| with_special(SOFTMAX.to_string())),
        tensors: &[&s, &probs],
        params: Some(params),
        groups: grid(rows as u64, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run(&device)?;
    drop(s);
    crate::ops::matmul(&probs, v)
}
