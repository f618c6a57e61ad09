//! Every op of kiln-core with its own signature, one C function each, with the same name. Each
//! is a pointer check and a call: the op logic lives in kiln-core. The unary and binary ops are
//! generated from kiln-core's tables into ops_gen.rs (`make gen`).

use crate::boundary::{call, call_out, cstr, opt_tensor, opt_value, slice, tensor, tensor_array};
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

fn axes<'a>(axes: *const isize, naxes: usize) -> kiln_core::Result<Option<&'a [isize]>> {
    if axes.is_null() && naxes == 0 {
        Ok(None)
    } else {
        slice(axes, naxes, "axes").map(Some)
    }
}

fn reduce(
    name: &str,
    x: *const KilnTensor,
    ax: *const isize,
    naxes: usize,
    keepdims: bool,
    out: Out,
    f: fn(&Tensor, Option<&[isize]>, bool) -> kiln_core::Result<Tensor>,
) -> KilnStatus {
    call_out(name, out, || f(&*tensor(x, "x")?, axes(ax, naxes)?, keepdims))
}

fn shape<'a>(shape: *const usize, ndim: usize) -> kiln_core::Result<&'a [usize]> {
    slice(shape, ndim, "shape")
}

// ---- select and cast (the unary and binary ops are in ops_gen.rs) -----------------------------

/// `cond ? a : b` elementwise, broadcasting all three (numpy `where`); `cond` is KILN_BOOL, or
/// any dtype true where non-zero; `a` and `b` must have one dtype. `cond`, `a`, `b`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_where(
    cond: *const KilnTensor,
    a: *const KilnTensor,
    b: *const KilnTensor,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_where", out, || ops::where_(&*tensor(cond, "cond")?, &*tensor(a, "a")?, &*tensor(b, "b")?))
}

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

/// Converts `x` to `dtype` (float to integer truncates toward zero, saturating). `x`, `out`:
/// non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_cast(x: *const KilnTensor, dtype: KilnDType, out: *mut *mut KilnTensor) -> KilnStatus {
    call_out("kiln_cast", out, || ops::cast(&*tensor(x, "x")?, crate::boundary::dtype(dtype)?))
}

// ---- creation -------------------------------------------------------------------------------

/// A new tensor with the contents of `x` (a GPU-side copy). `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_copy(x: *const KilnTensor, out: *mut *mut KilnTensor) -> KilnStatus {
    unary("kiln_copy", x, out, ops::copy)
}

/// A tensor of shape `shape[0..ndim]` and `dtype` filled with `value` (converted to the
/// dtype). `shape` may be NULL when `ndim` is 0. `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_full(
    shape: *const usize,
    ndim: usize,
    dtype: KilnDType,
    value: f64,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_full", out, || ops::full(self::shape(shape, ndim)?, crate::boundary::dtype(dtype)?, value))
}

/// kiln_full with 0. `shape` may be NULL when `ndim` is 0. `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_zeros(
    shape: *const usize,
    ndim: usize,
    dtype: KilnDType,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_zeros", out, || ops::zeros(self::shape(shape, ndim)?, crate::boundary::dtype(dtype)?))
}

/// kiln_full with 1. `shape` may be NULL when `ndim` is 0. `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_ones(
    shape: *const usize,
    ndim: usize,
    dtype: KilnDType,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_ones", out, || ops::ones(self::shape(shape, ndim)?, crate::boundary::dtype(dtype)?))
}

/// Overwrites every element of `x` with `value` (in place; queued like any op). `x`:
/// non-null. Thread-safe, but racing writes to one tensor have no defined order.
#[no_mangle]
pub unsafe extern "C" fn kiln_fill(x: *const KilnTensor, value: f64) -> KilnStatus {
    call("kiln_fill", || ops::fill(&*tensor(x, "x")?, value))
}

/// `start, start + step, …` below `stop` (numpy `arange`) as a 1-D tensor of `dtype`.
/// `step` must be non-zero and all three finite. `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_arange(
    start: f64,
    stop: f64,
    step: f64,
    dtype: KilnDType,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_arange", out, || ops::arange(start, stop, step, crate::boundary::dtype(dtype)?))
}

// ---- random ---------------------------------------------------------------------------------

