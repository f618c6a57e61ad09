//! GGUF / ggml quantized weights (Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, and the K formats Q4_K, Q5_K,
//! Q6_K) kept quantized on the GPU: a quantized matrix [rows, cols] is its raw GGUF bytes (rows
//! of cols/32 blocks, or cols/256 super-blocks, row-major) in a U32 tensor of shape
//! [ceil(nbytes / 4)], zero-padded (Kiln has no u8 dtype). Every kernel walks a row in 32-value
//! groups (a K super-block is 8 of them) that `shaders/quant_common.wgsl` decodes. The kernels
//! (`shaders/quant_*.wgsl`) decode blocks where they read them:
//! - `quant_matmul` with few rows of x (decode): a matrix-vector kernel, 256 / TPR W rows per
//!   workgroup, threads striding over a row's words (`quant_matvec_wide` for Q4_0 / Q4_1 / Q8_0
//!   and `quant_matvec_k` for Q4_K / Q5_K / Q6_K where they apply: whole words per thread, x
//!   staged in workgroup memory);
//! - with more rows (prefill): 64 x 64 output tiles, each W block decoded once into workgroup
//!   memory and used by 64 rows of x; or, from 16 rows where the adapter has f16 -> f32
//!   cooperative matrices, `quant_coop` (W decoded to f16 tiles, tensor-core products);
//! - `dequantize` and `quant_embedding`: one thread per 8 values.
//!
//! `quantize` runs on the host, as ggml's reference quantizers (`quantize_row_q4_0_ref`, …) do,
//! so the bytes equal ggml's.

pub use super::quant_coop::{
    quant_coop_decode_for_tests, quant_coop_source_for_tests, quant_coop_split_sources_for_tests, quant_coop_tilings,
    quant_product_uses_coop, EpilogueFusion, ProductKernel, COOP_MIN_ROWS, QUANT_COOP_FORMATS,
};
use super::quant_format::MATVEC_MAX_ROWS;
pub use super::quant_format::{QuantFormat, QuantFusion};
use super::quant_matvec_wide::strided_tpr;
pub use super::quant_matvec_wide::MatvecKernel;
use super::quant_rope::{rope_part, RopeToCache, ROPE_COMMON};
use crate::device::Device;
use crate::dtype::DType;
use crate::exec::{check_f16, check_indexable, check_same_device, enables, grid, groups_1d, Launch, Params};
use crate::pipeline::{render, Checks, PipelineKey};
use crate::shape::check_rank;
use crate::tensor::Tensor;
use crate::{Error, Result};
use half::f16;
use std::sync::Arc;

const MATVEC: &str = include_str!("../../../shaders/quant_matvec.wgsl");
const TILED: &str = include_str!("../../../shaders/quant_tiled.wgsl");
const ROWS: &str = include_str!("../../../shaders/quant_rows.wgsl");
const SWIGLU_ROWS: &str = include_str!("../../../shaders/quant_swiglu_rows.wgsl");

/// Rows of x one matrix-vector workgroup handles at once (the shader's MT at most).
const MATVEC_MT: usize = 4;
/// The tiled kernel's output tile (the shader's TS).
const TILE: usize = 64;

/// Words of the U32 tensor holding `nbytes` bytes.
fn words(nbytes: usize) -> usize {
    nbytes.div_ceil(4)
}

/// Uploads raw GGUF blocks (e.g. a memory-mapped slice of a .gguf file) of a [rows, cols] matrix
/// as the U32 tensor the quant ops read; `bytes.len()` must be `rows * format.row_bytes(cols)`.
pub fn quant_from_bytes(
    device: &Arc<Device>,
    bytes: &[u8],
    format: QuantFormat,
    rows: usize,
    cols: usize,
) -> Result<Tensor> {
    let want = format.matrix_bytes(rows, cols)?;
    if bytes.len() != want {
        return Err(Error::InvalidArgument(format!(
            "quant_from_bytes: {} bytes given for a {rows} x {cols} {format} matrix, which takes {want}",
            bytes.len()
        )));
    }
    let n = words(want);
    if bytes.len().is_multiple_of(4) {
        return Tensor::from_bytes_on(device, bytes, &[n], DType::U32);
    }
    let mut padded = Vec::with_capacity(n * 4);
    padded.extend_from_slice(bytes);
    padded.resize(n * 4, 0);
    Tensor::from_bytes_on(device, &padded, &[n], DType::U32)
}

