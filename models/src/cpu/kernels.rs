//! The decoder's f32 steps other than the quantized products, on host slices: RMSNorm, RoPE
//! (rotate-half, as kiln-core's `ops::rope`), grouped-query attention over the host KV cache,
//! SwiGLU and the greedy argmax. Each follows the GPU op (and kiln-core's f64 reference) it
//! stands in for; see the tests.

use rayon::prelude::*;

/// Lanes of the f32 dot products (a multiple of the widest vector, so LLVM vectorizes them).
const LANES: usize = 16;

/// Σ a·b with `LANES` accumulators summed pairwise, then the tail.
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let mut acc = [0.0f32; LANES];
    let (ac, bc) = (a[..n].chunks_exact(LANES), b[..n].chunks_exact(LANES));
    let (at, bt) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        let x: &[f32; LANES] = x.try_into().unwrap();
        let y: &[f32; LANES] = y.try_into().unwrap();
        for j in 0..LANES {
            acc[j] += x[j] * y[j];
        }
    }
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for i in 0..w {
            acc[i] += acc[i + w];
        }
    }
    acc[0] + at.iter().zip(bt).map(|(x, y)| x * y).sum::<f32>()
}

/// `x / sqrt(mean(x²) + eps) * w` per row of `x` (rows of `w.len()`); the mean in f64.
pub(crate) fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let d = w.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        let ms = row.iter().map(|&a| a as f64 * a as f64).sum::<f64>() / d as f64;
        let inv = (1.0 / (ms + eps as f64).sqrt()) as f32;
        out.extend(row.iter().zip(w).map(|(&a, &g)| a * inv * g));
    }
    out
}

/// cos and sin of RoPE's angles for positions `pos..pos + l`: [l, head_dim / 2] each, angle
/// `p * base^(-2i / head_dim) / factors[i]` computed in f64 (positions reach the thousands).
pub(crate) fn rope_table(
    pos: usize,
    l: usize,
    head_dim: usize,
    base: f32,
    factors: Option<&[f32]>,
) -> (Vec<f32>, Vec<f32>) {
    let h = head_dim / 2;
    let (mut cos, mut sin) = (Vec::with_capacity(l * h), Vec::with_capacity(l * h));
    for p in pos..pos + l {
        for i in 0..h {
            let ff = factors.map_or(1.0, |f| f[i] as f64);
            let theta = p as f64 * (base as f64).powf(-2.0 * i as f64 / head_dim as f64) / ff;
            let (s, c) = theta.sin_cos();
            cos.push(c as f32);
            sin.push(s as f32);
        }
    }
    (cos, sin)
}

/// Rotate-half RoPE of one head's `x` [head_dim] with one position's `cos`/`sin` [head_dim / 2].
pub(crate) fn rope_head(x: &mut [f32], cos: &[f32], sin: &[f32]) {
    let h = x.len() / 2;
    let (lo, hi) = x.split_at_mut(h);
    for i in 0..h {
        let (x0, x1) = (lo[i], hi[i]);
        lo[i] = x0 * cos[i] - x1 * sin[i];
        hi[i] = x1 * cos[i] + x0 * sin[i];
    }
}

/// How attention scores are made: `scale` times q·k, then Gemma 2's soft-cap
/// (cap * tanh(s / cap)); `window`: a query sees only the last `window` positions up to its own.
#[derive(Clone, Copy)]
pub(crate) struct Scores {
    pub scale: f32,
    pub softcap: Option<f32>,
    pub window: Option<usize>,
}

/// Causal grouped-query attention of `q` [l, n_heads * hd] (positions `pos..pos + l`) over the
/// cache's `k`, `v` [pos + l, n_kv * hd] (position-major): query head `h` reads KV head
/// `h / (n_heads / n_kv)` and sees positions up to its own (the last `scores.window` of them).
/// Returns [l, n_heads * hd].
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    n_heads: usize,
    n_kv: usize,
    hd: usize,
    pos: usize,
    scores: Scores,
) -> Vec<f32> {
    let width = n_heads * hd;
    let kv_width = n_kv * hd;
    let l = q.len() / width;
    let group = n_heads / n_kv;
    let mut out = vec![0.0f32; l * width];
    out.par_chunks_mut(hd).enumerate().for_each(|(i, o)| {
        let (t, h) = (i / n_heads, i % n_heads);
        let g = h / group;
        let qh = &q[t * width + h * hd..t * width + (h + 1) * hd];
        let n = pos + t + 1;
        let first = scores.window.map_or(0, |w| n.saturating_sub(w));
        // The head's keys and values [n, hd] sit at column g * hd of rows kv_width apart.
        let (k, v) = (&k[first * kv_width + g * hd..], &v[first * kv_width + g * hd..]);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked above).
            return unsafe { attend_avx2(qh, k, v, kv_width, n - first, scores, o) };
        }
        attend(qh, k, v, kv_width, n - first, scores, o)
    });
    out
}

