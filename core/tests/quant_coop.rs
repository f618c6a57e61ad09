//! The quantized product on cooperative matrices (`shaders/quant_coop.wgsl`, prefill) against the
//! f64 reference of kiln_core::reference::quant, on ragged shapes, every format, f32 and f16 x,
//! every tiling; its WGSL through naga for every variant (so lavapipe, which has no cooperative
//! matrices and runs the tiled kernel instead, still checks that it compiles).
//!
//! Tolerance: the kernel rounds x and the decoded weights to f16 (relative 2^-11 each, absolute
//! 2^-25 below f16's normal range), multiplies exactly and sums in f32 in the hardware's order:
//! |got - want| <= (2^-10 + 2^-21 + (K + 2) 2^-23) * sum_k |x_k w_k| + 2^-24 * (sum_k |x_k| +
//! sum_k |w_k|), plus f16's rounding of the result for f16 x. On a device without the kernel the
//! same calls run the tiled kernel, well inside this.

mod common;
use common::*;
use kiln_core::ops::{self, ProductKernel, QuantFormat};
use kiln_core::reference::quant as cpu;
use kiln_core::{DType, Tensor};

fn has_coop() -> bool {
    ops::coop_accumulator(&kiln_core::device().unwrap()) == Some("f32")
}

/// Weights with rows of one value, rows of zeros (d = 0), tiny values (f16 subnormals after
/// decoding), wide ranges and offsets.
fn weights(rng: &mut Rng, rows: usize, cols: usize) -> Vec<f32> {
    let mut w = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let v = rng.uniform(-2.0, 2.0) as f32;
        for _ in 0..cols {
            w.push(match r % 6 {
                0 => v,
                1 => 0.0,
                2 => rng.uniform(-1e-4, 1e-4) as f32,
                3 => rng.uniform(0.5, 3.0) as f32,
                _ => rng.uniform(-4.0, 4.0) as f32,
            });
        }
    }
    w
}

struct Case {
    wq: Vec<u8>,
    f: QuantFormat,
    m: usize,
    n: usize,
    k: usize,
}

/// The f64 reference y [m, n] and each element's tolerance (before the result's rounding).
fn reference(c: &Case, xv: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let (m, n, k) = (c.m, c.n, c.k);
    let want = cpu::quant_matmul(xv, m, k, &c.wq, c.f, n);
    let sxw = cpu::quant_matmul_abs(xv, m, k, &c.wq, c.f, n);
    let wd = cpu::dequantize(&c.wq, c.f, n, k);
    let sw: Vec<f64> = (0..n).map(|j| wd[j * k..(j + 1) * k].iter().map(|v| v.abs()).sum()).collect();
    let sx: Vec<f64> = (0..m).map(|i| xv[i * k..(i + 1) * k].iter().map(|v| v.abs()).sum()).collect();
    let rel = 2f64.powi(-10) + 2f64.powi(-21) + (k as f64 + 2.0) * 2f64.powi(-23);
    let tol = (0..m * n).map(|e| rel * sxw[e] + 2f64.powi(-24) * (sx[e / n] + sw[e % n])).collect();
    (want, tol)
}

#[track_caller]
fn check(what: &str, c: &Case, xv: &[f64], got: &[f64], dtype: DType) {
    let (m, n) = (c.m, c.n);
    let (want, tols) = reference(c, xv);
    assert_eq!(got.len(), m * n, "{what}: length");
    for i in 0..m {
        for j in 0..n {
            let (g, w) = (got[i * n + j], want[i * n + j]);
            let mut tol = tols[i * n + j];
            if dtype == DType::F16 {
                tol += 2f64.powi(-11) * w.abs() + 2f64.powi(-24);
            }
            let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol;
            assert!(ok, "{what}: y[{i}, {j}]: got {g}, reference {w} (tolerance {tol})");
        }
    }
}

