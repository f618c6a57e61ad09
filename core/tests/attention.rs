mod common;
use common::*;
use kiln_core::ops;
use kiln_core::ops::AttentionPath;
use kiln_core::reference::attention as cpu;
use kiln_core::{f16, DType, ErrorCode, Tensor};

fn check(rng: &mut Rng, qs: &[usize], ks: &[usize], vs: &[usize], causal: bool, scale: Option<f32>, dt: DType) {
    check_on(AttentionPath::Auto, rng, qs, ks, vs, causal, scale, dt)
}

#[allow(clippy::too_many_arguments)]
fn check_on(
    path: AttentionPath,
    rng: &mut Rng,
    qs: &[usize],
    ks: &[usize],
    vs: &[usize],
    causal: bool,
    scale: Option<f32>,
    dt: DType,
) {
    let (q, qv) = rand_tensor(rng, qs, dt, -2.0, 2.0);
    let (k, kv) = rand_tensor(rng, ks, dt, -2.0, 2.0);
    let (v, vv) = rand_tensor(rng, vs, dt, -1.0, 1.0);
    let what = format!("attention {path:?} q{qs:?} k{ks:?} v{vs:?} causal={causal} scale={scale:?} {dt}");
    let y = ops::attention_on_path(&q, &k, &v, None, causal, scale, path).unwrap_or_else(|e| panic!("{what}: {e}"));
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
    // The f32 matmul path (s = q kᵀ, masked softmax, p v; f16 cast to f32 and back), forced, on
    // the shapes it used to be chosen for (at least 2^16 scores and 64 keys).
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
                check_on(AttentionPath::Matmul, &mut rng, qs, ks, vs, causal, None, dt);
            }
        }
    }
    check_on(AttentionPath::Matmul, &mut rng, &[300, 10], &[257, 10], &[257, 3], true, Some(-2.5), DType::F32);
    // Same bytes on every run, as the fused kernel.
    let (q, _) = rand_tensor(&mut rng, &[2, 300, 16], DType::F32, -1.0, 1.0);
    let (k, _) = rand_tensor(&mut rng, &[2, 260, 16], DType::F32, -1.0, 1.0);
    let (v, _) = rand_tensor(&mut rng, &[2, 260, 20], DType::F32, -1.0, 1.0);
    let run = || ops::attention_on_path(&q, &k, &v, None, true, None, AttentionPath::Matmul).unwrap();
    let first = run().to_bytes().unwrap();
    assert_eq!(run().to_bytes().unwrap(), first);
}

const PATHS: [AttentionPath; 4] =
    [AttentionPath::Flash, AttentionPath::SplitKv, AttentionPath::Fused, AttentionPath::Matmul];

/// The forced paths to check for `dt` with head sizes `d`, `dv`: every path, and the
/// cooperative-matrix flash kernel where the device takes it.
fn paths_for(dt: DType, d: usize, dv: usize) -> Vec<AttentionPath> {
    let mut paths = PATHS.to_vec();
    if dt == DType::F16 && ops::uses_flash_coop(&kiln_core::device().unwrap(), d, dv) {
        paths.push(AttentionPath::FlashCoop);
    }
    if dt == DType::F16 && ops::uses_attention_native(&kiln_core::device().unwrap(), d, dv) {
        paths.push(AttentionPath::Native);
    }
    paths
}

/// A tensor of `dt` holding `vals` (already representable in `dt`).
fn tensor_of(vals: &[f64], shape: &[usize], dt: DType) -> Tensor {
    match dt {
        DType::F16 => Tensor::from_slice(&vals.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>(), shape),
        _ => Tensor::from_slice(&vals.iter().map(|&x| x as f32).collect::<Vec<_>>(), shape),
    }
    .unwrap()
}

#[allow(clippy::too_many_arguments)]
fn check_path(
    path: AttentionPath,
    (q, qv, qs): (&Tensor, &[f64], &[usize]),
    (k, kv, ks): (&Tensor, &[f64], &[usize]),
    (v, vv, vs): (&Tensor, &[f64], &[usize]),
    mask: Option<(&Tensor, &[f64], &[usize])>,
    causal: bool,
    scale: Option<f32>,
    atol: f64,
) {
    let dt = q.dtype();
    let what =
        format!("{path:?} q{qs:?} k{ks:?} v{vs:?} mask {:?} causal={causal} scale={scale:?} {dt}", mask.map(|m| m.2));
    let y = ops::attention_on_path(q, k, v, mask.map(|m| m.0), causal, scale, path)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = y.to_f64_vec().unwrap_or_else(|e| panic!("{what}: {e}"));
    let (want, shape) =
        cpu::attention_with_mask(qv, qs, kv, ks, vv, vs, mask.map(|m| (m.1, m.2)), causal, scale.map(|s| s as f64))
            .unwrap();
    assert_eq!(y.shape(), &shape[..], "{what}");
    let rtol = if dt == DType::F16 { 3e-3 } else { 1e-4 };
    assert_close(&what, &got, &want, atol, rtol);
}

fn atol(dt: DType) -> f64 {
    if dt == DType::F16 {
        3e-3
    } else {
        2e-5
    }
}

#[test]
fn every_path_matches_reference_on_awkward_lengths() {
    // Each forced path on Lq, Lk in {0, 1, 7, 64, 65, 257} (one tile, one past it, several;
    // split-KV with several splits, some empty under causal), D cycling through 1, 16, 64, 80,
    // with broadcast batch dimensions on some.
    poison();
    let mut rng = Rng::new(41);
    let lens = [0usize, 1, 7, 64, 65, 257];
    let ds = [1usize, 16, 64, 80];
    let mut n = 0;
    for dt in float_dtypes() {
        for &lq in &lens {
            for &lk in &lens {
                let d = ds[n % ds.len()];
                let dv = ds[(n / 2) % ds.len()];
                n += 1;
                let (qb, kb): (&[usize], &[usize]) = if n % 3 == 0 { (&[2, 1], &[1, 3]) } else { (&[2], &[2]) };
                let qs = [qb, &[lq, d]].concat();
                let ks = [kb, &[lk, d]].concat();
                let vs = [kb, &[lk, dv]].concat();
                let (q, qv) = rand_tensor(&mut rng, &qs, dt, -2.0, 2.0);
                let (k, kv) = rand_tensor(&mut rng, &ks, dt, -2.0, 2.0);
                let (v, vv) = rand_tensor(&mut rng, &vs, dt, -1.0, 1.0);
                for path in paths_for(dt, d, dv) {
                    for causal in [false, true] {
                        check_path(path, (&q, &qv, &qs), (&k, &kv, &ks), (&v, &vv, &vs), None, causal, None, atol(dt));
                    }
                }
            }
        }
    }
}

