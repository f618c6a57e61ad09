//! Quantized matrices in host memory and their products with f32 activations.
//!
//! A matrix keeps the GGUF's 4-bit/8-bit codes; only each block's f16 scale (and Q4_1's f16
//! minimum) is widened to f32 at load (exactly: every f16 is an f32), so the hot loop converts no
//! f16. A weight is decoded as ggml's `dequantize_row_*` decodes it, value by value in f32
//! (Q4_0 `(q - 8) * d`, Q4_1 `q * d + m`, Q8_0 `q * d`), and multiplied by the f32 activation:
//! the same values the GPU's quant matmul and kiln-core's f64 reference use, so the results
//! differ from them only by f32 summation order (non-finite scales give the same NaN/inf).
//! Activations are not rounded to 8 bits as llama.cpp's CPU dot products round them: the
//! SmolLM2 tests hold Kiln to a float64 forward pass within 2e-3, which 8-bit activations
//! (llama.cpp differs from it by 0.78) would not meet.
//!
//! The portable loops are plain Rust over fixed 32-value blocks with 32 independent f32
//! accumulators summed pairwise at the end. LLVM vectorized them poorly (4-wide, accumulators
//! spilled: 6–11 tokens/s on SmolLM2), so on x86_64 with AVX2 (detected at run time; the build
//! targets baseline x86_64) the same arithmetic runs through intrinsics in [`avx2`]: the same
//! products, sums in the same order, no FMA, hence the same bits (a test holds them equal).

use crate::error::{ModelError, Result};
use kiln_core::f16;
use kiln_core::ops::QuantFormat;
use rayon::prelude::*;
use std::ops::Range;

/// Values per quant block (ggml's QK4_0 = QK4_1 = QK8_0).
pub(crate) const QK: usize = 32;

/// A [rows, cols] matrix of 32-value quant blocks decoded as `kind` (see [`kind_of`]):
/// `codes` holds each block's code bytes (16 for the 4-bit kinds, 32 for Q8_0 and Q6_K) and
/// `scales` its f32 scale, or scale and minimum for Q4_1, or the scales of its two 16-value
/// halves for Q6_K, or each half's scale and minimum for Q2_K (32 unsigned codes). A stack
/// whose runs of rows differ in format (a Q4_K_M's Q4_K attn_q/attn_k over a Q6_K attn_v) is
/// its runs, in `parts`.
pub(crate) struct QuantMatrix {
    pub rows: usize,
    pub cols: usize,
    kind: QuantFormat,
    codes: Vec<u8>,
    scales: Vec<f32>,
    /// A mixed stack's runs: (first row, the run's rows as a matrix); empty otherwise.
    parts: Vec<(usize, QuantMatrix)>,
}

/// How a format's 32-value groups are kept and decoded here, each giving ggml's
/// dequantized values exactly:
/// - Q4_0, Q4_1, Q8_0 as they are;
/// - Q4_K as Q4_1: group j's `d * sc_j` and `-(dmin * m_j)` as its scale and minimum (ggml's
///   `d1 * q - m1` is the same IEEE operation as `q * d1 + (-m1)`);
/// - Q5_0 as Q8_0: the signed 5-bit value `q - 16` as the code (`(q - 16) * d`);
/// - Q6_K as Q6_K: signed codes `q - 32` with the two 16-value halves' `d * sc` as scales
///   (ggml's `(d * sc) * q`); Q3_K too (codes `q - 4` or `q`, scales `d * (sc - 32)`);
/// - Q2_K as Q2_K: unsigned codes with each 16-value half's scale and minimum (`dl * q - ml`
///   as `q * dl + (-ml)`); Q5_1 and Q5_K too (their 5-bit codes, one scale and minimum
///   repeated for both halves).
fn kind_of(format: QuantFormat) -> QuantFormat {
    match format {
        QuantFormat::Q4_0 | QuantFormat::Q4_1 | QuantFormat::Q8_0 | QuantFormat::Q6_K | QuantFormat::Q2_K => format,
        QuantFormat::Q4_K => QuantFormat::Q4_1,
        QuantFormat::Q5_0 => QuantFormat::Q8_0,
        QuantFormat::Q3_K => QuantFormat::Q6_K,
        QuantFormat::Q5_1 | QuantFormat::Q5_K => QuantFormat::Q2_K,
    }
}

fn code_bytes(kind: QuantFormat) -> usize {
    match kind {
        QuantFormat::Q4_0 | QuantFormat::Q4_1 => QK / 2,
        QuantFormat::Q8_0 | QuantFormat::Q6_K | QuantFormat::Q2_K => QK,
        _ => unreachable!("{kind} is no kind of kept block"),
    }
}

fn scales_per_block(kind: QuantFormat) -> usize {
    match kind {
        QuantFormat::Q4_1 | QuantFormat::Q6_K => 2,
        QuantFormat::Q2_K => 4,
        _ => 1,
    }
}

