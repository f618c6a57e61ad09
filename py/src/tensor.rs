//! `kiln.Tensor`: a handle on a kiln-core tensor (frozen, so it is safe from any thread).

use crate::classes::PyDevice;
pub use crate::classes::PyTensor;
use crate::convert::{
    np_dtype, numpy, operand, parse_dtype, parse_ishape, required_dtype, to_numpy, to_tensor, Int, Operand,
};
use crate::errors::{gpu, invalid};
use kiln_core::ops::{self, BinaryOp, UnaryOp};
use kiln_core::{DType, Tensor};
use pyo3::basic::CompareOp;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// `a OP b` where `a` is this tensor and `b` any operand; NotImplemented when `b` is foreign.
pub fn binary_op(
    py: Python<'_>,
    op: BinaryOp,
    a: &Tensor,
    b: &Bound<'_, PyAny>,
    reflected: bool,
) -> PyResult<Option<Tensor>> {
    match operand(py, b)? {
        None => Ok(None),
        Some(Operand::Tensor(b)) => {
            let (x, y) = if reflected { (&b, a) } else { (a, &b) };
            gpu(py, || ops::binary(op, x, y)).map(Some)
        }
        // kiln-core checks the scalar against a's dtype (DType::check_scalar): NaN, 1.5, 1e30
        // or 2**40 with an int32 tensor is INVALID_ARGUMENT, never truncated or wrapped.
        Some(Operand::Scalar(v, _)) => gpu(py, || ops::binary_scalar(op, a, v, reflected)).map(Some),
    }
}

type ReduceFn = fn(&Tensor, Option<&[isize]>, bool) -> kiln_core::Result<Tensor>;

/// A reduction over the axes given as Python would (None, an int or a tuple): shared by the
/// `Tensor` methods and the module functions (ops.rs).
pub fn reduce_with(
    py: Python<'_>,
    x: &Tensor,
    axis: Option<&Bound<'_, PyAny>>,
    keepdims: bool,
    f: ReduceFn,
) -> PyResult<PyTensor> {
    let axes = crate::convert::parse_axes(py, axis)?;
    gpu(py, || f(x, axes.as_deref(), keepdims)).map(PyTensor::new)
}

/// An integer tensor as float32 (true division's operands); float tensors as they are.
fn as_float(t: &Tensor) -> kiln_core::Result<Tensor> {
    if t.dtype().is_float() {
        Ok(t.clone())
    } else {
        ops::cast(t, DType::F32)
    }
}

/// `a / b` (`b / a` when `reflected`), numpy's true division: integer tensors are divided as
/// float32 (Kiln has no float64), so `-7 / 2 == -3.5` and `1 / 0 == inf`.
pub fn true_divide_op(py: Python<'_>, a: &Tensor, b: &Bound<'_, PyAny>, reflected: bool) -> PyResult<Option<Tensor>> {
    match operand(py, b)? {
        None => Ok(None),
        Some(Operand::Tensor(b)) => gpu(py, || {
            let (a, b) = (as_float(a)?, as_float(&b)?);
            let (x, y) = if reflected { (&b, &a) } else { (&a, &b) };
            ops::binary(BinaryOp::Div, x, y)
        })
        .map(Some),
        Some(Operand::Scalar(v, _)) => {
            gpu(py, || ops::binary_scalar(BinaryOp::Div, &as_float(a)?, v, reflected)).map(Some)
        }
    }
}

/// `a OP b` (`b OP a` when `reflected`) for kiln-core's floor_divide and remainder, which are
/// numpy's on every dtype (floats from the exact fmod, integers with `x // 0 == x % 0 == 0`).
fn floor_family(
    py: Python<'_>,
    op: BinaryOp,
    a: &Tensor,
    b: &Bound<'_, PyAny>,
    reflected: bool,
) -> PyResult<Option<Tensor>> {
    match operand(py, b)? {
        None => Ok(None),
        Some(Operand::Tensor(b)) => {
            let (x, y) = if reflected { (&b, a) } else { (a, &b) };
            gpu(py, || ops::binary(op, x, y)).map(Some)
        }
        Some(Operand::Scalar(v, _)) => gpu(py, || ops::binary_scalar(op, a, v, reflected)).map(Some),
    }
}

