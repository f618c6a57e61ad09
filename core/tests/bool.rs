//! The bool dtype: host bytes in and out, the ops that give bool (comparisons, logical ops,
//! predicates, all/any, cast), the ops that take it, and the clear refusals of the rest.
mod common;
use common::*;
use kiln_core::ops::{self, BinaryOp, UnaryOp};
use kiln_core::reference::{elementwise as cpu, reduce as cpu_reduce};
use kiln_core::{DType, ErrorCode, Kernel, Tensor};

fn dtypes() -> Vec<DType> {
    DType::ALL.into_iter().filter(|d| *d != DType::F16 || has_f16()).collect()
}

/// Values of `dtype` where zero is common (and, for floats, -0, NaN with either sign, ±inf and
/// subnormals): what truth tests and predicates must get right.
fn truthy_values(rng: &mut Rng, n: usize, dt: DType) -> Vec<f64> {
    let specials: &[f64] = match dt {
        DType::F32 => &[0.0, -0.0, f64::NAN, -f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e-40, -1e-45, 1.0, -2.5],
        DType::F16 => &[0.0, -0.0, f64::NAN, -f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 5.960464477539063e-8, 1.0],
        DType::I32 => &[0.0, 0.0, 1.0, -1.0, 2147483647.0, -2147483648.0, 7.0],
        DType::U32 => &[0.0, 0.0, 1.0, 4294967295.0, 2.0],
        DType::Bool => &[0.0, 1.0],
    };
    (0..n)
        .map(|_| kiln_core::reference::round_to(dt, specials[rng.int(0, specials.len() as i64 - 1) as usize]))
        .collect()
}

/// f64 NaN signs survive `as f32` on the host; the reference reads the sign from the f64.
fn bits_of(v: f64, dt: DType) -> String {
    match dt {
        DType::F32 => format!("{:#x}", (v as f32).to_bits()),
        _ => format!("{v}"),
    }
}

#[test]
fn host_bytes_round_trip_and_normalise() {
    poison();
    let mut rng = Rng::new(40);
    for shape in AWKWARD {
        let n: usize = shape.iter().product();
        let bytes: Vec<u8> = (0..n).map(|_| [0u8, 1, 2, 255, 0][rng.int(0, 4) as usize]).collect();
        let t = Tensor::from_bytes(&bytes, shape, DType::Bool).unwrap();
        assert_eq!(t.nbytes(), n, "{shape:?}");
        let want: Vec<u8> = bytes.iter().map(|&b| (b != 0) as u8).collect();
        assert_eq!(t.to_bytes().unwrap(), want, "{shape:?}");
        let bools: Vec<bool> = want.iter().map(|&b| b == 1).collect();
        assert_eq!(Tensor::from_bools(&bools, shape).unwrap().to_bools().unwrap(), bools);
        // Through the GPU: a copy and a reshape keep the words.
        assert_eq!(ops::copy(&t).unwrap().to_bytes().unwrap(), want);
    }
    let err = Tensor::from_bytes(&[1, 0, 1], &[4], DType::Bool).unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    assert_eq!(Tensor::from_bools(&[true], &[]).unwrap().to_f64_vec().unwrap(), vec![1.0]);
    assert_eq!(DType::parse("bool").unwrap(), DType::Bool);
    assert_eq!(DType::from_u32(4).unwrap(), DType::Bool);
    assert_eq!((DType::Bool.size(), DType::Bool.storage_size()), (1, 4));
}

#[test]
fn big_bool_tensors_round_trip_through_the_threaded_conversions() {
    // Past the sizes where upload and readback convert in pieces on several threads (16 Mi
    // elements), and not a multiple of any piece.
    let n = (16 << 20) + 12_347;
    let bytes: Vec<u8> = (0..n).map(|i| [0u8, 1, 0, 7, 255, 0, 0][(i * 31 + i / 977) % 7]).collect();
    let t = Tensor::from_bytes(&bytes, &[n], DType::Bool).unwrap();
    let back = t.to_bytes().unwrap();
    let bad = back.iter().zip(&bytes).position(|(&g, &b)| g != (b != 0) as u8);
    assert_eq!(bad, None, "first wrong element");
    let any = ops::any(&ops::logical_not(&t).unwrap(), None, false).unwrap();
    assert_eq!(any.to_bools().unwrap(), [true]);
}