/// One GGUF block of `format` (every format but Q4_0, Q4_1 and Q8_0) as `kind_of(format)`'s
/// 32-value groups.
fn transcode(format: QuantFormat, blk: &[u8], codes: &mut Vec<u8>, scales: &mut Vec<f32>) {
    let half = |at: usize| f16::from_bits(u16::from_le_bytes([blk[at], blk[at + 1]])).to_f32();
    match format {
        QuantFormat::Q5_0 => {
            let d = half(0);
            let qh = u32::from_le_bytes(blk[2..6].try_into().unwrap());
            let qs = &blk[6..22];
            let mut c = [0u8; QK];
            for j in 0..QK / 2 {
                let x0 = ((qs[j] & 0x0F) as u32 | (((qh >> j) << 4) & 0x10)) as i32 - 16;
                let x1 = ((qs[j] >> 4) as u32 | ((qh >> (j + 12)) & 0x10)) as i32 - 16;
                c[j] = x0 as i8 as u8;
                c[j + QK / 2] = x1 as i8 as u8;
            }
            codes.extend_from_slice(&c);
            scales.push(d);
        }
        QuantFormat::Q4_K => {
            let (d, dmin) = (half(0), half(2));
            for j in 0..8 {
                let (sc, m) = scale_min_k4(j, &blk[4..16]);
                scales.push(d * sc as f32);
                scales.push(-(dmin * m as f32));
                let q = &blk[16 + 32 * (j / 2)..16 + 32 * (j / 2) + 32];
                let v = |l: usize| (q[l] >> (4 * (j % 2))) & 0xF;
                codes.extend((0..QK / 2).map(|l| v(l) | (v(l + QK / 2) << 4)));
            }
        }
        QuantFormat::Q5_1 => {
            let (d, m) = (half(0), half(2));
            let qh = u32::from_le_bytes(blk[4..8].try_into().unwrap());
            let qs = &blk[8..24];
            let mut c = [0u8; QK];
            for j in 0..QK / 2 {
                c[j] = (qs[j] & 0x0F) | ((((qh >> j) << 4) & 0x10) as u8);
                c[j + QK / 2] = (qs[j] >> 4) | (((qh >> (j + 12)) & 0x10) as u8);
            }
            codes.extend_from_slice(&c);
            scales.extend_from_slice(&[d, m, d, m]);
        }
        QuantFormat::Q5_K => {
            let (d, dmin) = (half(0), half(2));
            for j in 0..8 {
                let (sc, m) = scale_min_k4(j, &blk[4..16]);
                let (d1, m1) = (d * sc as f32, -(dmin * m as f32));
                scales.extend_from_slice(&[d1, m1, d1, m1]);
                let q = &blk[48 + 32 * (j / 2)..];
                codes.extend((0..QK).map(|l| ((q[l] >> (4 * (j % 2))) & 0xF) + 16 * ((blk[16 + l] >> j) & 1)));
            }
        }
        QuantFormat::Q2_K => {
            let (d, dmin) = (half(80), half(82));
            for s in 0..8 {
                let (n, j) = (s / 4, s % 4);
                for h in 0..2 {
                    let sc = blk[8 * n + 2 * j + h];
                    scales.push(d * (sc & 0xF) as f32);
                    scales.push(-(dmin * (sc >> 4) as f32));
                }
                codes.extend((0..QK).map(|l| (blk[16 + 32 * n + l] >> (2 * j)) & 3));
            }
        }
        QuantFormat::Q3_K => {
            let d = half(108);
            for s in 0..8 {
                let (n, j) = (s / 4, s % 4);
                for h in 0..2 {
                    scales.push(d * q3_scale(&blk[96..108], 8 * n + 2 * j + h) as f32);
                }
                codes.extend((0..QK).map(|l| {
                    let q = ((blk[32 + 32 * n + l] >> (2 * j)) & 3) as i8;
                    (if (blk[l] >> s) & 1 != 0 { q } else { q - 4 }) as u8
                }));
            }
        }
        QuantFormat::Q6_K => {
            let d = half(208);
            for j in 0..8 {
                let (n, g) = (j / 4, j % 4);
                let (ql, qh, sc) = (&blk[64 * n + 32 * (g % 2)..], &blk[128 + 32 * n..], &blk[192 + 8 * n..]);
                for l in 0..QK {
                    let q = ((ql[l] >> (4 * (g / 2))) & 0xF) | (((qh[l] >> (2 * g)) & 3) << 4);
                    codes.push((q as i32 - 32) as i8 as u8);
                }
                scales.push(d * sc[2 * g] as i8 as f32);
                scales.push(d * sc[2 * g + 1] as i8 as f32);
            }
        }
        _ => unreachable!("{format} is not transcoded"),
    }
}

/// Q3_K's 6-bit scale j (of 16) minus 32, from its 12 packed bytes (as ggml's quantizer reads
/// them back).
fn q3_scale(sc: &[u8], j: usize) -> i8 {
    let lo = if j < 8 { sc[j] & 0xF } else { sc[j - 8] >> 4 };
    ((lo | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) as i8).wrapping_sub(32)
}

/// ggml's get_scale_min_k4: group j's 6-bit scale and min from a K block's 12 packed bytes.
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

