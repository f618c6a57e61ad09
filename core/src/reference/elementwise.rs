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
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::Gelu => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        UnaryOp::GeluTanh => {
            let k = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
        }
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
    };
    // Integer neg/abs wrap like two's complement (abs(i32::MIN) stays i32::MIN).
    round_to(dtype, wrap(dtype, v))
}

pub fn unary(op: UnaryOp, x: &[f64], dtype: DType) -> Vec<f64> {
    x.iter().map(|&v| unary_value(op, v, dtype)).collect()
}

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
        // WGSL integer division truncates, x / 0 is x, and i32::MIN / -1 is i32::MIN.
        BinaryOp::Div if int => {
            if b == 0.0 {
                a
            } else if dtype == DType::I32 && a == i32::MIN as f64 && b == -1.0 {
                a
            } else {
                (a / b).trunc()
            }
        }
        BinaryOp::Div => a / b,
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Maximum => a.max(b),
        BinaryOp::Minimum => a.min(b),
        BinaryOp::Eq => (a == b) as u32 as f64,
        BinaryOp::Ne => (a != b) as u32 as f64,
        BinaryOp::Lt => (a < b) as u32 as f64,
        BinaryOp::Le => (a <= b) as u32 as f64,
        BinaryOp::Gt => (a > b) as u32 as f64,
        BinaryOp::Ge => (a >= b) as u32 as f64,
    };
    if op.is_comparison() {
        v
    } else {
        round_to(dtype, wrap(dtype, v))
    }
}

/// `a OP b` with numpy broadcasting; returns the values and the output shape.
pub fn binary(op: BinaryOp, a: &[f64], a_shape: &[usize], b: &[f64], b_shape: &[usize], dtype: DType) -> Result<(Vec<f64>, Vec<usize>)> {
    let out = broadcast_shapes(a_shape, b_shape)?;
    let vals = (0..numel(&out))
        .map(|i| binary_value(op, a[broadcast_index(i, &out, a_shape)], b[broadcast_index(i, &out, b_shape)], dtype))
        .collect();
    Ok((vals, out))
}

pub fn where_(c: &[f64], c_shape: &[usize], a: &[f64], a_shape: &[usize], b: &[f64], b_shape: &[usize]) -> Result<(Vec<f64>, Vec<usize>)> {
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
/// of f32 values that fit (so the top is 2147483520 for i32 and 4294967040 for u32).
pub fn cast(x: &[f64], to: DType) -> Vec<f64> {
    x.iter()
        .map(|&v| match to {
            DType::I32 => v.trunc().clamp(-2147483648.0, 2147483520.0),
            DType::U32 => v.trunc().clamp(0.0, 4294967040.0),
            _ => round_to(to, v),
        })
        .collect()
}

pub fn arange(start: f64, stop: f64, step: f64, dtype: DType) -> Vec<f64> {
    let n = ((stop - start) / step).ceil().max(0.0) as usize;
    (0..n).map(|i| round_to(dtype, start + i as f64 * step)).collect()
}