#[test]
fn predicates_and_logical_not_match_reference_on_every_dtype() {
    poison();
    let mut rng = Rng::new(41);
    let preds = [UnaryOp::IsNan, UnaryOp::IsInf, UnaryOp::IsFinite, UnaryOp::Signbit, UnaryOp::LogicalNot];
    // NVIDIA's f16 -> f32 conversion, which f16 elementwise kernels load through, makes every
    // NaN the positive canonical one (measured on an H100): the sign of an f16 NaN is lost
    // there, and README says so. Every other device keeps it, and this test holds them to it.
    let f16_nan_sign_lost = kiln_core::device().unwrap().info().name.contains("NVIDIA");
    for dt in dtypes() {
        for shape in AWKWARD {
            let n: usize = shape.iter().product();
            let xv = truthy_values(&mut rng, n, dt);
            let x = upload(&xv, shape, dt);
            for op in preds {
                let y = ops::unary(op, &x).unwrap();
                assert_eq!((y.dtype(), y.shape()), (DType::Bool, *shape), "{} {dt}", op.name());
                let got = y.to_f64_vec().unwrap();
                for (i, (&g, &v)) in got.iter().zip(&xv).enumerate() {
                    let w = cpu::unary_value(op, v, dt);
                    if f16_nan_sign_lost && dt == DType::F16 && v.is_nan() && op == UnaryOp::Signbit {
                        continue;
                    }
                    assert_eq!(g, w, "{} {dt} {shape:?} element {i}: x = {} ", op.name(), bits_of(v, dt));
                }
            }
        }
    }
}

#[test]
fn special_values_of_the_predicates() {
    let x = Tensor::from_slice(
        &[-0.0f32, 0.0, f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -1e-45, f32::MAX, -1.0],
        &[9],
    )
    .unwrap();
    let b = |t: Tensor| t.to_bools().unwrap();
    let (t, f) = (true, false);
    assert_eq!(b(ops::signbit(&x).unwrap()), [t, f, f, t, f, t, t, f, t]);
    assert_eq!(b(ops::isnan(&x).unwrap()), [f, f, t, t, f, f, f, f, f]);
    assert_eq!(b(ops::isinf(&x).unwrap()), [f, f, f, f, t, t, f, f, f]);
    assert_eq!(b(ops::isfinite(&x).unwrap()), [t, t, f, f, f, f, t, t, t]);
    assert_eq!(b(ops::logical_not(&x).unwrap()), [t, t, f, f, f, f, f, f, f]);
    let i = Tensor::from_slice(&[i32::MIN, -1, 0, 5], &[4]).unwrap();
    assert_eq!(b(ops::signbit(&i).unwrap()), [t, t, f, f]);
    assert_eq!(b(ops::isfinite(&i).unwrap()), [t, t, t, t]);
    assert_eq!(b(ops::isnan(&i).unwrap()), [f, f, f, f]);
}

#[test]
fn logical_ops_and_comparisons_on_every_dtype() {
    poison();
    let mut rng = Rng::new(42);
    let pairs: &[(&[usize], &[usize])] = &[
        (&[0], &[0]),
        (&[1], &[1]),
        (&[7], &[7]),
        (&[13, 17], &[17]),
        (&[3, 1, 5], &[1, 4, 1]),
        (&[1031], &[1031]),
        (&[1031], &[]),
    ];
    for dt in dtypes() {
        let takes =
            |o: &BinaryOp| o.gives_bool() || (dt == DType::Bool && matches!(o, BinaryOp::Maximum | BinaryOp::Minimum));
        for op in BinaryOp::ALL.into_iter().filter(takes) {
            for (sa, sb) in pairs {
                let av = truthy_values(&mut rng, sa.iter().product(), dt);
                let bv = truthy_values(&mut rng, sb.iter().product(), dt);
                let y = ops::binary(op, &upload(&av, sa, dt), &upload(&bv, sb, dt)).unwrap();
                let (want, shape) = cpu::binary(op, &av, sa, &bv, sb, dt).unwrap();
                let out_dt = if op.gives_bool() { DType::Bool } else { dt };
                assert_eq!((y.dtype(), y.shape()), (out_dt, &shape[..]), "{} {dt}", op.name());
                assert_eq!(y.to_f64_vec().unwrap(), want, "{} {dt} {sa:?} {sb:?}", op.name());
            }
            // The scalar form, both ways round: a bool tensor takes 0 / 1.
            let av = truthy_values(&mut rng, 13, dt);
            let a = upload(&av, &[13], dt);
            for s in [0.0, 1.0] {
                for first in [false, true] {
                    let y = ops::binary_scalar(op, &a, s, first).unwrap().to_f64_vec().unwrap();
                    let want: Vec<f64> = av
                        .iter()
                        .map(|&v| if first { cpu::binary_value(op, s, v, dt) } else { cpu::binary_value(op, v, s, dt) })
                        .collect();
                    assert_eq!(y, want, "{}_scalar {dt} s={s} first={first}", op.name());
                }
            }
        }
    }
    let t = Tensor::from_bools(&[true, false], &[2]).unwrap();
    assert_eq!(ops::eq_scalar(&t, 2.0).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::lt(&t, &t.clone()).unwrap().to_bools().unwrap(), [false, false]);
}