/// Checks that `w` is the U32 tensor of a quantized [rows, cols] matrix in `format`.
fn check_weight(what: &str, w: &Tensor, format: QuantFormat, rows: usize, cols: usize) -> Result<usize> {
    if w.dtype() != DType::U32 {
        return Err(Error::DTypeMismatch(format!(
            "{what}: quantized weights are a u32 tensor of raw GGUF bytes, got {}",
            w.dtype()
        )));
    }
    let nbytes = format.matrix_bytes(rows, cols)?;
    let want = words(nbytes);
    if w.shape() != [want] {
        return Err(Error::ShapeMismatch(format!(
            "{what}: a {rows} x {cols} {format} matrix is {nbytes} bytes, a u32 tensor of shape [{want}]; got shape {:?}",
            w.shape()
        )));
    }
    check_indexable(want.saturating_add(1))?;
    // The kernels address halfwords in u32.
    check_indexable(nbytes / 2 + 2)?;
    Ok(nbytes)
}

/// Quantizes a 2-D f32 (or f16) tensor [rows, cols] as ggml's reference quantizers do (the
/// bytes equal `quantize_row_q4_0_ref` & co's), on the host: the result is the U32 tensor of
/// [`quant_from_bytes`], on x's device. `cols` must be a multiple of 32.
pub fn quantize(x: &Tensor, format: QuantFormat) -> Result<Tensor> {
    let (rows, cols) = quantize_shape(x, format)?;
    let vals: Vec<f32> = match x.dtype() {
        DType::F16 => x.to_vec::<f16>()?.into_iter().map(f16::to_f32).collect(),
        _ => x.to_vec::<f32>()?,
    };
    let bytes = quantize_host(&vals, format);
    quant_from_bytes(x.device(), &bytes, format, rows, cols)
}

/// `quantize` with its readback awaited (the browser's way; natively the same as `quantize`).
pub async fn quantize_async(x: &Tensor, format: QuantFormat) -> Result<Tensor> {
    let (rows, cols) = quantize_shape(x, format)?;
    let raw = x.to_bytes_async().await?;
    let vals: Vec<f32> = match x.dtype() {
        DType::F16 => bytemuck::pod_collect_to_vec::<u8, f16>(&raw).into_iter().map(f16::to_f32).collect(),
        _ => bytemuck::pod_collect_to_vec(&raw),
    };
    quant_from_bytes(x.device(), &quantize_host(&vals, format), format, rows, cols)
}

/// (rows, cols) of a tensor `quantize` takes.
fn quantize_shape(x: &Tensor, format: QuantFormat) -> Result<(usize, usize)> {
    if !x.dtype().is_float() {
        return Err(Error::DTypeMismatch(format!("quantize needs a float tensor (f32 or f16), got {}", x.dtype())));
    }
    if x.ndim() != 2 {
        return Err(Error::ShapeMismatch(format!("quantize: x must be [rows, cols], got shape {:?}", x.shape())));
    }
    let (rows, cols) = (x.shape()[0], x.shape()[1]);
    format.row_bytes(cols)?;
    Ok((rows, cols))
}

