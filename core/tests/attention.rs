mod common;
use common::*;
use kiln_core::ops;
use kiln_core::reference::attention as cpu;
use kiln_core::{DType, ErrorCode, Tensor};

fn check(rng: &mut Rng, qs: &[usize], ks: &[usize], vs: &[usize], causal: bool, scale: Option<f32>, dt: DType) {
    let (q, qv) = rand_tensor(rng, qs, dt, -2.0, 2.0);
    let (k, kv) = rand_tensor(rng, ks, dt, -2.0, 2.0);
    let (v, vv) = rand_tensor(rng, vs, dt, -1.0, 1.0);
    let what = format!("attention q{qs:?} k{ks:?} v{vs:?} causal={causal} scale={scale:?} {dt}");
    let y = ops::attention(&q, &k, &v, causal, scale).unwrap_or_else(|e| panic!("{what}: {e}"));
    let (want, shape) = cpu::attention(&qv, qs, &kv, ks, &vv, vs, causal, scale.map(|s| s as f64)).unwrap();
    assert_eq!(y.shape(), &shape[..], "{what}");
    let (atol, rtol) = match dt {
        DType::F16 => (3e-3, 3e-3),
        _ => (2e-5, 1e-4),
    };
    assert_close(&what, &y.to_f64_vec().unwrap(), &want, atol, rtol);
}

#[test]
fn attention_matches_reference() {
    poison();
    let mut rng = Rng::new(31);
    #[allow(clippy::type_complexity)]
    let cases: &[(&[usize], &[usize], &[usize])] = &[
        (&[1, 1], &[1, 1], &[1, 1]),
        (&[5, 8], &[5, 8], &[5, 8]),
        (&[7, 16], &[13, 16], &[13, 5]),                       // Lq < Lk, D != Dv
        (&[13, 3], &[7, 3], &[7, 9]),                          // Lq > Lk
        (&[2, 3, 17, 32], &[2, 3, 130, 32], &[2, 3, 130, 70]), // more than one key chunk, Dv > 64
        (&[2, 1, 9, 4], &[1, 3, 11, 4], &[3, 11, 6]),          // broadcast batch dims
        (&[4, 65, 8], &[4, 65, 8], &[4, 65, 129]),
        (&[0, 5, 4], &[0, 5, 4], &[0, 5, 4]), // empty batch
        (&[3, 4], &[0, 4], &[0, 6]),          // no keys: zeros
        (&[0, 4], &[3, 4], &[3, 6]),          // no queries
    ];
    for dt in float_dtypes() {
        for (qs, ks, vs) in cases {
            for causal in [false, true] {
                check(&mut rng, qs, ks, vs, causal, None, dt);
            }
        }
    }
    check(&mut rng, &[6, 10], &[9, 10], &[9, 3], true, Some(0.7), DType::F32);
    check(&mut rng, &[6, 10], &[9, 10], &[9, 3], false, Some(-2.5), DType::F32);
}

#[test]
fn attention_softmax_is_stable_for_large_scores() {
    // Scores around 1e4 would overflow a naive exp.
    poison();
    let mut rng = Rng::new(32);
    let (q, qv) = rand_tensor(&mut rng, &[3, 4], DType::F32, 50.0, 60.0);
    let (k, kv) = rand_tensor(&mut rng, &[70, 4], DType::F32, 50.0, 60.0);
    let (v, vv) = rand_tensor(&mut rng, &[70, 2], DType::F32, -1.0, 1.0);
    let y = ops::attention(&q, &k, &v, false, Some(1.0)).unwrap().to_f64_vec().unwrap();
    assert!(y.iter().all(|v| v.is_finite()), "{y:?}");
    let (want, _) = cpu::attention(&qv, &[3, 4], &kv, &[70, 4], &vv, &[70, 2], false, Some(1.0)).unwrap();
    // Scores are ~1e4, so their f32 rounding moves the weights: compare loosely.
    assert_close("large scores", &y, &want, 5e-2, 0.0);
}

#[test]
fn attention_causal_first_row_is_first_value() {
    let mut rng = Rng::new(33);
    let (q, _) = rand_tensor(&mut rng, &[2, 5, 4], DType::F32, -1.0, 1.0);
    let (k, _) = rand_tensor(&mut rng, &[2, 8, 4], DType::F32, -1.0, 1.0);
    let (v, vv) = rand_tensor(&mut rng, &[2, 8, 3], DType::F32, -1.0, 1.0);
    let y = ops::attention(&q, &k, &v, true, None).unwrap().to_f64_vec().unwrap();
    for b in 0..2 {
        for t in 0..3 {
            let (g, w) = (y[b * 15 + t], vv[b * 24 + t]);
            assert!((g - w).abs() < 1e-6, "batch {b} dim {t}: {g} vs {w}");
        }
    }
}

