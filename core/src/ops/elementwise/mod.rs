//! Elementwise ops: unary, binary (numpy broadcasting, scalar forms), comparisons, where,
//! cast, fill, arange and copy. All run `shaders/elementwise.wgsl`.
//!
//! `table` declares the ops (one line each), `kernel` runs them (and holds the `k_` math
//! library every kernel shares, `with_special`); this file is the public ops and their dtype rules.

mod kernel;
mod table;

use crate::dtype::DType;
use crate::exec::check_same_device;
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;
use crate::{Error, Result};
pub(crate) use kernel::with_special;
use kernel::{compute_type, elementwise};
use std::sync::Arc;
pub use table::*;

/// The refusal of arithmetic on bool (numpy refuses `-x` and `a - b` on bool and the Array API
/// standard defines none of it; rather than numpy's mixed rules, kiln refuses all of it).
fn no_bool_arithmetic(name: &str) -> Error {
    Error::DTypeMismatch(format!(
        "{name} is not defined on bool tensors: cast to an integer or float dtype first (or use the logical ops)"
    ))
}

/// The dtype rule of a unary op: Ok where `op` takes a tensor of `dt`, else the DTYPE_MISMATCH
/// it answers. The one place the rule is written: the op checks it, and `UnaryOp::accepts`
/// (which `kiln demo` and the tests use to pick inputs) asks it.
pub fn check_unary_dtype(op: UnaryOp, dt: DType) -> Result<()> {
    if op.is_bitwise() && dt.is_float() {
        return Err(Error::DTypeMismatch(format!("{} needs an integer or bool tensor, got {dt}", op.name())));
    }
    if dt == DType::Bool && !op.gives_bool() && !op.is_bitwise() {
        return Err(no_bool_arithmetic(op.name()));
    }
    if !dt.is_float() && !op.allows_int() {
        return Err(Error::DTypeMismatch(format!("{} needs a float tensor (f32 or f16), got {dt}", op.name())));
    }
    Ok(())
}

impl UnaryOp {
    /// Whether the op takes a tensor of `dt` ([`check_unary_dtype`]).
    pub fn accepts(self, dt: DType) -> bool {
        check_unary_dtype(self, dt).is_ok()
    }
}

impl BinaryOp {
    /// Whether the op takes two tensors of `dt` ([`check_binary_dtypes`]).
    pub fn accepts(self, dt: DType) -> bool {
        check_binary_dtypes(self, dt, dt).is_ok()
    }
}

pub fn unary(op: UnaryOp, x: &Tensor) -> Result<Tensor> {
    let dt = x.dtype();
    check_unary_dtype(op, dt)?;
    let out_dtype = if op.gives_bool() { DType::Bool } else { dt };
    elementwise(op.name(), &[x], x.shape(), out_dtype, op.expr(dt), [0, 0], x.device())
}

/// The dtype rule of a binary op (see [`check_unary_dtype`]).
pub fn check_binary_dtypes(op: BinaryOp, a: DType, b: DType) -> Result<()> {
    if a != b {
        return Err(Error::DTypeMismatch(format!("{} of {a} and {b}: dtypes must match (cast one first)", op.name())));
    }
    if op.is_bitwise() && a.is_float() {
        return Err(Error::DTypeMismatch(format!("{} needs integer tensors (i32 or u32), got {a}", op.name())));
    }
    if op.is_bitwise() && a == DType::Bool && !op.allows_bool_bits() {
        return Err(Error::DTypeMismatch(format!("{} needs integer tensors (i32 or u32), got bool", op.name())));
    }
    // maximum / minimum of bools are numpy's logical or / and, exact on 0/1 words.
    if a == DType::Bool
        && !op.gives_bool()
        && !op.allows_bool_bits()
        && !matches!(op, BinaryOp::Maximum | BinaryOp::Minimum)
    {
        return Err(no_bool_arithmetic(op.name()));
    }
    if !a.is_float() && !op.allows_int() {
        return Err(Error::DTypeMismatch(format!("{} needs float tensors (f32 or f16), got {a}", op.name())));
    }
    Ok(())
}

pub fn binary(op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let device = check_same_device(&[a, b])?;
    check_binary_dtypes(op, a.dtype(), b.dtype())?;
    let shape = broadcast_shapes(a.shape(), b.shape())?;
    let out_dtype = if op.gives_bool() { DType::Bool } else { a.dtype() };
    elementwise(op.name(), &[a, b], &shape, out_dtype, op.expr(a.dtype()), [0, 0], &device)
}