/// Uniform random numbers in [low, high) of shape `shape[0..ndim]` (float dtypes). Counter
/// based: the same `seed` gives the same numbers on every device. `shape` may be NULL when
/// `ndim` is 0. `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_random_uniform(
    shape: *const usize,
    ndim: usize,
    dtype: KilnDType,
    seed: u64,
    low: f64,
    high: f64,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_random_uniform", out, || {
        ops::random_uniform(self::shape(shape, ndim)?, crate::boundary::dtype(dtype)?, seed, low, high)
    })
}

/// Normal random numbers with mean `mean` and standard deviation `std` (float dtypes), as
/// kiln_random_uniform. `shape` may be NULL when `ndim` is 0. `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_random_normal(
    shape: *const usize,
    ndim: usize,
    dtype: KilnDType,
    seed: u64,
    mean: f64,
    std: f64,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_random_normal", out, || {
        ops::random_normal(self::shape(shape, ndim)?, crate::boundary::dtype(dtype)?, seed, mean, std)
    })
}

// ---- matmul ---------------------------------------------------------------------------------

/// Matrix product with numpy `matmul` rules: 1-D operands are promoted, batch dimensions
/// broadcast; [.., M, K] x [.., K, N] gives [.., M, N]. `a`, `b`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_matmul(
    a: *const KilnTensor,
    b: *const KilnTensor,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    binary("kiln_matmul", a, b, out, ops::matmul)
}

// ---- reductions -----------------------------------------------------------------------------

/// Sum over the axes `axes[0..naxes]` (negative counts from the end; `axes = NULL, naxes = 0`
/// reduces every axis). With `keepdims` the reduced axes stay with size 1. `x`, `out`:
/// non-null; `axes` may be NULL only when `naxes` is 0. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_sum(
    x: *const KilnTensor,
    axes: *const isize,
    naxes: usize,
    keepdims: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    reduce("kiln_sum", x, axes, naxes, keepdims, out, ops::sum)
}

/// Mean over the axes `axes[0..naxes]` (negative counts from the end; `axes = NULL, naxes = 0`
/// reduces every axis). With `keepdims` the reduced axes stay with size 1. `x`, `out`:
/// non-null; `axes` may be NULL only when `naxes` is 0. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_mean(
    x: *const KilnTensor,
    axes: *const isize,
    naxes: usize,
    keepdims: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    reduce("kiln_mean", x, axes, naxes, keepdims, out, ops::mean)
}

/// Maximum over the axes `axes[0..naxes]` (negative counts from the end; `axes = NULL, naxes = 0`
/// reduces every axis). With `keepdims` the reduced axes stay with size 1. `x`, `out`:
/// non-null; `axes` may be NULL only when `naxes` is 0. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_max(
    x: *const KilnTensor,
    axes: *const isize,
    naxes: usize,
    keepdims: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    reduce("kiln_max", x, axes, naxes, keepdims, out, ops::max)
}

/// Whether every element over the axes `axes[0..naxes]` is true (non-zero, NaN included) as a
/// KILN_BOOL tensor; true over an empty axis (negative axes count from the end; `axes = NULL,
/// naxes = 0` reduces every axis). With `keepdims` the reduced axes stay with size 1. `x`, `out`:
/// non-null; `axes` may be NULL only when `naxes` is 0. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_all(
    x: *const KilnTensor,
    axes: *const isize,
    naxes: usize,
    keepdims: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    reduce("kiln_all", x, axes, naxes, keepdims, out, ops::all)
}

/// Whether some element over the axes `axes[0..naxes]` is true (non-zero, NaN included) as a
/// KILN_BOOL tensor; false over an empty axis (negative axes count from the end; `axes = NULL,
/// naxes = 0` reduces every axis). With `keepdims` the reduced axes stay with size 1. `x`, `out`:
/// non-null; `axes` may be NULL only when `naxes` is 0. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_any(
    x: *const KilnTensor,
    axes: *const isize,
    naxes: usize,
    keepdims: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    reduce("kiln_any", x, axes, naxes, keepdims, out, ops::any)
}

/// Minimum over the axes `axes[0..naxes]` (negative counts from the end; `axes = NULL, naxes = 0`
/// reduces every axis). With `keepdims` the reduced axes stay with size 1. `x`, `out`:
/// non-null; `axes` may be NULL only when `naxes` is 0. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_min(
    x: *const KilnTensor,
    axes: *const isize,
    naxes: usize,
    keepdims: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    reduce("kiln_min", x, axes, naxes, keepdims, out, ops::min)
}