/// One query head over `n` keys and values (`stride` apart) into `o` [hd]: softmax of the
/// scaled scores (max subtracted) times V.
#[inline(always)]
fn attend(qh: &[f32], k: &[f32], v: &[f32], stride: usize, n: usize, scores: Scores, o: &mut [f32]) {
    let hd = qh.len();
    // A plain loop, not an iterator chain: `Map::fold` would be a function of its own, compiled
    // without the caller's AVX2 (measured: 9% of a decode token in the SSE2 build).
    let mut s = vec![0.0f32; n];
    for (j, sj) in s.iter_mut().enumerate() {
        *sj = dot(qh, &k[j * stride..j * stride + hd]) * scores.scale;
    }
    if let Some(cap) = scores.softcap {
        s.iter_mut().for_each(|x| *x = cap * (*x / cap).tanh());
    }
    let max = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for x in s.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    let inv = 1.0 / sum;
    for (j, &p) in s.iter().enumerate() {
        let vj = &v[j * stride..j * stride + hd];
        let p = p * inv;
        for (a, &b) in o.iter_mut().zip(vj) {
            *a += p * b;
        }
    }
}

/// [`attend`] compiled for AVX2 (its loops are written to vectorize; the baseline build has
/// only SSE2).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn attend_avx2(qh: &[f32], k: &[f32], v: &[f32], stride: usize, n: usize, scores: Scores, o: &mut [f32]) {
    attend(qh, k, v, stride, n, scores, o)
}

/// `silu(gate) * up` for `gu` [l, 2n] (gate then up per row): [l, n].
pub(crate) fn swiglu(gu: &[f32], n: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(gu.len() / 2);
    for row in gu.chunks_exact(2 * n) {
        let (g, u) = row.split_at(n);
        out.extend(g.iter().zip(u).map(|(&g, &u)| g / (1.0 + (-g).exp()) * u));
    }
    out
}

/// `gelu_tanh(gate) * up` for `gu` [l, 2n] (Gemma's GeGLU, ggml's tanh-approximated GELU): [l, n].
pub(crate) fn geglu(gu: &[f32], n: usize) -> Vec<f32> {
    let gelu = |x: f32| {
        let t = (0.797_884_6 * (x + 0.044715 * x * x * x)).tanh();
        // For large |x| the product 0.5 x (1 + t) is exact in the limit already; an infinite x
        // would give inf * 0 there: the limits (0 for -inf) instead.
        if x.is_infinite() {
            x.max(0.0)
        } else {
            0.5 * x * (1.0 + t)
        }
    };
    let mut out = Vec::with_capacity(gu.len() / 2);
    for row in gu.chunks_exact(2 * n) {
        let (g, u) = row.split_at(n);
        out.extend(g.iter().zip(u).map(|(&g, &u)| gelu(g) * u));
    }
    out
}