/// `a OP s` (or `s OP a` when `scalar_first`), the scalar taking `a`'s dtype. The scalar
/// travels in the kernel's parameter block, so no tensor is uploaded for it.
pub fn binary_scalar(op: BinaryOp, a: &Tensor, s: f64, scalar_first: bool) -> Result<Tensor> {
    let dt = a.dtype();
    check_binary_dtypes(op, dt, dt)?;
    dt.check_scalar(s)?;
    let s = crate::numeric::round_to(dt, s);
    let scalar = format!("({})", scalar_expr(dt, "bits"));
    let expr = op.expr(dt);
    let expr = if scalar_first {
        expr.replace("x0", "\u{1}").replace("x1", "x0").replace('\u{1}', &scalar)
    } else {
        expr.replace("x1", &scalar)
    };
    let out_dtype = if op.gives_bool() { DType::Bool } else { dt };
    elementwise(op.name(), &[a], a.shape(), out_dtype, &expr, [scalar_bits(dt, s), 0], a.device())
}

/// `cond ? a : b` elementwise, broadcasting all three; `cond` is bool, or any dtype true where
/// non-zero.
pub fn where_(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let device = check_same_device(&[cond, a, b])?;
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch(format!("where: branches are {} and {}", a.dtype(), b.dtype())));
    }
    let shape = broadcast_shapes(&broadcast_shapes(cond.shape(), a.shape())?, b.shape())?;
    // Float conditions are false only for ±0, read from the bits: NaN is true (numpy), and so is
    // a subnormal (which a GPU may compare as 0).
    let expr = if cond.dtype().is_float() {
        "select(x1, x2, (bitcast<u32>(x0) & 0x7fffffffu) == 0u)".to_string()
    } else {
        format!("select(x1, x2, x0 == {}(0))", compute_type(cond.dtype()))
    };
    elementwise("where", &[cond, a, b], &shape, a.dtype(), &expr, [0, 0], &device)
}

/// `x` limited to `[min, max]` elementwise (the Array API's `clip`), as
/// `minimum(maximum(x, min), max)`: a NaN in `x`, `min` or `max` gives NaN. Either bound may be
/// absent; a bound must have `x`'s dtype and broadcast to `x`'s shape, which the result keeps.
/// Where `min > max` the result is `max` (the standard leaves it unspecified).
pub fn clip(x: &Tensor, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
    for b in [min, max].into_iter().flatten() {
        if broadcast_shapes(x.shape(), b.shape())? != x.shape() {
            return Err(Error::ShapeMismatch(format!(
                "clip: a bound of shape {:?} would broadcast x of shape {:?} to a larger shape",
                b.shape(),
                x.shape()
            )));
        }
    }
    let r = match min {
        Some(lo) => binary(BinaryOp::Maximum, x, lo)?,
        None => copy(x)?,
    };
    match max {
        Some(hi) => binary(BinaryOp::Minimum, &r, hi),
        None => Ok(r),
    }
}

/// [`clip`] with number bounds; `-inf` for `min` or `+inf` for `max` means no bound (so they
/// work on integer tensors too), any other value must be one of `x`'s dtype.
pub fn clip_scalar(x: &Tensor, min: f64, max: f64) -> Result<Tensor> {
    let r = if min == f64::NEG_INFINITY { copy(x)? } else { binary_scalar(BinaryOp::Maximum, x, min, false)? };
    if max == f64::INFINITY {
        Ok(r)
    } else {
        binary_scalar(BinaryOp::Minimum, &r, max, false)
    }
}

/// Converts to `dtype` (float to int truncates toward zero, saturating; to bool: non-zero is
/// true, NaN included, as numpy; from bool: 0 or 1).
pub fn cast(x: &Tensor, dtype: DType) -> Result<Tensor> {
    if x.dtype() == dtype {
        return copy(x);
    }
    let expr = match (x.dtype(), dtype) {
        (src, DType::Bool) if src.is_float() => "(bitcast<u32>(x0) & 0x7fffffffu) != 0u",
        (_, DType::Bool) => "x0 != 0",
        _ => "x0",
    };
    elementwise("cast", &[x], x.shape(), dtype, expr, [0, 0], x.device())
}

/// A new tensor with the same contents (a GPU-side copy).
pub fn copy(x: &Tensor) -> Result<Tensor> {
    let out = Tensor::empty_on(x.device(), x.shape(), x.dtype())?;
    x.device().copy(x.raw(), 0, out.raw(), 0, (x.storage_nbytes() as u64).next_multiple_of(4))?;
    Ok(out)
}