/// Variance over `axes[0..naxes]` (as kiln_sum) with `ddof` delta degrees of freedom (0:
/// population, 1: sample). `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_var(
    x: *const KilnTensor,
    axes: *const isize,
    naxes: usize,
    keepdims: bool,
    ddof: usize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_var", out, || ops::var(&*tensor(x, "x")?, self::axes(axes, naxes)?, keepdims, ddof))
}

/// Index (i32) of the largest element along `*axis`, or in the flattened tensor when `axis` is
/// NULL (ties: the first). With `keepdims` the reduced axis stays with size 1. `x`, `out`:
/// non-null; `axis` nullable. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_argmax(
    x: *const KilnTensor,
    axis: *const isize,
    keepdims: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_argmax", out, || ops::argmax(&*tensor(x, "x")?, opt_value(axis), keepdims))
}

/// Index (i32) of the smallest element along `*axis`, or in the flattened tensor when `axis` is
/// NULL (ties: the first). With `keepdims` the reduced axis stays with size 1. `x`, `out`:
/// non-null; `axis` nullable. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_argmin(
    x: *const KilnTensor,
    axis: *const isize,
    keepdims: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_argmin", out, || ops::argmin(&*tensor(x, "x")?, opt_value(axis), keepdims))
}

// ---- normalization --------------------------------------------------------------------------

/// Softmax along `axis` (negative counts from the end). `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_softmax(x: *const KilnTensor, axis: isize, out: *mut *mut KilnTensor) -> KilnStatus {
    call_out("kiln_softmax", out, || ops::softmax(&*tensor(x, "x")?, axis))
}

/// Log-softmax along `axis`. `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_log_softmax(x: *const KilnTensor, axis: isize, out: *mut *mut KilnTensor) -> KilnStatus {
    call_out("kiln_log_softmax", out, || ops::log_softmax(&*tensor(x, "x")?, axis))
}

/// Layer normalization over the last axis: (x - mean) / sqrt(var + eps) * weight + bias.
/// `weight` and `bias` (shape [last dim]) are optional (NULL = 1 and 0). `x`, `out`:
/// non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_layer_norm(
    x: *const KilnTensor,
    weight: *const KilnTensor,
    bias: *const KilnTensor,
    eps: f32,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_layer_norm", out, || {
        ops::layer_norm(
            &*tensor(x, "x")?,
            opt_tensor(weight, "weight")?.as_deref(),
            opt_tensor(bias, "bias")?.as_deref(),
            eps,
        )
    })
}

/// RMS normalization over the last axis: x / sqrt(mean(x^2) + eps) * weight. `weight`
/// optional (NULL = 1). `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_rms_norm(
    x: *const KilnTensor,
    weight: *const KilnTensor,
    eps: f32,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_rms_norm", out, || ops::rms_norm(&*tensor(x, "x")?, opt_tensor(weight, "weight")?.as_deref(), eps))
}

/// Batch normalization (inference) of `x` [N, C, ...] with per-channel `mean` and `var` [C]
/// and optional `weight`, `bias` [C] (NULL = 1 and 0). `x`, `mean`, `var`, `out`: non-null.
/// `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_batch_norm(
    x: *const KilnTensor,
    mean: *const KilnTensor,
    var: *const KilnTensor,
    weight: *const KilnTensor,
    bias: *const KilnTensor,
    eps: f32,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_batch_norm", out, || {
        ops::batch_norm(
            &*tensor(x, "x")?,
            &*tensor(mean, "mean")?,
            &*tensor(var, "var")?,
            opt_tensor(weight, "weight")?.as_deref(),
            opt_tensor(bias, "bias")?.as_deref(),
            eps,
        )
    })
}

// ---- convolution and pooling ----------------------------------------------------------------

