mod common;
use common::*;
use kiln_core::ops;
use kiln_core::reference::scan as cpu;
use kiln_core::{DType, ErrorCode, Tensor};

/// Shapes and axes: empty, one element, primes, one block exactly and one past it (1024),
/// several blocks (a second level of block totals), axes that are not last, size-0 runs and
/// size-0 other axes, and more rows than one dispatch dimension holds (65535).
const CASES: &[(&[usize], Option<isize>)] = &[
    (&[0], None),
    (&[1], None),
    (&[7], Some(0)),
    (&[1024], None),
    (&[1025], Some(-1)),
    (&[13, 17], Some(1)),
    (&[13, 17], Some(0)),
    (&[3, 1, 257], Some(-1)),
    (&[3, 1, 257], Some(0)),
    (&[2, 0, 3], Some(1)),
    (&[2, 0, 3], Some(2)),
    (&[5, 3, 12], Some(-2)),
    (&[2, 5003], Some(1)),
    (&[2111, 3], Some(0)),
];

fn dtypes() -> Vec<DType> {
    [DType::F32, DType::F16, DType::I32, DType::U32].into_iter().filter(|d| *d != DType::F16 || has_f16()).collect()
}

fn range(sum: bool, dt: DType) -> (f64, f64) {
    match (sum, dt) {
        (_, DType::U32) => (0.0, 100.0),
        (_, DType::I32) => (-100.0, 100.0),
        (true, _) => (-1.0, 1.0),
        // Factors near 1 keep long float products finite and not denormal.
        (false, _) => (0.999, 1.001),
    }
}

fn run(sum: bool, x: &Tensor, axis: Option<isize>, dtype: Option<DType>, init: bool) -> kiln_core::Result<Tensor> {
    if sum {
        ops::cumulative_sum(x, axis, dtype, init)
    } else {
        ops::cumulative_prod(x, axis, dtype, init)
    }
}

fn run_len(shape: &[usize], axis: Option<isize>) -> usize {
    let a = axis.unwrap_or(0);
    shape[if a < 0 { (a + shape.len() as isize) as usize } else { a as usize }]
}

/// Exact for integers; for floats the tolerance of n f32 roundings in another association order,
/// and the sign of every zero and every infinity as the reference has it.
#[track_caller]
fn check(what: &str, dt: DType, n: usize, got: &[f64], want: &[f64]) {
    if !dt.is_float() {
        assert_eq!(got, want, "{what}");
        return;
    }
    let (atol, rtol) = tol(dt);
    assert_close(what, got, want, atol + 1.2e-7 * n as f64, rtol + 1.2e-7 * n as f64);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if *w == 0.0 || w.is_infinite() {
            assert_eq!(g.to_bits(), w.to_bits(), "{what}: element {i}: got {g}, reference {w}");
        }
    }
}

#[test]
fn scans_match_reference() {
    poison();
    let mut rng = Rng::new(61);
    for sum in [true, false] {
        for dt in dtypes() {
            for &(shape, axis) in CASES {
                for init in [false, true] {
                    let (lo, hi) = range(sum, dt);
                    let (x, xv) = rand_tensor(&mut rng, shape, dt, lo, hi);
                    let what = format!("sum={sum} {dt} {shape:?} axis={axis:?} init={init}");
                    let y = run(sum, &x, axis, None, init).unwrap();
                    let (want, ws) = cpu::cumulative(sum, &xv, shape, axis, init, dt).unwrap();
                    assert_eq!(y.shape(), &ws[..], "{what}");
                    assert_eq!(y.dtype(), dt, "{what}");
                    check(&what, dt, run_len(shape, axis), &y.to_f64_vec().unwrap(), &want);
                }
            }
        }
    }
}

#[test]
fn long_runs_and_many_rows() {
    poison();
    let mut rng = Rng::new(62);
    // Past 1024 * 1024: the block totals need a scan of their own block totals (three levels);
    // 70000 rows: the workgroups spread over two dispatch dimensions.
    for (shape, axis) in [(&[1_050_001usize][..], 0isize), (&[70_000, 3][..], 1), (&[3, 70_000][..], 0)] {
        for sum in [true, false] {
            let (x, xv) = rand_tensor(&mut rng, shape, DType::I32, -3.0, 3.0);
            let y = run(sum, &x, Some(axis), None, false).unwrap();
            let (want, _) = cpu::cumulative(sum, &xv, shape, Some(axis), false, DType::I32).unwrap();
            assert_eq!(y.to_f64_vec().unwrap(), want, "sum={sum} {shape:?}");
        }
        let (x, xv) = rand_tensor(&mut rng, shape, DType::F32, -1.0, 1.0);
        let y = ops::cumulative_sum(&x, Some(axis), None, false).unwrap().to_f64_vec().unwrap();
        // Against exact (f64) prefix sums: the kernel's association depth is a few dozen, so
        // each output is within depth * eps of the prefix's sum of magnitudes (the reference's
        // own sequential f32 order drifts further over a million terms).
        let abs: Vec<f64> = xv.iter().map(|v| v.abs()).collect();
        let (sums, mags) = (prefix_f64(&xv, shape, axis as usize), prefix_f64(&abs, shape, axis as usize));
        for i in 0..y.len() {
            assert!(
                (y[i] - sums[i]).abs() <= 64.0 * 6e-8 * mags[i] + 1e-6,
                "f32 {shape:?} element {i}: {} vs {}",
                y[i],
                sums[i]
            );
        }
    }
}

