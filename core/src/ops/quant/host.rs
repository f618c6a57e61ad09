//! Quantizing and dequantizing on the host, as ggml's reference code does (the bytes and values
//! equal ggml's): `quantize` (uploads the result), `quantize_host`, `dequantize_host`.

use super::quant_from_bytes;
use crate::dtype::DType;
use crate::ops::QuantFormat;
use crate::tensor::Tensor;
use crate::{Error, Result};
use half::f16;

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
    if let Some(bytes) = crate::ops::quant_kquants::quantize(x, format) {
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
/// same f32 values [`dequantize`](super::dequantize) gives on a device (for host paths such as kiln-models' CPU
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
    if !crate::ops::quant_kquants::dequantize(bytes, format, out) {
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
