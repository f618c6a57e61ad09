//! The quant family's 32-value block formats (GGUF Q4_0 / Q4_1 / Q8_0 / Q5_0 / Q5_1 weights)
//! against the references in kiln_core::reference::quant and against hand-built blocks (the K
//! formats' 256-value super-blocks: quant_k.rs).
//!
//! Tolerance of quant_matmul: the GPU and the reference multiply the same f32 dequantized
//! weights (dequantize is compared bit for bit), so they differ only in the order and precision
//! of the accumulation: |got - want| <= (K + 2) * 2^-24 * sum_k |x_k w_k| (the worst-case bound
//! of an f32 sum of K products in any order), plus f16's rounding of the result for f16 x.
//! Where a product runs on cooperative matrices (`ops::quant_product_uses_coop`: many rows of x
//! on a device that has them), x and W are rounded to f16 first: core/tests/quant_coop.rs states
//! that tolerance, which `check_matmul` then takes (its absolute term bounded with |x| <= 2,
//! |w| <= 4).

mod common;
use common::*;
use kiln_core::ops::{self, QuantFormat};
use kiln_core::reference::quant as cpu;
use kiln_core::{DType, ErrorCode, Tensor};

fn bytes_of(t: &Tensor, nbytes: usize) -> Vec<u8> {
    let mut b = t.to_bytes().unwrap();
    assert!(b[nbytes..].iter().all(|&p| p == 0), "padding past {nbytes} bytes is not zero");
    b.truncate(nbytes);
    b
}

/// The formats of 32-value blocks (every shape below is a multiple of 32, not of 256).
fn formats() -> impl Iterator<Item = QuantFormat> {
    QuantFormat::ALL.into_iter().filter(|f| f.block_len() == 32)
}

fn upload(bytes: &[u8], f: QuantFormat, rows: usize, cols: usize) -> Tensor {
    ops::quant_from_bytes(&kiln_core::device().unwrap(), bytes, f, rows, cols).unwrap()
}

/// Random weights with the cases that matter: rows of one repeated value (d = 0 for Q4_1), rows
/// of zeros (d = 0 everywhere), wide and narrow ranges, and an offset (Q4_1's m).
fn weights(rng: &mut Rng, rows: usize, cols: usize) -> Vec<f32> {
    let mut w = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let kind = r % 5;
        let v = rng.uniform(-2.0, 2.0) as f32;
        for _ in 0..cols {
            w.push(match kind {
                0 => v,
                1 if r % 10 == 1 => 0.0,
                2 => rng.uniform(-1e-3, 1e-3) as f32,
                3 => rng.uniform(0.5, 3.0) as f32,
                _ => rng.uniform(-4.0, 4.0) as f32,
            });
        }
    }
    w
}

