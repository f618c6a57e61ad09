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

//!
//! The host side (quantize, dequantize_host) is `host.rs`; the product's kernels and their choice
//! (matrix-vector, tiled, cooperative; fusions) are `product.rs`.

mod host;
mod product;

pub use host::{dequantize_host, quantize, quantize_async};
pub(crate) use product::{check_fused, matvec, matvec_takes};
pub use product::{
    quant_matmul_fused, quant_matmul_fused_kernel, quant_matmul_fused_product, quant_product, quant_product_uses_coop,
};

pub use super::quant_coop::{
    quant_coop_decode_for_tests, quant_coop_source_for_tests, quant_coop_split_sources_for_tests, quant_coop_tilings,
    EpilogueFusion, ProductKernel, COOP_MIN_ROWS, QUANT_COOP_FORMATS,
};
pub use super::quant_format::{QuantFormat, QuantFusion};
pub use super::quant_matvec_wide::MatvecKernel;
use crate::device::Device;
use crate::dtype::DType;
use crate::exec::{check_indexable, check_same_device, enables, groups_1d, Launch, Params};
use crate::pipeline::{render, PipelineKey};
use crate::shape::check_rank;
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::Arc;

const ROWS: &str = include_str!("../../../../shaders/quant_rows.wgsl");

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

/// f32 [rows, cols] from a quantized matrix (tests, debugging; a model keeps its weights
/// quantized and uses [`quant_matmul`] / [`quant_embedding`]).
pub fn dequantize(w: &Tensor, format: QuantFormat, rows: usize, cols: usize) -> Result<Tensor> {
    check_weight("dequantize", w, format, rows, cols)?;
    check_rank(&[rows, cols])?;
    let out = Tensor::empty_on(w.device(), &[rows, cols], DType::F32)?;
    rows_kernel(w, format, rows, cols, None, &out)?;
    Ok(out)
}

/// [`dequantize`] rounded to f16 (one dispatch): the native tier's quantized product multiplies
/// these (ops/quant/product.rs), as the cooperative kernel rounds its decoded tiles.
pub(crate) fn dequantize_f16(w: &Tensor, format: QuantFormat, rows: usize, cols: usize) -> Result<Tensor> {
    check_rank(&[rows, cols])?;
    let out = Tensor::empty_on(w.device(), &[rows, cols], DType::F16)?;
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
    let ot = out.dtype();
    Launch {
        key: PipelineKey::new(op, &[format as u32, ot as u32]),
        source: Box::new(move || {
            enables(&[ot]).to_string()
                + &format.common_wgsl()
                + &render(ROWS, &[("IDS", decl), ("SRC", src), ("OT", ot.wgsl())])
        }),
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
