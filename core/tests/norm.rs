mod common;
use common::*;
use kiln_core::ops;
use kiln_core::reference::norm as cpu;
use kiln_core::{DType, ErrorCode, Tensor};

/// Shapes and axes: empty, one element, primes, runs shorter than 32 (one thread per row) and
/// longer than 256 (a workgroup per row), inner axes (column walk), negative axes, rank 0.
const CASES: &[(&[usize], isize)] = &[
    (&[0], 0),
    (&[1], -1),
    (&[7], 0),
    (&[13, 17], 1),
    (&[13, 17], 0),
    (&[13, 17], -2),
    (&[3, 1, 257], -1),
    (&[3, 1, 257], 1),
    (&[3, 5, 7], 1),
    (&[2, 0, 3], 2),
    (&[1031], 0),
    (&[4, 600], 1),
    (&[2, 40, 3], 1),
    (&[], 0),
    (&[], -1),
];

#[test]
fn softmax_and_log_softmax_match_reference() {
    poison();
    let mut rng = Rng::new(21);
    for dt in float_dtypes() {
        for &(shape, axis) in CASES {
            let (x, xv) = rand_tensor(&mut rng, shape, dt, -8.0, 8.0);
            let (atol, rtol) = tol(dt);
            let what = |op: &str| format!("{op} {dt} {shape:?} axis={axis}");
            let y = ops::softmax(&x, axis).unwrap();
            let (want, ws) = cpu::softmax(&xv, shape, axis, dt).unwrap();
            assert_eq!(y.shape(), &ws[..]);
            assert_close(&what("softmax"), &y.to_f64_vec().unwrap(), &want, atol, rtol * 4.0);
            let y = ops::log_softmax(&x, axis).unwrap();
            let (want, ws) = cpu::log_softmax(&xv, shape, axis, dt).unwrap();
            assert_eq!(y.shape(), &ws[..]);
            // log_softmax values reach ~20 in magnitude; the f32 error is relative to that.
            assert_close(&what("log_softmax"), &y.to_f64_vec().unwrap(), &want, atol * 4.0, rtol * 4.0);
        }
    }
}

#[test]
fn softmax_is_stable_for_large_inputs() {
    let x = Tensor::from_slice(&[1000.0f32, 1001.0, 999.0, -1000.0], &[4]).unwrap();
    let xv = x.to_f64_vec().unwrap();
    let (want, _) = cpu::softmax(&xv, &[4], 0, DType::F32).unwrap();
    let got = ops::softmax(&x, 0).unwrap().to_f64_vec().unwrap();
    assert!(got.iter().all(|v| v.is_finite()), "{got:?}");
    assert_close("softmax large", &got, &want, 1e-6, 1e-5);
    let (want, _) = cpu::log_softmax(&xv, &[4], 0, DType::F32).unwrap();
    assert_close("log_softmax large", &ops::log_softmax(&x, 0).unwrap().to_f64_vec().unwrap(), &want, 1e-4, 1e-5);
}

const LAST_AXIS: &[&[usize]] =
    &[&[0], &[1], &[7], &[13, 17], &[3, 1, 257], &[2, 0, 3], &[5, 0], &[4, 600], &[2, 3, 40]];

