//! The Array API's statistics: `sum(dtype=)`, `std`, `tensordot` (numpy 2's names and
//! keywords). Argument conversion around kiln-core calls.
//! Written by hand because the Array API's keywords are not the rows' (`axis=` for axes,
//! `correction=` for ddof, keyword-only parameters, `tensordot`'s two forms of axes).

use crate::convert::{correction_of, parse_axes, parse_dtype, tensor_arg, Float};
use crate::errors::{gpu, invalid};
use crate::ops::PyT;
use crate::tensor::PyTensor;
use kiln_core::ops;
use pyo3::prelude::*;
use pyo3::types::PyInt;

// cumulative_sum, cumulative_prod, prod, diff and vecdot take their rows' Array API form
// (ops_gen.rs).

/// Sum over ``axis`` (None: all axes; an int or a tuple) in ``dtype`` (None: x's own, which for
/// int32 and uint32 is the Array API's default integer of that signedness; x is converted first).
#[pyfunction]
#[pyo3(signature = (x, /, *, axis=None, dtype=None, keepdims=false))]
pub fn sum(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    axis: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    keepdims: bool,
) -> PyT {
    let x = tensor_arg(py, x)?;
    let dtype = parse_dtype(py, dtype)?;
    let axes = parse_axes(py, axis)?;
    gpu(py, || match dtype {
        // The core sum has no dtype: x is converted first.
        Some(d) if d != x.dtype() => ops::sum(&ops::cast(&x, d)?, axes.as_deref(), keepdims),
        _ => ops::sum(&x, axes.as_deref(), keepdims),
    })
    .map(PyTensor::new)
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
