//! Native: block on futures, the std clock, the process environment, threads.

use crate::{Error, Result};
use std::future::Future;

pub(crate) use std::time::Instant;

/// Threads a big host copy is spread over (see `Device::upload`).
pub(crate) const COPY_THREADS: usize = 4;

pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    pollster::block_on(f)
}

/// The value of a `KILN_*` setting.
pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

/// Pops `scope` and waits for its verdict: the error it caught, as `on_error` makes it.
pub(crate) fn check_scope(
    scope: wgpu::ErrorScopeGuard,
    on_error: impl FnOnce(wgpu::Error) -> Error + 'static,
) -> Result<()> {
    match block_on(scope.pop()) {
        Some(e) => Err(on_error(e)),
        None => Ok(()),
    }
}

/// Kernels compile on a thread whose stack is sized for the largest accepted source
/// (`kernel_limits`): no limit on expression depth is needed beyond the source size.
pub(crate) fn check_expression_depth(_source: &str) -> Result<()> {
    Ok(())
}

/// Milliseconds since the Unix epoch (audit events' time stamps).
pub(crate) fn unix_millis() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
