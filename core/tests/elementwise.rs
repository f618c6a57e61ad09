mod common;
use common::*;
use kiln_core::ops::{self, BinaryOp, UnaryOp};
use kiln_core::reference::elementwise as cpu;
use kiln_core::{DType, ErrorCode, Tensor};

fn domain(op: UnaryOp) -> (f64, f64) {
    match op {
        UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Log2 | UnaryOp::Log10 => (0.05, 10.0),
        UnaryOp::Asin | UnaryOp::Acos | UnaryOp::Atanh => (-0.999, 0.999),
        UnaryOp::Acosh => (1.0, 50.0),
        UnaryOp::Log1p => (-0.95, 20.0),
        UnaryOp::Exp => (-10.0, 10.0),
        _ => (-6.0, 6.0),
    }
}

#[test]
fn unary_ops_match_reference_on_awkward_shapes() {
    poison();
    let mut rng = Rng::new(1);
    for dt in float_dtypes() {
        // The bitwise ops take integers and bool only (core/tests/bitwise.rs).
        for op in UnaryOp::ALL.into_iter().filter(|op| !op.is_bitwise()) {
            for shape in AWKWARD {
                let (lo, hi) = domain(op);
                let (x, xv) = rand_tensor(&mut rng, shape, dt, lo, hi);
                let y = ops::unary(op, &x).unwrap();
                assert_eq!(y.shape(), *shape);
                let (atol, rtol) = tol(dt);
                // The erf approximation in WGSL is good to 1.5e-7 absolute.
                let atol = if op == UnaryOp::Gelu { atol.max(3e-6) } else { atol };
                assert_close(
                    &format!("{} {dt} {shape:?}", op.name()),
                    &y.to_f64_vec().unwrap(),
                    &cpu::unary(op, &xv, dt),
                    atol,
                    rtol,
                );
            }
        }
    }
}

#[test]
fn integer_unary_ops_and_float_only_errors() {
    let mut rng = Rng::new(2);
    let (x, xv) = rand_tensor(&mut rng, &[300], DType::I32, -1000.0, 1000.0);
    let (xu, xuv) = rand_tensor(&mut rng, &[257], DType::U32, 0.0, 4294967295.0);
    for op in UnaryOp::ALL.into_iter().filter(|op| op.allows_int()) {
        let y = ops::unary(op, &x).unwrap();
        assert_eq!(y.to_f64_vec().unwrap(), cpu::unary(op, &xv, DType::I32), "{}", op.name());
        let y = ops::unary(op, &xu).unwrap();
        assert_eq!(y.to_f64_vec().unwrap(), cpu::unary(op, &xuv, DType::U32), "{} u32", op.name());
    }
    // The standard's rules that the random inputs above may miss: sign(0) = 0, square wraps,
    // the rounding ops leave integers as they are.
    let e = Tensor::from_slice(&[0i32, -5, 7, i32::MIN, 46341], &[5]).unwrap();
    assert_eq!(ops::sign(&e).unwrap().to_vec::<i32>().unwrap(), vec![0, -1, 1, -1, 1]);
    assert_eq!(ops::square(&e).unwrap().to_vec::<i32>().unwrap(), vec![0, 25, 49, 0, 46341i32.wrapping_mul(46341)]);
    for op in [UnaryOp::Floor, UnaryOp::Ceil, UnaryOp::Trunc, UnaryOp::Round] {
        assert_eq!(ops::unary(op, &e).unwrap().to_vec::<i32>().unwrap(), e.to_vec::<i32>().unwrap(), "{}", op.name());
    }
    let err = ops::exp(&x).unwrap_err();
    assert_eq!(err.code(), ErrorCode::DTypeMismatch);
}

#[test]
fn binary_ops_broadcast_like_numpy() {
    poison();
    let mut rng = Rng::new(3);
    let pairs: &[(&[usize], &[usize])] = &[
        (&[0], &[0]),
        (&[1], &[1]),
        (&[7], &[7]),
        (&[13, 17], &[17]),
        (&[3, 1, 5], &[1, 4, 1]),
        (&[2, 0, 3], &[3]),
        (&[1031], &[]),
        (&[], &[5, 2]),
        (&[2, 1, 3, 1, 2], &[1, 3, 1, 2, 1]),
    ];
    for dt in DType::ALL.into_iter().filter(|d| *d != DType::F16 || has_f16()) {
        for op in BinaryOp::ALL.into_iter().filter(|op| if dt.is_float() { !op.is_bitwise() } else { op.allows_int() })
        {
            if dt == DType::Bool
                && !op.gives_bool()
                && !op.allows_bool_bits()
                && !matches!(op, BinaryOp::Maximum | BinaryOp::Minimum)
            {
                // Arithmetic on bool is refused (core/tests/bool.rs checks the error).
                continue;
            }
            for (sa, sb) in pairs {
                let (lo, hi) = match (op, dt) {
                    (BinaryOp::Pow, DType::I32) => (-3.0, 7.0),
                    (BinaryOp::Pow, DType::U32) => (0.0, 9.0),
                    (BinaryOp::Pow, _) => (0.1, 3.0),
                    (_, DType::U32) => (0.0, 1000.0),
                    (_, DType::I32) => (-1000.0, 1000.0),
                    _ => (-5.0, 5.0),
                };
                let (a, av) = rand_tensor(&mut rng, sa, dt, lo, hi);
                let (b, bv) = match (op, dt) {
                    (BinaryOp::Div, DType::F32 | DType::F16) => rand_tensor(&mut rng, sb, dt, 0.5, hi),
                    // Both signs, and small enough for many whole quotients.
                    (BinaryOp::Remainder | BinaryOp::FloorDivide, DType::F32 | DType::F16) => {
                        rand_tensor(&mut rng, sb, dt, -2.0, 2.0)
                    }
                    (BinaryOp::Remainder | BinaryOp::FloorDivide, DType::I32) => {
                        rand_tensor(&mut rng, sb, dt, -9.0, 9.0)
                    }
                    (BinaryOp::Remainder | BinaryOp::FloorDivide, DType::U32) => {
                        rand_tensor(&mut rng, sb, dt, 0.0, 9.0)
                    }
                    // Small divisors, so that zero and both signs occur.
                    (BinaryOp::Div, DType::I32) => rand_tensor(&mut rng, sb, dt, -9.0, 9.0),
                    (BinaryOp::Div, DType::U32) => rand_tensor(&mut rng, sb, dt, 0.0, 9.0),
                    (BinaryOp::Pow, DType::I32) => rand_tensor(&mut rng, sb, dt, -2.0, 12.0),
                    (BinaryOp::Pow, DType::U32) => rand_tensor(&mut rng, sb, dt, 0.0, 12.0),
                    _ => rand_tensor(&mut rng, sb, dt, lo, hi),
                };
                let y = ops::binary(op, &a, &b).unwrap();
                let (want, shape) = cpu::binary(op, &av, sa, &bv, sb, dt).unwrap();
                assert_eq!(y.shape(), &shape[..]);
                let out_dt = if op.gives_bool() { DType::Bool } else { dt };
                assert_eq!(y.dtype(), out_dt);
                let (atol, rtol) = tol(out_dt);
                assert_close(
                    &format!("{} {dt} {sa:?} {sb:?}", op.name()),
                    &y.to_f64_vec().unwrap(),
                    &want,
                    atol,
                    rtol * 4.0,
                );
            }
        }
    }
}