#[test]
fn formats_name_parse_and_sizes() {
    for f in QuantFormat::ALL {
        assert_eq!(QuantFormat::parse(f.name()).unwrap(), f);
        assert_eq!(QuantFormat::parse(&f.name().to_uppercase()).unwrap(), f);
    }
    let e = QuantFormat::parse("q8_k").unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
    assert!(e.to_string().contains("q4_0, q4_1, q8_0, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k"), "{e}");
    assert_eq!(QuantFormat::ALL.map(|f| f.block_bytes()), [18, 20, 34, 22, 24, 84, 110, 144, 176, 210]);
    assert_eq!(QuantFormat::ALL.map(|f| f.block_len()), [32, 32, 32, 32, 32, 256, 256, 256, 256, 256]);
    assert_eq!(QuantFormat::Q6_K.row_bytes(512).unwrap(), 420);
    assert_eq!(QuantFormat::Q4_K.row_bytes(576).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(QuantFormat::Q4_0.row_bytes(576).unwrap(), 18 * 18);
    assert_eq!(QuantFormat::Q8_0.row_bytes(0).unwrap(), 0);
    assert_eq!(QuantFormat::Q4_1.row_bytes(33).unwrap_err().code(), ErrorCode::InvalidArgument);
}

/// Blocks built by hand from the format definitions (ggml-common.h) and ggml's quantizers.
#[test]
fn quantize_known_answers() {
    // Q4_0: max |x| is -8, so d = -8 / -8 = 1 and q = x + 8.
    let x: Vec<f32> = (0..32).map(|j| if j < 16 { j as f32 - 8.0 } else { 7.0 - (j - 16) as f32 }).collect();
    let mut want = vec![0x00, 0x3C]; // f16 1.0
    want.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let t = Tensor::from_slice(&x, &[1, 32]).unwrap();
    let q = ops::quantize(&t, QuantFormat::Q4_0).unwrap();
    assert_eq!(q.shape(), &[5]);
    assert_eq!(bytes_of(&q, 18), want);
    assert_eq!(cpu::quantize(&x, QuantFormat::Q4_0), want);

    // Q4_1: min 1, max 8.5, so d = 0.5, m = 1 and q = (x - 1) * 2.
    let x: Vec<f32> = (0..32).map(|j| 1.0 + 0.5 * ((j * 7) % 16) as f32).collect();
    let x: Vec<f32> = x.into_iter().enumerate().map(|(j, v)| if j == 31 { 8.5 } else { v }).collect();
    let mut want = vec![0x00, 0x38, 0x00, 0x3C]; // f16 0.5, f16 1.0
    want.extend(
        (0..16usize).map(|j| (((j * 7) % 16) as u8) | ((if j == 15 { 15 } else { ((j + 16) * 7) % 16 } as u8) << 4)),
    );
    let t = Tensor::from_slice(&x, &[1, 32]).unwrap();
    assert_eq!(bytes_of(&ops::quantize(&t, QuantFormat::Q4_1).unwrap(), 20), want);

    // Q8_0: amax 127, so d = 1 and q = round(x), halves away from zero (roundf).
    let mut x: Vec<f32> = (0..32).map(|j| (j as f32 - 16.0) * 3.0).collect();
    x[0] = -127.0;
    x[1] = 0.5;
    x[2] = -0.5;
    x[3] = 2.5;
    x[4] = -0.0;
    let mut want = vec![0x00, 0x3C];
    want.extend(x.iter().map(|&v| (v.abs().round().copysign(v) as i8) as u8));
    assert_eq!(&want[2..7], &[0x81, 1, 0xFF, 3, 0]);
    let t = Tensor::from_slice(&x, &[1, 32]).unwrap();
    let q = ops::quantize(&t, QuantFormat::Q8_0).unwrap();
    assert_eq!(q.shape(), &[9]); // 34 bytes padded to 36
    assert_eq!(bytes_of(&q, 34), want);

    // A row of zeros: d = 0 / -8 = -0 (f16 0x8000, as ggml writes it) and every q is the zero
    // point.
    let t = Tensor::from_slice(&[0.0f32; 32], &[1, 32]).unwrap();
    let mut want = vec![0x00, 0x80];
    want.extend([0x88u8; 16]);
    assert_eq!(bytes_of(&ops::quantize(&t, QuantFormat::Q4_0).unwrap(), 18), want);
}

#[test]
fn quantize_matches_reference_and_dequantize_is_exact() {
    poison();
    let mut rng = Rng::new(140);
    for f in formats() {
        for &(rows, cols) in &[(0usize, 32usize), (1, 32), (7, 96), (13, 576), (3, 0)] {
            let w = weights(&mut rng, rows, cols);
            let t = Tensor::from_slice(&w, &[rows, cols]).unwrap();
            let nbytes = rows * f.row_bytes(cols).unwrap();
            let q = ops::quantize(&t, f).unwrap();
            let want = cpu::quantize(&w, f);
            let what = format!("{f} [{rows}, {cols}]");
            assert_eq!(bytes_of(&q, nbytes), want, "quantize {what}");
            let deq = ops::dequantize(&q, f, rows, cols).unwrap();
            assert_eq!(deq.shape(), &[rows, cols]);
            let got = deq.to_f64_vec().unwrap();
            let want = cpu::dequantize(&want, f, rows, cols);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                    "dequantize {what} [{i}]: {g} vs {w}"
                );
            }
            if has_f16() && rows > 0 {
                let h: Vec<f32> = w.iter().map(|&v| kiln_core::f16::from_f32(v).to_f32()).collect();
                let th = ops::cast(&t, DType::F16).unwrap();
                assert_eq!(bytes_of(&ops::quantize(&th, f).unwrap(), nbytes), cpu::quantize(&h, f), "f16 {what}");
            }
        }
    }
}

