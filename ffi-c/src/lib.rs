//! The C ABI of Kiln: `libkiln.so` / `libkiln.a` with the header `include/kiln.h`, generated
//! from this crate by cbindgen (`ffi-c/cbindgen.toml`, `make c-header`).
//!
//! A thin layer: every entry point checks its pointers, calls kiln-core, and goes through
//! `boundary::call`, which catches panics and records the thread's last error. No op logic here.
//!
//! `KilnDType` parameters are received as plain `u32` (the `use … as KilnDType` below keeps
//! the header's type name), so an unknown value from C is an error, never undefined behaviour.

#![allow(clippy::missing_safety_doc)]

mod boundary;
mod handles;
mod ops;
mod ops_gen;
mod status_gen;
pub mod types;

use boundary::{call, call_out, cstr, out_ptr, slice, slice_mut, tensor, tensor_array};
use kiln_core::{Error, Kernel, Tensor};
use std::os::raw::{c_char, c_void};
// The header shows `KilnDType`; Rust receives the raw value.
use std::primitive::u32 as KilnDType;
pub use types::{KilnDeviceInfo, KilnKernel, KilnMemoryStats, KilnPipelineStats, KilnStatus, KilnTensor};

// ---------------------------------------------------------------------------------------------
// Versions and errors
// ---------------------------------------------------------------------------------------------

/// The ABI version of the loaded library (compare with KILN_ABI_VERSION from the header).
/// Thread-safe; never fails.
#[no_mangle]
pub extern "C" fn kiln_abi_version() -> u32 {
    types::KILN_ABI_VERSION
}

/// The library version as a static NUL-terminated string, e.g. "0.1.0". Never NULL; the
/// caller must not free it. Thread-safe.
#[no_mangle]
pub extern "C" fn kiln_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}

/// The upper-case name of a status ("OK", "INVALID_ARGUMENT", …, "UNKNOWN" for a value that
/// is not a KilnStatus). A static string: never NULL, never freed. Thread-safe.
#[no_mangle]
pub extern "C" fn kiln_status_name(status: u32) -> *const c_char {
    let s = status_gen::status_name(status);
    s.as_ptr() as *const c_char
}

/// Copies the calling thread's last error message (from the most recent failed Kiln call on
/// this thread; successful calls leave it unchanged) into `buf` as a NUL-terminated UTF-8
/// string, truncated to `len - 1` bytes if needed. The message names the function, e.g.
/// "kiln_add: shape mismatch: …".
///
/// Returns the buffer size needed for the whole message including the terminating NUL (1 when
/// there has been no error), so a caller may ask with `(NULL, 0)` first. `buf` may be NULL
/// only when `len` is 0. Thread-safe (the message is thread-local); never fails.
#[no_mangle]
pub unsafe extern "C" fn kiln_last_error_message(buf: *mut c_char, len: usize) -> usize {
    let (_, msg) = boundary::last_error();
    let bytes = msg.as_bytes();
    if !buf.is_null() && len > 0 {
        let mut n = bytes.len().min(len - 1);
        while n > 0 && n < bytes.len() && !msg.is_char_boundary(n) {
            n -= 1;
        }
        // SAFETY: the caller gives `len` writable bytes at `buf`; n + 1 <= len.
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, n);
        *buf.add(n) = 0;
    }
    bytes.len() + 1
}

/// The status of the calling thread's most recent failed call (KILN_OK if none failed yet).
/// Thread-safe; never fails.
#[no_mangle]
pub extern "C" fn kiln_last_error_status() -> KilnStatus {
    boundary::last_error().0
}

// ---------------------------------------------------------------------------------------------
// Devices, memory, synchronization
// ---------------------------------------------------------------------------------------------

fn copy_str(dst: &mut [c_char], s: &str) {
    let mut n = s.len().min(dst.len().saturating_sub(1));
    while n > 0 && !s.is_char_boundary(n) {
        n -= 1;
    }
    for (d, &b) in dst.iter_mut().zip(&s.as_bytes()[..n]) {
        *d = b as c_char;
    }
    if let Some(last) = dst.get_mut(n) {
        *last = 0;
    }
}

/// Writes the number of adapters Kiln can use to `*out` (0 when there is none; that is not
/// an error here). `out`: non-null. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_device_count(out: *mut usize) -> KilnStatus {
    call("kiln_device_count", || {
        let out = out_ptr(out, "out")?;
        *out = kiln_core::adapters().len();
        Ok(())
    })
}