#[test]
fn scalar_forms_and_where() {
    let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0, -4.0], &[2, 2]).unwrap();
    assert_eq!(ops::mul_scalar(&x, 2.0).unwrap().to_vec::<f32>().unwrap(), vec![2.0, -4.0, 6.0, -8.0]);
    assert_eq!(
        ops::binary_scalar(BinaryOp::Sub, &x, 1.0, true).unwrap().to_vec::<f32>().unwrap(),
        vec![0.0, 3.0, -2.0, 5.0]
    );
    let c = ops::gt_scalar(&x, 0.0).unwrap();
    assert_eq!(c.dtype(), DType::Bool);
    assert_eq!(c.to_bools().unwrap(), vec![true, false, true, false]);
    let z = ops::zeros(&[2], DType::F32).unwrap();
    let w = ops::where_(&c, &x, &z).unwrap();
    assert_eq!(w.shape(), &[2, 2]);
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![1.0, 0.0, 3.0, 0.0]);

    let mut rng = Rng::new(4);
    let (c, cv) = rand_tensor(&mut rng, &[3, 1, 7], DType::U32, 0.0, 1.0);
    let (a, av) = rand_tensor(&mut rng, &[4, 1], DType::F32, -1.0, 1.0);
    let (b, bv) = rand_tensor(&mut rng, &[7], DType::F32, -1.0, 1.0);
    let (want, shape) = cpu::where_(&cv, &[3, 1, 7], &av, &[4, 1], &bv, &[7]).unwrap();
    let got = ops::where_(&c, &a, &b).unwrap();
    assert_eq!(got.shape(), &shape[..]);
    assert_eq!(got.to_f64_vec().unwrap(), want);
}

#[test]
fn cast_fill_arange_copy() {
    let x = Tensor::from_slice(&[1.7f32, -2.5, 3e9, -0.2], &[4]).unwrap();
    let xv = x.to_f64_vec().unwrap();
    for to in [DType::I32, DType::U32, DType::F32] {
        assert_eq!(ops::cast(&x, to).unwrap().to_f64_vec().unwrap(), cpu::cast(&xv, to), "cast to {to}");
    }
    assert_eq!(ops::full(&[3, 2], DType::I32, -7.0).unwrap().to_vec::<i32>().unwrap(), vec![-7; 6]);
    assert_eq!(ops::full(&[0], DType::F32, 1.0).unwrap().numel(), 0);
    for dt in [DType::F32, DType::I32] {
        let a = ops::arange(-3.0, 700.0, 3.0, dt).unwrap();
        assert_eq!(a.to_f64_vec().unwrap(), cpu::arange(-3.0, 700.0, 3.0, dt));
    }
    let c = ops::copy(&x).unwrap();
    assert!(!c.shares_buffer(&x));
    assert_eq!(c.to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
    ops::fill(&c, 2.5).unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![2.5; 4]);
}

#[test]
fn assign_overwrites_the_buffer_that_views_share() {
    let mut rng = Rng::new(16);
    let mut dtypes = float_dtypes();
    dtypes.extend([DType::I32, DType::U32, DType::Bool]);
    for dt in dtypes {
        for shape in AWKWARD {
            let lo = if dt == DType::U32 { 0.0 } else { -3.0 };
            let (dst, _) = rand_tensor(&mut rng, shape, dt, lo, 3.0);
            let (src, srcv) = rand_tensor(&mut rng, shape, dt, lo, 3.0);
            let view = dst.reshape(&[-1]).unwrap();
            ops::assign(&dst, &src).unwrap();
            assert_eq!(dst.to_f64_vec().unwrap(), srcv, "{dt} {shape:?}");
            assert_eq!(view.to_f64_vec().unwrap(), srcv, "{dt} {shape:?}: a view of dst");
            let dims: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
            ops::assign(&dst, &view.reshape(&dims).unwrap()).unwrap(); // one buffer: nothing to copy
            assert_eq!(dst.to_f64_vec().unwrap(), srcv);
        }
    }
    let a = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let b = Tensor::from_slice(&[1i32, 2], &[2]).unwrap();
    let c = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    assert_eq!(ops::assign(&a, &b).unwrap_err().code(), ErrorCode::DTypeMismatch);
    assert_eq!(ops::assign(&a, &c).unwrap_err().code(), ErrorCode::ShapeMismatch);
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
}

