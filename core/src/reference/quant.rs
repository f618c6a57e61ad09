//! References for the quant family, written from ggml's block definitions (ggml-common.h) and
//! reference quantizers (ggml-quants.c: `quantize_row_q4_0_ref`, `_q4_1_ref`, `_q8_0_ref`) value
//! by value. Bytes are a byte slice here (the GPU keeps them in u32 words).

use crate::ops::QuantFormat;
use half::f16;

const QK: usize = 32;

fn half(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// C's `MAX(a, b)`: `a > b ? a : b` (so a NaN `b` wins, and is replaced by the next `b`).
fn c_max(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// C's `(int8_t)v` as x86-64 compiles it: a 32-bit truncating conversion (NaN and values
/// outside i32 give 0x80000000) narrowed to 8 bits. ggml's values stay in range but for NaN,
/// infinities and scales that overflow.
fn c_i8(v: f32) -> i32 {
    let i = if v.is_nan() || !(-2147483648.0..2147483648.0).contains(&v) { i32::MIN } else { v as i32 };
    i as i8 as i32
}

/// ggml's reference quantizer of whole rows (`x.len()` a multiple of 32), in f32 as ggml computes.
///
/// Q5_0, Q5_1 and the K formats are the op's own host quantizer (`ops::quant_kquants`), which
/// core/tests/quant_k.rs holds byte-equal to vectors written by ggml's C (an independent
/// reference, not a second port).
pub fn quantize(x: &[f32], format: QuantFormat) -> Vec<u8> {
    if let Some(bytes) = crate::ops::quant_kquants::quantize(x, format) {
        return bytes;
    }
    let mut y = Vec::new();
    for b in x.chunks(QK) {
        match format {
            QuantFormat::Q4_0 => {
                let mut amax = 0.0f32;
                let mut max = 0.0f32;
                for &v in b {
                    if amax < v.abs() {
                        amax = v.abs();
                        max = v;
                    }
                }
                let d = max / -8.0f32;
                let id = if d != 0.0 { 1.0f32 / d } else { 0.0 };
                y.extend(f16::from_f32(d).to_bits().to_le_bytes());
                for j in 0..QK / 2 {
                    let x0 = b[j] * id;
                    let x1 = b[QK / 2 + j] * id;
                    let xi0 = c_i8(x0 + 8.5).min(15) as u8;
                    let xi1 = c_i8(x1 + 8.5).min(15) as u8;
                    y.push(xi0 | (xi1 << 4));
                }
            }
            QuantFormat::Q4_1 => {
                let mut min = f32::MAX;
                let mut max = -f32::MAX;
                for &v in b {
                    if v < min {
                        min = v;
                    }
                    if v > max {
                        max = v;
                    }
                }
                let d = (max - min) / 15.0f32;
                let id = if d != 0.0 { 1.0f32 / d } else { 0.0 };
                y.extend(f16::from_f32(d).to_bits().to_le_bytes());
                y.extend(f16::from_f32(min).to_bits().to_le_bytes());
                for j in 0..QK / 2 {
                    let x0 = (b[j] - min) * id;
                    let x1 = (b[QK / 2 + j] - min) * id;
                    let xi0 = c_i8(x0 + 0.5).min(15) as u8;
                    let xi1 = c_i8(x1 + 0.5).min(15) as u8;
                    y.push(xi0 | (xi1 << 4));
                }
            }
            QuantFormat::Q8_0 => {
                let mut amax = 0.0f32;
                for &v in b {
                    amax = c_max(amax, v.abs());
                }
                let d = amax / 127.0f32;
                let id = if d != 0.0 { 1.0f32 / d } else { 0.0 };
                y.extend(f16::from_f32(d).to_bits().to_le_bytes());
                for &v in b {
                    // roundf: half away from zero.
                    y.push(c_i8((v * id).round()) as i8 as u8);
                }
            }
            _ => unreachable!(),
        }
    }
    y
}

/// ggml's `dequantize_row_*` over a [rows, cols] matrix's bytes: row-major f32 values (as f64).
///
/// Q5_0, Q5_1 and the K formats: `ops::quant_kquants`'s host dequantizer, held bit-equal to
/// ggml's C output by core/tests/quant_k.rs.
pub fn dequantize(bytes: &[u8], format: QuantFormat, rows: usize, cols: usize) -> Vec<f64> {
    let mut f = vec![0.0f32; rows * cols];
    let nbytes = rows * cols / format.block_len() * format.block_bytes();
    if crate::ops::quant_kquants::dequantize(&bytes[..nbytes], format, &mut f) {
        return f.into_iter().map(f64::from).collect();
    }
    let bb = format.block_bytes();
    let mut out = Vec::with_capacity(rows * cols);
    for blk in bytes[..rows * cols / QK * bb].chunks(bb) {
        let d = half(blk, 0);
        let mut vals = [0.0f32; QK];
        match format {
            QuantFormat::Q4_0 | QuantFormat::Q4_1 => {
                let (m, qs) = if format == QuantFormat::Q4_1 { (half(blk, 2), &blk[4..]) } else { (0.0, &blk[2..]) };
                for j in 0..QK / 2 {
                    let (lo, hi) = ((qs[j] & 0xF) as i32, (qs[j] >> 4) as i32);
                    if format == QuantFormat::Q4_0 {
                        vals[j] = (lo - 8) as f32 * d;
                        vals[j + QK / 2] = (hi - 8) as f32 * d;
                    } else {
                        vals[j] = lo as f32 * d + m;
                        vals[j + QK / 2] = hi as f32 * d + m;
                    }
                }
            }
            QuantFormat::Q8_0 => {
                for j in 0..QK {
                    vals[j] = blk[2 + j] as i8 as f32 * d;
                }
            }
            _ => unreachable!(),
        }
        out.extend(vals.iter().map(|&v| v as f64));
    }
    out
}

/// x [m, k] (values) times Wᵀ for W quantized [n, k]: [m, n], summed in f64 over ggml's
/// dequantized (f32) weights.
pub fn quant_matmul(x: &[f64], m: usize, k: usize, bytes: &[u8], format: QuantFormat, n: usize) -> Vec<f64> {
    let w = dequantize(bytes, format, n, k);
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|t| x[i * k + t] * w[j * k + t]).sum();
        }
    }
    out
}