/// Ragged shapes (m not a multiple of any tile, N odd multiples of 16 and odd, K an odd number
/// of blocks) through every tiling, format and x dtype.
#[test]
fn coop_product_matches_reference_on_ragged_shapes() {
    let coop = has_coop();
    let mut rng = Rng::new(301);
    let dev = kiln_core::device().unwrap();
    // (m, n, k)
    let shapes: &[(usize, usize, usize)] = if coop {
        &[(1, 1, 32), (17, 48, 32), (33, 80, 96), (100, 176, 160), (130, 333, 96), (257, 144, 576), (70, 1536, 64)]
    } else {
        &[(17, 48, 32), (33, 80, 96)] // lavapipe: the tiled kernel, once
    };
    let mut kernels = vec![ProductKernel::Coop, ProductKernel::Auto];
    if coop {
        kernels.extend(ops::quant_coop_tilings().map(ProductKernel::CoopTiles));
        kernels.push(ProductKernel::CoopTiles([2, 2, 2, 2, 2]));
        kernels.push(ProductKernel::CoopTiles([2, 2, 4, 4, 2]));
        // ... and one-band tilings (16-row tiles: batched decode's B = 16).
        for t in [
            [2, 4, 4, 2, 1],
            [4, 2, 2, 4, 1],
            [2, 2, 4, 2, 1],
            [4, 4, 2, 2, 1],
            [1, 2, 1, 1, 1],
            [1, 4, 1, 1, 2],
            [1, 2, 1, 1, 4],
            [1, 2, 1, 1, 2],
            [1, 2, 1, 2, 2],
            [1, 4, 1, 2, 2],
            [1, 2, 1, 2, 4],
        ] {
            kernels.push(ProductKernel::CoopTiles(t));
        }
    }
    // The K formats' rows are whole 256-value super-blocks: K of one super-block and of three
    // (Q6_K / Q3_K rows then start at odd halfwords), with the same m and n.
    let k_shapes: Vec<(usize, usize, usize)> =
        shapes.iter().enumerate().map(|(i, &(m, n, _))| (m, n, if i % 2 == 0 { 256 } else { 768 })).collect();
    for f in ops::QUANT_COOP_FORMATS {
        let shapes = if f.block_len() == 256 { &k_shapes[..] } else { shapes };
        for &(m, n, k) in shapes {
            let c = Case { wq: cpu::quantize(&weights(&mut rng, n, k), f), f, m, n, k };
            let wt = ops::quant_from_bytes(&dev, &c.wq, f, n, k).unwrap();
            for dt in float_dtypes() {
                let (x, xv) = rand_tensor(&mut rng, &[m, k], dt, -3.0, 3.0);
                for &kern in &kernels {
                    let y = ops::quant_product(&x, &wt, f, n, kern).unwrap();
                    assert_eq!((y.shape(), y.dtype()), (&[m, n][..], dt));
                    let what = format!("{f} {dt} m={m} n={n} k={k} {kern:?} (coop device: {coop})");
                    check(&what, &c, &xv, &y.to_f64_vec().unwrap(), dt);
                }
            }
        }
    }
}