/// 2-D convolution (cross-correlation, as PyTorch) of `x` [N, C, H, W] with `w`
/// [O, C/groups, KH, KW] and optional `bias` [O] (NULL = none); gives [N, O, OH, OW].
/// Strides and dilations must be >= 1, `groups` must divide C and O. `x`, `w`, `out`:
/// non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_conv2d(
    x: *const KilnTensor,
    w: *const KilnTensor,
    bias: *const KilnTensor,
    stride_h: usize,
    stride_w: usize,
    pad_h: usize,
    pad_w: usize,
    dilation_h: usize,
    dilation_w: usize,
    groups: usize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_conv2d", out, || {
        ops::conv2d(
            &*tensor(x, "x")?,
            &*tensor(w, "w")?,
            opt_tensor(bias, "bias")?.as_deref(),
            [stride_h, stride_w],
            [pad_h, pad_w],
            [dilation_h, dilation_w],
            groups,
        )
    })
}

/// Max pooling (padding never wins) of `x` [N, C, H, W] with a `kernel_h` x `kernel_w` window. `x`, `out`: non-null.
/// `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_max_pool2d(
    x: *const KilnTensor,
    kernel_h: usize,
    kernel_w: usize,
    stride_h: usize,
    stride_w: usize,
    pad_h: usize,
    pad_w: usize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_max_pool2d", out, || {
        ops::max_pool2d(&*tensor(x, "x")?, [kernel_h, kernel_w], [stride_h, stride_w], [pad_h, pad_w])
    })
}

/// Average pooling (padding counts in the average, as PyTorch's default) of `x` [N, C, H, W] with a `kernel_h` x `kernel_w` window. `x`, `out`: non-null.
/// `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_avg_pool2d(
    x: *const KilnTensor,
    kernel_h: usize,
    kernel_w: usize,
    stride_h: usize,
    stride_w: usize,
    pad_h: usize,
    pad_w: usize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_avg_pool2d", out, || {
        ops::avg_pool2d(&*tensor(x, "x")?, [kernel_h, kernel_w], [stride_h, stride_w], [pad_h, pad_w])
    })
}

// ---- movement -------------------------------------------------------------------------------

/// The same data with shape `shape[0..ndim]` (no copy; one entry may be -1 and is
/// inferred). The result shares `x`'s buffer but is a separate handle to free. `x`, `out`:
/// non-null; `shape` may be NULL when `ndim` is 0. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_reshape(
    x: *const KilnTensor,
    shape: *const isize,
    ndim: usize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_reshape", out, || ops::reshape(&*tensor(x, "x")?, slice(shape, ndim, "shape")?))
}

/// Permutes the axes: result axis i is `x` axis `axes[i]` (`naxes` must equal the rank).
/// `x`, `out`: non-null; `axes` may be NULL when `naxes` is 0. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_permute(
    x: *const KilnTensor,
    axes: *const isize,
    naxes: usize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_permute", out, || ops::permute(&*tensor(x, "x")?, slice(axes, naxes, "axes")?))
}

/// Swaps axes `axis0` and `axis1`. `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_transpose(
    x: *const KilnTensor,
    axis0: isize,
    axis1: isize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_transpose", out, || ops::transpose(&*tensor(x, "x")?, axis0, axis1))
}

/// Joins `tensors[0..n]` (n >= 1, one dtype, equal shapes except along `axis`) along `axis`.
/// `tensors`, its entries and `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_concat(
    tensors: *const *const KilnTensor,
    n: usize,
    axis: isize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_concat", out, || {
        let held = tensor_array(tensors, n)?;
        let ts: Vec<&Tensor> = held.iter().map(|t| &**t).collect();
        ops::concat(&ts, axis)
    })
}

/// `x[start:stop:step]` along `axis` (numpy clamping of start/stop, negative values count
/// from the end, `step` >= 1). `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_slice(
    x: *const KilnTensor,
    axis: isize,
    start: isize,
    stop: isize,
    step: isize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_slice", out, || ops::slice(&*tensor(x, "x")?, axis, start, stop, step))
}

/// Picks entries along `axis` by the 1-D i32/u32 `indices` (numpy `take`; out-of-range
/// indices read as 0). `x`, `indices`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_index_select(
    x: *const KilnTensor,
    axis: isize,
    indices: *const KilnTensor,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_index_select", out, || ops::index_select(&*tensor(x, "x")?, axis, &*tensor(indices, "indices")?))
}

/// torch.gather along `axis`: `index` (i32/u32) has `x`'s rank and gives the result's shape.
/// `x`, `index`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_gather(
    x: *const KilnTensor,
    axis: isize,
    index: *const KilnTensor,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_gather", out, || ops::gather(&*tensor(x, "x")?, axis, &*tensor(index, "index")?))
}

