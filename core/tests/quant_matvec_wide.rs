//! The wide decode matrix-vector kernel (`shaders/quant_matvec_wide.wgsl`) against the strided
//! one it replaces for large matrices (bit for bit: it computes the same sums in the same
//! order) and against the f64 CPU reference, on ragged shapes, every fusion, both dtypes, and
//! NaN / inf in x and in the blocks' scales.
//!
//! Reference tolerance: |got - want| <= (K + 2) 2^-24 Σ|x w| (an f32 sum of K products in any
//! order), through SwiGLU as decode_ops.rs bounds it, plus f16's rounding of the result.

mod common;
use common::*;
use kiln_core::ops::quant_matvec_wide::applies;
use kiln_core::ops::{self, MatvecKernel, QuantFormat, QuantFusion};
use kiln_core::reference::quant as cpu;
use kiln_core::{DType, Tensor};

const FORMATS: [QuantFormat; 3] = [QuantFormat::Q4_0, QuantFormat::Q4_1, QuantFormat::Q8_0];

struct Case<'a> {
    f: QuantFormat,
    k: usize,
    n: usize,
    bytes: &'a [u8],
    w: &'a Tensor,
}

/// Runs `fusion` on both kernels; asserts the wide one ran, that the two agree bit for bit and
/// that both are within the tolerance of the f64 reference.
#[allow(clippy::too_many_arguments)]
fn check(
    c: &Case,
    x: &Tensor,
    xv: &[f64],
    norm: Option<(&Tensor, &[f64])>,
    swiglu: bool,
    res: Option<(&Tensor, &[f64])>,
    what: &str,
) {
    let (f, k, n) = (c.f, c.k, c.n);
    let dev = kiln_core::device().unwrap();
    assert!(applies(&dev, 1, k, n, swiglu), "{what}: the wide kernel does not apply");
    let fusion = QuantFusion { rms_norm: norm.map(|(g, _)| (g, 1e-5)), swiglu, residual: res.map(|(r, _)| r) };
    let wide = ops::quant_matmul_fused_kernel(x, c.w, f, n, fusion, MatvecKernel::Wide).unwrap();
    let strided = ops::quant_matmul_fused_kernel(x, c.w, f, n, fusion, MatvecKernel::Strided).unwrap();
    assert_eq!(wide.shape(), [1, n]);
    assert_eq!(wide.dtype(), x.dtype());
    let (wb, sb) = (wide.to_bytes().unwrap(), strided.to_bytes().unwrap());
    if wb != sb {
        // Equal but for NaN payloads (which NaN an inf * 0 or inf - inf makes is the driver's).
        let (a, b) = (wide.to_f64_vec().unwrap(), strided.to_f64_vec().unwrap());
        let same = |i: usize| a[i].to_bits() == b[i].to_bits() || (a[i].is_nan() && b[i].is_nan());
        if let Some(i) = (0..n).find(|&i| !same(i)) {
            panic!("{what}: wide and strided kernels differ, first at {i}: {} vs {}", a[i], b[i]);
        }
    }
    let want =
        cpu::quant_matmul_fused(xv, 1, k, c.bytes, f, n, norm.map(|(_, g)| (g, 1e-5)), swiglu, res.map(|(_, r)| r));
    // The error scale of each output (decode_ops.rs's error_scale).
    let mut xn = xv.to_vec();
    if let Some((_, g)) = norm {
        let inv = 1.0 / (xn.iter().map(|a| a * a).sum::<f64>() / k as f64 + 1e-5).sqrt();
        xn.iter_mut().enumerate().for_each(|(j, a)| *a *= inv * g[j]);
    }
    let rows = if swiglu { 2 * n } else { n };
    let y = cpu::quant_matmul(&xn, 1, k, c.bytes, f, rows);
    let abs = cpu::quant_matmul_abs(&xn, 1, k, c.bytes, f, rows);
    let got = wide.to_f64_vec().unwrap();
    let eps = (k as f64 + 2.0) * 2f64.powi(-24) + 1e-6; // + 1e-6: the inverse RMS's rounding
    for i in 0..n {
        let scale = if swiglu {
            let silu = (y[i] / (1.0 + (-y[i]).exp())).abs();
            (abs[i] + y[i].abs()) * (y[n + i].abs() + 1.0) + silu * abs[n + i]
        } else {
            abs[i]
        };
        let mut tol = 2.0 * eps * scale;
        // The residual add rounds once more (f16: the product is rounded before it too).
        let r = res.map_or(0.0, |(_, r)| r[i].abs());
        if x.dtype() == DType::F16 {
            tol += 2f64.powi(-10) * (want[i].abs() + r + scale) + 2f64.powi(-24);
        } else {
            tol += 2f64.powi(-23) * r;
        }
        let (g, w) = (got[i], want[i]);
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol;
        assert!(ok, "{what}: element {i}: got {g}, reference {w} (tolerance {tol})");
    }
}

