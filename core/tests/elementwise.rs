mod common;
use common::*;
use kiln_core::ops::{self, BinaryOp, UnaryOp};
use kiln_core::reference::elementwise as cpu;
use kiln_core::{DType, ErrorCode, Tensor};

fn domain(op: UnaryOp) -> (f64, f64) {
    match op {
        UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt => (0.05, 10.0),
        UnaryOp::Exp => (-10.0, 10.0),
        _ => (-6.0, 6.0),
    }
}

#[test]
fn unary_ops_match_reference_on_awkward_shapes() {
    poison();
    let mut rng = Rng::new(1);
    for dt in float_dtypes() {
        for op in UnaryOp::ALL {
            for shape in AWKWARD {
                let (lo, hi) = domain(op);
                let (x, xv) = rand_tensor(&mut rng, shape, dt, lo, hi);
                let y = ops::unary(op, &x).unwrap();
                assert_eq!(y.shape(), *shape);
                let (atol, rtol) = tol(dt);
                // The erf approximation in WGSL is good to 1.5e-7 absolute.
                let atol = if op == UnaryOp::Gelu { atol.max(3e-6) } else { atol };
                assert_close(&format!("{} {dt} {shape:?}", op.name()), &y.to_f64_vec().unwrap(), &cpu::unary(op, &xv, dt), atol, rtol);
            }
        }
    }
}

#[test]
fn integer_unary_ops_and_float_only_errors() {
    let mut rng = Rng::new(2);
    let (x, xv) = rand_tensor(&mut rng, &[300], DType::I32, -1000.0, 1000.0);
    for op in [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Relu] {
        let y = ops::unary(op, &x).unwrap();
        assert_eq!(y.to_f64_vec().unwrap(), cpu::unary(op, &xv, DType::I32), "{}", op.name());
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
        for op in BinaryOp::ALL {
            if op == BinaryOp::Pow && !dt.is_float() {
                continue;
            }
            for (sa, sb) in pairs {
                let (lo, hi) = match (op, dt) {
                    (BinaryOp::Pow, _) => (0.1, 3.0),
                    (_, DType::U32) => (0.0, 1000.0),
                    (_, DType::I32) => (-1000.0, 1000.0),
                    _ => (-5.0, 5.0),
                };
                let (a, av) = rand_tensor(&mut rng, sa, dt, lo, hi);
                let (b, bv) = rand_tensor(&mut rng, sb, dt, lo.max(if op == BinaryOp::Div && dt.is_float() { 0.5 } else { lo }), hi);
                let y = ops::binary(op, &a, &b).unwrap();
                let (want, shape) = cpu::binary(op, &av, sa, &bv, sb, dt).unwrap();
                assert_eq!(y.shape(), &shape[..]);
                let out_dt = if op.is_comparison() { DType::U32 } else { dt };
                assert_eq!(y.dtype(), out_dt);
                let (atol, rtol) = tol(out_dt);
                assert_close(&format!("{} {dt} {sa:?} {sb:?}", op.name()), &y.to_f64_vec().unwrap(), &want, atol, rtol * 4.0);
            }
        }
    }
}

#[test]
fn integer_division_follows_wgsl() {
    let a = Tensor::from_slice(&[7i32, -7, 5, i32::MIN, 9], &[5]).unwrap();
    let b = Tensor::from_slice(&[2i32, 2, 0, -1, -4], &[5]).unwrap();
    assert_eq!(ops::div(&a, &b).unwrap().to_vec::<i32>().unwrap(), vec![3, -3, 5, i32::MIN, -2]);
}

#[test]
fn scalar_forms_and_where() {
    let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0, -4.0], &[2, 2]).unwrap();
    assert_eq!(ops::mul_scalar(&x, 2.0).unwrap().to_vec::<f32>().unwrap(), vec![2.0, -4.0, 6.0, -8.0]);
    assert_eq!(ops::binary_scalar(BinaryOp::Sub, &x, 1.0, true).unwrap().to_vec::<f32>().unwrap(), vec![0.0, 3.0, -2.0, 5.0]);
    let c = ops::gt_scalar(&x, 0.0).unwrap();
    assert_eq!(c.dtype(), DType::U32);
    assert_eq!(c.to_vec::<u32>().unwrap(), vec![1, 0, 1, 0]);
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
