//! The Array API's scans and statistics: `cumulative_sum`, `cumulative_prod`, `sum(dtype=)`,
//! `prod`, `std`, `diff`, `vecdot`, `tensordot` (numpy 2's names and keywords). Argument conversion around kiln-core calls.
//! Written by hand because the Array API's keywords are not the rows' (`axis=` for axes,
//! `correction=` for ddof, keyword-only parameters, `tensordot`'s two forms of axes).

use crate::convert::{correction_of, opt_tensor_arg, parse_axes, parse_dtype, tensor_arg, Float, Int};
use crate::errors::{gpu, invalid};
use crate::ops::PyT;
use crate::tensor::PyTensor;
use kiln_core::{ops, DType, Tensor};
use pyo3::prelude::*;
use pyo3::types::PyInt;

/// The scans: the same keywords (numpy 2's) around one kiln-core call each.
macro_rules! scan_fns {
    ($($name:ident, $doc:literal;)*) => {
        $(
            #[doc = $doc]
            #[pyfunction]
            #[pyo3(signature = (x, /, *, axis=None, dtype=None, include_initial=false))]
            pub fn $name(
                py: Python<'_>,
                x: &Bound<'_, PyAny>,
                axis: Option<Int<isize>>,
                dtype: Option<&Bound<'_, PyAny>>,
                include_initial: bool,
            ) -> PyT {
                let x = tensor_arg(py, x)?;
                let dtype = parse_dtype(py, dtype)?;
                let axis = axis.map(|a| a.0);
                gpu(py, || ops::$name(&x, axis, dtype, include_initial)).map(PyTensor::new)
            }
        )*
    };
}

scan_fns! {
    cumulative_sum, "Running sum along ``axis`` (required past 1-D), in ``dtype`` (None: x's; x is converted\n\
        first), with a leading 0 when ``include_initial``. Integer sums wrap as numpy's do.";
    cumulative_prod, "Running product along ``axis``, as ``cumulative_sum`` (a leading 1 when ``include_initial``).";
}

/// The reductions with the Array API's ``dtype=``: the same keywords around one kiln-core call
/// each (`ops::prod` takes the dtype itself; `sum_in` casts first).
macro_rules! dtype_reduce_fns {
    ($($name:ident => $op:path, $doc:literal;)*) => {
        $(
            #[doc = $doc]
            #[pyfunction]
            #[pyo3(signature = (x, /, *, axis=None, dtype=None, keepdims=false))]
            pub fn $name(
                py: Python<'_>,
                x: &Bound<'_, PyAny>,
                axis: Option<&Bound<'_, PyAny>>,
                dtype: Option<&Bound<'_, PyAny>>,
                keepdims: bool,
            ) -> PyT {
                let x = tensor_arg(py, x)?;
                let dtype = parse_dtype(py, dtype)?;
                let axes = parse_axes(py, axis)?;
                gpu(py, || $op(&x, axes.as_deref(), keepdims, dtype)).map(PyTensor::new)
            }
        )*
    };
}

fn sum_in(x: &Tensor, axes: Option<&[isize]>, keepdims: bool, dtype: Option<DType>) -> kiln_core::Result<Tensor> {
    match dtype {
        Some(d) if d != x.dtype() => ops::sum(&ops::cast(x, d)?, axes, keepdims),
        _ => ops::sum(x, axes, keepdims),
    }
}

dtype_reduce_fns! {
    sum => sum_in, "Sum over ``axis`` (None: all axes; an int or a tuple) in ``dtype`` (None: x's own, which for\n\
        int32 and uint32 is the Array API's default integer of that signedness; x is converted first).";
    prod => ops::prod, "Product over ``axis`` in ``dtype`` (as ``sum``); integer products wrap, an empty axis gives 1.";
}

