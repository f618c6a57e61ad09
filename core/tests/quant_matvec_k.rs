//! The K formats' fast paths against the f64 reference over ggml's dequantized weights
//! (kiln_core::reference::quant, whose K decoders quant_k.rs holds bit-equal to ggml's C):
//! - decode's matrix-vector kernel (`shaders/quant_matvec_k.wgsl`: Q4_K, Q5_K, Q6_K) for 1..=8
//!   rows of x, every fusion (norm, SwiGLU, residual), f32 and f16 x, K of one super-block and
//!   of odd numbers of them (Q6_K rows then start at odd halfwords), N odd and of one row;
//! - the many-row product (`quant_coop.wgsl` where the adapter has cooperative matrices, the
//!   tiled kernel elsewhere: lavapipe has none) for 9, 16, 17 and 130 rows of x and N not a
//!   multiple of any tile, every format;
//! - NaN, ±inf and huge values in x, infinite and NaN scales in the blocks;
//! - their WGSL through naga for every variant the launches can pick.
//!
//! Tolerance of an f32 sum of K products in any order: |got - want| <= (K + 2) 2^-24 Σ|x w|
//! (through SwiGLU as quant_matvec_wide.rs bounds it), plus f16's rounding of the result; on
//! cooperative matrices quant_coop.rs's f16 bound.

mod common;
use common::*;
use kiln_core::ops::quant_matvec_k::{applies, quant_matvec_k_source_for_tests};
use kiln_core::ops::{self, MatvecKernel, ProductKernel, QuantFormat, QuantFusion};
use kiln_core::reference::quant as cpu;
use kiln_core::{DType, Tensor};

const FAST: [QuantFormat; 3] = [QuantFormat::Q4_K, QuantFormat::Q5_K, QuantFormat::Q6_K];

/// Weights of mixed kinds: wide ranges, one-signed rows (Q4_K / Q5_K mins), sparse zeros, and
/// magnitudes varying per 32-value group (every sub-block scale differs).
fn weights(rng: &mut Rng, rows: usize, cols: usize) -> Vec<f32> {
    (0..rows * cols)
        .map(|i| match (i / cols) % 4 {
            0 => rng.uniform(-1.0, 1.0) as f32,
            1 => rng.uniform(0.1, 2.0) as f32,
            2 if (i / 16) % 3 == 0 => 0.0,
            _ => (rng.uniform(-1.0, 1.0) * 2f64.powi((i / 32 % 7) as i32 - 3)) as f32,
        })
        .collect()
}

struct Case<'a> {
    f: QuantFormat,
    m: usize,
    k: usize,
    n: usize,
    bytes: &'a [u8],
}

/// Checks `got` [m, n] against the fused reference; `f16_products` for cooperative matrices.
#[allow(clippy::too_many_arguments)]
#[track_caller]
fn check(
    c: &Case,
    xv: &[f64],
    norm: Option<&[f64]>,
    swiglu: bool,
    res: Option<&[f64]>,
    got: &[f64],
    dtype: DType,
    f16_products: bool,
    what: &str,
) {
    let (m, k, n) = (c.m, c.k, c.n);
    let want = cpu::quant_matmul_fused(xv, m, k, c.bytes, c.f, n, norm.map(|g| (g, 1e-5)), swiglu, res);
    assert_eq!(got.len(), m * n, "{what}: length");
    let mut xn = xv.to_vec();
    if let Some(g) = norm {
        for row in xn.chunks_mut(k) {
            let inv = 1.0 / (row.iter().map(|a| a * a).sum::<f64>() / k as f64 + 1e-5).sqrt();
            row.iter_mut().enumerate().for_each(|(j, a)| *a *= inv * g[j]);
        }
    }
    let rows = if swiglu { 2 * n } else { n };
    let y = cpu::quant_matmul(&xn, m, k, c.bytes, c.f, rows);
    let abs = cpu::quant_matmul_abs(&xn, m, k, c.bytes, c.f, rows);
    let mut eps = (k as f64 + 2.0) * 2f64.powi(-24) + 1e-6; // + 1e-6: the inverse RMS's rounding
    if f16_products {
        eps += 2f64.powi(-10) + 2f64.powi(-21) + 1e-6;
    }
    for i in 0..m {
        for j in 0..n {
            let (e, yr) = (i * n + j, i * rows);
            let scale = if swiglu {
                let g = y[yr + j];
                let silu = (g / (1.0 + (-g).exp())).abs();
                (abs[yr + j] + g.abs()) * (y[yr + n + j].abs() + 1.0) + silu * abs[yr + n + j]
            } else {
                abs[yr + j]
            };
            let mut tol = 2.0 * eps * scale;
            let r = res.map_or(0.0, |r| r[e].abs());
            if dtype == DType::F16 {
                tol += 2f64.powi(-10) * (want[e].abs() + r + scale) + 2f64.powi(-24);
            } else {
                tol += 2f64.powi(-23) * r;
            }
            let (g, w) = (got[e], want[e]);
            let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol;
            assert!(ok, "{what}: y[{i}, {j}]: got {g}, reference {w} (tolerance {tol})");
        }
    }
}

