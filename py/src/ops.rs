//! Module-level functions: creation, elementwise, matmul, reduce, norm, movement, nn, random.
//! Each is argument conversion around one kiln-core call; no op logic lives here. Written by hand
//! because Python's idiom differs from the op table's plain signature: numpy / Array API names
//! and keywords (`axis=` for `axes`, positional-only and keyword-only parameters, `device=`,
//! `copy=`), Python scalars and sequences as arguments, dtype defaults. The ops whose Python
//! signature is the table's own (softmax, log_softmax, layer_norm, rms_norm, batch_norm,
//! index_select, gather, embedding, rope, attention and the quant ops but quant_from_bytes), or
//! its Array API form (matmul, mean, max, min, all, any, argmax, argmin, prod, the scans, diff,
//! vecdot, count_nonzero, unique_values), numpy's name (permute_dims, swapaxes) or numpy's
//! creation form (zeros, ones and their `_like` twins, over the device helpers below), are
//! generated into ops_gen.rs from their rows (`make gen`).

use crate::convert::{
    dtype_or, operand, parse_axes, parse_dtype, parse_ishape, parse_pair, parse_shape, required_dtype, tensor_arg,
    tensor_or_scalar_like, to_tensor, Float, Int, Operand,
};
use crate::errors::{gpu, invalid};
use crate::tensor::{binary_op, floor_divide_op, remainder_op, true_divide_op, PyTensor};
use kiln_core::ops::{self, BinaryOp, UnaryOp};
use kiln_core::{DType, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PySequence, PyTuple};

pub(crate) type PyT = PyResult<PyTensor>;

fn ok(t: Tensor) -> PyTensor {
    PyTensor::new(t)
}

// ---------------------------------------------------------------------------------------------
// creation

/// `device=` of the creation functions (the Array API's keyword): None (or the current device,
/// `kiln.default_device()`) makes the tensor there; another `kiln.Device` makes it on the
/// current device and moves it ([`place`]: through host memory, wgpu devices share no buffers),
/// so its bits are the ones the current device computes; anything else is an
/// InvalidArgumentError rather than being ignored.
pub(crate) fn target_device(
    py: Python<'_>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<crate::runtime::PyDevice>> {
    let Some(d) = device.filter(|d| !d.is_none()) else { return Ok(None) };
    let current = crate::runtime::default_device(py)?;
    match d.cast::<crate::runtime::PyDevice>() {
        Ok(d) if d.get().adapter_index() == current.adapter_index() => Ok(None),
        Ok(d) => Ok(Some(d.get().clone())),
        Err(_) => {
            Err(invalid(py, format!("device= takes a kiln.Device (kiln.devices()[i]) or None, got {}", d.get_type())))
        }
    }
}

/// `t` on `target` (see [`target_device`]); as it is for None.
pub(crate) fn place(py: Python<'_>, t: Tensor, target: Option<crate::runtime::PyDevice>) -> PyT {
    match target {
        None => Ok(ok(t)),
        Some(dev) => gpu(py, || t.to_device(&dev.open()?)).map(ok),
    }
}

/// Converts ``obj`` to a tensor: numpy arrays, buffer-protocol objects, nested lists and
/// scalars are uploaded with one copy (non-contiguous arrays are made contiguous first);
/// a Tensor is returned as is, or cast when ``dtype`` differs. Supported dtypes: float32,
/// float16, int32, uint32; float64 arrays become float32 (with one warning per process);
/// Python ints become int32 and Python floats float32.
#[pyfunction]
#[pyo3(signature = (obj, /, dtype=None, *, device=None, copy=None))]
pub fn asarray(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
) -> PyT {
    // device=: any adapter (the upload lands on the current device, then moves: a second copy
    // only when the target is another one).
    let target = match device.filter(|d| !d.is_none()) {
        None => None,
        Some(d) => Some(d.cast::<crate::runtime::PyDevice>().map(|d| d.get().clone()).map_err(|_| {
            invalid(py, format!("device= takes a kiln.Device (kiln.devices()[i]) or None, got {}", d.get_type()))
        })?),
    };
    let d = parse_dtype(py, dtype)?;
    let mut t = to_tensor(py, obj, d)?;
    if let Some(dev) = target {
        let moved = gpu(py, || t.to_device(&dev.open()?))?;
        if !moved.shares_buffer(&t) {
            return Ok(ok(moved)); // a fresh copy: copy=True is met
        }
        t = moved;
    }
    if copy == Some(true) && obj.cast::<PyTensor>().is_ok_and(|o| o.get().t.shares_buffer(&t)) {
        return gpu(py, || ops::copy(&t)).map(ok);
    }
    Ok(ok(t))
}