/// Exact prefix sums of a 2-D (or 1-D) tensor along `axis`, in f64.
fn prefix_f64(x: &[f64], shape: &[usize], axis: usize) -> Vec<f64> {
    let (rows, cols) = if shape.len() == 1 { (1, shape[0]) } else { (shape[0], shape[1]) };
    let mut out = x.to_vec();
    for r in 0..rows {
        for c in 0..cols {
            let i = r * cols + c;
            let prev = if shape.len() == 1 || axis == 1 { (c > 0).then(|| i - 1) } else { (r > 0).then(|| i - cols) };
            if let Some(p) = prev {
                out[i] += out[p];
            }
        }
    }
    out
}

#[test]
fn integer_scans_wrap() {
    poison();
    let mut rng = Rng::new(63);
    for (dt, lo, hi) in [(DType::I32, -2.0e9, 2.0e9), (DType::U32, 0.0, 4.0e9)] {
        for sum in [true, false] {
            let shape = [3, 1100];
            let (x, xv) = rand_tensor(&mut rng, &shape, dt, lo, hi);
            let y = run(sum, &x, Some(1), None, true).unwrap();
            let (want, _) = cpu::cumulative(sum, &xv, &shape, Some(1), true, dt).unwrap();
            assert_eq!(y.to_f64_vec().unwrap(), want, "{dt} sum={sum}");
        }
    }
}

#[test]
fn special_values() {
    poison();
    let mut rng = Rng::new(64);
    let specials = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 1.5, -2.0];
    for dt in float_dtypes() {
        for sum in [true, false] {
            for shape in [&[9usize][..], &[4, 300], &[2, 1500]] {
                // Mostly zeros of either sign, a few other specials: NaN, inf - inf, 0 * inf and
                // the sign of zero all show.
                let vals: Vec<f64> = (0..shape.iter().product::<usize>())
                    .map(|_| {
                        let k = rng.int(0, 40) as usize;
                        if k < specials.len() {
                            specials[k]
                        } else if k.is_multiple_of(2) {
                            -0.0
                        } else {
                            0.0
                        }
                    })
                    .collect();
                let x = Tensor::from_bytes(&kiln_core::dtype::f64_to_bytes(dt, &vals), shape, dt).unwrap();
                let axis = Some(shape.len() as isize - 1);
                let y = run(sum, &x, axis, None, false).unwrap();
                let (want, _) = cpu::cumulative(sum, &vals, shape, axis, false, dt).unwrap();
                check(&format!("{dt} sum={sum} {shape:?}"), dt, 0, &y.to_f64_vec().unwrap(), &want);
            }
        }
    }
    // A run of -0 keeps its sign; the initial value is +0.
    let x = Tensor::from_slice(&[-0.0f32; 1500], &[1500]).unwrap();
    let y: Vec<f32> = ops::cumulative_sum(&x, None, None, true).unwrap().to_vec().unwrap();
    assert!(y[0].to_bits() == 0 && y[1..].iter().all(|v| v.to_bits() == (-0.0f32).to_bits()));
}

