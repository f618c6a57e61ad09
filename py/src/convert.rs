//! Argument conversion: dtypes, shapes, axes, numpy arrays in (one upload copy) and out (one
//! readback copy), and the operand rules for Python scalars.

use crate::classes::PyTensor;
use crate::errors::{dtype_err, gpu, invalid, to_pyerr};
use kiln_core::{DType, Tensor};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyList, PySequence, PyString, PyTuple, PyType};
use std::sync::atomic::{AtomicBool, Ordering};

pub const SUPPORTED: &str = "float32, float16, int32, uint32, bool (float64 is converted to float32)";

static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static NP_GENERIC: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static DESCRS: [PyOnceLock<Py<PyArrayDescr>>; 5] =
    [PyOnceLock::new(), PyOnceLock::new(), PyOnceLock::new(), PyOnceLock::new(), PyOnceLock::new()];
static WARNED_F64: AtomicBool = AtomicBool::new(false);

pub fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    NUMPY.get_or_try_init(py, || py.import("numpy").map(Bound::unbind)).map(|m| m.bind(py))
}

pub fn np_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::I32 => "int32",
        DType::U32 => "uint32",
        DType::Bool => "bool",
    }
}

/// The numpy dtype object of a Kiln dtype (what `Tensor.dtype` returns).
pub fn np_dtype(py: Python<'_>, dtype: DType) -> PyResult<Bound<'_, PyArrayDescr>> {
    let cell = &DESCRS[dtype as usize];
    cell.get_or_try_init(py, || PyArrayDescr::new(py, np_name(dtype)).map(Bound::unbind)).map(|d| d.bind(py).clone())
}

/// What a numpy dtype means to Kiln.
enum Kind {
    Native(DType),
    F64,
    /// Another real numeric dtype (int8..int64, uint*, float variants): converted only
    /// when a dtype is asked for explicitly, or when it came from Python ints.
    OtherNumeric,
    Unsupported,
}

/// Byte-swapped arrays of a supported dtype classify as that dtype and are converted to native
/// order on the way in (see `to_tensor`).
fn classify(d: &Bound<'_, PyArrayDescr>) -> Kind {
    match (d.kind(), d.itemsize()) {
        (b'f', 4) => Kind::Native(DType::F32),
        (b'f', 2) => Kind::Native(DType::F16),
        (b'i', 4) => Kind::Native(DType::I32),
        (b'u', 4) => Kind::Native(DType::U32),
        (b'b', 1) => Kind::Native(DType::Bool),
        (b'f', 8) => Kind::F64,
        (b'b' | b'i' | b'u' | b'f', _) => Kind::OtherNumeric,
        _ => Kind::Unsupported,
    }
}

/// Parses a dtype argument: None, a string ("float32", "f32", ...), a numpy dtype or type.
pub fn parse_dtype(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<DType>> {
    let Some(obj) = obj else { return Ok(None) };
    if obj.is_none() {
        return Ok(None);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        // A string that is not valid UTF-8 (a lone surrogate) names no dtype either.
        let name = s.to_cow().map_err(|_| dtype_err(py, format!("unknown dtype {obj:?}; supported: {SUPPORTED}")))?;
        if let Ok(d) = DType::parse(&name) {
            return Ok(Some(d));
        }
    }
    let descr = match obj.cast::<PyArrayDescr>() {
        Ok(d) => d.clone(),
        Err(_) => match PyArrayDescr::new(py, obj) {
            Ok(d) => d,
            Err(_) => return Err(dtype_err(py, format!("unknown dtype {obj}; supported: {SUPPORTED}"))),
        },
    };
    match classify(&descr) {
        Kind::Native(d) => Ok(Some(d)),
        _ => Err(dtype_err(py, format!("dtype {descr} is not supported; supported: {SUPPORTED}"))),
    }
}

/// A dtype argument that must be given (``astype``): None is a DTypeError, never a panic.
pub fn required_dtype(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    parse_dtype(py, Some(obj))?
        .ok_or_else(|| dtype_err(py, format!("a dtype is required, got None; supported: {SUPPORTED}")))
}

pub fn dtype_or(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>, default: DType) -> PyResult<DType> {
    Ok(parse_dtype(py, obj)?.unwrap_or(default))
}

/// A shape argument: an int or a sequence of ints.
pub fn parse_shape(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    let to_dim = |v: &Bound<'_, PyAny>| -> PyResult<usize> {
        match int_value(v) {
            Some(IntValue::Small(n)) if n < 0 => Err(invalid(py, format!("negative dimension {n} in a shape"))),
            Some(IntValue::Small(n)) => Ok(n as usize),
            Some(IntValue::Big) => Err(invalid(py, format!("dimension {v} in a shape is too large"))),
            None => Err(invalid(py, format!("shape entries must be ints, got {v}"))),
        }
    };
    if obj.is_instance_of::<PyInt>() {
        return Ok(vec![to_dim(obj)?]);
    }
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Err(invalid(
            py,
            format!("a shape must be an int or a sequence of ints, got a tensor of shape {:?}", t.get().t.shape()),
        ));
    }
    let seq = obj
        .cast::<PySequence>()
        .map_err(|_| invalid(py, format!("a shape must be an int or a sequence of ints, got {obj}")))?;
    let mut out = Vec::with_capacity(seq.len()?);
    for item in seq.try_iter()? {
        out.push(to_dim(&item?)?);
    }
    Ok(out)
}

