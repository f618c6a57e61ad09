//! References for the elementwise family.

use super::{broadcast_index, round_to};
use crate::ops::{BinaryOp, UnaryOp};
use crate::shape::{broadcast_shapes, numel};
use crate::{DType, Result};

/// erf to ~1e-15: Taylor series near 0, continued fraction for erfc further out.
pub fn erf(x: f64) -> f64 {
    let a = x.abs();
    let r = if a < 2.5 {
        let mut sum: f64 = 0.0;
        let mut term = a;
        let mut n = 0.0;
        while term.abs() > 1e-17 * sum.abs().max(1e-300) || n < 3.0 {
            sum += term / (2.0 * n + 1.0);
            n += 1.0;
            term *= -a * a / n;
            if n > 200.0 {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else if a > 6.0 {
        1.0
    } else {
        // erfc(a) = exp(-a^2)/sqrt(pi) * 1/(a + (1/2)/(a + 1/(a + (3/2)/(a + ...)))) evaluated bottom-up.
        let mut f = a;
        for k in (1..80).rev() {
            f = a + (k as f64 / 2.0) / f;
        }
        1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / f
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}

fn wrap(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::I32 => (v as i64 as i32) as f64,
        DType::U32 => (v as i64 as u32) as f64,
        _ => v,
    }
}

/// `op(x)` in f64 from the op's definition (Rust's std functions, which follow IEEE 754 and C99
/// on ±0, ±inf and NaN), rounded to `dtype`. Where a definition needs a rule of its own it is
/// written out: relu is numpy's `maximum(x, 0)`, and gelu / gelu_tanh / silu take their limit
/// -0 at -inf (the formulas would give `-inf * 0 = NaN`).
pub fn unary_value(op: UnaryOp, x: f64, dtype: DType) -> f64 {
    if op.gives_bool() {
        return unary_exact(op, x, dtype);
    }
    // Integer neg/abs wrap like two's complement (abs(i32::MIN) stays i32::MIN).
    round_to(dtype, wrap(dtype, unary_exact(op, x, dtype)))
}

/// `op(x)` in f64 before the rounding to `dtype` (the accuracy tests measure against it).
pub fn unary_exact(op: UnaryOp, x: f64, dtype: DType) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tan => x.tan(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Relu => maximum(x, 0.0),
        UnaryOp::Gelu | UnaryOp::GeluTanh | UnaryOp::Silu if x == f64::NEG_INFINITY => -0.0,
        UnaryOp::Gelu => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        UnaryOp::GeluTanh => {
            let k = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
        }
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Asin => x.asin(),
        UnaryOp::Acos => x.acos(),
        UnaryOp::Atan => x.atan(),
        UnaryOp::Sinh => x.sinh(),
        UnaryOp::Cosh => x.cosh(),
        UnaryOp::Asinh => x.asinh(),
        UnaryOp::Acosh => x.acosh(),
        UnaryOp::Atanh => x.atanh(),
        UnaryOp::Log1p => x.ln_1p(),
        UnaryOp::Expm1 => x.exp_m1(),
        UnaryOp::Log2 => x.log2(),
        UnaryOp::Log10 => x.log10(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Trunc => x.trunc(),
        UnaryOp::Round => x.round_ties_even(),
        // numpy's sign: +0 for either zero (f64::signum would give ±1), NaN stays NaN.
        UnaryOp::Sign if x == 0.0 => 0.0,
        UnaryOp::Sign => x.signum(),
        UnaryOp::Reciprocal => 1.0 / x,
        UnaryOp::Square if dtype.is_float() => x * x,
        UnaryOp::Square => wrapping_mul(x, x),
        // The predicates give 0/1 (bool) whatever `dtype` (unary_value does not round them). A
        // number is true where it is not ±0 (NaN included, as numpy).
        UnaryOp::LogicalNot => (x == 0.0) as u8 as f64,
        UnaryOp::IsNan => x.is_nan() as u8 as f64,
        UnaryOp::IsInf => x.is_infinite() as u8 as f64,
        UnaryOp::IsFinite => x.is_finite() as u8 as f64,
        UnaryOp::Signbit => x.is_sign_negative() as u8 as f64,
        UnaryOp::BitwiseInvert => match dtype {
            DType::I32 => !(x as i32) as f64,
            DType::U32 => !(x as u32) as f64,
            _ => (x == 0.0) as u8 as f64,
        },
    }
}

pub fn unary(op: UnaryOp, x: &[f64], dtype: DType) -> Vec<f64> {
    x.iter().map(|&v| unary_value(op, v, dtype)).collect()
}

/// numpy's `maximum`: NaN when either operand is NaN (the Array API standard), else the larger;
/// on a tie (`-0` and `+0`) the second operand, as numpy 2 gives.
pub fn maximum(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a > b {
        a
    } else {
        b
    }
}

/// numpy's `minimum`; the rules of [`maximum`].
pub fn minimum(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a < b {
        a
    } else {
        b
    }
}

/// Integer power with numpy's wrap-around modulo 2^32; a negative exponent (numpy refuses it)
/// gives the integer part of 1 / x^|y|.
fn int_pow(a: f64, b: f64, dtype: DType) -> f64 {
    if dtype == DType::I32 {
        let (x, y) = (a as i32, b as i32);
        if y < 0 {
            return match x {
                1 => 1.0,
                -1 => {
                    if y % 2 == 0 {
                        1.0
                    } else {
                        -1.0
                    }
                }
                _ => 0.0,
            };
        }
        x.wrapping_pow(y as u32) as f64
    } else {
        (a as u32).wrapping_pow(b as u32) as f64
    }
}

/// numpy's floor division `//` on integers: toward -inf, `x // 0 = 0`, `i32::MIN // -1` wraps.
fn floor_div(a: f64, b: f64, dtype: DType) -> f64 {
    if b == 0.0 {
        return 0.0;
    }
    match dtype {
        DType::I32 => {
            // In i64, where i32::MIN / -1 = 2^31 exists; the cast back wraps it to i32::MIN.
            let (x, y) = (a as i64, b as i64);
            let q = x / y;
            let q = if x % y != 0 && ((x < 0) != (y < 0)) { q - 1 } else { q };
            q as i32 as f64
        }
        _ => ((a as u32) / (b as u32)) as f64,
    }
}

/// The exact wrap-around product of two 32-bit integers (as f64 of the low 32 bits).
fn wrapping_mul(a: f64, b: f64) -> f64 {
    ((a as i64 as u64).wrapping_mul(b as i64 as u64) & 0xFFFF_FFFF) as f64
}

/// numpy's `npy_divmodf` in f32 (numpy computes float16 through it too): `(a // b, a % b)`,
/// both from the exact `fmod`. `a // ±0` is `a / ±0`; the remainder takes the sign of `b`
/// (a zero one included); the quotient is snapped to the nearest whole number.
pub fn divmod_f32(a: f32, b: f32) -> (f32, f32) {
    let m = a % b;
    if b == 0.0 {
        return (a / b, m);
    }
    let mut div = (a - m) / b;
    let mut m = m;
    if m != 0.0 {
        if (b < 0.0) != (m < 0.0) {
            m += b;
            div -= 1.0;
        }
    } else {
        m = 0f32.copysign(b);
    }
    let q = if div != 0.0 {
        let f = div.floor();
        if div - f > 0.5 {
            f + 1.0
        } else {
            f
        }
    } else {
        0f32.copysign(a / b)
    };
    (q, m)
}

/// numpy's integer remainder: the sign of the divisor, `x % 0 = 0`.
fn int_remainder(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return 0.0;
    }
    let (x, y) = (a as i64, b as i64);
    let r = x % y;
    (if r != 0 && ((r < 0) != (y < 0)) { r + y } else { r }) as f64
}

/// The next value of `dtype` after `a` toward `b` (C's nextafter in that format's steps).
pub fn nextafter(a: f64, b: f64, dtype: DType) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    if a == b {
        return b;
    }
    let away = (b > a) == (a > 0.0);
    match dtype {
        DType::F16 => {
            let h = crate::f16::from_f64(a).to_bits();
            let n = if a == 0.0 {
                (crate::f16::from_f64(b).to_bits() & 0x8000) | 1
            } else if away {
                h + 1
            } else {
                h - 1
            };
            crate::f16::from_bits(n).to_f64()
        }
        _ => {
            let x = a as f32;
            let n = if a == 0.0 {
                f32::from_bits(((b as f32).to_bits() & 0x8000_0000) | 1)
            } else if away {
                f32::from_bits(x.to_bits() + 1)
            } else {
                f32::from_bits(x.to_bits() - 1)
            };
            n as f64
        }
    }
}

/// numpy's logaddexp: `log(e^a + e^b)`, `a + ln 2` for `a == b` (±inf included).
fn logaddexp(a: f64, b: f64) -> f64 {
    if a == b {
        return a + std::f64::consts::LN_2;
    }
    let d = a - b;
    if d > 0.0 {
        a + (-d).exp().ln_1p()
    } else if d <= 0.0 {
        b + d.exp().ln_1p()
    } else {
        f64::NAN
    }
}

/// `a OP b` in f64 from the op's definition, rounded to `dtype` (comparisons and logical ops
/// give 0/1, the values of a bool).
pub fn binary_value(op: BinaryOp, a: f64, b: f64, dtype: DType) -> f64 {
    let v = binary_exact(op, a, b, dtype);
    if op.gives_bool() {
        v
    } else {
        round_to(dtype, wrap(dtype, v))
    }
}

/// `a OP b` in f64 before the rounding to `dtype` (the accuracy tests measure against it).
pub fn binary_exact(op: BinaryOp, a: f64, b: f64, dtype: DType) -> f64 {
    let int = !dtype.is_float();
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul if int => wrapping_mul(a, b),
        BinaryOp::Mul => a * b,
        BinaryOp::Div if int => floor_div(a, b, dtype),
        BinaryOp::Div => a / b,
        BinaryOp::Pow if int => int_pow(a, b, dtype),
        // f64::powf is C99 pow: every special case of IEEE 754 / the Array API standard.
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Maximum => maximum(a, b),
        BinaryOp::Minimum => minimum(a, b),
        BinaryOp::Eq => (a == b) as u32 as f64,
        BinaryOp::Ne => (a != b) as u32 as f64,
        BinaryOp::Lt => (a < b) as u32 as f64,
        BinaryOp::Le => (a <= b) as u32 as f64,
        BinaryOp::Gt => (a > b) as u32 as f64,
        BinaryOp::Ge => (a >= b) as u32 as f64,
        BinaryOp::LogicalAnd => (a != 0.0 && b != 0.0) as u32 as f64,
        BinaryOp::LogicalOr => (a != 0.0 || b != 0.0) as u32 as f64,
        BinaryOp::LogicalXor => ((a != 0.0) != (b != 0.0)) as u32 as f64,
        BinaryOp::Atan2 => a.atan2(b),
        BinaryOp::Hypot => a.hypot(b),
        BinaryOp::Logaddexp => logaddexp(a, b),
        BinaryOp::Copysign => a.copysign(b),
        // Already a value of the dtype: rounding it again changes nothing.
        BinaryOp::Nextafter => nextafter(a, b, dtype),
        BinaryOp::Remainder if int => int_remainder(a, b),
        BinaryOp::Remainder => divmod_f32(a as f32, b as f32).1 as f64,
        BinaryOp::FloorDivide if int => floor_div(a, b, dtype),
        BinaryOp::FloorDivide => divmod_f32(a as f32, b as f32).0 as f64,
        BinaryOp::BitwiseAnd => bits(a, b, dtype, |x, y| x & y),
        BinaryOp::BitwiseOr => bits(a, b, dtype, |x, y| x | y),
        BinaryOp::BitwiseXor => bits(a, b, dtype, |x, y| x ^ y),
        BinaryOp::BitwiseLeftShift => shift(a, b, dtype, true),
        BinaryOp::BitwiseRightShift => shift(a, b, dtype, false),
    }
}