#[test]
fn attention_errors() {
    let t = |shape: &[usize]| Tensor::from_slice(&vec![0.0f32; shape.iter().product()], shape).unwrap();
    let code = |q: &Tensor, k: &Tensor, v: &Tensor| ops::attention(q, k, v, false, None).unwrap_err().code();
    assert_eq!(code(&t(&[4, 8]), &t(&[5, 7]), &t(&[5, 3])), ErrorCode::ShapeMismatch);
    assert_eq!(code(&t(&[4, 8]), &t(&[5, 8]), &t(&[6, 3])), ErrorCode::ShapeMismatch);
    assert_eq!(code(&t(&[2, 4, 8]), &t(&[3, 5, 8]), &t(&[3, 5, 3])), ErrorCode::ShapeMismatch);
    assert_eq!(code(&t(&[8]), &t(&[5, 8]), &t(&[5, 3])), ErrorCode::ShapeMismatch);
    let ki = Tensor::from_slice(&[0i32; 40], &[5, 8]).unwrap();
    assert_eq!(code(&t(&[4, 8]), &ki, &t(&[5, 3])), ErrorCode::DTypeMismatch);
    let qi = Tensor::from_slice(&[0i32; 32], &[4, 8]).unwrap();
    assert_eq!(code(&qi, &ki, &Tensor::from_slice(&[0i32; 15], &[5, 3]).unwrap()), ErrorCode::DTypeMismatch);
}

#[test]
fn attention_is_deterministic() {
    let mut rng = Rng::new(34);
    let (q, _) = rand_tensor(&mut rng, &[2, 33, 16], DType::F32, -1.0, 1.0);
    let (k, _) = rand_tensor(&mut rng, &[2, 150, 16], DType::F32, -1.0, 1.0);
    let (v, _) = rand_tensor(&mut rng, &[2, 150, 20], DType::F32, -1.0, 1.0);
    let first = ops::attention(&q, &k, &v, true, None).unwrap().to_bytes().unwrap();
    for _ in 0..2 {
        assert_eq!(ops::attention(&q, &k, &v, true, None).unwrap().to_bytes().unwrap(), first);
    }
}

#[test]
fn attention_through_matmul_matches_reference() {
    // Problems with at least 2^16 scores and 64 keys take the f32 matmul path (s = q kᵀ, masked
    // softmax, p v; f16 cast to f32 and back); these shapes cross that line in each way the fused kernel is tested.
    poison();
    let mut rng = Rng::new(35);
    #[allow(clippy::type_complexity)]
    let cases: &[(&[usize], &[usize], &[usize])] = &[
        (&[2, 3, 200, 32], &[2, 3, 170, 32], &[2, 3, 170, 70]), // Lq > Lk, D != Dv
        (&[2, 1, 100, 16], &[1, 3, 300, 16], &[3, 300, 8]),     // broadcast batch dims
        (&[1, 67, 8], &[1, 1031, 8], &[1, 1031, 5]),            // Lq < Lk, prime lengths
        (&[70001, 8], &[64, 8], &[64, 3]),                      // more than 65535 rows
    ];
    for dt in float_dtypes() {
        for (qs, ks, vs) in cases {
            for causal in [false, true] {
                check(&mut rng, qs, ks, vs, causal, None, dt);
            }
        }
    }
    check(&mut rng, &[300, 10], &[257, 10], &[257, 3], true, Some(-2.5), DType::F32);
    // Same bytes on every run, as the fused kernel.
    let (q, _) = rand_tensor(&mut rng, &[2, 300, 16], DType::F32, -1.0, 1.0);
    let (k, _) = rand_tensor(&mut rng, &[2, 260, 16], DType::F32, -1.0, 1.0);
    let (v, _) = rand_tensor(&mut rng, &[2, 260, 20], DType::F32, -1.0, 1.0);
    let first = ops::attention(&q, &k, &v, true, None).unwrap().to_bytes().unwrap();
    assert_eq!(ops::attention(&q, &k, &v, true, None).unwrap().to_bytes().unwrap(), first);
}