/// A signed shape (for reshape, which allows one -1).
pub fn parse_ishape(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Vec<isize>> {
    let to_dim = |v: &Bound<'_, PyAny>| -> PyResult<isize> {
        match int_value(v) {
            Some(IntValue::Small(n)) => {
                isize::try_from(n).map_err(|_| invalid(py, format!("dimension {n} in a shape is too large")))
            }
            Some(IntValue::Big) => Err(invalid(py, format!("dimension {v} in a shape is too large"))),
            None => Err(invalid(py, format!("shape entries must be ints, got {v}"))),
        }
    };
    if obj.is_instance_of::<PyInt>() {
        return Ok(vec![to_dim(obj)?]);
    }
    let seq = obj
        .cast::<PySequence>()
        .map_err(|_| invalid(py, format!("a shape must be an int or a sequence of ints, got {obj}")))?;
    let mut out = Vec::with_capacity(seq.len()?);
    for item in seq.try_iter()? {
        out.push(to_dim(&item?)?);
    }
    Ok(out)
}

/// An axis argument: None (all axes), an int, or a sequence of ints.
pub fn parse_axes(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<isize>>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => {
            let axis = |v: &Bound<'_, PyAny>| -> PyResult<isize> {
                match int_value(v) {
                    Some(IntValue::Small(n)) => {
                        isize::try_from(n).map_err(|_| invalid(py, format!("axis {n} is out of range")))
                    }
                    Some(IntValue::Big) => Err(invalid(py, format!("axis {v} is out of range"))),
                    None => Err(invalid(py, format!("axis entries must be ints, got {v}"))),
                }
            };
            if int_value(o).is_some() {
                return Ok(Some(vec![axis(o)?]));
            }
            let seq = o
                .cast::<PySequence>()
                .map_err(|_| invalid(py, format!("axis must be None, an int or a tuple of ints, got {o}")))?;
            let mut out = Vec::new();
            for item in seq.try_iter()? {
                out.push(axis(&item?)?);
            }
            Ok(Some(out))
        }
    }
}

/// An int or a pair of ints (conv/pool arguments).
pub fn parse_pair(py: Python<'_>, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<[usize; 2]> {
    if let Ok(v) = obj.extract::<usize>() {
        return Ok([v, v]);
    }
    if let Ok((a, b)) = obj.extract::<(usize, usize)>() {
        return Ok([a, b]);
    }
    Err(invalid(py, format!("{name} must be a non-negative int or a pair of them, got {obj}")))
}

/// What an int-like Python object holds: a value that fits i64, or one that does not.
enum IntValue {
    Small(i64),
    Big,
}

/// Python ints and objects with ``__index__`` (numpy integers); None for anything else
/// (floats, strings, None).
fn int_value(v: &Bound<'_, PyAny>) -> Option<IntValue> {
    match v.extract::<i64>() {
        Ok(n) => Some(IntValue::Small(n)),
        Err(e) if e.is_instance_of::<PyOverflowError>(v.py()) => Some(IntValue::Big),
        Err(_) => None,
    }
}

/// The integer types an `Int` argument can be.
pub trait IntTarget: Copy + TryFrom<i64> + TryFrom<u64> + std::fmt::Display {
    const LO: Self;
    const HI: Self;
}

macro_rules! int_target {
    ($($t:ty),*) => {$(impl IntTarget for $t { const LO: Self = <$t>::MIN; const HI: Self = <$t>::MAX; })*};
}
int_target!(isize, usize, u64, u32, i64);

