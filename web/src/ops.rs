//! The ops whose wasm export is written by hand, and the helpers the generated ones
//! (ops_gen.rs, from kiln-core's op table) share. By hand, because JavaScript's idiom differs
//! from a plain call: the elementwise ops by name (`unary` / `binary` / `binaryScalar`:
//! js/ops_gen.js gives each its own function, a number on either side); promises where the op
//! waits for a readback and gives several tensors, which the page's one thread must not block on
//! (nonzero, uniqueAll; quantize's promise is generated); and the rows the table marks as not plain (clip's two forms, tensordot's axes,
//! quant_from_bytes's host bytes). Axes and sizes are JavaScript numbers; optional arguments may
//! be `undefined` or `null`.

use crate::error::{invalid, js_err, JsResult};
use crate::tensor::Tensor;
use kiln_core::ops::{self, BinaryOp, QuantFormat, UnaryOp};
use wasm_bindgen::prelude::*;

pub(crate) fn out(r: kiln_core::Result<kiln_core::Tensor>) -> JsResult<Tensor> {
    r.map(Tensor::from).map_err(js_err)
}

pub(crate) fn isizes(v: &[i32]) -> Vec<isize> {
    v.iter().map(|&d| d as isize).collect()
}

/// (height, width) from one number (both) or two; `default` when absent.
pub(crate) fn pair(v: Option<Vec<u32>>, default: [usize; 2], what: &str) -> JsResult<[usize; 2]> {
    match v.as_deref() {
        None => Ok(default),
        Some([a]) => Ok([*a as usize, *a as usize]),
        Some([a, b]) => Ok([*a as usize, *b as usize]),
        Some(other) => Err(invalid(format!("{what} takes one or two numbers, not {}", other.len()))),
    }
}

pub(crate) fn quant_format(name: &str) -> JsResult<QuantFormat> {
    QuantFormat::parse(name).map_err(js_err)
}

/// A u64 argument (a seed) is a whole number in [0, 2^53) (the integers a JavaScript number
/// holds exactly).
pub(crate) fn whole(v: f64, what: &str) -> JsResult<u64> {
    if v.fract() != 0.0 || !(0.0..9007199254740992.0).contains(&v) {
        return Err(invalid(format!("{what} {v} is not a whole number in [0, 2^53)")));
    }
    Ok(v as u64)
}

pub(crate) fn opt_dtype(name: Option<String>) -> JsResult<Option<kiln_core::DType>> {
    name.map(|n| crate::tensor::dtype(&n)).transpose()
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

/// Host bytes in: the wasm heap's copy of a Uint8Array, uploaded to the page's device.
#[wasm_bindgen(js_name = quantFromBytes)]
pub fn quant_from_bytes(bytes: &[u8], format_name: &str, rows: u32, cols: u32) -> JsResult<Tensor> {
    let device = kiln_core::device().map_err(js_err)?;
    out(ops::quant_from_bytes(&device, bytes, quant_format(format_name)?, rows as usize, cols as usize))
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
/// an awaited readback); js/kiln.js names them (and gives unique_counts / unique_inverse /
/// unique_values from it).
#[wasm_bindgen(js_name = uniqueAll)]
pub async fn unique_all(x: &Tensor) -> JsResult<Vec<Tensor>> {
    let u = ops::unique_all_async(&x.inner).await.map_err(js_err)?;
    Ok(tensors(vec![u.values, u.indices, u.inverse_indices, u.counts]))
}
