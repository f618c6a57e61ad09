//! `kiln.metrics_text()` and the native half of `kiln.profile()` (docs/DESIGN.md, "Metrics and
//! profiling"); the context manager itself is Python (`kiln/_profile.py`).

use crate::errors::gpu;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The runtime's metrics in Prometheus' text format (version 0.0.4): dispatches, operations,
/// bound bytes and GPU time per op, per session counters, errors by code, pipeline caches and
/// device memory.
#[pyfunction]
pub fn metrics_text(py: Python<'_>) -> PyResult<String> {
    gpu(py, || Ok(kiln_core::metrics::prometheus_text()))
}

/// Starts a process-wide profile (``kiln.profile()`` is the way to use it).
#[pyfunction]
pub fn _profile_start(py: Python<'_>) -> PyResult<()> {
    gpu(py, kiln_core::profile::start)
}

/// Stops the profile: ``(text, clock, total_s, wall_s, rows)``, each row a dict.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn _profile_stop<'py>(py: Python<'py>) -> PyResult<(String, String, f64, f64, Vec<Bound<'py, PyDict>>)> {
    let p = gpu(py, kiln_core::profile::stop)?;
    let mut rows = Vec::with_capacity(p.rows.len());
    for r in &p.rows {
        let d = PyDict::new(py);
        d.set_item("op", &r.op)?;
        d.set_item("calls", r.calls)?;
        d.set_item("timed", r.timed)?;
        d.set_item("total_s", r.total_s)?;
        d.set_item("mean_s", r.mean_s)?;
        d.set_item("share", r.share)?;
        rows.push(d);
    }
    Ok((p.to_string(), p.clock.name().to_string(), p.total_s, p.wall_s, rows))
}
