//! The one boundary every entry point goes through: catch panics, turn errors into a status,
//! keep the calling thread's last error message; and the pointer and handle checks.

use crate::handles;
use crate::types::{status_of, KilnKernel, KilnStatus, KilnTensor};
use kiln_core::{Error, Kernel, Result, Tensor};
use std::cell::RefCell;
use std::ffi::CStr;
use std::os::raw::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

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
/// new tensor handle owned by the caller on success.
pub(crate) fn call_out(func: &str, out: *mut *mut KilnTensor, f: impl FnOnce() -> Result<Tensor>) -> KilnStatus {
    call(func, || {
        let out = out_ptr(out, "out")?;
        *out = std::ptr::null_mut();
        let t = f()?;
        *out = std::ptr::without_provenance_mut(handles::tensors().insert(t)?);
        Ok(())
    })
}

/// A new kernel handle for `k`.
pub(crate) fn new_kernel(k: Kernel) -> Result<*mut KilnKernel> {
    Ok(std::ptr::without_provenance_mut(handles::kernels().insert(k)?))
}

fn null(what: &str) -> Error {
    Error::NullPointer(format!("{what} is NULL"))
}

/// A required tensor argument: the tensor behind a live handle, held for the duration of the
/// call (another thread's kiln_tensor_free cannot release it under us). A handle that is not a
/// live tensor (freed, a kernel, garbage) is INVALID_ARGUMENT; it is never dereferenced.
pub(crate) fn tensor(p: *const KilnTensor, what: &str) -> Result<Arc<Tensor>> {
    if p.is_null() {
        return Err(null(what));
    }
    handles::tensors().get(p.addr(), what)
}

/// An optional tensor argument (NULL = none); a non-NULL one is checked as in `tensor`.
pub(crate) fn opt_tensor(p: *const KilnTensor, what: &str) -> Result<Option<Arc<Tensor>>> {
    if p.is_null() {
        return Ok(None);
    }
    tensor(p, what).map(Some)
}

/// `tensors[0..n]`, each a required tensor (named "tensors[i]" in messages).
pub(crate) fn tensor_array(tensors: *const *const KilnTensor, n: usize) -> Result<Vec<Arc<Tensor>>> {
    slice(tensors, n, "tensors")?.iter().enumerate().map(|(i, &p)| tensor(p, &format!("tensors[{i}]"))).collect()
}

/// A required kernel argument (as `tensor`).
pub(crate) fn kernel(p: *const KilnKernel, what: &str) -> Result<Arc<Kernel>> {
    if p.is_null() {
        return Err(null(what));
    }
    handles::kernels().get(p.addr(), what)
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
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|e| Error::InvalidArgument(format!("{what} is not valid UTF-8: {e}")))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::KilnStatus::*;

    fn message() -> String {
        last_error().1
    }

    #[test]
    fn the_c_status_enum_and_names_follow_cores_error_table() {
        for &code in kiln_core::ErrorCode::ALL {
            let status = crate::types::status_of(code);
            assert_eq!(status as u32, code as u32, "{}", code.name());
            let name = crate::status_gen::status_name(code as u32);
            assert_eq!(name, format!("{}\0", code.name()).as_bytes());
        }
        assert_eq!(crate::status_gen::status_name(kiln_core::ErrorCode::ALL.len() as u32), b"UNKNOWN\0");
        for d in kiln_core::DType::ALL {
            assert_eq!(crate::types::dtype_value(d), d as u32);
        }
    }

    #[test]
    fn a_panic_becomes_kiln_err_panic_with_its_message() {
        let s = call("kiln_test_fn", || panic!("boom {}", 42));
        assert_eq!(s, KILN_ERR_PANIC);
        assert_eq!(last_error().0, KILN_ERR_PANIC);
        assert!(message().contains("kiln_test_fn") && message().contains("boom 42"), "{}", message());
        let mut out: *mut KilnTensor = std::ptr::dangling_mut::<KilnTensor>();
        let s = call_out("kiln_test_out", &mut out, || panic!("inside"));
        assert_eq!(s, KILN_ERR_PANIC);
        assert!(out.is_null(), "*out is NULL after a panic");
    }

    #[test]
    fn errors_keep_code_and_message_and_success_leaves_them() {
        let s = call("kiln_x", || Err(Error::ShapeMismatch("a and b".into())));
        assert_eq!(s, KILN_ERR_SHAPE_MISMATCH);
        assert_eq!(message(), "kiln_x: shape mismatch: a and b");
        assert_eq!(call("kiln_y", || Ok(())), KILN_OK);
        assert_eq!(message(), "kiln_x: shape mismatch: a and b");
    }

    #[test]
    fn the_last_error_is_per_thread() {
        call("kiln_main", || Err(Error::InvalidArgument("main thread".into())));
        std::thread::spawn(|| {
            assert_eq!(last_error().0, KILN_OK);
            call("kiln_other", || Err(Error::Timeout("other thread".into())));
            assert!(message().contains("other thread"));
        })
        .join()
        .unwrap();
        assert!(message().contains("main thread"));
    }

    #[test]
    fn pointer_checks() {
        assert_eq!(tensor(std::ptr::null(), "x").unwrap_err().code(), kiln_core::ErrorCode::NullPointer);
        assert!(slice::<u8>(std::ptr::null(), 0, "data").unwrap().is_empty());
        let e = slice::<u8>(std::ptr::null(), 3, "data").unwrap_err();
        assert_eq!(e.message(), "data is NULL but its length is 3");
        assert_eq!(cstr(std::ptr::null(), "src").unwrap_err().code(), kiln_core::ErrorCode::NullPointer);
        let bad = [0xffu8, 0];
        assert_eq!(
            cstr(bad.as_ptr() as *const c_char, "src").unwrap_err().code(),
            kiln_core::ErrorCode::InvalidArgument
        );
        assert_eq!(dtype(3).unwrap(), kiln_core::DType::U32);
        assert_eq!(dtype(4).unwrap(), kiln_core::DType::Bool);
        assert!(dtype(5).unwrap_err().message().contains("unknown dtype value 5"));
        assert_eq!(opt_value::<isize>(std::ptr::null()), None);
        assert_eq!(opt_value(&-2isize as *const isize), Some(-2));
    }

    #[test]
    fn last_error_message_truncates_on_a_char_boundary() {
        call("kiln_z", || Err(Error::InvalidArgument("ééé".into())));
        let full = message();
        let need = unsafe { crate::kiln_last_error_message(std::ptr::null_mut(), 0) };
        assert_eq!(need, full.len() + 1);
        // cut in the middle of the first 'é' (2 bytes): the copy stops before it
        let cut = full.find('é').unwrap() + 1;
        let mut buf = vec![0x55 as c_char; cut + 1];
        let got = unsafe { crate::kiln_last_error_message(buf.as_mut_ptr(), buf.len()) };
        assert_eq!(got, need);
        let s = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert_eq!(s, &full[..cut - 1]);
    }
}
