//! The C-visible types of the ABI. Everything here is part of `include/kiln.h`.

#![allow(non_camel_case_types)]

use std::os::raw::c_char;

// The status and dtype enums are generated from kiln-core's tables (status_gen.rs).
pub(crate) use crate::status_gen::status_of;
pub use crate::status_gen::{KilnDType, KilnStatus};

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
pub const KILN_ABI_VERSION: u32 = 2;
/// Maximum tensor rank.
pub const KILN_MAX_NDIM: u32 = 8;

pub(crate) fn dtype_value(d: kiln_core::DType) -> u32 {
    d as u32
}