/// Special values in the weights: the bytes still equal ggml's (x86 build) and decode the same.
#[test]
fn quantize_special_weights_match_reference() {
    let mut w: Vec<f32> = (0..128).map(|i| (i as f32 * 0.37).sin()).collect();
    w[3] = f32::NAN;
    w[40] = f32::INFINITY;
    w[70] = -0.0;
    w[100] = 1e-30;
    for v in &mut w[96..128] {
        *v *= 1e-6;
    }
    for f in formats() {
        let t = Tensor::from_slice(&w, &[2, 64]).unwrap();
        let q = ops::quantize(&t, f).unwrap();
        let want = cpu::quantize(&w, f);
        assert_eq!(bytes_of(&q, 2 * f.row_bytes(64).unwrap()), want, "{f}");
        let got = ops::dequantize(&q, f, 2, 64).unwrap().to_f64_vec().unwrap();
        let want = cpu::dequantize(&want, f, 2, 64);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()), "{f} [{i}]: {g} vs {w}");
        }
    }
}

/// Checks GPU quant_matmul against the reference with the tolerance stated at the top.
#[track_caller]
fn check_matmul(what: &str, got: &[f64], want: &[f64], scale: &[f64], k: usize, dtype: DType) {
    check_matmul_on(what, got, want, scale, k, dtype, false)
}

/// [`check_matmul`], with cooperative matrices' f16 tolerance where `coop`.
#[track_caller]
fn check_matmul_on(what: &str, got: &[f64], want: &[f64], scale: &[f64], k: usize, dtype: DType, coop: bool) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let (eps, abs) = if coop {
        (2f64.powi(-10) + 2f64.powi(-21) + (k as f64 + 2.0) * 2f64.powi(-23), 6.0 * k as f64 * 2f64.powi(-24))
    } else {
        ((k as f64 + 2.0) * 2f64.powi(-24), 0.0)
    };
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        let mut tol = eps * s + abs;
        if dtype == DType::F16 {
            tol += 2f64.powi(-11) * w.abs() + 2f64.powi(-24);
        }
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol;
        assert!(ok, "{what}: element {i}: got {g}, reference {w} (tolerance {tol})");
    }
}

#[test]
fn quant_matmul_matches_reference() {
    poison();
    let mut rng = Rng::new(141);
    for f in formats() {
        for &k in &[32usize, 96, 576] {
            for &n in &[1usize, 7, 33, 257] {
                let w = weights(&mut rng, n, k);
                let wq = cpu::quantize(&w, f);
                let wt = upload(&wq, f, n, k);
                for &m in &[0usize, 1, 2, 3, 5, 8, 9, 17, 70] {
                    if n == 257 && k == 576 && m > 17 {
                        continue; // lavapipe time; 70 rows are covered at the other sizes
                    }
                    for dt in float_dtypes() {
                        if dt == DType::F16 && m % 2 == 0 {
                            continue;
                        }
                        let (x, xv) = rand_tensor(&mut rng, &[m, k], dt, -2.0, 2.0);
                        let y = ops::quant_matmul(&x, &wt, f, n).unwrap();
                        assert_eq!(y.shape(), &[m, n]);
                        assert_eq!(y.dtype(), dt);
                        let want = cpu::quant_matmul(&xv, m, k, &wq, f, n);
                        let scale = cpu::quant_matmul_abs(&xv, m, k, &wq, f, n);
                        check_matmul_on(
                            &format!("{f} {dt} m={m} n={n} k={k}"),
                            &y.to_f64_vec().unwrap(),
                            &want,
                            &scale,
                            k,
                            dt,
                            ops::quant_product_uses_coop(&kiln_core::device().unwrap(), f, m, n),
                        );
                    }
                }
            }
        }
    }
}

/// SmolLM2-135M's projections (K = 576 -> 576, 192, 1536; K = 1536 -> 576) at decode and small
/// prefill sizes, and a slice of its Q8_0 output projection / embedding table.
#[test]
fn quant_matmul_smollm2_shapes() {
    let mut rng = Rng::new(145);
    for &(f, n, k) in &[
        (QuantFormat::Q4_0, 576, 576),
        (QuantFormat::Q4_1, 192, 576),
        (QuantFormat::Q4_0, 1536, 576),
        (QuantFormat::Q8_0, 576, 1536),
        (QuantFormat::Q8_0, 4096, 576),
    ] {
        let wq = cpu::quantize(&weights(&mut rng, n, k), f);
        let wt = upload(&wq, f, n, k);
        for m in [1usize, 2, 5, 12] {
            let (x, xv) = rand_tensor(&mut rng, &[m, k], DType::F32, -1.0, 1.0);
            let y = ops::quant_matmul(&x, &wt, f, n).unwrap();
            let want = cpu::quant_matmul(&xv, m, k, &wq, f, n);
            let scale = cpu::quant_matmul_abs(&xv, m, k, &wq, f, n);
            check_matmul(&format!("{f} m={m} n={n} k={k}"), &y.to_f64_vec().unwrap(), &want, &scale, k, DType::F32);
        }
        let ids: Vec<i64> = (0..7).map(|_| rng.int(-2, n as i64 + 1)).collect();
        let t = Tensor::from_slice(&ids.iter().map(|&i| i as i32).collect::<Vec<_>>(), &[7]).unwrap();
        let got = ops::quant_embedding(&wt, f, k, &t).unwrap().to_f64_vec().unwrap();
        assert_eq!(got, cpu::quant_embedding(&wq, f, n, k, &ids), "{f} embedding [{n}, {k}]");
    }
}