/// ggml's reference quantizers over whole rows of a multiple of 32 values (f32 arithmetic, in
/// ggml's order, so that the bytes match).
pub(crate) fn quantize_host(x: &[f32], format: QuantFormat) -> Vec<u8> {
    // Q5_0, Q5_1 and the K formats: ops::quant_kquants.
    if let Some(bytes) = super::quant_kquants::quantize(x, format) {
        return bytes;
    }
    let mut out = Vec::with_capacity(x.len() / QuantFormat::BLOCK_LEN * format.block_bytes());
    for blk in x.chunks_exact(QuantFormat::BLOCK_LEN) {
        match format {
            QuantFormat::Q4_0 => {
                let (mut amax, mut max) = (0.0f32, 0.0f32);
                for &v in blk {
                    if amax < v.abs() {
                        amax = v.abs();
                        max = v;
                    }
                }
                let d = max / -8.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                let q = |v: f32| c_int8(v * id + 8.5).min(15) as u8;
                for j in 0..16 {
                    out.push(q(blk[j]) | (q(blk[j + 16]) << 4));
                }
            }
            QuantFormat::Q4_1 => {
                let (mut min, mut max) = (f32::MAX, -f32::MAX);
                for &v in blk {
                    if v < min {
                        min = v;
                    }
                    if v > max {
                        max = v;
                    }
                }
                let d = (max - min) / 15.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                out.extend_from_slice(&f16::from_f32(min).to_le_bytes());
                let q = |v: f32| c_int8((v - min) * id + 0.5).min(15) as u8;
                for j in 0..16 {
                    out.push(q(blk[j]) | (q(blk[j + 16]) << 4));
                }
            }
            QuantFormat::Q8_0 => {
                // C's MAX(a, b) = a > b ? a : b, NaN included.
                let amax = blk.iter().fold(0.0f32, |a, &v| if a > v.abs() { a } else { v.abs() });
                let d = amax / 127.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                for &v in blk {
                    out.push(c_int8((v * id).round()) as u8);
                }
            }
            _ => unreachable!("{format} is quantized by ops::quant_kquants"),
        }
    }
    out
}

/// ggml's `dequantize_row_*` on the host: `out.len()` values (whole blocks) from `bytes`, the
/// same f32 values [`dequantize`] gives on a device (for host paths such as kiln-models' CPU
/// backend, which keep a matrix quantized and decode rows as they go).
pub fn dequantize_host(bytes: &[u8], format: QuantFormat, out: &mut [f32]) -> Result<()> {
    let want = format.row_bytes(out.len())?;
    if bytes.len() != want {
        return Err(Error::InvalidArgument(format!(
            "dequantize_host: {} bytes for {} {format} values, which take {want}",
            bytes.len(),
            out.len()
        )));
    }
    if !super::quant_kquants::dequantize(bytes, format, out) {
        dequantize_legacy(bytes, format, out);
    }
    Ok(())
}

/// ggml's `dequantize_row_q4_0` / `_q4_1` / `_q8_0` (whole blocks; the K and 5-bit formats are
/// `quant_kquants`'). Kept here rather than borrowed from `reference::quant`, which is the
/// independent check of this code and must not be what it checks.
fn dequantize_legacy(bytes: &[u8], format: QuantFormat, out: &mut [f32]) {
    let half = |b: &[u8], at: usize| f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32();
    let (len, bb) = (format.block_len(), format.block_bytes());
    for (blk, y) in bytes.chunks_exact(bb).zip(out.chunks_exact_mut(len)) {
        let d = half(blk, 0);
        match format {
            QuantFormat::Q4_0 => {
                for (j, &q) in blk[2..].iter().enumerate() {
                    y[j] = ((q & 0xF) as i32 - 8) as f32 * d;
                    y[j + len / 2] = ((q >> 4) as i32 - 8) as f32 * d;
                }
            }
            QuantFormat::Q4_1 => {
                let m = half(blk, 2);
                for (j, &q) in blk[4..].iter().enumerate() {
                    y[j] = (q & 0xF) as f32 * d + m;
                    y[j + len / 2] = (q >> 4) as f32 * d + m;
                }
            }
            QuantFormat::Q8_0 => y.iter_mut().zip(&blk[2..]).for_each(|(y, &q)| *y = q as i8 as f32 * d),
            _ => unreachable!("dequantize_legacy: {format} is quant_kquants'"),
        }
    }
}

/// C's `(int8_t)v` as ggml's x86-64 builds compute it (a truncating 32-bit conversion whose
/// NaN / out-of-range result 0x80000000, narrowed, is 0), so that NaN or infinite inputs give
/// ggml's bytes too.
fn c_int8(v: f32) -> i32 {
    let i = if v.is_nan() || !(-2147483648.0..2147483648.0).contains(&v) { i32::MIN } else { v as i32 };
    i as i8 as i32
}

