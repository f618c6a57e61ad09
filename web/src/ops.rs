//! The op library, one wrapper per core op with its own signature; the elementwise ops go
//! through `unary` / `binary` / `binaryScalar` by core name (js/ops_gen.js, from the op table,
//! gives each its own function). Axes and sizes are JavaScript numbers; optional arguments may
//! be `undefined` or `null`.

use crate::error::{invalid, js_err, JsResult};
use crate::tensor::{dtype, usizes, Tensor, TensorList};
use kiln_core::ops::{self, BinaryOp, QuantFormat, UnaryOp};
use wasm_bindgen::prelude::*;

fn out(r: kiln_core::Result<kiln_core::Tensor>) -> JsResult<Tensor> {
    r.map(Tensor::from).map_err(js_err)
}

fn isizes(v: &[i32]) -> Vec<isize> {
    v.iter().map(|&d| d as isize).collect()
}

fn pair(v: Option<Vec<u32>>, default: [usize; 2], what: &str) -> JsResult<[usize; 2]> {
    match v.as_deref() {
        None => Ok(default),
        Some([a]) => Ok([*a as usize, *a as usize]),
        Some([a, b]) => Ok([*a as usize, *b as usize]),
        Some(other) => Err(invalid(format!("{what} takes one or two numbers, not {}", other.len()))),
    }
}

fn format(name: &str) -> JsResult<QuantFormat> {
    QuantFormat::parse(name).map_err(js_err)
}

/// A seed is a whole number in [0, 2^53) (the integers a JavaScript number holds exactly).
fn seed(s: f64) -> JsResult<u64> {
    if s.fract() != 0.0 || !(0.0..9007199254740992.0).contains(&s) {
        return Err(invalid(format!("seed {s} is not a whole number in [0, 2^53)")));
    }
    Ok(s as u64)
}

#[wasm_bindgen]
pub fn zeros(shape: Vec<u32>, dtype_name: &str) -> JsResult<Tensor> {
    out(ops::zeros(&usizes(&shape), dtype(dtype_name)?))
}

#[wasm_bindgen]
pub fn ones(shape: Vec<u32>, dtype_name: &str) -> JsResult<Tensor> {
    out(ops::ones(&usizes(&shape), dtype(dtype_name)?))
}

#[wasm_bindgen]
pub fn full(shape: Vec<u32>, dtype_name: &str, value: f64) -> JsResult<Tensor> {
    out(ops::full(&usizes(&shape), dtype(dtype_name)?, value))
}

#[wasm_bindgen]
pub fn arange(start: f64, stop: f64, step: f64, dtype_name: &str) -> JsResult<Tensor> {
    out(ops::arange(start, stop, step, dtype(dtype_name)?))
}

#[wasm_bindgen(js_name = randomUniform)]
pub fn random_uniform(shape: Vec<u32>, dtype_name: &str, seed_: f64, low: f64, high: f64) -> JsResult<Tensor> {
    out(ops::random_uniform(&usizes(&shape), dtype(dtype_name)?, seed(seed_)?, low, high))
}

#[wasm_bindgen(js_name = randomNormal)]
pub fn random_normal(shape: Vec<u32>, dtype_name: &str, seed_: f64, mean: f64, std: f64) -> JsResult<Tensor> {
    out(ops::random_normal(&usizes(&shape), dtype(dtype_name)?, seed(seed_)?, mean, std))
}

/// An elementwise unary op by its core name.
#[wasm_bindgen]
pub fn unary(op: &str, x: &Tensor) -> JsResult<Tensor> {
    out(ops::unary(UnaryOp::parse(op).map_err(js_err)?, &x.inner))
}

/// An elementwise binary op by its core name, with numpy broadcasting.
#[wasm_bindgen]
pub fn binary(op: &str, a: &Tensor, b: &Tensor) -> JsResult<Tensor> {
    out(ops::binary(BinaryOp::parse(op).map_err(js_err)?, &a.inner, &b.inner))
}