// ---- nn -------------------------------------------------------------------------------------

/// Rows of `weight` [V, D] picked by `ids` (i32/u32, any shape): gives [..ids, D].
/// `weight`, `ids`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_embedding(
    weight: *const KilnTensor,
    ids: *const KilnTensor,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_embedding", out, || ops::embedding(&*tensor(weight, "weight")?, &*tensor(ids, "ids")?))
}

/// Rotary position embedding of `x` [..., L, D] (rotate-half pairs (i, i + D/2), angle
/// (pos_offset + l) * base^(-2i/D)). `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_rope(
    x: *const KilnTensor,
    pos_offset: usize,
    base: f32,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_rope", out, || ops::rope(&*tensor(x, "x")?, pos_offset, base))
}

/// Scaled dot-product attention: softmax(q k^T * scale [+ causal mask]) v for q [..., Lq, D],
/// k [..., Lk, D], v [..., Lk, Dv]. `*scale` when `scale` is non-null, else 1/sqrt(D);
/// `causal` masks key j > query i. `q`, `k`, `v`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_attention(
    q: *const KilnTensor,
    k: *const KilnTensor,
    v: *const KilnTensor,
    causal: bool,
    scale: *const f32,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_attention", out, || {
        ops::attention(&*tensor(q, "q")?, &*tensor(k, "k")?, &*tensor(v, "v")?, causal, opt_value(scale))
    })
}

// ---- quant: GGUF block formats kept quantized on the GPU -------------------------------------

fn quant_format(format: *const c_char) -> kiln_core::Result<ops::QuantFormat> {
    ops::QuantFormat::parse(cstr(format, "format")?)
}

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

/// `x` [rows, cols] (f32/f16, cols a multiple of 32) quantized in `format` as ggml's reference
/// quantizer does: the u32 tensor of its GGUF bytes. `x`, `format`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_quantize(
    x: *const KilnTensor,
    format: *const c_char,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_quantize", out, || ops::quantize(&*tensor(x, "x")?, quant_format(format)?))
}

/// f32 [rows, cols] from the quantized matrix `w` (u32) in `format`. `w`, `format`, `out`:
/// non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_dequantize(
    w: *const KilnTensor,
    format: *const c_char,
    rows: usize,
    cols: usize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_dequantize", out, || ops::dequantize(&*tensor(w, "w")?, quant_format(format)?, rows, cols))
}

/// `x` [..., K] (f32/f16) times W^T for `w` quantized [n, K] in `format` (nn.Linear's layout):
/// [..., n] in x's dtype, accumulated in f32. `x`, `w`, `format`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_quant_matmul(
    x: *const KilnTensor,
    w: *const KilnTensor,
    format: *const c_char,
    n: usize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_quant_matmul", out, || {
        ops::quant_matmul(&*tensor(x, "x")?, &*tensor(w, "w")?, quant_format(format)?, n)
    })
}

/// Rows of the quantized table `w` [V, d] in `format` picked by `ids` (i32/u32, any shape):
/// f32 [..ids, d]; ids outside [0, V) give zeros. `w`, `format`, `ids`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_quant_embedding(
    w: *const KilnTensor,
    format: *const c_char,
    d: usize,
    ids: *const KilnTensor,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_quant_embedding", out, || {
        ops::quant_embedding(&*tensor(w, "w")?, quant_format(format)?, d, &*tensor(ids, "ids")?)
    })
}

// ---- searching, sorting and sets --------------------------------------------------------------

/// `x` sorted along `axis` (negative counts from the end), ascending or `descending`, stable:
/// NaNs last ascending, first descending (the exact reverse order, ties still in index order).
/// `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_sort(
    x: *const KilnTensor,
    axis: isize,
    descending: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_sort", out, || ops::sort(&*tensor(x, "x")?, axis, descending))
}

/// The i32 indices that sort `x` along `axis` (as kiln_sort; ties keep index order).
/// `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_argsort(
    x: *const KilnTensor,
    axis: isize,
    descending: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_argsort", out, || ops::argsort(&*tensor(x, "x")?, axis, descending))
}