/// Fills `*out` with adapter `index` (0-based, best first). KILN_ERR_INVALID_ARGUMENT when
/// `index` is out of range. `out`: non-null. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_device_info(index: usize, out: *mut KilnDeviceInfo) -> KilnStatus {
    call("kiln_device_info", || {
        let out = out_ptr(out, "out")?;
        let list = kiln_core::adapters();
        let a = list.get(index).ok_or_else(|| {
            Error::InvalidArgument(format!("device index {index} is out of range ({} adapters)", list.len()))
        })?;
        let mut info = KilnDeviceInfo {
            index: a.index,
            name: [0; 256],
            backend: [0; 16],
            device_type: [0; 16],
            driver: [0; 128],
            vendor: a.vendor,
            device_id: a.device_id,
            max_buffer_size: a.max_buffer_size,
            max_storage_buffer_binding_size: a.max_storage_buffer_binding_size,
            shader_f16: a.shader_f16,
            chosen: a.chosen,
        };
        copy_str(&mut info.name, &a.name);
        copy_str(&mut info.backend, &a.backend);
        copy_str(&mut info.device_type, &a.device_type);
        let driver = if a.driver_info.is_empty() { a.driver.clone() } else { format!("{} {}", a.driver, a.driver_info) };
        copy_str(&mut info.driver, &driver);
        *out = info;
        Ok(())
    })
}

/// Makes the adapter matching `spec` (a decimal index, or a case-insensitive substring of
/// its name) the one every later call in this process uses; writes its index to
/// `*out_index` when `out_index` is non-null. KILN_ERR_NO_ADAPTER when nothing matches.
/// Tensors created before keep their device. `spec`: non-null. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_device_select(spec: *const c_char, out_index: *mut usize) -> KilnStatus {
    call("kiln_device_select", || {
        let spec = cstr(spec, "spec")?;
        let info = kiln_core::select_adapter(spec)?;
        if !out_index.is_null() {
            *out_index = info.index;
        }
        Ok(())
    })
}

/// Submits all queued work on the current device and waits until the GPU has finished it.
/// Thread-safe.
#[no_mangle]
pub extern "C" fn kiln_synchronize() -> KilnStatus {
    call("kiln_synchronize", kiln_core::synchronize)
}

/// Destroys every device this process has created (the way out of a timeout or any other
/// stuck state); the next call that needs a device creates a fresh one. Tensors and kernels
/// made before stay valid handles but answer KILN_ERR_DEVICE_LOST from then on (free them
/// as usual). Thread-safe; work other threads are queuing at the same moment may fail with
/// KILN_ERR_DEVICE_LOST.
#[no_mangle]
pub extern "C" fn kiln_reset_devices() -> KilnStatus {
    call("kiln_reset_devices", || {
        kiln_core::reset_devices();
        Ok(())
    })
}

/// Writes the current device's memory counters to `*out`. `out`: non-null. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_memory_stats(out: *mut KilnMemoryStats) -> KilnStatus {
    call("kiln_memory_stats", || {
        let out = out_ptr(out, "out")?;
        let m = kiln_core::device()?.memory_stats();
        *out = KilnMemoryStats {
            allocated_bytes: m.allocated_bytes,
            in_use_bytes: m.in_use_bytes,
            peak_bytes: m.peak_bytes,
            live_buffers: m.live_buffers,
            pooled_bytes: m.pooled_bytes,
        };
        Ok(())
    })
}

/// Writes the current device's pipeline-cache counters to `*out`. `out`: non-null.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_pipeline_stats(out: *mut KilnPipelineStats) -> KilnStatus {
    call("kiln_pipeline_stats", || {
        let out = out_ptr(out, "out")?;
        let p = kiln_core::device()?.pipeline_stats();
        *out = KilnPipelineStats { pipelines: p.pipelines, hits: p.hits, misses: p.misses, compile_seconds: p.compile_seconds };
        Ok(())
    })
}

