#![recursion_limit = "256"]
//! `kiln serve`: Kiln's sessions, tensors, built-in ops and WGSL kernels over HTTP for many
//! tenants sharing the machine's GPUs (docs/DESIGN.md, "kiln serve"). A library, so that the
//! CLI runs it (`kiln serve`), the tests start it in-process and the fuzz target calls its
//! parsers.

pub mod api;
pub mod client;
pub mod config;
pub mod error;
pub mod load;
pub mod metrics;
pub mod npy;
pub mod parse;
pub mod placement;
pub mod ready;
pub mod server;
pub mod state;

pub use config::Config;
pub use server::{run_until_signal, shutdown_signal, start, Running, Stopped};
