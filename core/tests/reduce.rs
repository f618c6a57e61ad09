mod common;
use common::*;
use kiln_core::ops;
use kiln_core::reference::reduce as cpu;
use kiln_core::{DType, ErrorCode, Tensor};

type Axes = Option<&'static [isize]>;

/// Shapes and axis sets: empty, one element, primes, rows past 256, several axes (contiguous
/// and not), negative axes, None, the empty set, transposed-column cases.
const CASES: &[(&[usize], Axes)] = &[
    (&[0], None),
    (&[0], Some(&[0])),
    (&[1], None),
    (&[7], Some(&[0])),
    (&[13, 17], Some(&[1])),
    (&[13, 17], Some(&[0])),
    (&[13, 17], Some(&[-1, -2])),
    (&[13, 17], None),
    (&[3, 1, 257], Some(&[-1])),
    (&[3, 1, 257], Some(&[0, 2])),
    (&[3, 5, 7], Some(&[0, 2])),
    (&[3, 5, 7], Some(&[1])),
    (&[3, 5, 7], Some(&[])),
    (&[2, 3, 4, 5], Some(&[1, 3])),
    (&[2, 3, 4, 5], Some(&[0, 1])),
    (&[2, 0, 3], Some(&[0])),
    (&[2, 0, 3], Some(&[1])),
    (&[1031], None),
    (&[5, 600], Some(&[1])),
    (&[300, 3], Some(&[0])),
    (&[2, 41, 3], Some(&[1])),
    (&[4, 1, 33], Some(&[2])),
    (&[], None),
    // Long runs with few outputs are split into pieces and folded in a second launch.
    (&[2, 20011], Some(&[1])),
    (&[40009], None),
    (&[97, 5, 3], Some(&[0])),
    (&[70, 8], Some(&[0])),
    (&[5, 3, 12], Some(&[-2])),
];

fn range(dt: DType) -> (f64, f64) {
    match dt {
        DType::U32 | DType::Bool => (0.0, 100.0),
        DType::I32 => (-100.0, 100.0),
        _ => (-1.0, 1.0),
    }
}

fn dtypes() -> Vec<DType> {
    DType::ALL.into_iter().filter(|d| *d != DType::F16 || has_f16()).collect()
}

/// Sums of n values in [-1, 1] carry an accumulated rounding error of about n * eps.
fn sum_tol(dt: DType, n: usize) -> (f64, f64) {
    let (atol, rtol) = tol(dt);
    let eps = if dt == DType::F16 { 0.0 } else { 6e-8 };
    (atol + eps * n as f64, rtol)
}

fn r_of(shape: &[usize], axes: Axes) -> usize {
    let rank = shape.len() as isize;
    match axes {
        None => shape.iter().product(),
        Some(a) => a.iter().map(|&d| shape[(if d < 0 { d + rank } else { d }) as usize]).product(),
    }
}

#[test]
fn sum_mean_var_max_min_match_reference() {
    poison();
    let mut rng = Rng::new(11);
    for dt in dtypes() {
        for &(shape, axes) in CASES {
            for keepdims in [false, true] {
                let (lo, hi) = range(dt);
                let (x, xv) = rand_tensor(&mut rng, shape, dt, lo, hi);
                let what = |op: &str| format!("{op} {dt} {shape:?} axes={axes:?} keepdims={keepdims}");
                let n = r_of(shape, axes);
                let (atol, rtol) = sum_tol(dt, n);

                if dt == DType::Bool {
                    assert_eq!(ops::sum(&x, axes, keepdims).unwrap_err().code(), ErrorCode::DTypeMismatch);
                } else {
                    let y = ops::sum(&x, axes, keepdims).unwrap();
                    let (want, ws) = cpu::sum(&xv, shape, axes, keepdims, dt).unwrap();
                    assert_eq!(y.shape(), &ws[..], "{}", what("sum"));
                    assert_eq!(y.dtype(), dt);
                    assert_close(&what("sum"), &y.to_f64_vec().unwrap(), &want, atol, rtol);
                }

                for (name, got, want) in [
                    ("max", ops::max(&x, axes, keepdims), cpu::max(&xv, shape, axes, keepdims)),
                    ("min", ops::min(&x, axes, keepdims), cpu::min(&xv, shape, axes, keepdims)),
                ] {
                    match want {
                        Ok((want, ws)) => {
                            let y = got.unwrap();
                            assert_eq!(y.shape(), &ws[..], "{}", what(name));
                            assert_eq!(y.to_f64_vec().unwrap(), want, "{}", what(name));
                        }
                        Err(e) => {
                            assert_eq!(e.code(), ErrorCode::InvalidArgument);
                            assert_eq!(got.unwrap_err().code(), ErrorCode::InvalidArgument, "{}", what(name));
                        }
                    }
                }

                if dt.is_float() {
                    let y = ops::mean(&x, axes, keepdims).unwrap();
                    let (want, ws) = cpu::mean(&xv, shape, axes, keepdims, dt).unwrap();
                    assert_eq!(y.shape(), &ws[..]);
                    assert_close(&what("mean"), &y.to_f64_vec().unwrap(), &want, atol, rtol);
                    for ddof in [0, 1] {
                        let y = ops::var(&x, axes, keepdims, ddof).unwrap();
                        let (want, ws) = cpu::var(&xv, shape, axes, keepdims, ddof, dt).unwrap();
                        assert_eq!(y.shape(), &ws[..]);
                        assert_close(
                            &format!("{} ddof={ddof}", what("var")),
                            &y.to_f64_vec().unwrap(),
                            &want,
                            atol,
                            rtol * 2.0,
                        );
                    }
                } else {
                    assert_eq!(ops::mean(&x, axes, keepdims).unwrap_err().code(), ErrorCode::DTypeMismatch);
                    assert_eq!(ops::var(&x, axes, keepdims, 0).unwrap_err().code(), ErrorCode::DTypeMismatch);
                }
            }
        }
    }
}

