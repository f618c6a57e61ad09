//! The C functions a plain call of the op table cannot express, written by hand: clip's two
//! forms (one op, two C functions), copy and fill (not ops of the table), quant_from_bytes (host
//! bytes) and tensordot (two forms of axes). Every other op's C function is generated from its typed
//! row of kiln-core's op table into ops_gen.rs (`make gen`), with the helpers below. Each is a
//! pointer check and a call: the op logic lives in kiln-core.

use crate::boundary::{call, call_out, cstr, opt_tensor, opt_value, slice, tensor};
use crate::types::{KilnStatus, KilnTensor};
use kiln_core::{ops, Tensor};
use std::os::raw::{c_char, c_void};
// The header shows `KilnDType`; Rust receives the raw value.
use std::primitive::u32 as KilnDType;

type Out = *mut *mut KilnTensor;

pub(crate) fn unary(
    name: &str,
    x: *const KilnTensor,
    out: Out,
    f: fn(&Tensor) -> kiln_core::Result<Tensor>,
) -> KilnStatus {
    call_out(name, out, || f(&*tensor(x, "x")?))
}

pub(crate) fn binary(
    name: &str,
    a: *const KilnTensor,
    b: *const KilnTensor,
    out: Out,
    f: fn(&Tensor, &Tensor) -> kiln_core::Result<Tensor>,
) -> KilnStatus {
    call_out(name, out, || f(&*tensor(a, "a")?, &*tensor(b, "b")?))
}

pub(crate) fn scalar(
    name: &str,
    a: *const KilnTensor,
    s: f64,
    out: Out,
    f: fn(&Tensor, f64) -> kiln_core::Result<Tensor>,
) -> KilnStatus {
    call_out(name, out, || f(&*tensor(a, "a")?, s))
}

/// Optional axes: `NULL, 0` is None (every axis).
pub(crate) fn opt_axes<'a>(axes: *const isize, naxes: usize) -> kiln_core::Result<Option<&'a [isize]>> {
    if axes.is_null() && naxes == 0 {
        Ok(None)
    } else {
        slice(axes, naxes, "axes").map(Some)
    }
}

/// An optional dtype: NULL is None.
pub(crate) unsafe fn opt_dtype(dtype: *const KilnDType) -> kiln_core::Result<Option<kiln_core::DType>> {
    opt_value(dtype).map(crate::boundary::dtype).transpose()
}

pub(crate) fn quant_format(format: *const c_char) -> kiln_core::Result<ops::QuantFormat> {
    ops::QuantFormat::parse(cstr(format, "format")?)
}

// ---- select -------------------------------------------------------------------------------------

/// `x` limited to `[min, max]` elementwise (the Array API's `clip`): a NaN in `x` or a bound
/// gives NaN. `min` and `max` may be NULL (no bound); a bound must have `x`'s dtype and
/// broadcast to `x`'s shape, which the result keeps. `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_clip(
    x: *const KilnTensor,
    min: *const KilnTensor,
    max: *const KilnTensor,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_clip", out, || {
        let (lo, hi) = (opt_tensor(min, "min")?, opt_tensor(max, "max")?);
        ops::clip(&*tensor(x, "x")?, lo.as_deref(), hi.as_deref())
    })
}

/// `kiln_clip` with number bounds: `-INFINITY` for `min` or `INFINITY` for `max` means no
/// bound; another value must be one of `x`'s dtype. `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_clip_scalar(
    x: *const KilnTensor,
    min: f64,
    max: f64,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_clip_scalar", out, || ops::clip_scalar(&*tensor(x, "x")?, min, max))
}

// ---- creation (not ops of the table) ------------------------------------------------------------

/// A new tensor with the contents of `x` (a GPU-side copy). `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_copy(x: *const KilnTensor, out: *mut *mut KilnTensor) -> KilnStatus {
    unary("kiln_copy", x, out, ops::copy)
}

/// A tensor with the contents of `x` on adapter `index` (0-based, as kiln_device_info lists
/// them): a copy through host memory (two devices share no buffers; blocks for the readback),
/// or a new handle to the same tensor when it lives there already. Ops on tensors of two
/// devices fail with KILN_ERR_INVALID_ARGUMENT: move one first. KILN_ERR_INVALID_ARGUMENT
/// when `index` is out of range. `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensor_to_device(
    x: *const KilnTensor,
    index: usize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_tensor_to_device", out, || {
        let n = kiln_core::adapters().len();
        if index >= n {
            return Err(kiln_core::Error::InvalidArgument(format!(
                "device index {index} is out of range ({n} adapters)"
            )));
        }
        tensor(x, "x")?.to_device(&kiln_core::runtime().device_at(index)?)
    })
}

