//! The C-visible types of the ABI. Everything here is part of `include/kiln.h`.

#![allow(non_camel_case_types)]

use std::os::raw::c_char;

/// Status of every Kiln call. The numbers are stable and shared by every binding
/// (docs/DESIGN.md, "Errors"); new codes may be added, existing ones never change.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KilnStatus {
    /// Success.
    KILN_OK = 0,
    /// A bad value: axis out of range, negative size, unknown dtype, wrong buffer length.
    KILN_ERR_INVALID_ARGUMENT = 1,
    /// A required pointer was NULL.
    KILN_ERR_NULL_POINTER = 2,
    /// Shapes do not broadcast or multiply.
    KILN_ERR_SHAPE_MISMATCH = 3,
    /// dtypes differ or are not supported by the op.
    KILN_ERR_DTYPE_MISMATCH = 4,
    /// The device or the pool could not allocate.
    KILN_ERR_OUT_OF_MEMORY = 5,
    /// A configured limit was hit.
    KILN_ERR_QUOTA_EXCEEDED = 6,
    /// WGSL failed to parse or validate (the message has line:column).
    KILN_ERR_SHADER = 7,
    /// The device was lost.
    KILN_ERR_DEVICE_LOST = 8,
    /// No adapter matched.
    KILN_ERR_NO_ADAPTER = 9,
    /// The work ran past its time limit.
    KILN_ERR_TIMEOUT = 10,
    /// The adapter lacks a feature (e.g. f16).
    KILN_ERR_UNSUPPORTED = 11,
    /// An internal panic was caught at the boundary (a bug in Kiln: please report it).
    KILN_ERR_PANIC = 12,
    /// Anything else.
    KILN_ERR_INTERNAL = 13,
}

/// Element types. The numbers are stable. Functions that take a `KilnDType` accept any
/// 32-bit value and return KILN_ERR_INVALID_ARGUMENT for one that is not listed here.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KilnDType {
    /// 32-bit IEEE float (`float`).
    KILN_F32 = 0,
    /// 16-bit IEEE float (raw `uint16_t` bits on the host); needs an adapter with SHADER_F16.
    KILN_F16 = 1,
    /// 32-bit signed integer (`int32_t`).
    KILN_I32 = 2,
    /// 32-bit unsigned integer (`uint32_t`); comparisons produce it (0 or 1).
    KILN_U32 = 3,
}

/// A tensor: a dtype, a shape (rank 0 to 8, row-major) and a GPU buffer. Opaque.
/// Created by kiln_tensor_from_host, kiln_tensor_empty and every op; owned by the caller
/// and released with kiln_tensor_free. A tensor may be read (used as an op input, read
/// back) from several threads at once.
///
/// A `KilnTensor *` is a handle, not an address: never dereference it. Kiln looks every
/// handle up in a process-wide table, so a freed, foreign or garbage handle (or a kernel
/// handle) gives KILN_ERR_INVALID_ARGUMENT, never a crash, and a freed handle never names a
/// newer tensor. Freeing a tensor another thread is using is safe (that call keeps it alive
/// until it returns).
pub struct KilnTensor {
    _handle_only: (),
}

/// A compiled custom WGSL compute kernel. Opaque. Created by kiln_kernel_compile, released
/// with kiln_kernel_free; may be dispatched from several threads at once. Like KilnTensor,
/// a `KilnKernel *` is a checked handle, not an address.
pub struct KilnKernel {
    _handle_only: (),
}

/// One adapter as listed by kiln_device_info. Strings are NUL-terminated UTF-8 and are
/// truncated to fit.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct KilnDeviceInfo {
    /// Index to pass to kiln_device_select (as a decimal string) and kiln_device_info.
    pub index: usize,
    /// Adapter name, e.g. "llvmpipe (LLVM 19.1.7, 256 bits)".
    pub name: [c_char; 256],
    /// "vulkan", "metal", "dx12" or "gl".
    pub backend: [c_char; 16],
    /// "DiscreteGpu", "IntegratedGpu", "VirtualGpu", "Cpu" or "Other".
    pub device_type: [c_char; 16],
    /// Driver name and version as reported by the adapter.
    pub driver: [c_char; 128],
    /// PCI vendor id.
    pub vendor: u32,
    /// PCI device id.
    pub device_id: u32,
    /// Largest buffer the adapter can create, in bytes.
    pub max_buffer_size: u64,
    /// Largest storage-buffer binding, in bytes (the largest tensor an op can bind).
    pub max_storage_buffer_binding_size: u64,
    /// Whether f16 tensors are supported.
    pub shader_f16: bool,
    /// Whether this is the adapter Kiln uses (the default or the selected one).
    pub chosen: bool,
}

/// GPU memory held by Kiln on the current device (see kiln_memory_stats).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct KilnMemoryStats {
    /// Bytes of every GPU buffer Kiln holds (live tensors, the pool, staging).
    pub allocated_bytes: u64,
    /// Bytes held by live tensors.
    pub in_use_bytes: u64,
    /// The highest in_use_bytes seen.
    pub peak_bytes: u64,
    /// Number of live tensor buffers.
    pub live_buffers: u64,
    /// Bytes kept in the pool for reuse (returned to the driver by kiln_empty_cache).
    pub pooled_bytes: u64,
}

/// Compiled-pipeline cache counters of the current device (see kiln_pipeline_stats).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct KilnPipelineStats {
    /// Pipelines in the cache.
    pub pipelines: u64,
    /// Lookups that found a compiled pipeline.
    pub hits: u64,
    /// Lookups that had to compile.
    pub misses: u64,
    /// Total seconds spent compiling.
    pub compile_seconds: f64,
}

/// Major version of the library.
pub const KILN_VERSION_MAJOR: u32 = 0;
/// Minor version of the library.
pub const KILN_VERSION_MINOR: u32 = 1;
/// Patch version of the library.
pub const KILN_VERSION_PATCH: u32 = 0;
/// Version of the C ABI this header describes; kiln_abi_version() returns the library's.
/// It changes only when an existing function, type or value changes incompatibly.
pub const KILN_ABI_VERSION: u32 = 1;
/// Maximum tensor rank.
pub const KILN_MAX_NDIM: u32 = 8;

pub(crate) fn status_of(code: kiln_core::ErrorCode) -> KilnStatus {
    use kiln_core::ErrorCode as C;
    use KilnStatus::*;
    match code {
        C::Ok => KILN_OK,
        C::InvalidArgument => KILN_ERR_INVALID_ARGUMENT,
        C::NullPointer => KILN_ERR_NULL_POINTER,
        C::ShapeMismatch => KILN_ERR_SHAPE_MISMATCH,
        C::DTypeMismatch => KILN_ERR_DTYPE_MISMATCH,
        C::OutOfMemory => KILN_ERR_OUT_OF_MEMORY,
        C::QuotaExceeded => KILN_ERR_QUOTA_EXCEEDED,
        C::Shader => KILN_ERR_SHADER,
        C::DeviceLost => KILN_ERR_DEVICE_LOST,
        C::NoAdapter => KILN_ERR_NO_ADAPTER,
        C::Timeout => KILN_ERR_TIMEOUT,
        C::Unsupported => KILN_ERR_UNSUPPORTED,
        C::Panic => KILN_ERR_PANIC,
        C::Internal => KILN_ERR_INTERNAL,
    }
}

pub(crate) fn dtype_value(d: kiln_core::DType) -> u32 {
    d as u32
}