#[test]
fn argmax_argmin_match_reference() {
    poison();
    let mut rng = Rng::new(12);
    let cases: &[(&[usize], Option<isize>)] = &[
        (&[1], None),
        (&[7], Some(0)),
        (&[13, 17], Some(1)),
        (&[13, 17], Some(-2)),
        (&[13, 17], None),
        (&[3, 1, 257], Some(-1)),
        (&[3, 5, 7], Some(1)),
        (&[2, 0, 3], Some(0)),
        (&[1031], None),
        (&[5, 600], Some(1)),
        (&[300, 3], Some(0)),
        (&[], None),
        // Split into pieces (rows and columns): stage 2 picks among the pieces' winners.
        (&[2, 20011], Some(1)),
        (&[40009], None),
        (&[97, 5, 3], Some(0)),
        (&[70, 8], Some(0)),
    ];
    for dt in dtypes() {
        for &(shape, axis) in cases {
            for keepdims in [false, true] {
                // A narrow integer range makes ties common: the first occurrence must win.
                let (lo, hi) = if dt.is_float() { (-1.0, 1.0) } else { (0.0, 5.0) };
                let (x, mut xv) = rand_tensor(&mut rng, shape, dt, lo, hi);
                let x = if dt.is_float() && !xv.is_empty() {
                    // Exact ties in float data too: copy a few values around.
                    let n = xv.len();
                    for k in 0..n / 3 {
                        xv[(k * 7 + 3) % n] = xv[(k * 5) % n];
                    }
                    Tensor::from_bytes(&kiln_core::dtype::f64_to_bytes(dt, &xv), shape, dt).unwrap()
                } else {
                    x
                };
                for (name, got, want) in [
                    ("argmax", ops::argmax(&x, axis, keepdims), cpu::argmax(&xv, shape, axis, keepdims)),
                    ("argmin", ops::argmin(&x, axis, keepdims), cpu::argmin(&xv, shape, axis, keepdims)),
                ] {
                    let what = format!("{name} {dt} {shape:?} axis={axis:?} keepdims={keepdims}");
                    let (want, ws) = want.unwrap();
                    let y = got.unwrap();
                    assert_eq!(y.dtype(), DType::I32, "{what}");
                    assert_eq!(y.shape(), &ws[..], "{what}");
                    assert_eq!(y.to_f64_vec().unwrap(), want, "{what}");
                }
            }
        }
    }
}

#[test]
fn nan_propagates_through_max_and_argmax() {
    let x = Tensor::from_slice(&[1.0f32, f32::NAN, 3.0, f32::NAN, 2.0, 5.0, -1.0, 0.5], &[2, 4]).unwrap();
    let xv = x.to_f64_vec().unwrap();
    let m = ops::max(&x, Some(&[1]), false).unwrap().to_f64_vec().unwrap();
    assert!(m[0].is_nan() && m[1] == 5.0, "{m:?}");
    let (want, _) = cpu::argmax(&xv, &[2, 4], Some(1), false).unwrap();
    assert_eq!(want, vec![1.0, 1.0]);
    assert_eq!(ops::argmax(&x, Some(1), false).unwrap().to_f64_vec().unwrap(), want);
    assert_eq!(ops::argmin(&x, None, false).unwrap().to_vec::<i32>().unwrap(), vec![1]);
}