/// Returns every pooled (free) GPU buffer of the current device to the driver. Live
/// tensors are untouched. Thread-safe.
#[no_mangle]
pub extern "C" fn kiln_empty_cache() -> KilnStatus {
    call("kiln_empty_cache", || {
        kiln_core::device()?.empty_cache();
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------------------------

fn shape_of<'a>(shape: *const usize, ndim: usize) -> kiln_core::Result<&'a [usize]> {
    if ndim > types::KILN_MAX_NDIM as usize {
        return Err(Error::InvalidArgument(format!("ndim {ndim} is above the maximum rank {}", types::KILN_MAX_NDIM)));
    }
    slice(shape, ndim, "shape")
}

/// Uploads `nbytes` bytes of row-major (C order), little-endian host data as a new tensor of
/// `dtype` and shape `shape[0..ndim]`, and writes it to `*out` (owned by the caller; free it
/// with kiln_tensor_free). `nbytes` must equal the product of the shape times the element
/// size (KILN_ERR_INVALID_ARGUMENT otherwise). `shape` may be NULL when `ndim` is 0 (a
/// scalar); `data` may be NULL when `nbytes` is 0 (an empty tensor). The data is copied:
/// the caller keeps ownership of `data`. On any error `*out` is set to NULL. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensor_from_host(
    dtype: KilnDType,
    shape: *const usize,
    ndim: usize,
    data: *const c_void,
    nbytes: usize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_tensor_from_host", out, || {
        let dt = boundary::dtype(dtype)?;
        let shape = shape_of(shape, ndim)?;
        let bytes = slice(data as *const u8, nbytes, "data")?;
        Tensor::from_bytes(bytes, shape, dt)
    })
}

/// Creates an uninitialised tensor of `dtype` and shape `shape[0..ndim]` (contents are
/// unspecified until written, e.g. by a custom kernel) and writes it to `*out` (owned by the
/// caller). `shape` may be NULL when `ndim` is 0. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensor_empty(dtype: KilnDType, shape: *const usize, ndim: usize, out: *mut *mut KilnTensor) -> KilnStatus {
    call_out("kiln_tensor_empty", out, || Tensor::empty(shape_of(shape, ndim)?, boundary::dtype(dtype)?))
}

/// Waits for the work that produces `t` and copies its contents (row-major, little-endian)
/// into `buf`. `nbytes` must equal the tensor's size in bytes (kiln_tensor_nbytes);
/// KILN_ERR_INVALID_ARGUMENT otherwise. `t`: non-null; `buf` may be NULL only when `nbytes`
/// is 0. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensor_to_host(t: *const KilnTensor, buf: *mut c_void, nbytes: usize) -> KilnStatus {
    call("kiln_tensor_to_host", || {
        let t = &tensor(t, "t")?;
        if nbytes != t.nbytes() {
            return Err(Error::InvalidArgument(format!(
                "a buffer of {nbytes} bytes given for a tensor of {} bytes (shape {:?}, {})",
                t.nbytes(),
                t.shape(),
                t.dtype()
            )));
        }
        let out = slice_mut(buf as *mut u8, nbytes, "buf")?;
        t.read_into(out)
    })
}

/// Releases a tensor; its GPU buffer goes back to Kiln's pool once no pending work uses it.
/// NULL is ignored (KILN_OK). A handle that is not a live tensor (freed already, a kernel, a
/// foreign or garbage pointer) gives KILN_ERR_INVALID_ARGUMENT and changes nothing: handles
/// are table entries, never dereferenced (see KilnTensor). Freeing a tensor while another
/// thread is inside a call that uses it is safe: that call finishes with the tensor, later
/// calls with the handle get KILN_ERR_INVALID_ARGUMENT. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensor_free(t: *mut KilnTensor) -> KilnStatus {
    call("kiln_tensor_free", || {
        if !t.is_null() {
            drop(handles::tensors().remove(t.addr(), "t")?);
        }
        Ok(())
    })
}

/// Writes the rank of `t` (0 to 8) to `*out`. `t`, `out`: non-null. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensor_ndim(t: *const KilnTensor, out: *mut usize) -> KilnStatus {
    call("kiln_tensor_ndim", || {
        let t = &tensor(t, "t")?;
        *out_ptr(out, "out")? = t.ndim();
        Ok(())
    })
}

/// Copies the shape of `t` into `out[0..ndim]`. `len` is the capacity of `out` and must be
/// at least the rank (KILN_ERR_INVALID_ARGUMENT otherwise). `t`: non-null; `out` may be NULL
/// only when `len` is 0. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensor_shape(t: *const KilnTensor, out: *mut usize, len: usize) -> KilnStatus {
    call("kiln_tensor_shape", || {
        let t = &tensor(t, "t")?;
        if len < t.ndim() {
            return Err(Error::InvalidArgument(format!("room for {len} dimensions given for a tensor of rank {}", t.ndim())));
        }
        let out = slice_mut(out, len, "out")?;
        out[..t.ndim()].copy_from_slice(t.shape());
        Ok(())
    })
}

/// Writes the dtype of `t` to `*out`. `t`, `out`: non-null. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensor_dtype(t: *const KilnTensor, out: *mut KilnDType) -> KilnStatus {
    call("kiln_tensor_dtype", || {
        let t = &tensor(t, "t")?;
        *out_ptr(out, "out")? = types::dtype_value(t.dtype());
        Ok(())
    })
}