/// The K matvec kernel on every fusion, rows of x 1..=8, both dtypes, K of 1, 3 and 8
/// super-blocks (one lane group per slot, and several), N of 1 and odd (a slot's second row past
/// N); it must apply (it is what Auto runs), and the strided kernel agrees within the bound.
#[test]
fn k_matvec_matches_reference() {
    poison();
    let dev = kiln_core::device().unwrap();
    let mut rng = Rng::new(331);
    for f in FAST {
        for &(k, n) in &[(256usize, 1usize), (768, 37), (2048, 33)] {
            let wv = weights(&mut rng, 2 * n, k);
            let bytes = cpu::quantize(&wv, f);
            let w = ops::quant_from_bytes(&dev, &bytes, f, 2 * n, k).unwrap();
            let plain_bytes = &bytes[..n * f.row_bytes(k).unwrap()];
            let plain_w = ops::quant_from_bytes(&dev, plain_bytes, f, n, k).unwrap();
            for &m in &[1usize, 2, 5, 8] {
                for dt in float_dtypes() {
                    if dt == DType::F16 && m != 5 {
                        continue;
                    }
                    let (x, xv) = rand_tensor(&mut rng, &[m, k], dt, -2.0, 2.0);
                    let (g, gv) = rand_tensor(&mut rng, &[k], dt, 0.5, 1.5);
                    let (r, rv) = rand_tensor(&mut rng, &[m, n], dt, -3.0, 3.0);
                    for variant in 0..8 {
                        let (norm, swiglu, res) = (variant & 1 != 0, variant & 2 != 0, variant & 4 != 0);
                        // Eight variants at every shape are slow on lavapipe: all of them at one
                        // row of x, the plain and the full fusion elsewhere.
                        if m != 1 && variant != 0 && variant != 7 {
                            continue;
                        }
                        assert!(
                            applies(&dev, f, m, k, n, swiglu),
                            "{f} m={m} k={k} n={n}: the K kernel does not apply"
                        );
                        let (wt, wb) = if swiglu { (&w, &bytes[..]) } else { (&plain_w, plain_bytes) };
                        let fusion =
                            QuantFusion { rms_norm: norm.then_some((&g, 1e-5)), swiglu, residual: res.then_some(&r) };
                        let c = Case { f, m, k, n, bytes: wb };
                        let what = format!("{f} {dt} m={m} k={k} n={n} norm {norm} swiglu {swiglu} res {res}");
                        // The strided kernel (quant_k.rs checks it too) at one row of x.
                        let kernels: &[MatvecKernel] =
                            if m == 1 { &[MatvecKernel::Auto, MatvecKernel::Strided] } else { &[MatvecKernel::Auto] };
                        for &kernel in kernels {
                            let y = ops::quant_matmul_fused_kernel(&x, wt, f, n, fusion, kernel).unwrap();
                            assert_eq!((y.shape(), y.dtype()), (&[m, n][..], dt), "{what}");
                            let got = y.to_f64_vec().unwrap();
                            check(
                                &c,
                                &xv,
                                norm.then_some(&gv[..]),
                                swiglu,
                                res.then_some(&rv[..]),
                                &got,
                                dt,
                                false,
                                &format!("{what} {kernel:?}"),
                            );
                        }
                    }
                }
            }
        }
    }
}

/// NaN, ±inf and huge (1e30) values in x, and blocks whose d is +inf, NaN, -inf or 0 (against
/// an infinite x: NaN), or (Q4_K / Q5_K) whose dmin is inf: the reference's NaN and infinities,
/// finite values within the bound.
#[test]
fn k_matvec_special_values() {
    let dev = kiln_core::device().unwrap();
    let mut rng = Rng::new(332);
    let (k, n) = (512usize, 9usize);
    for f in FAST {
        let mut bytes = cpu::quantize(&weights(&mut rng, n, k), f);
        let (rb, bb) = (f.row_bytes(k).unwrap(), f.block_bytes());
        // Where d sits: byte 0 (Q4_K, Q5_K: dmin at 2), byte 208 (Q6_K).
        let d_at = if f == QuantFormat::Q6_K { 208 } else { 0 };
        for (row, blk, bits) in [(1, 0, 0x7c00u16), (2, 1, 0x7e00), (3, 1, 0xfc00), (4, 0, 0)] {
            let o = row * rb + blk * bb + d_at;
            bytes[o..o + 2].copy_from_slice(&bits.to_le_bytes());
        }
        if f != QuantFormat::Q6_K {
            let o = 5 * rb + bb + 2;
            bytes[o..o + 2].copy_from_slice(&0x7c00u16.to_le_bytes());
        }
        let w = ops::quant_from_bytes(&dev, &bytes, f, n, k).unwrap();
        for xcase in 0..4 {
            let m = 2;
            let mut xv: Vec<f64> = (0..m * k).map(|_| rng.uniform(-1.0, 1.0)).collect();
            match xcase {
                0 => {}
                1 => xv[40] = f64::INFINITY,
                2 => {
                    xv[3] = f64::NAN;
                    xv[k + 300] = f64::NEG_INFINITY;
                }
                _ => {
                    xv[7] = 1e30;
                    xv[k + 260] = -1e30;
                }
            }
            let xs: Vec<f32> = xv.iter().map(|&v| v as f32).collect();
            let xv: Vec<f64> = xs.iter().map(|&v| v as f64).collect();
            let x = Tensor::from_slice(&xs, &[m, k]).unwrap();
            assert!(applies(&dev, f, m, k, n, false));
            let y = ops::quant_matmul(&x, &w, f, n).unwrap().to_f64_vec().unwrap();
            let c = Case { f, m, k, n, bytes: &bytes };
            check(&c, &xv, None, false, None, &y, DType::F32, false, &format!("{f} x case {xcase}"));
        }
    }
}

