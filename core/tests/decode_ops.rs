//! The decode building blocks: `quant_matmul_fused` (RMSNorm, SwiGLU and residual folded into
//! the quantized product), `rope_qkv_to_cache` (in-place KV-cache write) and `attention_prefix`
//! (attention over a cache's filled rows), against the CPU references and against the unfused
//! ops they replace.

mod common;
use common::*;
use kiln_core::ops::{self, MatvecKernel, QuantFormat, QuantFusion};
use kiln_core::reference::{attention as cpu_attention, movement as cpu_movement, quant as cpu};
use kiln_core::{DType, ErrorCode, Tensor};

const FORMATS: [QuantFormat; 3] = [QuantFormat::Q4_0, QuantFormat::Q4_1, QuantFormat::Q8_0];

fn quant_weights(rng: &mut Rng, f: QuantFormat, rows: usize, k: usize) -> (Tensor, Vec<u8>) {
    let w: Vec<f32> = (0..rows * k).map(|_| rng.uniform(-1.5, 1.5) as f32).collect();
    let bytes = cpu::quantize(&w, f);
    (ops::quant_from_bytes(&kiln_core::device().unwrap(), &bytes, f, rows, k).unwrap(), bytes)
}

/// Where the fused QKV + RoPE kernels' results `a` and the separate ops' `b` (rows of D values,
/// rotated pairs (i, i + D/2)) are further apart than a driver contracting multiply-adds
/// differently in the two shaders allows: f32 one ulp; f16 a spacing (2^-11 relative) of each
/// rotated pair member's rounded input, bounded by the pair's norm sqrt(y0² + y1²) (a rotation
/// keeps it), plus the rotation's own rounding. The H200's driver (2026-11-29): f16 queries 2-4
/// output spacings apart where the pair's inputs are larger than its outputs; lavapipe: equal.
/// Returns the indices past the bound (NaN matches NaN).
fn cross_kernel_far(dt: DType, a: &[f64], b: &[f64], d: usize) -> Vec<usize> {
    let half = d / 2;
    (0..a.len())
        .filter(|&i| {
            let (p, q) = (a[i], b[i]);
            if !p.is_finite() || !q.is_finite() {
                return !(p.is_nan() && q.is_nan()) && p != q;
            }
            let tol = if dt == DType::F16 {
                let j = if i % d < half { i + half } else { i - half };
                let norm = (q * q + b[j] * b[j]).sqrt();
                2f64.powi(-11) * (2.0 * norm + p.abs().max(q.abs()))
            } else {
                2f64.powi(-23) * p.abs().max(q.abs())
            };
            (p - q).abs() > tol.max(f64::MIN_POSITIVE)
        })
        .collect()
}

fn host(dt: DType, v: &[f64], shape: &[usize]) -> Tensor {
    let v: Vec<f64> = v.iter().map(|&a| kiln_core::reference::round_to(dt, a)).collect();
    Tensor::from_bytes(&kiln_core::dtype::f64_to_bytes(dt, &v), shape, dt).unwrap()
}

/// Per output: Σ|x w| of the product, or for SwiGLU (Σ|x w_g| + |g|)(|u| + 1) + |silu(g)| Σ|x w_u|
/// (a gate error moves silu(g) * u by at most ~1.1 |u| times it, an up error by |silu(g)|).
#[allow(clippy::too_many_arguments)]
fn error_scale(
    x: &[f64],
    m: usize,
    k: usize,
    bytes: &[u8],
    f: QuantFormat,
    n: usize,
    norm: Option<&[f64]>,
    swiglu: bool,
) -> Vec<f64> {
    let mut xn = x.to_vec();
    if let Some(g) = norm {
        for row in xn.chunks_mut(k.max(1)) {
            let inv = 1.0 / (row.iter().map(|a| a * a).sum::<f64>() / k as f64 + 1e-5).sqrt();
            row.iter_mut().enumerate().for_each(|(j, a)| *a *= inv * g[j]);
        }
    }
    let rows = if swiglu { 2 * n } else { n };
    let y = cpu::quant_matmul(&xn, m, k, bytes, f, rows);
    let abs = cpu::quant_matmul_abs(&xn, m, k, bytes, f, rows);
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let (a, b) = (i * rows + j, i * rows + n + j);
            out[i * n + j] = if swiglu {
                let silu = (y[a] / (1.0 + (-y[a]).exp())).abs();
                (abs[a] + y[a].abs()) * (y[b].abs() + 1.0) + silu * abs[b]
            } else {
                abs[a]
            };
        }
    }
    out
}