impl QuantMatrix {
    /// From ggml's block bytes of a row-major [rows, cols] matrix (`cols` a multiple of 32).
    pub fn from_ggml(bytes: &[u8], format: QuantFormat, rows: usize, cols: usize) -> Result<QuantMatrix> {
        let row_bytes = format.row_bytes(cols)?;
        if bytes.len() != rows * row_bytes {
            return Err(ModelError::Unsupported(format!(
                "{} bytes for a [{rows}, {cols}] {format} matrix (want {})",
                bytes.len(),
                rows * row_bytes
            )));
        }
        let kind = kind_of(format);
        let (cb, spb, bb) = (code_bytes(kind), scales_per_block(kind), format.block_bytes());
        let blocks = rows * cols / QK;
        let mut codes = Vec::with_capacity(blocks * cb);
        let mut scales = Vec::with_capacity(blocks * spb);
        let half = |b: &[u8]| f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
        for blk in bytes.chunks_exact(bb) {
            if !matches!(format, QuantFormat::Q4_0 | QuantFormat::Q4_1 | QuantFormat::Q8_0) {
                transcode(format, blk, &mut codes, &mut scales);
                continue;
            }
            for s in 0..spb {
                scales.push(half(&blk[2 * s..]));
            }
            codes.extend_from_slice(&blk[2 * spb..]);
        }
        Ok(QuantMatrix { rows, cols, kind, codes, scales, parts: Vec::new() })
    }

    /// Runs of rows stacked in the order given, `(bytes, format, rows)` each (the groups of
    /// `llama::stacked_groups`); one run is [`QuantMatrix::from_ggml`].
    pub fn from_groups(groups: Vec<(Vec<u8>, QuantFormat, usize)>, cols: usize) -> Result<QuantMatrix> {
        if let [(bytes, format, rows)] = groups.as_slice() {
            return QuantMatrix::from_ggml(bytes, *format, *rows, cols);
        }
        let kind = groups.first().map(|g| g.1).ok_or_else(|| ModelError::Unsupported("an empty stack".into()))?;
        let mut parts = Vec::with_capacity(groups.len());
        let mut rows = 0;
        for (bytes, f, r) in groups {
            parts.push((rows, QuantMatrix::from_ggml(&bytes, f, r, cols)?));
            rows += r;
        }
        Ok(QuantMatrix { rows, cols, kind, codes: Vec::new(), scales: Vec::new(), parts })
    }

    /// The part of a mixed stack holding row `r`, and its first row.
    fn part_of(&self, r: usize) -> Option<(usize, &QuantMatrix)> {
        self.parts.iter().rev().find(|p| p.0 <= r).map(|(first, m)| (*first, m))
    }

    fn blocks_per_row(&self) -> usize {
        self.cols / QK
    }

    /// Row `r` decoded to f32 (ggml's dequantized values).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        if let Some((first, part)) = self.part_of(r) {
            return part.dequantize_row(r - first, out);
        }
        let nb = self.blocks_per_row();
        let (cb, spb) = (code_bytes(self.kind), scales_per_block(self.kind));
        let codes = &self.codes[r * nb * cb..(r + 1) * nb * cb];
        let scales = &self.scales[r * nb * spb..(r + 1) * nb * spb];
        for (b, w) in out[..self.cols].chunks_exact_mut(QK).enumerate() {
            let w: &mut [f32; QK] = w.try_into().unwrap();
            decode(self.kind, &codes[b * cb..(b + 1) * cb], &scales[b * spb..(b + 1) * spb], w);
        }
    }

    /// `out[t * out_stride + r - rows.start] = W[r] · x[t]` for r in `rows` and each of the
    /// `x.len() / cols` activation rows `t` (f32, row-major).
    fn rows_into(&self, rows: Range<usize>, x: &[f32], out: &mut [f32], out_stride: usize) {
        if !self.parts.is_empty() {
            // Each part's share of `rows`, written at its place in `out`.
            for (first, part) in &self.parts {
                let (lo, hi) = (rows.start.max(*first), rows.end.min(first + part.rows));
                if lo < hi {
                    part.rows_into(lo - first..hi - first, x, &mut out[lo - rows.start..], out_stride);
                }
            }
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if avx2::available() {
            // SAFETY: the CPU has AVX2 (checked above).
            return unsafe { avx2::rows(self, rows, x, out, out_stride) };
        }
        rows_portable(self, rows, x, out, out_stride)
    }

    /// x [m, cols] · Wᵀ: [m, rows] row-major, output rows spread over rayon's threads.
    pub fn matmul(&self, x: &[f32]) -> Vec<f32> {
        let m = x.len() / self.cols;
        assert_eq!(m * self.cols, x.len(), "activations are not whole rows of {}", self.cols);
        let mut out = vec![0.0f32; m * self.rows];
        if m == 0 || self.rows == 0 {
            return out;
        }
        // About 8 chunks per thread (rayon steals the rest), and at least 16 rows so a chunk
        // outweighs its scheduling.
        let chunk = self.rows.div_ceil(rayon::current_num_threads() * 8).max(16);
        if m == 1 {
            out.par_chunks_mut(chunk).enumerate().for_each(|(i, o)| {
                let start = i * chunk;
                self.rows_into(start..start + o.len(), x, o, 0);
            });
        } else {
            // Each chunk fills its columns of every activation row: rows of `out` are shared,
            // so chunks write into their own [m, chunk] buffers, copied over after.
            let parts: Vec<(usize, Vec<f32>)> = (0..self.rows.div_ceil(chunk))
                .into_par_iter()
                .map(|i| {
                    let rows = i * chunk..((i + 1) * chunk).min(self.rows);
                    let n = rows.len();
                    let mut o = vec![0.0f32; m * n];
                    self.rows_into(rows.clone(), x, &mut o, n);
                    (rows.start, o)
                })
                .collect();
            for (start, o) in parts {
                let n = o.len() / m;
                for t in 0..m {
                    out[t * self.rows + start..t * self.rows + start + n].copy_from_slice(&o[t * n..(t + 1) * n]);
                }
            }
        }
        out
    }
}