/// f32 rows of whole vec4s up to 8192 floats run with the row in registers: 32 floats (the
/// shortest workgroup row), 36 (nine vec4s: most threads idle), 1028 (257 vec4s: one thread
/// holds two), 4096 (four each), 8192 (eight each, the last size kept in registers) and 8196
/// (streamed). Both paths must give the reference's values and the same bytes, special values
/// included: row 1 has a NaN, row 2 is -inf only, row 3 has +inf, row 4 has ±3e38, ±0 and
/// subnormals.
#[test]
fn softmax_rows_in_registers_match_streamed_bytes() {
    poison();
    let mut rng = Rng::new(26);
    let specials: [&[f64]; 4] = [&[f64::NAN], &[], &[f64::INFINITY], &[3.0e38, -3.0e38, 0.0, -0.0, 1.0e-40, -1.0e-45]];
    for shape in [&[5usize, 32][..], &[5, 36], &[5, 1028], &[5, 4096], &[5, 8192], &[5, 8196], &[5, 2, 36]] {
        let (_, mut xv) = rand_tensor(&mut rng, shape, DType::F32, -20.0, 20.0);
        let r = *shape.last().unwrap();
        for (row, sp) in specials.iter().enumerate().map(|(i, sp)| (i + 1, sp)) {
            for (i, &v) in sp.iter().enumerate() {
                xv[row * r + (i * 7919 + row * 31) % r] = v;
            }
        }
        xv[2 * r..3 * r].fill(f64::NEG_INFINITY);
        let x = Tensor::from_bytes(&kiln_core::dtype::f64_to_bytes(DType::F32, &xv), shape, DType::F32).unwrap();
        for log in [false, true] {
            let what = format!("{} {shape:?}", if log { "log_softmax" } else { "softmax" });
            let fast = ops::softmax_on_path(&x, -1, log, true).unwrap();
            let streamed = ops::softmax_on_path(&x, -1, log, false).unwrap();
            assert_eq!(fast.to_bytes().unwrap(), streamed.to_bytes().unwrap(), "{what}: paths differ");
            let plain = if log { ops::log_softmax(&x, -1) } else { ops::softmax(&x, -1) }.unwrap();
            assert_eq!(plain.to_bytes().unwrap(), fast.to_bytes().unwrap(), "{what}: default path");
            let want = if log {
                cpu::log_softmax(&xv, shape, -1, DType::F32)
            } else {
                cpu::softmax(&xv, shape, -1, DType::F32)
            };
            // log_softmax reaches ~40 in magnitude here (and ~6e38 in row 4): relative error.
            assert_close(&what, &fast.to_f64_vec().unwrap(), &want.unwrap().0, 4e-6, 4e-5);
        }
    }
}

#[test]
fn layer_norm_and_rms_norm_match_reference() {
    poison();
    let mut rng = Rng::new(22);
    for dt in float_dtypes() {
        for &shape in LAST_AXIS {
            let n = *shape.last().unwrap();
            let (x, xv) = rand_tensor(&mut rng, shape, dt, -3.0, 3.0);
            let (w, wv) = rand_tensor(&mut rng, &[n], dt, 0.5, 2.0);
            let (b, bv) = rand_tensor(&mut rng, &[n], dt, -1.0, 1.0);
            let (atol, rtol) = tol(dt);
            let (atol, rtol) = (atol * 4.0, rtol * 4.0);
            for (wt, bs) in [(false, false), (true, false), (false, true), (true, true)] {
                let what = format!("layer_norm {dt} {shape:?} weight={wt} bias={bs}");
                let y = ops::layer_norm(&x, wt.then_some(&w), bs.then_some(&b), 1e-5).unwrap();
                let (want, ws) =
                    cpu::layer_norm(&xv, shape, wt.then_some(&wv[..]), bs.then_some(&bv[..]), 1e-5f32 as f64, dt)
                        .unwrap();
                assert_eq!(y.shape(), &ws[..]);
                assert_close(&what, &y.to_f64_vec().unwrap(), &want, atol, rtol);
            }
            for wt in [false, true] {
                let what = format!("rms_norm {dt} {shape:?} weight={wt}");
                let y = ops::rms_norm(&x, wt.then_some(&w), 1e-6).unwrap();
                let (want, ws) = cpu::rms_norm(&xv, shape, wt.then_some(&wv[..]), 1e-6f32 as f64, dt).unwrap();
                assert_eq!(y.shape(), &ws[..]);
                assert_close(&what, &y.to_f64_vec().unwrap(), &want, atol, rtol);
            }
        }
    }
}

/// The row kernel's arithmetic in the order norm.wgsl writes it, each operation rounded to f32
/// (division and sqrt are correctly rounded there, as here): per thread `lid` of 256 the terms of
/// positions lid, lid + 256, ... (vec4s of them where the row is whole vec4s, summed as
/// ((x + y) + (z + w))), then the fixed tree over the 256 partial sums.
fn row_sum_as_written(row: &[f32], term: impl Fn(f32) -> f32) -> f32 {
    let mut part = [0.0f32; 256];
    let vec4 = row.len().is_multiple_of(4);
    let n = if vec4 { row.len() / 4 } else { row.len() };
    for (lid, acc) in part.iter_mut().enumerate() {
        for j in (lid..n).step_by(256) {
            *acc += if vec4 {
                let t: Vec<f32> = row[4 * j..4 * j + 4].iter().map(|&v| term(v)).collect();
                (t[0] + t[1]) + (t[2] + t[3])
            } else {
                term(row[j])
            };
        }
    }
    let mut s = 128;
    while s > 0 {
        for i in 0..s {
            part[i] += part[i + s];
        }
        s /= 2;
    }
    part[0]
}