/// `a OP s`, or `s OP a` with `scalar_first`; `s` is converted to `a`'s dtype.
#[wasm_bindgen(js_name = binaryScalar)]
pub fn binary_scalar(op: &str, a: &Tensor, s: f64, scalar_first: bool) -> JsResult<Tensor> {
    out(ops::binary_scalar(BinaryOp::parse(op).map_err(js_err)?, &a.inner, s, scalar_first))
}

#[wasm_bindgen(js_name = "where")]
pub fn where_(cond: &Tensor, a: &Tensor, b: &Tensor) -> JsResult<Tensor> {
    out(ops::where_(&cond.inner, &a.inner, &b.inner))
}

#[wasm_bindgen]
pub fn cast(x: &Tensor, dtype_name: &str) -> JsResult<Tensor> {
    out(ops::cast(&x.inner, dtype(dtype_name)?))
}

#[wasm_bindgen]
pub fn matmul(a: &Tensor, b: &Tensor) -> JsResult<Tensor> {
    out(ops::matmul(&a.inner, &b.inner))
}

macro_rules! reduce {
    ($($name:ident),*) => {$(
        #[wasm_bindgen]
        pub fn $name(x: &Tensor, axes: Option<Vec<i32>>, keepdims: Option<bool>) -> JsResult<Tensor> {
            let axes = axes.map(|a| isizes(&a));
            out(ops::$name(&x.inner, axes.as_deref(), keepdims.unwrap_or(false)))
        }
    )*};
}
reduce!(sum, mean, max, min, all, any);

/// `x` limited to [min, max] (tensor bounds broadcast to x; either may be absent).
#[wasm_bindgen]
pub fn clip(x: &Tensor, min: Option<Tensor>, max: Option<Tensor>) -> JsResult<Tensor> {
    out(ops::clip(&x.inner, min.as_ref().map(|t| &t.inner), max.as_ref().map(|t| &t.inner)))
}

/// `clip` with number bounds (-Infinity / Infinity: no bound).
#[wasm_bindgen(js_name = clipScalar)]
pub fn clip_scalar(x: &Tensor, min: f64, max: f64) -> JsResult<Tensor> {
    out(ops::clip_scalar(&x.inner, min, max))
}

#[wasm_bindgen(js_name = variance)]
pub fn var(x: &Tensor, axes: Option<Vec<i32>>, keepdims: Option<bool>, ddof: Option<u32>) -> JsResult<Tensor> {
    let axes = axes.map(|a| isizes(&a));
    out(ops::var(&x.inner, axes.as_deref(), keepdims.unwrap_or(false), ddof.unwrap_or(0) as usize))
}

#[wasm_bindgen]
pub fn argmax(x: &Tensor, axis: Option<i32>, keepdims: Option<bool>) -> JsResult<Tensor> {
    out(ops::argmax(&x.inner, axis.map(|a| a as isize), keepdims.unwrap_or(false)))
}

#[wasm_bindgen]
pub fn argmin(x: &Tensor, axis: Option<i32>, keepdims: Option<bool>) -> JsResult<Tensor> {
    out(ops::argmin(&x.inner, axis.map(|a| a as isize), keepdims.unwrap_or(false)))
}

#[wasm_bindgen]
pub fn softmax(x: &Tensor, axis: i32) -> JsResult<Tensor> {
    out(ops::softmax(&x.inner, axis as isize))
}

#[wasm_bindgen(js_name = logSoftmax)]
pub fn log_softmax(x: &Tensor, axis: i32) -> JsResult<Tensor> {
    out(ops::log_softmax(&x.inner, axis as isize))
}

#[wasm_bindgen(js_name = layerNorm)]
pub fn layer_norm(x: &Tensor, weight: Option<Tensor>, bias: Option<Tensor>, eps: Option<f32>) -> JsResult<Tensor> {
    out(ops::layer_norm(
        &x.inner,
        weight.as_ref().map(|t| &t.inner),
        bias.as_ref().map(|t| &t.inner),
        eps.unwrap_or(1e-5),
    ))
}

