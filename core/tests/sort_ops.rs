//! sort, argsort, searchsorted, count_nonzero, nonzero, unique_* and isin against the CPU
//! references (core/src/reference/sort.rs) on random inputs full of special values and
//! duplicates, awkward shapes (0, 1, primes, rows past one workgroup and past the 512-pair
//! block, more than 65535 rows) and bad input.
mod common;
use common::*;
use kiln_core::ops;
use kiln_core::reference::sort as cpu;
use kiln_core::{DType, ErrorCode, Tensor};

/// Each dtype's special values (NaN, ±inf, ±0, subnormals, extremes) for `awkward_values`.
fn specials(dt: DType) -> &'static [f64] {
    match dt {
        DType::F32 | DType::F16 => &[
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            -2.5,
            1e-40,
            -1e-40,
            6e-8,
            65504.0,
            -65504.0,
            3.0e38,
        ],
        DType::I32 => &[0.0, -1.0, 1.0, -2147483648.0, 2147483647.0, 5.0, -5.0],
        DType::U32 => &[0.0, 1.0, 4294967295.0, 2147483648.0, 2147483647.0, 7.0],
        DType::Bool => &[0.0, 1.0],
    }
}

fn awkward(rng: &mut Rng, dt: DType, n: usize) -> Vec<f64> {
    awkward_values(rng, dt, n, specials(dt))
}

const SORT_CASES: &[(&[usize], isize)] = &[
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
    (&[1031], 0),
    (&[4, 512], 1),
    (&[3, 600], 1),
    (&[2, 3001], -1),
    (&[5, 3, 7], 1),
];

#[test]
fn argsort_and_sort_match_the_reference() {
    let mut rng = Rng::new(5);
    for dt in all_dtypes() {
        for &(shape, axis) in SORT_CASES {
            let n: usize = shape.iter().product();
            let vals = awkward(&mut rng, dt, n);
            let x = upload(&vals, shape, dt);
            for desc in [false, true] {
                let what = format!("{dt} {shape:?} axis {axis} descending {desc}");
                let idx = ops::argsort(&x, axis, desc).unwrap();
                assert_eq!(idx.dtype(), DType::I32, "{what}");
                assert_eq!(idx.shape(), shape, "{what}");
                assert_same(
                    &format!("argsort {what}"),
                    &idx.to_f64_vec().unwrap(),
                    &cpu::argsort(&vals, shape, axis, desc).unwrap(),
                );
                let s = ops::sort(&x, axis, desc).unwrap();
                assert_eq!(s.dtype(), dt);
                assert_same(
                    &format!("sort {what}"),
                    &s.to_f64_vec().unwrap(),
                    &cpu::sort(&vals, shape, axis, desc).unwrap(),
                );
            }
        }
    }
}

#[test]
fn argsort_of_ordered_constant_and_nan_rows() {
    let n = 1500;
    let rows: Vec<(&str, Vec<f64>)> = vec![
        ("sorted", (0..n).map(|i| i as f64).collect()),
        ("reversed", (0..n).map(|i| (n - i) as f64).collect()),
        ("constant", vec![2.0; n]),
        ("all NaN", vec![f64::NAN; n]),
        ("zeros of both signs", (0..n).map(|i| if i % 3 == 0 { -0.0 } else { 0.0 }).collect()),
    ];
    for (name, vals) in rows {
        let x = upload(&vals, &[n], DType::F32);
        for desc in [false, true] {
            let got = ops::argsort(&x, 0, desc).unwrap().to_f64_vec().unwrap();
            assert_same(&format!("{name} desc {desc}"), &got, &cpu::argsort(&vals, &[n], 0, desc).unwrap());
        }
    }
}

#[test]
fn sort_with_many_rows_and_long_rows() {
    let mut rng = Rng::new(55);
    // More rows than one dispatch dimension holds workgroups for when each row is a workgroup,
    // and one row longer than 2^16 (several global merge stages).
    for (shape, axis) in [(vec![70001, 3], 1isize), (vec![3, 70001], 0), (vec![1, 70001], 1)] {
        let n: usize = shape.iter().product();
        let vals = awkward(&mut rng, DType::F32, n);
        let x = upload(&vals, &shape, DType::F32);
        let got = ops::argsort(&x, axis, false).unwrap().to_f64_vec().unwrap();
        assert_same(&format!("{shape:?}"), &got, &cpu::argsort(&vals, &shape, axis, false).unwrap());
    }
}