/// layer_norm and rms_norm give the bits of their written order on the adapter that runs this
/// (SwiftShader in the browser and lavapipe natively must agree): rows of 384 (MiniLM's width,
/// whole vec4s) and 383, values over twelve binades so that any reordering or fused
/// multiply-add of the sums moves the last bits (lavapipe's compiler reassociated the vec4 sum
/// until norm.wgsl fenced it: 7 of 64 rows of this kind differed).
#[test]
fn layer_norm_and_rms_norm_give_the_bits_of_their_written_order() {
    let mut rng = Rng::new(27);
    for r in [384usize, 383] {
        let rows = 64;
        let mut xv = vec![0.0f32; rows * r];
        for v in xv.iter_mut() {
            let (m, e) = (rng.uniform(-1.0, 1.0), rng.uniform(-6.0, 6.0));
            *v = (m * e.exp2()) as f32;
        }
        let wv: Vec<f32> = (0..r).map(|_| rng.uniform(-2.0, 2.0) as f32).collect();
        let bv: Vec<f32> = (0..r).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
        let x = Tensor::from_slice(&xv, &[rows, r]).unwrap();
        let w = Tensor::from_slice(&wv, &[r]).unwrap();
        let b = Tensor::from_slice(&bv, &[r]).unwrap();
        let eps = 1e-5f32;
        let ln = ops::layer_norm(&x, Some(&w), Some(&b), eps).unwrap().to_vec::<f32>().unwrap();
        let rms = ops::rms_norm(&x, Some(&w), eps).unwrap().to_vec::<f32>().unwrap();
        for (i, row) in xv.chunks(r).enumerate() {
            let n = r as f32;
            let mean = row_sum_as_written(row, |v| v) / n;
            let inv = 1.0 / (row_sum_as_written(row, |v| (v - mean) * (v - mean)) / n + eps).sqrt();
            for j in 0..r {
                let want = (row[j] - mean) * inv * wv[j] + bv[j];
                let got = ln[i * r + j];
                assert_eq!(got.to_bits(), want.to_bits(), "layer_norm r={r} row {i} col {j}: {got:e} vs {want:e}");
            }
            let inv = 1.0 / (row_sum_as_written(row, |v| v * v) / n + eps).sqrt();
            for j in 0..r {
                let want = row[j] * inv * wv[j];
                let got = rms[i * r + j];
                assert_eq!(got.to_bits(), want.to_bits(), "rms_norm r={r} row {i} col {j}: {got:e} vs {want:e}");
            }
        }
    }
}

#[test]
fn batch_norm_matches_reference() {
    poison();
    let mut rng = Rng::new(23);
    let shapes: &[&[usize]] = &[&[0, 3], &[1, 1], &[2, 3], &[3, 5, 7], &[2, 3, 4, 5], &[2, 0, 3], &[1, 7, 300]];
    for dt in float_dtypes() {
        for &shape in shapes {
            let c = shape[1];
            let (x, xv) = rand_tensor(&mut rng, shape, dt, -3.0, 3.0);
            let (m, mv) = rand_tensor(&mut rng, &[c], dt, -1.0, 1.0);
            let (v, vv) = rand_tensor(&mut rng, &[c], dt, 0.1, 2.0);
            let (w, wv) = rand_tensor(&mut rng, &[c], dt, 0.5, 2.0);
            let (b, bv) = rand_tensor(&mut rng, &[c], dt, -1.0, 1.0);
            let (atol, rtol) = tol(dt);
            for (wt, bs) in [(false, false), (true, true), (true, false), (false, true)] {
                let y = ops::batch_norm(&x, &m, &v, wt.then_some(&w), bs.then_some(&b), 1e-5).unwrap();
                let (want, ws) = cpu::batch_norm(
                    &xv,
                    shape,
                    &mv,
                    &vv,
                    wt.then_some(&wv[..]),
                    bs.then_some(&bv[..]),
                    1e-5f32 as f64,
                    dt,
                )
                .unwrap();
                assert_eq!(y.shape(), &ws[..]);
                assert_close(
                    &format!("batch_norm {dt} {shape:?} weight={wt} bias={bs}"),
                    &y.to_f64_vec().unwrap(),
                    &want,
                    atol * 4.0,
                    rtol * 4.0,
                );
            }
        }
    }
}