/// Writes the index of the adapter `x` lives on (as kiln_device_info lists them) to `*out`.
/// `x`, `out`: non-null. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensor_device(x: *const KilnTensor, out: *mut usize) -> KilnStatus {
    call("kiln_tensor_device", || {
        let i = tensor(x, "x")?.device().info().index;
        *crate::boundary::out_ptr(out, "out")? = i;
        Ok(())
    })
}

/// Overwrites every element of `x` with `value` (in place; queued like any op). `x`:
/// non-null. Thread-safe, but racing writes to one tensor have no defined order.
#[no_mangle]
pub unsafe extern "C" fn kiln_fill(x: *const KilnTensor, value: f64) -> KilnStatus {
    call("kiln_fill", || ops::fill(&*tensor(x, "x")?, value))
}

// ---- quant --------------------------------------------------------------------------------------

/// Uploads `nbytes` bytes of raw GGUF blocks (e.g. a slice of a memory-mapped .gguf file) of a
/// `rows` x `cols` matrix in `format` ("q4_0", "q4_1", "q8_0", "q5_0", "q5_1", "q2_k", "q3_k",
/// "q4_k", "q5_k" or "q6_k", any case) as the u32 tensor (the bytes zero-padded to whole words,
/// shape [ceil(nbytes / 4)]) the quant ops read. `nbytes` must be `rows * (cols / 32) * block
/// bytes` (18, 20, 34, 22, 24), or `rows * (cols / 256) * block bytes` for the K formats (84,
/// 110, 144, 176, 210). `data` may be NULL when
/// `nbytes` is 0. `format`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_quant_from_bytes(
    data: *const c_void,
    nbytes: usize,
    format: *const c_char,
    rows: usize,
    cols: usize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_quant_from_bytes", out, || {
        let f = quant_format(format)?;
        let bytes = slice(data as *const u8, nbytes, "data")?;
        ops::quant_from_bytes(&kiln_core::device()?, bytes, f, rows, cols)
    })
}

// ---- several outputs ----------------------------------------------------------------------------

/// Runs `f` and hands its tensors to the caller through `outs` (each non-null; each set to NULL
/// first, and left NULL on error).
pub(crate) fn call_outs(func: &str, outs: &[Out], f: impl FnOnce() -> kiln_core::Result<Vec<Tensor>>) -> KilnStatus {
    call(func, || {
        for (i, &o) in outs.iter().enumerate() {
            *crate::boundary::out_ptr(o, &format!("out {i}"))? = std::ptr::null_mut();
        }
        let ts = f()?;
        let mut handles = Vec::with_capacity(ts.len());
        for t in ts {
            match crate::handles::tensors().insert(t) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    for h in handles {
                        let _ = crate::handles::tensors().remove(h, "out");
                    }
                    return Err(e);
                }
            }
        }
        for (&o, h) in outs.iter().zip(handles) {
            // SAFETY: checked non-null above.
            unsafe { *o = std::ptr::without_provenance_mut(h) };
        }
        Ok(())
    })
}

/// Runs `f` on the tensor `x` and hands the caller one tensor per dimension of it through
/// `outs[0..nouts]` (an op giving one per dimension, nonzero; `nouts` must be x's rank).
pub(crate) fn call_per_dim(
    func: &str,
    x: *const KilnTensor,
    outs: *const Out,
    nouts: usize,
    f: impl FnOnce(&Tensor) -> kiln_core::Result<Vec<Tensor>>,
) -> KilnStatus {
    let outs = match slice(outs, nouts, "outs") {
        Ok(o) => o,
        Err(e) => return call(func, || Err(e)),
    };
    call_outs(func, outs, || {
        let x = tensor(x, "x")?;
        if nouts != x.ndim() {
            return Err(kiln_core::Error::InvalidArgument(format!(
                "nouts is {nouts} but x has rank {} (one output per dimension)",
                x.ndim()
            )));
        }
        f(&x)
    })
}

// ---- linear algebra -----------------------------------------------------------------------------

/// numpy's tensordot: with `n >= 0` the last `n` axes of `x1` are contracted with the first `n`
/// of `x2` (`axes1`, `axes2` unused, may be NULL); with `n < 0` axis `axes1[i]` of `x1` with
/// `axes2[i]` of `x2` for i < `naxes` (negative counts from the end). The result has x1's other
/// axes then x2's. `x1`, `x2`, `out`: non-null; `axes1`, `axes2` may be NULL only when `naxes`
/// is 0. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensordot(
    x1: *const KilnTensor,
    x2: *const KilnTensor,
    n: isize,
    axes1: *const isize,
    axes2: *const isize,
    naxes: usize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_tensordot", out, || {
        let axes = if n >= 0 {
            ops::TensordotAxes::Count(n as usize)
        } else {
            ops::TensordotAxes::Pairs(slice(axes1, naxes, "axes1")?.to_vec(), slice(axes2, naxes, "axes2")?.to_vec())
        };
        ops::tensordot(&*tensor(x1, "x1")?, &*tensor(x2, "x2")?, &axes)
    })
}