#[test]
fn quant_matmul_batched_shapes_and_empty() {
    let mut rng = Rng::new(142);
    let f = QuantFormat::Q4_0;
    let (n, k) = (9usize, 64usize);
    let wq = cpu::quantize(&weights(&mut rng, n, k), f);
    let wt = upload(&wq, f, n, k);
    for shape in [&[k][..], &[2, 3, k], &[3, 7, k], &[0, 4, k]] {
        let (x, xv) = rand_tensor(&mut rng, shape, DType::F32, -1.0, 1.0);
        let y = ops::quant_matmul(&x, &wt, f, n).unwrap();
        let mut want_shape = shape.to_vec();
        *want_shape.last_mut().unwrap() = n;
        assert_eq!(y.shape(), &want_shape[..]);
        let m = xv.len() / k;
        let want = cpu::quant_matmul(&xv, m, k, &wq, f, n);
        let scale = cpu::quant_matmul_abs(&xv, m, k, &wq, f, n);
        let coop = ops::quant_product_uses_coop(&kiln_core::device().unwrap(), f, m, n);
        check_matmul_on(&format!("{shape:?}"), &y.to_f64_vec().unwrap(), &want, &scale, k, DType::F32, coop);
    }
    // K = 0: a sum of nothing.
    let x = Tensor::from_slice::<f32>(&[], &[3, 0]).unwrap();
    let w0 = upload(&[], f, 5, 0);
    let y = ops::quant_matmul(&x, &w0, f, 5).unwrap();
    assert_eq!(y.shape(), &[3, 5]);
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0; 15]);
    // N = 0.
    let w0 = upload(&[], f, 0, k);
    let (x, _) = rand_tensor(&mut rng, &[2, k], DType::F32, -1.0, 1.0);
    assert_eq!(ops::quant_matmul(&x, &w0, f, 0).unwrap().shape(), &[2, 0]);
}

#[test]
fn quant_matmul_special_values_in_x() {
    let mut rng = Rng::new(143);
    for f in formats() {
        let (n, k) = (7usize, 64usize);
        let mut w = weights(&mut rng, n, k);
        for v in &mut w[..k] {
            *v = 0.0; // an all-zero row: inf * 0 gives NaN
        }
        let wq = cpu::quantize(&w, f);
        let wt = upload(&wq, f, n, k);
        for m in [1usize, 3, 12] {
            let mut xv: Vec<f64> = (0..m * k).map(|_| rng.uniform(-1.0, 1.0)).collect();
            xv[0] = f64::NAN;
            if m > 1 {
                xv[k + 5] = f64::INFINITY;
                xv[k + 9] = -0.0;
            }
            if m > 2 {
                for v in &mut xv[2 * k..3 * k] {
                    *v = -0.0;
                }
                xv[2 * k + 1] = f64::NEG_INFINITY;
                xv[2 * k + 2] = f64::INFINITY;
            }
            let xs: Vec<f32> = xv.iter().map(|&v| v as f32).collect();
            let x = Tensor::from_slice(&xs, &[m, k]).unwrap();
            let got = ops::quant_matmul(&x, &wt, f, n).unwrap().to_f64_vec().unwrap();
            let want = cpu::quant_matmul(&xv, m, k, &wq, f, n);
            let scale = cpu::quant_matmul_abs(&xv, m, k, &wq, f, n);
            assert!(got[..n].iter().all(|v| v.is_nan()), "{f} NaN row: {:?}", &got[..n]);
            check_matmul(&format!("{f} specials m={m}"), &got, &want, &scale, k, DType::F32);
        }
        // An all -0 row of x times finite weights is a zero.
        let x = Tensor::from_slice(&vec![-0.0f32; k], &[1, k]).unwrap();
        let got = ops::quant_matmul(&x, &wt, f, n).unwrap().to_vec::<f32>().unwrap();
        assert!(got.iter().all(|&v| v == 0.0), "{f}: {got:?}");
    }
}