/// One block's 32 weights as ggml's dequantizer computes them in f32.
#[inline(always)]
fn decode(format: QuantFormat, codes: &[u8], scales: &[f32], w: &mut [f32; QK]) {
    match format {
        QuantFormat::Q4_0 => {
            let q: &[u8; QK / 2] = codes.try_into().unwrap();
            let d = scales[0];
            for j in 0..QK / 2 {
                w[j] = ((q[j] & 0xF) as i32 - 8) as f32 * d;
                w[j + QK / 2] = ((q[j] >> 4) as i32 - 8) as f32 * d;
            }
        }
        QuantFormat::Q4_1 => {
            let q: &[u8; QK / 2] = codes.try_into().unwrap();
            let (d, m) = (scales[0], scales[1]);
            for j in 0..QK / 2 {
                w[j] = (q[j] & 0xF) as f32 * d + m;
                w[j + QK / 2] = (q[j] >> 4) as f32 * d + m;
            }
        }
        QuantFormat::Q8_0 => {
            let q: &[u8; QK] = codes.try_into().unwrap();
            let d = scales[0];
            for j in 0..QK {
                w[j] = q[j] as i8 as f32 * d;
            }
        }
        QuantFormat::Q6_K => {
            let q: &[u8; QK] = codes.try_into().unwrap();
            for j in 0..QK {
                w[j] = q[j] as i8 as f32 * scales[j / 16];
            }
        }
        QuantFormat::Q2_K => {
            let q: &[u8; QK] = codes.try_into().unwrap();
            for j in 0..QK {
                let h = 2 * (j / 16);
                w[j] = q[j] as f32 * scales[h] + scales[h + 1];
            }
        }
        _ => unreachable!("{format} is no kind of kept block"),
    }
}

/// Σ of 32 lanes in a fixed order (pairwise), so every build sums alike.
#[inline(always)]
fn lane_sum(acc: &[f32; QK]) -> f32 {
    let mut a = *acc;
    let mut n = QK;
    while n > 1 {
        n /= 2;
        for i in 0..n {
            a[i] += a[i + n];
        }
    }
    a[0]
}

/// One row of W against one activation row, the block decode fused in (decode: one token).
#[inline(always)]
fn dot_row(format: QuantFormat, codes: &[u8], scales: &[f32], x: &[f32]) -> f32 {
    let (cb, spb) = (code_bytes(format), scales_per_block(format));
    let mut acc = [0.0f32; QK];
    let mut w = [0.0f32; QK];
    for ((c, s), xb) in codes.chunks_exact(cb).zip(scales.chunks_exact(spb)).zip(x.chunks_exact(QK)) {
        decode(format, c, s, &mut w);
        let xb: &[f32; QK] = xb.try_into().unwrap();
        for j in 0..QK {
            acc[j] += w[j] * xb[j];
        }
    }
    lane_sum(&acc)
}

/// An f32 dot product with 32 lanes (a decoded row against one activation row).
#[inline(always)]
fn dot_f32(w: &[f32], x: &[f32]) -> f32 {
    let mut acc = [0.0f32; QK];
    for (wb, xb) in w.chunks_exact(QK).zip(x.chunks_exact(QK)) {
        let wb: &[f32; QK] = wb.try_into().unwrap();
        let xb: &[f32; QK] = xb.try_into().unwrap();
        for j in 0..QK {
            acc[j] += wb[j] * xb[j];
        }
    }
    lane_sum(&acc)
}

fn rows_portable(m: &QuantMatrix, rows: Range<usize>, x: &[f32], out: &mut [f32], out_stride: usize) {
    let nb = m.blocks_per_row();
    let (cb, spb) = (code_bytes(m.kind), scales_per_block(m.kind));
    let tokens = x.len() / m.cols;
    let start = rows.start;
    if tokens == 1 {
        for r in rows {
            let codes = &m.codes[r * nb * cb..(r + 1) * nb * cb];
            let scales = &m.scales[r * nb * spb..(r + 1) * nb * spb];
            out[r - start] = dot_row(m.kind, codes, scales, x);
        }
        return;
    }
    // Several activation rows (prefill): decode each weight row once, then plain f32 dots.
    let mut w = vec![0.0f32; m.cols];
    for r in rows {
        m.dequantize_row(r, &mut w);
        for (t, xt) in x.chunks_exact(m.cols).enumerate() {
            out[t * out_stride + r - start] = dot_f32(&w, xt);
        }
    }
}

