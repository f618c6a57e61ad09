//! The scans: the Array API's `cumulative_sum` and `cumulative_prod` (numpy 2's names and
//! keywords). Argument conversion around one kiln-core call each.

use crate::convert::{parse_dtype, tensor_arg, Int};
use crate::errors::gpu;
use crate::ops::PyT;
use crate::tensor::PyTensor;
use kiln_core::ops;
use pyo3::prelude::*;

/// Running sum along ``axis`` (required past 1-D), in ``dtype`` (None: x's; x is converted
/// first), with a leading 0 when ``include_initial``. Integer sums wrap as numpy's do.
#[pyfunction]
#[pyo3(signature = (x, /, *, axis=None, dtype=None, include_initial=false))]
pub fn cumulative_sum(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    axis: Option<Int<isize>>,
    dtype: Option<&Bound<'_, PyAny>>,
    include_initial: bool,
) -> PyT {
    let x = tensor_arg(py, x)?;
    let dtype = parse_dtype(py, dtype)?;
    let axis = axis.map(|a| a.0);
    gpu(py, || ops::cumulative_sum(&x, axis, dtype, include_initial)).map(PyTensor::new)
}

/// Running product along ``axis``, as ``cumulative_sum`` (a leading 1 when ``include_initial``).
#[pyfunction]
#[pyo3(signature = (x, /, *, axis=None, dtype=None, include_initial=false))]
pub fn cumulative_prod(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    axis: Option<Int<isize>>,
    dtype: Option<&Bound<'_, PyAny>>,
    include_initial: bool,
) -> PyT {
    let x = tensor_arg(py, x)?;
    let dtype = parse_dtype(py, dtype)?;
    let axis = axis.map(|a| a.0);
    gpu(py, || ops::cumulative_prod(&x, axis, dtype, include_initial)).map(PyTensor::new)
}