/// The many-row product (cooperative matrices where the adapter has them, else the tiled
/// kernel) and the decode kernels around the switch, through quant_matmul as models call it:
/// rows 1, 8, 9, 16, 17, 130, N = 37 (no tile's multiple), K of one super-block and of three,
/// every K and 5-bit format, with huge and infinite values in x.
#[test]
fn k_products_across_the_row_switch() {
    poison();
    let dev = kiln_core::device().unwrap();
    let coop = ops::coop_accumulator(&dev) == Some("f32");
    let mut rng = Rng::new(333);
    let n = 37usize;
    for f in QuantFormat::ALL {
        let ks: &[usize] = if f.block_len() == 256 { &[256, 768] } else { &[32, 96] };
        for &k in ks {
            let bytes = cpu::quantize(&weights(&mut rng, n, k), f);
            let w = ops::quant_from_bytes(&dev, &bytes, f, n, k).unwrap();
            for &m in &[1usize, 8, 9, 16, 17, 130] {
                // 130 rows once per format (the reference's f64 loops are the slow part).
                if m == 130 && k != ks[0] {
                    continue;
                }
                let uses_coop = ops::quant_product_uses_coop(&dev, f, m, n);
                assert_eq!(uses_coop, coop && m >= ops::COOP_MIN_ROWS, "{f} m={m}");
                let mut xv: Vec<f64> = (0..m * k).map(|_| rng.uniform(-2.0, 2.0)).collect();
                // Huge values (f16's largest on cooperative matrices, which round x to f16).
                xv[k / 2] = if uses_coop { 3e4 } else { 1e30 };
                if m > 1 {
                    xv[k + 1] = f64::INFINITY;
                }
                let xs: Vec<f32> = xv.iter().map(|&v| v as f32).collect();
                let x = Tensor::from_slice(&xs, &[m, k]).unwrap();
                let y = ops::quant_matmul(&x, &w, f, n).unwrap().to_f64_vec().unwrap();
                let c = Case { f, m, k, n, bytes: &bytes };
                check(&c, &xv, None, false, None, &y, DType::F32, uses_coop, &format!("{f} m={m} k={k}"));
                if m > 8 {
                    // The forced kernels agree with the reference too.
                    for kernel in [ProductKernel::Tiled, ProductKernel::Coop] {
                        let y = ops::quant_product(&x, &w, f, n, kernel).unwrap().to_f64_vec().unwrap();
                        let fp = kernel == ProductKernel::Coop && coop;
                        if fp && xv.iter().any(|v| v.abs() > 65504.0 && v.is_finite()) {
                            continue;
                        }
                        check(&c, &xv, None, false, None, &y, DType::F32, fp, &format!("{f} m={m} k={k} {kernel:?}"));
                    }
                }
            }
        }
    }
}

/// The K matvec kernel's WGSL for every format, dtype, lane-group count, rows of x and fusion
/// validates in naga and compiles to SPIR-V (shapes lavapipe's launches do not pick included).
#[test]
fn k_matvec_wgsl_validates() {
    for f in FAST {
        for ty in ["f32", "f16"] {
            for (i, &(wg, g, mt)) in
                [(256usize, 2usize, 1usize), (128, 8, 4), (64, 1, 3), (256, 4, 2)].iter().enumerate()
            {
                for variant in [0usize, 7, i + 1] {
                    let (norm, glu, res) = (variant & 1 != 0, variant & 2 != 0, variant & 4 != 0);
                    let src = quant_matvec_k_source_for_tests(f, ty, wg, g, mt, 2048, norm, glu, res);
                    let what = format!("{f} {ty} wg {wg} g {g} mt {mt} norm {norm} glu {glu} res {res}");
                    assert_wgsl_compiles(&what, &src);
                }
            }
        }
    }
}