/// f32 [rows, cols] from a quantized matrix (tests, debugging; a model keeps its weights
/// quantized and uses [`quant_matmul`] / [`quant_embedding`]).
pub fn dequantize(w: &Tensor, format: QuantFormat, rows: usize, cols: usize) -> Result<Tensor> {
    check_weight("dequantize", w, format, rows, cols)?;
    check_rank(&[rows, cols])?;
    let out = Tensor::empty_on(w.device(), &[rows, cols], DType::F32)?;
    rows_kernel(w, format, rows, cols, None, &out)?;
    Ok(out)
}

/// Rows of a quantized embedding table [V, D] picked by `ids` (i32 or u32, any shape): f32
/// [...ids.shape, D]. Ids outside [0, V), negative ones included, give rows of zeros (as
/// `ops::embedding`).
pub fn quant_embedding(w: &Tensor, format: QuantFormat, d: usize, ids: &Tensor) -> Result<Tensor> {
    if !matches!(ids.dtype(), DType::I32 | DType::U32) {
        return Err(Error::DTypeMismatch(format!("quant_embedding: ids must be i32 or u32, got {}", ids.dtype())));
    }
    check_same_device(&[w, ids])?;
    if w.dtype() != DType::U32 {
        return Err(Error::DTypeMismatch(format!(
            "quant_embedding: the table must be a u32 tensor of raw GGUF bytes, got {}",
            w.dtype()
        )));
    }
    if w.ndim() != 1 {
        return Err(Error::ShapeMismatch(format!(
            "quant_embedding: the table must be a 1-D u32 tensor of raw GGUF bytes, got shape {:?}",
            w.shape()
        )));
    }
    // V is what the table's length says; check_weight then insists on whole rows.
    let row_bytes = format.row_bytes(d)?;
    let vocab = (w.numel() * 4).checked_div(row_bytes).unwrap_or(0);
    if row_bytes == 0 && w.numel() != 0 {
        return Err(Error::ShapeMismatch(format!("quant_embedding: rows of D = 0 take no bytes, got {:?}", w.shape())));
    }
    check_weight("quant_embedding", w, format, vocab, d)?;
    if vocab > i32::MAX as usize {
        return Err(Error::InvalidArgument(format!("quant_embedding: {vocab} rows are past i32 indexing")));
    }
    let mut shape = ids.shape().to_vec();
    shape.push(d);
    check_rank(&shape)?;
    let out = Tensor::empty_on(w.device(), &shape, DType::F32)?;
    rows_kernel(w, format, vocab, d, Some(ids), &out)?;
    Ok(out)
}

fn rows_kernel(
    w: &Tensor,
    format: QuantFormat,
    rows: usize,
    cols: usize,
    ids: Option<&Tensor>,
    out: &Tensor,
) -> Result<()> {
    let device = w.device().clone();
    check_indexable(out.numel())?;
    let out_rows = out.numel().checked_div(cols).unwrap_or(0);
    let row_units = cols / QuantFormat::BLOCK_LEN * 4;
    let units = out_rows * row_units;
    if units == 0 {
        return Ok(());
    }
    let params = Params::new()
        .u32(units)
        .u32(row_units)
        .u32(cols)
        .u32(rows)
        .u32(format.row_bytes(cols)? / 2)
        .u32(0u32)
        .u32(0u32)
        .u32(0u32);
    let (op, decl, src) = match ids {
        None => ("dequantize", "@group(0) @binding(2) var<uniform> p: Params;", "r"),
        Some(_) => (
            "quant_embedding",
            "@group(0) @binding(2) var<storage, read> ids: array<u32>;\n@group(0) @binding(3) var<uniform> p: Params;",
            // i32 ids are read as u32: a negative one is then >= 2^31 > rows, so out of range.
            "ids[r]",
        ),
    };
    let mut tensors = vec![w, out];
    tensors.extend(ids);
    Launch {
        key: PipelineKey::new(op, &[format as u32]),
        source: Box::new(move || format.common_wgsl() + &render(ROWS, &[("IDS", decl), ("SRC", src)])),
        tensors: &tensors,
        params: Some(params),
        groups: groups_1d(&device, units)?,
    }
    .run(&device)
}

/// x [..., K] (f32 or f16) times Wᵀ for W quantized [N, K] (nn.Linear's and ggml_mul_mat's
/// layout): [..., N] in x's dtype, accumulated in f32. K must be a multiple of 32.
pub fn quant_matmul(x: &Tensor, w: &Tensor, format: QuantFormat, n: usize) -> Result<Tensor> {
    quant_matmul_fused(x, w, format, n, QuantFusion::default())
}