#[test]
fn masks_match_reference() {
    // Key padding ([B, 1, 1, Lk], -inf on the padded keys), a full random bias [Lq, Lk] with
    // whole rows at -inf (those rows give zeros), a 1-D bias over the keys; on the two paths
    // that take a mask and on Auto.
    poison();
    let mut rng = Rng::new(42);
    let ninf = f64::NEG_INFINITY;
    for dt in float_dtypes() {
        for (lq, lk, d) in [(7usize, 65usize, 16usize), (65, 7, 64), (1, 257, 80), (70, 130, 8)] {
            let (b, h) = (2usize, 3usize);
            let qs = [b, h, lq, d];
            let ks = [b, h, lk, d];
            let (q, qv) = rand_tensor(&mut rng, &qs, dt, -2.0, 2.0);
            let (k, kv) = rand_tensor(&mut rng, &ks, dt, -2.0, 2.0);
            let (v, vv) = rand_tensor(&mut rng, &ks, dt, -1.0, 1.0);
            // Batch 0 keeps every key, batch 1 keeps the first lk / 2 + 1.
            let pad_shape = [b, 1, 1, lk];
            let pad: Vec<f64> = (0..b * lk).map(|e| if e / lk == 1 && e % lk > lk / 2 { ninf } else { 0.0 }).collect();
            let bias_shape = [lq, lk];
            let mut bias: Vec<f64> = (0..lq * lk).map(|_| rng.uniform(-3.0, 3.0)).collect();
            for j in 0..lk {
                bias[(lq / 2) * lk + j] = ninf; // a row with every key masked
            }
            let bias: Vec<f64> = tensor_of(&bias, &bias_shape, dt).to_f64_vec().unwrap();
            let keys_shape = [lk];
            let keys: Vec<f64> = (0..lk).map(|j| if j % 3 == 1 { ninf } else { (j % 5) as f64 - 2.0 }).collect();
            for (mv, ms) in [(&pad, &pad_shape[..]), (&bias, &bias_shape[..]), (&keys, &keys_shape[..])] {
                let m = tensor_of(mv, ms, dt);
                let coop = paths_for(dt, d, d).contains(&AttentionPath::FlashCoop);
                let with_coop =
                    [AttentionPath::Flash, AttentionPath::SplitKv, AttentionPath::Auto, AttentionPath::FlashCoop];
                for &path in &with_coop[..if coop { 4 } else { 3 }] {
                    for causal in [false, true] {
                        check_path(
                            path,
                            (&q, &qv, &qs),
                            (&k, &kv, &ks),
                            (&v, &vv, &ks),
                            Some((&m, mv, ms)),
                            causal,
                            None,
                            atol(dt),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn all_masked_rows_give_zeros() {
    let mut rng = Rng::new(43);
    let (q, _) = rand_tensor(&mut rng, &[2, 5, 8], DType::F32, -1.0, 1.0);
    let (k, _) = rand_tensor(&mut rng, &[2, 9, 8], DType::F32, -1.0, 1.0);
    let (v, _) = rand_tensor(&mut rng, &[2, 9, 3], DType::F32, -1.0, 1.0);
    let m = Tensor::from_slice(&[f32::NEG_INFINITY; 9], &[9]).unwrap();
    for path in [AttentionPath::Flash, AttentionPath::SplitKv] {
        let y = ops::attention_on_path(&q, &k, &v, Some(&m), false, None, path).unwrap().to_vec::<f32>().unwrap();
        assert!(y.iter().all(|&x| x == 0.0), "{path:?}: {y:?}");
    }
}

#[test]
fn special_values_on_every_path() {
    // Scores near ±1e4 (a naive exp overflows), and NaN / inf in values a causal row never sees:
    // skipped, not weighted by zero (the matmul path multiplies them by 0, so it is left out
    // of that half).
    poison();
    let mut rng = Rng::new(44);
    for path in PATHS {
        let (q, qv) = rand_tensor(&mut rng, &[2, 9, 4], DType::F32, 50.0, 60.0);
        let (k, kv) = rand_tensor(&mut rng, &[2, 70, 4], DType::F32, -60.0, 60.0);
        let (v, vv) = rand_tensor(&mut rng, &[2, 70, 2], DType::F32, -1.0, 1.0);
        let y = ops::attention_on_path(&q, &k, &v, None, false, Some(1.0), path).unwrap().to_f64_vec().unwrap();
        let (want, _) = cpu::attention(&qv, &[2, 9, 4], &kv, &[2, 70, 4], &vv, &[2, 70, 2], false, Some(1.0)).unwrap();
        assert_close(&format!("{path:?} large scores"), &y, &want, 5e-2, 0.0);
        if path == AttentionPath::Matmul {
            continue;
        }
        let (q, qv) = rand_tensor(&mut rng, &[1, 6, 4], DType::F32, -1.0, 1.0);
        let (k, kv) = rand_tensor(&mut rng, &[1, 80, 4], DType::F32, -1.0, 1.0);
        let mut vv: Vec<f64> = (0..80 * 2).map(|_| rng.uniform(-1.0, 1.0)).collect();
        for (e, x) in vv.iter_mut().enumerate().skip(6 * 2) {
            *x = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY][e % 3];
        }
        let v = tensor_of(&vv, &[1, 80, 2], DType::F32);
        let y = ops::attention_on_path(&q, &k, &v, None, true, None, path).unwrap().to_f64_vec().unwrap();
        let (want, _) = cpu::attention(&qv, &[1, 6, 4], &kv, &[1, 80, 4], &vv, &[1, 80, 2], true, None).unwrap();
        assert!(y.iter().all(|x| x.is_finite()), "{path:?}: {y:?}");
        assert_close(&format!("{path:?} non-finite masked values"), &y, &want, 2e-5, 1e-4);
    }
}

/// The flash path's two kernels (register-blocked, the default where D, Dv <= 64 fit, and one
/// row per thread), forced in turn: ragged lengths around the 64-row and 32-key tiles, D and Dv
/// not multiples of 4 (scalar loaders) or of 32 (threads without output columns), causal with
/// Lq != Lk, a mask, and NaN / inf in values and keys that only some rows of a tile see.
#[test]
fn flash_kernels_match_reference() {
    poison();
    let mut rng = Rng::new(46);
    let cases: [(usize, usize, usize, usize); 7] = [
        (1, 1, 4, 4),
        (7, 65, 64, 64),
        (65, 33, 16, 8),
        (100, 100, 63, 36),
        (130, 70, 64, 20),
        (64, 257, 8, 64),
        (33, 0, 4, 4),
    ];
    for dt in float_dtypes() {
        for (lq, lk, d, dv) in cases {
            let (qs, ks, vs) = ([2, lq, d], [2, lk, d], [2, lk, dv]);
            let (q, qv) = rand_tensor(&mut rng, &qs, dt, -2.0, 2.0);
            let (k, kv) = rand_tensor(&mut rng, &ks, dt, -2.0, 2.0);
            let (v, vv) = rand_tensor(&mut rng, &vs, dt, -1.0, 1.0);
            let mshape = [lq, lk];
            let mv: Vec<f64> =
                (0..lq * lk).map(|e| if e % 7 == 3 { f64::NEG_INFINITY } else { ((e % 5) as f64) - 2.0 }).collect();
            let m = tensor_of(&mv, &mshape, dt);
            for blocked in [true, false] {
                for causal in [false, true] {
                    for mask in [None, Some((&m, &mv[..], &mshape[..]))] {
                        ops::with_flash_blocking(blocked, || {
                            check_path(
                                AttentionPath::Flash,
                                (&q, &qv, &qs),
                                (&k, &kv, &ks),
                                (&v, &vv, &vs),
                                mask,
                                causal,
                                None,
                                atol(dt),
                            )
                        });
                    }
                }
            }
        }
    }
    // Causal rows never see the NaN / inf of later keys, also inside a tile that earlier rows
    // of the same workgroup share; rows that do see them give what the reference gives.
    let (n, d) = (100usize, 8usize);
    let (q, qv) = rand_tensor(&mut rng, &[1, n, d], DType::F32, -1.0, 1.0);
    let mut kv: Vec<f64> = (0..n * d).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let mut vv: Vec<f64> = (0..n * d).map(|_| rng.uniform(-1.0, 1.0)).collect();
    vv[41 * d + 3] = f64::NAN;
    vv[70 * d] = f64::INFINITY;
    kv[90 * d + 1] = f64::INFINITY;
    let (k, v) = (tensor_of(&kv, &[1, n, d], DType::F32), tensor_of(&vv, &[1, n, d], DType::F32));
    let (want, _) = cpu::attention(&qv, &[1, n, d], &kv, &[1, n, d], &vv, &[1, n, d], true, None).unwrap();
    for blocked in [true, false] {
        let y = ops::with_flash_blocking(blocked, || {
            ops::attention_on_path(&q, &k, &v, None, true, None, AttentionPath::Flash)
        })
        .unwrap()
        .to_f64_vec()
        .unwrap();
        assert!(y[..41 * d].iter().all(|x| x.is_finite()), "blocked={blocked}: rows before the NaN");
        assert_close(&format!("flash blocked={blocked} non-finite keys and values"), &y, &want, 2e-5, 1e-4);
    }
}

#[test]
fn flash_and_split_are_deterministic() {
    let mut rng = Rng::new(45);
    let (q, _) = rand_tensor(&mut rng, &[2, 70, 16], DType::F32, -1.0, 1.0);
    let (k, _) = rand_tensor(&mut rng, &[2, 300, 16], DType::F32, -1.0, 1.0);
    let (v, _) = rand_tensor(&mut rng, &[2, 300, 20], DType::F32, -1.0, 1.0);
    for path in [AttentionPath::Flash, AttentionPath::SplitKv] {
        let run = || ops::attention_on_path(&q, &k, &v, None, true, None, path).unwrap().to_bytes().unwrap();
        let first = run();
        assert_eq!(run(), first, "{path:?}");
    }
}

#[test]
fn mask_errors() {
    let t = |shape: &[usize]| Tensor::from_slice(&vec![0.0f32; shape.iter().product()], shape).unwrap();
    let (q, k, v) = (t(&[2, 4, 8]), t(&[2, 5, 8]), t(&[2, 5, 3]));
    let code = |m: &Tensor, path| ops::attention_on_path(&q, &k, &v, Some(m), false, None, path).unwrap_err().code();
    assert_eq!(code(&t(&[4, 4]), AttentionPath::Auto), ErrorCode::ShapeMismatch);
    assert_eq!(code(&t(&[3, 4, 5]), AttentionPath::Auto), ErrorCode::ShapeMismatch);
    assert_eq!(code(&t(&[1, 2, 4, 5]), AttentionPath::Auto), ErrorCode::ShapeMismatch);
    let mi = Tensor::from_slice(&[0i32; 5], &[5]).unwrap();
    assert_eq!(code(&mi, AttentionPath::Auto), ErrorCode::DTypeMismatch);
    assert_eq!(code(&t(&[5]), AttentionPath::Fused), ErrorCode::InvalidArgument);
    assert_eq!(code(&t(&[5]), AttentionPath::Matmul), ErrorCode::InvalidArgument);
    let wide = t(&[1, 300]);
    let e = ops::attention_on_path(&wide, &wide, &wide, None, false, None, AttentionPath::Flash).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
    // The mask form without a mask is `attention`.
    assert_eq!(
        ops::attention_with_mask(&q, &k, &v, None, true, None).unwrap().to_bytes().unwrap(),
        ops::attention(&q, &k, &v, true, None).unwrap().to_bytes().unwrap()
    );
}

#[test]
fn split_kv_with_several_steps_per_split() {
    // 512 rows leave room for only two splits of 257 keys (the path aims at about 1024
    // workgroups), so each split walks several 64-key steps and rescales between them; both the
    // vec4 kernel (D, Dv multiples of 4) and the scalar one, with and without a mask.
    poison();
    let mut rng = Rng::new(46);
    for dt in float_dtypes() {
        for (d, dv) in [(16usize, 8usize), (3, 5)] {
            let (qs, ks, vs) = ([128, 4, d], [128, 257, d], [128, 257, dv]);
            let (q, qv) = rand_tensor(&mut rng, &qs, dt, -2.0, 2.0);
            let (k, kv) = rand_tensor(&mut rng, &ks, dt, -2.0, 2.0);
            let (v, vv) = rand_tensor(&mut rng, &vs, dt, -1.0, 1.0);
            let mv: Vec<f64> = (0..257).map(|j| if j % 7 == 3 { f64::NEG_INFINITY } else { (j % 3) as f64 }).collect();
            let m = tensor_of(&mv, &[257], dt);
            for mask in [None, Some((&m, &mv[..], &[257usize][..]))] {
                for causal in [false, true] {
                    check_path(
                        AttentionPath::SplitKv,
                        (&q, &qv, &qs),
                        (&k, &kv, &ks),
                        (&v, &vv, &vs),
                        mask,
                        causal,
                        None,
                        atol(dt),
                    );
                }
            }
        }
    }
}

/// The cooperative-matrix flash kernel's WGSL goes through naga (parse, validate, SPIR-V) on
/// every machine, so a template error shows here even where no device can run it.
#[test]
fn flash_coop_kernel_validates() {
    for sg in [16, 32, 64] {
        for bc in [16, 32, 64] {
            for (d, dv) in [(16, 16), (64, 64), (128, 128), (80, 48)] {
                for (mask, nsg, vec, halves) in [
                    (false, 4, false, false),
                    (true, 4, true, false),
                    (false, 8, true, false),
                    (true, 8, false, false),
                    (false, 8, true, true),
                    (true, 8, true, true),
                ] {
                    // In halves each invocation's share of a half is whole vec4s.
                    if halves && (bc < 32 || (bc / 2 / (sg / 16)) % 4 != 0) {
                        continue;
                    }
                    let src = ops::flash_coop_source_for_tests(sg, bc, d, dv, nsg, mask, vec, halves);
                    let what = format!(
                        "subgroup {sg}, {bc} keys, D {d}, Dv {dv}, mask {mask}, {nsg} subgroups, vec4 tiles {vec}, \
                         halves {halves}"
                    );
                    assert_wgsl_compiles(&what, &src);
                }
            }
        }
    }
}

/// f16 attention at model-like sizes on the cooperative-matrix kernel (where the device has it)
/// against the reference: causal and not, a key-padding mask, a prefix of a longer cache.
#[test]
fn flash_coop_matches_reference_at_model_sizes() {
    let dev = kiln_core::device().unwrap();
    if !ops::uses_flash_coop(&dev, 64, 64) {
        eprintln!("no cooperative-matrix flash kernel on this device: skipped");
        return;
    }
    poison();
    let mut rng = Rng::new(47);
    for (b, h, lq, lk, d) in [(1usize, 2usize, 300usize, 300usize, 64usize), (2, 2, 129, 517, 128), (1, 3, 64, 64, 16)]
    {
        let dt = DType::F16;
        let qs = [b, h, lq, d];
        let ks = [b, h, lk, d];
        let (q, qv) = rand_tensor(&mut rng, &qs, dt, -3.0, 3.0);
        let (k, kv) = rand_tensor(&mut rng, &ks, dt, -3.0, 3.0);
        let (v, vv) = rand_tensor(&mut rng, &ks, dt, -1.0, 1.0);
        for causal in [false, true] {
            check_path(
                AttentionPath::FlashCoop,
                (&q, &qv, &qs),
                (&k, &kv, &ks),
                (&v, &vv, &ks),
                None,
                causal,
                None,
                atol(dt),
            );
        }
        let pad_shape = [b, 1, 1, lk];
        let pad: Vec<f64> =
            (0..b * lk).map(|e| if e % lk > (lk * (1 + e / lk)) / 3 { f64::NEG_INFINITY } else { 0.0 }).collect();
        let m = tensor_of(&pad, &pad_shape, dt);
        check_path(
            AttentionPath::FlashCoop,
            (&q, &qv, &qs),
            (&k, &kv, &ks),
            (&v, &vv, &ks),
            Some((&m, &pad, &pad_shape)),
            true,
            Some(0.3),
            atol(dt),
        );
        // A prefix of the keys read in place equals attention over a copy of it.
        let len = lk / 2 + 1;
        let y = ops::attention_prefix(&q, &k, &v, len, true, None).unwrap().to_f64_vec().unwrap();
        let kp: Vec<f64> = kv.chunks(lk * d).flat_map(|c| c[..len * d].to_vec()).collect();
        let vp: Vec<f64> = vv.chunks(lk * d).flat_map(|c| c[..len * d].to_vec()).collect();
        let (want, _) = cpu::attention(&qv, &qs, &kp, &[b, h, len, d], &vp, &[b, h, len, d], true, None).unwrap();
        assert_close(&format!("prefix {len} of {lk}"), &y, &want, atol(dt), 3e-3);
    }
    // Large scores: the running maximum moves many times (rescaling through the scratch).
    let (q, qv) = rand_tensor(&mut rng, &[1, 1, 70, 16], DType::F16, 5.0, 8.0);
    let (k, kv) = rand_tensor(&mut rng, &[1, 1, 200, 16], DType::F16, -8.0, 8.0);
    let (v, vv) = rand_tensor(&mut rng, &[1, 1, 200, 16], DType::F16, -1.0, 1.0);
    let s = [1usize, 1, 70, 16];
    let ks = [1usize, 1, 200, 16];
    check_path(AttentionPath::FlashCoop, (&q, &qv, &s), (&k, &kv, &ks), (&v, &vv, &ks), None, false, Some(1.0), 2e-2);
}

/// What the cooperative-matrix kernels rely on, on a device that has them: `coopLoadT` reads a
/// row-major tile and `coopLoad` a column-major one (its transpose), from workgroup memory at
/// the strides and offsets the kernel uses; and the kernel on one key gives that key's values.
#[test]
fn coop_load_layouts_on_device() {
    let dev = kiln_core::device().unwrap();
    if !ops::uses_flash_coop(&dev, 16, 16) {
        eprintln!("no cooperative matrices: skipped");
        return;
    }
    let row: Vec<f32> = (0..256).map(|e| e as f32).collect();
    let col: Vec<f32> = (0..256).map(|e| ((e % 16) * 16 + e / 16) as f32).collect();
    // [A's row stride, C's row stride, A's offset, C's offset], in elements: the strides and
    // offsets the attention kernel uses.
    for cfg in [[24u32, 16u32, 0u32, 0u32], [72, 68, 0, 0], [24, 68, 0, 0], [72, 16, 1152, 0], [72, 68, 2304, 2176]] {
        let got = ops::coop_layout_probe(&dev, cfg).unwrap();
        assert_eq!(&got[..256], &row[..], "{cfg:?}: coopLoadT is row-major");
        assert_eq!(&got[256..], &col[..], "{cfg:?}: coopLoad is column-major");
    }
    // One key: the output is that key's value row.
    let q = Tensor::from_slice(&[f16::from_f32(0.5); 16], &[1, 1, 16]).unwrap();
    let vs: Vec<f16> = (0..16).map(|e| f16::from_f32(e as f32 / 16.0)).collect();
    let v = Tensor::from_slice(&vs, &[1, 1, 16]).unwrap();
    let y = ops::attention_on_path(&q, &q, &v, None, false, None, AttentionPath::FlashCoop).unwrap();
    assert_eq!(y.to_vec::<f16>().unwrap(), vs);
}

// ---- split-KV decode kernels (the coalesced score loads, the parallel combine) ----

/// The vec4 decode kernel reads a step's K rows as one block in f32 where D / 4 divides 64 (D =
/// 4 .. 128) and row by row elsewhere (D = 12, 256, and f16); each
/// with a partial last step (150 and 5 keys), a mask, causal rows (Lq = 2), Dv unlike D, and a
/// few splits (the serial combine).
#[test]
fn decode_kernel_score_loads_match_reference() {
    poison();
    let mut rng = Rng::new(61);
    for dt in float_dtypes() {
        for (d, dv) in [(4usize, 8usize), (8, 4), (16, 16), (32, 64), (64, 64), (128, 32), (12, 20), (256, 8)] {
            for lk in [5usize, 150] {
                let (qs, ks, vs) = ([2, 3, 2, d], [2, 1, lk, d], [2, 1, lk, dv]);
                let (q, qv) = rand_tensor(&mut rng, &qs, dt, -2.0, 2.0);
                let (k, kv) = rand_tensor(&mut rng, &ks, dt, -2.0, 2.0);
                let (v, vv) = rand_tensor(&mut rng, &vs, dt, -1.0, 1.0);
                let mv: Vec<f64> =
                    (0..lk).map(|j| if j % 5 == 1 { f64::NEG_INFINITY } else { j as f64 / 64.0 }).collect();
                let m = tensor_of(&mv, &[lk], dt);
                for (mask, causal) in [(None, false), (None, true), (Some((&m, &mv[..], &[lk][..])), false)] {
                    check_path(
                        AttentionPath::SplitKv,
                        (&q, &qv, &qs),
                        (&k, &kv, &ks),
                        (&v, &vv, &vs),
                        mask,
                        causal,
                        None,
                        atol(dt),
                    );
                }
            }
        }
    }
}

/// One row over 4500 keys takes 71 splits: more than the combine's 64 threads, so each thread
/// weighs several splits. The mask drops whole splits of row 0 (their max stays the lowest
/// float beside finite ones) and every key of row 1 (zeros).
#[test]
fn decode_combine_over_more_splits_than_threads() {
    poison();
    let mut rng = Rng::new(62);
    let lk = 4500;
    for dt in float_dtypes() {
        let (qs, ks, vs) = ([2, 64], [lk, 64], [lk, 72]);
        let (q, qv) = rand_tensor(&mut rng, &qs, dt, -2.0, 2.0);
        let (k, kv) = rand_tensor(&mut rng, &ks, dt, -2.0, 2.0);
        let (v, vv) = rand_tensor(&mut rng, &vs, dt, -1.0, 1.0);
        let mv: Vec<f64> =
            (0..2 * lk).map(|e| if e >= lk || (e / 300) % 3 == 1 { f64::NEG_INFINITY } else { 0.0 }).collect();
        let m = tensor_of(&mv, &[2, lk], dt);
        for mask in [None, Some((&m, &mv[..], &[2, lk][..]))] {
            check_path(
                AttentionPath::SplitKv,
                (&q, &qv, &qs),
                (&k, &kv, &ks),
                (&v, &vv, &vs),
                mask,
                false,
                None,
                atol(dt),
            );
        }
        let y = ops::attention_on_path(&q, &k, &v, Some(&m), false, None, AttentionPath::SplitKv).unwrap();
        assert!(y.to_f64_vec().unwrap()[72..].iter().all(|&x| x == 0.0), "a row with every key masked gives zeros");
    }
}

/// The decode path twice on the same inputs gives the same bytes (its sums run in an order
/// fixed by the shape), and Auto takes it for a decode-shaped f16 call.
#[test]
fn decode_path_is_deterministic() {
    let mut rng = Rng::new(63);
    for dt in float_dtypes() {
        let (q, _) = rand_tensor(&mut rng, &[3, 3, 1, 64], dt, -1.0, 1.0);
        let (k, _) = rand_tensor(&mut rng, &[3, 1, 700, 64], dt, -1.0, 1.0);
        let (v, _) = rand_tensor(&mut rng, &[3, 1, 700, 64], dt, -1.0, 1.0);
        let run = |path| ops::attention_on_path(&q, &k, &v, None, false, None, path).unwrap().to_bytes().unwrap();
        let first = run(AttentionPath::SplitKv);
        assert_eq!(run(AttentionPath::SplitKv), first, "{dt}");
        assert_eq!(run(AttentionPath::Auto), first, "{dt}: Auto takes split-KV for one query");
    }
}

// ---- The flash kernels' softmax exp2 (shaders/flash_exp2.wgsl): its accuracy over the whole
// range the softmax gives it, its cut-off below 2^-126, and NaN from q or k.

/// Two keys per row, k = [0, -1], v = [0, 1]: row i's second score is exactly x_i =
/// -(t_i * scale * log2 e) in f32 (what the kernel computes), so its output is 2^x / (1 + 2^x)
/// with only a few roundings besides the exp2's. x runs from 0 past -126, below which the weight
/// (a subnormal) is 0 on every device: far under any output's tolerance.
#[test]
fn flash_exp2_accuracy_over_the_softmax_range() {
    let n = 300usize;
    let ts: Vec<f32> = (0..n).map(|i| i as f32 * 0.3).collect();
    let q = Tensor::from_slice(&ts, &[n, 1]).unwrap();
    let k = Tensor::from_slice(&[0.0f32, -1.0], &[2, 1]).unwrap();
    let v = Tensor::from_slice(&[0.0f32, 1.0], &[2, 1]).unwrap();
    let scale2 = 1.0f32 * std::f32::consts::LOG2_E;
    for blocked in [true, false] {
        let y = ops::with_flash_blocking(blocked, || {
            ops::attention_on_path(&q, &k, &v, None, false, Some(1.0), AttentionPath::Flash)
        })
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
        for (i, (&t, &g)) in ts.iter().zip(&y).enumerate() {
            let x = -(t * scale2) as f64;
            let p = x.exp2();
            let want = p / (1.0 + p);
            let err = (g as f64 - want).abs();
            let bound = if x < -126.0 { want } else { 1e-6 * want };
            assert!(err <= bound, "blocked={blocked} row {i}: x = {x}: got {g:e}, want {want:e}");
        }
    }
}

/// A NaN in one row of q makes that row NaN, and a NaN in one key makes every row that sees the
/// key NaN, on both flash kernels (the exp2's clamp must not turn NaN into a finite weight).
#[test]
fn flash_nan_in_q_or_k_gives_nan_rows() {
    let mut rng = Rng::new(4732);
    let (lq, lk, d) = (70usize, 90usize, 8usize);
    let mut qv: Vec<f64> = (0..lq * d).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let mut kv: Vec<f64> = (0..lk * d).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let vv: Vec<f64> = (0..lk * d).map(|_| rng.uniform(-1.0, 1.0)).collect();
    qv[5 * d + 2] = f64::NAN;
    kv[40 * d + 7] = f64::NAN;
    let (q, k, v) = (
        tensor_of(&qv, &[1, lq, d], DType::F32),
        tensor_of(&kv, &[1, lk, d], DType::F32),
        tensor_of(&vv, &[1, lk, d], DType::F32),
    );
    for causal in [false, true] {
        let (mut want, _) = cpu::attention(&qv, &[1, lq, d], &kv, &[1, lk, d], &vv, &[1, lk, d], causal, None).unwrap();
        // Row 5's scores are all NaN: the reference's running max skips NaN and takes the row for
        // fully masked (zeros); PyTorch gives NaN there, and so do the kernels.
        want[5 * d..6 * d].fill(f64::NAN);
        let nan_rows = (0..lq).filter(|&i| want[i * d].is_nan()).count();
        assert_eq!(nan_rows, if causal { 1 + (40..lq).count() } else { lq }, "causal={causal}: the reference");
        for blocked in [true, false] {
            let y = ops::with_flash_blocking(blocked, || {
                ops::attention_on_path(&q, &k, &v, None, causal, None, AttentionPath::Flash)
            })
            .unwrap()
            .to_f64_vec()
            .unwrap();
            assert_close(&format!("blocked={blocked} causal={causal} NaN in q and k"), &y, &want, 2e-5, 1e-4);
        }
    }
}

/// The f32 flash kernel's timing-only variants (`KILN_FLASH_PART`) each cut something out of
/// the source (a measurement under one is never silently the whole kernel) and still compile.
#[test]
fn flash_timing_parts_change_the_kernel_and_validate() {
    use wgpu::naga;
    for (part, whole, cut) in ops::flash_part_sources_for_tests() {
        assert_ne!(whole, cut, "{part}: nothing cut");
        assert!(cut.len() < whole.len(), "{part}");
        let module =
            naga::front::wgsl::parse_str(&cut).unwrap_or_else(|e| panic!("{part}: {}", e.emit_to_string(&cut)));
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{part}: {e:?}"));
    }
}

// ---- One-pass decode attention (KILN_DECODE_FUSE): the split-KV combine folded into the vec4
// split kernel, the last workgroup of each row merging it.

/// Bits of a result, NaN payloads and all.
fn bits(t: &Tensor) -> Vec<u8> {
    t.to_bytes().unwrap()
}

/// The one-pass kernel's merge is the two-pass combine's code, the same sums in the same order:
/// on lavapipe the bytes are equal; a driver may contract its multiply-adds differently in the
/// two shaders (the H200's NVIDIA driver did: 120 of 576 values 1-2 ulps apart, no other
/// difference, the same bytes on every repeat). So: NaN where the other has NaN, equal
/// infinities, finite values within 4 ulps of the dtype; panics with how far apart they are.
fn same_bits(a: &Tensor, b: &Tensor, what: &str) {
    if bits(a) == bits(b) {
        return;
    }
    let ulp = if a.dtype() == DType::F16 { 2f64.powi(-10) } else { 2f64.powi(-23) };
    let (x, y) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
    let bad: Vec<usize> = (0..x.len())
        .filter(|&i| {
            let (p, q) = (x[i], y[i]);
            if p.is_nan() || q.is_nan() || p.is_infinite() || q.is_infinite() {
                return !(p.is_nan() && q.is_nan()) && p != q;
            }
            (p - q).abs() > 4.0 * ulp * p.abs().max(q.abs()).max(f64::MIN_POSITIVE)
        })
        .collect();
    let max =
        (0..x.len()).filter(|&i| x[i].is_finite() && y[i].is_finite()).map(|i| (x[i] - y[i]).abs()).fold(0.0, f64::max);
    let first = bad.first().map(|&i| (i, x[i], y[i]));
    assert!(
        bad.is_empty(),
        "{what}: {} of {} elements past 4 ulps, max |diff| {max:e}, first {first:?}",
        bad.len(),
        x.len()
    );
}

/// The one-pass kernel gives the two-pass path's bytes (the merge is the combine kernel's code,
/// the same sums in the same order) and the CPU reference's values, for every split count:
/// SmolLM2's decode shape (3 KV heads x 3 queries, D 64) over 1, 63, 64, 65, 255, 256, 257 and
/// 2049 keys of a larger cache, one row over 4500 keys (71 splits: more than the merge's 64
/// threads), with a mask that drops whole splits and every key of a row, causal rows, f32 and
/// f16. Each is run three times in a row: a counter the kernel failed to reset would make the
/// next call merge too early or never.
#[test]
fn decode_one_pass_equals_two_pass_for_every_split_count() {
    poison();
    let mut rng = Rng::new(64);
    for dt in float_dtypes() {
        for len in [1usize, 63, 64, 65, 255, 256, 257, 2049] {
            let cap = len + 37;
            let (qs, ks) = ([3, 3, 1, 64], [3, 1, cap, 64]);
            let (q, qv) = rand_tensor(&mut rng, &qs, dt, -2.0, 2.0);
            let (k, kv) = rand_tensor(&mut rng, &ks, dt, -2.0, 2.0);
            let (v, vv) = rand_tensor(&mut rng, &ks, dt, -1.0, 1.0);
            let two = ops::with_decode_fusion(false, || ops::attention_prefix(&q, &k, &v, len, false, None)).unwrap();
            for _ in 0..3 {
                let one =
                    ops::with_decode_fusion(true, || ops::attention_prefix(&q, &k, &v, len, false, None)).unwrap();
                same_bits(&one, &two, &format!("{dt} len {len}"));
            }
            let prefix = |t: &[f64]| -> Vec<f64> {
                (0..3).flat_map(|b| t[b * cap * 64..(b * cap + len) * 64].to_vec()).collect()
            };
            let shape = [3, 1, len, 64];
            let (want, _) = cpu::attention(&qv, &qs, &prefix(&kv), &shape, &prefix(&vv), &shape, false, None).unwrap();
            assert_close(&format!("{dt} len {len}"), &two.to_f64_vec().unwrap(), &want, atol(dt), 4e-3);
        }
        let lk = 4500;
        let (qs, ks, vs) = ([2, 2, 64], [lk, 64], [lk, 72]);
        let (q, _) = rand_tensor(&mut rng, &qs, dt, -2.0, 2.0);
        let (k, _) = rand_tensor(&mut rng, &ks, dt, -2.0, 2.0);
        let (v, _) = rand_tensor(&mut rng, &vs, dt, -1.0, 1.0);
        let mv: Vec<f64> =
            (0..2 * lk).map(|e| if e >= lk || (e / 300) % 3 == 1 { f64::NEG_INFINITY } else { 0.0 }).collect();
        let m = tensor_of(&mv, &[2, lk], dt);
        for (mask, causal) in [(None, false), (Some(&m), false), (None, true)] {
            let run = |on| {
                ops::with_decode_fusion(on, || {
                    ops::attention_on_path(&q, &k, &v, mask, causal, None, AttentionPath::SplitKv).unwrap()
                })
            };
            let two = run(false);
            for _ in 0..3 {
                same_bits(&run(true), &two, &format!("{dt} 4500 keys mask {} causal {causal}", mask.is_some()));
            }
        }
    }
}

/// NaN and infinities reach the output as they do through the two-pass path: a NaN key poisons
/// its row, an infinite score takes all the weight or gives NaN (inf - inf), an infinite value
/// gives inf or NaN; the other rows keep their values.
#[test]
fn decode_one_pass_propagates_nan_and_inf_as_two_pass() {
    let mut rng = Rng::new(65);
    for dt in float_dtypes() {
        let len = 300;
        let (q, _) = rand_tensor(&mut rng, &[4, 1, 1, 64], dt, -1.0, 1.0);
        let (k, mut kv) = rand_tensor(&mut rng, &[4, 1, len, 64], dt, -1.0, 1.0);
        let (v, mut vv) = rand_tensor(&mut rng, &[4, 1, len, 64], dt, -1.0, 1.0);
        kv[10 * 64 + 3] = f64::NAN; // row 0: a NaN key
        kv[(len + 200) * 64] = 1e30; // row 1: a huge score (inf in f16)
        vv[(2 * len + 70) * 64 + 5] = f64::INFINITY; // row 2: an infinite value
        let _ = (k, v);
        let k = tensor_of(&kv, &[4, 1, len, 64], dt);
        let v = tensor_of(&vv, &[4, 1, len, 64], dt);
        let run = |on| ops::with_decode_fusion(on, || ops::attention_prefix(&q, &k, &v, len, false, None).unwrap());
        let (one, two) = (run(true), run(false));
        same_bits(&one, &two, &format!("{dt}"));
        let y = one.to_f64_vec().unwrap();
        assert!(y[..64].iter().all(|x| x.is_nan()), "{dt}: a NaN key makes its row NaN");
        assert!(y[3 * 64..].iter().all(|x| x.is_finite()), "{dt}: the clean row stays finite");
        assert!(!y[2 * 64 + 5].is_finite(), "{dt}: an infinite value reaches its output");
    }
}

/// `ops::attention_scored` on `path` against the CPU reference with the same soft-cap and window.
#[allow(clippy::too_many_arguments)]
fn check_scored(
    path: AttentionPath,
    (q, qv, qs): (&Tensor, &[f64], &[usize]),
    (k, kv, ks): (&Tensor, &[f64], &[usize]),
    (v, vv, vs): (&Tensor, &[f64], &[usize]),
    mask: Option<(&Tensor, &[f64], &[usize])>,
    kv_len: Option<usize>,
    causal: bool,
    opts: ops::ScoreOptions,
) {
    let dt = q.dtype();
    let what = format!(
        "{path:?} q{qs:?} k{ks:?} v{vs:?} len {kv_len:?} mask {} causal={causal} {opts:?} {dt}",
        mask.is_some()
    );
    let y = ops::attention_scored(q, k, v, mask.map(|m| m.0), kv_len, causal, None, opts, path)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    // The reference over the prefix: K and V cut to their first kv_len rows.
    let cut = |x: &[f64], s: &[usize]| -> (Vec<f64>, Vec<usize>) {
        let (rows, w) = (s[s.len() - 2], s[s.len() - 1]);
        let len = kv_len.unwrap_or(rows);
        let mut shape = s.to_vec();
        shape[s.len() - 2] = len;
        (x.chunks(rows * w).flat_map(|b| b[..len * w].to_vec()).collect(), shape)
    };
    let ((kc, kcs), (vc, vcs)) = (cut(kv, ks), cut(vv, vs));
    let (want, shape) = cpu::attention_scored(
        qv,
        qs,
        &kc,
        &kcs,
        &vc,
        &vcs,
        mask.map(|m| (m.1, m.2)),
        causal,
        None,
        opts.softcap.map(f64::from),
        opts.window,
    )
    .unwrap();
    assert_eq!(y.shape(), &shape[..], "{what}");
    let rtol = if dt == DType::F16 { 3e-3 } else { 1e-4 };
    assert_close(&what, &y.to_f64_vec().unwrap(), &want, atol(dt), rtol);
}

/// Gemma 2's logit soft-capping and sliding window on the paths that take them (the one-row
/// flash kernel, split-KV's scalar and vec4 kernels, Auto), causal or not, with a mask and
/// over a cache's prefix; scores up to ~16 against caps of 1 and 5 (the cap bites), windows
/// of 5 and 70 keys against 65 to 200 (several split-KV splits and flash tiles, some wholly
/// before the window, a window start inside a split).
#[test]
fn score_options_match_reference() {
    poison();
    let mut rng = Rng::new(71);
    let ninf = f64::NEG_INFINITY;
    let opts = [
        ops::ScoreOptions { softcap: Some(1.0), window: None },
        ops::ScoreOptions { softcap: None, window: Some(70) },
        ops::ScoreOptions { softcap: Some(5.0), window: Some(5) },
    ];
    // f16 on one shape only: each case is a few new kernels for lavapipe to compile.
    let f16 = *float_dtypes().last().unwrap();
    {
        for (lq, lk, d, dt) in [
            (7usize, 200usize, 16usize, DType::F32),
            (65, 65, 12, DType::F32),
            (1, 130, 64, f16),
            (2, 90, 3, DType::F32),
        ] {
            let (qs, ks) = ([2, lq, d], [2, lk, d]);
            let (q, qv) = rand_tensor(&mut rng, &qs, dt, -2.0, 2.0);
            let (k, kv) = rand_tensor(&mut rng, &ks, dt, -2.0, 2.0);
            let (v, vv) = rand_tensor(&mut rng, &ks, dt, -1.0, 1.0);
            let mv: Vec<f64> = (0..lk).map(|j| if j % 7 == 3 { ninf } else { (j % 5) as f64 / 4.0 }).collect();
            let (m, ms) = (tensor_of(&mv, &[lk], dt), [lk]);
            for (i, &o) in opts.iter().enumerate() {
                for path in [AttentionPath::Flash, AttentionPath::SplitKv, AttentionPath::Auto] {
                    let mask = (i % 2 == 1).then_some((&m, &mv[..], &ms[..]));
                    for causal in [false, true] {
                        let (qa, ka, va) = ((&q, &qv[..], &qs[..]), (&k, &kv[..], &ks[..]), (&v, &vv[..], &ks[..]));
                        check_scored(path, qa, ka, va, mask, None, causal, o);
                    }
                }
            }
            // Over a prefix of the keys, as a decoder reads its cache (split-KV; lq queries see
            // the last `window` of the first lk - 9 keys).
            for &o in &opts {
                let (qa, ka, va) = ((&q, &qv[..], &qs[..]), (&k, &kv[..], &ks[..]), (&v, &vv[..], &ks[..]));
                check_scored(AttentionPath::SplitKv, qa, ka, va, None, Some(lk - 9), lq > 1, o);
                check_scored(AttentionPath::Auto, qa, ka, va, None, Some(lk - 9), lq > 1, o);
            }
        }
    }
}

/// The kernels without score options refuse them when forced; bad options are refused; the
/// default options are the op without them, bit for bit.
#[test]
fn score_options_errors_and_default() {
    let mut rng = Rng::new(72);
    let (q, _) = rand_tensor(&mut rng, &[2, 5, 16], DType::F32, -1.0, 1.0);
    let (k, _) = rand_tensor(&mut rng, &[2, 9, 16], DType::F32, -1.0, 1.0);
    let on = ops::ScoreOptions { softcap: Some(30.0), window: Some(4) };
    for path in [AttentionPath::Fused, AttentionPath::Matmul, AttentionPath::FlashCoop] {
        let e = ops::attention_scored(&q, &k, &k, None, None, true, None, on, path).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument, "{path:?}: {e}");
    }
    for bad in [
        ops::ScoreOptions { softcap: Some(0.0), window: None },
        ops::ScoreOptions { softcap: Some(f32::NAN), window: None },
        ops::ScoreOptions { softcap: Some(-1.0), window: None },
        ops::ScoreOptions { softcap: Some(f32::INFINITY), window: None },
        ops::ScoreOptions { softcap: None, window: Some(0) },
        ops::ScoreOptions { softcap: None, window: Some(1 << 33) },
    ] {
        let e = ops::attention_scored(&q, &k, &k, None, None, false, None, bad, AttentionPath::Auto).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument, "{bad:?}: {e}");
    }
    for path in [AttentionPath::Flash, AttentionPath::SplitKv, AttentionPath::Auto] {
        for kv_len in [None, Some(7)] {
            let plain = match kv_len {
                None => ops::attention_on_path(&q, &k, &k, None, true, None, path),
                Some(len) => ops::attention_prefix_on_path(&q, &k, &k, None, len, true, None, path),
            }
            .unwrap();
            let off = ops::attention_scored(&q, &k, &k, None, kv_len, true, None, Default::default(), path).unwrap();
            same_bits(&plain, &off, &format!("{path:?} {kv_len:?}"));
        }
    }
}

/// The native tier's f16 attention (NV cooperative matrix 2; where the device has it), every
/// variant forced in turn against the float64 reference: lengths around the 64-row and 32/64-key
/// tiles, Lq != Lk under causal (top-left), K and V broadcast over a head axis, a prefix of a
/// longer cache read in place, large scores (the running max moves many times), Lk = 0 (zeros),
/// NaN in q or k (NaN rows exactly where the reference has them).
#[test]
fn native_attention_matches_reference() {
    let dev = kiln_core::device().unwrap();
    let variants: Vec<&'static str> = ops::attention_native_variants()
        .into_iter()
        .filter(|v| {
            ops::attention_native_available(&dev, v, 64, 64) || ops::attention_native_available(&dev, v, 128, 128)
        })
        .collect();
    if variants.is_empty() {
        eprintln!("no native attention kernel on this device ({}): skipped", dev.native_caps().cm2_note);
        return;
    }
    poison();
    let dt = DType::F16;
    let mut rng = Rng::new(4801);
    let mut cases = 0;
    for variant in variants {
        for d in [64usize, 128] {
            if !ops::attention_native_available(&dev, variant, d, d) {
                continue;
            }
            let run = |q: &Tensor, k: &Tensor, v: &Tensor, causal: bool, scale: Option<f32>| {
                ops::with_attention_native(variant, || {
                    ops::attention_on_path(q, k, v, None, causal, scale, AttentionPath::Native)
                })
            };
            for (qb, kb, lq, lk) in [
                (vec![1usize, 2], vec![1usize, 2], 300usize, 300usize),
                (vec![2, 3], vec![2, 1], 129, 517),
                (vec![1], vec![1], 1, 65),
                (vec![2], vec![2], 65, 1),
                (vec![1, 1], vec![1, 1], 200, 64),
                (vec![3], vec![1], 33, 31),
            ] {
                let qs = [&qb[..], &[lq, d]].concat();
                let ks = [&kb[..], &[lk, d]].concat();
                let (q, qv) = rand_tensor(&mut rng, &qs, dt, -3.0, 3.0);
                let (k, kv) = rand_tensor(&mut rng, &ks, dt, -3.0, 3.0);
                let (v, vv) = rand_tensor(&mut rng, &ks, dt, -1.0, 1.0);
                for causal in [false, true] {
                    let what = format!("native {variant} q{qs:?} k{ks:?} causal={causal}");
                    let y = run(&q, &k, &v, causal, None).unwrap_or_else(|e| panic!("{what}: {e}"));
                    let (want, shape) = cpu::attention(&qv, &qs, &kv, &ks, &vv, &ks, causal, None).unwrap();
                    assert_eq!(y.shape(), &shape[..], "{what}");
                    assert_close(&what, &y.to_f64_vec().unwrap(), &want, atol(dt), 3e-3);
                    cases += 1;
                }
            }
            // A prefix of a longer cache, read in place (Auto takes the native path for it).
            let (lq, lmax, len) = (70usize, 300usize, 161usize);
            let (q, qv) = rand_tensor(&mut rng, &[2, lq, d], dt, -3.0, 3.0);
            let (k, kv) = rand_tensor(&mut rng, &[2, lmax, d], dt, -3.0, 3.0);
            let (v, vv) = rand_tensor(&mut rng, &[2, lmax, d], dt, -1.0, 1.0);
            let y = ops::with_attention_native(variant, || {
                ops::attention_prefix_on_path(&q, &k, &v, None, len, true, None, AttentionPath::Native)
            })
            .unwrap()
            .to_f64_vec()
            .unwrap();
            let kp: Vec<f64> = kv.chunks(lmax * d).flat_map(|c| c[..len * d].to_vec()).collect();
            let vp: Vec<f64> = vv.chunks(lmax * d).flat_map(|c| c[..len * d].to_vec()).collect();
            let (want, _) = cpu::attention(&qv, &[2, lq, d], &kp, &[2, len, d], &vp, &[2, len, d], true, None).unwrap();
            assert_close(&format!("native {variant} prefix {len} of {lmax}"), &y, &want, atol(dt), 3e-3);
            // Large scores.
            let (q, qv) = rand_tensor(&mut rng, &[1, 70, d], dt, 2.0, 3.0);
            let (k, kv) = rand_tensor(&mut rng, &[1, 200, d], dt, -3.0, 3.0);
            let (v, vv) = rand_tensor(&mut rng, &[1, 200, d], dt, -1.0, 1.0);
            let y = run(&q, &k, &v, false, Some(1.0)).unwrap().to_f64_vec().unwrap();
            let (want, _) =
                cpu::attention(&qv, &[1, 70, d], &kv, &[1, 200, d], &vv, &[1, 200, d], false, Some(1.0)).unwrap();
            assert_close(&format!("native {variant} large scores"), &y, &want, 2e-2, 3e-3);
            // No keys: zeros.
            let (q, _) = rand_tensor(&mut rng, &[1, 5, d], dt, -1.0, 1.0);
            let (k0, _) = rand_tensor(&mut rng, &[1, 0, d], dt, -1.0, 1.0);
            let y = run(&q, &k0, &k0, false, None).unwrap().to_f64_vec().unwrap();
            assert!(y.iter().all(|&x| x == 0.0), "native {variant} Lk = 0: {y:?}");
            // NaN in a query row and in a key: NaN rows where the reference (with PyTorch's rule
            // for an all-NaN row) has them, finite elsewhere.
            let (lq, lk) = (70usize, 90usize);
            let mut qv: Vec<f64> = (0..lq * d).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let mut kv: Vec<f64> = (0..lk * d).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let vv: Vec<f64> = (0..lk * d).map(|_| rng.uniform(-1.0, 1.0)).collect();
            qv[5 * d + 2] = f64::NAN;
            kv[40 * d + 7] = f64::NAN;
            let (q, k, v) =
                (tensor_of(&qv, &[1, lq, d], dt), tensor_of(&kv, &[1, lk, d], dt), tensor_of(&vv, &[1, lk, d], dt));
            for causal in [false, true] {
                let (mut want, _) =
                    cpu::attention(&qv, &[1, lq, d], &kv, &[1, lk, d], &vv, &[1, lk, d], causal, None).unwrap();
                want[5 * d..6 * d].fill(f64::NAN);
                let y = run(&q, &k, &v, causal, None).unwrap().to_f64_vec().unwrap();
                assert_close(&format!("native {variant} causal={causal} NaN in q and k"), &y, &want, atol(dt), 3e-3);
            }
        }
    }
    // Additive masks on the variants compiled with one (d64s, d128): key padding [b, 1, 1, Lk]
    // (Lk a multiple of 8), a full [b, h, Lq, Lk] mask, rows whose keys are all -inf (zeros), with
    // and without causal; a mask the kernel's loads cannot read (Lk = 7: rows of 14 bytes) is
    // refused by the forced path and runs on the WGSL tier under Auto.
    for (variant, d) in [("d64s", 64usize), ("d128", 128)] {
        if !ops::attention_native_available(&dev, variant, d, d) {
            continue;
        }
        let (b, h, lq, lk) = (2usize, 3usize, 77usize, 136usize);
        let qs = [b, h, lq, d];
        let ks = [b, h, lk, d];
        let (q, qv) = rand_tensor(&mut rng, &qs, dt, -3.0, 3.0);
        let (k, kv) = rand_tensor(&mut rng, &ks, dt, -3.0, 3.0);
        let (v, vv) = rand_tensor(&mut rng, &ks, dt, -1.0, 1.0);
        let pad_shape = [b, 1, 1, lk];
        let pad: Vec<f64> =
            (0..b * lk).map(|e| if e % lk > 40 + 50 * (e / lk) { f64::NEG_INFINITY } else { 0.0 }).collect();
        let full_shape = [b, h, lq, lk];
        let full: Vec<f64> = (0..b * h * lq * lk)
            .map(|e| {
                let (row, key) = ((e / lk) % lq, e % lk);
                // Rows 3, 14, ...: every key dropped (zeros); elsewhere every fifth key.
                if row % 11 == 3 || key % 5 == 1 {
                    f64::NEG_INFINITY
                } else {
                    ((e * 7919) % 13) as f64 * 0.25 - 1.5
                }
            })
            .collect();
        for (vals, shape) in [(&pad, &pad_shape[..]), (&full, &full_shape[..])] {
            let m = tensor_of(vals, shape, dt);
            for causal in [false, true] {
                ops::with_attention_native(variant, || {
                    check_path(
                        AttentionPath::Native,
                        (&q, &qv, &qs),
                        (&k, &kv, &ks),
                        (&v, &vv, &ks),
                        Some((&m, vals, shape)),
                        causal,
                        Some(0.2),
                        atol(dt),
                    )
                });
                cases += 1;
            }
        }
        // 7 keys: a [1, 1, 7] mask (row stride 0, no batch offset) is read natively; a [1, 9, 7]
        // one (rows of 14 bytes) is refused by the forced path and runs on the WGSL tier under Auto.
        let (q7, q7v) = rand_tensor(&mut rng, &[1, 9, d], dt, -1.0, 1.0);
        let (k7, k7v) = rand_tensor(&mut rng, &[1, 7, d], dt, -1.0, 1.0);
        let ks7 = [1usize, 7, d];
        let qs7 = [1usize, 9, d];
        let row: Vec<f64> = (0..7).map(|j| if j == 4 { f64::NEG_INFINITY } else { 0.5 * j as f64 }).collect();
        let m1 = tensor_of(&row, &[1, 1, 7], dt);
        ops::with_attention_native(variant, || {
            check_path(
                AttentionPath::Native,
                (&q7, &q7v, &qs7),
                (&k7, &k7v, &ks7),
                (&k7, &k7v, &ks7),
                Some((&m1, &row, &[1, 1, 7])),
                false,
                None,
                atol(dt),
            )
        });
        let rows: Vec<f64> =
            (0..9 * 7).map(|e| if e % 8 == 2 { f64::NEG_INFINITY } else { (e % 5) as f64 * 0.3 }).collect();
        let m9 = tensor_of(&rows, &[1, 9, 7], dt);
        let forced = ops::with_attention_native(variant, || {
            ops::attention_on_path(&q7, &k7, &k7, Some(&m9), false, None, AttentionPath::Native)
        });
        assert!(forced.is_err(), "native {variant}: a mask of 7-key rows must be refused");
        check_path(
            AttentionPath::Auto,
            (&q7, &q7v, &qs7),
            (&k7, &k7v, &ks7),
            (&k7, &k7v, &ks7),
            Some((&m9, &rows, &[1, 9, 7])),
            false,
            None,
            atol(dt),
        );
        cases += 2;
    }
    eprintln!("native attention: {cases} shaped cases checked");
}
