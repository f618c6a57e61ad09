//! The one boundary every entry point goes through: catch panics, turn errors into a status,
//! keep the calling thread's last error message; and the pointer checks.

use crate::types::{status_of, KilnStatus, KilnTensor};
use kiln_core::{Error, Result, Tensor};
use std::cell::RefCell;
use std::ffi::CStr;
use std::os::raw::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    static LAST_ERROR: RefCell<(KilnStatus, String)> = const { RefCell::new((KilnStatus::KILN_OK, String::new())) };
}

fn set_last_error(func: &str, e: &Error) {
    let msg = format!("{func}: {e}");
    let _ = LAST_ERROR.try_with(|l| *l.borrow_mut() = (status_of(e.code()), msg));
}

pub(crate) fn last_error() -> (KilnStatus, String) {
    LAST_ERROR.try_with(|l| l.borrow().clone()).unwrap_or((KilnStatus::KILN_OK, String::new()))
}

/// Runs `f`, catching panics; an error or panic is recorded as the thread's last error.
pub(crate) fn call(func: &str, f: impl FnOnce() -> Result<()>) -> KilnStatus {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => KilnStatus::KILN_OK,
        Ok(Err(e)) => {
            set_last_error(func, &e);
            status_of(e.code())
        }
        Err(payload) => {
            let e = Error::from_panic(payload);
            set_last_error(func, &e);
            KilnStatus::KILN_ERR_PANIC
        }
    }
}

/// Like `call` for a function with a `KilnTensor **out`: `*out` is set to NULL first and to a
/// new tensor owned by the caller on success.
pub(crate) fn call_out(func: &str, out: *mut *mut KilnTensor, f: impl FnOnce() -> Result<Tensor>) -> KilnStatus {
    call(func, || {
        let out = out_ptr(out, "out")?;
        *out = std::ptr::null_mut();
        let t = f()?;
        *out = Box::into_raw(Box::new(KilnTensor(t)));
        Ok(())
    })
}

fn null(what: &str) -> Error {
    Error::NullPointer(format!("{what} is NULL"))
}

/// A required tensor argument.
pub(crate) fn tensor<'a>(p: *const KilnTensor, what: &str) -> Result<&'a Tensor> {
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: the caller passes a live tensor from this library (documented contract).
    Ok(unsafe { &(*p).0 })
}

/// An optional tensor argument (NULL = none).
pub(crate) fn opt_tensor<'a>(p: *const KilnTensor) -> Option<&'a Tensor> {
    // SAFETY: as in `tensor`.
    (!p.is_null()).then(|| unsafe { &(*p).0 })
}

/// A required out-parameter.
pub(crate) fn out_ptr<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T> {
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: non-null, and the caller passes writable storage for one T.
    Ok(unsafe { &mut *p })
}

/// `len` elements at `p`; `p` may be NULL only when `len` is 0.
pub(crate) fn slice<'a, T>(p: *const T, len: usize, what: &str) -> Result<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::NullPointer(format!("{what} is NULL but its length is {len}")));
    }
    // SAFETY: the caller passes `len` readable elements.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// `len` writable elements at `p`; `p` may be NULL only when `len` is 0.
pub(crate) fn slice_mut<'a, T>(p: *mut T, len: usize, what: &str) -> Result<&'a mut [T]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(Error::NullPointer(format!("{what} is NULL but its length is {len}")));
    }
    // SAFETY: the caller passes `len` writable elements.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, len) })
}

/// A required NUL-terminated UTF-8 string.
pub(crate) fn cstr<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: the caller passes a NUL-terminated string.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|e| Error::InvalidArgument(format!("{what} is not valid UTF-8: {e}")))
}

/// A `KilnDType` value from C (any u32; unknown values are an error).
pub(crate) fn dtype(v: u32) -> Result<kiln_core::DType> {
    kiln_core::DType::from_u32(v)
}

/// An optional scalar passed by pointer (NULL = none).
pub(crate) fn opt_value<T: Copy>(p: *const T) -> Option<T> {
    // SAFETY: non-null pointers point to one readable T.
    (!p.is_null()).then(|| unsafe { *p })
}