/// [`quant_matmul`] with the fusions of `fusion`: what `rms_norm`, `quant_matmul`, `silu`, `mul`
/// and `add` give in sequence, to f32 rounding (the norm's scale is applied to the f32 sum, not
/// to a rounded normalised x). Few rows of x (decode) run as one kernel; more rows compose the
/// separate ops (their matmul dominates).
pub fn quant_matmul_fused(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    n: usize,
    fusion: QuantFusion,
) -> Result<Tensor> {
    quant_matmul_fused_kernel(x, w, format, n, fusion, MatvecKernel::Auto)
}

/// [`quant_matmul_fused`] on the matrix-vector kernel `kernel` picks (tests and A/B timing;
/// `Auto` is what [`quant_matmul_fused`] does).
pub fn quant_matmul_fused_kernel(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    n: usize,
    fusion: QuantFusion,
    kernel: MatvecKernel,
) -> Result<Tensor> {
    let (k, m, shape) = check_fused(x, w, format, n, &fusion)?;
    if k == 0 || (m > MATVEC_MAX_ROWS && kernel != MatvecKernel::Strided) {
        return composed(x, w, format, n, fusion, ProductKernel::Auto, EpilogueFusion::Auto);
    }
    let out = Tensor::empty_on(x.device(), &shape, x.dtype())?;
    if out.numel() == 0 {
        return Ok(out);
    }
    // The K formats' own kernel (Q4_K, Q5_K, Q6_K), then the wide one (Q4_0, Q4_1, Q8_0).
    if super::quant_matvec_k::run(x, w, &out, format, n, k, m, &fusion, kernel, None)? {
        return Ok(out);
    }
    if super::quant_matvec_wide::run(x, w, &out, format, n, k, m, &fusion, kernel, None)? {
        return Ok(out);
    }
    matvec(x, w, format, n, fusion, &out, None)?;
    Ok(out)
}

/// `quant_matmul_fused`'s checks of its operands; returns K, the rows of x and the result's
/// shape.
pub(crate) fn check_fused(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    n: usize,
    fusion: &QuantFusion,
) -> Result<(usize, usize, Vec<usize>)> {
    let mut all = vec![x, w];
    all.extend(fusion.rms_norm.map(|(g, _)| g));
    all.extend(fusion.residual);
    let device = check_same_device(&all)?;
    let dtype = x.dtype();
    if !dtype.is_float() {
        return Err(Error::DTypeMismatch(format!("quant_matmul needs float x (f32 or f16), got {dtype}")));
    }
    if x.ndim() == 0 {
        return Err(Error::ShapeMismatch("quant_matmul: x must be [..., K], got a scalar".into()));
    }
    let k = *x.shape().last().unwrap_or(&0);
    let rows =
        if fusion.swiglu { n.checked_mul(2).ok_or_else(|| Error::InvalidArgument(format!("{n} rows")))? } else { n };
    check_weight("quant_matmul", w, format, rows, k)?;
    // Its real work: every row of x against every row of W (K multiply-adds each).
    let x_rows = x.numel().checked_div(k).unwrap_or(0);
    crate::exec::charge_work("quant_matmul", crate::exec::work_of(&[x_rows, rows, k]))?;
    check_f16(&device, &[dtype])?;
    let mut shape = x.shape().to_vec();
    *shape.last_mut().unwrap_or(&mut 0) = n;
    check_rank(&shape)?;
    if let Some((g, eps)) = fusion.rms_norm {
        if g.shape() != [k] || g.dtype() != dtype {
            return Err(Error::ShapeMismatch(format!(
                "quant_matmul: the norm weight must be [{k}] {dtype}, got {:?} {}",
                g.shape(),
                g.dtype()
            )));
        }
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(Error::InvalidArgument(format!(
                "quant_matmul: the norm's eps must be finite and >= 0, got {eps}"
            )));
        }
    }
    if let Some(r) = fusion.residual {
        if r.shape() != shape.as_slice() || r.dtype() != dtype {
            return Err(Error::ShapeMismatch(format!(
                "quant_matmul: the residual must be {shape:?} {dtype}, got {:?} {}",
                r.shape(),
                r.dtype()
            )));
        }
    }
    Ok((k, x_rows, shape))
}