/// Writes the number of elements of `t` (the product of its shape; 1 for a scalar) to
/// `*out`. `t`, `out`: non-null. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensor_numel(t: *const KilnTensor, out: *mut usize) -> KilnStatus {
    call("kiln_tensor_numel", || {
        let t = &tensor(t, "t")?;
        *out_ptr(out, "out")? = t.numel();
        Ok(())
    })
}

/// Writes the size of `t` in bytes (numel times the element size) to `*out`. `t`, `out`:
/// non-null. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensor_nbytes(t: *const KilnTensor, out: *mut usize) -> KilnStatus {
    call("kiln_tensor_nbytes", || {
        let t = &tensor(t, "t")?;
        *out_ptr(out, "out")? = t.nbytes();
        Ok(())
    })
}

/// Writes the size in bytes of one element of `dtype` to `*out`. `out`: non-null.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_dtype_size(dtype: KilnDType, out: *mut usize) -> KilnStatus {
    call("kiln_dtype_size", || {
        let d = boundary::dtype(dtype)?;
        *out_ptr(out, "out")? = d.size();
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Custom kernels
// ---------------------------------------------------------------------------------------------

/// Compiles the WGSL compute shader `source` with entry point `entry` on the current device
/// and writes the kernel to `*out` (owned by the caller; free it with kiln_kernel_free).
/// A parse or validation error is KILN_ERR_SHADER with "line:column: …" in the message.
/// Storage buffers and at most one uniform buffer in @group(0) are supported. Compiled
/// pipelines are cached, so compiling the same source again is cheap. `source`, `entry`,
/// `out`: non-null, NUL-terminated UTF-8. On error `*out` is set to NULL. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_kernel_compile(source: *const c_char, entry: *const c_char, out: *mut *mut KilnKernel) -> KilnStatus {
    call("kiln_kernel_compile", || {
        let out = out_ptr(out, "out")?;
        *out = std::ptr::null_mut();
        let src = cstr(source, "source")?;
        let entry = cstr(entry, "entry")?;
        *out = boundary::new_kernel(Kernel::new(src, entry)?)?;
        Ok(())
    })
}

/// Queues one dispatch of `kernel` with `x * y * z` workgroups. `tensors[0..ntensors]` are
/// bound, in binding-number order, to the kernel's storage buffers (count, element type and
/// minimum size are checked); `uniforms[0..uniforms_len]` (at most 1024 bytes) to its uniform
/// buffer. Pass `uniforms = NULL, uniforms_len = 0` for a kernel without one. Tensors bound
/// to writable bindings are written in place; read them back with kiln_tensor_to_host.
/// `kernel`: non-null; `tensors` may be NULL only when `ntensors` is 0, and none of its
/// entries may be NULL. The arrays are not retained after the call. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_kernel_dispatch(
    kernel: *const KilnKernel,
    tensors: *const *const KilnTensor,
    ntensors: usize,
    uniforms: *const c_void,
    uniforms_len: usize,
    x: u32,
    y: u32,
    z: u32,
) -> KilnStatus {
    call("kiln_kernel_dispatch", || {
        let k = boundary::kernel(kernel, "kernel")?;
        let held = tensor_array(tensors, ntensors)?;
        let ts: Vec<&Tensor> = held.iter().map(|t| &**t).collect();
        let u = if uniforms.is_null() {
            if uniforms_len != 0 {
                return Err(Error::NullPointer(format!("uniforms is NULL but uniforms_len is {uniforms_len}")));
            }
            None
        } else {
            Some(slice(uniforms as *const u8, uniforms_len, "uniforms")?)
        };
        k.dispatch(&ts, u, [x, y, z])
    })
}

/// Releases a kernel. NULL is ignored (KILN_OK). Dispatches already queued still run, and
/// so does a dispatch another thread is making with it. A handle that is not a live kernel
/// (freed already, a tensor, a foreign or garbage pointer) gives KILN_ERR_INVALID_ARGUMENT
/// and changes nothing; later dispatches with a freed kernel get KILN_ERR_INVALID_ARGUMENT.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_kernel_free(kernel: *mut KilnKernel) -> KilnStatus {
    call("kiln_kernel_free", || {
        if !kernel.is_null() {
            drop(handles::kernels().remove(kernel.addr(), "kernel")?);
        }
        Ok(())
    })
}

#[allow(dead_code)]
fn assert_thread_safe() {
    fn is<T: Send + Sync>() {}
    is::<Tensor>();
    is::<Kernel>();
}