/// An integer argument (an axis, a seed, an offset, a group count): a Python int or anything
/// with ``__index__``. A value out of range for `T` (2**64, a negative count) is an
/// InvalidArgumentError naming the range, never pyo3's OverflowError; a non-integer is pyo3's
/// TypeError (with the argument's name).
pub struct Int<T>(pub T);

impl<'a, 'py, T: IntTarget> FromPyObject<'a, 'py> for Int<T> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let obj = obj.to_owned();
        let py = obj.py();
        let out_of_range =
            || invalid(py, format!("the integer {obj} is out of range here (expected {} to {})", T::LO, T::HI));
        match obj.extract::<i64>() {
            Ok(v) => T::try_from(v).map(Int).map_err(|_| out_of_range()),
            Err(e) if e.is_instance_of::<PyOverflowError>(py) => match obj.extract::<u64>() {
                Ok(v) => T::try_from(v).map(Int).map_err(|_| out_of_range()),
                Err(_) => Err(out_of_range()),
            },
            Err(e) => Err(e),
        }
    }
}

/// A float argument (eps, base, low, high, scale): a Python number. An int too large for a
/// float (2**1100) is an InvalidArgumentError, never pyo3's OverflowError.
pub struct Float(pub f64);

impl<'a, 'py> FromPyObject<'a, 'py> for Float {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let obj = obj.to_owned();
        let py = obj.py();
        match obj.extract::<f64>() {
            Ok(v) => Ok(Float(v)),
            Err(e) if e.is_instance_of::<PyOverflowError>(py) => {
                Err(invalid(py, format!("the number {obj} is too large for a float")))
            }
            Err(e) => Err(e),
        }
    }
}

/// Text handed to kiln-core (kernel sources, entry points): a str, or bytes holding UTF-8. A
/// str with a lone surrogate, or bytes that are not UTF-8, is an InvalidArgumentError.
pub fn text_arg(py: Python<'_>, what: &str, obj: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = obj.cast::<PyString>() {
        return s.to_cow().map(|c| c.into_owned()).map_err(|_| {
            invalid(
                py,
                format!(
                    "the {what} is not valid Unicode text (it holds a lone surrogate); pass a str without surrogates"
                ),
            )
        });
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return std::str::from_utf8(b.as_bytes())
            .map(str::to_string)
            .map_err(|e| invalid(py, format!("the {what} is not valid UTF-8 (at byte {})", e.valid_up_to())));
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!("the {what} must be a str, got {}", obj.get_type())))
}

/// Pointer to host memory handed to a core call with the GIL released. The owner (a numpy
/// array) is kept alive by the caller for the duration of the call.
struct HostPtr(*mut u8, usize);
unsafe impl Send for HostPtr {}

fn warn_f64(py: Python<'_>) -> PyResult<()> {
    if !WARNED_F64.swap(true, Ordering::Relaxed) {
        let cat = py.get_type::<pyo3::exceptions::PyUserWarning>();
        PyErr::warn(
            py,
            &cat,
            c"kiln: float64 input is converted to float32 (WebGPU has no portable float64); this warning is shown once per process",
            2,
        )?;
    }
    Ok(())
}

/// Whether `obj` holds plain Python numbers (lists, tuples, ints, floats), whose numpy
/// default dtypes (int64, float64) say nothing about what the user wants.
fn is_python_data(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyList>()
        || obj.is_instance_of::<PyTuple>()
        || obj.is_instance_of::<PyInt>()
        || (obj.is_instance_of::<PyFloat>() && obj.get_type().is(py_float_type(obj.py())))
}