#[test]
fn argsort_is_deterministic() {
    let mut rng = Rng::new(7);
    let vals = awkward(&mut rng, DType::F32, 5000);
    let x = upload(&vals, &[5000], DType::F32);
    let a = ops::argsort(&x, 0, true).unwrap().to_bytes().unwrap();
    let b = ops::argsort(&x, 0, true).unwrap().to_bytes().unwrap();
    assert_eq!(a, b);
}

#[test]
fn searchsorted_matches_the_reference() {
    let mut rng = Rng::new(8);
    for dt in all_dtypes() {
        for (m, q) in [(0usize, 5usize), (1, 4), (7, 0), (13, 29), (300, 257), (1031, 3)] {
            let raw = awkward(&mut rng, dt, m);
            let sorted = cpu::sort(&raw, &[m], 0, false).unwrap();
            let mut probes = awkward(&mut rng, dt, q);
            // Exact hits as well.
            for (i, p) in probes.iter_mut().enumerate() {
                if i % 3 == 0 && m > 0 {
                    *p = sorted[i % m];
                }
            }
            let x1 = upload(&sorted, &[m], dt);
            let x2 = upload(&probes, &[q], dt);
            for right in [false, true] {
                let got = ops::searchsorted(&x1, &x2, right).unwrap();
                assert_eq!(got.dtype(), DType::I32);
                assert_same(
                    &format!("{dt} m {m} q {q} right {right}"),
                    &got.to_f64_vec().unwrap(),
                    &cpu::searchsorted(&sorted, &probes, right),
                );
            }
        }
    }
    // x2 keeps its shape.
    let x1 = upload(&[1.0, 2.0, 3.0], &[3], DType::F32);
    let x2 = upload(&[0.0, 2.0, 5.0, f64::NAN, 2.5, -0.0], &[2, 3], DType::F32);
    let got = ops::searchsorted(&x1, &x2, false).unwrap();
    assert_eq!(got.shape(), &[2, 3]);
}

#[test]
fn count_nonzero_and_nonzero_match_the_reference() {
    let mut rng = Rng::new(9);
    let cases: &[(&[usize], Option<&[isize]>)] = &[
        (&[0], None),
        (&[1], None),
        (&[7], Some(&[0])),
        (&[13, 17], Some(&[1])),
        (&[13, 17], None),
        (&[3, 1, 257], Some(&[0, 2])),
        (&[2, 0, 3], Some(&[1])),
        (&[1031], None),
    ];
    for dt in all_dtypes() {
        for &(shape, axes) in cases {
            let n: usize = shape.iter().product();
            let vals: Vec<f64> = awkward(&mut rng, dt, n)
                .into_iter()
                .enumerate()
                .map(|(i, v)| if i % 2 == 0 { 0.0 } else { v })
                .collect();
            let x = upload(&vals, shape, dt);
            for keepdims in [false, true] {
                let got = ops::count_nonzero(&x, axes, keepdims).unwrap();
                let (want, wshape) = cpu::count_nonzero(&vals, shape, axes, keepdims).unwrap();
                assert_eq!(got.dtype(), DType::I32);
                assert_eq!(got.shape(), &wshape[..]);
                assert_same(&format!("count_nonzero {dt} {shape:?}"), &got.to_f64_vec().unwrap(), &want);
            }
            let got = ops::nonzero(&x).unwrap();
            let want = cpu::nonzero(&vals, shape);
            assert_eq!(got.len(), shape.len());
            for (d, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.dtype(), DType::I32);
                assert_same(&format!("nonzero {dt} {shape:?} dim {d}"), &g.to_f64_vec().unwrap(), w);
            }
        }
    }
}