/// The native tier's product (W dequantized to f16, NV cooperative matrix 2, B read through a
/// transposed view; ops/quant/product.rs) on ragged shapes against the same f64 reference and
/// tolerance: rows 1, 15, 17, 129, 4097 (no multiple of either tile), N multiples of 8 that are
/// not of 128 or 256, K of odd block counts (and, for K formats, odd super-block counts), f32 and
/// f16 x, forced and (from 128 rows of a 2048 x 2048 W) by Auto; N not a multiple of 8 falls back to the cooperative kernel. Runs where the
/// device has NV cooperative matrix 2 (the GPU machine); elsewhere `Native` is the cooperative
/// or tiled kernel and the same checks hold.
#[test]
fn native_product_matches_reference_on_ragged_shapes() {
    let dev = kiln_core::device().unwrap();
    let native = ops::native_tiling_available(&dev, "cm2_m");
    let mut rng = Rng::new(306);
    let shapes: &[(usize, usize, usize)] = if native {
        &[
            (1, 8, 32),
            (15, 24, 64),
            (17, 136, 96),
            (129, 264, 2080),
            (300, 520, 544),
            (4097, 16, 32),
            (130, 33, 64),
            (131, 2056, 2080),
        ]
    } else {
        &[(17, 24, 64)]
    };
    let formats: &[QuantFormat] = if native { &QuantFormat::ALL } else { &[QuantFormat::Q4_0, QuantFormat::Q4_K] };
    for &f in formats {
        for &(m, n, k) in shapes {
            // K formats: one super-block, or nine (an odd count) where the shape is deeper.
            let k = match f.block_len() {
                256 if k > 256 => 2304,
                256 => 256,
                _ => k,
            };
            let c = Case { wq: cpu::quantize(&weights(&mut rng, n, k), f), f, m, n, k };
            let wt = ops::quant_from_bytes(&dev, &c.wq, f, n, k).unwrap();
            for dt in float_dtypes() {
                let (x, xv) = rand_tensor(&mut rng, &[m, k], dt, -3.0, 3.0);
                for kern in [ProductKernel::Native, ProductKernel::Auto] {
                    let y = ops::quant_product(&x, &wt, f, n, kern).unwrap();
                    assert_eq!((y.shape(), y.dtype()), (&[m, n][..], dt));
                    let what = format!("{f} {dt} m={m} n={n} k={k} {kern:?} (native device: {native})");
                    check(&what, &c, &xv, &y.to_f64_vec().unwrap(), dt);
                }
            }
        }
    }
}

/// quant_matmul (Auto) takes the cooperative kernel from COOP_MIN_ROWS rows on a device that has
/// it (else the tiled one): same results as quant_product with Auto, within f16's tolerance of
/// the reference, through the composed SwiGLU and residual path too.
#[test]
fn auto_takes_coop_from_the_threshold() {
    let dev = kiln_core::device().unwrap();
    let mut rng = Rng::new(302);
    let (n, k) = (96usize, 128usize);
    let f = QuantFormat::Q4_0;
    let c0 = cpu::quantize(&weights(&mut rng, 2 * n, k), f);
    let wt = ops::quant_from_bytes(&dev, &c0, f, 2 * n, k).unwrap();
    let m_max = if has_coop() { 80 } else { 40 };
    for m in [ops::COOP_MIN_ROWS - 1, ops::COOP_MIN_ROWS, m_max] {
        assert_eq!(ops::quant_product_uses_coop(&dev, f, m, 2 * n), has_coop() && m >= ops::COOP_MIN_ROWS);
        // Every format decodes in it, and Auto takes it from the same threshold for each.
        assert_eq!(ops::QUANT_COOP_FORMATS, QuantFormat::ALL);
        for other in QuantFormat::ALL {
            let want = has_coop() && m >= ops::COOP_MIN_ROWS;
            assert_eq!(ops::quant_product_uses_coop(&dev, other, m, 2 * n), want, "{other} m={m}");
        }
        let (x, xv) = rand_tensor(&mut rng, &[m, k], DType::F32, -1.0, 1.0);
        let y = ops::quant_matmul(&x, &wt, f, 2 * n).unwrap().to_vec::<f32>().unwrap();
        let z = ops::quant_product(&x, &wt, f, 2 * n, ProductKernel::Auto).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(y, z, "m={m}: quant_matmul and quant_product(Auto) differ");
        let c = Case { wq: c0.clone(), f, m, n: 2 * n, k };
        check(&format!("auto m={m}"), &c, &xv, &y.iter().map(|&v| v as f64).collect::<Vec<_>>(), DType::F32);
        // The composed SwiGLU + residual path over the same product.
        let (r, rv) = rand_tensor(&mut rng, &[m, n], DType::F32, -1.0, 1.0);
        let fusion = ops::QuantFusion { swiglu: true, residual: Some(&r), ..Default::default() };
        let got = ops::quant_matmul_fused(&x, &wt, f, n, fusion).unwrap().to_vec::<f32>().unwrap();
        for i in 0..m {
            for j in 0..n {
                let (g, u) = (z[i * 2 * n + j] as f64, z[i * 2 * n + n + j] as f64);
                let want = g / (1.0 + (-g).exp()) * u + rv[i * n + j];
                let tol = 1e-5 * (1.0 + want.abs() + u.abs() * g.abs());
                assert!(
                    (got[i * n + j] as f64 - want).abs() <= tol,
                    "swiglu m={m} [{i},{j}]: {} vs {want}",
                    got[i * n + j]
                );
            }
        }
    }
    // The tiled kernel stays selectable (and is what a device without the feature runs).
    let (x, xv) = rand_tensor(&mut rng, &[40, k], DType::F32, -1.0, 1.0);
    let y = ops::quant_product(&x, &wt, f, 2 * n, ProductKernel::Tiled).unwrap().to_f64_vec().unwrap();
    let c = Case { wq: c0, f, m: 40, n: 2 * n, k };
    check("tiled", &c, &xv, &y, DType::F32);
}