/// Whether [`matvec`] takes `m` rows of x of `k` values (else the tiled kernel, composed).
pub(crate) fn matvec_takes(m: usize, k: usize) -> bool {
    k > 0 && m <= MATVEC_MAX_ROWS
}

/// The matrix-vector kernel into `out` (operands checked by the caller, `matvec_takes` true,
/// `out` not empty); with `rope`, `fusion` may hold only the norm.
pub(crate) fn matvec(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    n: usize,
    fusion: QuantFusion,
    out: &Tensor,
    rope: Option<&RopeToCache>,
) -> Result<()> {
    let device = x.device().clone();
    let dtype = x.dtype();
    let k = *x.shape().last().unwrap_or(&0);
    let m = x.numel() / k;
    let (blocks, row_h, enable, max_dim) = launch_sizes(x, out, format, k)?;
    let mt = m.min(MATVEC_MT);
    // Enough threads per row to cover a short row in one or two strides, few enough that a
    // workgroup does several rows (N = 576 then still makes dozens of workgroups).
    let tpr = strided_tpr(blocks);
    let rows_per_wg = 256 / tpr;
    let mut groups = grid(n.div_ceil(rows_per_wg) as u64, max_dim)?;
    groups[2] = m.div_ceil(mt) as u32;
    let eps = fusion.rms_norm.map_or(0.0, |(_, e)| e);
    let mut params = Params::new().u32(m).u32(n).u32(k).u32(blocks).u32(row_h).f32(eps).u32(0u32).u32(0u32);
    let (norm, glu, res) = (fusion.rms_norm.is_some(), fusion.swiglu, fusion.residual.is_some());
    let acc = mt * if glu { 2 } else { 1 };
    let g = fusion.rms_norm.map_or(x, |(g, _)| g);
    let r = fusion.residual.unwrap_or(x);
    let mut tensors = vec![w, x, out, g, r];
    if let Some(rp) = rope {
        if glu || res || !n.is_multiple_of(2 * rp.half) {
            return Err(Error::Internal("quant matvec: RoPE takes whole heads and no SwiGLU or residual".into()));
        }
        let pos_word;
        (params, pos_word) = rp.push_params(params);
        tensors.extend([rp.k_cache, rp.v_cache]);
        tensors.extend(rp.factors);
        // Slots 2j and 2j + 1 take pair j: rows_per_wg / 2 of the n / 2 pairs per workgroup.
        let mut g = grid((n / 2).div_ceil(rows_per_wg / 2) as u64, max_dim)?;
        g[2] = groups[2];
        groups = g;
        rp.follow_in_plan(&device, pos_word, m, groups);
    }
    let with_rope = rope.is_some();
    let factors = rope.is_some_and(|r| r.factors.is_some());
    Launch {
        key: PipelineKey::new(
            "quant_matvec",
            &[
                format as u32,
                dtype as u32,
                tpr as u32,
                mt as u32,
                norm as u32,
                glu as u32,
                res as u32,
                with_rope as u32,
                factors as u32,
            ],
        ),
        source: Box::new(move || {
            let t = dtype.wgsl();
            let (fields, part, slot) = rope_part(with_rope, factors, t);
            let src = enable.to_string()
                + &format.common_wgsl()
                + &render(
                    MATVEC,
                    &[
                        ("T", t),
                        ("TPR", &tpr.to_string()),
                        ("MT", &mt.to_string()),
                        ("ACC", &acc.to_string()),
                        ("RED", &(256 * acc).to_string()),
                        ("NORM", &norm.to_string()),
                        ("GLU", &glu.to_string()),
                        ("RES", &res.to_string()),
                        ("ROPE", &with_rope.to_string()),
                        ("ROPE_FIELDS", &fields),
                        ("P_SLOT", &slot),
                        ("ROPE_PART", &part),
                    ],
                );
            if with_rope {
                crate::ops::elementwise::with_special(src + ROPE_COMMON)
            } else {
                src
            }
        }),
        tensors: &tensors,
        params: Some(params),
        groups,
    }
    .run_with(&device, Checks::Unchecked)
}