/// numpy searchsorted: i32 insertion points of each element of `x2` in the sorted 1-D `x1` (of
/// x2's dtype), before equal elements or, with `right`, after them. `x1`, `x2`, `out`: non-null.
/// `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_searchsorted(
    x1: *const KilnTensor,
    x2: *const KilnTensor,
    right: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_searchsorted", out, || ops::searchsorted(&*tensor(x1, "x1")?, &*tensor(x2, "x2")?, right))
}

/// The number (i32) of non-zero elements over `axes[0..naxes]` (as kiln_sum). `x`, `out`:
/// non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_count_nonzero(
    x: *const KilnTensor,
    axes: *const isize,
    naxes: usize,
    keepdims: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    reduce("kiln_count_nonzero", x, axes, naxes, keepdims, out, ops::count_nonzero)
}

/// Runs `f` and hands its tensors to the caller through `outs` (each non-null; each set to NULL
/// first, and left NULL on error).
fn call_outs(func: &str, outs: &[Out], f: impl FnOnce() -> kiln_core::Result<Vec<Tensor>>) -> KilnStatus {
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

/// numpy nonzero: `outs[d]` receives the i32 coordinates along dimension d of the non-zero
/// elements (NaN counts), in row-major order; `nouts` must be x's rank (at least 1). The count
/// is read back to the host (the output size depends on the data). `x`, `outs` and each
/// `outs[d]`: non-null. Each `*outs[d]` is a new tensor owned by the caller (free it with kiln_tensor_free), NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_nonzero(
    x: *const KilnTensor,
    outs: *const *mut *mut KilnTensor,
    nouts: usize,
) -> KilnStatus {
    let outs = match slice(outs, nouts, "outs") {
        Ok(o) => o,
        Err(e) => return call("kiln_nonzero", || Err(e)),
    };
    call_outs("kiln_nonzero", outs, || {
        let x = tensor(x, "x")?;
        if nouts != x.ndim() {
            return Err(kiln_core::Error::InvalidArgument(format!(
                "nouts is {nouts} but x has rank {} (one output per dimension)",
                x.ndim()
            )));
        }
        ops::nonzero(&x)
    })
}

/// The Array API's unique_all of `x` (flattened): the distinct values sorted (-0 == +0; each NaN
/// distinct), the i32 flat index of each one's first occurrence, the i32 index into values of
/// every element of x (x's shape) and the i32 counts. The count of values is read back to the
/// host. Every pointer: non-null; each `*out` is a new tensor owned by the caller (free it with kiln_tensor_free), NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_unique_all(
    x: *const KilnTensor,
    values: *mut *mut KilnTensor,
    indices: *mut *mut KilnTensor,
    inverse_indices: *mut *mut KilnTensor,
    counts: *mut *mut KilnTensor,
) -> KilnStatus {
    call_outs("kiln_unique_all", &[values, indices, inverse_indices, counts], || {
        let u = ops::unique_all(&*tensor(x, "x")?)?;
        Ok(vec![u.values, u.indices, u.inverse_indices, u.counts])
    })
}

/// kiln_unique_all's values and counts. Every pointer: non-null; each `*out` is a new tensor owned by the caller (free it with kiln_tensor_free), NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_unique_counts(
    x: *const KilnTensor,
    values: *mut *mut KilnTensor,
    counts: *mut *mut KilnTensor,
) -> KilnStatus {
    call_outs("kiln_unique_counts", &[values, counts], || {
        let (v, c) = ops::unique_counts(&*tensor(x, "x")?)?;
        Ok(vec![v, c])
    })
}

/// kiln_unique_all's values and inverse indices. Every pointer: non-null; each `*out` is a new tensor owned by the caller (free it with kiln_tensor_free), NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_unique_inverse(
    x: *const KilnTensor,
    values: *mut *mut KilnTensor,
    inverse_indices: *mut *mut KilnTensor,
) -> KilnStatus {
    call_outs("kiln_unique_inverse", &[values, inverse_indices], || {
        let (v, i) = ops::unique_inverse(&*tensor(x, "x")?)?;
        Ok(vec![v, i])
    })
}

/// kiln_unique_all's values: the distinct values of `x`, sorted. `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_unique_values(x: *const KilnTensor, out: *mut *mut KilnTensor) -> KilnStatus {
    call_out("kiln_unique_values", out, || ops::unique_values(&*tensor(x, "x")?))
}