#[wasm_bindgen(js_name = rmsNorm)]
pub fn rms_norm(x: &Tensor, weight: Option<Tensor>, eps: Option<f32>) -> JsResult<Tensor> {
    out(ops::rms_norm(&x.inner, weight.as_ref().map(|t| &t.inner), eps.unwrap_or(1e-6)))
}

#[wasm_bindgen(js_name = batchNorm)]
pub fn batch_norm(
    x: &Tensor,
    mean: &Tensor,
    var: &Tensor,
    weight: Option<Tensor>,
    bias: Option<Tensor>,
    eps: Option<f32>,
) -> JsResult<Tensor> {
    out(ops::batch_norm(
        &x.inner,
        &mean.inner,
        &var.inner,
        weight.as_ref().map(|t| &t.inner),
        bias.as_ref().map(|t| &t.inner),
        eps.unwrap_or(1e-5),
    ))
}

#[wasm_bindgen]
pub fn conv2d(
    x: &Tensor,
    w: &Tensor,
    bias: Option<Tensor>,
    stride: Option<Vec<u32>>,
    padding: Option<Vec<u32>>,
    dilation: Option<Vec<u32>>,
    groups: Option<u32>,
) -> JsResult<Tensor> {
    out(ops::conv2d(
        &x.inner,
        &w.inner,
        bias.as_ref().map(|t| &t.inner),
        pair(stride, [1, 1], "stride")?,
        pair(padding, [0, 0], "padding")?,
        pair(dilation, [1, 1], "dilation")?,
        groups.unwrap_or(1) as usize,
    ))
}

#[wasm_bindgen(js_name = maxPool2d)]
pub fn max_pool2d(
    x: &Tensor,
    kernel: Vec<u32>,
    stride: Option<Vec<u32>>,
    padding: Option<Vec<u32>>,
) -> JsResult<Tensor> {
    let k = pair(Some(kernel), [1, 1], "kernel")?;
    out(ops::max_pool2d(&x.inner, k, pair(stride, k, "stride")?, pair(padding, [0, 0], "padding")?))
}

#[wasm_bindgen(js_name = avgPool2d)]
pub fn avg_pool2d(
    x: &Tensor,
    kernel: Vec<u32>,
    stride: Option<Vec<u32>>,
    padding: Option<Vec<u32>>,
) -> JsResult<Tensor> {
    let k = pair(Some(kernel), [1, 1], "kernel")?;
    out(ops::avg_pool2d(&x.inner, k, pair(stride, k, "stride")?, pair(padding, [0, 0], "padding")?))
}

#[wasm_bindgen]
pub fn reshape(x: &Tensor, shape: Vec<i32>) -> JsResult<Tensor> {
    out(ops::reshape(&x.inner, &isizes(&shape)))
}

#[wasm_bindgen]
pub fn permute(x: &Tensor, axes: Vec<i32>) -> JsResult<Tensor> {
    out(ops::permute(&x.inner, &isizes(&axes)))
}

/// Two axes swapped (numpy's swapaxes).
#[wasm_bindgen]
pub fn transpose(x: &Tensor, axis0: i32, axis1: i32) -> JsResult<Tensor> {
    out(ops::transpose(&x.inner, axis0 as isize, axis1 as isize))
}

/// js/kiln.js's `concat(tensors, axis)` builds the list.
#[wasm_bindgen(js_name = concatList)]
pub fn concat_list(xs: &TensorList, axis: i32) -> JsResult<Tensor> {
    let refs: Vec<&kiln_core::Tensor> = xs.items.iter().collect();
    out(ops::concat(&refs, axis as isize))
}

#[wasm_bindgen]
pub fn slice(x: &Tensor, axis: i32, start: i32, stop: i32, step: Option<i32>) -> JsResult<Tensor> {
    out(ops::slice(&x.inner, axis as isize, start as isize, stop as isize, step.unwrap_or(1) as isize))
}

#[wasm_bindgen(js_name = indexSelect)]
pub fn index_select(x: &Tensor, axis: i32, indices: &Tensor) -> JsResult<Tensor> {
    out(ops::index_select(&x.inner, axis as isize, &indices.inner))
}