#[test]
fn clip_propagates_nan_and_keeps_the_shape_of_x() {
    let mut rng = Rng::new(15);
    for dt in float_dtypes() {
        for shape in AWKWARD {
            let (x, xv) = rand_tensor(&mut rng, shape, dt, -3.0, 3.0);
            let last = shape.last().map_or(vec![], |&n| vec![n]);
            let (lo, lov) = rand_tensor(&mut rng, &last, dt, -2.0, 0.0);
            let (hi, hiv) = rand_tensor(&mut rng, &[], dt, 0.0, 2.0);
            let y = ops::clip(&x, Some(&lo), Some(&hi)).unwrap();
            assert_eq!(y.shape(), *shape);
            let n = last.first().copied().unwrap_or(1).max(1);
            let want: Vec<f64> = xv.iter().enumerate().map(|(i, &v)| cpu::clip_value(v, lov[i % n], hiv[0])).collect();
            assert_eq!(y.to_f64_vec().unwrap(), want, "{dt} {shape:?}");
        }
    }
    let f = |v: &[f32]| Tensor::from_slice(v, &[v.len()]).unwrap();
    let x = f(&[f32::NAN, 0.5, -5.0, 5.0, -0.0]);
    let got =
        ops::clip(&x, Some(&f(&[0.0, f32::NAN, 0.0, 0.0, 0.0])), Some(&f(&[1.0, 1.0, 1.0, f32::NAN, 1.0]))).unwrap();
    let got = got.to_vec::<f32>().unwrap();
    assert!(got[0].is_nan() && got[1].is_nan() && got[3].is_nan(), "{got:?}");
    assert_eq!((got[2], got[4].to_bits()), (0.0, 0), "maximum(-0, +0) is the second operand");
    assert_eq!(ops::clip(&x, None, None).unwrap().to_vec::<f32>().unwrap()[1..], [0.5, -5.0, 5.0, -0.0]);
    let i = Tensor::from_slice(&[-7i32, 0, 9, i32::MAX], &[4]).unwrap();
    assert_eq!(ops::clip_scalar(&i, -3.0, 4.0).unwrap().to_vec::<i32>().unwrap(), vec![-3, 0, 4, 4]);
    assert_eq!(ops::clip_scalar(&i, f64::NEG_INFINITY, 4.0).unwrap().to_vec::<i32>().unwrap(), vec![-7, 0, 4, 4]);
    assert_eq!(ops::clip_scalar(&i, 1.0, f64::INFINITY).unwrap().to_vec::<i32>().unwrap(), vec![1, 1, 9, i32::MAX]);
    assert_eq!(ops::clip_scalar(&i, 0.5, 4.0).unwrap_err().code(), ErrorCode::InvalidArgument);
    let wide = f(&[0.0; 3]);
    let one = f(&[1.0]);
    assert_eq!(ops::clip(&one, Some(&wide), None).unwrap_err().code(), ErrorCode::ShapeMismatch);
    let i1 = Tensor::from_slice(&[1i32], &[1]).unwrap();
    assert_eq!(ops::clip(&x, Some(&i1), None).unwrap_err().code(), ErrorCode::DTypeMismatch);
}

#[test]
fn more_than_65535_workgroups() {
    // 65536 * 256 + 3 elements needs 65537 workgroups: the dispatch spreads over x and y.
    let n = 65536 * 256 + 3;
    let x = ops::arange(0.0, n as f64, 1.0, DType::I32).unwrap();
    let y = ops::add_scalar(&x, 1.0).unwrap();
    let v = y.to_vec::<i32>().unwrap();
    assert_eq!(v.len(), n);
    assert!(v.iter().enumerate().all(|(i, &e)| e == i as i32 + 1));
}

#[test]
fn errors_for_bad_input() {
    let a = Tensor::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    let b = Tensor::from_slice(&[1.0f32; 4], &[4]).unwrap();
    assert_eq!(ops::add(&a, &b).unwrap_err().code(), ErrorCode::ShapeMismatch);
    let i = Tensor::from_slice(&[1i32; 6], &[2, 3]).unwrap();
    assert_eq!(ops::add(&a, &i).unwrap_err().code(), ErrorCode::DTypeMismatch);
    assert_eq!(Tensor::from_slice(&[1.0f32; 5], &[2, 3]).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(Tensor::from_slice(&[1.0f32; 1], &[1; 9]).unwrap_err().code(), ErrorCode::InvalidArgument);
    let dev = kiln_core::device().unwrap();
    let too_big = dev.max_tensor_bytes() / 4 + 1;
    assert_eq!(Tensor::empty(&[too_big as usize], DType::F32).unwrap_err().code(), ErrorCode::OutOfMemory);
    // The device is still fine afterwards.
    assert_eq!(ops::add(&a, &a).unwrap().to_vec::<f32>().unwrap(), vec![2.0; 6]);
}

#[test]
fn repeated_runs_give_identical_bytes() {
    let mut rng = Rng::new(9);
    let (x, _) = rand_tensor(&mut rng, &[4099], DType::F32, -3.0, 3.0);
    let first = ops::gelu(&x).unwrap().to_bytes().unwrap();
    for _ in 0..3 {
        assert_eq!(ops::gelu(&x).unwrap().to_bytes().unwrap(), first);
    }
}

// ---- Special values: ±0 (sign checked bitwise), ±inf, NaN, the largest and smallest normal,
// subnormals, negative bases with whole and fractional exponents. The reference is the f64 one.

/// Whether the device reads subnormal operands of arithmetic as zero (WGSL allows it; lavapipe
/// does not). Only then may an element with a subnormal input match the reference evaluated
/// with that input flushed to a zero of its sign instead.
fn device_flushes_subnormals() -> bool {
    let x = Tensor::from_slice(&[1e-40f32], &[1]).unwrap();
    ops::mul_scalar(&x, 1.0).unwrap().to_vec::<f32>().unwrap()[0] == 0.0
}

fn flush(dt: DType, v: f64) -> f64 {
    let min_normal = match dt {
        DType::F32 => f32::MIN_POSITIVE as f64,
        DType::F16 => 6.103515625e-5,
        _ => return v,
    };
    // f16 is computed in f32, where its subnormals are normal: only f32 subnormals flush.
    if dt == DType::F32 && v != 0.0 && v.abs() < min_normal {
        0.0f64.copysign(v)
    } else {
        v
    }
}

/// The special-value rule: NaN where the reference is NaN, the same infinity, a zero of the same
/// sign (bitwise), else within atol + rtol |want|.
fn special_ok(got: f64, want: f64, atol: f64, rtol: f64) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want.is_infinite() || want == 0.0 {
        return got.to_bits() == want.to_bits();
    }
    got == want || (got - want).abs() <= atol + rtol * want.abs()
}