/// Split argmax/argmin (runs long enough for pieces): the winner's value appears in several
/// pieces (the first position must win), NaN only in a late piece or in two (the first NaN),
/// every value -inf or equal, +0 against -0 (equal: the first), subnormals, f16 too.
#[test]
fn split_arg_reductions_keep_the_first_winner() {
    poison();
    let n = 3 * 16411;
    let sub = f32::from_bits(3) as f64;
    let rows: Vec<(&str, Vec<f64>)> = vec![
        ("ties across pieces", (0..n).map(|j| if j % 9000 == 8999 { 2.0 } else { (j % 97) as f64 / 97.0 }).collect()),
        ("nan late", (0..n).map(|j| if j == n - 5 { f64::NAN } else { (j % 13) as f64 }).collect()),
        (
            "two nans",
            (0..n).map(|j| if j == 20000 || j == 9 * n / 10 { f64::NAN } else { -((j % 13) as f64) }).collect(),
        ),
        ("all -inf", vec![f64::NEG_INFINITY; n]),
        ("all equal", vec![0.25; n]),
        ("signed zeros", (0..n).map(|j| if j % 2 == 0 { -0.0 } else { 0.0 }).collect()),
        ("subnormals", (0..n).map(|j| if j % 7000 == 6999 { sub } else { -sub }).collect()),
    ];
    for dt in [DType::F32, DType::F16].into_iter().filter(|d| *d != DType::F16 || has_f16()) {
        for (what, xv) in &rows {
            for (shape, axis) in [(vec![n], None), (vec![1, n], Some(1)), (vec![n / 3, 3], Some(0))] {
                let x = upload(xv, &shape, dt);
                let xv = x.to_f64_vec().unwrap();
                for (name, got, want) in [
                    ("argmax", ops::argmax(&x, axis, false), cpu::argmax(&xv, &shape, axis, false)),
                    ("argmin", ops::argmin(&x, axis, false), cpu::argmin(&xv, &shape, axis, false)),
                ] {
                    let (want, _) = want.unwrap();
                    assert_eq!(got.unwrap().to_f64_vec().unwrap(), want, "{name} {what} {dt} {shape:?}");
                }
                // The values too, bit for bit (the sign of a zero, NaN as NaN).
                let ax: Option<&[isize]> = axis.as_ref().map(std::slice::from_ref);
                for (name, got, want) in [
                    ("max", ops::max(&x, ax, false), cpu::max(&xv, &shape, ax, false)),
                    ("min", ops::min(&x, ax, false), cpu::min(&xv, &shape, ax, false)),
                ] {
                    let (want, _) = want.unwrap();
                    let got = got.unwrap().to_f64_vec().unwrap();
                    let bits = |v: &[f64]| {
                        v.iter().map(|f| if f.is_nan() { u64::MAX } else { f.to_bits() }).collect::<Vec<_>>()
                    };
                    assert_eq!(bits(&got), bits(&want), "{name} {what} {dt} {shape:?}: {got:?} vs {want:?}");
                }
            }
        }
    }
}

#[test]
fn integer_sums_wrap() {
    let x = Tensor::from_slice(&[i32::MAX, 1, 5], &[3]).unwrap();
    assert_eq!(ops::sum(&x, None, false).unwrap().to_vec::<i32>().unwrap(), vec![i32::MIN + 5]);
    let u = Tensor::from_slice(&[u32::MAX, 2u32], &[2]).unwrap();
    assert_eq!(ops::sum(&u, None, false).unwrap().to_vec::<u32>().unwrap(), vec![1]);
}

#[test]
fn empty_reductions() {
    let x = Tensor::from_slice::<f32>(&[], &[2, 0, 3]).unwrap();
    assert_eq!(ops::sum(&x, Some(&[1]), false).unwrap().to_vec::<f32>().unwrap(), vec![0.0; 6]);
    assert!(ops::mean(&x, Some(&[1]), true).unwrap().to_vec::<f32>().unwrap().iter().all(|v| v.is_nan()));
    assert!(ops::var(&x, None, false, 0).unwrap().to_vec::<f32>().unwrap()[0].is_nan());
    assert_eq!(ops::max(&x, Some(&[1]), false).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::argmax(&x, None, false).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::argmin(&x, Some(1), false).unwrap_err().code(), ErrorCode::InvalidArgument);
    // Reducing a non-empty axis of an empty tensor gives an empty result, as numpy does.
    assert_eq!(ops::max(&x, Some(&[0]), false).unwrap().shape(), &[0, 3]);
    assert_eq!(ops::argmax(&x, Some(2), true).unwrap().shape(), &[2, 0, 1]);
    // ddof >= n: numpy's max(n - ddof, 0) denominator.
    let y = Tensor::from_slice(&[1.0f32, 3.0], &[2]).unwrap();
    assert_eq!(ops::var(&y, None, false, 2).unwrap().to_vec::<f32>().unwrap(), vec![f32::INFINITY]);
    assert_eq!(ops::var(&y, None, false, 1).unwrap().to_vec::<f32>().unwrap(), vec![2.0]);
}

