//! The one place where `kiln_core::Error` becomes a Python exception, and the one helper that
//! runs core work with the GIL released and panics caught.

use kiln_core::{Error, ErrorCode};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The exception class (defined in `kiln/_errors.py`) for each stable error code.
fn class_name(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::InvalidArgument | ErrorCode::NullPointer | ErrorCode::Ok => "InvalidArgumentError",
        ErrorCode::ShapeMismatch => "ShapeError",
        ErrorCode::DTypeMismatch => "DTypeError",
        ErrorCode::OutOfMemory => "OutOfMemoryError",
        ErrorCode::QuotaExceeded => "QuotaExceededError",
        ErrorCode::Shader => "ShaderError",
        ErrorCode::DeviceLost => "DeviceLostError",
        ErrorCode::NoAdapter => "NoAdapterError",
        ErrorCode::Timeout => "TimeoutError",
        ErrorCode::Unsupported => "UnsupportedError",
        ErrorCode::Panic | ErrorCode::Internal => "InternalError",
    }
}

static ERRORS_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// `kiln_core::Error` → the matching `kiln.KilnError` subclass, with `.code` set.
pub fn to_pyerr(py: Python<'_>, e: Error) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let module = ERRORS_MODULE.get_or_try_init(py, || py.import("kiln._errors").map(Bound::unbind))?;
        let cls = module.bind(py).getattr(class_name(e.code()))?.cast_into::<PyType>()?;
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

/// Maps a core result without releasing the GIL (for cheap host-only calls).
#[inline]
pub fn check<T>(py: Python<'_>, r: kiln_core::Result<T>) -> PyResult<T> {
    r.map_err(|e| to_pyerr(py, e))
}

pub fn invalid(py: Python<'_>, msg: impl Into<String>) -> PyErr {
    to_pyerr(py, Error::InvalidArgument(msg.into()))
}

pub fn dtype_err(py: Python<'_>, msg: impl Into<String>) -> PyErr {
    to_pyerr(py, Error::DTypeMismatch(msg.into()))
}

/// Test aid: raises the exception a core error with `code` would raise (the codes that no
/// input can provoke on a healthy device, such as DEVICE_LOST, are checked through this).
#[pyfunction]
pub fn _raise_error(py: Python<'_>, code: u32, message: String) -> PyResult<()> {
    let e = match code {
        1 => Error::InvalidArgument(message),
        2 => Error::NullPointer(message),
        3 => Error::ShapeMismatch(message),
        4 => Error::DTypeMismatch(message),
        5 => Error::OutOfMemory(message),
        6 => Error::QuotaExceeded(message),
        7 => Error::Shader(message),
        8 => Error::DeviceLost(message),
        9 => Error::NoAdapter(message),
        10 => Error::Timeout(message),
        11 => Error::Unsupported(message),
        12 => Error::Panic(message),
        13 => Error::Internal(message),
        _ => return Err(invalid(py, format!("unknown error code {code}"))),
    };
    Err(to_pyerr(py, e))
}

/// Test aid: panics inside a core call, to check that the panic becomes `InternalError`.
#[pyfunction]
pub fn _panic(py: Python<'_>) -> PyResult<()> {
    gpu(py, || -> kiln_core::Result<()> { panic!("deliberate panic for the test suite") })
}
