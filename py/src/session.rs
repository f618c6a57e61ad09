//! `kiln.Session`: a session (docs/DESIGN.md, "Sessions and untrusted kernels") as a context
//! manager. Tensors and kernels created inside `with kiln.Session(...) as s:` on that thread
//! belong to it and count against its limits; leaving the block closes it, which frees them.
//! And the audit log: `kiln.audit_to_file`, `kiln.audit_to_callback`, `kiln.audit_off`.

use crate::errors::{gpu, to_pyerr};
use kiln_core::session::{audit_off as core_audit_off, audit_to_callback as core_audit_callback};
use kiln_core::{Session, SessionLimits, ShaderPolicy};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::HashMap;
use std::sync::Mutex;
use std::thread::ThreadId;

/// A session with limits. Every limit 0 means none; ``max_loop_iterations`` bounds the loop
/// iterations of one invocation of the session's kernels (all loops together); ``max_kernels``
/// the kernels it holds at once (each also counts ``KERNEL_CHARGE_BYTES`` against ``max_bytes``).
///
/// ``with kiln.Session(max_bytes=1 << 20) as s:`` makes it the current session of the calling
/// thread: tensors and kernels created there belong to it; an allocation over ``max_bytes``
/// raises ``QuotaExceededError``, a dispatch over an operation budget or a kernel out of its
/// loop budget ``ComputeLimitError`` (also once ``max_gpu_time_ms`` of GPU time, charged when
/// results are read, is spent), a kernel against the policy ``ShaderError`` (naming the
/// line). Leaving the block closes the session: everything it owns is freed, and its tensors
/// raise ``InvalidArgumentError`` from then on (read what you need inside the block).
#[pyclass(frozen, module = "kiln", name = "Session")]
pub struct PySession {
    inner: Session,
    /// The sessions that were current before each `__enter__` (restored by `__exit__`), per
    /// thread: the current session is the thread's, and one `Session` may be entered on several
    /// threads at once; a single stack would hand one thread's outer session to another.
    previous: Mutex<HashMap<ThreadId, Vec<Option<Session>>>>,
}

#[pymethods]
impl PySession {
    #[new]
    #[pyo3(signature = (*, max_bytes=0, max_ops_per_dispatch=0, max_ops_total=0, max_loop_iterations=0,
        max_source_bytes=0, max_workgroup_invocations=0, max_bindings=0, allow_f16=true, allow_atomics=true,
        allow_workgroup_memory=true, allow_subgroups=true, max_gpu_time_ms=0, max_kernels=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        max_bytes: u64,
        max_ops_per_dispatch: u64,
        max_ops_total: u64,
        max_loop_iterations: u32,
        max_source_bytes: usize,
        max_workgroup_invocations: u32,
        max_bindings: u32,
        allow_f16: bool,
        allow_atomics: bool,
        allow_workgroup_memory: bool,
        allow_subgroups: bool,
        max_gpu_time_ms: u64,
        max_kernels: u32,
    ) -> PySession {
        let limits = SessionLimits {
            max_bytes,
            max_ops_per_dispatch,
            max_ops_total,
            max_loop_iterations,
            max_gpu_time_ms,
            max_kernels,
            policy: ShaderPolicy {
                max_source_bytes,
                max_workgroup_invocations,
                max_bindings,
                allow_f16,
                allow_atomics,
                allow_workgroup_memory,
                allow_subgroups,
            },
        };
        PySession { inner: Session::new(limits), previous: Mutex::new(HashMap::new()) }
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        let me = slf.get();
        let prev = kiln_core::session::set_current(Some(me.inner.clone()));
        let thread = std::thread::current().id();
        me.previous.lock().unwrap_or_else(|p| p.into_inner()).entry(thread).or_default().push(prev);
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        let prev = {
            let mut stacks = self.previous.lock().unwrap_or_else(|p| p.into_inner());
            let thread = std::thread::current().id();
            let stack = stacks.get_mut(&thread);
            let prev = stack.and_then(|s| s.pop()).flatten();
            if stacks.get(&thread).is_some_and(|s| s.is_empty()) {
                stacks.remove(&thread);
            }
            prev
        };
        kiln_core::session::set_current(prev);
        self.close(py)?;
        Ok(false)
    }

    /// Frees everything the session owns (also done on leaving its ``with`` block).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let s = self.inner.clone();
        gpu(py, move || {
            s.close();
            Ok(())
        })
    }

    #[getter]
    fn id(&self) -> u64 {
        self.inner.id()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// The session's counters: bytes in use and at peak, live buffers, operations, dispatches,
    /// bytes bound, GPU time (``gpu_time_ns``), kernels compiled, and how many times each limit
    /// was hit.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("id", s.id)?;
        d.set_item("bytes_in_use", s.bytes_in_use)?;
        d.set_item("peak_bytes", s.peak_bytes)?;
        d.set_item("live_buffers", s.live_buffers)?;
        d.set_item("ops_total", s.ops_total)?;
        d.set_item("dispatches", s.dispatches)?;
        d.set_item("bound_bytes", s.bound_bytes)?;
        d.set_item("gpu_time_ns", s.gpu_time_ns)?;
        d.set_item("kernels_compiled", s.kernels_compiled)?;
        d.set_item("kernels_alive", s.kernels_alive)?;
        d.set_item("quota_exceeded", s.quota_exceeded)?;
        d.set_item("compute_limit_hits", s.compute_limit_hits)?;
        d.set_item("policy_rejections", s.policy_rejections)?;
        d.set_item("closed", s.closed)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!("kiln.Session(id={}{})", self.inner.id(), if self.inner.is_closed() { ", closed" } else { "" })
    }
}

/// Appends the audit log (JSON lines: sessions, kernel compiles, dispatches, limits hit, errors;
/// never tensor data) to the file at ``path``. Off by default.
#[pyfunction]
pub fn audit_to_file(py: Python<'_>, path: &str) -> PyResult<()> {
    kiln_core::session::audit_to_file(path).map_err(|e| to_pyerr(py, e))
}

/// Calls ``callback(line)`` with each audit event (a JSON string), on the thread that caused
/// it. The callback must not call Kiln; an exception it raises is printed and ignored.
#[pyfunction]
pub fn audit_to_callback(callback: Py<PyAny>) {
    core_audit_callback(move |line| {
        Python::attach(|py| {
            if let Err(e) = callback.call1(py, (line,)) {
                e.print(py);
            }
        })
    });
}

/// Stops the audit log.
#[pyfunction]
pub fn audit_off() {
    core_audit_off();
}