#[wasm_bindgen]
pub fn gather(x: &Tensor, axis: i32, index: &Tensor) -> JsResult<Tensor> {
    out(ops::gather(&x.inner, axis as isize, &index.inner))
}

#[wasm_bindgen]
pub fn embedding(weight: &Tensor, ids: &Tensor) -> JsResult<Tensor> {
    out(ops::embedding(&weight.inner, &ids.inner))
}

#[wasm_bindgen]
pub fn rope(x: &Tensor, pos_offset: Option<u32>, base: Option<f32>) -> JsResult<Tensor> {
    out(ops::rope(&x.inner, pos_offset.unwrap_or(0) as usize, base.unwrap_or(10000.0)))
}

#[wasm_bindgen]
pub fn attention(q: &Tensor, k: &Tensor, v: &Tensor, causal: Option<bool>, scale: Option<f32>) -> JsResult<Tensor> {
    out(ops::attention(&q.inner, &k.inner, &v.inner, causal.unwrap_or(false), scale))
}

#[wasm_bindgen(js_name = quantFromBytes)]
pub fn quant_from_bytes(bytes: &[u8], format_name: &str, rows: u32, cols: u32) -> JsResult<Tensor> {
    let device = kiln_core::device().map_err(js_err)?;
    out(ops::quant_from_bytes(&device, bytes, format(format_name)?, rows as usize, cols as usize))
}

/// Resolves to the quantized tensor: ggml's reference quantizer runs on the host, after an
/// awaited readback.
#[wasm_bindgen]
pub async fn quantize(x: &Tensor, format_name: &str) -> JsResult<Tensor> {
    out(ops::quantize_async(&x.inner, format(format_name)?).await)
}

#[wasm_bindgen]
pub fn dequantize(w: &Tensor, format_name: &str, rows: u32, cols: u32) -> JsResult<Tensor> {
    out(ops::dequantize(&w.inner, format(format_name)?, rows as usize, cols as usize))
}

#[wasm_bindgen(js_name = quantMatmul)]
pub fn quant_matmul(x: &Tensor, w: &Tensor, format_name: &str, n: u32) -> JsResult<Tensor> {
    out(ops::quant_matmul(&x.inner, &w.inner, format(format_name)?, n as usize))
}

#[wasm_bindgen(js_name = quantEmbedding)]
pub fn quant_embedding(w: &Tensor, format_name: &str, d: u32, ids: &Tensor) -> JsResult<Tensor> {
    out(ops::quant_embedding(&w.inner, format(format_name)?, d as usize, &ids.inner))
}

fn opt_dtype(name: Option<String>) -> JsResult<Option<kiln_core::DType>> {
    name.map(|n| dtype(&n)).transpose()
}

#[wasm_bindgen]
pub fn prod(
    x: &Tensor,
    axes: Option<Vec<i32>>,
    keepdims: Option<bool>,
    dtype_name: Option<String>,
) -> JsResult<Tensor> {
    let axes = axes.map(|a| isizes(&a));
    out(ops::prod(&x.inner, axes.as_deref(), keepdims.unwrap_or(false), opt_dtype(dtype_name)?))
}

#[wasm_bindgen]
pub fn std(x: &Tensor, axes: Option<Vec<i32>>, keepdims: Option<bool>, ddof: Option<u32>) -> JsResult<Tensor> {
    let axes = axes.map(|a| isizes(&a));
    out(ops::std(&x.inner, axes.as_deref(), keepdims.unwrap_or(false), ddof.unwrap_or(0) as usize))
}

#[wasm_bindgen(js_name = cumulativeSum)]
pub fn cumulative_sum(
    x: &Tensor,
    axis: Option<i32>,
    dtype_name: Option<String>,
    include_initial: Option<bool>,
) -> JsResult<Tensor> {
    let axis = axis.map(|a| a as isize);
    out(ops::cumulative_sum(&x.inner, axis, opt_dtype(dtype_name)?, include_initial.unwrap_or(false)))
}

