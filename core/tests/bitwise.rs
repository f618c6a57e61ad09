mod common;
use common::*;
use kiln_core::ops::{self, BinaryOp, UnaryOp};
use kiln_core::reference::elementwise as cpu;
use kiln_core::{DType, ErrorCode, Tensor};

const BINARY: [BinaryOp; 5] = [
    BinaryOp::BitwiseAnd,
    BinaryOp::BitwiseOr,
    BinaryOp::BitwiseXor,
    BinaryOp::BitwiseLeftShift,
    BinaryOp::BitwiseRightShift,
];

/// Values across the whole range with the extremes, -1 and 0 mixed in.
fn values(rng: &mut Rng, n: usize, dt: DType) -> Vec<f64> {
    let edges: &[f64] = match dt {
        DType::I32 => &[i32::MIN as f64, -1.0, 0.0, 1.0, i32::MAX as f64],
        _ => &[0.0, 1.0, u32::MAX as f64, 0x8000_0000u32 as f64],
    };
    (0..n)
        .map(|_| {
            let k = rng.int(0, 9) as usize;
            match (k < edges.len(), dt) {
                (true, _) => edges[k],
                (false, DType::I32) => rng.int(i32::MIN as i64, i32::MAX as i64) as f64,
                (false, _) => rng.int(0, u32::MAX as i64) as f64,
            }
        })
        .collect()
}

/// Shift counts: inside [0, 32), at and past the width, negative (i32).
fn counts(rng: &mut Rng, n: usize, dt: DType) -> Vec<f64> {
    let lo = if dt == DType::I32 { -40 } else { 0 };
    (0..n).map(|_| rng.int(lo, 40) as f64).collect()
}

#[test]
fn bitwise_ops_match_reference_with_broadcasting() {
    poison();
    let mut rng = Rng::new(71);
    let pairs: &[(&[usize], &[usize])] =
        &[(&[0], &[0]), (&[1], &[1]), (&[7], &[7]), (&[13, 17], &[17]), (&[3, 1, 257], &[1, 5, 1]), (&[1031], &[1031])];
    for dt in [DType::I32, DType::U32] {
        for op in BINARY {
            for &(sa, sb) in pairs {
                let na: usize = sa.iter().product();
                let nb: usize = sb.iter().product();
                let av = values(&mut rng, na, dt);
                let bv = if op.allows_bool_bits() { values(&mut rng, nb, dt) } else { counts(&mut rng, nb, dt) };
                let y = ops::binary(op, &upload(&av, sa, dt), &upload(&bv, sb, dt)).unwrap();
                let (want, shape) = cpu::binary(op, &av, sa, &bv, sb, dt).unwrap();
                assert_eq!(y.shape(), &shape[..]);
                assert_eq!(y.dtype(), dt);
                assert_eq!(y.to_f64_vec().unwrap(), want, "{} {dt} {sa:?} {sb:?}", op.name());
            }
            // The scalar forms, on both sides.
            let av = values(&mut rng, 300, dt);
            let a = upload(&av, &[300], dt);
            let s = if op.allows_bool_bits() { values(&mut rng, 1, dt)[0] } else { 31.0 };
            for first in [false, true] {
                let y = ops::binary_scalar(op, &a, s, first).unwrap().to_f64_vec().unwrap();
                let want: Vec<f64> = av
                    .iter()
                    .map(|&v| if first { cpu::binary_value(op, s, v, dt) } else { cpu::binary_value(op, v, s, dt) })
                    .collect();
                assert_eq!(y, want, "{} {dt} scalar first={first}", op.name());
            }
        }
        let xv = values(&mut rng, 1031, dt);
        let y = ops::unary(UnaryOp::BitwiseInvert, &upload(&xv, &[1031], dt)).unwrap();
        assert_eq!(y.to_f64_vec().unwrap(), cpu::unary(UnaryOp::BitwiseInvert, &xv, dt));
    }
}

#[test]
fn shift_counts_outside_the_width_follow_numpy() {
    let x = Tensor::from_slice(&[-8i32, -8, -8, 8, 8, i32::MIN, 1, 1], &[8]).unwrap();
    let n = Tensor::from_slice(&[1i32, 32, -1, 33, 31, 31, 31, 0], &[8]).unwrap();
    let r: Vec<i32> = ops::bitwise_right_shift(&x, &n).unwrap().to_vec().unwrap();
    assert_eq!(r, vec![-4, -1, -1, 0, 0, -1, 0, 1]);
    let l: Vec<i32> = ops::bitwise_left_shift(&x, &n).unwrap().to_vec().unwrap();
    assert_eq!(l, vec![-16, 0, 0, 0, 0, 0, i32::MIN, 1]);
    let u = Tensor::from_slice(&[u32::MAX, u32::MAX, 1], &[3]).unwrap();
    let c = Tensor::from_slice(&[31u32, 32, 40], &[3]).unwrap();
    assert_eq!(ops::bitwise_right_shift(&u, &c).unwrap().to_vec::<u32>().unwrap(), vec![1, 0, 0]);
    assert_eq!(ops::bitwise_left_shift(&u, &c).unwrap().to_vec::<u32>().unwrap(), vec![0x8000_0000, 0, 0]);
}

#[test]
fn bool_bitwise_is_logical() {
    poison();
    let a = Tensor::from_bools(&[true, true, false, false, true], &[5]).unwrap();
    let b = Tensor::from_bools(&[true, false, true, false, false], &[5]).unwrap();
    let and = ops::bitwise_and(&a, &b).unwrap();
    assert_eq!(and.dtype(), DType::Bool);
    assert_eq!(and.to_bools().unwrap(), vec![true, false, false, false, false]);
    assert_eq!(ops::bitwise_or(&a, &b).unwrap().to_bools().unwrap(), vec![true, true, true, false, true]);
    assert_eq!(ops::bitwise_xor(&a, &b).unwrap().to_bools().unwrap(), vec![false, true, true, false, true]);
    assert_eq!(ops::bitwise_invert(&a).unwrap().to_bools().unwrap(), vec![false, false, true, true, false]);
    assert_eq!(ops::bitwise_xor_scalar(&a, 1.0).unwrap().to_bools().unwrap(), vec![false, false, true, true, false]);
}

#[test]
fn floats_and_bool_shifts_are_refused() {
    let f = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let b = Tensor::from_bools(&[true, false], &[2]).unwrap();
    let i = Tensor::from_slice(&[1i32, 2], &[2]).unwrap();
    let u = Tensor::from_slice(&[1u32, 2], &[2]).unwrap();
    for op in BINARY {
        assert_eq!(ops::binary(op, &f, &f).unwrap_err().code(), ErrorCode::DTypeMismatch, "{}", op.name());
        assert_eq!(ops::binary_scalar(op, &f, 1.0, false).unwrap_err().code(), ErrorCode::DTypeMismatch);
        assert_eq!(ops::binary(op, &i, &u).unwrap_err().code(), ErrorCode::DTypeMismatch);
        if !op.allows_bool_bits() {
            assert_eq!(ops::binary(op, &b, &b).unwrap_err().code(), ErrorCode::DTypeMismatch, "{}", op.name());
        }
    }
    assert_eq!(ops::bitwise_invert(&f).unwrap_err().code(), ErrorCode::DTypeMismatch);
    assert_eq!(ops::bitwise_left_shift_scalar(&i, 0.5).unwrap_err().code(), ErrorCode::InvalidArgument);
}