/// [`rows_portable`] in AVX2 (+FMA) intrinsics: 32 lanes as four 8-lane registers, each block
/// decoded as [`decode`] decodes it, products and sums in the portable order.
#[cfg(target_arch = "x86_64")]
// Registers and lanes are indexed in step (w[i], x + 8i, acc[i]): ranges read clearest.
#[allow(clippy::needless_range_loop)]
mod avx2 {
    use super::{code_bytes, scales_per_block, QuantMatrix, QK};
    use kiln_core::ops::QuantFormat;
    use std::arch::x86_64::*;
    use std::ops::Range;

    pub fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }

    /// [`super::lane_sum`] of the lanes (a0 | a1 | a2 | a3): halves added pairwise.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn lane_sum(a: [__m256; 4]) -> f32 {
        let s = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
        let s = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps::<1>(s));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps::<1>(s, s)))
    }

    /// 8 bytes as u8 (or i8 with `signed`) to 8 f32.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn widen(b: __m128i, signed: bool) -> __m256i {
        if signed {
            _mm256_cvtepi8_epi32(b)
        } else {
            _mm256_cvtepu8_epi32(b)
        }
    }

    /// The formats as const parameters, so each kernel is compiled for one.
    const Q4_0: u8 = 0;
    const Q4_1: u8 = 1;
    const Q8_0: u8 = 2;
    const Q6_K: u8 = 3;
    const Q2_K: u8 = 4;

    fn format_of<const F: u8>() -> QuantFormat {
        match F {
            Q4_0 => QuantFormat::Q4_0,
            Q4_1 => QuantFormat::Q4_1,
            Q6_K => QuantFormat::Q6_K,
            Q2_K => QuantFormat::Q2_K,
            _ => QuantFormat::Q8_0,
        }
    }

    /// One block's 32 weights (as [`super::decode`]) in four registers.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn decode<const F: u8>(codes: *const u8, scales: *const f32) -> [__m256; 4] {
        let format = format_of::<F>();
        // SAFETY (all loads): the caller passes a whole block's codes and scales.
        let d = _mm256_set1_ps(unsafe { *scales });
        let ints: [__m256i; 4] = match format {
            QuantFormat::Q8_0 | QuantFormat::Q6_K | QuantFormat::Q2_K => {
                let q = unsafe { _mm256_loadu_si256(codes as *const __m256i) };
                let (lo, hi) = (_mm256_castsi256_si128(q), _mm256_extracti128_si256::<1>(q));
                let signed = format != QuantFormat::Q2_K;
                [
                    widen(lo, signed),
                    widen(_mm_srli_si128::<8>(lo), signed),
                    widen(hi, signed),
                    widen(_mm_srli_si128::<8>(hi), signed),
                ]
            }
            QuantFormat::Q4_0 | QuantFormat::Q4_1 => {
                let q = unsafe { _mm_loadu_si128(codes as *const __m128i) };
                let mask = _mm_set1_epi8(0x0F);
                let lo = _mm_and_si128(q, mask);
                let hi = _mm_and_si128(_mm_srli_epi16::<4>(q), mask);
                [
                    widen(lo, false),
                    widen(_mm_srli_si128::<8>(lo), false),
                    widen(hi, false),
                    widen(_mm_srli_si128::<8>(hi), false),
                ]
            }
            _ => unreachable!("{format} is no kind of kept block"),
        };
        let mut w = [_mm256_setzero_ps(); 4];
        match format {
            QuantFormat::Q4_0 => {
                let eight = _mm256_set1_epi32(8);
                for i in 0..4 {
                    w[i] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(ints[i], eight)), d);
                }
            }
            QuantFormat::Q4_1 => {
                // q · d is exact in f32 (4 bits times an f16's 11), so the fused multiply-add
                // rounds once, as the portable multiply then add does.
                let m = _mm256_set1_ps(unsafe { *scales.add(1) });
                for i in 0..4 {
                    w[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ints[i]), d, m);
                }
            }
            QuantFormat::Q8_0 => {
                for i in 0..4 {
                    w[i] = _mm256_mul_ps(_mm256_cvtepi32_ps(ints[i]), d);
                }
            }
            QuantFormat::Q6_K => {
                // Values 0..16 take the first half's scale, 16..32 the second's.
                let d1 = _mm256_set1_ps(unsafe { *scales.add(1) });
                for i in 0..4 {
                    w[i] = _mm256_mul_ps(_mm256_cvtepi32_ps(ints[i]), if i < 2 { d } else { d1 });
                }
            }
            QuantFormat::Q2_K => {
                // Each half's q · d is exact in f32 (at most 5 bits times 17), so the fused
                // multiply-add rounds once, as the portable multiply then add does.
                for i in 0..4 {
                    let h = 2 * (i / 2);
                    let (dh, mh) = unsafe { (_mm256_set1_ps(*scales.add(h)), _mm256_set1_ps(*scales.add(h + 1))) };
                    w[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ints[i]), dh, mh);
                }
            }
            _ => unreachable!("{format} is no kind of kept block"),
        }
        w
    }

    /// [`super::rows_portable`] with AVX2.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn rows(m: &QuantMatrix, rows: Range<usize>, x: &[f32], out: &mut [f32], out_stride: usize) {
        let tokens = x.len() / m.cols;
        assert!(rows.end <= m.rows && tokens * m.cols == x.len() && out.len() >= rows.len());
        if tokens == 1 {
            // SAFETY: AVX2 (this function's contract); shapes checked above.
            unsafe {
                match m.kind {
                    QuantFormat::Q4_0 => matvec::<Q4_0>(m, rows, x, out),
                    QuantFormat::Q4_1 => matvec::<Q4_1>(m, rows, x, out),
                    QuantFormat::Q8_0 => matvec::<Q8_0>(m, rows, x, out),
                    QuantFormat::Q6_K => matvec::<Q6_K>(m, rows, x, out),
                    QuantFormat::Q2_K => matvec::<Q2_K>(m, rows, x, out),
                    _ => unreachable!("{} is no kind of kept block", m.kind),
                }
            }
            return;
        }
        let (nb, start) = (m.cols / QK, rows.start);
        // Several activation rows (prefill): decode each weight row once, then f32 dots.
        let mut w = vec![0.0f32; m.cols];
        for r in rows {
            m.dequantize_row(r, &mut w);
            let w = &w;
            for (t, xt) in x.chunks_exact(m.cols).enumerate() {
                let mut acc = [_mm256_setzero_ps(); 4];
                for b in 0..nb {
                    for i in 0..4 {
                        // SAFETY: w and xt hold nb * 32 values.
                        let (wv, xv) = unsafe {
                            (
                                _mm256_loadu_ps(w.as_ptr().add(b * QK + 8 * i)),
                                _mm256_loadu_ps(xt.as_ptr().add(b * QK + 8 * i)),
                            )
                        };
                        acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(wv, xv));
                    }
                }
                out[t * out_stride + r - start] = lane_sum(acc);
            }
        }
    }

    /// One activation row: `out[r - rows.start] = W[r] · x`, two weight rows at a time (two
    /// independent accumulator chains hide the adds' latency; each row still sums in the
    /// portable order).
    ///
    /// # Safety
    /// AVX2; `rows` within `m`, `x` one row of `m.cols`, `out` at least `rows.len()` long.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn matvec<const F: u8>(m: &QuantMatrix, rows: Range<usize>, x: &[f32], out: &mut [f32]) {
        let nb = m.cols / QK;
        let (cb, spb) = (code_bytes(m.kind), scales_per_block(m.kind));
        let (codes, scales, x) = (m.codes.as_ptr(), m.scales.as_ptr(), x.as_ptr());
        let start = rows.start;
        let mut r = rows.start;
        // SAFETY (pointer arithmetic): rows < m.rows, blocks < nb, x has nb * 32 values.
        while r < rows.end {
            let pair = r + 1 < rows.end;
            let (c0, s0) = unsafe { (codes.add(r * nb * cb), scales.add(r * nb * spb)) };
            // The second row of a pair (the first again when alone: its result is dropped).
            let r1 = if pair { r + 1 } else { r };
            let (c1, s1) = unsafe { (codes.add(r1 * nb * cb), scales.add(r1 * nb * spb)) };
            let mut a0 = [_mm256_setzero_ps(); 4];
            let mut a1 = [_mm256_setzero_ps(); 4];
            for b in 0..nb {
                let w0 = unsafe { decode::<F>(c0.add(b * cb), s0.add(b * spb)) };
                let w1 = unsafe { decode::<F>(c1.add(b * cb), s1.add(b * spb)) };
                for i in 0..4 {
                    let xv = unsafe { _mm256_loadu_ps(x.add(b * QK + 8 * i)) };
                    a0[i] = _mm256_add_ps(a0[i], _mm256_mul_ps(w0[i], xv));
                    a1[i] = _mm256_add_ps(a1[i], _mm256_mul_ps(w1[i], xv));
                }
            }
            out[r - start] = lane_sum(a0);
            if pair {
                out[r + 1 - start] = lane_sum(a1);
            }
            r += 2;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::reference::quant as reference;

    const FORMATS: [QuantFormat; 3] = [QuantFormat::Q4_0, QuantFormat::Q4_1, QuantFormat::Q8_0];

    /// Deterministic values in about [-2, 2] (an LCG; no rand dependency).
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
            })
            .collect()
    }

    /// Checks W·x against kiln-core's f64 reference over ggml's dequantized weights: equal where
    /// the reference is non-finite (same NaN/inf), within f32 rounding of Σ|x w| elsewhere.
    fn check(bytes: &[u8], format: QuantFormat, rows: usize, cols: usize, x: &[f32]) {
        let m = x.len() / cols;
        let q = QuantMatrix::from_ggml(bytes, format, rows, cols).unwrap();
        let got = q.matmul(x);
        let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let want = reference::quant_matmul(&x64, m, cols, bytes, format, rows);
        let scale = reference::quant_matmul_abs(&x64, m, cols, bytes, format, rows);
        for (i, ((&g, &w), &s)) in got.iter().zip(&want).zip(&scale).enumerate() {
            if !w.is_finite() {
                assert!(
                    (g.is_nan() && w.is_nan()) || g as f64 == w,
                    "{format} [{rows},{cols}] m {m} at {i}: {g} vs reference {w}"
                );
                continue;
            }
            let tol = 1e-6 * s * (cols as f64).sqrt() + 1e-30;
            assert!((g as f64 - w).abs() <= tol, "{format} [{rows},{cols}] m {m} at {i}: {g} vs {w} (tol {tol})");
        }
    }

    #[test]
    fn products_match_the_dequantized_reference_on_ragged_shapes() {
        for format in FORMATS {
            // Rows not a multiple of the chunk or thread count; 1 to 7 activation rows (the
            // one-token path and the decode-once path).
            for &(rows, cols) in &[(1, 32), (3, 64), (17, 96), (70, 160), (257, 32), (33, 576)] {
                let w = values(rows * cols, rows as u64 * 31 + cols as u64);
                let bytes = reference::quantize(&w, format);
                for m in [1, 2, 7] {
                    check(&bytes, format, rows, cols, &values(m * cols, m as u64 + 5));
                }
            }
        }
    }

    #[test]
    fn non_finite_scales_and_activations_give_the_references_nan_and_inf() {
        for format in FORMATS {
            let (rows, cols) = (6, 64);
            let mut bytes = reference::quantize(&values(rows * cols, 9), format);
            let bb = format.block_bytes();
            let row_blocks = cols / QK;
            // Row 0: d = +inf; row 1: d = NaN; row 2: d = -0.0; row 3 (Q4_1): m = -inf;
            // rows 4, 5 normal (x carries the non-finite values below).
            let set = |bytes: &mut Vec<u8>, block: usize, at: usize, v: f32| {
                let b = f16::from_f32(v).to_bits().to_le_bytes();
                bytes[block * bb + at..block * bb + at + 2].copy_from_slice(&b);
            };
            set(&mut bytes, 0, 0, f32::INFINITY);
            set(&mut bytes, row_blocks, 0, f32::NAN);
            set(&mut bytes, 2 * row_blocks + 1, 0, -0.0);
            if format == QuantFormat::Q4_1 {
                set(&mut bytes, 3 * row_blocks, 2, f32::NEG_INFINITY);
            }
            let mut x = values(3 * cols, 4);
            x[cols + 7] = f32::INFINITY; // second activation row: one +inf
            x[2 * cols + 40] = f32::NAN; // third: one NaN
            check(&bytes, format, rows, cols, &x[..cols]);
            check(&bytes, format, rows, cols, &x);
        }
    }

    /// The formats kept transcoded (Q4_K as Q4_1, Q5_0 as Q8_0, Q6_K and Q3_K as Q6_K, Q2_K,
    /// Q5_1 and Q5_K as Q2_K):
    /// rows decode to kiln-core's dequantized values bit for bit (held to ggml's C in
    /// core/tests/quant_k.rs), products match the reference, and the AVX2 kernels give the
    /// portable bits, non-finite scales included.
    #[test]
    fn k_and_q5_formats_decode_exactly_on_every_kernel() {
        let others = [
            QuantFormat::Q4_K,
            QuantFormat::Q5_0,
            QuantFormat::Q6_K,
            QuantFormat::Q5_1,
            QuantFormat::Q5_K,
            QuantFormat::Q2_K,
            QuantFormat::Q3_K,
        ];
        for format in others {
            let (rows, cols) = (19, 512);
            let mut w = values(rows * cols, 77);
            for v in &mut w[cols..2 * cols] {
                *v = v.abs() * 1e-3; // a one-signed, small row
            }
            let mut bytes = reference::quantize(&w, format);
            // An infinite scale in the last row: inf * 0 and inf products as ggml gives them.
            let d_at = match format {
                QuantFormat::Q6_K => 208,
                QuantFormat::Q2_K => 80,
                QuantFormat::Q3_K => 108,
                _ => 0,
            };
            let last = (rows - 1) * format.row_bytes(cols).unwrap() + d_at;
            bytes[last..last + 2].copy_from_slice(&f16::INFINITY.to_bits().to_le_bytes());
            let q = QuantMatrix::from_ggml(&bytes, format, rows, cols).unwrap();
            let want = reference::dequantize(&bytes, format, rows, cols);
            let mut row = vec![0.0f32; cols];
            for r in 0..rows {
                q.dequantize_row(r, &mut row);
                for (c, (&g, &e)) in row.iter().zip(&want[r * cols..(r + 1) * cols]).enumerate() {
                    let same = g.to_bits() == (e as f32).to_bits() || (g.is_nan() && e.is_nan());
                    assert!(same, "{format} row {r} col {c}: {g} vs {e}");
                }
            }
            for m in [1, 3] {
                let x = values(m * cols, m as u64 + 11);
                check(&bytes, format, rows, cols, &x);
                let mut portable = vec![0.0; m * rows];
                rows_portable(&q, 0..rows, &x, &mut portable, rows);
                let mut o = vec![0.0; m * rows];
                q.rows_into(0..rows, &x, &mut o, rows);
                let same =
                    o.iter().zip(&portable).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
                assert!(same, "{format} m {m}: the picked kernel {o:?} vs portable {portable:?}");
            }
        }
        // A stack of runs in different formats decodes each row by its own run.
        let (cols, w) = (256, values(5 * 256, 5));
        let a = reference::quantize(&w[..2 * cols], QuantFormat::Q4_K);
        let b = reference::quantize(&w[2 * cols..], QuantFormat::Q6_K);
        let q =
            QuantMatrix::from_groups(vec![(a.clone(), QuantFormat::Q4_K, 2), (b.clone(), QuantFormat::Q6_K, 3)], cols)
                .unwrap();
        assert_eq!(q.rows, 5);
        let mut row = vec![0.0f32; cols];
        for r in 0..5 {
            q.dequantize_row(r, &mut row);
            let want = if r < 2 {
                reference::dequantize(&a, QuantFormat::Q4_K, 2, cols)[r * cols..(r + 1) * cols].to_vec()
            } else {
                reference::dequantize(&b, QuantFormat::Q6_K, 3, cols)[(r - 2) * cols..(r - 1) * cols].to_vec()
            };
            assert!(row.iter().zip(&want).all(|(&g, &e)| g as f64 == e), "mixed stack row {r}");
        }
        // Its products: each part's rows in their places, one token and several.
        for m in [1usize, 3] {
            let x = values(m * cols, 21);
            let got = q.matmul(&x);
            let (ga, gb) = (
                QuantMatrix::from_ggml(&a, QuantFormat::Q4_K, 2, cols).unwrap().matmul(&x),
                QuantMatrix::from_ggml(&b, QuantFormat::Q6_K, 3, cols).unwrap().matmul(&x),
            );
            for t in 0..m {
                assert_eq!(&got[t * 5..t * 5 + 2], &ga[t * 2..t * 2 + 2], "mixed stack token {t}");
                assert_eq!(&got[t * 5 + 2..t * 5 + 5], &gb[t * 3..t * 3 + 3], "mixed stack token {t}");
            }
        }
    }

    #[test]
    fn zero_rows_and_tokens_give_empty_results() {
        let q = QuantMatrix::from_ggml(&[], QuantFormat::Q4_1, 0, 64).unwrap();
        assert!(q.matmul(&values(64, 1)).is_empty());
        let bytes = reference::quantize(&values(64, 2), QuantFormat::Q8_0);
        let q = QuantMatrix::from_ggml(&bytes, QuantFormat::Q8_0, 2, 32).unwrap();
        assert!(q.matmul(&[]).is_empty());
        // A row that is not whole blocks, or bytes of another shape, are refused.
        assert!(QuantMatrix::from_ggml(&bytes, QuantFormat::Q8_0, 1, 48).is_err());
        assert!(QuantMatrix::from_ggml(&bytes, QuantFormat::Q8_0, 3, 32).is_err());
    }

    #[test]
    fn every_compiled_kernel_gives_the_same_bits() {
        // The run-time pick must not change results: the portable and AVX2 kernels sum in the
        // same order. Non-finite values included (NaN/inf scales and activations).
        for format in FORMATS {
            let (rows, cols) = (9, 192);
            let mut bytes = reference::quantize(&values(rows * cols, 3), format);
            bytes[format.block_bytes() * 7..][..2].copy_from_slice(&f16::INFINITY.to_bits().to_le_bytes());
            let q = QuantMatrix::from_ggml(&bytes, format, rows, cols).unwrap();
            for m in [1, 3] {
                let mut x = values(m * cols, 8);
                if m > 1 {
                    x[cols + 37] = f32::NAN; // the second token's products only
                }
                let mut portable = vec![0.0; m * rows];
                rows_portable(&q, 0..rows, &x, &mut portable, rows);
                #[cfg(target_arch = "x86_64")]
                if avx2::available() {
                    let mut o = vec![0.0; m * rows];
                    // SAFETY: AVX2 was detected.
                    unsafe { avx2::rows(&q, 0..rows, &x, &mut o, rows) };
                    // NaN payloads may differ with operand order; any NaN matches any NaN.
                    let same =
                        o.iter().zip(&portable).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
                    assert!(same, "{format} m {m}: avx2 {o:?} vs portable {portable:?}");
                }
            }
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;

    /// Single-thread ns per 32 values of the one-token product, cache-resident and not
    /// (`cargo test --release -p kiln-models --lib -- --ignored --nocapture speed`).
    #[test]
    #[ignore]
    fn ns_per_block() {
        for format in [
            QuantFormat::Q4_1,
            QuantFormat::Q8_0,
            QuantFormat::Q4_K,
            QuantFormat::Q6_K,
            QuantFormat::Q5_K,
            QuantFormat::Q3_K,
            QuantFormat::Q2_K,
        ] {
            for rows in [512usize, 65536] {
                let cols = 768;
                let bytes = vec![0x11u8; rows * format.row_bytes(cols).unwrap()];
                let q = QuantMatrix::from_ggml(&bytes, format, rows, cols).unwrap();
                let x = vec![0.5f32; cols];
                let mut out = vec![0.0f32; rows];
                let reps = (4_000_000 / rows).max(3);
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    q.rows_into(0..rows, &x, &mut out, 0);
                }
                let blocks = (reps * rows * cols / QK) as f64;
                let nbytes = (reps * bytes.len()) as f64;
                eprintln!(
                    "{format} {rows} rows: {:.2} ns per 32 values, {:.2} GB/s",
                    t.elapsed().as_secs_f64() * 1e9 / blocks,
                    nbytes / t.elapsed().as_secs_f64() / 1e9
                );
            }
        }
    }
}