/// Uploads raw little-endian ``data`` (bytes-like) as a tensor of ``shape`` and ``dtype``.
#[pyfunction]
#[pyo3(signature = (data, shape, dtype=None))]
pub fn from_bytes(py: Python<'_>, data: &[u8], shape: &Bound<'_, PyAny>, dtype: Option<&Bound<'_, PyAny>>) -> PyT {
    let s = parse_shape(py, shape)?;
    let d = dtype_or(py, dtype, DType::F32)?;
    gpu(py, || Tensor::from_bytes(data, &s, d)).map(ok)
}

/// An uninitialised tensor of ``shape`` (its contents are whatever the buffer held).
#[pyfunction]
#[pyo3(signature = (shape, dtype=None, *, device=None))]
pub fn empty(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyT {
    let target = target_device(py, device)?;
    let (s, d) = (parse_shape(py, shape)?, dtype_or(py, dtype, DType::F32)?);
    place(py, gpu(py, || Tensor::empty(&s, d))?, target)
}

fn scalar_default_dtype(v: &Bound<'_, PyAny>) -> DType {
    // True / False (and numpy's bool scalars) give bool, as in numpy and the Array API; bool is
    // a subclass of int, so it is asked first.
    let np_bool =
        v.getattr("dtype").ok().and_then(|d| d.getattr("kind").ok()).is_some_and(|k| k.eq("b").unwrap_or(false));
    if v.is_instance_of::<PyBool>() || np_bool {
        DType::Bool
    } else if v.is_instance_of::<PyInt>() {
        DType::I32
    } else {
        DType::F32
    }
}

/// A tensor of ``shape`` filled with ``fill_value`` (bool values give bool, ints int32, floats
/// float32, unless ``dtype`` says otherwise).
#[pyfunction]
#[pyo3(signature = (shape, fill_value, dtype=None, *, device=None))]
pub fn full(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    fill_value: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyT {
    let target = target_device(py, device)?;
    let s = parse_shape(py, shape)?;
    let d = dtype_or(py, dtype, scalar_default_dtype(fill_value))?;
    // kiln-core checks the value against the dtype (DType::check_scalar): no truncation here.
    let (v, _) = scalar_arg(py, fill_value)?;
    place(py, gpu(py, || ops::full(&s, d, v))?, target)
}

fn scalar_arg(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<(f64, bool)> {
    match operand(py, v)? {
        Some(Operand::Scalar(v, is_int)) => Ok((v, is_int)),
        _ => Err(invalid(py, format!("expected a Python or numpy scalar, got {}", v.get_type()))),
    }
}

pub(crate) fn like_args(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Vec<usize>, DType)> {
    let t = tensor_arg(py, x)?;
    let d = dtype_or(py, dtype, t.dtype())?;
    Ok((t.shape().to_vec(), d))
}

/// ``fill_value`` everywhere, with the shape (and by default the dtype) of ``x``.
#[pyfunction]
#[pyo3(signature = (x, /, fill_value, dtype=None, *, device=None))]
pub fn full_like(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    fill_value: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyT {
    let target = target_device(py, device)?;
    let (s, d) = like_args(py, x, dtype)?;
    let (v, _) = scalar_arg(py, fill_value)?;
    place(py, gpu(py, || ops::full(&s, d, v))?, target)
}

/// An uninitialised tensor with the shape (and by default the dtype) of ``x``.
#[pyfunction]
#[pyo3(signature = (x, /, dtype=None, *, device=None))]
pub fn empty_like(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyT {
    let target = target_device(py, device)?;
    let (s, d) = like_args(py, x, dtype)?;
    place(py, gpu(py, || Tensor::empty(&s, d))?, target)
}

/// Evenly spaced values in ``[start, stop)`` (numpy's ``arange``; ``arange(n)`` is
/// ``arange(0, n)``). All-int arguments give int32, otherwise float32, unless ``dtype`` is given.
#[pyfunction]
#[pyo3(signature = (start, /, stop=None, step=None, *, dtype=None, device=None))]
pub fn arange(
    py: Python<'_>,
    start: &Bound<'_, PyAny>,
    stop: Option<&Bound<'_, PyAny>>,
    step: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyT {
    let target = target_device(py, device)?;
    let stop = stop.filter(|s| !s.is_none());
    let step = step.filter(|s| !s.is_none());
    let all_int = start.is_instance_of::<PyInt>()
        && stop.is_none_or(|s| s.is_instance_of::<PyInt>())
        && step.is_none_or(|s| s.is_instance_of::<PyInt>());
    let d = dtype_or(py, dtype, if all_int { DType::I32 } else { DType::F32 })?;
    // Ints of any size and floats reach kiln-core as f64, which checks them against the dtype.
    let f = |o: &Bound<'_, PyAny>| -> PyResult<f64> { scalar_arg(py, o).map(|v| v.0) };
    let (a, b) = match stop {
        Some(s) => (f(start)?, f(s)?),
        None => (0.0, f(start)?),
    };
    let st = match step {
        Some(s) => f(s)?,
        None => 1.0,
    };
    place(py, gpu(py, || ops::arange(a, b, st, d))?, target)
}

/// A GPU-side copy of ``x``.
#[pyfunction]
pub fn copy(py: Python<'_>, x: &Bound<'_, PyAny>) -> PyT {
    let x = tensor_arg(py, x)?;
    gpu(py, || ops::copy(&x)).map(ok)
}

/// Overwrites every element of the tensor ``x`` with ``value``, in place.
#[pyfunction]
pub fn fill(py: Python<'_>, x: &Bound<'_, PyTensor>, value: &Bound<'_, PyAny>) -> PyResult<()> {
    let t = &x.get().t;
    let (v, _) = scalar_arg(py, value)?;
    gpu(py, || ops::fill(t, v))
}

/// Overwrites the tensor ``dst`` with ``src`` (one shape, dtype and device), in place: what
/// ``Tensor.__setitem__`` writes its result with (private; see kiln/_indexing.py).
#[pyfunction]
pub fn _assign(py: Python<'_>, dst: &Bound<'_, PyTensor>, src: &Bound<'_, PyTensor>) -> PyResult<()> {
    let (d, s) = (&dst.get().t, &src.get().t);
    gpu(py, || ops::assign(d, s))
}

/// ``x`` converted to ``dtype`` (float to int truncates toward zero, saturating as WGSL does).
#[pyfunction]
#[pyo3(signature = (x, dtype, /, *, copy=true))]
pub fn astype(py: Python<'_>, x: &Bound<'_, PyAny>, dtype: &Bound<'_, PyAny>, copy: bool) -> PyT {
    let x = tensor_arg(py, x)?;
    let d = required_dtype(py, dtype)?;
    if d == x.dtype() && !copy {
        return Ok(ok(x));
    }
    gpu(py, || ops::cast(&x, d)).map(ok)
}

// ---------------------------------------------------------------------------------------------
// elementwise

pub(crate) fn unary(py: Python<'_>, op: UnaryOp, x: &Bound<'_, PyAny>) -> PyT {
    let t;
    let x = match x.cast::<PyTensor>() {
        Ok(p) => &p.get().t,
        Err(_) => {
            t = to_tensor(py, x, None)?;
            &t
        }
    };
    gpu(py, || ops::unary(op, x)).map(ok)
}

/// One Python function per line: `name => UnaryOp variant, "docstring";` (used by ops_gen.rs,
/// which `kiln-gen` writes from kiln-core's unary table).
macro_rules! unary_fns {
    ($($name:ident => $op:ident, $doc:literal;)*) => {
        $(
            #[doc = $doc]
            #[pyfunction]
            pub fn $name(py: Python<'_>, x: &Bound<'_, PyAny>) -> $crate::ops::PyT {
                $crate::ops::unary(py, kiln_core::ops::UnaryOp::$op, x)
            }
        )*
    };
}
pub(crate) use unary_fns;

/// GELU: exact (erf) by default, the tanh approximation with ``approximate="tanh"``.
#[pyfunction]
#[pyo3(signature = (x, approximate="none"))]
pub fn gelu(py: Python<'_>, x: &Bound<'_, PyAny>, approximate: &str) -> PyT {
    match approximate {
        "none" => unary(py, UnaryOp::Gelu, x),
        "tanh" => unary(py, UnaryOp::GeluTanh, x),
        other => Err(invalid(py, format!("gelu: approximate must be \"none\" or \"tanh\", got {other:?}"))),
    }
}

/// `a OP b`, either of them a tensor, an array-like or a Python scalar.
pub(crate) fn binary(py: Python<'_>, op: BinaryOp, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyT {
    let not_taken =
        |o: &Bound<'_, PyAny>| invalid(py, format!("{}: cannot take an operand of type {}", op.name(), o.get_type()));
    match operand(py, a)? {
        Some(Operand::Tensor(ta)) => binary_op(py, op, &ta, b, false)?.map(ok).ok_or_else(|| not_taken(b)),
        Some(Operand::Scalar(..)) => match operand(py, b)? {
            Some(Operand::Tensor(tb)) => binary_op(py, op, &tb, a, true)?.map(ok).ok_or_else(|| not_taken(a)),
            Some(Operand::Scalar(..)) => {
                let ta = tensor_or_scalar_like(py, a, None)?;
                binary_op(py, op, &ta, b, false)?.map(ok).ok_or_else(|| not_taken(b))
            }
            None => Err(not_taken(b)),
        },
        None => Err(not_taken(a)),
    }
}

/// One Python function per line: `name => BinaryOp variant, "docstring";` (used by
/// ops_gen.rs, which `kiln-gen` writes from kiln-core's binary table).
macro_rules! binary_fns {
    ($($name:ident => $op:ident, $doc:literal;)*) => {
        $(
            #[doc = $doc]
            #[pyfunction]
            pub fn $name(py: Python<'_>, x1: &Bound<'_, PyAny>, x2: &Bound<'_, PyAny>) -> $crate::ops::PyT {
                $crate::ops::binary(py, kiln_core::ops::BinaryOp::$op, x1, x2)
            }
        )*
    };
}
pub(crate) use binary_fns;

/// One division-family op on a tensor and the other operand (`scalar_first`: that operand is
/// the left one); `None` when the operand is of a type the op does not take.
type DivisionOp = fn(Python<'_>, &Tensor, &Bound<'_, PyAny>, bool) -> PyResult<Option<Tensor>>;

/// `x1 OP x2` for the division family: either side a tensor, an array-like or a scalar.
fn division(py: Python<'_>, name: &str, f: DivisionOp, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyT {
    let not_taken =
        |o: &Bound<'_, PyAny>| invalid(py, format!("{name}: cannot take an operand of type {}", o.get_type()));
    match operand(py, a)? {
        Some(Operand::Tensor(ta)) => f(py, &ta, b, false)?.map(ok).ok_or_else(|| not_taken(b)),
        Some(Operand::Scalar(..)) => match operand(py, b)? {
            Some(Operand::Tensor(tb)) => f(py, &tb, a, true)?.map(ok).ok_or_else(|| not_taken(a)),
            Some(Operand::Scalar(..)) => {
                let ta = tensor_or_scalar_like(py, a, None)?;
                f(py, &ta, b, false)?.map(ok).ok_or_else(|| not_taken(b))
            }
            None => Err(not_taken(b)),
        },
        None => Err(not_taken(a)),
    }
}

/// ``x1 / x2``, numpy's true division, with numpy broadcasting. Integer operands (tensors or
/// Python ints) are converted to **float32** first and the result is float32: Kiln has no
/// float64, so integers beyond 2**24 lose precision where numpy's float64 result would not.
/// Division by zero gives ±inf, or NaN for 0 / 0, as numpy.
#[pyfunction]
pub fn divide(py: Python<'_>, x1: &Bound<'_, PyAny>, x2: &Bound<'_, PyAny>) -> PyT {
    division(py, "divide", true_divide_op, x1, x2)
}

/// ``x1 // x2``, numpy's floor division: the quotient rounded toward negative infinity.
/// Integers: ``x // 0 == 0`` as numpy gives. Floats: numpy's, from the exact ``fmod``
/// (``1 // 0.1 == 9``, ``-1 // inf == -1``, ``x // 0 == x / 0``).
#[pyfunction]
pub fn floor_divide(py: Python<'_>, x1: &Bound<'_, PyAny>, x2: &Bound<'_, PyAny>) -> PyT {
    division(py, "floor_divide", floor_divide_op, x1, x2)
}

/// ``x1 % x2``, numpy's remainder, with the sign of ``x2``. Integers: ``x % 0 == 0`` as numpy
/// gives. Floats: exact (from ``fmod``), NaN for ``x % 0`` and an infinite ``x``.
#[pyfunction]
pub fn remainder(py: Python<'_>, x1: &Bound<'_, PyAny>, x2: &Bound<'_, PyAny>) -> PyT {
    division(py, "remainder", remainder_op, x1, x2)
}

/// ``x1`` where ``condition`` is non-zero, else ``x2`` (all three broadcast; Python scalars
/// take the other branch's dtype).
#[pyfunction]
#[pyo3(name = "where")]
pub fn where_(py: Python<'_>, condition: &Bound<'_, PyAny>, x1: &Bound<'_, PyAny>, x2: &Bound<'_, PyAny>) -> PyT {
    let c = tensor_arg(py, condition)?;
    let (a, b) = match (operand(py, x1)?, operand(py, x2)?) {
        (Some(Operand::Tensor(a)), _) => {
            let d = a.dtype();
            (a, tensor_or_scalar_like(py, x2, Some(d))?)
        }
        (_, Some(Operand::Tensor(b))) => {
            let d = b.dtype();
            (tensor_or_scalar_like(py, x1, Some(d))?, b)
        }
        _ => {
            let a = tensor_or_scalar_like(py, x1, None)?;
            let d = a.dtype();
            (a, tensor_or_scalar_like(py, x2, Some(d))?)
        }
    };
    gpu(py, || ops::where_(&c, &a, &b)).map(ok)
}

// ---------------------------------------------------------------------------------------------
// reduce

// `sum` (with the Array API's `dtype=`) is in scan.rs; mean, max, min, all, any, argmax and
// argmin take their rows' Array API form (ops_gen.rs).

/// Variance over ``axis`` with ``correction`` (numpy's ``ddof``; either keyword) degrees of
/// freedom removed from the divisor.
#[pyfunction]
#[pyo3(signature = (x, /, *, axis=None, correction=None, keepdims=false, ddof=None))]
pub fn var(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    axis: Option<&Bound<'_, PyAny>>,
    correction: Option<Float>,
    keepdims: bool,
    ddof: Option<Float>,
) -> PyT {
    let x = tensor_arg(py, x)?;
    let c = crate::convert::correction_of(py, "var", correction, ddof)?;
    let axes = parse_axes(py, axis)?;
    gpu(py, || crate::convert::var_corrected(&x, axes.as_deref(), keepdims, c, false)).map(ok)
}

// ---------------------------------------------------------------------------------------------
// norm

// ---------------------------------------------------------------------------------------------
// movement

/// Same data, new shape (no copy); one dimension may be -1.
#[pyfunction]
#[pyo3(signature = (x, /, shape, *, copy=None))]
pub fn reshape(py: Python<'_>, x: &Bound<'_, PyAny>, shape: &Bound<'_, PyAny>, copy: Option<bool>) -> PyT {
    let x = tensor_arg(py, x)?;
    let s = parse_ishape(py, shape)?;
    let r = gpu(py, || ops::reshape(&x, &s))?;
    if copy == Some(true) {
        return gpu(py, || ops::copy(&r)).map(ok);
    }
    Ok(ok(r))
}

/// A sequence of ints (the generated permute_dims reads its axes with it).
pub(crate) fn axes_list(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Vec<isize>> {
    parse_axes(py, Some(obj))?.ok_or_else(|| invalid(py, "axes must be a sequence of ints"))
}

/// numpy ``transpose``: ``transpose(x)`` reverses the axes, ``transpose(x, axes)`` permutes
/// them; ``transpose(x, a0, a1)`` (two ints) swaps two axes, as kiln-core's ``transpose``.
#[pyfunction]
#[pyo3(signature = (x, *axes))]
pub fn transpose(py: Python<'_>, x: &Bound<'_, PyAny>, axes: &Bound<'_, PyTuple>) -> PyT {
    let x = tensor_arg(py, x)?;
    if axes.len() == 2 {
        if let (Ok(a0), Ok(a1)) = (axes.get_item(0)?.extract::<isize>(), axes.get_item(1)?.extract::<isize>()) {
            return gpu(py, || ops::transpose(&x, a0, a1)).map(ok);
        }
    }
    let a = match axes.len() {
        0 => (0..x.ndim() as isize).rev().collect(),
        1 if axes.get_item(0)?.is_none() => (0..x.ndim() as isize).rev().collect(),
        1 => axes_list(py, &axes.get_item(0)?)?,
        _ => axes_list(py, axes.as_any())?,
    };
    gpu(py, || ops::permute(&x, &a)).map(ok)
}

/// Swaps the last two axes.
#[pyfunction]
pub fn matrix_transpose(py: Python<'_>, x: &Bound<'_, PyAny>) -> PyT {
    let x = tensor_arg(py, x)?;
    gpu(py, || ops::transpose(&x, -2, -1)).map(ok)
}

/// Joins tensors along an existing ``axis`` (shapes must match elsewhere, dtypes must match);
/// ``axis=None`` joins them flattened (the Array API's rule).
#[pyfunction]
#[pyo3(signature = (arrays, /, *, axis=Some(Int(0))))]
pub fn concat(py: Python<'_>, arrays: &Bound<'_, PyAny>, axis: Option<Int<isize>>) -> PyT {
    let seq = arrays.cast::<PySequence>().map_err(|_| invalid(py, "concat takes a sequence of tensors"))?;
    let mut ts = Vec::with_capacity(seq.len()?);
    for item in seq.try_iter()? {
        let t = tensor_arg(py, &item?)?;
        // A reshape is a view (no copy): the flattened join costs what the axis-0 join does.
        ts.push(if axis.is_none() { t.reshape(&[-1]).map_err(|e| crate::errors::to_pyerr(py, e))? } else { t });
    }
    let axis = axis.map_or(0, |a| a.0);
    gpu(py, || {
        let refs: Vec<&Tensor> = ts.iter().collect();
        ops::concat(&refs, axis)
    })
    .map(ok)
}

/// ``x[start:stop:step]`` along ``axis`` (numpy clamping; ``step`` >= 1). A copy.
#[pyfunction]
#[pyo3(signature = (x, axis, start=None, stop=None, step=Int(1)))]
pub fn slice(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    axis: Int<isize>,
    start: Option<Int<isize>>,
    stop: Option<Int<isize>>,
    step: Int<isize>,
) -> PyT {
    let x = tensor_arg(py, x)?;
    let (axis, start, stop, step) = (axis.0, start.map(|v| v.0), stop.map(|v| v.0), step.0);
    let start = start.unwrap_or(0);
    let stop = stop.unwrap_or(isize::MAX);
    gpu(py, || ops::slice(&x, axis, start, stop, step)).map(ok)
}

/// numpy ``take``: elements at the 1-D int32/uint32 ``indices`` along ``axis`` (None: of the
/// flattened tensor). Out-of-range indices read as 0.
#[pyfunction]
#[pyo3(signature = (x, indices, /, *, axis=None))]
pub fn take(py: Python<'_>, x: &Bound<'_, PyAny>, indices: &Bound<'_, PyAny>, axis: Option<Int<isize>>) -> PyT {
    let x = tensor_arg(py, x)?;
    let axis = axis.map(|a| a.0);
    let idx = tensor_arg(py, indices)?;
    match axis {
        Some(a) => gpu(py, || ops::index_select(&x, a, &idx)).map(ok),
        None => gpu(py, || ops::index_select(&ops::reshape(&x, &[-1])?, 0, &idx)).map(ok),
    }
}

/// numpy ``take_along_axis`` (``gather`` with numpy's argument order).
#[pyfunction]
pub fn take_along_axis(py: Python<'_>, x: &Bound<'_, PyAny>, indices: &Bound<'_, PyAny>, axis: Int<isize>) -> PyT {
    let x = tensor_arg(py, x)?;
    let axis = axis.0;
    let idx = tensor_arg(py, indices)?;
    gpu(py, || ops::gather(&x, axis, &idx)).map(ok)
}

// ---------------------------------------------------------------------------------------------
// nn

// ---------------------------------------------------------------------------------------------
// quant: GGUF block formats ("q4_0", "q4_1", "q8_0", "q5_0", "q5_1", "q2_k" .. "q6_k")
// kept quantized on the GPU as u32 tensors

pub(crate) fn quant_format(format: &str) -> kiln_core::Result<ops::QuantFormat> {
    ops::QuantFormat::parse(format)
}

/// Uploads raw GGUF blocks (bytes-like, e.g. a slice of a memory-mapped .gguf file) of a
/// ``rows`` x ``cols`` matrix in ``format`` as the uint32 tensor the quant ops read.
#[pyfunction]
pub fn quant_from_bytes(py: Python<'_>, data: &[u8], format: &str, rows: Int<usize>, cols: Int<usize>) -> PyT {
    let (rows, cols) = (rows.0, cols.0);
    gpu(py, || ops::quant_from_bytes(&kiln_core::device()?, data, quant_format(format)?, rows, cols)).map(ok)
}

// ---------------------------------------------------------------------------------------------
// random

/// Uniform random numbers in ``[low, high)`` (counter-based: the same seed gives the same
/// numbers on every device).
#[pyfunction]
#[pyo3(signature = (shape, seed, low=Float(0.0), high=Float(1.0), dtype=None))]
pub fn random_uniform(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    seed: Int<u64>,
    low: Float,
    high: Float,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyT {
    let (seed, low, high) = (seed.0, low.0, high.0);
    let (s, d) = (parse_shape(py, shape)?, dtype_or(py, dtype, DType::F32)?);
    gpu(py, || ops::random_uniform(&s, d, seed, low, high)).map(ok)
}

/// Normal random numbers with ``mean`` and ``std`` (counter-based, device independent).
#[pyfunction]
#[pyo3(signature = (shape, seed, mean=Float(0.0), std=Float(1.0), dtype=None))]
pub fn random_normal(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    seed: Int<u64>,
    mean: Float,
    std: Float,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyT {
    let (seed, mean, std) = (seed.0, mean.0, std.0);
    let (s, d) = (parse_shape(py, shape)?, dtype_or(py, dtype, DType::F32)?);
    gpu(py, || ops::random_normal(&s, d, seed, mean, std)).map(ok)
}

// ---------------------------------------------------------------------------------------------
// conv / pool (generated from their rows: ops_gen.rs)

/// An int or an (h, w) pair; `default` for both when left out (None). The generated conv2d and
/// pools read their pairs with it.
pub(crate) fn pair_or(
    py: Python<'_>,
    name: &str,
    v: Option<&Bound<'_, PyAny>>,
    default: usize,
) -> PyResult<[usize; 2]> {
    match v.filter(|v| !v.is_none()) {
        Some(v) => parse_pair(py, name, v),
        None => Ok([default, default]),
    }
}