/// `f` on the 32 bits of two values of `dtype` (i32, u32; bool as 0 / 1).
fn bits(a: f64, b: f64, dtype: DType, f: impl Fn(u32, u32) -> u32) -> f64 {
    match dtype {
        DType::I32 => f(a as i32 as u32, b as i32 as u32) as i32 as f64,
        DType::Bool => f((a != 0.0) as u32, (b != 0.0) as u32) as f64,
        _ => f(a as u32, b as u32) as f64,
    }
}

/// numpy's shifts: a count outside [0, 32) shifts every bit out (a right shift of a negative
/// i32 leaves -1).
fn shift(a: f64, b: f64, dtype: DType, left: bool) -> f64 {
    let n = b as i64;
    let inside = (0..32).contains(&n);
    match dtype {
        DType::I32 => {
            let x = a as i32;
            match (left, inside) {
                (true, true) => (x << n) as f64,
                (false, true) => (x >> n) as f64,
                (true, false) => 0.0,
                (false, false) => (if x < 0 { -1 } else { 0 }) as f64,
            }
        }
        _ => {
            let x = a as u32;
            match (left, inside) {
                (true, true) => (x << n) as f64,
                (false, true) => (x >> n) as f64,
                _ => 0.0,
            }
        }
    }
}

/// `a OP b` with numpy broadcasting; returns the values and the output shape.
pub fn binary(
    op: BinaryOp,
    a: &[f64],
    a_shape: &[usize],
    b: &[f64],
    b_shape: &[usize],
    dtype: DType,
) -> Result<(Vec<f64>, Vec<usize>)> {
    let out = broadcast_shapes(a_shape, b_shape)?;
    let vals = (0..numel(&out))
        .map(|i| binary_value(op, a[broadcast_index(i, &out, a_shape)], b[broadcast_index(i, &out, b_shape)], dtype))
        .collect();
    Ok((vals, out))
}