fn py_float_type(py: Python<'_>) -> Bound<'_, PyType> {
    py.get_type::<PyFloat>()
}

/// Uploads a C-contiguous, aligned, native-order numpy array of a supported dtype (one copy).
fn upload(py: Python<'_>, arr: &Bound<'_, PyUntypedArray>, dtype: DType) -> PyResult<Tensor> {
    let shape = arr.shape().to_vec();
    let n: usize = shape.iter().product::<usize>() * dtype.size();
    let ptr = unsafe { (*arr.as_array_ptr()).fields.data as *mut u8 };
    let host = HostPtr(ptr, n);
    gpu(py, move || {
        let h = host;
        let bytes: &[u8] = if h.1 == 0 { &[] } else { unsafe { std::slice::from_raw_parts(h.0, h.1) } };
        Tensor::from_bytes(bytes, &shape, dtype)
    })
}

/// `kiln.asarray`: Tensors pass through (cast if `dtype` differs); anything numpy can read
/// (arrays, buffer-protocol objects, nested lists, scalars) is uploaded with one copy.
pub fn to_tensor(py: Python<'_>, obj: &Bound<'_, PyAny>, dtype: Option<DType>) -> PyResult<Tensor> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        let t = &t.get().t;
        return match dtype {
            Some(d) if d != t.dtype() => gpu(py, || kiln_core::ops::cast(t, d)),
            _ => Ok(t.clone()),
        };
    }
    let np = numpy(py)?;
    let python_data = is_python_data(obj);
    let arr: Bound<'_, PyUntypedArray> = match obj.cast::<PyUntypedArray>() {
        Ok(a) => a.clone(),
        Err(_) => np
            .call_method1("asarray", (obj,))
            .map_err(|e| {
                invalid(
                    py,
                    format!(
                        "cannot convert {} to a tensor: {e}",
                        obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                    ),
                )
            })?
            .cast_into::<PyUntypedArray>()
            .map_err(|e| invalid(py, e.to_string()))?,
    };
    let descr = arr.dtype();
    let target = match (classify(&descr), dtype) {
        (Kind::Unsupported, _) => {
            return Err(dtype_err(py, format!("arrays of dtype {descr} are not supported; supported: {SUPPORTED}")))
        }
        (_, Some(d)) => d,
        (Kind::Native(d), None) => d,
        (Kind::F64, None) => {
            if !python_data {
                warn_f64(py)?;
            }
            DType::F32
        }
        (Kind::OtherNumeric, None) if matches!(descr.kind(), b'i' | b'u') => {
            // numpy's default int64 (and int8/16, uint8/16/64) are narrowed to Kiln's 32-bit
            // integer of the same signedness when every value fits; otherwise an
            // InvalidArgumentError (a ValueError) names the value: never a silent wrap.
            let target = if descr.kind() == b'u' { DType::U32 } else { DType::I32 };
            check_int_fits(py, &arr, target, python_data)?;
            target
        }
        (Kind::OtherNumeric, None) => {
            return Err(dtype_err(
                py,
                format!("arrays of dtype {descr} are not supported; supported: {SUPPORTED} (pass dtype= to convert)"),
            ))
        }
    };
    // An explicit integer dtype= is held to the same rule for integer input (numpy's astype
    // would wrap), and float64 values that overflow float32 are refused rather than made ±inf.
    match (dtype, descr.kind()) {
        (Some(d @ (DType::I32 | DType::U32)), b'i' | b'u') => check_int_fits(py, &arr, d, python_data)?,
        // numpy's float -> int astype gives INT_MIN for NaN, ±inf and out-of-range values.
        (Some(d @ (DType::I32 | DType::U32)), b'f') => check_float_to_int(py, &arr, d)?,
        _ => {}
    }
    if target == DType::F32 && descr.kind() == b'f' && descr.itemsize() > 4 {
        check_float_fits(py, &arr, target)?;
    }
    let same =
        matches!(classify(&descr), Kind::Native(d) if d == target) && descr.is_native_byteorder().unwrap_or(true);
    let arr = if !same {
        arr.call_method1("astype", (np_dtype(py, target)?,))?
            .cast_into::<PyUntypedArray>()
            .map_err(|e| invalid(py, e.to_string()))?
    } else if !arr.is_c_contiguous() || !arr.is_aligned() {
        np.call_method1("ascontiguousarray", (&arr,))?
            .cast_into::<PyUntypedArray>()
            .map_err(|e| invalid(py, e.to_string()))?
    } else {
        arr
    };
    upload(py, &arr, target)
}

/// The range a Kiln integer dtype holds, as i128 (every numpy integer fits).
fn int_range(d: DType) -> (i128, i128) {
    match d {
        DType::U32 => (0, u32::MAX as i128),
        _ => (i32::MIN as i128, i32::MAX as i128),
    }
}

/// Refuses integer input with a value outside `target`'s range (InvalidArgumentError naming it).
fn check_int_fits(py: Python<'_>, arr: &Bound<'_, PyUntypedArray>, target: DType, python_data: bool) -> PyResult<()> {
    if arr.len() == 0 {
        return Ok(());
    }
    let (lo, hi) = int_range(target);
    for m in ["min", "max"] {
        let v: i128 = arr.call_method0(m)?.call_method0("__int__")?.extract()?;
        if v < lo || v > hi {
            let src = if python_data { "Python int".to_string() } else { format!("{} value", arr.dtype()) };
            let to = np_name(target);
            return Err(invalid(
                py,
                format!("the {src} {v} does not fit {to} (Kiln has no 64-bit integers); convert it to float32 first (24-bit precision)"),
            ));
        }
    }
    Ok(())
}