/// What both product kernels take: blocks per row, halfwords per W row, the WGSL `enable` line
/// and the per-dimension workgroup limit (after checking that x and out are indexable).
fn launch_sizes(x: &Tensor, out: &Tensor, format: QuantFormat, k: usize) -> Result<(usize, usize, &'static str, u32)> {
    check_indexable(x.numel())?;
    check_indexable(out.numel())?;
    let max_dim = x.device().limits().max_compute_workgroups_per_dimension;
    Ok((k / QuantFormat::BLOCK_LEN, format.row_bytes(k)? / 2, enables(&[x.dtype()]), max_dim))
}

/// `quant_matmul_fused` for many rows of x: the separate ops in sequence.
fn composed(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    n: usize,
    fusion: QuantFusion,
    kernel: ProductKernel,
    epilogue: EpilogueFusion,
) -> Result<Tensor> {
    let normed;
    let x = match fusion.rms_norm {
        Some((g, eps)) => {
            normed = crate::ops::rms_norm(x, Some(g), eps)?;
            &normed
        }
        None => x,
    };
    // On cooperative matrices the SwiGLU and the residual can be the kernel's epilogue.
    let k = *x.shape().last().unwrap_or(&0);
    let m = x.numel().checked_div(k).unwrap_or(0);
    let rows = if fusion.swiglu { 2 * n } else { n };
    let epi = super::quant_coop::Epilogue { swiglu: fusion.swiglu, residual: fusion.residual };
    if m > 0 && n > 0 && k > 0 && super::quant_coop::fuses(x.device(), format, (m, rows, k), kernel, epi, epilogue) {
        let mut shape = x.shape().to_vec();
        *shape.last_mut().unwrap_or(&mut 0) = n;
        let out = Tensor::empty_on(x.device(), &shape, x.dtype())?;
        check_indexable(x.numel())?;
        check_indexable(out.numel())?;
        if super::quant_coop::run(x, w, &out, format, (m, rows, k), kernel, epi)? {
            return Ok(out);
        }
    }
    // Else the residual folds into the product's store (tiled or cooperative) unless SwiGLU
    // comes between or the separate ops were asked for.
    let folded = fusion.residual.filter(|_| !fusion.swiglu && epilogue != EpilogueFusion::Separate);
    let mut y = product(x, w, format, rows, kernel, folded)?;
    if fusion.swiglu && y.dtype() == DType::F32 && epilogue != EpilogueFusion::Separate {
        y = swiglu_rows(&y, n)?;
    } else if fusion.swiglu {
        let axis = y.ndim() as isize - 1;
        let gate = crate::ops::slice(&y, axis, 0, n as isize, 1)?;
        let up = crate::ops::slice(&y, axis, n as isize, 2 * n as isize, 1)?;
        y = crate::ops::mul(&crate::ops::silu(&gate)?, &up)?;
    }
    match fusion.residual {
        Some(r) if folded.is_none() => crate::ops::add(&y, r),
        _ => Ok(y),
    }
}

/// [`quant_matmul_fused`] for many rows of x on the product kernel `kernel`, with its SwiGLU and
/// residual in the cooperative kernel's epilogue or as separate ops as `epilogue` says (A/B
/// timing and tests).
pub fn quant_matmul_fused_product(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    n: usize,
    fusion: QuantFusion,
    kernel: ProductKernel,
    epilogue: EpilogueFusion,
) -> Result<Tensor> {
    check_fused(x, w, format, n, &fusion)?;
    composed(x, w, format, n, fusion, kernel, epilogue)
}

/// x [..., K] times Wᵀ (W quantized [N, K]) on the many-rows product kernel `kernel` picks,
/// whatever the rows of x (tests and A/B timing: [`quant_matmul`] takes the matrix-vector
/// kernels for few rows and `ProductKernel::Auto` for more).
pub fn quant_product(x: &Tensor, w: &Tensor, format: QuantFormat, n: usize, kernel: ProductKernel) -> Result<Tensor> {
    check_fused(x, w, format, n, &QuantFusion::default())?;
    product(x, w, format, n, kernel, None)
}