pub fn where_(
    c: &[f64],
    c_shape: &[usize],
    a: &[f64],
    a_shape: &[usize],
    b: &[f64],
    b_shape: &[usize],
) -> Result<(Vec<f64>, Vec<usize>)> {
    let out = broadcast_shapes(&broadcast_shapes(c_shape, a_shape)?, b_shape)?;
    let vals = (0..numel(&out))
        .map(|i| {
            if c[broadcast_index(i, &out, c_shape)] != 0.0 {
                a[broadcast_index(i, &out, a_shape)]
            } else {
                b[broadcast_index(i, &out, b_shape)]
            }
        })
        .collect();
    Ok((vals, out))
}

/// The Array API's `clip` of one element: `minimum(maximum(x, lo), hi)` with NaN propagated.
pub fn clip_value(x: f64, lo: f64, hi: f64) -> f64 {
    minimum(maximum(x, lo), hi)
}

/// numpy `astype` with WGSL's float-to-int rule: truncate toward zero, clamped to the range
/// of f32 values that fit (so the top is 2147483520 for i32 and 4294967040 for u32); to bool,
/// true where not ±0 (NaN is true).
pub fn cast(x: &[f64], to: DType) -> Vec<f64> {
    x.iter()
        .map(|&v| match to {
            DType::I32 => v.trunc().clamp(-2147483648.0, 2147483520.0),
            DType::U32 => v.trunc().clamp(0.0, 4294967040.0),
            DType::Bool => (v != 0.0) as u8 as f64,
            _ => round_to(to, v),
        })
        .collect()
}

pub fn arange(start: f64, stop: f64, step: f64, dtype: DType) -> Vec<f64> {
    let n = ((stop - start) / step).ceil().max(0.0) as usize;
    (0..n).map(|i| round_to(dtype, start + i as f64 * step)).collect()
}
