//! What a dtype holds, in f64 terms: the rounding every op applies to a scalar operand and every
//! CPU reference applies to its results, and the operands of `random_uniform`'s mapping (shared
//! by the kernel's launch and the reference so that both cap at the same value).

use crate::DType;
use half::f16;

/// Rounds an f64 to what `dtype` can hold (f32 / f16 rounding, integer truncation).
pub fn round_to(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F32 => v as f32 as f64,
        DType::F16 => half::f16::from_f64(v).to_f64(),
        DType::I32 => v as i32 as f64,
        DType::U32 => v as u32 as f64,
        DType::Bool => (v != 0.0) as u8 as f64,
    }
}

/// The largest f32 below `h`.
fn next_down_f32(h: f32) -> f32 {
    let b = h.to_bits();
    if h > 0.0 {
        f32::from_bits(b - 1)
    } else if h == 0.0 {
        -f32::from_bits(1)
    } else {
        f32::from_bits(b + 1)
    }
}

/// The largest f16 below `h`.
fn next_down_f16(h: f16) -> f16 {
    let b = h.to_bits();
    if h > f16::ZERO {
        f16::from_bits(b - 1)
    } else if h == f16::ZERO {
        -f16::from_bits(1)
    } else {
        f16::from_bits(b + 1)
    }
}

/// The f32 operands of the uniform mapping: (low, high - low, cap), cap being the largest
/// value of `dtype` below `high` (never below low).
pub fn uniform_params(dtype: DType, low: f64, high: f64) -> (f32, f32, f32) {
    let lo = low as f32;
    let span = (high - low) as f32;
    let cap = if dtype == DType::F16 {
        let h = f16::from_f64(high);
        (if h.to_f64() >= high { next_down_f16(h) } else { h }).to_f32()
    } else {
        let h = high as f32;
        if h as f64 >= high {
            next_down_f32(h)
        } else {
            h
        }
    };
    (lo, span, cap.max(lo))
}