#[test]
fn cast_to_and_from_bool() {
    poison();
    let mut rng = Rng::new(43);
    for dt in dtypes() {
        for shape in [&[0usize][..], &[1], &[7], &[1031], &[3, 1, 257]] {
            let xv = truthy_values(&mut rng, shape.iter().product(), dt);
            let b = ops::cast(&upload(&xv, shape, dt), DType::Bool).unwrap();
            assert_eq!(b.dtype(), DType::Bool);
            let bv = b.to_f64_vec().unwrap();
            assert_eq!(bv, cpu::cast(&xv, DType::Bool), "{dt} -> bool {shape:?}");
            let back = ops::cast(&b, dt).unwrap();
            assert_eq!(back.dtype(), dt);
            assert_eq!(back.to_f64_vec().unwrap(), cpu::cast(&bv, dt), "bool -> {dt} {shape:?}");
        }
    }
}

#[test]
fn where_takes_a_bool_condition() {
    poison();
    let mut rng = Rng::new(44);
    for (cs, s) in
        [(&[0usize][..], &[0usize][..]), (&[1], &[1]), (&[13, 1], &[17]), (&[1031], &[1031]), (&[3, 1, 7], &[4, 1])]
    {
        let cv = truthy_values(&mut rng, cs.iter().product(), DType::Bool);
        let c = upload(&cv, cs, DType::Bool);
        for dt in dtypes() {
            let lo = if matches!(dt, DType::U32 | DType::Bool) { 0.0 } else { -5.0 };
            let (a, av) = rand_tensor(&mut rng, s, dt, lo, 5.0);
            let (b, bv) = rand_tensor(&mut rng, &[1], dt, lo, 5.0);
            let (want, shape) = cpu::where_(&cv, cs, &av, s, &bv, &[1]).unwrap();
            let y = ops::where_(&c, &a, &b).unwrap();
            assert_eq!((y.dtype(), y.shape()), (dt, &shape[..]));
            assert_eq!(y.to_f64_vec().unwrap(), want, "where bool -> {dt} {cs:?} {s:?}");
        }
    }
}

#[test]
fn all_and_any_match_reference() {
    poison();
    let mut rng = Rng::new(45);
    type Axes = Option<&'static [isize]>;
    let cases: &[(&[usize], Axes)] = &[
        (&[0], None),
        (&[0], Some(&[0])),
        (&[1], None),
        (&[7], Some(&[0])),
        (&[13, 17], Some(&[1])),
        (&[13, 17], Some(&[-2])),
        (&[3, 1, 257], Some(&[-1])),
        (&[3, 5, 7], Some(&[0, 2])),
        (&[3, 5, 7], Some(&[])),
        (&[2, 0, 3], Some(&[1])),
        (&[2, 0, 3], Some(&[0])),
        (&[1031], None),
        (&[2, 20011], Some(&[1])),
        (&[], None),
    ];
    for dt in dtypes() {
        for &(shape, axes) in cases {
            for keepdims in [false, true] {
                let n: usize = shape.iter().product();
                // Mostly-true and mostly-false data, so that both answers occur for both ops.
                let mut xv = truthy_values(&mut rng, n, dt);
                if rng.int(0, 1) == 1 {
                    let one = if dt == DType::Bool { 1.0 } else { 3.0 };
                    for v in xv.iter_mut() {
                        if rng.int(0, 40) != 0 {
                            *v = one;
                        }
                    }
                }
                let x = upload(&xv, shape, dt);
                for (name, got, want) in [
                    ("all", ops::all(&x, axes, keepdims), cpu_reduce::all(&xv, shape, axes, keepdims)),
                    ("any", ops::any(&x, axes, keepdims), cpu_reduce::any(&xv, shape, axes, keepdims)),
                ] {
                    let what = format!("{name} {dt} {shape:?} axes={axes:?} keepdims={keepdims}");
                    let (want, ws) = want.unwrap();
                    let y = got.unwrap();
                    assert_eq!((y.dtype(), y.shape()), (DType::Bool, &ws[..]), "{what}");
                    assert_eq!(y.to_f64_vec().unwrap(), want, "{what}");
                }
            }
        }
    }
}

