//! The op library. Each family is one module with its kernels under `shaders/` and its CPU
//! reference under `reference/`.

pub mod elementwise;

pub use elementwise::*;