fn weights(rng: &mut Rng, f: QuantFormat, rows: usize, k: usize) -> (Tensor, Vec<u8>) {
    let w: Vec<f32> = (0..rows * k).map(|_| rng.uniform(-1.5, 1.5) as f32).collect();
    let bytes = cpu::quantize(&w, f);
    (ops::quant_from_bytes(&kiln_core::device().unwrap(), &bytes, f, rows, k).unwrap(), bytes)
}

/// Ragged K (1, 2 and 257 blocks: rows start at odd halfwords for Q4_0 / Q8_0) and N (one row,
/// a last workgroup part-filled either way), every fusion, both dtypes.
#[test]
fn wide_matches_strided_and_reference() {
    poison();
    let dev = kiln_core::device().unwrap();
    let mut rng = Rng::new(291);
    let big_k = 8192 + 32;
    let fits_big = applies(&dev, 1, big_k, 257, true);
    if !fits_big {
        println!(
            "K = {big_k} does not fit this adapter's {} bytes of workgroup memory: skipped",
            dev.limits().max_compute_workgroup_storage_size
        );
    }
    // 6496 = 203 blocks, odd and as long as lavapipe's 32 KiB of workgroup memory allows.
    let shapes: &[(usize, usize)] = &[(32, 1), (32, 257), (64, 255), (576, 300), (6496, 257), (big_k, 257)];
    for f in FORMATS {
        for &(k, n) in shapes {
            if k == big_k && !fits_big {
                continue;
            }
            // Both halves of a SwiGLU matrix; the plain product uses the first n rows.
            let (w, bytes) = weights(&mut rng, f, 2 * n, k);
            let plain_bytes = &bytes[..n * f.row_bytes(k).unwrap()];
            let plain_w = ops::quant_from_bytes(&dev, plain_bytes, f, n, k).unwrap();
            for dt in float_dtypes() {
                let (x, xv) = rand_tensor(&mut rng, &[1, k], dt, -2.0, 2.0);
                let (g, gv) = rand_tensor(&mut rng, &[k], dt, 0.5, 1.5);
                let (r, rv) = rand_tensor(&mut rng, &[1, n], dt, -3.0, 3.0);
                for variant in 0..8 {
                    let (norm, swiglu, res) = (variant & 1 != 0, variant & 2 != 0, variant & 4 != 0);
                    let c = if swiglu {
                        Case { f, k, n, bytes: &bytes, w: &w }
                    } else {
                        Case { f, k, n, bytes: plain_bytes, w: &plain_w }
                    };
                    let what = format!("{f} {dt} k {k} n {n} norm {norm} swiglu {swiglu} res {res}");
                    check(&c, &x, &xv, norm.then_some((&g, &gv[..])), swiglu, res.then_some((&r, &rv[..])), &what);
                }
            }
        }
    }
}