/// Refuses float input for an integer dtype with a value that truncates outside its range, or
/// that is NaN or infinite (numpy's cast would make those INT_MIN, not an error).
fn check_float_to_int(py: Python<'_>, arr: &Bound<'_, PyUntypedArray>, target: DType) -> PyResult<()> {
    if arr.len() == 0 {
        return Ok(());
    }
    let np = numpy(py)?;
    let (lo, hi) = int_range(target);
    let t = np.call_method1("trunc", (arr.call_method1("astype", ("float64",))?,))?;
    let ok = np.call_method1(
        "logical_and",
        (np.call_method1("greater_equal", (&t, lo as f64))?, np.call_method1("less_equal", (&t, hi as f64))?),
    )?;
    let bad = np.call_method1("logical_not", (ok,))?;
    if bad.call_method0("any")?.extract::<bool>()? {
        let idx = np.call_method1("flatnonzero", (bad,))?.get_item(0)?;
        let v = arr.call_method1("ravel", ())?.get_item(idx)?;
        return Err(invalid(
            py,
            format!(
                "the value {v} does not fit {} (Kiln never wraps); clip or cast it on the host first",
                np_name(target)
            ),
        ));
    }
    Ok(())
}

/// Refuses float64 input with a finite value beyond `target`'s range (it would become ±inf).
fn check_float_fits(py: Python<'_>, arr: &Bound<'_, PyUntypedArray>, target: DType) -> PyResult<()> {
    if arr.len() == 0 {
        return Ok(());
    }
    let np = numpy(py)?;
    let max = f32::MAX as f64;
    let finite = np.call_method1("isfinite", (arr,))?;
    let big = np.call_method1("greater", (np.call_method1("abs", (arr,))?, max))?;
    let bad = np.call_method1("logical_and", (finite, big))?;
    if bad.call_method0("any")?.extract::<bool>()? {
        let idx = np.call_method1("flatnonzero", (bad,))?.get_item(0)?;
        let v = arr.call_method1("ravel", ())?.get_item(idx)?;
        return Err(invalid(
            py,
            format!("the value {v} does not fit {} (it would become inf); scale the data first", np_name(target)),
        ));
    }
    Ok(())
}

/// Reads a tensor back into a new numpy array (one copy, the GIL released while waiting).
pub fn to_numpy<'py>(py: Python<'py>, t: &Tensor) -> PyResult<Bound<'py, PyAny>> {
    let np = numpy(py)?;
    let shape = PyTuple::new(py, t.shape())?;
    let arr = np.call_method1("empty", (shape, np_dtype(py, t.dtype())?))?;
    let a = arr.cast::<PyUntypedArray>().map_err(|e| invalid(py, e.to_string()))?;
    let n = t.nbytes();
    let host = HostPtr(unsafe { (*a.as_array_ptr()).fields.data as *mut u8 }, n);
    gpu(py, move || {
        let h = host;
        let out: &mut [u8] = if h.1 == 0 { &mut [] } else { unsafe { std::slice::from_raw_parts_mut(h.0, h.1) } };
        t.read_into(out)
    })?;
    Ok(arr)
}

/// One operand of a binary op: a tensor, or a Python / numpy scalar.
pub enum Operand {
    Tensor(Tensor),
    Scalar(f64, bool),
}

fn np_generic(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    NP_GENERIC.import(py, "numpy", "generic")
}

/// Classifies an operand; `None` when it is not something Kiln can take (operators then
/// return NotImplemented). Arrays and lists are uploaded.
pub fn operand(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Option<Operand>> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(Some(Operand::Tensor(t.get().t.clone())));
    }
    if obj.is_instance_of::<PyBool>() || obj.is_instance_of::<PyInt>() {
        return Ok(Some(Operand::Scalar(int_as_f64(py, obj)?, true)));
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(Some(Operand::Scalar(obj.extract::<f64>()?, false)));
    }
    if obj.is_instance(np_generic(py)?)? {
        let kind = obj.getattr("dtype")?.cast_into::<PyArrayDescr>().map(|d| d.kind()).unwrap_or(b'O');
        return match kind {
            b'b' | b'i' | b'u' => Ok(Some(Operand::Scalar(int_as_f64(py, &obj.call_method0("__int__")?)?, true))),
            b'f' => Ok(Some(Operand::Scalar(obj.call_method0("__float__")?.extract()?, false))),
            _ => Ok(None),
        };
    }
    if obj.is_instance_of::<PyUntypedArray>() || obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        return Ok(Some(Operand::Tensor(to_tensor(py, obj, None)?)));
    }
    Ok(None)
}