/// Raw bits of `v` as a value of `dtype` (f16 travels as f32 and is rounded on store).
fn scalar_bits(dtype: DType, v: f64) -> u32 {
    match dtype {
        DType::F32 | DType::F16 => (v as f32).to_bits(),
        DType::I32 => (v as i32) as u32,
        DType::U32 => v as u32,
        DType::Bool => (v != 0.0) as u32,
    }
}

fn scalar_expr(dtype: DType, field: &str) -> String {
    match dtype {
        DType::F32 | DType::F16 => format!("bitcast<f32>(p.{field})"),
        DType::I32 => format!("bitcast<i32>(p.{field})"),
        DType::U32 | DType::Bool => format!("p.{field}"),
    }
}

pub fn full_on(device: &Arc<crate::Device>, shape: &[usize], dtype: DType, value: f64) -> Result<Tensor> {
    dtype.check_scalar(value)?;
    let expr = scalar_expr(dtype, "bits");
    elementwise("full", &[], shape, dtype, &expr, [scalar_bits(dtype, value), 0], device)
}

pub fn full(shape: &[usize], dtype: DType, value: f64) -> Result<Tensor> {
    full_on(&crate::runtime::device()?, shape, dtype, value)
}

pub fn zeros(shape: &[usize], dtype: DType) -> Result<Tensor> {
    full(shape, dtype, 0.0)
}

pub fn ones(shape: &[usize], dtype: DType) -> Result<Tensor> {
    full(shape, dtype, 1.0)
}

/// Overwrites every element of `x` with `value`.
pub fn fill(x: &Tensor, value: f64) -> Result<()> {
    let t = full_on(x.device(), x.shape(), x.dtype(), value)?;
    x.device().copy(t.raw(), 0, x.raw(), 0, (x.storage_nbytes() as u64).next_multiple_of(4))
}

/// Overwrites `dst`'s contents with `src`'s (one shape, dtype and device): a buffer-to-buffer
/// copy, so every tensor sharing `dst`'s buffer (its reshapes) sees the new values, as with
/// [`fill`]. What bindings build in-place assignment (`x[key] = v`) on.
pub fn assign(dst: &Tensor, src: &Tensor) -> Result<()> {
    if dst.dtype() != src.dtype() {
        return Err(Error::DTypeMismatch(format!("assign: dtypes {} and {} differ", dst.dtype(), src.dtype())));
    }
    if dst.shape() != src.shape() {
        return Err(Error::ShapeMismatch(format!("assign: shapes {:?} and {:?} differ", dst.shape(), src.shape())));
    }
    dst.same_device(src)?;
    if dst.shares_buffer(src) {
        return Ok(());
    }
    dst.device().copy(src.raw(), 0, dst.raw(), 0, (dst.storage_nbytes() as u64).next_multiple_of(4))
}

/// `start, start + step, …` below `stop` (numpy's `arange`), as a 1-D tensor.
pub fn arange(start: f64, stop: f64, step: f64, dtype: DType) -> Result<Tensor> {
    if step == 0.0 || !step.is_finite() || !start.is_finite() || !stop.is_finite() {
        return Err(Error::InvalidArgument(format!("arange: bad range start={start} stop={stop} step={step}")));
    }
    let n = ((stop - start) / step).ceil().max(0.0) as usize;
    // The last value must be one of the dtype's too (an i32 range past 2^31 would wrap).
    if n > 0 {
        dtype.check_scalar(start + (n - 1) as f64 * step)?;
    }
    let expr = match dtype {
        DType::F32 | DType::F16 => "bitcast<f32>(p.bits) + f32(i) * bitcast<f32>(p.bits2)",
        DType::I32 => "bitcast<i32>(p.bits) + i32(i) * bitcast<i32>(p.bits2)",
        DType::U32 => "p.bits + i * p.bits2",
        DType::Bool => return Err(Error::DTypeMismatch("arange: a bool range is not defined (use full)".into())),
    };
    dtype.check_scalar(start)?;
    dtype.check_scalar(step)?;
    if dtype == DType::U32 && (start < 0.0 || step < 0.0) {
        return Err(Error::InvalidArgument("arange: a u32 range needs a non-negative start and step".into()));
    }
    let device = crate::runtime::device()?;
    elementwise("arange", &[], &[n], dtype, expr, [scalar_bits(dtype, start), scalar_bits(dtype, step)], &device)
}