/// The index of the largest value, the lowest among equals; a NaN wins (the first one), as
/// kiln-core's `ops::argmax` on the GPU path and numpy's argmax.
pub(crate) fn argmax(x: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v.is_nan() {
            return i as u32;
        }
        if v > x[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::reference::{attention as ref_attention, movement, quant};

    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_add(0x9E3779B97F4A7C15);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    fn close(got: &[f32], want: &[f64], tol: f64, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!((g as f64 - w).abs() <= tol * (1.0 + w.abs()), "{what} at {i}: {g} vs {w}");
        }
    }

    #[test]
    fn dot_matches_f64_on_ragged_lengths() {
        for n in [0, 1, 15, 16, 17, 64, 100] {
            let (a, b) = (values(n, 1), values(n, 2));
            let want: f64 = a.iter().zip(&b).map(|(&x, &y)| x as f64 * y as f64).sum();
            close(&[dot(&a, &b)], &[want], 1e-5, &format!("dot {n}"));
        }
    }

    #[test]
    fn rms_norm_and_swiglu_match_the_fused_reference() {
        // kiln-core's quant_matmul_fused reference (the GPU's fused op in f64) folds RMSNorm
        // before and SwiGLU after a quant product: the three host steps in a row against it.
        let (m, k, n) = (3, 64, 5);
        let x = values(m * k, 3);
        let g = values(k, 4);
        let w = values(2 * n * k, 5);
        let bytes = quant::quantize(&w, kiln_core::ops::QuantFormat::Q8_0);
        let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let g64: Vec<f64> = g.iter().map(|&v| v as f64).collect();
        let want = quant::quant_matmul_fused(
            &x64,
            m,
            k,
            &bytes,
            kiln_core::ops::QuantFormat::Q8_0,
            n,
            Some((&g64, 1e-5)),
            true,
            None,
        );
        let q =
            super::super::quant::QuantMatrix::from_ggml(&bytes, kiln_core::ops::QuantFormat::Q8_0, 2 * n, k).unwrap();
        let got = swiglu(&q.matmul(&rms_norm(&x, &g, 1e-5)), n);
        close(&got, &want, 1e-5, "rms_norm + matmul + swiglu");
        // All-zero rows: mean 0, eps keeps it finite.
        assert!(rms_norm(&[0.0; 8], &[1.0; 8], 1e-5).iter().all(|&v| v == 0.0));
    }

    #[test]
    fn rope_matches_the_reference_at_far_positions() {
        let (heads, l, hd, base) = (3, 4, 16, 100000.0f32);
        for pos in [0, 1, 5000] {
            let x = values(heads * l * hd, pos as u64);
            let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
            let want = movement::rope(&x64, &[heads, l, hd], pos, base as f64);
            let (cos, sin) = rope_table(pos, l, hd, base, None);
            let mut got = x.clone();
            for (i, row) in got.chunks_exact_mut(hd).enumerate() {
                let t = i % l;
                rope_head(row, &cos[t * hd / 2..(t + 1) * hd / 2], &sin[t * hd / 2..(t + 1) * hd / 2]);
            }
            close(&got, &want, 1e-6, &format!("rope at {pos}"));
        }
    }

    #[test]
    fn grouped_attention_matches_the_reference_causally_after_a_prefix() {
        // 6 query heads over 2 KV heads, head size 24 (not a lane multiple); 3 new positions
        // after 4 cached ones (the mask is by absolute position); plain, and with Gemma 2's
        // soft-cap (0.2: below the scores, so it bites) and a window of 3 positions.
        let (nh, nkv, hd, pos, l) = (6, 2, 24, 4, 3);
        let plain = Scores { scale: 1.0 / (hd as f32).sqrt(), softcap: None, window: None };
        let gemma = Scores { scale: 0.3, softcap: Some(0.2), window: Some(3) };
        for scores in [plain, gemma] {
            check_grouped_attention(nh, nkv, hd, pos, l, scores);
        }
    }

    fn check_grouped_attention(nh: usize, nkv: usize, hd: usize, pos: usize, l: usize, scores: Scores) {
        let n = pos + l;
        let q = values(l * nh * hd, 11);
        let k = values(n * nkv * hd, 12);
        let v = values(n * nkv * hd, 13);
        let got = attention(&q, &k, &v, nh, nkv, hd, pos, scores);
        let group = nh / nkv;
        for h in 0..nh {
            let g = h / group;
            // Reference layouts: q [1, L, hd] of this head, k/v [1, n, hd] of its KV head.
            let qh: Vec<f64> =
                (0..l).flat_map(|t| q[(t * nh + h) * hd..(t * nh + h + 1) * hd].iter().map(|&x| x as f64)).collect();
            let kh: Vec<f64> =
                (0..n).flat_map(|j| k[(j * nkv + g) * hd..(j * nkv + g + 1) * hd].iter().map(|&x| x as f64)).collect();
            let vh: Vec<f64> =
                (0..n).flat_map(|j| v[(j * nkv + g) * hd..(j * nkv + g + 1) * hd].iter().map(|&x| x as f64)).collect();
            for t in 0..l {
                // Query t sees keys 0..=pos + t: the reference without a mask over that prefix.
                let seen = pos + t + 1;
                let (want, _) = ref_attention::attention_scored(
                    &qh[t * hd..(t + 1) * hd],
                    &[1, hd],
                    &kh[..seen * hd],
                    &[seen, hd],
                    &vh[..seen * hd],
                    &[seen, hd],
                    None,
                    false,
                    Some(scores.scale as f64),
                    scores.softcap.map(f64::from),
                    scores.window,
                )
                .unwrap();
                close(&got[(t * nh + h) * hd..(t * nh + h + 1) * hd], &want, 1e-5, &format!("head {h} query {t}"));
            }
        }
    }

    #[test]
    fn the_portable_head_matches_the_dispatched_one() {
        // `attention` takes the AVX2 build where the CPU has it; the portable one must agree.
        let (hd, n, stride) = (40, 9, 56);
        let (q, k, v) = (values(hd, 21), values(n * stride, 22), values(n * stride, 23));
        let mut portable = vec![0.0f32; hd];
        let s = Scores { scale: 0.3, softcap: Some(0.5), window: None };
        attend(&q, &k, &v, stride, n, s, &mut portable);
        let mut dispatched = vec![0.0f32; hd];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 detected.
            unsafe { attend_avx2(&q, &k, &v, stride, n, s, &mut dispatched) };
        } else {
            attend(&q, &k, &v, stride, n, s, &mut dispatched);
        }
        #[cfg(not(target_arch = "x86_64"))]
        attend(&q, &k, &v, stride, n, s, &mut dispatched);
        let want: Vec<f64> = dispatched.iter().map(|&x| x as f64).collect();
        close(&portable, &want, 1e-6, "portable vs avx2 head");
    }

    #[test]
    fn argmax_takes_the_lowest_of_ties_and_the_first_nan() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[f32::NEG_INFINITY, f32::NEG_INFINITY]), 0);
        assert_eq!(argmax(&[1.0, f32::INFINITY, f32::NAN, f32::NAN]), 2);
        assert_eq!(argmax(&[-0.0, 0.0]), 0);
        assert_eq!(argmax(&[]), 0);
    }
}