/// NaN and ±inf in x, and blocks whose f16 scale (Q4_1: also its offset) is NaN or ±inf: the
/// same NaN / inf outputs as the reference, and the same bits as the strided kernel.
#[test]
fn wide_specials_in_x_and_scales() {
    let dev = kiln_core::device().unwrap();
    let mut rng = Rng::new(292);
    let (k, n) = (96usize, 9usize);
    for f in FORMATS {
        let (_, mut bytes) = weights(&mut rng, f, 2 * n, k);
        let rb = f.row_bytes(k).unwrap();
        let bb = f.block_bytes();
        // Row 1 block 0: d = +inf; row 2 block 2: d = NaN; row 3 block 1: d = -inf; row 4
        // block 1: d = 0 (against an infinite x below: NaN); row n + 1 (SwiGLU's up half)
        // block 0: d = NaN; Q4_1's row 5 block 0: m = inf.
        for (row, blk, bits) in [(1, 0, 0x7c00u16), (2, 2, 0x7e00), (3, 1, 0xfc00), (4, 1, 0), (n + 1, 0, 0x7e01)] {
            let o = row * rb + blk * bb;
            bytes[o..o + 2].copy_from_slice(&bits.to_le_bytes());
        }
        if f == QuantFormat::Q4_1 {
            let o = 5 * rb;
            bytes[o + 2..o + 4].copy_from_slice(&0x7c00u16.to_le_bytes());
        }
        let w = ops::quant_from_bytes(&dev, &bytes, f, 2 * n, k).unwrap();
        let plain = &bytes[..n * rb];
        let plain_w = ops::quant_from_bytes(&dev, plain, f, n, k).unwrap();
        for dt in float_dtypes() {
            for xcase in 0..3 {
                let mut xv: Vec<f64> = (0..k).map(|_| rng.uniform(-1.0, 1.0)).collect();
                match xcase {
                    0 => {}
                    1 => xv[40] = f64::INFINITY,
                    _ => {
                        xv[3] = f64::NAN;
                        xv[70] = f64::NEG_INFINITY;
                    }
                }
                let x = Tensor::from_bytes(&kiln_core::dtype::f64_to_bytes(dt, &xv), &[1, k], dt).unwrap();
                let xv: Vec<f64> = x.to_f64_vec().unwrap();
                let (g, gv) = rand_tensor(&mut rng, &[k], dt, 0.5, 1.5);
                let (r, rv) = rand_tensor(&mut rng, &[1, n], dt, -3.0, 3.0);
                for variant in 0..8 {
                    let (norm, swiglu, res) = (variant & 1 != 0, variant & 2 != 0, variant & 4 != 0);
                    let c = if swiglu {
                        Case { f, k, n, bytes: &bytes, w: &w }
                    } else {
                        Case { f, k, n, bytes: plain, w: &plain_w }
                    };
                    let what = format!("{f} {dt} x case {xcase} norm {norm} swiglu {swiglu} res {res}");
                    check(&c, &x, &xv, norm.then_some((&g, &gv[..])), swiglu, res.then_some((&r, &rv[..])), &what);
                }
            }
        }
    }
}

/// `Auto` picks the wide kernel for one row of x times a large W (its results are then the
/// strided kernel's bits), and the strided one for several rows of x.
#[test]
fn auto_selection_by_shape() {
    let dev = kiln_core::device().unwrap();
    let mut rng = Rng::new(293);
    let f = QuantFormat::Q4_0;
    let (k, n) = (512usize, 520usize);
    assert!(n >= ops::quant_matvec_wide::WIDE_MIN_ROWS && k >= ops::quant_matvec_wide::WIDE_MIN_K);
    let (w, _) = weights(&mut rng, f, n, k);
    for m in [1usize, 2] {
        let (x, _) = rand_tensor(&mut rng, &[m, k], DType::F32, -1.0, 1.0);
        let auto = ops::quant_matmul(&x, &w, f, n).unwrap().to_bytes().unwrap();
        let f2 = QuantFusion::default();
        let strided = ops::quant_matmul_fused_kernel(&x, &w, f, n, f2, MatvecKernel::Strided).unwrap();
        assert_eq!(auto, strided.to_bytes().unwrap(), "m = {m}");
        let wide = ops::quant_matmul_fused_kernel(&x, &w, f, n, f2, MatvecKernel::Wide).unwrap();
        assert_eq!(auto, wide.to_bytes().unwrap(), "m = {m}");
    }
    assert!(applies(&dev, 1, k, n, false) && !applies(&dev, 2, k, n, false) && !applies(&dev, 1, 0, n, false));
}