/// Σ |x w| per output of [`quant_matmul`]: the scale of its f32 rounding error.
pub fn quant_matmul_abs(x: &[f64], m: usize, k: usize, bytes: &[u8], format: QuantFormat, n: usize) -> Vec<f64> {
    let w = dequantize(bytes, format, n, k);
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|t| (x[i * k + t] * w[j * k + t]).abs()).sum();
        }
    }
    out
}

/// Rows of a quantized [v, d] table picked by `ids`; ids outside [0, v) give zeros.
pub fn quant_embedding(bytes: &[u8], format: QuantFormat, v: usize, d: usize, ids: &[i64]) -> Vec<f64> {
    let w = dequantize(bytes, format, v, d);
    let mut out = Vec::with_capacity(ids.len() * d);
    for &id in ids {
        if id >= 0 && (id as usize) < v {
            out.extend_from_slice(&w[id as usize * d..(id as usize + 1) * d]);
        } else {
            out.extend(std::iter::repeat_n(0.0, d));
        }
    }
    out
}

/// [`crate::ops::quant_matmul_fused`] in f64: each x row RMS-normalised with `norm` (weight,
/// eps) if given, times Wᵀ (W [n, k], or [2n, k] gate then up rows under `swiglu`, giving
/// `silu(gate) * up`), plus `residual` [m, n] if given.
#[allow(clippy::too_many_arguments)]
pub fn quant_matmul_fused(
    x: &[f64],
    m: usize,
    k: usize,
    bytes: &[u8],
    format: QuantFormat,
    n: usize,
    norm: Option<(&[f64], f64)>,
    swiglu: bool,
    residual: Option<&[f64]>,
) -> Vec<f64> {
    let mut xn = x.to_vec();
    if let Some((g, eps)) = norm {
        for row in xn.chunks_mut(k.max(1)) {
            let inv = 1.0 / (row.iter().map(|a| a * a).sum::<f64>() / k as f64 + eps).sqrt();
            for (j, a) in row.iter_mut().enumerate() {
                *a *= inv * g[j];
            }
        }
    }
    let rows = if swiglu { 2 * n } else { n };
    let y = quant_matmul(&xn, m, k, bytes, format, rows);
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = if swiglu {
                let g = y[i * rows + j];
                g / (1.0 + (-g).exp()) * y[i * rows + n + j]
            } else {
                y[i * n + j]
            } + residual.map_or(0.0, |r| r[i * n + j]);
        }
    }
    out
}