#[track_caller]
fn assert_special(
    what: &str,
    inputs: &[&[f64]],
    got: &[f64],
    dt: DType,
    want: impl Fn(&[f64]) -> f64,
    atol: f64,
    rtol: f64,
) {
    let daz = device_flushes_subnormals();
    for (i, &g) in got.iter().enumerate() {
        let xs: Vec<f64> = inputs.iter().map(|x| x[i]).collect();
        let w = want(&xs);
        let flushed: Vec<f64> = xs.iter().map(|&v| flush(dt, v)).collect();
        let ok = special_ok(g, w, atol, rtol) || (daz && flushed != xs && special_ok(g, want(&flushed), atol, rtol));
        assert!(ok, "{what}: inputs {xs:?}: got {g:e} (bits {:#x}), reference {w:e}", g.to_bits());
    }
}

fn specials(dt: DType) -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -2.0,
        3.0,
        -3.0,
        2.5,
        -2.5,
        0.25,
        1e-3,
        -1e-3,
        1e-10,
        -1e-10,
        10.0,
        -10.0,
        88.0,
        -88.0,
        100.0,
        -100.0,
        std::f32::consts::FRAC_PI_2 as f64,
        std::f32::consts::PI as f64,
        -3.0 * std::f32::consts::FRAC_PI_2 as f64,
        1e10,
        -1e10,
        7.93e14,
    ];
    match dt {
        DType::F32 => v.extend([
            f32::MAX as f64,
            -f32::MAX as f64,
            3e38,
            -3e38,
            f32::MIN_POSITIVE as f64,
            -f32::MIN_POSITIVE as f64,
            1e-40,
            -1e-40,
            1.401298464324817e-45,
            -1.401298464324817e-45,
            1e30,
            -1e30,
        ]),
        DType::F16 => v.extend([
            65504.0,
            -65504.0,
            6.103515625e-5,
            -6.103515625e-5,
            5.960464477539063e-8,
            -5.960464477539063e-8,
            1e-6,
            11.0,
            12.0,
            1000.0,
        ]),
        _ => {}
    }
    v.into_iter().map(|x| kiln_core::reference::round_to(dt, x)).collect()
}

#[test]
fn unary_ops_on_special_values() {
    poison();
    for dt in float_dtypes() {
        let xv = specials(dt);
        // Odd length and a 2-D shape: the scalar kernel path; a multiple of 4: the vec4 path.
        for n in [xv.len(), xv.len() / 4 * 4] {
            let x = upload(&xv[..n], &[n], dt);
            for op in UnaryOp::ALL.into_iter().filter(|op| !op.is_bitwise()) {
                let y = ops::unary(op, &x).unwrap().to_f64_vec().unwrap();
                let (atol, rtol) = tol(dt);
                let atol = if op == UnaryOp::Gelu && dt == DType::F32 { 3e-6 } else { atol };
                assert_special(
                    &format!("{} {dt} n={n}", op.name()),
                    &[&xv[..n]],
                    &y,
                    dt,
                    |x| cpu::unary_value(op, x[0], dt),
                    atol,
                    rtol,
                );
            }
        }
    }
}

#[test]
fn binary_ops_on_special_values() {
    poison();
    for dt in float_dtypes() {
        let mut v = vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            1.0,
            -1.0,
            2.0,
            -2.0,
            3.0,
            -3.0,
            0.5,
            -0.5,
            2.5,
            -2.5,
            33.0,
            -33.0,
            1e4,
            -7.0,
        ];
        if dt == DType::F32 {
            v.extend([
                1e-40,
                -1e-40,
                f32::MIN_POSITIVE as f64,
                f32::MAX as f64,
                -f32::MAX as f64,
                1e10,
                16777215.0,
                -16777215.0,
                16777216.0,
            ]);
        } else {
            v.extend([65504.0, -65504.0, 5.960464477539063e-8, 6.103515625e-5, 2049.0, -2049.0]);
        }
        let v: Vec<f64> = v.into_iter().map(|x| kiln_core::reference::round_to(dt, x)).collect();
        let n = v.len();
        // Every pair: a as a column, b as a row (broadcast), and the flat contiguous form.
        let a = upload(&v, &[n, 1], dt);
        let b = upload(&v, &[1, n], dt);
        let av: Vec<f64> = (0..n * n).map(|i| v[i / n]).collect();
        let bv: Vec<f64> = (0..n * n).map(|i| v[i % n]).collect();
        let (af, bf) = (upload(&av, &[n * n], dt), upload(&bv, &[n * n], dt));
        for op in BinaryOp::ALL.into_iter().filter(|op| !op.is_bitwise()) {
            let out_dt = if op.gives_bool() { DType::Bool } else { dt };
            let (atol, rtol) = tol(out_dt);
            for (what, y) in
                [("broadcast", ops::binary(op, &a, &b).unwrap()), ("flat", ops::binary(op, &af, &bf).unwrap())]
            {
                assert_special(
                    &format!("{} {dt} {what}", op.name()),
                    &[&av, &bv],
                    &y.to_f64_vec().unwrap(),
                    dt,
                    |x| cpu::binary_value(op, x[0], x[1], dt),
                    atol,
                    rtol * 4.0,
                );
            }
        }
    }
}