/// Whether each element of `x1` equals an element of `x2` (bool, x1's shape; one dtype; NaN is
/// never found); `invert` negates. `x1`, `x2`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_isin(
    x1: *const KilnTensor,
    x2: *const KilnTensor,
    invert: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_isin", out, || ops::isin(&*tensor(x1, "x1")?, &*tensor(x2, "x2")?, invert))
}

// ---- scans ----------------------------------------------------------------------------------

/// The optional dtype of a scan: NULL keeps x's.
unsafe fn opt_dtype(dtype: *const KilnDType) -> kiln_core::Result<Option<kiln_core::DType>> {
    opt_value(dtype).map(crate::boundary::dtype).transpose()
}

/// Cumulative sum along `*axis` (negative counts from the end; `axis` may be NULL only for a
/// 1-D `x`), in `*dtype` (NULL: x's dtype; x is converted first), with a leading 0 (the run one
/// longer) when `include_initial`. Integer sums wrap. `x`, `out`: non-null; `axis`, `dtype`
/// nullable. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_cumulative_sum(
    x: *const KilnTensor,
    axis: *const isize,
    dtype: *const KilnDType,
    include_initial: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_cumulative_sum", out, || {
        ops::cumulative_sum(&*tensor(x, "x")?, opt_value(axis), opt_dtype(dtype)?, include_initial)
    })
}

/// Cumulative product, as kiln_cumulative_sum (a leading 1 when `include_initial`). `x`, `out`:
/// non-null; `axis`, `dtype` nullable. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_cumulative_prod(
    x: *const KilnTensor,
    axis: *const isize,
    dtype: *const KilnDType,
    include_initial: bool,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_cumulative_prod", out, || {
        ops::cumulative_prod(&*tensor(x, "x")?, opt_value(axis), opt_dtype(dtype)?, include_initial)
    })
}

// ---- statistics -----------------------------------------------------------------------------

/// Product over the axes `axes[0..naxes]` (as kiln_sum) in `*dtype` (NULL: x's dtype; x is
/// converted first). Integer products wrap; an empty axis gives 1. `x`, `out`: non-null;
/// `axes` may be NULL only when `naxes` is 0; `dtype` nullable. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_prod(
    x: *const KilnTensor,
    axes: *const isize,
    naxes: usize,
    keepdims: bool,
    dtype: *const KilnDType,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_prod", out, || ops::prod(&*tensor(x, "x")?, self::axes(axes, naxes)?, keepdims, opt_dtype(dtype)?))
}

/// Standard deviation over `axes[0..naxes]` (as kiln_var, whose square root it is) with `ddof`
/// delta degrees of freedom. `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_std(
    x: *const KilnTensor,
    axes: *const isize,
    naxes: usize,
    keepdims: bool,
    ddof: usize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_std", out, || ops::std(&*tensor(x, "x")?, self::axes(axes, naxes)?, keepdims, ddof))
}

/// The `n`-th forward difference along `axis` (negative counts from the end): `x[1:] - x[:-1]`
/// `n` times, after joining `prepend` and `append` (nullable; x's dtype and shape but for the
/// axis) at either end. `x`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_diff(
    x: *const KilnTensor,
    axis: isize,
    n: usize,
    prepend: *const KilnTensor,
    append: *const KilnTensor,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_diff", out, || {
        let (p, a) = (opt_tensor(prepend, "prepend")?, opt_tensor(append, "append")?);
        ops::diff(&*tensor(x, "x")?, axis, n, p.as_deref(), a.as_deref())
    })
}

// ---- linear algebra lowered to matmul / reductions ------------------------------------------

/// Dot product of the vectors along `axis` (negative counts from the end of the broadcast
/// shape): `sum(x1 * x2, axis)` with broadcasting; the sizes along the axis must be equal.
/// `x1`, `x2`, `out`: non-null. `*out` receives a new tensor owned by the caller (free it with kiln_tensor_free); it is set to NULL on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_vecdot(
    x1: *const KilnTensor,
    x2: *const KilnTensor,
    axis: isize,
    out: *mut *mut KilnTensor,
) -> KilnStatus {
    call_out("kiln_vecdot", out, || ops::vecdot(&*tensor(x1, "x1")?, &*tensor(x2, "x2")?, axis))
}

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
