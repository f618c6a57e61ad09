//! What differs between a native process and a web page: how to wait (block vs. await), the
//! clock, configuration (environment variables) and threads. Ops, kernels and the batch are the
//! same code on both; only these few functions have two bodies.

#[cfg(not(target_arch = "wasm32"))]
mod native;
#[cfg(not(target_arch = "wasm32"))]
pub(crate) use native::*;

#[cfg(target_arch = "wasm32")]
mod web;
#[cfg(target_arch = "wasm32")]
pub(crate) use web::*;