/// silu(gate) * up of y [..., 2n] (each row's gate values, then its up values), f32: one
/// dispatch for the slice, slice, silu and mul of the f16 path, the same bits.
fn swiglu_rows(y: &Tensor, n: usize) -> Result<Tensor> {
    let device = y.device().clone();
    let mut shape = y.shape().to_vec();
    *shape.last_mut().unwrap_or(&mut 0) = n;
    let out = Tensor::empty_on(&device, &shape, DType::F32)?;
    let total = out.numel();
    check_indexable(y.numel())?;
    if total == 0 {
        return Ok(out);
    }
    Launch {
        key: PipelineKey::new("quant_swiglu_rows", &[]),
        source: Box::new(|| crate::ops::elementwise::with_special(SWIGLU_ROWS.to_string())),
        tensors: &[y, &out],
        params: Some(Params::new().u32(total).u32(n).u32(0u32).u32(0u32)),
        groups: groups_1d(&device, total)?,
    }
    .run(&device)?;
    Ok(out)
}

/// The plain product for many rows of x (checked by the caller), plus `residual` (x's shape
/// with n last, x's dtype: checked by the caller) if given: on cooperative matrices where
/// `kernel` and the device allow (`quant_coop`), else through the tiled kernel.
fn product(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    n: usize,
    kernel: ProductKernel,
    residual: Option<&Tensor>,
) -> Result<Tensor> {
    let device = x.device().clone();
    let dtype = x.dtype();
    let k = *x.shape().last().unwrap_or(&0);
    let mut shape = x.shape().to_vec();
    *shape.last_mut().unwrap_or(&mut 0) = n;
    if k == 0 {
        let zeros = crate::ops::full_on(&device, &shape, dtype, 0.0)?;
        return match residual {
            Some(r) => crate::ops::add(&zeros, r),
            None => Ok(zeros),
        };
    }
    let m = x.numel() / k;
    let out = Tensor::empty_on(&device, &shape, dtype)?;
    if out.numel() == 0 {
        return Ok(out);
    }
    check_indexable(x.numel())?;
    check_indexable(out.numel())?;
    if super::quant_coop::run(
        x,
        w,
        &out,
        format,
        (m, n, k),
        kernel,
        super::quant_coop::Epilogue { swiglu: false, residual },
    )? {
        return Ok(out);
    }
    let (blocks, row_h, enable, max_dim) = launch_sizes(x, &out, format, k)?;
    // Loop passes (core/src/loop_budget.rs) per block of K, generously: lavapipe runs 1024
    // blocks right and 4096 wrong, so a block makes at most 64 (its loop's own, the k steps').
    let max_blocks = crate::loop_budget::steps_per_dispatch(&device, 64, 64);
    let branges = crate::loop_budget::chunks(blocks, 1, max_blocks);
    if branges.len() > 1 && dtype == DType::F16 {
        // Split K carries the sums in `out`: in f16 they would be rounded between dispatches,
        // so the product runs in f32 and is rounded once, the residual added after the
        // rounding as the fused kernel (and ops::add) does.
        let y = product(&crate::ops::cast(x, DType::F32)?, w, format, n, kernel, None)?;
        let y = crate::ops::cast(&y, DType::F16)?;
        return match residual {
            Some(r) => crate::ops::add(&y, r),
            None => Ok(y),
        };
    }
    let tiles_n = n.div_ceil(TILE);
    let tiles = (tiles_n as u64) * (m.div_ceil(TILE) as u64);
    let res = residual.is_some();
    let source = move || {
        enable.to_string()
            + &format.common_wgsl()
            + &render(TILED, &[("T", dtype.wgsl()), ("RES", if res { "true" } else { "false" })])
    };
    for (bbegin, bend) in branges {
        let params = Params::new().u32(m).u32(n).u32(k).u32(blocks).u32(row_h).u32(tiles_n).u32(bbegin).u32(bend);
        Launch {
            key: PipelineKey::new("quant_tiled", &[format as u32, dtype as u32, res as u32]),
            source: Box::new(source),
            // Without a residual x stands in at its slot (the layout stays one).
            tensors: &[w, x, &out, residual.unwrap_or(x)],
            params: Some(params),
            groups: grid(tiles, max_dim)?,
        }
        .run_with(&device, Checks::Unchecked)?;
    }
    Ok(out)
}