#[test]
fn scans_are_deterministic() {
    let mut rng = Rng::new(65);
    let (x, _) = rand_tensor(&mut rng, &[3, 5000], DType::F32, -1.0, 1.0);
    let first = ops::cumulative_sum(&x, Some(1), None, false).unwrap().to_vec::<f32>().unwrap();
    for _ in 0..3 {
        let again = ops::cumulative_sum(&x, Some(1), None, false).unwrap().to_vec::<f32>().unwrap();
        assert!(first.iter().zip(&again).all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}

#[test]
fn dtype_casts_first() {
    poison();
    let mut rng = Rng::new(66);
    let (b, bv) = rand_tensor(&mut rng, &[4, 33], DType::Bool, 0.0, 1.0);
    let y = ops::cumulative_sum(&b, Some(1), Some(DType::I32), false).unwrap();
    assert_eq!(y.dtype(), DType::I32);
    let (want, _) = cpu::cumulative(true, &bv, &[4, 33], Some(1), false, DType::I32).unwrap();
    assert_eq!(y.to_f64_vec().unwrap(), want);
    let (x, xv) = rand_tensor(&mut rng, &[50], DType::I32, -5.0, 5.0);
    let y = ops::cumulative_prod(&x, None, Some(DType::F32), false).unwrap();
    assert_eq!(y.dtype(), DType::F32);
    let (want, _) = cpu::cumulative(false, &xv, &[50], None, false, DType::F32).unwrap();
    check("i32 -> f32 prod", DType::F32, 50, &y.to_f64_vec().unwrap(), &want);
}

#[test]
fn bad_input_is_an_error() {
    let x = Tensor::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    let s = Tensor::from_slice(&[1.0f32], &[]).unwrap();
    let b = ops::cast(&x, DType::Bool).unwrap();
    for sum in [true, false] {
        assert_eq!(run(sum, &x, None, None, false).unwrap_err().code(), ErrorCode::InvalidArgument);
        assert_eq!(run(sum, &x, Some(2), None, false).unwrap_err().code(), ErrorCode::InvalidArgument);
        assert_eq!(run(sum, &x, Some(-3), None, false).unwrap_err().code(), ErrorCode::InvalidArgument);
        assert_eq!(run(sum, &s, None, None, false).unwrap_err().code(), ErrorCode::InvalidArgument);
        assert_eq!(run(sum, &b, Some(0), None, false).unwrap_err().code(), ErrorCode::DTypeMismatch);
        assert_eq!(run(sum, &x, Some(0), Some(DType::Bool), false).unwrap_err().code(), ErrorCode::DTypeMismatch);
    }
}

#[test]
fn diff_matches_reference() {
    poison();
    let mut rng = Rng::new(67);
    let cases: &[(&[usize], isize)] =
        &[(&[0], 0), (&[1], -1), (&[7], 0), (&[13, 17], 1), (&[13, 17], 0), (&[3, 1, 257], -1), (&[2, 0, 3], 2)];
    for dt in [DType::F32, DType::I32, DType::U32] {
        for &(shape, axis) in cases {
            for n in [0usize, 1, 2, 9] {
                for (pre, app) in [(false, false), (true, false), (true, true)] {
                    let (lo, hi) = match dt {
                        DType::I32 => (-2e9, 2e9),
                        DType::U32 => (0.0, 4e9),
                        _ => (-1e3, 1e3),
                    };
                    let (x, xv) = rand_tensor(&mut rng, shape, dt, lo, hi);
                    let ax = if axis < 0 { (axis + shape.len() as isize) as usize } else { axis as usize };
                    let edge = |rng: &mut Rng, k: usize| {
                        let mut s = shape.to_vec();
                        s[ax] = k;
                        let (t, v) = rand_tensor(rng, &s, dt, 0.0, 100.0);
                        (t, v, s)
                    };
                    let p = pre.then(|| edge(&mut rng, 2));
                    let a = app.then(|| edge(&mut rng, 1));
                    let y = ops::diff(&x, axis, n, p.as_ref().map(|p| &p.0), a.as_ref().map(|a| &a.0)).unwrap();
                    let (want, ws) = cpu::diff(
                        &xv,
                        shape,
                        axis,
                        n,
                        p.as_ref().map(|p| (&p.1[..], &p.2[..])),
                        a.as_ref().map(|a| (&a.1[..], &a.2[..])),
                        dt,
                    )
                    .unwrap();
                    let what = format!("diff {dt} {shape:?} axis={axis} n={n} pre={pre} app={app}");
                    assert_eq!(y.shape(), &ws[..], "{what}");
                    check(&what, dt, 0, &y.to_f64_vec().unwrap(), &want);
                }
            }
        }
    }
    // inf - inf, NaN and the sign of zero come out as IEEE subtraction gives them.
    let v = [f32::INFINITY, f32::INFINITY, f32::NAN, 1.0, -0.0, 0.0, f32::NEG_INFINITY];
    let x = Tensor::from_slice(&v, &[7]).unwrap();
    let y: Vec<f32> = ops::diff(&x, 0, 1, None, None).unwrap().to_vec().unwrap();
    let want: Vec<f32> = v.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())), "{y:?}");
}

#[test]
fn diff_errors() {
    let x = Tensor::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    let s = Tensor::from_slice(&[1.0f32], &[]).unwrap();
    let wrong = Tensor::from_slice(&[1.0f32; 4], &[4, 1]).unwrap();
    let i = Tensor::from_slice(&[1i32; 2], &[2, 1]).unwrap();
    let b = ops::cast(&x, DType::Bool).unwrap();
    assert_eq!(ops::diff(&s, 0, 1, None, None).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::diff(&x, 2, 1, None, None).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::diff(&b, 0, 1, None, None).unwrap_err().code(), ErrorCode::DTypeMismatch);
    assert_eq!(ops::diff(&x, 1, 1, Some(&wrong), None).unwrap_err().code(), ErrorCode::ShapeMismatch);
    assert_eq!(ops::diff(&x, 1, 1, None, Some(&i)).unwrap_err().code(), ErrorCode::DTypeMismatch);
}
