//! ggml's reference quantizers and dequantizers of Q5_0, Q5_1 and the K formats (Q2_K, Q3_K,
//! Q4_K, Q5_K, Q6_K), on the host: ports of ggml-quants.c's `quantize_row_*_ref` and `dequantize_row_*`,
//! statement by statement in f32 and in ggml's order, so that the bytes and values equal those
//! of ggml's C compiled as ggml-base is on x86-64 (SSE arithmetic, no FMA contraction).
//! core/tests/quant_k.rs holds them to vectors written by that C (core/tests/reference/kquant).
//!
//! NaN and infinite inputs are not an error: they give the bytes ggml's x86-64 build gives (C's
//! float-to-int conversions of NaN / out-of-range values are 0x80000000 there, see `c_i32`), as
//! the 32-value formats' quantizers in `ops::quant` do.

mod k_quantize;

use k_quantize::{q2_k, q3_k, q45_k, q6_k};
pub(crate) use k_quantize::{q3_scale, scale_min_k4};

use super::quant_format::QuantFormat;
use half::f16;

/// ggml's QK_K.
const QK_K: usize = QuantFormat::SUPER_LEN;
/// ggml's GROUP_MAX_EPS: a group whose largest magnitude is below it quantizes to zeros.
const GROUP_MAX_EPS: f32 = 1e-15;

/// C's `(int)v` on x86-64 (cvttss2si): truncation; NaN and values outside i32 give i32::MIN.
fn c_i32(v: f32) -> i32 {
    if v.is_nan() || !(-2147483648.0..2147483648.0).contains(&v) {
        i32::MIN
    } else {
        v as i32
    }
}

/// ggml's `nearest_int`: round half to even through the float's mantissa (`fval + 1.5 * 2^23`),
/// for |fval| <= 2^22 (ggml asserts it in debug builds only; past it, the same bit arithmetic).
fn nearest_int(fval: f32) -> i32 {
    let val = fval + 12582912.0;
    (val.to_bits() as i32 & 0x007fffff) - 0x00400000
}

fn f16_bits(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_le_bytes()
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Quantizes whole rows (`x.len()` a multiple of `format.block_len()`) of one of this module's
/// formats; `None` for the others (`ops::quant`'s own).
pub(crate) fn quantize(x: &[f32], format: QuantFormat) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(x.len() / format.block_len() * format.block_bytes());
    for blk in x.chunks_exact(format.block_len()) {
        match format {
            QuantFormat::Q5_0 => q5_0(blk, &mut out),
            QuantFormat::Q5_1 => q5_1(blk, &mut out),
            QuantFormat::Q2_K => q2_k(blk, &mut out),
            QuantFormat::Q3_K => q3_k(blk, &mut out),
            QuantFormat::Q4_K => q45_k(blk, 15, &mut out),
            QuantFormat::Q5_K => q45_k(blk, 31, &mut out),
            QuantFormat::Q6_K => q6_k(blk, &mut out),
            QuantFormat::Q4_0 | QuantFormat::Q4_1 | QuantFormat::Q8_0 => return None,
        }
    }
    Some(out)
}

/// quantize_row_q5_0_ref, one block.
fn q5_0(x: &[f32], out: &mut Vec<u8>) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    let d = max / -16.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    out.extend_from_slice(&f16_bits(d));
    // MIN(31, (int8_t)(x + 16.5f)), then as uint8_t.
    let q = |v: f32| (c_i32(v * id + 16.5) as i8 as i32).min(31) as u8;
    pack5(x, q, out);
}

/// quantize_row_q5_1_ref, one block.
fn q5_1(x: &[f32], out: &mut Vec<u8>) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    let d = (max - min) / 31.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    out.extend_from_slice(&f16_bits(d));
    out.extend_from_slice(&f16_bits(min));
    // (uint8_t)(x + 0.5f): the same 32-bit conversion, narrowed.
    let q = |v: f32| c_i32((v - min) * id + 0.5) as u8;
    pack5(x, q, out);
}