#[wasm_bindgen(js_name = cumulativeProd)]
pub fn cumulative_prod(
    x: &Tensor,
    axis: Option<i32>,
    dtype_name: Option<String>,
    include_initial: Option<bool>,
) -> JsResult<Tensor> {
    let axis = axis.map(|a| a as isize);
    out(ops::cumulative_prod(&x.inner, axis, opt_dtype(dtype_name)?, include_initial.unwrap_or(false)))
}

#[wasm_bindgen]
pub fn diff(x: &Tensor, axis: i32, n: u32, prepend: Option<Tensor>, append: Option<Tensor>) -> JsResult<Tensor> {
    out(ops::diff(
        &x.inner,
        axis as isize,
        n as usize,
        prepend.as_ref().map(|t| &t.inner),
        append.as_ref().map(|t| &t.inner),
    ))
}

#[wasm_bindgen]
pub fn vecdot(x1: &Tensor, x2: &Tensor, axis: i32) -> JsResult<Tensor> {
    out(ops::vecdot(&x1.inner, &x2.inner, axis as isize))
}

/// The last `n` axes of x1 with the first `n` of x2 (`axes1` and `axes2` absent), or the two
/// lists of axes paired.
#[wasm_bindgen]
pub fn tensordot(
    x1: &Tensor,
    x2: &Tensor,
    n: Option<u32>,
    axes1: Option<Vec<i32>>,
    axes2: Option<Vec<i32>>,
) -> JsResult<Tensor> {
    let axes = match (n, axes1, axes2) {
        (Some(n), None, None) => ops::TensordotAxes::Count(n as usize),
        (None, Some(a1), Some(a2)) => ops::TensordotAxes::Pairs(isizes(&a1), isizes(&a2)),
        _ => return Err(invalid("tensordot: axes is a count or a pair of lists of axes")),
    };
    out(ops::tensordot(&x1.inner, &x2.inner, &axes))
}

#[wasm_bindgen]
pub fn sort(x: &Tensor, axis: i32, descending: bool) -> JsResult<Tensor> {
    out(ops::sort(&x.inner, axis as isize, descending))
}

#[wasm_bindgen]
pub fn argsort(x: &Tensor, axis: i32, descending: bool) -> JsResult<Tensor> {
    out(ops::argsort(&x.inner, axis as isize, descending))
}

#[wasm_bindgen]
pub fn searchsorted(x1: &Tensor, x2: &Tensor, right: bool) -> JsResult<Tensor> {
    out(ops::searchsorted(&x1.inner, &x2.inner, right))
}

#[wasm_bindgen(js_name = countNonzero)]
pub fn count_nonzero(x: &Tensor, axes: Option<Vec<i32>>, keepdims: Option<bool>) -> JsResult<Tensor> {
    let axes = axes.map(|a| isizes(&a));
    out(ops::count_nonzero(&x.inner, axes.as_deref(), keepdims.unwrap_or(false)))
}

#[wasm_bindgen]
pub fn isin(x1: &Tensor, x2: &Tensor, invert: bool) -> JsResult<Tensor> {
    out(ops::isin(&x1.inner, &x2.inner, invert))
}

fn tensors(ts: Vec<kiln_core::Tensor>) -> Vec<Tensor> {
    ts.into_iter().map(Tensor::from).collect()
}

/// Resolves to one i32 tensor of coordinates per dimension of `x` (the count of non-zero
/// elements is an awaited readback).
#[wasm_bindgen]
pub async fn nonzero(x: &Tensor) -> JsResult<Vec<Tensor>> {
    ops::nonzero_async(&x.inner).await.map(tensors).map_err(js_err)
}

/// Resolves to `[values, indices, inverse_indices, counts]` (the number of distinct values is
/// an awaited readback); js/kiln.js names them.
#[wasm_bindgen(js_name = uniqueAll)]
pub async fn unique_all(x: &Tensor) -> JsResult<Vec<Tensor>> {
    let u = ops::unique_all_async(&x.inner).await.map_err(js_err)?;
    Ok(tensors(vec![u.values, u.indices, u.inverse_indices, u.counts]))
}
