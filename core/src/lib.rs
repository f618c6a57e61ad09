//! kiln-core: one WebGPU compute runtime shared by Rust, C, Julia, Elixir and Python.
//!
//! ```no_run
//! use kiln_core::{ops, Tensor};
//! let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! let b = ops::matmul(&a, &a)?;
//! assert_eq!(b.to_vec::<f32>()?, vec![7.0, 10.0, 15.0, 22.0]);
//! # Ok::<(), kiln_core::Error>(())
//! ```

pub mod adapter;
pub mod device;
pub mod dtype;
pub(crate) mod env;
pub mod error;
pub(crate) mod exec;
pub mod gpu_timer;
pub(crate) mod id_hash;
pub(crate) mod instance;
pub mod kernel;
pub mod kernel_limits;
pub(crate) mod loop_budget;
pub mod metrics;
pub mod native;
#[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
pub(crate) mod native_cm2;
pub mod native_kernels;
pub mod numeric;
pub mod ops;
#[cfg(not(target_arch = "wasm32"))]
pub mod persistent_cache;
pub mod pipeline;
#[cfg(not(target_arch = "wasm32"))]
pub(crate) mod pipeline_record;
pub mod plan;
pub(crate) mod platform;
pub(crate) mod pool;
pub mod profile;
pub mod reference;
pub mod runtime;
pub mod session;
pub mod shape;
pub(crate) mod stats;
pub mod tensor;
pub mod tensor_fill;

pub use device::{BindGroupStats, Device, MemoryStats, BIND_GROUP_CACHE_ENTRIES};
pub use dtype::{DType, Element};
pub use error::{Error, ErrorCode, Result};
pub use gpu_timer::GpuTime;
pub use half::f16;
pub use kernel::Kernel;
pub use pipeline::PipelineStats;
pub use profile::{Clock, Profile, ProfileRow};
pub use runtime::{
    adapters, device, init_async, reset_devices, runtime, scoped_device, select_adapter, synchronize,
    synchronize_async, with_device, AdapterInfo,
};
pub use session::{Session, SessionLimits, SessionStats, ShaderPolicy, KERNEL_CHARGE_BYTES, SUGGESTED_MAX_KERNELS};
pub use stats::startup;
pub use tensor::Tensor;
pub use tensor_fill::TensorFill;