#[test]
fn special_cases_named_in_the_issues() {
    let f = |v: &[f32]| Tensor::from_slice(v, &[v.len()]).unwrap();
    let pow = |a: &[f32], b: &[f32]| ops::pow(&f(a), &f(b)).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(pow(&[-2.0, -2.0, 0.0, -3.0], &[3.0, 2.0, 0.0, 3.0]), vec![-8.0, 4.0, 1.0, -27.0]);
    let p = pow(&[f32::NAN, f32::NAN, 1.0, -8.0], &[1.0, 0.0, f32::NAN, 1.0 / 3.0]);
    assert!(p[0].is_nan() && p[1] == 1.0 && p[2] == 1.0 && p[3].is_nan(), "{p:?}");
    let t = ops::tanh(&f(&[-0.0, 0.0])).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(t.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), vec![0x8000_0000, 0]);
    let m = ops::maximum(&f(&[f32::NAN, 1.0]), &f(&[1.0, f32::NAN])).unwrap().to_vec::<f32>().unwrap();
    assert!(m.iter().all(|v| v.is_nan()), "{m:?}");
    let m = ops::minimum(&f(&[f32::NAN, 1.0]), &f(&[1.0, f32::NAN])).unwrap().to_vec::<f32>().unwrap();
    assert!(m.iter().all(|v| v.is_nan()), "{m:?}");
    let nan = f(&[f32::NAN, 1.0]);
    assert_eq!(ops::eq(&nan, &nan).unwrap().to_bools().unwrap(), vec![false, true]);
    assert_eq!(ops::ne(&nan, &nan).unwrap().to_bools().unwrap(), vec![true, false]);
    // cos(7.93e14) gave 1.0 with the builtin; numpy: -0.0617... (f64 of the f32 argument).
    let x = 7.93e14f32;
    let c = ops::cos(&f(&[x])).unwrap().to_vec::<f32>().unwrap()[0];
    assert!((c as f64 - (x as f64).cos()).abs() < 2.5e-7, "cos({x}) = {c}, want {}", (x as f64).cos());
    // `x ** 2` and `2 ** x` in the scalar forms, negative bases included.
    let x = f(&[-2.0, -1.5, -0.0, f32::NAN]);
    let sq = ops::pow_scalar(&x, 2.0).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(&sq[..3], &[4.0, 2.25, 0.0]);
    assert!(sq[3].is_nan());
    let cube = ops::pow_scalar(&x, 3.0).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(cube[2].to_bits(), 0x8000_0000, "(-0)^3 = -0");
    let r = ops::binary_scalar(BinaryOp::Pow, &x, 2.0, true).unwrap().to_vec::<f32>().unwrap();
    assert_eq!((r[0], r[2]), (0.25, 1.0));
    assert!((r[1] - 0.5f32.powf(1.5)).abs() < 1e-6 && r[3].is_nan(), "{r:?}");
    // where: a NaN condition is true (numpy's truthiness).
    let w = ops::where_(&f(&[f32::NAN, 0.0, -0.0]), &f(&[1.0; 3]), &f(&[2.0; 3])).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(w, vec![1.0, 2.0, 2.0]);
}

#[test]
fn integer_division_is_floor_division() {
    let a = Tensor::from_slice(&[7i32, -7, 7, -7, 5, -5, 0, i32::MIN, i32::MIN, i32::MAX, -1, 6, -6], &[13]).unwrap();
    let b = Tensor::from_slice(&[2i32, 2, -2, -2, 0, 0, 0, -1, 1, -1, 3, 3, 3], &[13]).unwrap();
    let want = vec![3, -4, -4, 3, 0, 0, 0, i32::MIN, i32::MIN, -i32::MAX, -1, 2, -2];
    assert_eq!(ops::div(&a, &b).unwrap().to_vec::<i32>().unwrap(), want);
    let av = a.to_f64_vec().unwrap();
    let bv = b.to_f64_vec().unwrap();
    let refv: Vec<i32> =
        av.iter().zip(&bv).map(|(&x, &y)| cpu::binary_value(BinaryOp::Div, x, y, DType::I32) as i32).collect();
    assert_eq!(refv, want, "reference");
    assert_eq!(ops::div_scalar(&a, -2.0).unwrap().to_vec::<i32>().unwrap()[..4], [-4, 3, -4, 3]);
    assert_eq!(
        ops::binary_scalar(BinaryOp::Div, &b, 7.0, true).unwrap().to_vec::<i32>().unwrap()[..6],
        [3, 3, -4, -4, 0, 0]
    );
    let a = Tensor::from_slice(&[7u32, 0, u32::MAX, 9], &[4]).unwrap();
    let b = Tensor::from_slice(&[2u32, 0, 0, 10], &[4]).unwrap();
    assert_eq!(ops::div(&a, &b).unwrap().to_vec::<u32>().unwrap(), vec![3, 0, 0, 0]);
    // Random signs and magnitudes, zeros included, against the reference.
    let mut rng = Rng::new(11);
    let (a, av) = rand_tensor(&mut rng, &[3, 1, 257], DType::I32, -2147483648.0, 2147483647.0);
    let (b, bv) = rand_tensor(&mut rng, &[5, 1], DType::I32, -3.0, 3.0);
    let (want, _) = cpu::binary(BinaryOp::Div, &av, &[3, 1, 257], &bv, &[5, 1], DType::I32).unwrap();
    assert_eq!(ops::div(&a, &b).unwrap().to_f64_vec().unwrap(), want);
}