/// A Python int as the f64 every binding hands to kiln-core, which alone decides whether it
/// fits the tensor's dtype (`DType::check_scalar`: whole, finite, in range, else
/// INVALID_ARGUMENT). Ints beyond 64 bits travel rounded to f64 (no integer dtype takes them, and
/// float tensors round them anyway); beyond f64's range they are an InvalidArgumentError here.
fn int_as_f64(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<f64> {
    if let Ok(v) = obj.extract::<i64>() {
        return Ok(v as f64);
    }
    if let Ok(v) = obj.extract::<u64>() {
        return Ok(v as f64);
    }
    obj.extract::<f64>().map_err(|_| invalid(py, format!("the integer {obj} is too large for any Kiln dtype")))
}

/// A required tensor argument: a Tensor, or anything `asarray` takes.
pub fn tensor_arg(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(t.get().t.clone());
    }
    to_tensor(py, obj, None)
}

/// An optional tensor argument (None allowed).
pub fn opt_tensor_arg(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Tensor>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => tensor_arg(py, o).map(Some),
    }
}

/// A tensor argument that may also be a Python scalar, taking `like`'s dtype in that case.
pub fn tensor_or_scalar_like(py: Python<'_>, obj: &Bound<'_, PyAny>, like: Option<DType>) -> PyResult<Tensor> {
    match operand(py, obj)? {
        Some(Operand::Tensor(t)) => Ok(t),
        Some(Operand::Scalar(v, is_int)) => {
            let dtype = like.unwrap_or(if is_int { DType::I32 } else { DType::F32 });
            gpu(py, move || {
                dtype.check_scalar(v)?;
                Tensor::scalar(v, dtype)
            })
        }
        None => to_tensor(py, obj, None),
    }
}

#[allow(dead_code)]
pub fn core_err(py: Python<'_>, e: kiln_core::Error) -> PyErr {
    to_pyerr(py, e)
}

/// The correction (numpy's ``ddof``) of ``var`` / ``std``: either keyword, a number >= 0 (the
/// Array API allows a float).
pub(crate) fn correction_of(
    py: Python<'_>,
    name: &str,
    correction: Option<Float>,
    ddof: Option<Float>,
) -> PyResult<f64> {
    let c = match (correction.map(|c| c.0), ddof.map(|c| c.0)) {
        (Some(_), Some(_)) => return Err(invalid(py, format!("{name}: give correction or ddof, not both"))),
        (Some(c), None) | (None, Some(c)) => c,
        (None, None) => 0.0,
    };
    if c.is_nan() || c < 0.0 || c.is_infinite() {
        return Err(invalid(py, format!("{name}: correction must be a finite number >= 0, got {c}")));
    }
    Ok(c)
}

/// ``var`` with a real-valued correction over kiln-core's whole-number one: a fractional ``c``
/// with ``n - c > 0`` is the population variance scaled by ``n / (n - c)`` (one more rounding);
/// otherwise the whole number ``ceil(c)`` gives the same ``n - c <= 0`` result core gives.
pub(crate) fn var_corrected(
    x: &Tensor,
    axes: Option<&[isize]>,
    keepdims: bool,
    c: f64,
    sqrt: bool,
) -> kiln_core::Result<Tensor> {
    use kiln_core::ops;
    let n: usize = match axes {
        None => x.shape().iter().product(),
        Some(a) => {
            let nd = x.ndim() as isize;
            let mut seen = vec![false; x.ndim()];
            for &ax in a {
                let i = if ax < 0 { ax + nd } else { ax };
                if (0..nd).contains(&i) {
                    seen[i as usize] = true;
                }
            }
            seen.iter().zip(x.shape()).filter(|(s, _)| **s).map(|(_, d)| *d).product()
        }
    };
    let n = n as f64;
    if c.fract() == 0.0 || n - c <= 0.0 {
        let whole = c.ceil() as usize;
        return if sqrt { ops::std(x, axes, keepdims, whole) } else { ops::var(x, axes, keepdims, whole) };
    }
    let v = ops::var(x, axes, keepdims, 0)?;
    let f = n / (n - c);
    let (t, f) = if sqrt { (ops::sqrt(&v)?, f.sqrt()) } else { (v, f) };
    ops::binary_scalar(ops::BinaryOp::Mul, &t, f, false)
}
