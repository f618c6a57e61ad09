mod common;
use common::*;
use kiln_core::ops::{self, TensordotAxes};
use kiln_core::reference::linalg as cpu;
use kiln_core::{DType, ErrorCode, Tensor};

fn dtypes() -> Vec<DType> {
    [DType::F32, DType::F16, DType::I32, DType::U32].into_iter().filter(|d| *d != DType::F16 || has_f16()).collect()
}

fn range(dt: DType) -> (f64, f64) {
    match dt {
        DType::I32 => (-50.0, 50.0),
        DType::U32 => (0.0, 50.0),
        _ => (-1.0, 1.0),
    }
}

#[test]
fn vecdot_matches_reference() {
    poison();
    let mut rng = Rng::new(91);
    let cases: &[(&[usize], &[usize], isize)] = &[
        (&[0], &[0], -1),
        (&[1], &[1], -1),
        (&[7], &[7], 0),
        (&[13, 17], &[17], -1),
        (&[13, 17], &[13, 17], 0),
        (&[3, 1, 257], &[5, 257], -1),
        (&[2, 0, 3], &[1, 3], -1),
        (&[4, 1031], &[4, 1031], 1),
        (&[6, 5, 3], &[5, 1], -2),
    ];
    for dt in dtypes() {
        for &(s1, s2, axis) in cases {
            let (lo, hi) = range(dt);
            let (a, av) = rand_tensor(&mut rng, s1, dt, lo, hi);
            let (b, bv) = rand_tensor(&mut rng, s2, dt, lo, hi);
            let y = ops::vecdot(&a, &b, axis).unwrap();
            let (want, ws) = cpu::vecdot(&av, s1, &bv, s2, axis, dt).unwrap();
            let what = format!("vecdot {dt} {s1:?} {s2:?} axis={axis}");
            assert_eq!(y.shape(), &ws[..], "{what}");
            let (atol, rtol) = tol(dt);
            assert_close(&what, &y.to_f64_vec().unwrap(), &want, atol * 10.0, rtol * 10.0);
        }
    }
}

#[test]
fn tensordot_matches_reference() {
    poison();
    let mut rng = Rng::new(92);
    let pairs = |a: &[isize], b: &[isize]| TensordotAxes::Pairs(a.to_vec(), b.to_vec());
    let cases: Vec<(&[usize], &[usize], TensordotAxes)> = vec![
        (&[3, 4, 5], &[4, 5, 6], TensordotAxes::Count(2)),
        (&[3, 4], &[4, 7], TensordotAxes::Count(1)),
        (&[3, 4], &[5, 6], TensordotAxes::Count(0)),
        (&[2, 3, 5], &[5, 3, 7], pairs(&[1, 2], &[1, 0])),
        (&[2, 3, 5], &[3, 2], pairs(&[-3, 1], &[1, 0])),
        (&[13, 17], &[17, 1], TensordotAxes::Count(1)),
        (&[2, 0, 3], &[3, 4], TensordotAxes::Count(1)),
        (&[4, 0], &[0, 5], TensordotAxes::Count(1)),
        (&[3, 257], &[257], TensordotAxes::Count(1)),
        (&[7], &[7], TensordotAxes::Count(1)),
    ];
    for dt in dtypes() {
        for (s1, s2, axes) in &cases {
            let (lo, hi) = range(dt);
            let (a, av) = rand_tensor(&mut rng, s1, dt, lo, hi);
            let (b, bv) = rand_tensor(&mut rng, s2, dt, lo, hi);
            let y = ops::tensordot(&a, &b, axes).unwrap();
            let (want, ws) = cpu::tensordot(&av, s1, &bv, s2, axes, dt).unwrap();
            let what = format!("tensordot {dt} {s1:?} {s2:?} {axes:?}");
            assert_eq!(y.shape(), &ws[..], "{what}");
            let (atol, rtol) = tol(dt);
            assert_close(&what, &y.to_f64_vec().unwrap(), &want, atol * 10.0, rtol * 10.0);
        }
    }
}

#[test]
fn linalg_errors() {
    let a = Tensor::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    let b = Tensor::from_slice(&[1.0f32; 8], &[2, 4]).unwrap();
    let i = Tensor::from_slice(&[1i32; 6], &[2, 3]).unwrap();
    let s = Tensor::from_slice(&[1.0f32], &[]).unwrap();
    assert_eq!(ops::vecdot(&a, &b, -1).unwrap_err().code(), ErrorCode::ShapeMismatch);
    assert_eq!(ops::vecdot(&a, &i, -1).unwrap_err().code(), ErrorCode::DTypeMismatch);
    assert_eq!(ops::vecdot(&a, &a, 2).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::vecdot(&s, &s, -1).unwrap_err().code(), ErrorCode::InvalidArgument);
    // A size-1 vector axis does not broadcast against 3.
    let one = Tensor::from_slice(&[1.0f32; 2], &[2, 1]).unwrap();
    assert_eq!(ops::vecdot(&a, &one, -1).unwrap_err().code(), ErrorCode::ShapeMismatch);
    assert_eq!(ops::tensordot(&a, &b, &TensordotAxes::Count(1)).unwrap_err().code(), ErrorCode::ShapeMismatch);
    assert_eq!(ops::tensordot(&a, &b, &TensordotAxes::Count(3)).unwrap_err().code(), ErrorCode::InvalidArgument);
    let twice = TensordotAxes::Pairs(vec![0, 0], vec![0, 1]);
    assert_eq!(ops::tensordot(&a, &b, &twice).unwrap_err().code(), ErrorCode::InvalidArgument);
    let uneven = TensordotAxes::Pairs(vec![0], vec![0, 1]);
    assert_eq!(ops::tensordot(&a, &b, &uneven).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::tensordot(&a, &i, &TensordotAxes::Count(0)).unwrap_err().code(), ErrorCode::DTypeMismatch);
}