/// `a // b` (`b // a` when `reflected`), numpy's floor division (kiln-core's floor_divide).
pub fn floor_divide_op(py: Python<'_>, a: &Tensor, b: &Bound<'_, PyAny>, reflected: bool) -> PyResult<Option<Tensor>> {
    floor_family(py, BinaryOp::FloorDivide, a, b, reflected)
}

/// `a % b` (`b % a` when `reflected`), numpy's remainder with the sign of the divisor
/// (kiln-core's remainder).
pub fn remainder_op(py: Python<'_>, a: &Tensor, b: &Bound<'_, PyAny>, reflected: bool) -> PyResult<Option<Tensor>> {
    floor_family(py, BinaryOp::Remainder, a, b, reflected)
}

fn wrap(py: Python<'_>, r: Option<Tensor>) -> PyResult<Py<PyAny>> {
    match r {
        Some(t) => Ok(Py::new(py, PyTensor::new(t))?.into_any()),
        None => Ok(py.NotImplemented()),
    }
}

/// A shape written as Python writes a tuple: `()`, `(3,)`, `(2, 3)`.
fn py_tuple(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    }
}

fn scalar_value(py: Python<'_>, t: &Tensor, what: &str) -> PyResult<Py<PyAny>> {
    if t.numel() != 1 {
        return Err(invalid(
            py,
            format!("only a tensor with one element can be converted to {what}; this one has shape {:?}", t.shape()),
        ));
    }
    let arr = to_numpy(py, t)?;
    Ok(arr.call_method0("item")?.unbind())
}

