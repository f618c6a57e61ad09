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
    let v = match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
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
        // The predicates give 0/1 (bool) whatever `dtype`: no rounding. A number is true where it
        // is not ±0 (NaN included, as numpy).
        UnaryOp::LogicalNot => return (x == 0.0) as u8 as f64,
        UnaryOp::IsNan => return x.is_nan() as u8 as f64,
        UnaryOp::IsInf => return x.is_infinite() as u8 as f64,
        UnaryOp::IsFinite => return x.is_finite() as u8 as f64,
        UnaryOp::Signbit => return x.is_sign_negative() as u8 as f64,
    };
    // Integer neg/abs wrap like two's complement (abs(i32::MIN) stays i32::MIN).
    round_to(dtype, wrap(dtype, v))
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

/// `a OP b` in f64 from the op's definition, rounded to `dtype` (comparisons and logical ops
/// give 0/1, the values of a bool).
pub fn binary_value(op: BinaryOp, a: f64, b: f64, dtype: DType) -> f64 {
    let int = !dtype.is_float();
    let v = match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => {
            if int {
                // Exact wrap-around product of two 32-bit integers.
                ((a as i64 as u64).wrapping_mul(b as i64 as u64) & 0xFFFF_FFFF) as f64
            } else {
                a * b
            }
        }
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
    };
    if op.gives_bool() {
        v
    } else {
        round_to(dtype, wrap(dtype, v))
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