#[test]
fn unique_and_isin_match_the_reference() {
    let mut rng = Rng::new(10);
    for dt in all_dtypes() {
        for shape in [&[0usize][..], &[1], &[7], &[13, 17], &[3, 1, 257], &[2, 0, 3], &[1031]] {
            let n: usize = shape.iter().product();
            let vals = awkward(&mut rng, dt, n);
            let x = upload(&vals, shape, dt);
            let what = format!("{dt} {shape:?}");
            let u = ops::unique_all(&x).unwrap();
            let (values, indices, inverse, counts) = cpu::unique_all(&vals);
            assert_eq!(u.values.dtype(), dt);
            assert_same(&format!("unique values {what}"), &u.values.to_f64_vec().unwrap(), &values);
            assert_same(&format!("unique indices {what}"), &u.indices.to_f64_vec().unwrap(), &indices);
            assert_eq!(u.inverse_indices.shape(), shape);
            assert_same(&format!("unique inverse {what}"), &u.inverse_indices.to_f64_vec().unwrap(), &inverse);
            assert_same(&format!("unique counts {what}"), &u.counts.to_f64_vec().unwrap(), &counts);

            let m = rng.int(0, 40) as usize;
            let pool = awkward(&mut rng, dt, m);
            let x2 = upload(&pool, &[m], dt);
            for invert in [false, true] {
                let got = ops::isin(&x, &x2, invert).unwrap();
                assert_eq!(got.dtype(), DType::Bool);
                assert_eq!(got.shape(), shape);
                assert_same(
                    &format!("isin {what} m {m}"),
                    &got.to_f64_vec().unwrap(),
                    &cpu::isin(&vals, &pool, invert),
                );
            }
        }
    }
}

#[test]
fn bad_input_is_an_error() {
    let x = upload(&[1.0, 2.0, 3.0, 4.0], &[2, 2], DType::F32);
    let s = upload(&[1.0], &[], DType::F32);
    let i = upload(&[1.0, 2.0], &[2], DType::I32);
    let code = |r: kiln_core::Result<Tensor>| r.unwrap_err().code();
    assert_eq!(code(ops::argsort(&x, 2, false)), ErrorCode::InvalidArgument);
    assert_eq!(code(ops::sort(&x, -3, false)), ErrorCode::InvalidArgument);
    assert_eq!(code(ops::sort(&s, -1, false)), ErrorCode::InvalidArgument);
    assert_eq!(code(ops::searchsorted(&x, &x, false)), ErrorCode::ShapeMismatch);
    assert_eq!(code(ops::searchsorted(&i, &x, false)), ErrorCode::DTypeMismatch);
    assert_eq!(code(ops::count_nonzero(&x, Some(&[2]), false)), ErrorCode::InvalidArgument);
    assert_eq!(ops::nonzero(&s).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(code(ops::isin(&x, &i, false)), ErrorCode::DTypeMismatch);
}

/// The awaited forms (the browser's) give the blocking forms' bytes: they share all but the
/// count readback.
#[test]
fn async_nonzero_and_unique_match_the_blocking_ones() {
    let mut rng = Rng::new(12);
    for dt in all_dtypes() {
        for shape in [&[0usize][..], &[1], &[3, 1, 257], &[1031]] {
            let n: usize = shape.iter().product();
            let x = upload(&awkward(&mut rng, dt, n), shape, dt);
            let what = format!("{dt} {shape:?}");
            let sync = ops::nonzero(&x).unwrap();
            let awaited = pollster::block_on(ops::nonzero_async(&x)).unwrap();
            assert_eq!(sync.len(), awaited.len(), "nonzero_async {what}");
            for (a, b) in sync.iter().zip(&awaited) {
                assert_eq!(a.to_bytes().unwrap(), b.to_bytes().unwrap(), "nonzero_async {what}");
            }
            let u = ops::unique_all(&x).unwrap();
            let v = pollster::block_on(ops::unique_all_async(&x)).unwrap();
            for (name, a, b) in [
                ("values", &u.values, &v.values),
                ("indices", &u.indices, &v.indices),
                ("inverse_indices", &u.inverse_indices, &v.inverse_indices),
                ("counts", &u.counts, &v.counts),
            ] {
                assert_eq!(a.shape(), b.shape(), "unique_all_async {name} {what}");
                assert_eq!(a.to_bytes().unwrap(), b.to_bytes().unwrap(), "unique_all_async {name} {what}");
            }
        }
    }
    let e = pollster::block_on(ops::nonzero_async(&upload(&[1.0], &[], DType::F32))).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
}