#[test]
fn integer_pow_wraps_like_numpy() {
    let a = Tensor::from_slice(&[0i32, 0, 2, -2, -3, 3, 7, 1, -1, -1, 2, 0, 5, i32::MIN], &[14]).unwrap();
    let b = Tensor::from_slice(&[0i32, 5, 10, 3, 3, 40, 0, -5, -5, -4, -1, -1, 31, 2], &[14]).unwrap();
    let got = ops::pow(&a, &b).unwrap().to_vec::<i32>().unwrap();
    // numpy: 3**40 in int32 wraps to 689956897; negative exponents: documented rule.
    assert_eq!(got, vec![1, 0, 1024, -8, -27, 689956897, 1, 1, -1, 1, 0, 0, 5i32.wrapping_pow(31), 0]);
    let av = a.to_f64_vec().unwrap();
    let bv = b.to_f64_vec().unwrap();
    let refv: Vec<i32> =
        av.iter().zip(&bv).map(|(&x, &y)| cpu::binary_value(BinaryOp::Pow, x, y, DType::I32) as i32).collect();
    assert_eq!(refv, got, "reference");
    let a = Tensor::from_slice(&[0u32, 3, 2, 4_000_000_000, 1], &[5]).unwrap();
    let b = Tensor::from_slice(&[0u32, 40, 32, 2, u32::MAX], &[5]).unwrap();
    assert_eq!(
        ops::pow(&a, &b).unwrap().to_vec::<u32>().unwrap(),
        vec![1, 3u32.wrapping_pow(40), 0, 4_000_000_000u32.wrapping_pow(2), 1]
    );
    assert_eq!(ops::pow_scalar(&a, 2.0).unwrap().to_vec::<u32>().unwrap()[..3], [0, 9, 4]);
}

#[test]
fn sin_cos_accurate_at_every_magnitude() {
    // Payne-Hanek reduction: the same absolute error from 2^-20 to f32::MAX (the builtin gave
    // cos(7.93e14) = 1.0 and errors of 2 past 2^30 on lavapipe).
    let mut rng = Rng::new(12);
    let mut xv = vec![];
    for e in -20..128 {
        for _ in 0..24 {
            let s = if rng.uniform(0.0, 1.0) < 0.5 { -1.0 } else { 1.0 };
            xv.push(((s * rng.uniform(1.0, 2.0)) as f32 * 2f32.powi(e)) as f64);
        }
    }
    // Near multiples of pi/2, where the reduction cancels most.
    for k in 1..200 {
        let m = k as f64 * std::f64::consts::FRAC_PI_2;
        xv.extend([m as f32 as f64, (m as f32).next_up() as f64, (m as f32).next_down() as f64]);
    }
    xv.extend([16367173.0 * 2f64.powi(72), 3.2471e38f32 as f64, 1e22f32 as f64, f32::MAX as f64]);
    let x = upload(&xv, &[xv.len()], DType::F32);
    for (op, f) in [(UnaryOp::Sin, f64::sin as fn(f64) -> f64), (UnaryOp::Cos, f64::cos)] {
        let y = ops::unary(op, &x).unwrap().to_f64_vec().unwrap();
        for (&g, &v) in y.iter().zip(&xv) {
            assert!(g.abs() <= 1.0 && (g - f(v)).abs() <= 2.5e-7, "{}({v:e}) = {g}, want {}", op.name(), f(v));
        }
    }
}

#[test]
fn pow_negative_bases_on_awkward_shapes() {
    // Random negative and positive bases against whole exponents (signed powers) and against
    // fractional ones (NaN for a negative base), broadcast over awkward shapes.
    poison();
    let mut rng = Rng::new(13);
    for dt in float_dtypes() {
        for (sa, sb) in
            [(&[7][..], &[7][..]), (&[13, 17], &[17]), (&[3, 1, 257], &[1, 5, 1]), (&[1031], &[]), (&[2, 0, 3], &[3])]
        {
            let (a, av) = rand_tensor(&mut rng, sa, dt, -3.0, 3.0);
            for whole in [true, false] {
                let (b, bv) = if whole {
                    let (_, bi) = rand_tensor(&mut rng, sb, DType::I32, -6.0, 6.0);
                    (upload(&bi, sb, dt), bi)
                } else {
                    rand_tensor(&mut rng, sb, dt, -2.5, 2.5)
                };
                let y = ops::pow(&a, &b).unwrap();
                let (want, shape) = cpu::binary(BinaryOp::Pow, &av, sa, &bv, sb, dt).unwrap();
                assert_eq!(y.shape(), &shape[..]);
                let (atol, rtol) = tol(dt);
                let got = y.to_f64_vec().unwrap();
                for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        special_ok(g, w, atol, rtol * 4.0),
                        "pow {dt} {sa:?} {sb:?} whole={whole}: element {i}: got {g}, want {w}"
                    );
                }
            }
        }
    }
}