#[test]
fn quant_matmul_fused_matches_reference() {
    poison();
    let mut rng = Rng::new(41);
    // m up to 8 runs the fused matrix-vector kernel, 9 the composed ops; k = 576 and n = 300
    // are decoder-like (several strides per row, several workgroups), 32 and 1 the edges. Every
    // case also runs on the strided kernel asked for by name, which takes any m (batched
    // decode's 13 and 16 rows: 4 rows a workgroup, a partial last group).
    let cases: &[(usize, usize, usize)] =
        &[(1, 32, 1), (1, 576, 300), (3, 96, 65), (8, 64, 7), (9, 96, 33), (2, 0, 5), (13, 64, 7), (16, 96, 33)];
    for dt in float_dtypes() {
        for f in FORMATS {
            for &(m, k, n) in cases {
                for variant in 0..8 {
                    let (norm, swiglu, res) = (variant & 1 != 0, variant & 2 != 0, variant & 4 != 0);
                    let rows = if swiglu { 2 * n } else { n };
                    let (w, bytes) = quant_weights(&mut rng, f, rows, k);
                    let (x, xv) = rand_tensor(&mut rng, &[m, k], dt, -2.0, 2.0);
                    let (g, gv) = rand_tensor(&mut rng, &[k], dt, 0.5, 1.5);
                    let (r, rv) = rand_tensor(&mut rng, &[m, n], dt, -3.0, 3.0);
                    let fusion =
                        QuantFusion { rms_norm: norm.then_some((&g, 1e-5)), swiglu, residual: res.then_some(&r) };
                    let auto = ops::quant_matmul_fused(&x, &w, f, n, fusion).unwrap();
                    let strided = ops::quant_matmul_fused_kernel(&x, &w, f, n, fusion, MatvecKernel::Strided).unwrap();
                    assert_eq!(auto.shape(), [m, n]);
                    assert_eq!(strided.shape(), [m, n]);
                    let want = cpu::quant_matmul_fused(
                        &xv,
                        m,
                        k,
                        &bytes,
                        f,
                        n,
                        norm.then_some((&gv[..], 1e-5)),
                        swiglu,
                        res.then_some(&rv[..]),
                    );
                    // The error scale: each product's Σ|x w| (f32 accumulation in any order),
                    // and for SwiGLU how gate and up errors carry through silu(g) * u. f16 also
                    // rounds the result (and the composed path's normalised x, gate, up and
                    // product) to 11 bits.
                    let scale = error_scale(&xv, m, k, &bytes, f, n, norm.then_some(&gv[..]), swiglu);
                    let rel = if dt == DType::F32 { 4e-5 } else { 2e-3 };
                    for (kernel, got) in [("auto", auto), ("strided", strided)] {
                        let what =
                            format!("{dt} {f} m {m} k {k} n {n} norm {norm} swiglu {swiglu} residual {res} {kernel}");
                        let got = got.to_f64_vec().unwrap();
                        for i in 0..got.len() {
                            let bound = rel * (1.0 + scale[i] + if res { rv[i].abs() } else { 0.0 });
                            assert!(
                                (got[i] - want[i]).abs() <= bound,
                                "{what}: element {i}: got {}, reference {} (bound {bound})",
                                got[i],
                                want[i]
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn quant_matmul_fused_equals_the_separate_ops() {
    // The fused kernel against rms_norm + quant_matmul + silu + mul + add on the GPU: the same
    // arithmetic up to where the norm's scale is applied.
    let mut rng = Rng::new(42);
    let (m, k, n) = (1, 576, 96);
    let (w, _) = quant_weights(&mut rng, QuantFormat::Q4_1, 2 * n, k);
    let (x, _) = rand_tensor(&mut rng, &[m, k], DType::F32, -2.0, 2.0);
    let (g, _) = rand_tensor(&mut rng, &[k], DType::F32, 0.5, 1.5);
    let (r, _) = rand_tensor(&mut rng, &[m, n], DType::F32, -3.0, 3.0);
    let fused = ops::quant_matmul_fused(
        &x,
        &w,
        QuantFormat::Q4_1,
        n,
        QuantFusion { rms_norm: Some((&g, 1e-5)), swiglu: true, residual: Some(&r) },
    )
    .unwrap();
    let xn = ops::rms_norm(&x, Some(&g), 1e-5).unwrap();
    let y = ops::quant_matmul(&xn, &w, QuantFormat::Q4_1, 2 * n).unwrap();
    let gate = ops::slice(&y, 1, 0, n as isize, 1).unwrap();
    let up = ops::slice(&y, 1, n as isize, 2 * n as isize, 1).unwrap();
    let sep = ops::add(&ops::mul(&ops::silu(&gate).unwrap(), &up).unwrap(), &r).unwrap();
    assert_close("fused vs separate", &fused.to_f64_vec().unwrap(), &sep.to_f64_vec().unwrap(), 1e-4, 1e-4);
}

#[test]
fn many_rows_swiglu_in_one_kernel_has_the_separate_ops_bits() {
    // Past the matrix-vector rows (prefill) SwiGLU is one kernel over the product (f32): the
    // same bits as slicing gate and up and running silu and mul, on rows holding ±0, ±inf,
    // NaN, huge and tiny values, ragged n.
    let mut rng = Rng::new(44);
    for &(m, k, n) in &[(9usize, 64usize, 33usize), (130, 96, 7), (17, 32, 1)] {
        let (w, _) = quant_weights(&mut rng, QuantFormat::Q4_0, 2 * n, k);
        let (_, xv) = rand_tensor(&mut rng, &[m, k], DType::F32, -2.0, 2.0);
        let mut xs: Vec<f32> = xv.iter().map(|&v| v as f32).collect();
        let specials = [0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 3e38, -3e38, 1e-40];
        for (r, &v) in specials.iter().enumerate().take(m) {
            xs[r * k + r % k] = v;
        }
        let x = Tensor::from_slice(&xs, &[m, k]).unwrap();
        let fused =
            ops::quant_matmul_fused(&x, &w, QuantFormat::Q4_0, n, QuantFusion { swiglu: true, ..Default::default() })
                .unwrap()
                .to_vec::<f32>()
                .unwrap();
        let y = ops::quant_matmul(&x, &w, QuantFormat::Q4_0, 2 * n).unwrap();
        let gate = ops::slice(&y, 1, 0, n as isize, 1).unwrap();
        let up = ops::slice(&y, 1, n as isize, 2 * n as isize, 1).unwrap();
        let sep = ops::mul(&ops::silu(&gate).unwrap(), &up).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(fused.len(), m * n);
        for (i, (a, b)) in fused.iter().zip(&sep).enumerate() {
            assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "m {m} n {n} element {i}: {a} vs {b}");
        }
        assert!(sep.iter().any(|v| !v.is_finite()), "the specials reach the SwiGLU");
    }
}

#[test]
fn many_rows_residual_is_added_in_the_products_epilogue_with_adds_bits() {
    // Past the matrix-vector rows the residual is added by the tiled kernel as it stores: the
    // same bits as quant_matmul then ops::add, in f32 and (where the adapter has it) f16, on
    // residuals holding ±0, ±inf, NaN and huge values (one dispatch fewer: the prefill count of
    // models/tests/decode_recording.rs).
    let mut rng = Rng::new(45);
    for dt in float_dtypes() {
        for &(m, k, n) in &[(9usize, 64usize, 33usize), (130, 96, 70)] {
            let (w, _) = quant_weights(&mut rng, QuantFormat::Q8_0, n, k);
            let (x, _) = rand_tensor(&mut rng, &[m, k], dt, -2.0, 2.0);
            let (_, rv) = rand_tensor(&mut rng, &[m, n], DType::F32, -3.0, 3.0);
            let specials = [0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 6e4, -6e4];
            let rv: Vec<f64> =
                rv.iter().enumerate().map(|(i, &v)| if i % 5 == 0 { specials[i / 5 % 7] } else { v }).collect();
            let r = host(dt, &rv, &[m, n]);
            let fused = ops::quant_matmul_fused(
                &x,
                &w,
                QuantFormat::Q8_0,
                n,
                QuantFusion { residual: Some(&r), ..Default::default() },
            )
            .unwrap()
            .to_f64_vec()
            .unwrap();
            let sep =
                ops::add(&ops::quant_matmul(&x, &w, QuantFormat::Q8_0, n).unwrap(), &r).unwrap().to_f64_vec().unwrap();
            for (i, (a, b)) in fused.iter().zip(&sep).enumerate() {
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "{dt} m {m} n {n} element {i}: {a} vs {b}"
                );
            }
        }
    }
}

#[test]
fn quant_matmul_fused_propagates_nan_and_checks_its_operands() {
    let mut rng = Rng::new(43);
    let (w, _) = quant_weights(&mut rng, QuantFormat::Q8_0, 8, 64);
    let mut xv = vec![0.5f32; 2 * 64];
    xv[3] = f32::NAN; // row 0 only
    let x = Tensor::from_slice(&xv, &[2, 64]).unwrap();
    let g = Tensor::from_slice(&[1.0f32; 64], &[64]).unwrap();
    let y = ops::quant_matmul_fused(
        &x,
        &w,
        QuantFormat::Q8_0,
        8,
        QuantFusion { rms_norm: Some((&g, 1e-5)), ..Default::default() },
    )
    .unwrap()
    .to_vec::<f32>()
    .unwrap();
    assert!(y[..8].iter().all(|v| v.is_nan()), "a NaN in a row makes its norm and every output NaN: {y:?}");
    assert!(y[8..].iter().all(|v| v.is_finite()), "the other row is untouched: {y:?}");
    let bad_g = Tensor::from_slice(&[1.0f32; 32], &[32]).unwrap();
    let e = ops::quant_matmul_fused(
        &x,
        &w,
        QuantFormat::Q8_0,
        8,
        QuantFusion { rms_norm: Some((&bad_g, 1e-5)), ..Default::default() },
    );
    assert_eq!(e.unwrap_err().code(), ErrorCode::ShapeMismatch);
    let bad_r = Tensor::from_slice(&[1.0f32; 8], &[1, 8]).unwrap();
    let e = ops::quant_matmul_fused(
        &x,
        &w,
        QuantFormat::Q8_0,
        8,
        QuantFusion { residual: Some(&bad_r), ..Default::default() },
    );
    assert_eq!(e.unwrap_err().code(), ErrorCode::ShapeMismatch);
    // 8 rows of W are 4 outputs under SwiGLU, not 8.
    let e = ops::quant_matmul_fused(&x, &w, QuantFormat::Q8_0, 8, QuantFusion { swiglu: true, ..Default::default() });
    assert!(e.is_err());
    let e = ops::quant_matmul_fused(
        &x,
        &w,
        QuantFormat::Q8_0,
        8,
        QuantFusion { rms_norm: Some((&g, f32::NAN)), ..Default::default() },
    );
    assert_eq!(e.unwrap_err().code(), ErrorCode::InvalidArgument);
}

#[test]
fn rope_qkv_to_cache_matches_reference_and_keeps_other_rows() {
    poison();
    let mut rng = Rng::new(44);
    // (L, heads, kv heads, D, cap, pos)
    let cases: &[(usize, usize, usize, usize, usize, usize)] =
        &[(1, 3, 1, 64, 9, 0), (1, 9, 3, 64, 40, 37), (5, 2, 2, 6, 8, 3), (4, 4, 1, 2, 4, 0), (0, 1, 1, 4, 3, 3)];
    for dt in float_dtypes() {
        for &(l, h, hkv, d, cap, pos) in cases {
            let width = (h + 2 * hkv) * d;
            let (qkv, qkvv) = rand_tensor(&mut rng, &[l, width], dt, -2.0, 2.0);
            let (kc, mut kcv) = rand_tensor(&mut rng, &[hkv, cap, d], dt, -1.0, 1.0);
            let (vc, mut vcv) = rand_tensor(&mut rng, &[hkv, cap, d], dt, -1.0, 1.0);
            let q = ops::rope_qkv_to_cache(&qkv, &kc, &vc, h, pos, 10000.0).unwrap();
            assert_eq!(q.shape(), [h, l, d]);
            let want_q = cpu_movement::rope_qkv_to_cache(&qkvv, l, h, &mut kcv, &mut vcv, hkv, cap, d, pos, 10000.0);
            let (atol, rtol) = if dt == DType::F32 { (2e-4, 1e-4) } else { (4e-3, 4e-3) };
            let what = format!("{dt} L {l} H {h} Hkv {hkv} D {d} cap {cap} pos {pos}");
            assert_close(&format!("{what} q"), &q.to_f64_vec().unwrap(), &want_q, atol, rtol);
            // Rows outside pos..pos+L keep their values exactly (v rows are copies: exact too).
            assert_close(&format!("{what} k cache"), &kc.to_f64_vec().unwrap(), &kcv, atol, rtol);
            assert_eq!(vc.to_f64_vec().unwrap(), vcv, "{what} v cache");
        }
    }
}

/// Llama 3.1's RoPE frequency factors (llama.cpp's `rope_freqs`): each pair's turn divided by
/// its factor, against the f64 reference; the batched kernel gives the single one's bits.
#[test]
fn rope_qkv_to_cache_scaled_matches_reference() {
    poison();
    let mut rng = Rng::new(46);
    for dt in float_dtypes() {
        for &(l, h, hkv, d, cap, pos) in &[(3usize, 4usize, 2usize, 16usize, 40usize, 30usize), (1, 2, 1, 8, 9, 8)] {
            let width = (h + 2 * hkv) * d;
            let (qkv, qkvv) = rand_tensor(&mut rng, &[l, width], dt, -2.0, 2.0);
            let (kc, mut kcv) = rand_tensor(&mut rng, &[hkv, cap, d], dt, -1.0, 1.0);
            let (vc, mut vcv) = rand_tensor(&mut rng, &[hkv, cap, d], dt, -1.0, 1.0);
            // Factors from 1 (high frequencies) to 8 (low), as Llama 3.1's.
            let ff: Vec<f32> = (0..d / 2).map(|i| 1.0 + 7.0 * i as f32 / (d / 2 - 1) as f32).collect();
            let fft = Tensor::from_slice(&ff, &[d / 2]).unwrap();
            let q = ops::rope_qkv_to_cache_scaled(&qkv, &kc, &vc, h, pos, 500000.0, Some(&fft)).unwrap();
            let ff64: Vec<f64> = ff.iter().map(|&v| v as f64).collect();
            let want_q = cpu_movement::rope_qkv_to_cache_scaled(
                &qkvv,
                l,
                h,
                &mut kcv,
                &mut vcv,
                hkv,
                cap,
                d,
                pos,
                500000.0,
                Some(&ff64),
            );
            let (atol, rtol) = if dt == DType::F32 { (2e-4, 1e-4) } else { (4e-3, 4e-3) };
            let what = format!("{dt} L {l} H {h} Hkv {hkv} D {d} pos {pos}");
            assert_close(&format!("{what} q"), &q.to_f64_vec().unwrap(), &want_q, atol, rtol);
            assert_close(&format!("{what} k cache"), &kc.to_f64_vec().unwrap(), &kcv, atol, rtol);
            if l == 1 {
                let (k2, v2) = (ops::copy(&kc).unwrap(), ops::copy(&vc).unwrap());
                let kb = k2.reshape(&[1, hkv as isize, cap as isize, d as isize]).unwrap();
                let vb = v2.reshape(&[1, hkv as isize, cap as isize, d as isize]).unwrap();
                let qb = ops::rope_qkv_rows_to_cache_scaled(&qkv, &kb, &vb, h, &[pos], 500000.0, Some(&fft)).unwrap();
                assert_eq!(qb.to_bytes().unwrap(), q.to_bytes().unwrap(), "{what}: batched q");
                assert_eq!(kb.to_bytes().unwrap(), kc.to_bytes().unwrap(), "{what}: batched k");
            }
            // Without factors the turn differs (the factors are used at all; this overwrites the caches' rows).
            let plain = ops::rope_qkv_to_cache(&qkv, &kc, &vc, h, pos, 500000.0).unwrap();
            assert_ne!(plain.to_bytes().unwrap(), q.to_bytes().unwrap(), "{what}");
        }
    }
    // Factors of the wrong length or dtype are refused.
    let qkv = Tensor::from_slice(&[0.0f32; 20], &[1, 20]).unwrap();
    let kc = Tensor::from_slice(&[0.0f32; 8], &[1, 2, 4]).unwrap();
    let vc = Tensor::from_slice(&[0.0f32; 8], &[1, 2, 4]).unwrap();
    let code = |r: kiln_core::Result<Tensor>| r.unwrap_err().code();
    let ff3 = Tensor::from_slice(&[1.0f32; 3], &[3]).unwrap();
    assert_eq!(code(ops::rope_qkv_to_cache_scaled(&qkv, &kc, &vc, 3, 0, 1e4, Some(&ff3))), ErrorCode::ShapeMismatch);
    let ffi = Tensor::from_slice(&[1i32; 2], &[2]).unwrap();
    assert_eq!(code(ops::rope_qkv_to_cache_scaled(&qkv, &kc, &vc, 3, 0, 1e4, Some(&ffi))), ErrorCode::ShapeMismatch);
}

#[test]
fn rope_qkv_to_cache_refuses_bad_operands() {
    let qkv = Tensor::from_slice(&[0.0f32; 2 * 5 * 4], &[2, 20]).unwrap();
    let kc = Tensor::from_slice(&[0.0f32; 8], &[1, 2, 4]).unwrap();
    let vc = Tensor::from_slice(&[0.0f32; 8], &[1, 2, 4]).unwrap();
    let code = |r: kiln_core::Result<Tensor>| r.unwrap_err().code();
    // 3 heads + 2 kv heads of 4 = 20 wide; rows 1..3 overflow a cache of 2.
    assert_eq!(code(ops::rope_qkv_to_cache(&qkv, &kc, &vc, 3, 1, 1e4)), ErrorCode::InvalidArgument);
    assert_eq!(code(ops::rope_qkv_to_cache(&qkv, &kc, &vc, 2, 0, 1e4)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::rope_qkv_to_cache(&qkv, &kc, &kc, 3, 0, 1e4)), ErrorCode::InvalidArgument);
    assert_eq!(code(ops::rope_qkv_to_cache(&qkv, &kc, &vc, 3, 0, -1.0)), ErrorCode::InvalidArgument);
    assert!(ops::rope_qkv_to_cache(&qkv, &kc, &vc, 3, 0, 1e4).is_ok());
    let ki = Tensor::from_slice(&[0i32; 8], &[1, 2, 4]).unwrap();
    assert_eq!(code(ops::rope_qkv_to_cache(&qkv, &ki, &vc, 3, 0, 1e4)), ErrorCode::DTypeMismatch);
}

#[test]
fn attention_prefix_reads_the_filled_rows_in_place() {
    poison();
    let mut rng = Rng::new(45);
    // (batch heads, group, Lq, Lmax, len, D, causal): decode (split-KV) and prefill (flash on
    // a GPU, split-KV on a CPU adapter; both paths are also run by name below).
    let cases: &[(usize, usize, usize, usize, usize, usize, bool)] = &[
        (3, 3, 1, 50, 37, 64, false),
        (2, 1, 1, 8, 1, 64, false),
        (1, 2, 7, 20, 7, 64, true),
        (2, 1, 3, 9, 5, 12, false),
        (1, 1, 70, 80, 70, 32, true),
        (1, 1, 1, 5, 0, 8, false),
    ];
    for dt in float_dtypes() {
        for &(b, grp, lq, lmax, len, d, causal) in cases {
            let (q, qv) = rand_tensor(&mut rng, &[b, grp, lq, d], dt, -2.0, 2.0);
            let (k, kv) = rand_tensor(&mut rng, &[b, 1, lmax, d], dt, -2.0, 2.0);
            let (v, vv) = rand_tensor(&mut rng, &[b, 1, lmax, d], dt, -2.0, 2.0);
            let got = ops::attention_prefix(&q, &k, &v, len, causal, None).unwrap();
            assert_eq!(got.shape(), [b, grp, lq, d]);
            let prefix = |t: &[f64]| -> Vec<f64> {
                (0..b).flat_map(|bi| t[bi * lmax * d..(bi * lmax + len) * d].to_vec()).collect()
            };
            let (kp, vp) = (prefix(&kv), prefix(&vv));
            let shape = [b, 1, len, d];
            let (want, _) =
                cpu_attention::attention(&qv, &[b, grp, lq, d], &kp, &shape, &vp, &shape, causal, None).unwrap();
            let (atol, rtol) = if dt == DType::F32 { (1e-5, 1e-4) } else { (4e-3, 4e-3) };
            let what = format!("{dt} b {b} group {grp} Lq {lq} Lmax {lmax} len {len} D {d} causal {causal}");
            assert_close(&what, &got.to_f64_vec().unwrap(), &want, atol, rtol);
            for path in [ops::AttentionPath::Flash, ops::AttentionPath::SplitKv] {
                let named = ops::attention_prefix_on_path(&q, &k, &v, None, len, causal, None, path).unwrap();
                assert_close(&format!("{what} {path:?}"), &named.to_f64_vec().unwrap(), &want, atol, rtol);
            }
            // The same as attention over a copied prefix.
            if len > 0 {
                let kc = ops::slice(&k, 2, 0, len as isize, 1).unwrap();
                let vc = ops::slice(&v, 2, 0, len as isize, 1).unwrap();
                let copy = ops::attention(&q, &kc, &vc, causal, None).unwrap();
                assert_close(
                    &format!("{what} vs a copy"),
                    &got.to_f64_vec().unwrap(),
                    &copy.to_f64_vec().unwrap(),
                    atol,
                    rtol,
                );
            }
        }
    }
    let q = host(DType::F32, &[0.0; 8], &[1, 1, 8]);
    let k = host(DType::F32, &[0.0; 16], &[1, 2, 8]);
    let e = ops::attention_prefix(&q, &k, &k, 3, false, None).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
}

/// `quant_qkv_rope_to_cache` (the QKV matvec with RoPE and the cache write as its epilogue, one
/// dispatch) gives the bytes of `quant_matmul_fused` + `rope_qkv_to_cache` (the two dispatches
/// it replaces) for the queries and both caches, whose other rows stay as they were; and the
/// CPU reference's values. SmolLM2's layer (9 + 2·3 heads of 64, K 576: the wide kernel, as is
/// 7 + 2·3 heads of 48),
/// K 64 (8 rows a workgroup), several positions (L 5: two groups of 4 x rows), D 2 and 6 (one
/// and three pairs a head), L 9 (past the matrix-vector kernel: the two ops), L 0; every
/// format, with and without the norm; a NaN and infinities in x.
#[test]
fn quant_qkv_rope_to_cache_equals_the_two_ops() {
    poison();
    let mut rng = Rng::new(46);
    // (L, heads, kv heads, D, cap, pos, K)
    let cases: &[(usize, usize, usize, usize, usize, usize, usize)] = &[
        (1, 9, 3, 64, 40, 37, 576),
        // 13 heads of 48 (624 rows, K 512): on the wide kernel, whose epilogue is the same.
        (1, 7, 3, 48, 5, 4, 512),
        (1, 3, 1, 64, 9, 0, 64),
        (5, 2, 2, 6, 8, 3, 96),
        (4, 4, 1, 2, 4, 0, 32),
        (9, 2, 1, 8, 12, 0, 64),
        (0, 1, 1, 4, 3, 3, 32),
    ];
    for dt in float_dtypes() {
        for f in FORMATS {
            for &(l, h, hkv, d, cap, pos, k) in cases {
                for norm in [false, true] {
                    let width = (h + 2 * hkv) * d;
                    let (w, bytes) = quant_weights(&mut rng, f, width, k);
                    let (_, mut xv) = rand_tensor(&mut rng, &[l, k], dt, -2.0, 2.0);
                    if l > 1 {
                        // Row 1: a NaN (its whole row of outputs), row 0 stays finite.
                        xv[k + 3] = f64::NAN;
                    }
                    if l > 2 {
                        xv[2 * k] = f64::INFINITY;
                        xv[2 * k + 1] = f64::NEG_INFINITY;
                    }
                    let x = host(dt, &xv, &[l, k]);
                    let (g, gv) = rand_tensor(&mut rng, &[k], dt, 0.5, 1.5);
                    let (_, kcv) = rand_tensor(&mut rng, &[hkv, cap, d], dt, -1.0, 1.0);
                    let (_, vcv) = rand_tensor(&mut rng, &[hkv, cap, d], dt, -1.0, 1.0);
                    let rms = norm.then_some((&g, 1e-5f32));
                    let run = |fused: bool| {
                        let kc = host(dt, &kcv, &[hkv, cap, d]);
                        let vc = host(dt, &vcv, &[hkv, cap, d]);
                        let q = ops::with_decode_fusion(fused, || {
                            ops::quant_qkv_rope_to_cache(&x, &w, f, rms, &kc, &vc, h, pos, 10000.0)
                        })
                        .unwrap();
                        assert_eq!(q.shape(), [h, l, d]);
                        (q.to_bytes().unwrap(), kc.to_bytes().unwrap(), vc.to_bytes().unwrap(), q, kc, vc)
                    };
                    let one = run(true);
                    let two = run(false);
                    let what = format!("{dt} {f} L {l} H {h} Hkv {hkv} D {d} cap {cap} pos {pos} K {k} norm {norm}");
                    // Equal bytes on lavapipe; within `cross_kernel_far`'s bound where a driver contracts
                    // multiply-adds differently in the two shaders.
                    for (part, a, b) in
                        [("queries", &one.3, &two.3), ("k cache", &one.4, &two.4), ("v cache", &one.5, &two.5)]
                    {
                        let (x, y) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
                        let bad = cross_kernel_far(dt, &x, &y, d);
                        let first = bad.first().map(|&i| (i, x[i], y[i]));
                        // On failure, the f64 reference's query there (which side moved).
                        let reference = first.filter(|_| part == "queries").map(|(i, _, _)| {
                            let qkv = cpu::quant_matmul_fused(
                                &xv,
                                l,
                                k,
                                &bytes,
                                f,
                                width,
                                norm.then_some((&gv[..], 1e-5)),
                                false,
                                None,
                            );
                            let (mut kw, mut vw) = (kcv.clone(), vcv.clone());
                            let q = cpu_movement::rope_qkv_to_cache(
                                &qkv, l, h, &mut kw, &mut vw, hkv, cap, d, pos, 10000.0,
                            );
                            q[i]
                        });
                        assert!(
                            bad.is_empty(),
                            "{what}: {part}: {} of {} past cross_kernel_far's bound of the two ops', first (index, \
                             fused, separate) {first:?}, reference {reference:?}",
                            bad.len(),
                            x.len()
                        );
                    }
                    // The reference, on the finite rows: the product, then the rotation.
                    let qkv = cpu::quant_matmul_fused(
                        &xv,
                        l,
                        k,
                        &bytes,
                        f,
                        width,
                        norm.then_some((&gv[..], 1e-5)),
                        false,
                        None,
                    );
                    let (mut kw, mut vw) = (kcv.clone(), vcv.clone());
                    let want_q =
                        cpu_movement::rope_qkv_to_cache(&qkv, l, h, &mut kw, &mut vw, hkv, cap, d, pos, 10000.0);
                    let scale = error_scale(&xv, l, k, &bytes, f, width, norm.then_some(&gv[..]), false);
                    let max_scale = scale.iter().take(width.min(scale.len())).fold(0.0f64, |a, &b| a.max(b));
                    let rel = if dt == DType::F32 { 4e-5 } else { 2e-3 };
                    let got_q = one.3.to_f64_vec().unwrap();
                    for hh in 0..h {
                        for i in 0..d.min(if l > 0 { d } else { 0 }) {
                            let at = hh * l * d + i; // row 0 of head hh
                            let bound = rel * (2.0 + 2.0 * max_scale);
                            assert!(
                                (got_q[at] - want_q[at]).abs() <= bound,
                                "{what}: q[{at}] {} vs {}",
                                got_q[at],
                                want_q[at]
                            );
                        }
                    }
                    if l > 1 {
                        assert!(got_q[d..2 * d].iter().all(|v| v.is_nan()), "{what}: a NaN in x makes its queries NaN");
                    }
                    // Rows outside pos .. pos + L keep their values, bit for bit.
                    let kc = one.4.to_f64_vec().unwrap();
                    let vc = one.5.to_f64_vec().unwrap();
                    for hh in 0..hkv {
                        for r in (0..cap).filter(|r| !(pos..pos + l).contains(r)) {
                            let s = (hh * cap + r) * d..(hh * cap + r + 1) * d;
                            assert_eq!(kc[s.clone()], kcv[s.clone()], "{what}: k cache row {r}");
                            assert_eq!(vc[s.clone()], vcv[s], "{what}: v cache row {r}");
                        }
                    }
                    if l > 0 {
                        let s = (pos * d)..(pos + 1) * d;
                        let rel_ok = |a: f64, b: f64| (a - b).abs() <= rel * (2.0 + 2.0 * max_scale);
                        assert!(
                            kc[s.clone()].iter().zip(&kw[s.clone()]).all(|(a, b)| rel_ok(*a, *b)),
                            "{what}: k row {pos}"
                        );
                        assert!(vc[s.clone()].iter().zip(&vw[s]).all(|(a, b)| rel_ok(*a, *b)), "{what}: v row {pos}");
                    }
                }
            }
        }
    }
}

/// `quant_qkv_rope_to_cache_scaled` (Llama 3.1+'s RoPE frequency factors in the matrix-vector
/// epilogue, both kernels): the bits of the matmul + `rope_qkv_to_cache_scaled` (within the
/// 1-ulp rule above), and the f64 reference's scaled rotation; and refused factors of the
/// wrong length.
#[test]
fn quant_qkv_rope_to_cache_scaled_equals_the_two_ops() {
    poison();
    let mut rng = Rng::new(47);
    // (L, heads, kv heads, D, cap, pos, K): the wide kernel, the strided one, several rows.
    let cases: &[(usize, usize, usize, usize, usize, usize, usize)] =
        &[(1, 9, 3, 64, 40, 37, 576), (1, 3, 1, 64, 9, 5, 64), (5, 2, 2, 6, 8, 3, 96)];
    for dt in float_dtypes() {
        for f in [QuantFormat::Q4_0, QuantFormat::Q8_0, QuantFormat::Q4_K] {
            for &(l, h, hkv, d, cap, pos, k) in cases {
                let k = if f == QuantFormat::Q4_K { k.div_ceil(256) * 256 } else { k };
                let width = (h + 2 * hkv) * d;
                let (w, bytes) = quant_weights(&mut rng, f, width, k);
                let (x, xv) = rand_tensor(&mut rng, &[l, k], dt, -2.0, 2.0);
                let (g, gv) = rand_tensor(&mut rng, &[k], dt, 0.5, 1.5);
                let (_, kcv) = rand_tensor(&mut rng, &[hkv, cap, d], dt, -1.0, 1.0);
                let (_, vcv) = rand_tensor(&mut rng, &[hkv, cap, d], dt, -1.0, 1.0);
                // Llama 3.1's factors run from 1 to 8; one pair at exactly 1.
                let (_, mut ffv) = rand_tensor(&mut rng, &[d / 2], DType::F32, 1.0, 8.0);
                ffv[0] = 1.0;
                let ff = host(DType::F32, &ffv, &[d / 2]);
                let rms = Some((&g, 1e-5f32));
                let run = |fused: bool| {
                    let kc = host(dt, &kcv, &[hkv, cap, d]);
                    let vc = host(dt, &vcv, &[hkv, cap, d]);
                    let q = ops::with_decode_fusion(fused, || {
                        ops::quant_qkv_rope_to_cache_scaled(&x, &w, f, rms, &kc, &vc, h, pos, 500000.0, Some(&ff))
                    })
                    .unwrap();
                    [q.to_f64_vec().unwrap(), kc.to_f64_vec().unwrap(), vc.to_f64_vec().unwrap()]
                };
                let (one, two) = (run(true), run(false));
                let what = format!("{dt} {f} L {l} H {h} Hkv {hkv} D {d} K {k}");
                // Q4_K runs on its own kernel (quant_matvec_k) in both: the same sums.
                for (part, (a, b)) in ["queries", "k cache", "v cache"].iter().zip(one.iter().zip(two.iter())) {
                    let bad = cross_kernel_far(dt, a, b, d).len();
                    assert_eq!(
                        bad,
                        0,
                        "{what}: {part}: {bad} of {} past cross_kernel_far's bound of the two ops'",
                        a.len()
                    );
                }
                let qkv = cpu::quant_matmul_fused(&xv, l, k, &bytes, f, width, Some((&gv[..], 1e-5)), false, None);
                let (mut kw, mut vw) = (kcv.clone(), vcv.clone());
                let want_q = cpu_movement::rope_qkv_to_cache_scaled(
                    &qkv,
                    l,
                    h,
                    &mut kw,
                    &mut vw,
                    hkv,
                    cap,
                    d,
                    pos,
                    500000.0,
                    Some(&ffv),
                );
                let scale = error_scale(&xv, l, k, &bytes, f, width, Some(&gv[..]), false);
                let max_scale = scale.iter().fold(0.0f64, |a, &b| a.max(b));
                let rel = if dt == DType::F32 { 4e-5 } else { 2e-3 };
                for (i, (got, want)) in one[0].iter().zip(&want_q).enumerate() {
                    assert!((got - want).abs() <= rel * (2.0 + 2.0 * max_scale), "{what}: q[{i}] {got} vs {want}");
                }
                for (i, (got, want)) in one[1].iter().zip(&kw).enumerate() {
                    assert!((got - want).abs() <= rel * (2.0 + 2.0 * max_scale), "{what}: k[{i}] {got} vs {want}");
                }
            }
        }
    }
    // Factors of the wrong length: a ShapeMismatch, nothing written.
    let (w, _) = quant_weights(&mut rng, QuantFormat::Q8_0, 4 * 8, 32);
    let x = ops::full(&[1, 32], DType::F32, 0.0).unwrap();
    let kc = ops::full(&[1, 4, 8], DType::F32, 0.0).unwrap();
    let vc = ops::full(&[1, 4, 8], DType::F32, 0.0).unwrap();
    let ff = host(DType::F32, &[1.0; 3], &[3]);
    let e = ops::quant_qkv_rope_to_cache_scaled(&x, &w, QuantFormat::Q8_0, None, &kc, &vc, 2, 0, 1e4, Some(&ff))
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::ShapeMismatch, "{e}");
}

/// `quant_qkv_stack_rope_to_cache`: a QKV stack held in tensors of several formats (a Q4_K_M
/// layer's Q4_K Q and K with its Q6_K V; the wide kernel's Q8_0 and Q4_0; three parts), one
/// dispatch per part with RoPE and the cache write in each epilogue, gives within cross_kernel_far's bound the
/// products side by side + `rope_qkv_to_cache` (the ops it replaces), and the CPU reference's
/// values (per-part products, then the rotation); parts that are not whole heads, or that do
/// not add up to the heads, are refused.
#[test]
fn quant_qkv_stack_rope_to_cache_equals_the_ops() {
    use QuantFormat::{Q4_0, Q4_K, Q6_K, Q8_0};
    poison();
    let mut rng = Rng::new(48);
    // (parts as (format, heads), heads, kv heads, D, K, L, cap, pos)
    #[allow(clippy::type_complexity)]
    let cases: &[(&[(QuantFormat, usize)], usize, usize, usize, usize, usize, usize, usize)] = &[
        (&[(Q4_K, 6), (Q6_K, 2)], 4, 2, 64, 512, 1, 9, 5),
        (&[(Q4_K, 6), (Q6_K, 2)], 4, 2, 64, 256, 3, 8, 2),
        (&[(Q8_0, 8), (Q4_0, 4)], 8, 2, 64, 512, 1, 4, 0),
        (&[(Q4_K, 2), (Q6_K, 1), (Q4_K, 1)], 2, 1, 32, 256, 2, 6, 4),
    ];
    for dt in float_dtypes() {
        for &(spec, h, hkv, d, k, l, cap, pos) in cases {
            let parts: Vec<(Tensor, Vec<u8>, QuantFormat, usize)> = spec
                .iter()
                .map(|&(f, heads)| {
                    let (w, bytes) = quant_weights(&mut rng, f, heads * d, k);
                    (w, bytes, f, heads * d)
                })
                .collect();
            let rows: Vec<ops::QuantRows> =
                parts.iter().map(|(w, _, f, n)| ops::QuantRows { w, format: *f, rows: *n }).collect();
            let (x, xv) = rand_tensor(&mut rng, &[l, k], dt, -2.0, 2.0);
            let (g, gv) = rand_tensor(&mut rng, &[k], dt, 0.5, 1.5);
            let (_, kcv) = rand_tensor(&mut rng, &[hkv, cap, d], dt, -1.0, 1.0);
            let (_, vcv) = rand_tensor(&mut rng, &[hkv, cap, d], dt, -1.0, 1.0);
            let run = |fused: bool| {
                let kc = host(dt, &kcv, &[hkv, cap, d]);
                let vc = host(dt, &vcv, &[hkv, cap, d]);
                let q = ops::with_decode_fusion(fused, || {
                    ops::quant_qkv_stack_rope_to_cache(&x, &rows, Some((&g, 1e-5)), &kc, &vc, h, pos, 1e4, None)
                })
                .unwrap();
                assert_eq!(q.shape(), [h, l, d]);
                [q.to_f64_vec().unwrap(), kc.to_f64_vec().unwrap(), vc.to_f64_vec().unwrap()]
            };
            let (one, two) = (run(true), run(false));
            let what = format!("{dt} {spec:?} H {h} Hkv {hkv} D {d} K {k} L {l}");
            for (part, (a, b)) in ["queries", "k cache", "v cache"].iter().zip(one.iter().zip(two.iter())) {
                let bad = cross_kernel_far(dt, a, b, d).len();
                assert_eq!(bad, 0, "{what}: {part}: {bad} of {} past cross_kernel_far's bound of the ops'", a.len());
            }
            // The reference: each part's product, side by side per row of x, then the rotation.
            let width = (h + 2 * hkv) * d;
            let mut qkv = vec![0.0; l * width];
            let mut scale = 0.0f64;
            let mut col = 0;
            for (_, bytes, f, n) in &parts {
                let y = cpu::quant_matmul_fused(&xv, l, k, bytes, *f, *n, Some((&gv[..], 1e-5)), false, None);
                for r in 0..l {
                    qkv[r * width + col..r * width + col + n].copy_from_slice(&y[r * n..(r + 1) * n]);
                }
                let e = error_scale(&xv, l, k, bytes, *f, *n, Some(&gv[..]), false);
                scale = e.iter().fold(scale, |a, &b| a.max(b));
                col += n;
            }
            let (mut kw, mut vw) = (kcv.clone(), vcv.clone());
            let want_q = cpu_movement::rope_qkv_to_cache(&qkv, l, h, &mut kw, &mut vw, hkv, cap, d, pos, 1e4);
            let bound = if dt == DType::F32 { 4e-5 } else { 2e-3 } * (2.0 + 2.0 * scale);
            for (name, got, want) in [("q", &one[0], &want_q), ("k", &one[1], &kw), ("v", &one[2], &vw)] {
                let far = got.iter().zip(want.iter()).position(|(a, b)| (a - b).abs() > bound);
                assert!(far.is_none(), "{what}: {name}[{far:?}] past {bound} of the reference");
            }
        }
    }
    // Refused: a part of half a head; parts that do not add up to the heads.
    let (w, _) = quant_weights(&mut rng, Q8_0, 12 * 8, 32);
    let (wa, _) = quant_weights(&mut rng, Q8_0, 4, 32);
    let (wb, _) = quant_weights(&mut rng, Q8_0, 12, 32);
    let x = ops::full(&[1, 32], DType::F32, 0.0).unwrap();
    let kc = ops::full(&[1, 4, 8], DType::F32, 0.0).unwrap();
    let vc = ops::full(&[1, 4, 8], DType::F32, 0.0).unwrap();
    let half = [ops::QuantRows { w: &wa, format: Q8_0, rows: 4 }, ops::QuantRows { w: &wb, format: Q8_0, rows: 12 }];
    let e = ops::quant_qkv_stack_rope_to_cache(&x, &half, None, &kc, &vc, 0, 0, 1e4, None).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    let more = [ops::QuantRows { w: &w, format: Q8_0, rows: 96 }];
    let e = ops::quant_qkv_stack_rope_to_cache(&x, &more, None, &kc, &vc, 2, 0, 1e4, None).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ShapeMismatch, "{e}");
}

#[test]
fn quant_qkv_rope_to_cache_refuses_bad_operands() {
    let mut rng = Rng::new(47);
    let (w, _) = quant_weights(&mut rng, QuantFormat::Q8_0, 5 * 4, 32);
    let x = Tensor::from_slice(&[0.5f32; 2 * 32], &[2, 32]).unwrap();
    let kc = Tensor::from_slice(&[0.0f32; 8], &[1, 2, 4]).unwrap();
    let vc = Tensor::from_slice(&[0.0f32; 8], &[1, 2, 4]).unwrap();
    let code = |r: kiln_core::Result<Tensor>| r.unwrap_err().code();
    let f = QuantFormat::Q8_0;
    let call = |x: &Tensor, kc: &Tensor, vc: &Tensor, h: usize, pos: usize, base: f32| {
        ops::quant_qkv_rope_to_cache(x, &w, f, None, kc, vc, h, pos, base)
    };
    // 3 heads + 2 kv heads of 4 = 20 rows; rows 1..3 overflow a cache of 2.
    assert_eq!(code(call(&x, &kc, &vc, 3, 1, 1e4)), ErrorCode::InvalidArgument);
    assert_eq!(code(call(&x, &kc, &vc, 2, 0, 1e4)), ErrorCode::ShapeMismatch);
    assert_eq!(code(call(&x, &kc, &kc, 3, 0, 1e4)), ErrorCode::InvalidArgument);
    assert_eq!(code(call(&x, &kc, &vc, 3, 0, f32::NAN)), ErrorCode::InvalidArgument);
    assert_eq!(code(call(&x.reshape(&[2, 1, 32]).unwrap(), &kc, &vc, 3, 0, 1e4)), ErrorCode::ShapeMismatch);
    let ki = Tensor::from_slice(&[0i32; 8], &[1, 2, 4]).unwrap();
    assert_eq!(code(call(&x, &ki, &vc, 3, 0, 1e4)), ErrorCode::DTypeMismatch);
    assert!(call(&x, &kc, &vc, 3, 0, 1e4).is_ok());
}

/// Batched decode's `rope_qkv_rows_to_cache` (row b at its own position, into slab b of
/// [B, Hkv, Lmax, D] caches) gives, row by row, the bits of `rope_qkv_to_cache` on that row and
/// that sequence's own [Hkv, Lmax, D] caches, every other cache row kept; positions past the
/// caches and mismatched shapes are refused.
#[test]
fn rope_qkv_rows_to_cache_equals_one_sequence_at_a_time() {
    poison();
    let mut rng = Rng::new(46);
    // (heads, kv heads, D, cap, positions): ragged positions, the last row, a repeated one.
    let cases: &[(usize, usize, usize, usize, &[usize])] =
        &[(3, 1, 64, 9, &[0, 8, 3]), (9, 3, 64, 40, &[37, 0, 39, 12, 12]), (2, 2, 6, 8, &[5]), (4, 1, 2, 4, &[])];
    for dt in float_dtypes() {
        for &(h, hkv, d, cap, positions) in cases {
            let b = positions.len();
            let width = (h + 2 * hkv) * d;
            let (qkv, _) = rand_tensor(&mut rng, &[b, width], dt, -2.0, 2.0);
            let (kc, _) = rand_tensor(&mut rng, &[b, hkv, cap, d], dt, -1.0, 1.0);
            let (vc, _) = rand_tensor(&mut rng, &[b, hkv, cap, d], dt, -1.0, 1.0);
            // Each sequence's own caches, copied before the batched write.
            let slab = |t: &Tensor, i: usize| ops::slice(t, 0, i as isize, i as isize + 1, 1).unwrap();
            let own: Vec<(Tensor, Tensor)> = (0..b)
                .map(|i| {
                    let one = |t: &Tensor| {
                        ops::copy(&slab(t, i)).unwrap().reshape(&[hkv as isize, cap as isize, d as isize]).unwrap()
                    };
                    (one(&kc), one(&vc))
                })
                .collect();
            let q = ops::rope_qkv_rows_to_cache(&qkv, &kc, &vc, h, positions, 10000.0).unwrap();
            assert_eq!(q.shape(), [b, h, d]);
            let what = format!("{dt} H {h} Hkv {hkv} D {d} cap {cap} positions {positions:?}");
            for (i, (k1, v1)) in own.iter().enumerate() {
                let q1 = ops::rope_qkv_to_cache(&slab(&qkv, i), k1, v1, h, positions[i], 10000.0).unwrap();
                assert_eq!(slab(&q, i).to_bytes().unwrap(), q1.to_bytes().unwrap(), "{what}: q of row {i}");
                assert_eq!(slab(&kc, i).to_bytes().unwrap(), k1.to_bytes().unwrap(), "{what}: k cache {i}");
                assert_eq!(slab(&vc, i).to_bytes().unwrap(), v1.to_bytes().unwrap(), "{what}: v cache {i}");
            }
        }
    }
    let qkv = Tensor::from_slice(&[0.0f32; 2 * 20], &[2, 20]).unwrap();
    let kc = Tensor::from_slice(&[0.0f32; 16], &[2, 1, 2, 4]).unwrap();
    let vc = Tensor::from_slice(&[0.0f32; 16], &[2, 1, 2, 4]).unwrap();
    let code = |r: kiln_core::Result<Tensor>| r.unwrap_err().code();
    assert!(ops::rope_qkv_rows_to_cache(&qkv, &kc, &vc, 3, &[1, 0], 1e4).is_ok());
    // Position 2 is past a cache of 2 rows; 3 positions for 2 slabs; 2 heads make 16 wide.
    assert_eq!(code(ops::rope_qkv_rows_to_cache(&qkv, &kc, &vc, 3, &[0, 2], 1e4)), ErrorCode::InvalidArgument);
    assert_eq!(code(ops::rope_qkv_rows_to_cache(&qkv, &kc, &vc, 3, &[0, 1, 1], 1e4)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::rope_qkv_rows_to_cache(&qkv, &kc, &vc, 2, &[0, 1], 1e4)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::rope_qkv_rows_to_cache(&qkv, &kc, &kc, 3, &[0, 1], 1e4)), ErrorCode::InvalidArgument);
    assert_eq!(code(ops::rope_qkv_rows_to_cache(&qkv, &kc, &vc, 3, &[0, 1], f32::NAN)), ErrorCode::InvalidArgument);
    let k3 = Tensor::from_slice(&[0.0f32; 16], &[2, 2, 4]).unwrap();
    assert_eq!(code(ops::rope_qkv_rows_to_cache(&qkv, &k3, &k3, 3, &[0, 1], 1e4)), ErrorCode::ShapeMismatch);
}

/// `attention_prefix_masked` with a -inf mask past each batch row's own length (batched decode)
/// gives each row what `attention_prefix` gives over that row's length alone (the split over
/// keys differs: within rounding), including a row of one key beside a row of them all.
#[test]
fn attention_prefix_masked_gives_each_row_its_own_length() {
    poison();
    let mut rng = Rng::new(47);
    // (kv heads, group, Lmax, D, lengths)
    let cases: &[(usize, usize, usize, usize, &[usize])] =
        &[(3, 3, 50, 64, &[37, 1, 50, 20]), (1, 2, 9, 12, &[9]), (2, 1, 300, 64, &[300, 7, 129])];
    for dt in float_dtypes() {
        for &(hkv, grp, lmax, d, lens) in cases {
            let b = lens.len();
            let span = *lens.iter().max().unwrap();
            let (q, _) = rand_tensor(&mut rng, &[b, hkv, grp, 1, d], dt, -2.0, 2.0);
            let (k, _) = rand_tensor(&mut rng, &[b, hkv, 1, lmax, d], dt, -2.0, 2.0);
            let (v, _) = rand_tensor(&mut rng, &[b, hkv, 1, lmax, d], dt, -2.0, 2.0);
            let mask: Vec<f64> = lens
                .iter()
                .flat_map(|&l| (0..span).map(move |j| if j < l { 0.0 } else { f64::NEG_INFINITY }))
                .collect();
            let mask = host(dt, &mask, &[b, 1, 1, 1, span]);
            let got = ops::attention_prefix_masked(&q, &k, &v, Some(&mask), span, false, None).unwrap();
            assert_eq!(got.shape(), [b, hkv, grp, 1, d]);
            let (atol, rtol) = if dt == DType::F32 { (1e-5, 1e-4) } else { (4e-3, 4e-3) };
            for (i, &len) in lens.iter().enumerate() {
                let row = |t: &Tensor| ops::slice(t, 0, i as isize, i as isize + 1, 1).unwrap();
                let want = ops::attention_prefix(&row(&q), &row(&k), &row(&v), len, false, None).unwrap();
                let what = format!("{dt} Hkv {hkv} group {grp} Lmax {lmax} D {d} lengths {lens:?} row {i}");
                assert_close(&what, &row(&got).to_f64_vec().unwrap(), &want.to_f64_vec().unwrap(), atol, rtol);
            }
        }
    }
}
