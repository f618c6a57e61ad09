mod common;
use common::*;
use kiln_core::ops;
use kiln_core::reference::reduce as cpu;
use kiln_core::{dtype::f64_to_bytes, DType, ErrorCode, Tensor};

type Axes = Option<&'static [isize]>;

/// Empty, one element, primes, runs past one workgroup and long enough to be split, several
/// axes (contiguous and not), negative axes, None and the empty set.
const CASES: &[(&[usize], Axes)] = &[
    (&[0], None),
    (&[1], None),
    (&[7], Some(&[0])),
    (&[13, 17], Some(&[1])),
    (&[13, 17], Some(&[0])),
    (&[13, 17], Some(&[-1, -2])),
    (&[3, 1, 257], Some(&[-1])),
    (&[3, 5, 7], Some(&[0, 2])),
    (&[3, 5, 7], Some(&[])),
    (&[2, 0, 3], Some(&[1])),
    (&[2, 20011], Some(&[1])),
    (&[40009], None),
    (&[70, 8], Some(&[0])),
];

fn n_of(shape: &[usize], axes: Axes) -> usize {
    let r = shape.len() as isize;
    match axes {
        None => shape.iter().product(),
        Some(a) => a.iter().map(|&d| shape[(if d < 0 { d + r } else { d }) as usize]).product(),
    }
}

#[test]
fn prod_matches_reference() {
    poison();
    let mut rng = Rng::new(81);
    for dt in [DType::F32, DType::F16, DType::I32, DType::U32].into_iter().filter(|d| *d != DType::F16 || has_f16()) {
        for &(shape, axes) in CASES {
            for keepdims in [false, true] {
                // Factors near 1 keep long float products finite; integers wrap (exactly).
                let (lo, hi) = match dt {
                    DType::I32 => (-5.0, 5.0),
                    DType::U32 => (0.0, 7.0),
                    _ => (0.999, 1.001),
                };
                let (x, xv) = rand_tensor(&mut rng, shape, dt, lo, hi);
                let what = format!("prod {dt} {shape:?} axes={axes:?} keepdims={keepdims}");
                let y = ops::prod(&x, axes, keepdims, None).unwrap();
                let (want, ws) = cpu::prod(&xv, shape, axes, keepdims, dt).unwrap();
                assert_eq!(y.shape(), &ws[..], "{what}");
                assert_eq!(y.dtype(), dt);
                let (atol, rtol) = tol(dt);
                let rtol = rtol + 1.2e-7 * n_of(shape, axes) as f64;
                assert_close(&what, &y.to_f64_vec().unwrap(), &want, atol, rtol);
            }
        }
    }
}

#[test]
fn prod_special_values_and_dtype() {
    poison();
    let v = [2.0, f64::NAN, 0.0, f64::INFINITY, -0.0, -3.0, 1.0, f64::NEG_INFINITY];
    // Each row holds a different mix: NaN, 0 * inf, the sign of zero and of infinity.
    let rows: [[usize; 3]; 6] = [[0, 5, 6], [1, 0, 6], [2, 3, 6], [4, 0, 6], [4, 5, 6], [7, 5, 0]];
    let xv: Vec<f64> = rows.iter().flat_map(|r| r.iter().map(|&i| v[i])).collect();
    let x = Tensor::from_bytes(&f64_to_bytes(DType::F32, &xv), &[6, 3], DType::F32).unwrap();
    let y = ops::prod(&x, Some(&[1]), false, None).unwrap().to_f64_vec().unwrap();
    let (want, _) = cpu::prod(&xv, &[6, 3], Some(&[1]), false, DType::F32).unwrap();
    for (g, w) in y.iter().zip(&want) {
        assert!(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()), "{y:?} vs {want:?}");
    }
    // dtype casts first: i32 wrapping products as f32, and bool counted as i32.
    let i = Tensor::from_slice(&[70000i32, 70000, -2], &[3]).unwrap();
    assert_eq!(
        ops::prod(&i, None, false, None).unwrap().to_vec::<i32>().unwrap(),
        vec![70000i32.wrapping_mul(70000).wrapping_mul(-2)]
    );
    assert_eq!(ops::prod(&i, None, false, Some(DType::F32)).unwrap().to_vec::<f32>().unwrap(), vec![-9.8e9]);
    let b = Tensor::from_bools(&[true, true, false], &[3]).unwrap();
    assert_eq!(ops::prod(&b, None, true, Some(DType::I32)).unwrap().to_vec::<i32>().unwrap(), vec![0]);
    assert_eq!(ops::prod(&b, None, false, None).unwrap_err().code(), ErrorCode::DTypeMismatch);
    assert_eq!(ops::prod(&i, None, false, Some(DType::Bool)).unwrap_err().code(), ErrorCode::DTypeMismatch);
    assert_eq!(ops::prod(&i, Some(&[1]), false, None).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::prod(&x, Some(&[0, 0]), false, None).unwrap_err().code(), ErrorCode::InvalidArgument);
}

#[test]
fn std_matches_reference() {
    poison();
    let mut rng = Rng::new(82);
    for dt in float_dtypes() {
        for &(shape, axes) in CASES {
            for ddof in [0, 1] {
                let (x, xv) = rand_tensor(&mut rng, shape, dt, -3.0, 3.0);
                let y = ops::std(&x, axes, true, ddof).unwrap();
                let (want, ws) = cpu::std(&xv, shape, axes, true, ddof, dt).unwrap();
                assert_eq!(y.shape(), &ws[..]);
                let (atol, rtol) = tol(dt);
                let n = n_of(shape, axes) as f64;
                assert_close(
                    &format!("std {dt} {shape:?} {axes:?} ddof={ddof}"),
                    &y.to_f64_vec().unwrap(),
                    &want,
                    atol + 6e-8 * n,
                    rtol * 2.0,
                );
            }
        }
    }
    let i = Tensor::from_slice(&[1i32, 2], &[2]).unwrap();
    assert_eq!(ops::std(&i, None, false, 0).unwrap_err().code(), ErrorCode::DTypeMismatch);
}