#[test]
fn floor_keeps_special_values_and_reads_subnormals_from_the_bits() {
    let tiny = f32::from_bits(1); // the smallest subnormal
    let cases: [(f32, f32); 18] = [
        (0.0, 0.0),
        (-0.0, -0.0),
        (0.5, 0.0),
        (-0.5, -1.0),
        (2.5, 2.0),
        (-2.5, -3.0),
        (1.0, 1.0),
        (-1.0, -1.0),
        (tiny, 0.0),
        (-tiny, -1.0),
        (1e-40, 0.0),
        (-1e-40, -1.0),
        (8388607.5, 8388607.0),
        (-8388607.5, -8388608.0),
        (16777216.0, 16777216.0),
        (-3e38, -3e38),
        (f32::INFINITY, f32::INFINITY),
        (f32::NEG_INFINITY, f32::NEG_INFINITY),
    ];
    // 19 elements (the scalar kernel) and 16 (the vec4 kernel).
    let mut xs: Vec<f32> = cases.iter().map(|c| c.0).collect();
    xs.push(f32::NAN);
    for n in [xs.len(), 16] {
        let y = ops::floor(&Tensor::from_slice(&xs[..n], &[n]).unwrap()).unwrap().to_vec::<f32>().unwrap();
        for (i, &(x, want)) in cases.iter().enumerate().take(n) {
            assert_eq!(y[i].to_bits(), want.to_bits(), "floor({x:e}) = {:e}, want {want:e} (n={n})", y[i]);
        }
        if n == xs.len() {
            assert!(y[n - 1].is_nan());
        }
    }
    let h = ops::floor(
        &Tensor::from_slice(&[kiln_core::f16::from_f32(-0.5), kiln_core::f16::from_f32(1.5)], &[2]).unwrap(),
    );
    if let Ok(h) = h {
        assert_eq!(h.to_f64_vec().unwrap(), vec![-1.0, 1.0]);
    }
    for dt in [DType::I32, DType::U32] {
        let x = ops::arange(0.0, 5.0, 1.0, dt).unwrap();
        assert_eq!(ops::floor(&x).unwrap().to_f64_vec().unwrap(), x.to_f64_vec().unwrap(), "{dt}");
        assert_eq!(ops::log1p(&x).unwrap_err().code(), ErrorCode::DTypeMismatch, "{dt}");
        assert_eq!(ops::atan2(&x, &x).unwrap_err().code(), ErrorCode::DTypeMismatch, "{dt}");
        assert_eq!(ops::hypot_scalar(&x, 1.0).unwrap_err().code(), ErrorCode::DTypeMismatch, "{dt}");
    }
}

/// ULPs of f32 between `got` and the f64 reference `want` (the unit of the f32 binade of `want`).
fn ulps(got: f64, want: f64) -> f64 {
    if got == want || (got.is_nan() && want.is_nan()) {
        return 0.0;
    }
    (got - want).abs() / ulp_unit(want)
}

/// The ULP of f32 in the binade of `w` (subnormal spacing below the normals).
fn ulp_unit(w: f64) -> f64 {
    let w = w.abs().max(f32::MIN_POSITIVE as f64);
    2f64.powi(w.log2().floor() as i32 - 23)
}

/// Random f32 values `sign * m * 2^e` for e in `exps`, 64 per binade (and both signs when `neg`).
fn binades(rng: &mut Rng, exps: std::ops::Range<i32>, neg: bool) -> Vec<f64> {
    let mut v = vec![];
    for e in exps {
        for _ in 0..64 {
            let s = if neg && rng.uniform(0.0, 1.0) < 0.5 { -1.0 } else { 1.0 };
            v.push((s * rng.uniform(1.0, 2.0) * 2f64.powi(e)) as f32 as f64);
        }
    }
    v
}