#[test]
fn quant_embedding_matches_reference() {
    poison();
    let mut rng = Rng::new(144);
    for f in formats() {
        let (v, d) = (11usize, 96usize);
        let wq = cpu::quantize(&weights(&mut rng, v, d), f);
        let wt = upload(&wq, f, v, d);
        let ids: Vec<i64> = vec![0, 10, 3, -1, 11, 5, 5, i32::MIN as i64, 7, 1, 2, 9];
        let i32s: Vec<i32> = ids.iter().map(|&i| i as i32).collect();
        let t = Tensor::from_slice(&i32s, &[3, 4]).unwrap();
        let y = ops::quant_embedding(&wt, f, d, &t).unwrap();
        assert_eq!(y.shape(), &[3, 4, d]);
        assert_eq!(y.dtype(), DType::F32);
        assert_eq!(y.to_f64_vec().unwrap(), cpu::quant_embedding(&wq, f, v, d, &ids), "{f} i32");
        let u32s: Vec<u32> = vec![4, 0, 12, u32::MAX, 10];
        let t = Tensor::from_slice(&u32s, &[5]).unwrap();
        let ids: Vec<i64> = u32s.iter().map(|&i| i as i64).collect();
        let y = ops::quant_embedding(&wt, f, d, &t).unwrap();
        assert_eq!(y.to_f64_vec().unwrap(), cpu::quant_embedding(&wq, f, v, d, &ids), "{f} u32");
        let empty = Tensor::from_slice::<i32>(&[], &[0]).unwrap();
        assert_eq!(ops::quant_embedding(&wt, f, d, &empty).unwrap().shape(), &[0, d]);
        // One id, a single-block row: padded table (18 or 34 bytes).
        let wq1 = cpu::quantize(&weights(&mut rng, 1, 32), f);
        let w1 = upload(&wq1, f, 1, 32);
        let one = Tensor::from_slice(&[0i32], &[]).unwrap();
        let y = ops::quant_embedding(&w1, f, 32, &one).unwrap();
        assert_eq!(y.shape(), &[32]);
        assert_eq!(y.to_f64_vec().unwrap(), cpu::dequantize(&wq1, f, 1, 32));
    }
}

#[test]
fn bad_input_is_refused() {
    let f = QuantFormat::Q4_0;
    let dev = kiln_core::device().unwrap();
    let code = |r: kiln_core::Result<Tensor>| r.unwrap_err().code();
    // Bytes that are not rows * row_bytes.
    assert_eq!(code(ops::quant_from_bytes(&dev, &[0; 17], f, 1, 32)), ErrorCode::InvalidArgument);
    assert_eq!(code(ops::quant_from_bytes(&dev, &[0; 18], f, 1, 31)), ErrorCode::InvalidArgument);
    let w = upload(&[0; 36], f, 2, 32);
    let x = Tensor::from_slice(&[1.0f32; 32], &[1, 32]).unwrap();
    // Wrong N, K, dtype, format for the length.
    assert_eq!(code(ops::quant_matmul(&x, &w, f, 3)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::quant_matmul(&x, &w, QuantFormat::Q8_0, 2)), ErrorCode::ShapeMismatch);
    let x64 = Tensor::from_slice(&[1.0f32; 64], &[1, 64]).unwrap();
    assert_eq!(code(ops::quant_matmul(&x64, &w, f, 2)), ErrorCode::ShapeMismatch);
    let x33 = Tensor::from_slice(&[1.0f32; 33], &[1, 33]).unwrap();
    assert_eq!(code(ops::quant_matmul(&x33, &w, f, 2)), ErrorCode::InvalidArgument);
    let wf = Tensor::from_slice(&[0.0f32; 9], &[9]).unwrap();
    assert_eq!(code(ops::quant_matmul(&x, &wf, f, 2)), ErrorCode::DTypeMismatch);
    let xi = Tensor::from_slice(&[1i32; 32], &[1, 32]).unwrap();
    assert_eq!(code(ops::quant_matmul(&xi, &w, f, 2)), ErrorCode::DTypeMismatch);
    let w2d = w.reshape(&[3, 3]).unwrap();
    assert_eq!(code(ops::quant_matmul(&x, &w2d, f, 2)), ErrorCode::ShapeMismatch);
    let s = Tensor::from_slice(&[1.0f32], &[]).unwrap();
    assert_eq!(code(ops::quant_matmul(&s, &w, f, 2)), ErrorCode::ShapeMismatch);
    // quantize: not 2-D, not float, cols not whole blocks.
    assert_eq!(code(ops::quantize(&Tensor::from_slice(&[1.0f32; 32], &[32]).unwrap(), f)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::quantize(&xi, f)), ErrorCode::DTypeMismatch);
    assert_eq!(code(ops::quantize(&x33, f)), ErrorCode::InvalidArgument);
    // dequantize: wrong rows.
    assert_eq!(code(ops::dequantize(&w, f, 3, 32)), ErrorCode::ShapeMismatch);
    // embedding: float ids, a table that is not whole rows, D not whole blocks.
    assert_eq!(code(ops::quant_embedding(&w, f, 32, &x)), ErrorCode::DTypeMismatch);
    let ids = Tensor::from_slice(&[0i32], &[1]).unwrap();
    assert_eq!(code(ops::quant_embedding(&w, f, 96, &ids)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::quant_embedding(&w, f, 31, &ids)), ErrorCode::InvalidArgument);
    assert_eq!(code(ops::quant_embedding(&wf, f, 32, &ids)), ErrorCode::DTypeMismatch);
    assert_eq!(code(ops::quant_embedding(&w2d, f, 32, &ids)), ErrorCode::ShapeMismatch);
}