#[test]
fn more_than_65535_rows() {
    poison();
    let mut rng = Rng::new(24);
    for shape in [&[70000usize, 5][..], &[70000, 40]] {
        let (x, xv) = rand_tensor(&mut rng, shape, DType::F32, -4.0, 4.0);
        let (want, _) = cpu::softmax(&xv, shape, -1, DType::F32).unwrap();
        assert_close(
            &format!("softmax {shape:?}"),
            &ops::softmax(&x, -1).unwrap().to_f64_vec().unwrap(),
            &want,
            1e-5,
            4e-5,
        );
        let (want, _) = cpu::layer_norm(&xv, shape, None, None, 1e-5f32 as f64, DType::F32).unwrap();
        assert_close(
            &format!("layer_norm {shape:?}"),
            &ops::layer_norm(&x, None, None, 1e-5).unwrap().to_f64_vec().unwrap(),
            &want,
            4e-5,
            4e-5,
        );
    }
}

#[test]
fn repeated_runs_give_identical_bytes() {
    let mut rng = Rng::new(25);
    let (x, _) = rand_tensor(&mut rng, &[3, 3000], DType::F32, -3.0, 3.0);
    let (w, _) = rand_tensor(&mut rng, &[3000], DType::F32, -3.0, 3.0);
    let runs = |f: &dyn Fn() -> Tensor| {
        let first = f().to_bytes().unwrap();
        for _ in 0..3 {
            assert_eq!(f().to_bytes().unwrap(), first);
        }
    };
    runs(&|| ops::softmax(&x, -1).unwrap());
    runs(&|| ops::log_softmax(&x, 0).unwrap());
    runs(&|| ops::layer_norm(&x, Some(&w), None, 1e-5).unwrap());
    runs(&|| ops::rms_norm(&x, Some(&w), 1e-5).unwrap());
}

#[test]
fn errors_for_bad_input() {
    let x = Tensor::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    let i = Tensor::from_slice(&[1i32; 6], &[2, 3]).unwrap();
    let w2 = Tensor::from_slice(&[1.0f32; 2], &[2]).unwrap();
    let w3 = Tensor::from_slice(&[1.0f32; 3], &[3]).unwrap();
    let w3i = Tensor::from_slice(&[1i32; 3], &[3]).unwrap();
    let w13 = Tensor::from_slice(&[1.0f32; 3], &[1, 3]).unwrap();
    let code = |r: kiln_core::Result<Tensor>| r.unwrap_err().code();
    assert_eq!(code(ops::softmax(&x, 2)), ErrorCode::InvalidArgument);
    assert_eq!(code(ops::log_softmax(&x, -3)), ErrorCode::InvalidArgument);
    assert_eq!(code(ops::softmax(&i, 1)), ErrorCode::DTypeMismatch);
    assert_eq!(code(ops::log_softmax(&i, 1)), ErrorCode::DTypeMismatch);
    assert_eq!(code(ops::layer_norm(&x, Some(&w2), None, 1e-5)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::layer_norm(&x, None, Some(&w13), 1e-5)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::layer_norm(&x, Some(&w3i), None, 1e-5)), ErrorCode::DTypeMismatch);
    assert_eq!(code(ops::layer_norm(&i, None, None, 1e-5)), ErrorCode::DTypeMismatch);
    assert_eq!(code(ops::rms_norm(&x, Some(&w2), 1e-5)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::rms_norm(&i, None, 1e-5)), ErrorCode::DTypeMismatch);
    let s = Tensor::from_slice(&[1.0f32], &[]).unwrap();
    assert_eq!(code(ops::layer_norm(&s, None, None, 1e-5)), ErrorCode::InvalidArgument);
    // batch_norm: stats must be [C] (here C = 3), x at least [N, C].
    assert_eq!(code(ops::batch_norm(&x, &w2, &w3, None, None, 1e-5)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::batch_norm(&x, &w3, &w2, None, None, 1e-5)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::batch_norm(&x, &w3, &w3, Some(&w2), None, 1e-5)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::batch_norm(&x, &w3, &w3, None, Some(&w13), 1e-5)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::batch_norm(&w3, &w3, &w3, None, None, 1e-5)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::batch_norm(&x, &w3i, &w3, None, None, 1e-5)), ErrorCode::DTypeMismatch);
    assert_eq!(code(ops::batch_norm(&i, &w3i, &w3i, None, None, 1e-5)), ErrorCode::DTypeMismatch);
    // The device still works afterwards.
    assert_eq!(ops::softmax(&x, 1).unwrap().to_vec::<f32>().unwrap(), vec![1.0 / 3.0; 6]);
}