/// Standard deviation over ``axis`` with ``correction`` (numpy's ``ddof``; either keyword).
#[pyfunction]
#[pyo3(signature = (x, /, *, axis=None, correction=None, keepdims=false, ddof=None))]
pub fn std(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    axis: Option<&Bound<'_, PyAny>>,
    correction: Option<Float>,
    keepdims: bool,
    ddof: Option<Float>,
) -> PyT {
    let x = tensor_arg(py, x)?;
    let c = correction_of(py, "std", correction, ddof)?;
    let axes = parse_axes(py, axis)?;
    gpu(py, || crate::convert::var_corrected(&x, axes.as_deref(), keepdims, c, true)).map(PyTensor::new)
}

/// The ``n``-th forward difference along ``axis`` (``x[1:] - x[:-1]``, ``n`` times), with
/// ``prepend`` / ``append`` (x's dtype and shape but for the axis) joined at either end first.
/// ``axis`` defaults to -1 and ``n`` to 1.
#[pyfunction]
#[pyo3(signature = (x, /, *, axis=None, n=None, prepend=None, append=None))]
pub fn diff(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    axis: Option<Int<isize>>,
    n: Option<Int<usize>>,
    prepend: Option<&Bound<'_, PyAny>>,
    append: Option<&Bound<'_, PyAny>>,
) -> PyT {
    let x = tensor_arg(py, x)?;
    let (p, a) = (opt_tensor_arg(py, prepend)?, opt_tensor_arg(py, append)?);
    let (axis, n) = (axis.map_or(-1, |a| a.0), n.map_or(1, |n| n.0));
    gpu(py, || ops::diff(&x, axis, n, p.as_ref(), a.as_ref())).map(PyTensor::new)
}

/// Dot product of the vectors along ``axis`` (default -1) with broadcasting: ``sum(x1 * x2, axis)``.
#[pyfunction]
#[pyo3(signature = (x1, x2, /, *, axis=None))]
pub fn vecdot(py: Python<'_>, x1: &Bound<'_, PyAny>, x2: &Bound<'_, PyAny>, axis: Option<Int<isize>>) -> PyT {
    let (a, b) = (tensor_arg(py, x1)?, tensor_arg(py, x2)?);
    let axis = axis.map_or(-1, |a| a.0);
    gpu(py, || ops::vecdot(&a, &b, axis)).map(PyTensor::new)
}

/// numpy's ``tensordot``: ``axes`` an int n (the last n axes of x1 with the first n of x2,
/// default 2) or a pair of sequences (or of ints) naming the paired axes.
#[pyfunction]
#[pyo3(signature = (x1, x2, /, *, axes=None))]
pub fn tensordot(py: Python<'_>, x1: &Bound<'_, PyAny>, x2: &Bound<'_, PyAny>, axes: Option<&Bound<'_, PyAny>>) -> PyT {
    let (a, b) = (tensor_arg(py, x1)?, tensor_arg(py, x2)?);
    let axes = match axes {
        None => ops::TensordotAxes::Count(2),
        Some(v) if v.is_instance_of::<PyInt>() => {
            let n: i64 = v.extract()?;
            if n < 0 {
                return Err(invalid(py, format!("tensordot: axes must be >= 0, got {n}")));
            }
            ops::TensordotAxes::Count(n as usize)
        }
        Some(v) => {
            let bad = || invalid(py, format!("tensordot: axes must be an int or a pair of sequences of ints, got {v}"));
            let (l1, l2): (Bound<'_, PyAny>, Bound<'_, PyAny>) = v.extract().map_err(|_| bad())?;
            let list = |l: &Bound<'_, PyAny>| -> PyResult<Vec<isize>> {
                if let Ok(i) = l.extract::<isize>() {
                    return Ok(vec![i]);
                }
                l.extract::<Vec<isize>>().map_err(|_| bad())
            };
            ops::TensordotAxes::Pairs(list(&l1)?, list(&l2)?)
        }
    };
    gpu(py, || ops::tensordot(&a, &b, &axes)).map(PyTensor::new)
}