#[test]
fn more_than_65535_rows() {
    poison();
    let mut rng = Rng::new(13);
    // One workgroup per row (run >= 32) and one thread per row (run 3): 70000 rows either way.
    for shape in [&[70000usize, 3][..], &[70000, 33]] {
        let (x, xv) = rand_tensor(&mut rng, shape, DType::F32, -1.0, 1.0);
        let (want, _) = cpu::sum(&xv, shape, Some(&[-1]), false, DType::F32).unwrap();
        assert_close(
            &format!("sum {shape:?}"),
            &ops::sum(&x, Some(&[-1]), false).unwrap().to_f64_vec().unwrap(),
            &want,
            1e-5,
            1e-5,
        );
        let (want, _) = cpu::argmax(&xv, shape, Some(-1), false).unwrap();
        assert_eq!(ops::argmax(&x, Some(-1), false).unwrap().to_f64_vec().unwrap(), want, "argmax {shape:?}");
        let (want, _) = cpu::var(&xv, shape, Some(&[1]), false, 0, DType::F32).unwrap();
        assert_close(
            &format!("var {shape:?}"),
            &ops::var(&x, Some(&[1]), false, 0).unwrap().to_f64_vec().unwrap(),
            &want,
            1e-5,
            1e-5,
        );
    }
}

#[test]
fn repeated_runs_give_identical_bytes() {
    let mut rng = Rng::new(14);
    let (x, _) = rand_tensor(&mut rng, &[3, 5000], DType::F32, -3.0, 3.0);
    let runs = |f: &dyn Fn() -> Tensor| {
        let first = f().to_bytes().unwrap();
        for _ in 0..3 {
            assert_eq!(f().to_bytes().unwrap(), first);
        }
    };
    runs(&|| ops::sum(&x, None, false).unwrap());
    runs(&|| ops::sum(&x, Some(&[0]), false).unwrap());
    runs(&|| ops::mean(&x, Some(&[1]), false).unwrap());
    runs(&|| ops::var(&x, Some(&[1]), false, 1).unwrap());
}

#[test]
fn var_is_stable_with_a_large_offset() {
    // A naive E[x^2] - E[x]^2 in f32 loses everything here; two passes keep it.
    let vals: Vec<f32> = (0..1000).map(|i| 10000.0 + (i % 10) as f32 * 0.1).collect();
    let x = Tensor::from_slice(&vals, &[1000]).unwrap();
    let xv: Vec<f64> = vals.iter().map(|&v| v as f64).collect();
    let (want, _) = cpu::var(&xv, &[1000], None, false, 0, DType::F32).unwrap();
    assert_close("var offset", &ops::var(&x, None, false, 0).unwrap().to_f64_vec().unwrap(), &want, 1e-4, 1e-3);
}

#[test]
fn errors_for_bad_axes() {
    let x = Tensor::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    assert_eq!(ops::sum(&x, Some(&[2]), false).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::sum(&x, Some(&[-3]), false).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::max(&x, Some(&[1, -1]), false).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::var(&x, Some(&[0, 0]), false, 0).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::argmax(&x, Some(2), false).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::argmin(&x, Some(-3), false).unwrap_err().code(), ErrorCode::InvalidArgument);
    let s = Tensor::from_slice(&[1.0f32], &[]).unwrap();
    assert_eq!(ops::argmax(&s, Some(0), false).unwrap_err().code(), ErrorCode::InvalidArgument);
    let i = Tensor::from_slice(&[1i32; 6], &[2, 3]).unwrap();
    assert_eq!(ops::mean(&i, None, false).unwrap_err().code(), ErrorCode::DTypeMismatch);
    // The device still works afterwards.
    assert_eq!(ops::sum(&x, None, false).unwrap().to_vec::<f32>().unwrap(), vec![6.0]);
}

#[test]
fn nan_propagates_through_vec4_row_max_and_min() {
    // Rows of 64 f32 take the vec4 path (one NaN test per vec4); row 1 holds a NaN mid-row.
    let mut v: Vec<f32> = (0..3 * 64).map(|i| ((i * 37 % 101) as f32) - 50.0).collect();
    v[64 + 45] = f32::NAN;
    let x = Tensor::from_slice(&v, &[3, 64]).unwrap();
    let xv = x.to_f64_vec().unwrap();
    for (got, (want, _)) in [
        (ops::max(&x, Some(&[1]), false).unwrap(), cpu::max(&xv, &[3, 64], Some(&[1]), false).unwrap()),
        (ops::min(&x, Some(&[1]), false).unwrap(), cpu::min(&xv, &[3, 64], Some(&[1]), false).unwrap()),
    ] {
        let got = got.to_f64_vec().unwrap();
        assert!(got[1].is_nan() && want[1].is_nan(), "{got:?}");
        assert_eq!((got[0], got[2]), (want[0], want[2]));
    }
}
