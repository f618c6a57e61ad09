//! Searching, sorting and set functions: argument conversion around kiln-core's ops/sort.rs,
//! search.rs and sets.rs. The Array API's signatures, type promotion of two operands and the
//! named tuples of unique_* are in kiln/_sorting.py. Written by hand because the Array API's
//! signatures are not the rows' (keyword-only `axis=`, `stable=`, `side=`; a tuple per
//! dimension); topk, count_nonzero and unique_values, whose Python form is their row's, and the
//! private `_searchsorted` and `_isin` that kiln/_sorting.py wraps are generated (ops_gen.rs).

use crate::convert::{tensor_arg, Int};
use crate::errors::{gpu, invalid};
use crate::tensor::PyTensor;
use kiln_core::ops;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

type PyT = PyResult<PyTensor>;

/// ``x`` sorted along ``axis``, stable (``stable`` is accepted; every Kiln sort is stable).
/// NaNs sort last; ``descending=True`` is the exact reverse order with ties kept in index order
/// (so NaNs first), as array-api-strict.
#[pyfunction]
#[pyo3(signature = (x, /, *, axis=Int(-1), descending=false, stable=true))]
pub fn sort(py: Python<'_>, x: &Bound<'_, PyAny>, axis: Int<isize>, descending: bool, stable: bool) -> PyT {
    let _ = stable;
    let x = tensor_arg(py, x)?;
    gpu(py, || ops::sort(&x, axis.0, descending)).map(PyTensor::new)
}

/// The int32 indices that sort ``x`` along ``axis`` (stable; see ``sort``).
#[pyfunction]
#[pyo3(signature = (x, /, *, axis=Int(-1), descending=false, stable=true))]
pub fn argsort(py: Python<'_>, x: &Bound<'_, PyAny>, axis: Int<isize>, descending: bool, stable: bool) -> PyT {
    let _ = stable;
    let x = tensor_arg(py, x)?;
    gpu(py, || ops::argsort(&x, axis.0, descending)).map(PyTensor::new)
}

/// numpy ``nonzero``: a tuple of int32 index arrays, one per dimension. The count of non-zero
/// elements is read back to the host (the result's size depends on the data).
#[pyfunction]
pub fn nonzero<'py>(py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let x = tensor_arg(py, x)?;
    if x.ndim() == 0 {
        return Err(invalid(py, "nonzero: x must have at least one dimension (got 0-D)"));
    }
    let ts = gpu(py, || ops::nonzero(&x))?;
    PyTuple::new(py, ts.into_iter().map(PyTensor::new))
}

/// (values, indices, inverse_indices, counts); kiln._sorting.unique_all names them.
#[pyfunction]
pub fn _unique_all<'py>(py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let x = tensor_arg(py, x)?;
    let u = gpu(py, || ops::unique_all(&x))?;
    PyTuple::new(py, [u.values, u.indices, u.inverse_indices, u.counts].into_iter().map(PyTensor::new))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sort, m)?)?;
    m.add_function(wrap_pyfunction!(argsort, m)?)?;
    m.add_function(wrap_pyfunction!(nonzero, m)?)?;
    m.add_function(wrap_pyfunction!(_unique_all, m)?)?;
    Ok(())
}
