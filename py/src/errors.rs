//! The one place where `kiln_core::Error` becomes a Python exception, and the one helper that
//! runs core work with the GIL released and panics caught.

use kiln_core::{Error, ErrorCode};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use std::panic::{catch_unwind, AssertUnwindSafe};

static ERRORS_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// `kiln_core::Error` → the matching `kiln.KilnError` subclass, with `.code` set.
pub fn to_pyerr(py: Python<'_>, e: Error) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let module = ERRORS_MODULE.get_or_try_init(py, || py.import("kiln._errors").map(Bound::unbind))?;
        // kiln/_errors.py picks the class from the code (KilnError for a code without its own).
        let cls = module.bind(py).getattr("_class_for")?.call1((e.code() as u32,))?.cast_into::<PyType>()?;
        let exc = cls.call1((e.message().to_string(), e.code() as u32))?;
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|err| err)
}

/// Runs `f` with the GIL released, turning a panic into `Error::Panic` and any error into the
/// matching Python exception.
#[inline]
pub fn gpu<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> kiln_core::Result<T> + Send,
{
    py.detach(|| catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(Error::from_panic(p))))
        .map_err(|e| to_pyerr(py, e))
}

pub fn invalid(py: Python<'_>, msg: impl Into<String>) -> PyErr {
    to_pyerr(py, Error::InvalidArgument(msg.into()))
}

pub fn dtype_err(py: Python<'_>, msg: impl Into<String>) -> PyErr {
    to_pyerr(py, Error::DTypeMismatch(msg.into()))
}

/// kiln-core's error table: `(code, NAME, meaning)` for every stable code, OK included
/// (kiln/_errors.py builds `CODE_NAMES` from it).
#[pyfunction]
pub fn error_codes() -> Vec<(u32, &'static str, &'static str)> {
    ErrorCode::ALL.iter().map(|&c| (c as u32, c.name(), c.meaning())).collect()
}

/// Test aid: raises the exception a core error with `code` would raise (the codes that no
/// input can provoke on a healthy device, such as DEVICE_LOST, are checked through this).
#[pyfunction]
pub fn _raise_error(py: Python<'_>, code: u32, message: String) -> PyResult<()> {
    match ErrorCode::from_u32(code).and_then(|c| Error::from_code(c, message)) {
        Some(e) => Err(to_pyerr(py, e)),
        None => Err(invalid(py, format!("no error has code {code}"))),
    }
}

/// Test aid: panics inside a core call, to check that the panic becomes `InternalError`.
#[pyfunction]
pub fn _panic(py: Python<'_>) -> PyResult<()> {
    gpu(py, || -> kiln_core::Result<()> { panic!("deliberate panic for the test suite") })
}