#[test]
fn new_transcendentals_accurate_across_their_domains() {
    // Max error in f32 ULPs against the f64 reference, over every binade of each op's domain
    // (docs/elementwise-accuracy.md has the measured numbers; `cargo test -- --nocapture`
    // prints them). The bound is what the musl / fdlibm algorithms give with WGSL's division
    // and sqrt (2.5 ULP); the builtin log / exp would miss it near 0 and 1 by orders of magnitude.
    let mut rng = Rng::new(14);
    let unit: Vec<f64> = binades(&mut rng, -24..0, true);
    let cases: Vec<(UnaryOp, Vec<f64>, f64)> = vec![
        (UnaryOp::Asin, unit.clone(), 4.0),
        (UnaryOp::Acos, unit.clone(), 4.0),
        (UnaryOp::Atanh, unit.clone(), 4.0),
        (UnaryOp::Atan, binades(&mut rng, -24..100, true), 4.0),
        (UnaryOp::Asinh, binades(&mut rng, -24..100, true), 4.0),
        (UnaryOp::Acosh, binades(&mut rng, 0..100, false).into_iter().filter(|&x| x >= 1.0).collect(), 4.0),
        (UnaryOp::Sinh, binades(&mut rng, -24..7, true).into_iter().filter(|x| x.abs() < 89.4).collect(), 4.0),
        (UnaryOp::Cosh, binades(&mut rng, -24..7, true).into_iter().filter(|x| x.abs() < 89.4).collect(), 4.0),
        (UnaryOp::Expm1, binades(&mut rng, -24..7, true).into_iter().filter(|&x| x < 88.7).collect(), 4.0),
        (UnaryOp::Log1p, binades(&mut rng, -24..127, true).into_iter().filter(|&x| x > -1.0).collect(), 4.0),
        (UnaryOp::Log2, binades(&mut rng, -149..128, false), 4.0),
        (UnaryOp::Log10, binades(&mut rng, -149..128, false), 4.0),
        (UnaryOp::Reciprocal, binades(&mut rng, -120..120, true), 0.5),
        (UnaryOp::Tan, binades(&mut rng, -24..14, true), 5.0),
    ];
    for (op, xv, bound) in cases {
        let x = upload(&xv, &[xv.len()], DType::F32);
        let y = ops::unary(op, &x).unwrap().to_f64_vec().unwrap();
        let daz = device_flushes_subnormals();
        let (mut worst, mut at) = (0.0f64, 0.0);
        for (&g, &v) in y.iter().zip(&xv) {
            let want = cpu::unary_exact(op, v, DType::F32);
            // A device that flushes subnormal results may give 0 where the result is subnormal.
            if daz && want.abs() < f32::MIN_POSITIVE as f64 {
                continue;
            }
            let e = ulps(g, want);
            if e > worst {
                (worst, at) = (e, v);
            }
        }
        eprintln!("accuracy {:>10}: max {worst:.2} ULP (at x = {at:e}) over {} inputs", op.name(), xv.len());
        assert!(worst <= bound, "{}: {worst} ULP at x = {at:e} (bound {bound})", op.name());
    }
    let mut pairs_a = binades(&mut rng, -60..60, true);
    let mut pairs_b = binades(&mut rng, -60..60, true);
    rng_shuffle(&mut rng, &mut pairs_b);
    pairs_a.extend(binades(&mut rng, -24..24, true));
    pairs_b.extend(binades(&mut rng, -24..24, true));
    let a = upload(&pairs_a, &[pairs_a.len()], DType::F32);
    let b = upload(&pairs_b, &[pairs_b.len()], DType::F32);
    for (op, bound) in [(BinaryOp::Atan2, 4.0), (BinaryOp::Hypot, 4.0), (BinaryOp::Logaddexp, 8.0)] {
        let y = ops::binary(op, &a, &b).unwrap().to_f64_vec().unwrap();
        let (mut worst, mut at) = (0.0f64, (0.0, 0.0));
        for ((&g, &p), &q) in y.iter().zip(&pairs_a).zip(&pairs_b) {
            let want = cpu::binary_exact(op, p, q, DType::F32);
            // logaddexp = max + log1p(e^-|a-b|) cancels where the result is near 0 (in numpy's
            // float32 too): measured in ULPs of the larger of the result and max(a, b).
            let e = if op == BinaryOp::Logaddexp {
                (g - want).abs() / ulp_unit(want.abs().max(p.max(q).abs()))
            } else {
                ulps(g, want)
            };
            if e > worst {
                (worst, at) = (e, (p, q));
            }
        }
        eprintln!("accuracy {:>10}: max {worst:.2} ULP (at {at:?}) over {} pairs", op.name(), pairs_a.len());
        assert!(worst <= bound, "{}: {worst} ULP at {at:?} (bound {bound})", op.name());
    }
}

fn rng_shuffle(rng: &mut Rng, v: &mut [f64]) {
    for i in (1..v.len()).rev() {
        let j = rng.int(0, i as i64) as usize;
        v.swap(i, j);
    }
}

/// Random f32 bit patterns: a third anywhere (NaN, ±inf, every binade), a third subnormal or
/// near the smallest normals, a third within a few binades of 1.
fn random_bits(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let r = rng.next_u64() as u32;
            let sign = r & 0x8000_0000;
            f32::from_bits(match i % 3 {
                0 => r,
                1 => sign | (r & 0x00ff_ffff),
                _ => sign | (0x3c00_0000 + (r & 0x07ff_ffff)),
            })
        })
        .collect()
}

#[test]
fn div_mul_sqrt_neg_match_the_cpu_bit_for_bit() {
    // k_div and k_sqrt are correctly rounded, k_mul and neg exact on subnormals (read and
    // rounded from the bits): on every device the bits the CPU's IEEE f32 arithmetic gives,
    // subnormal results included (any NaN where the CPU gives a NaN: payloads aside).
    poison();
    let mut rng = Rng::new(23);
    let n = 3 * 4096;
    let av = random_bits(&mut rng, n);
    let mut bv = random_bits(&mut rng, n);
    // Pairs whose product or quotient lands in or near the subnormal range.
    for i in (0..n).step_by(7) {
        bv[i] = f32::from_bits((bv[i].to_bits() & 0x807f_ffff) | (((av[i].to_bits() >> 23) & 0xff) ^ 0xff) << 23);
    }
    let a = Tensor::from_slice(&av, &[n]).unwrap();
    let b = Tensor::from_slice(&bv, &[n]).unwrap();
    let same = |g: f32, w: f32| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
    let check = |what: &str, got: Vec<f32>, want: &dyn Fn(usize) -> f32| {
        let bad: Vec<usize> = (0..n).filter(|&i| !same(got[i], want(i))).collect();
        assert!(
            bad.is_empty(),
            "{what}: {} of {n} differ from the CPU; first: a = {:e} ({:#x}), b = {:e} ({:#x}): got {:#x}, cpu {:#x}",
            bad.len(),
            av[bad[0]],
            av[bad[0]].to_bits(),
            bv[bad[0]],
            bv[bad[0]].to_bits(),
            got[bad[0]].to_bits(),
            want(bad[0]).to_bits()
        );
    };
    let run = |op| ops::binary(op, &a, &b).unwrap().to_vec::<f32>().unwrap();
    check("div", run(BinaryOp::Div), &|i| av[i] / bv[i]);
    check("mul", run(BinaryOp::Mul), &|i| av[i] * bv[i]);
    let un = |op| ops::unary(op, &a).unwrap().to_vec::<f32>().unwrap();
    check("sqrt", un(UnaryOp::Sqrt), &|i| av[i].sqrt());
    check("reciprocal", un(UnaryOp::Reciprocal), &|i| 1.0 / av[i]);
    let neg = un(UnaryOp::Neg);
    assert!((0..n).all(|i| neg[i].to_bits() == av[i].to_bits() ^ 0x8000_0000), "neg flips the sign bit only");
}