#[pymethods]
impl PyTensor {
    /// Shape as a tuple of ints.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.t.shape())
    }

    /// The element type, as a numpy dtype (float32, float16, int32 or uint32).
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(np_dtype(py, self.t.dtype())?.into_any())
    }

    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.t.ndim()
    }

    /// Number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.t.numel()
    }

    /// Size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.t.nbytes()
    }

    /// Size in bytes of one element.
    #[getter]
    fn itemsize(&self) -> usize {
        self.t.dtype().size()
    }

    /// The device (adapter) the tensor lives on.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice::from_info(self.t.device().info().clone())
    }

    /// The axes reversed (numpy's ``.T``).
    #[getter(T)]
    fn transposed(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let n = self.t.ndim() as isize;
        let axes: Vec<isize> = (0..n).rev().collect();
        gpu(py, || ops::permute(&self.t, &axes)).map(PyTensor::new)
    }

    /// The last two axes swapped (the array API's ``.mT``).
    #[getter(mT)]
    fn matrix_transposed(&self, py: Python<'_>) -> PyResult<PyTensor> {
        if self.t.ndim() < 2 {
            return Err(invalid(py, format!("mT needs at least 2 dimensions, the tensor has {}", self.t.ndim())));
        }
        gpu(py, || ops::transpose(&self.t, -2, -1)).map(PyTensor::new)
    }

    /// Reads the tensor back into a new numpy array (one copy; waits for queued work).
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_numpy(py, &self.t)
    }

    /// numpy's conversion protocol: ``numpy.asarray(t)``.
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if copy == Some(false) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "a kiln tensor lives on the GPU: numpy cannot view it without a copy",
            ));
        }
        let arr = to_numpy(py, &self.t)?;
        match dtype {
            Some(d) if !d.is_none() => arr.call_method1("astype", (d,)),
            _ => Ok(arr),
        }
    }

    /// The raw little-endian bytes (one readback).
    fn tobytes(&self, py: Python<'_>) -> PyResult<Vec<u8>> {
        gpu(py, || self.t.to_bytes())
    }

    /// The single value of a one-element tensor as a Python scalar.
    fn item(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        scalar_value(py, &self.t, "a Python scalar")
    }

    /// The values as (nested) Python lists.
    fn tolist(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(to_numpy(py, &self.t)?.call_method0("tolist")?.unbind())
    }

    /// The tensor on ``device`` (a ``kiln.Device``, e.g. ``kiln.devices()[1]``): itself where
    /// it lives there already, else a copy through host memory (two devices share no buffers).
    /// Ops on tensors of two devices raise InvalidArgumentError: move one first.
    #[pyo3(signature = (device, /, *, stream=None))]
    fn to_device(
        &self,
        py: Python<'_>,
        device: &Bound<'_, PyAny>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        if stream.is_some_and(|s| !s.is_none()) {
            return Err(invalid(py, "to_device: stream= is not supported (Kiln orders work per device itself)"));
        }
        let dev = device.cast::<PyDevice>().map_err(|_| {
            invalid(py, format!("to_device takes a kiln.Device (kiln.devices()[i]), got {}", device.get_type()))
        })?;
        let dev = dev.get().clone();
        gpu(py, || self.t.to_device(&dev.open()?)).map(PyTensor::new)
    }

    /// A copy converted to ``dtype`` (float to int truncates toward zero, saturating).
    #[pyo3(signature = (dtype, copy=true))]
    fn astype(&self, py: Python<'_>, dtype: &Bound<'_, PyAny>, copy: bool) -> PyResult<PyTensor> {
        let d = required_dtype(py, dtype)?;
        if d == self.t.dtype() && !copy {
            return Ok(PyTensor::new(self.t.clone()));
        }
        gpu(py, || ops::cast(&self.t, d)).map(PyTensor::new)
    }

    /// Same data, new shape (no copy); one dimension may be -1. ``t.reshape(2, 3)`` and
    /// ``t.reshape((2, 3))`` both work.
    #[pyo3(signature = (*shape))]
    fn reshape(&self, py: Python<'_>, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let s =
            if shape.len() == 1 { parse_ishape(py, &shape.get_item(0)?)? } else { parse_ishape(py, shape.as_any())? };
        gpu(py, || ops::reshape(&self.t, &s)).map(PyTensor::new)
    }

    /// A GPU-side copy.
    fn copy(&self, py: Python<'_>) -> PyResult<PyTensor> {
        gpu(py, || ops::copy(&self.t)).map(PyTensor::new)
    }

    /// A 1-D view of the same data.
    fn flatten(&self, py: Python<'_>) -> PyResult<PyTensor> {
        gpu(py, || ops::reshape(&self.t, &[-1])).map(PyTensor::new)
    }

    fn __len__(&self) -> PyResult<usize> {
        self.t.shape().first().copied().ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("len() of a 0-d tensor"))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let arr = to_numpy(py, &self.t)?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("separator", ", ")?;
        kwargs.set_item("prefix", "kiln.Tensor(")?;
        let body: String = numpy(py)?.getattr("array2string")?.call((arr,), Some(&kwargs))?.extract()?;
        Ok(format!(
            "kiln.Tensor({body}, dtype={}, shape={})",
            crate::convert::np_name(self.t.dtype()),
            py_tuple(self.t.shape())
        ))
    }

    fn __str__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(to_numpy(py, &self.t)?.str()?.to_string())
    }

    fn __bool__(&self, py: Python<'_>) -> PyResult<bool> {
        scalar_value(py, &self.t, "bool")?.bind(py).is_truthy()
    }

    fn __float__(&self, py: Python<'_>) -> PyResult<f64> {
        scalar_value(py, &self.t, "float")?.bind(py).extract::<f64>()
    }

    fn __int__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(scalar_value(py, &self.t, "int")?.bind(py).call_method0("__int__")?.unbind())
    }

    fn __index__(&self, py: Python<'_>) -> PyResult<i64> {
        if self.t.dtype().is_float() {
            return Err(pyo3::exceptions::PyTypeError::new_err("only integer tensors can be used as an index"));
        }
        scalar_value(py, &self.t, "an index")?.bind(py).extract::<i64>()
    }

    /// ``~x``: bitwise not of an integer tensor, logical not of a bool one (numpy's ``~``).
    fn __invert__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        gpu(py, || ops::unary(UnaryOp::BitwiseInvert, &self.t)).map(PyTensor::new)
    }

    fn __and__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::BitwiseAnd, &self.t, other, false)?)
    }

    fn __rand__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::BitwiseAnd, &self.t, other, true)?)
    }

    fn __or__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::BitwiseOr, &self.t, other, false)?)
    }

    fn __ror__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::BitwiseOr, &self.t, other, true)?)
    }

    fn __xor__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::BitwiseXor, &self.t, other, false)?)
    }

    fn __rxor__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::BitwiseXor, &self.t, other, true)?)
    }

    fn __lshift__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::BitwiseLeftShift, &self.t, other, false)?)
    }

    fn __rlshift__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::BitwiseLeftShift, &self.t, other, true)?)
    }

    fn __rshift__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::BitwiseRightShift, &self.t, other, false)?)
    }

    fn __rrshift__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::BitwiseRightShift, &self.t, other, true)?)
    }

    fn __neg__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        gpu(py, || ops::unary(UnaryOp::Neg, &self.t)).map(PyTensor::new)
    }

    fn __pos__(&self) -> PyTensor {
        PyTensor::new(self.t.clone())
    }

    fn __abs__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        gpu(py, || ops::unary(UnaryOp::Abs, &self.t)).map(PyTensor::new)
    }

    fn __add__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::Add, &self.t, other, false)?)
    }

    fn __radd__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::Add, &self.t, other, true)?)
    }

    fn __sub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::Sub, &self.t, other, false)?)
    }

    fn __rsub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::Sub, &self.t, other, true)?)
    }

    fn __mul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::Mul, &self.t, other, false)?)
    }

    fn __rmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, binary_op(py, BinaryOp::Mul, &self.t, other, true)?)
    }

    /// True division (numpy's ``/``): integer tensors give float32 (Kiln has no float64).
    fn __truediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, true_divide_op(py, &self.t, other, false)?)
    }

    fn __rtruediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, true_divide_op(py, &self.t, other, true)?)
    }

    /// Floor division (numpy's ``//``) of integer tensors; ``x // 0 == 0``.
    fn __floordiv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, floor_divide_op(py, &self.t, other, false)?)
    }

    fn __rfloordiv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, floor_divide_op(py, &self.t, other, true)?)
    }

    /// Remainder (numpy's ``%``) of integer tensors; ``x % 0 == 0``.
    fn __mod__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, remainder_op(py, &self.t, other, false)?)
    }

    fn __rmod__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, remainder_op(py, &self.t, other, true)?)
    }

    fn __pow__(&self, py: Python<'_>, other: &Bound<'_, PyAny>, modulo: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if !modulo.is_none() {
            return Ok(py.NotImplemented());
        }
        wrap(py, binary_op(py, BinaryOp::Pow, &self.t, other, false)?)
    }

    fn __rpow__(&self, py: Python<'_>, other: &Bound<'_, PyAny>, modulo: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if !modulo.is_none() {
            return Ok(py.NotImplemented());
        }
        wrap(py, binary_op(py, BinaryOp::Pow, &self.t, other, true)?)
    }

    fn __matmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        match operand(py, other)? {
            Some(Operand::Tensor(b)) => wrap(py, Some(gpu(py, || ops::matmul(&self.t, &b))?)),
            _ => Ok(py.NotImplemented()),
        }
    }

    fn __rmatmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        match operand(py, other)? {
            Some(Operand::Tensor(a)) => wrap(py, Some(gpu(py, || ops::matmul(&a, &self.t))?)),
            _ => Ok(py.NotImplemented()),
        }
    }

    fn __richcmp__(&self, py: Python<'_>, other: &Bound<'_, PyAny>, op: CompareOp) -> PyResult<Py<PyAny>> {
        let op = match op {
            CompareOp::Lt => BinaryOp::Lt,
            CompareOp::Le => BinaryOp::Le,
            CompareOp::Eq => BinaryOp::Eq,
            CompareOp::Ne => BinaryOp::Ne,
            CompareOp::Gt => BinaryOp::Gt,
            CompareOp::Ge => BinaryOp::Ge,
        };
        wrap(py, binary_op(py, op, &self.t, other, false)?)
    }

    /// Tensors compare elementwise, so they are not hashable.
    #[classattr]
    const __hash__: Option<Py<PyAny>> = None;

    /// Makes numpy's binary operators defer to Kiln (``ndarray + Tensor`` gives a Tensor).
    #[classattr]
    #[allow(non_upper_case_globals)]
    const __array_priority__: f64 = 1000.0;

    /// The array API namespace of Kiln tensors (the ``kiln`` module); ``api_version`` may name
    /// a standard version it follows (2021.12 to 2024.12), anything else is an error.
    #[pyo3(signature = (api_version=None))]
    fn __array_namespace__<'py>(&self, py: Python<'py>, api_version: Option<&str>) -> PyResult<Bound<'py, PyModule>> {
        if let Some(v) = api_version.filter(|v| !["2021.12", "2022.12", "2023.12", "2024.12"].contains(v)) {
            return Err(invalid(
                py,
                format!("__array_namespace__: api_version {v:?} is not one Kiln follows (2021.12 to 2024.12)"),
            ));
        }
        py.import("kiln")
    }

    /// Sum over ``axis`` (see ``kiln.sum``).
    #[pyo3(signature = (axis=None, keepdims=false))]
    fn sum(&self, py: Python<'_>, axis: Option<&Bound<'_, PyAny>>, keepdims: bool) -> PyResult<PyTensor> {
        reduce_with(py, &self.t, axis, keepdims, ops::sum)
    }

    /// Mean over ``axis`` (see ``kiln.mean``).
    #[pyo3(signature = (axis=None, keepdims=false))]
    fn mean(&self, py: Python<'_>, axis: Option<&Bound<'_, PyAny>>, keepdims: bool) -> PyResult<PyTensor> {
        reduce_with(py, &self.t, axis, keepdims, ops::mean)
    }

    /// Maximum over ``axis`` (see ``kiln.max``).
    #[pyo3(signature = (axis=None, keepdims=false))]
    fn max(&self, py: Python<'_>, axis: Option<&Bound<'_, PyAny>>, keepdims: bool) -> PyResult<PyTensor> {
        reduce_with(py, &self.t, axis, keepdims, ops::max)
    }

    /// Minimum over ``axis`` (see ``kiln.min``).
    #[pyo3(signature = (axis=None, keepdims=false))]
    fn min(&self, py: Python<'_>, axis: Option<&Bound<'_, PyAny>>, keepdims: bool) -> PyResult<PyTensor> {
        reduce_with(py, &self.t, axis, keepdims, ops::min)
    }

    /// Whether every element over ``axis`` is true (see ``kiln.all``).
    #[pyo3(signature = (axis=None, keepdims=false))]
    fn all(&self, py: Python<'_>, axis: Option<&Bound<'_, PyAny>>, keepdims: bool) -> PyResult<PyTensor> {
        reduce_with(py, &self.t, axis, keepdims, ops::all)
    }

    /// Whether some element over ``axis`` is true (see ``kiln.any``).
    #[pyo3(signature = (axis=None, keepdims=false))]
    fn any(&self, py: Python<'_>, axis: Option<&Bound<'_, PyAny>>, keepdims: bool) -> PyResult<PyTensor> {
        reduce_with(py, &self.t, axis, keepdims, ops::any)
    }

    /// Index of the maximum (see ``kiln.argmax``).
    #[pyo3(signature = (axis=None, keepdims=false))]
    fn argmax(&self, py: Python<'_>, axis: Option<Int<isize>>, keepdims: bool) -> PyResult<PyTensor> {
        let axis = axis.map(|a| a.0);
        gpu(py, || ops::argmax(&self.t, axis, keepdims)).map(PyTensor::new)
    }

    /// Index of the minimum (see ``kiln.argmin``).
    #[pyo3(signature = (axis=None, keepdims=false))]
    fn argmin(&self, py: Python<'_>, axis: Option<Int<isize>>, keepdims: bool) -> PyResult<PyTensor> {
        let axis = axis.map(|a| a.0);
        gpu(py, || ops::argmin(&self.t, axis, keepdims)).map(PyTensor::new)
    }
}

/// Keeps `to_tensor` reachable for `Tensor(obj)`-style construction from Python.
#[pyfunction]
#[pyo3(signature = (obj, dtype=None))]
pub fn _tensor(py: Python<'_>, obj: &Bound<'_, PyAny>, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
    let d = parse_dtype(py, dtype)?;
    to_tensor(py, obj, d).map(PyTensor::new)
}