/// Decode-path speed (`cargo test --release --test quant -- --ignored --nocapture`): weight
/// bytes read per second by quant_matmul at SmolLM2's shapes and at a large one, from GPU
/// timestamps where the adapter has them (else the wall clock).
#[test]
#[ignore]
fn decode_matvec_bandwidth() {
    let dev = kiln_core::device().unwrap();
    println!("device: {}", dev.info().name);
    let mut rng = Rng::new(7);
    let shapes: &[(QuantFormat, usize, usize)] = &[
        (QuantFormat::Q4_0, 576, 576),
        (QuantFormat::Q4_0, 192, 576),
        (QuantFormat::Q4_0, 1536, 576),
        (QuantFormat::Q4_0, 576, 1536),
        (QuantFormat::Q8_0, 576, 576),
        (QuantFormat::Q8_0, 1536, 576),
        (QuantFormat::Q8_0, 49152, 576),
        (QuantFormat::Q4_0, 49152, 576),
        (QuantFormat::Q4_1, 49152, 576),
        (QuantFormat::Q4_0, 16384, 8192),
        (QuantFormat::Q8_0, 16384, 8192),
    ];
    let iters = 100;
    for &(f, n, k) in shapes {
        let nbytes = n * f.row_bytes(k).unwrap();
        let bytes: Vec<u8> = (0..nbytes).map(|_| (rng.next_u64() & 0x3b) as u8).collect();
        let w = ops::quant_from_bytes(&dev, &bytes, f, n, k).unwrap();
        for m in [1usize, 4, 128] {
            let (x, _) = rand_tensor(&mut rng, &[m, k], DType::F32, -1.0, 1.0);
            for _ in 0..3 {
                ops::quant_matmul(&x, &w, f, n).unwrap();
            }
            kiln_core::synchronize().unwrap();
            let timed = dev.start_gpu_timer().unwrap();
            let t0 = std::time::Instant::now();
            for _ in 0..iters {
                ops::quant_matmul(&x, &w, f, n).unwrap();
            }
            kiln_core::synchronize().unwrap();
            let wall = t0.elapsed().as_secs_f64() / iters as f64;
            let gpu = if timed { dev.stop_gpu_timer().unwrap().map(|g| g.busy_s / iters as f64) } else { None };
            let t = gpu.unwrap_or(wall);
            println!(
                "{f} N={n:6} K={k:5} M={m:4}: {:8.2} us/op (wall {:8.2} us) {:7.1} GB/s weights {:8.1} GFLOP/s",
                t * 1e6,
                wall * 1e6,
                nbytes as f64 / t / 1e9,
                2.0 * (m * n * k) as f64 / t / 1e9
            );
        }
    }
}