#[test]
fn reductions_and_movement_take_bool() {
    let mut rng = Rng::new(46);
    let xv = truthy_values(&mut rng, 13 * 17, DType::Bool);
    let x = upload(&xv, &[13, 17], DType::Bool);
    let (want, _) = cpu_reduce::max(&xv, &[13, 17], Some(&[1]), false).unwrap();
    assert_eq!(ops::max(&x, Some(&[1]), false).unwrap().to_f64_vec().unwrap(), want);
    let (want, _) = cpu_reduce::min(&xv, &[13, 17], Some(&[0]), true).unwrap();
    let y = ops::min(&x, Some(&[0]), true).unwrap();
    assert_eq!((y.dtype(), y.to_f64_vec().unwrap()), (DType::Bool, want));
    let (want, _) = cpu_reduce::argmax(&xv, &[13, 17], Some(1), false).unwrap();
    let y = ops::argmax(&x, Some(1), false).unwrap();
    assert_eq!((y.dtype(), y.to_f64_vec().unwrap()), (DType::I32, want));
    let t = ops::transpose(&x, 0, 1).unwrap();
    let want: Vec<f64> = (0..13 * 17).map(|i| xv[(i % 13) * 17 + i / 13]).collect();
    assert_eq!(t.to_f64_vec().unwrap(), want);
    let s = ops::slice(&x, 1, 1, 16, 3).unwrap();
    let want: Vec<f64> =
        (0..13).flat_map(|r| (1..16).step_by(3).map(move |c| (r, c))).map(|(r, c)| xv[r * 17 + c]).collect();
    assert_eq!(s.to_f64_vec().unwrap(), want);
    let full = ops::full(&[5], DType::Bool, 1.0).unwrap();
    assert_eq!(full.to_bools().unwrap(), vec![true; 5]);
    assert_eq!(ops::zeros(&[3], DType::Bool).unwrap().to_bools().unwrap(), vec![false; 3]);
    ops::fill(&full, 0.0).unwrap();
    assert_eq!(full.to_bools().unwrap(), vec![false; 5]);
}

#[test]
fn arithmetic_on_bool_is_refused_clearly() {
    let x = Tensor::from_bools(&[true, false, true, true], &[2, 2]).unwrap();
    let refused = |what: &str, r: kiln_core::Result<Tensor>| {
        let e = r.expect_err(what);
        assert_eq!(e.code(), ErrorCode::DTypeMismatch, "{what}: {e}");
    };
    // The bitwise ops that take bool (logical there) are tested in core/tests/bitwise.rs.
    for op in UnaryOp::ALL.into_iter().filter(|o| !o.gives_bool() && !o.is_bitwise()) {
        refused(op.name(), ops::unary(op, &x));
    }
    for op in BinaryOp::ALL
        .into_iter()
        .filter(|o| !o.gives_bool() && !o.allows_bool_bits() && !matches!(o, BinaryOp::Maximum | BinaryOp::Minimum))
    {
        refused(op.name(), ops::binary(op, &x, &x));
        refused(op.name(), ops::binary_scalar(op, &x, 1.0, false));
    }
    refused("sum", ops::sum(&x, None, false));
    refused("mean", ops::mean(&x, None, false));
    refused("matmul", ops::matmul(&x, &x));
    let img = x.reshape(&[1, 1, 2, 2]).unwrap();
    refused("conv2d", ops::conv2d(&img, &img, None, [1, 1], [0, 0], [1, 1], 1));
    refused("max_pool2d", ops::max_pool2d(&img, [1, 1], [1, 1], [0, 0]));
    refused("avg_pool2d", ops::avg_pool2d(&img, [1, 1], [1, 1], [0, 0]));
    refused("arange", ops::arange(0.0, 1.0, 1.0, DType::Bool));
    refused("index_select with bool indices", ops::index_select(&x, 0, &Tensor::from_bools(&[true], &[1]).unwrap()));
    assert_eq!(ops::full(&[2], DType::Bool, 2.0).unwrap_err().code(), ErrorCode::InvalidArgument);
    let k = Kernel::new(
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n@compute @workgroup_size(1) fn main() { x[0] = 7u; }",
        "main",
    )
    .unwrap();
    assert_eq!(k.dispatch(&[&x], None, [1, 1, 1]).unwrap_err().code(), ErrorCode::DTypeMismatch);
    assert_eq!(x.to_bools().unwrap(), [true, false, true, true]);
}
