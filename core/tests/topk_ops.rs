//! topk against its CPU reference (core/src/reference/sort.rs, which counts each element's place
//! instead of sorting): every dtype, special values (NaN, ±inf, ±0, extremes) with many ties,
//! awkward shapes (empty axes and batches, 1, primes, rows past one workgroup and past the
//! 512-pair block), k = 0, 1, n, every axis (negative ones too), largest and smallest; and bad
//! input (k > n, a 0-d tensor, an axis out of range) as a clear error that leaves the device
//! usable.
mod common;
use common::*;
use kiln_core::ops;
use kiln_core::reference::sort as cpu;
use kiln_core::{DType, ErrorCode};

/// Each dtype's special values (NaN, ±inf, ±0, extremes) for `awkward_values`.
fn specials(dt: DType) -> &'static [f64] {
    match dt {
        DType::F32 | DType::F16 => {
            &[f64::NAN, -f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 1.0, -1.0, 6e-8, 65504.0, -65504.0]
        }
        DType::I32 => &[0.0, -1.0, 1.0, -2147483648.0, 2147483647.0],
        DType::U32 => &[0.0, 1.0, 4294967295.0, 2147483648.0],
        DType::Bool => &[0.0, 1.0],
    }
}

fn awkward(rng: &mut Rng, dt: DType, n: usize) -> Vec<f64> {
    awkward_values(rng, dt, n, specials(dt))
}

/// Checks `ops::topk` against the reference for one input, every k of `ks` (clamped to n).
fn check(vals: &[f64], shape: &[usize], dt: DType, axis: isize, ks: &[usize]) {
    let x = upload(vals, shape, dt);
    let ax = if axis < 0 { (axis + shape.len() as isize) as usize } else { axis as usize };
    let n = shape[ax];
    let mut ks: Vec<usize> = ks.iter().map(|&k| k.min(n)).collect();
    ks.dedup();
    for k in ks {
        for largest in [true, false] {
            let what = format!("{dt} {shape:?} axis {axis} k {k} largest {largest}");
            let (v, i) = ops::topk(&x, k, axis, largest).unwrap();
            let mut want_shape = shape.to_vec();
            want_shape[ax] = k;
            assert_eq!(v.shape(), &want_shape[..], "{what}: values' shape");
            assert_eq!(i.shape(), &want_shape[..], "{what}: indices' shape");
            assert_eq!(v.dtype(), dt, "{what}");
            assert_eq!(i.dtype(), DType::I32, "{what}");
            let (wv, wi) = cpu::topk(vals, shape, k, axis, largest).unwrap();
            assert_same(&format!("values {what}"), &v.to_f64_vec().unwrap(), &wv);
            assert_same(&format!("indices {what}"), &i.to_f64_vec().unwrap(), &wi);
        }
    }
}

const CASES: &[(&[usize], isize)] = &[
    (&[0], 0),
    (&[1], 0),
    (&[2], -1),
    (&[7], 0),
    (&[13, 17], 1),
    (&[13, 17], 0),
    (&[13, 17], -2),
    (&[3, 1, 257], -1),
    (&[3, 1, 257], 0),
    (&[2, 0, 3], 1),
    (&[2, 0, 3], 2),
    (&[5, 3, 7], 1),
    (&[2, 600], 1),
];

#[test]
fn topk_matches_the_reference() {
    let mut rng = Rng::new(33);
    for dt in all_dtypes() {
        for &(shape, axis) in CASES {
            let n: usize = shape.iter().product();
            let vals = awkward(&mut rng, dt, n);
            check(&vals, shape, dt, axis, &[0, 1, 3, 256, usize::MAX]);
        }
    }
}

#[test]
fn topk_orders_nan_infinities_zeros_and_ties_as_sort() {
    // NaN is the largest (first when largest, last otherwise); -0 == +0 and equal values keep
    // their index order either way.
    let vals = [0.0, f64::NAN, -0.0, f64::INFINITY, 1.0, f64::NEG_INFINITY, 1.0, f64::NAN, 0.0];
    let x = upload(&vals, &[9], DType::F32);
    let (v, i) = ops::topk(&x, 9, 0, true).unwrap();
    assert_eq!(i.to_f64_vec().unwrap(), [1.0, 7.0, 3.0, 4.0, 6.0, 0.0, 2.0, 8.0, 5.0]);
    let got = v.to_f64_vec().unwrap();
    assert!(got[0].is_nan() && got[1].is_nan());
    assert_eq!(got[5].to_bits(), 0.0f64.to_bits());
    assert_eq!(got[6].to_bits(), (-0.0f64).to_bits(), "the zeros' signs are kept");
    let (_, i) = ops::topk(&x, 4, -1, false).unwrap();
    assert_eq!(i.to_f64_vec().unwrap(), [5.0, 0.0, 2.0, 8.0]);
    check(&vals, &[9], DType::F32, 0, &[0, 1, 2, 5, 9]);
}

#[test]
fn topk_of_long_rows_and_many_rows() {
    let mut rng = Rng::new(34);
    // A row past the 512-pair block (global merge stages), many short rows, and the axis first.
    for (shape, axis) in [(vec![1, 3001], 1isize), (vec![4001, 3], -1), (vec![1031, 2], 0)] {
        let n: usize = shape.iter().product();
        let vals = awkward(&mut rng, DType::F32, n);
        check(&vals, &shape, DType::F32, axis, &[1, 5, 700]);
    }
}

#[test]
fn bad_topk_is_a_clear_error() {
    let x = upload(&[1.0, 2.0, 3.0], &[3], DType::F32);
    let e = ops::topk(&x, 4, 0, true).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "k > n: {e}");
    assert!(e.to_string().contains("k = 4"), "{e}");
    let e = ops::topk(&x, 1, 1, true).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "axis out of range: {e}");
    let e = ops::topk(&x, 1, -2, true).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "axis out of range: {e}");
    let s = upload(&[1.0], &[], DType::F32);
    let e = ops::topk(&s, 0, 0, true).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "0-d: {e}");
    // The device still works.
    let (v, _) = ops::topk(&x, 2, 0, true).unwrap();
    assert_eq!(v.to_f64_vec().unwrap(), [3.0, 2.0]);
}