/// The SwiGLU and residual epilogue (quant_matmul_fused's composed path for many rows: the
/// kernel's store on a device with cooperative matrices) against silu(g) * u + r from the f64
/// reference's g and u, on ragged shapes, f32 and f16 x, small and large tilings.
#[test]
fn fused_swiglu_residual_matches_reference() {
    let coop = has_coop();
    let dev = kiln_core::device().unwrap();
    let mut rng = Rng::new(304);
    let shapes: &[(usize, usize, usize)] =
        // 12 and 16 rows: batched decode's band products with SwiGLU after them (split K at 2048).
        if coop { &[(17, 8, 32), (40, 24, 96), (130, 200, 64), (600, 4096, 64), (12, 24, 128), (16, 260, 2048)] } else { &[(17, 8, 32), (40, 24, 96)] };
    for f in [QuantFormat::Q4_0, QuantFormat::Q8_0, QuantFormat::Q4_K, QuantFormat::Q6_K, QuantFormat::Q5_K] {
        for &(m, n, k) in shapes {
            let k = if f.block_len() == 256 { k.div_ceil(256) * 256 } else { k };
            let c = Case { wq: cpu::quantize(&weights(&mut rng, 2 * n, k), f), f, m, n: 2 * n, k };
            let wt = ops::quant_from_bytes(&dev, &c.wq, f, 2 * n, k).unwrap();
            for dt in float_dtypes() {
                let (x, xv) = rand_tensor(&mut rng, &[m, k], dt, -1.0, 1.0);
                let (r, rv) = rand_tensor(&mut rng, &[m, n], dt, -1.0, 1.0);
                let (y, tols) = reference(&c, &xv);
                for res in [false, true] {
                    let fusion = ops::QuantFusion { swiglu: true, residual: res.then_some(&r), ..Default::default() };
                    let got = ops::quant_matmul_fused(&x, &wt, f, n, fusion).unwrap().to_f64_vec().unwrap();
                    for i in 0..m {
                        for j in 0..n {
                            let (g, u) = (y[i * 2 * n + j], y[i * 2 * n + n + j]);
                            let (tg, tu) = (tols[i * 2 * n + j], tols[i * 2 * n + n + j]);
                            let s = g / (1.0 + (-g).exp());
                            let rr = if res { rv[i * n + j] } else { 0.0 };
                            let want = s * u + rr;
                            let mut tol = 1.1 * tg * u.abs() + (s.abs() + 1.1 * tg) * tu + 1e-6 * (s * u).abs() + 1e-7;
                            if dt == DType::F16 {
                                tol += 4.0 * 2f64.powi(-11) * ((s * u).abs() + want.abs()) + 2f64.powi(-24);
                            }
                            let v = got[i * n + j];
                            assert!(
                                (v - want).abs() <= tol,
                                "{f} {dt} m={m} n={n} k={k} residual {res}: y[{i}, {j}] = {v}, reference {want} (tolerance {tol})"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Split K (few output tiles over a deep K: batched decode's 16 rows by the 1B shape's down
/// projection): each split's f32 partial sums, then their sum in order with the residual, against
/// the f64 reference, on ragged shapes (rows under 16, N not a multiple of the tile, K not a
/// multiple of the split), every fast-path format, f32 and f16 x. Runs where the device has
/// cooperative matrices (the GPU machine); lavapipe validates the WGSL only (above).
#[test]
fn split_k_products_match_reference() {
    if !has_coop() {
        return;
    }
    let dev = kiln_core::device().unwrap();
    let mut rng = Rng::new(305);
    // (m, n, k): 1 tile x 16 splits; 3 tiles x 4; 33 tiles of a 2,048-wide K; a K of 37 blocks.
    let shapes: &[(usize, usize, usize)] = &[(16, 64, 8192), (9, 96, 2048), (16, 2100, 2048), (5, 40, 1184)];
    for f in [QuantFormat::Q4_0, QuantFormat::Q8_0, QuantFormat::Q4_K, QuantFormat::Q6_K] {
        for &(m, n, k) in shapes {
            let k = if f.block_len() == 256 { k.div_ceil(256) * 256 } else { k };
            let c = Case { wq: cpu::quantize(&weights(&mut rng, n, k), f), f, m, n, k };
            let wt = ops::quant_from_bytes(&dev, &c.wq, f, n, k).unwrap();
            for dt in float_dtypes() {
                let (x, xv) = rand_tensor(&mut rng, &[m, k], dt, -1.0, 1.0);
                let y = ops::quant_product(&x, &wt, f, n, ProductKernel::Coop).unwrap();
                let what = format!("{f} {dt} m={m} n={n} k={k} split");
                check(&what, &c, &xv, &y.to_f64_vec().unwrap(), dt);
                // With the residual folded into the split sum (batched decode's o and down).
                if m >= ops::COOP_MIN_ROWS {
                    let (r, rv) = rand_tensor(&mut rng, &[m, n], dt, -1.0, 1.0);
                    let fusion = ops::QuantFusion { residual: Some(&r), ..Default::default() };
                    let got = ops::quant_matmul_fused(&x, &wt, f, n, fusion).unwrap().to_f64_vec().unwrap();
                    let less: Vec<f64> = got.iter().zip(&rv).map(|(g, r)| g - r).collect();
                    // y + r rounds once more than y: the check's tolerance plus an ulp of y + r.
                    let (want, tols) = reference(&c, &xv);
                    let ulp = if dt == DType::F16 { 2f64.powi(-10) } else { 2f64.powi(-23) };
                    for i in 0..m * n {
                        let tol = 2.0 * tols[i] + ulp * (got[i].abs() + rv[i].abs()) + 1e-6;
                        assert!(
                            (less[i] - want[i]).abs() <= tol,
                            "{what} residual: y[{i}] = {} - {}, reference {}",
                            got[i],
                            rv[i],
                            want[i]
                        );
                    }
                }
            }
        }
    }
}

/// NaN, infinities and -0 in x: a NaN makes its row NaN, inf against a zero weight row NaN,
/// -0 rows give zeros (the tensor cores propagate IEEE specials as the f64 reference does).
#[test]
fn coop_product_special_values() {
    let dev = kiln_core::device().unwrap();
    let mut rng = Rng::new(303);
    for f in ops::QUANT_COOP_FORMATS {
        let (m, n, k) = (40usize, 36usize, if f.block_len() == 256 { 256 } else { 64usize });
        let mut w = weights(&mut rng, n, k);
        for v in &mut w[..k] {
            *v = 1.5; // row 0: every weight nonzero
        }
        let c = Case { wq: cpu::quantize(&w, f), f, m, n, k };
        let wt = ops::quant_from_bytes(&dev, &c.wq, f, n, k).unwrap();
        let mut xv: Vec<f64> = (0..m * k).map(|_| rng.uniform(-1.0, 1.0)).collect();
        xv[3] = f64::NAN;
        xv[k + 5] = f64::INFINITY;
        for v in &mut xv[2 * k..3 * k] {
            *v = -0.0;
        }
        xv[3 * k + 1] = f64::NEG_INFINITY;
        xv[3 * k + 2] = f64::INFINITY;
        let xs: Vec<f32> = xv.iter().map(|&v| v as f32).collect();
        let x = Tensor::from_slice(&xs, &[m, k]).unwrap();
        let got = ops::quant_product(&x, &wt, f, n, ProductKernel::Coop).unwrap().to_f64_vec().unwrap();
        assert!(got[..n].iter().all(|v| v.is_nan()), "{f}: NaN row {:?}", &got[..n]);
        assert!(got[2 * n..3 * n].iter().all(|&v| v == 0.0), "{f}: -0 row {:?}", &got[2 * n..3 * n]);
        check(&format!("{f} specials"), &c, &xv, &got, DType::F32);
    }
}

/// The kernel's WGSL for every format, x dtype, tiling and subgroup size validates in naga and
/// compiles to SPIR-V.
#[test]
fn coop_product_wgsl_validates() {
    let mut tilings = ops::quant_coop_tilings().to_vec();
    tilings.extend([
        [2, 2, 2, 2, 2],
        [2, 2, 4, 4, 2],
        [1, 4, 2, 2, 1],
        [1, 4, 1, 1, 2],
        [1, 2, 1, 2, 2],
        [1, 2, 1, 1, 4],
    ]);
    for f in ops::QUANT_COOP_FORMATS {
        for ty in ["f32", "f16"] {
            for sg in [32u32, 64] {
                for (&t, (glu, res)) in
                    tilings.iter().zip([(false, false), (true, false), (false, true), (true, true)].iter().cycle())
                {
                    let src = ops::quant_coop_source_for_tests(f, ty, sg, t, *glu, *res);
                    let what = format!("{f} {ty} subgroup {sg} tiling {t:?} swiglu {glu} residual {res}");
                    assert_wgsl_compiles(&what, &src);
                    // The split-K forms: f32 partial sums, then their sum (with the residual).
                    let (product, sum) = ops::quant_coop_split_sources_for_tests(f, ty, sg, t, *res);
                    assert_wgsl_compiles(&format!("{what} split"), &product);
                    assert_wgsl_compiles(&format!("{what} split sum"), &sum);
                }
            }
        }
    }
}

/// The kernel's decode (each format's fetch of raw words and unpack from registers, the K
/// formats' scale words included) over every row start parity, against `dequantize`'s bits
/// (held equal to ggml's by quant_k.rs), on any adapter: lavapipe has no cooperative matrices,
/// so this is where it checks the values the product would multiply.
#[test]
fn coop_decode_equals_dequantize() {
    let dev = kiln_core::device().unwrap();
    let mut rng = Rng::new(305);
    for f in ops::QUANT_COOP_FORMATS {
        // Three rows of an odd number of blocks: rows start at odd halfwords where the format's
        // block does (Q4_0, Q8_0, Q5_0, Q3_K, Q6_K).
        let (rows, cols) = (7usize, if f.block_len() == 256 { 768 } else { 96 });
        let mut bytes = cpu::quantize(&weights(&mut rng, rows, cols), f);
        // Random bytes in the last rows: every code, scale and high-bit pattern (scales kept
        // finite by clearing their exponent's top bit is not needed: NaN compares as NaN).
        let rb = f.row_bytes(cols).unwrap();
        let mut s = 0x2545_f491_4f6c_dd1du64 ^ f as u64;
        for b in &mut bytes[4 * rb..] {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *b = (s >> 24) as u8;
        }
        let w = ops::quant_from_bytes(&dev, &bytes, f, rows, cols).unwrap();
        let want = ops::dequantize(&w, f, rows, cols).unwrap().to_vec::<f32>().unwrap();
        let got = ops::quant_coop_decode_for_tests(&w, f, rows, cols).unwrap().to_vec::<f32>().unwrap();
        for (i, (g, e)) in got.iter().zip(&want).enumerate() {
            assert!(
                g.to_bits() == e.to_bits() || (g.is_nan() && e.is_nan()),
                "{f}: value {i} (row {}, col {}): {g:e} vs dequantize's {e:e}",
                i / cols,
                i % cols
            );
        }
    }
}