/// Q5_0 / Q5_1's 32 high bits then 16 bytes of nibbles (value j low, j + 16 high).
fn pack5(x: &[f32], q: impl Fn(f32) -> u8, out: &mut Vec<u8>) {
    let mut qh = 0u32;
    let mut qs = [0u8; 16];
    for j in 0..16 {
        let (xi0, xi1) = (q(x[j]), q(x[j + 16]));
        qs[j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
        qh |= (((xi0 & 0x10) >> 4) as u32) << j;
        qh |= (((xi1 & 0x10) >> 4) as u32) << (j + 16);
    }
    out.extend_from_slice(&qh.to_le_bytes());
    out.extend_from_slice(&qs);
}

/// Dequantizes whole blocks of one of this module's formats into `y` (`y.len()` values, a
/// multiple of the block length) as ggml's dequantize_row_* computes them; false for the
/// other formats.
pub(crate) fn dequantize(bytes: &[u8], format: QuantFormat, y: &mut [f32]) -> bool {
    if matches!(format, QuantFormat::Q4_0 | QuantFormat::Q4_1 | QuantFormat::Q8_0) {
        return false;
    }
    let (len, bb) = (format.block_len(), format.block_bytes());
    for (blk, y) in bytes.chunks_exact(bb).zip(y.chunks_exact_mut(len)) {
        match format {
            QuantFormat::Q5_0 | QuantFormat::Q5_1 => {
                let d = f16_at(blk, 0);
                let (m, qh_at) = if format == QuantFormat::Q5_1 { (f16_at(blk, 2), 4) } else { (0.0, 2) };
                let qh = u32::from_le_bytes(blk[qh_at..qh_at + 4].try_into().unwrap());
                let qs = &blk[qh_at + 4..];
                for j in 0..16 {
                    let xh0 = (((qh >> j) << 4) & 0x10) as i32;
                    let xh1 = ((qh >> (j + 12)) & 0x10) as i32;
                    let (x0, x1) = ((qs[j] & 0x0F) as i32 | xh0, (qs[j] >> 4) as i32 | xh1);
                    if format == QuantFormat::Q5_0 {
                        y[j] = (x0 - 16) as f32 * d;
                        y[j + 16] = (x1 - 16) as f32 * d;
                    } else {
                        y[j] = x0 as f32 * d + m;
                        y[j + 16] = x1 as f32 * d + m;
                    }
                }
            }
            QuantFormat::Q4_K | QuantFormat::Q5_K => {
                let (d, min) = (f16_at(blk, 0), f16_at(blk, 2));
                let sc = &blk[4..16];
                let five = format == QuantFormat::Q5_K;
                let (qh, qs) = if five { (&blk[16..48], &blk[48..]) } else { (&blk[..0], &blk[16..]) };
                for j in 0..8 {
                    let (s, m) = scale_min_k4(j, sc);
                    let (d1, m1) = (d * s as f32, min * m as f32);
                    let q = &qs[32 * (j / 2)..];
                    for l in 0..32 {
                        let mut v = (q[l] >> (4 * (j % 2))) & 0xF;
                        if five && qh[l] & (1 << j) != 0 {
                            v += 16;
                        }
                        y[32 * j + l] = d1 * v as f32 - m1;
                    }
                }
            }
            QuantFormat::Q2_K | QuantFormat::Q3_K => {
                let two = format == QuantFormat::Q2_K;
                let (qs, d, dmin) = if two {
                    (&blk[16..80], f16_at(blk, 80), f16_at(blk, 82))
                } else {
                    (&blk[32..96], f16_at(blk, 108), 0.0)
                };
                // Value 128n + 32j + l: bits 2j of qs[32n + l], scale 8n + 2j + l / 16.
                for n in 0..2 {
                    for j in 0..4 {
                        for l in 0..32 {
                            let is = 8 * n + 2 * j + l / 16;
                            let q = (qs[32 * n + l] >> (2 * j)) & 3;
                            y[128 * n + 32 * j + l] = if two {
                                let sc = blk[is];
                                let (dl, ml) = (d * (sc & 0xF) as f32, dmin * (sc >> 4) as f32);
                                dl * q as f32 - ml
                            } else {
                                let hm = blk[l] & (1 << (4 * n + j)) != 0;
                                let dl = d * q3_scale(&blk[96..108], is) as f32;
                                dl * (q as i32 - if hm { 0 } else { 4 }) as f32
                            };
                        }
                    }
                }
            }
            QuantFormat::Q6_K => {
                let d = f16_at(blk, 208);
                for n in 0..2 {
                    let (ql, qh, sc) = (&blk[64 * n..], &blk[128 + 32 * n..], &blk[192 + 8 * n..]);
                    for l in 0..32 {
                        let is = l / 16;
                        let q = |lo: u8, sh: u32| ((lo | (((qh[l] >> sh) & 3) << 4)) as i8 - 32) as f32;
                        let s = |k: usize| d * (sc[is + k] as i8) as f32;
                        let y = &mut y[128 * n..];
                        y[l] = s(0) * q(ql[l] & 0xF, 0);
                        y[l + 32] = s(2) * q(ql[l + 32] & 0xF, 2);
                        y[l + 64] = s(4) * q(ql[l] >> 4, 4);
                        y[l + 96] = s(6) * q(ql[l + 32] >> 4, 6);
                    }
                }
            }
            QuantFormat::Q4_0 | QuantFormat::Q4_1 | QuantFormat::Q8_0 => unreachable!(),
        }
    }
    true
}
