//! Devices, memory and pipeline statistics, synchronize, and custom WGSL kernels.

pub use crate::classes::PyDevice;
use crate::classes::PyTensor;
use crate::convert::{numpy, tensor_arg, text_arg, Int};
use crate::errors::{gpu, invalid};
use kiln_core::{Kernel, Tensor};
use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyMemoryView, PyTuple};
use std::sync::Arc;

#[pymethods]
impl PyDevice {
    /// Position in ``kiln.devices()`` (best first).
    #[getter]
    fn index(&self) -> usize {
        self.info.index
    }
    /// Adapter name as the driver reports it.
    #[getter]
    fn name(&self) -> &str {
        &self.info.name
    }
    /// vulkan, metal, dx12 or gl.
    #[getter]
    fn backend(&self) -> &str {
        &self.info.backend
    }
    /// DiscreteGpu, IntegratedGpu, VirtualGpu, Cpu or Other.
    #[getter]
    fn device_type(&self) -> &str {
        &self.info.device_type
    }
    /// Driver name and version information.
    #[getter]
    fn driver(&self) -> String {
        format!("{} {}", self.info.driver, self.info.driver_info).trim().to_string()
    }
    /// Whether float16 tensors are supported.
    #[getter]
    fn shader_f16(&self) -> bool {
        self.info.shader_f16
    }
    /// Whether this is the adapter Kiln uses by default.
    #[getter]
    fn chosen(&self) -> bool {
        self.info.chosen
    }
    /// The largest buffer one tensor can have, in bytes.
    #[getter]
    fn max_buffer_size(&self) -> u64 {
        self.info.max_buffer_size.min(self.info.max_storage_buffer_binding_size)
    }
    /// Every field as a dict.
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let i = &self.info;
        let d = PyDict::new(py);
        d.set_item("index", i.index)?;
        d.set_item("name", &i.name)?;
        d.set_item("vendor", i.vendor)?;
        d.set_item("device_id", i.device_id)?;
        d.set_item("device_type", &i.device_type)?;
        d.set_item("backend", &i.backend)?;
        d.set_item("driver", &i.driver)?;
        d.set_item("driver_info", &i.driver_info)?;
        d.set_item("max_buffer_size", i.max_buffer_size)?;
        d.set_item("max_storage_buffer_binding_size", i.max_storage_buffer_binding_size)?;
        d.set_item("max_compute_workgroups_per_dimension", i.max_compute_workgroups_per_dimension)?;
        d.set_item("max_compute_invocations_per_workgroup", i.max_compute_invocations_per_workgroup)?;
        d.set_item("max_compute_workgroup_storage_size", i.max_compute_workgroup_storage_size)?;
        d.set_item("shader_f16", i.shader_f16)?;
        d.set_item("timestamp_query", i.timestamp_query)?;
        d.set_item("subgroups", i.subgroups)?;
        d.set_item("chosen", i.chosen)?;
        Ok(d)
    }
    fn __repr__(&self) -> String {
        format!(
            "kiln.Device({}, {:?}, backend={}, type={})",
            self.info.index, self.info.name, self.info.backend, self.info.device_type
        )
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PyDevice>().is_ok_and(|o| o.get().info.index == self.info.index)
    }
    fn __hash__(&self) -> u64 {
        self.info.index as u64
    }
}

/// Every adapter Kiln can see, best first; ``chosen`` marks the default.
#[pyfunction]
pub fn devices(py: Python<'_>) -> PyResult<Vec<PyDevice>> {
    Ok(gpu(py, || Ok(kiln_core::adapters()))?.into_iter().map(PyDevice::from_info).collect())
}

/// The device new tensors are created on (created on first use).
#[pyfunction]
pub fn default_device(py: Python<'_>) -> PyResult<PyDevice> {
    let d = gpu(py, kiln_core::device)?;
    Ok(PyDevice::from_info(d.info().clone()))
}

/// Makes the adapter matching ``spec`` (an index, or a case-insensitive substring of its
/// name) the default for the rest of the process. Tensors already made stay where they are.
#[pyfunction]
pub fn select_adapter(py: Python<'_>, spec: &Bound<'_, PyAny>) -> PyResult<PyDevice> {
    let s: String = match spec.extract::<usize>() {
        Ok(i) => i.to_string(),
        Err(_) => spec.extract().map_err(|_| invalid(py, "select_adapter takes an index or a name"))?,
    };
    gpu(py, move || kiln_core::select_adapter(&s)).map(PyDevice::from_info)
}

/// Memory held by the default device, in bytes: ``allocated_bytes`` (every buffer Kiln holds),
/// ``in_use_bytes`` (live tensors), ``peak_bytes``, ``live_buffers``, ``pooled_bytes``.
#[pyfunction]
pub fn memory_stats<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
    let s = gpu(py, || Ok(kiln_core::device()?.memory_stats()))?;
    let d = PyDict::new(py);
    d.set_item("allocated_bytes", s.allocated_bytes)?;
    d.set_item("in_use_bytes", s.in_use_bytes)?;
    d.set_item("peak_bytes", s.peak_bytes)?;
    d.set_item("live_buffers", s.live_buffers)?;
    d.set_item("pooled_bytes", s.pooled_bytes)?;
    Ok(d)
}

/// Compiled-pipeline cache statistics of the default device.
#[pyfunction]
pub fn pipeline_stats<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
    let s = gpu(py, || Ok(kiln_core::device()?.pipeline_stats()))?;
    let d = PyDict::new(py);
    d.set_item("pipelines", s.pipelines)?;
    d.set_item("hits", s.hits)?;
    d.set_item("misses", s.misses)?;
    d.set_item("compile_seconds", s.compile_seconds)?;
    Ok(d)
}

/// Submits all queued work and waits until the GPU has finished it (the GIL is released).
#[pyfunction]
pub fn synchronize(py: Python<'_>) -> PyResult<()> {
    gpu(py, kiln_core::synchronize)
}

/// Destroys the process's devices (every adapter Kiln has opened) and starts over: tensors and
/// kernels made before raise ``DeviceLostError`` from then on, and the next call that needs a
/// device creates a fresh one. The way out of a ``TimeoutError`` or any other stuck state.
#[pyfunction]
pub fn reset_devices(py: Python<'_>) -> PyResult<()> {
    gpu(py, || {
        kiln_core::reset_devices();
        Ok(())
    })
}

/// Gives every pooled (freed, cached) buffer of the default device back to the driver.
#[pyfunction]
pub fn empty_cache(py: Python<'_>) -> PyResult<()> {
    gpu(py, || {
        kiln_core::device()?.empty_cache();
        Ok(())
    })
}

/// A custom WGSL compute kernel.
///
/// ``k = kiln.Kernel(source, entry="main")`` parses and validates the WGSL (a ``ShaderError``
/// names line:column) and reflects its bindings. ``k(a, b, out, workgroups=(x, y, z),
/// uniforms=None)`` binds the tensors to the ``@group(0)`` storage bindings in binding order
/// and ``uniforms`` (bytes, or a numpy array whose raw bytes are used) to the one uniform
/// binding, then queues the dispatch. Outputs are written in place.
#[pyclass(frozen, module = "kiln", name = "Kernel")]
pub struct PyKernel {
    k: Arc<Kernel>,
}

fn uniform_bytes(py: Python<'_>, u: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = u.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = u.cast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    if u.cast::<PyMemoryView>().is_ok() || u.cast::<PyUntypedArray>().is_ok() {
        let arr = numpy(py)?.call_method1("ascontiguousarray", (u,))?;
        let bytes = arr.call_method0("tobytes")?;
        return Ok(bytes.cast::<PyBytes>().map_err(|e| invalid(py, e.to_string()))?.as_bytes().to_vec());
    }
    if let Ok(t) = u.cast::<PyTensor>() {
        let t = t.get().t.clone();
        return gpu(py, move || t.to_bytes());
    }
    Err(invalid(
        py,
        format!("uniforms must be bytes, a bytearray, a memoryview or a numpy array, got {}", u.get_type()),
    ))
}

fn workgroups_arg(py: Python<'_>, w: &Bound<'_, PyAny>) -> PyResult<[u32; 3]> {
    if let Ok(x) = w.extract::<u32>() {
        return Ok([x, 1, 1]);
    }
    let v: Vec<u32> = w.extract().map_err(|_| {
        invalid(py, format!("workgroups must be an int or a tuple of 1 to 3 non-negative ints, got {w}"))
    })?;
    match v.as_slice() {
        [x] => Ok([*x, 1, 1]),
        [x, y] => Ok([*x, *y, 1]),
        [x, y, z] => Ok([*x, *y, *z]),
        _ => Err(invalid(py, format!("workgroups must have 1 to 3 entries, got {}", v.len()))),
    }
}

#[pymethods]
impl PyKernel {
    #[new]
    #[pyo3(signature = (source, entry=None))]
    fn new(py: Python<'_>, source: &Bound<'_, PyAny>, entry: Option<&Bound<'_, PyAny>>) -> PyResult<PyKernel> {
        let source = text_arg(py, "kernel source", source)?;
        let entry = match entry {
            Some(e) if !e.is_none() => text_arg(py, "entry point name", e)?,
            _ => "main".to_string(),
        };
        let k = gpu(py, move || Kernel::new(&source, &entry))?;
        Ok(PyKernel { k: Arc::new(k) })
    }

    /// Binds ``tensors`` in binding order and queues ``workgroups`` workgroups.
    #[pyo3(signature = (*tensors, workgroups=None, uniforms=None))]
    fn __call__(
        &self,
        py: Python<'_>,
        tensors: &Bound<'_, PyTuple>,
        workgroups: Option<&Bound<'_, PyAny>>,
        uniforms: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let ts: Vec<Tensor> = tensors
            .iter()
            .map(|t| match t.cast::<PyTensor>() {
                Ok(t) => Ok(t.get().t.clone()),
                Err(_) => Err(invalid(
                    py,
                    format!(
                        "kernel arguments must be kiln tensors (outputs are written in place), got {}",
                        t.get_type()
                    ),
                )),
            })
            .collect::<PyResult<_>>()?;
        let wg = match workgroups {
            Some(w) if !w.is_none() => workgroups_arg(py, w)?,
            _ => return Err(invalid(py, "workgroups=(x, y, z) is required")),
        };
        let u = match uniforms {
            Some(u) if !u.is_none() => Some(uniform_bytes(py, u)?),
            _ => None,
        };
        let k = &self.k;
        gpu(py, move || {
            let refs: Vec<&Tensor> = ts.iter().collect();
            k.dispatch(&refs, u.as_deref(), wg)
        })
    }

    /// The entry point's name.
    #[getter]
    fn entry(&self) -> &str {
        self.k.entry()
    }

    /// ``@workgroup_size`` of the entry point, as (x, y, z).
    #[getter]
    fn workgroup_size(&self) -> (u32, u32, u32) {
        let w = self.k.workgroup_size();
        (w[0], w[1], w[2])
    }

    /// The storage bindings in binding order: dicts with binding, name, dtype, min_bytes, writable.
    #[getter]
    fn bindings<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.k
            .storage_bindings()
            .iter()
            .map(|b| {
                let d = PyDict::new(py);
                d.set_item("binding", b.binding)?;
                d.set_item("name", &b.name)?;
                d.set_item("dtype", b.dtype.map(crate::convert::np_name))?;
                d.set_item("min_bytes", b.min_bytes)?;
                d.set_item("writable", b.writable)?;
                Ok(d)
            })
            .collect()
    }

    /// Size in bytes the uniform binding needs, or None when the kernel has none.
    #[getter]
    fn uniform_bytes(&self) -> Option<u64> {
        self.k.uniform_binding().map(|u| u.min_bytes)
    }

    fn __repr__(&self) -> String {
        format!("kiln.Kernel(entry={:?}, bindings={})", self.k.entry(), self.k.storage_bindings().len())
    }
}

/// Test/benchmark aid: runs ``op`` ``iters`` times on kiln-core directly (no Python in the
/// loop) and returns the seconds per call, to measure the binding's own overhead.
#[pyfunction]
#[pyo3(signature = (op, a, b=None, iters=Int(1000)))]
pub fn _bench_core(
    py: Python<'_>,
    op: &str,
    a: &Bound<'_, PyAny>,
    b: Option<&Bound<'_, PyAny>>,
    iters: Int<usize>,
) -> PyResult<f64> {
    let iters = iters.0;
    use kiln_core::ops;
    let a = tensor_arg(py, a)?;
    let b = match b {
        Some(b) if !b.is_none() => Some(tensor_arg(py, b)?),
        _ => None,
    };
    let op = op.to_string();
    let r = gpu(py, move || {
        let run = || -> kiln_core::Result<Tensor> {
            match (op.as_str(), &b) {
                ("add", Some(b)) => ops::add(&a, b),
                ("mul", Some(b)) => ops::mul(&a, b),
                ("matmul", Some(b)) => ops::matmul(&a, b),
                ("add_scalar", _) => ops::add_scalar(&a, 1.0),
                ("exp", _) => ops::exp(&a),
                ("sum", _) => ops::sum(&a, None, false),
                ("softmax", _) => ops::softmax(&a, -1),
                ("reshape", _) => ops::reshape(&a, &[-1]),
                (other, _) => Err(kiln_core::Error::InvalidArgument(format!("_bench_core: unknown op {other:?}"))),
            }
        };
        run()?;
        kiln_core::synchronize()?;
        let t0 = std::time::Instant::now();
        for _ in 0..iters {
            run()?;
        }
        let dt = t0.elapsed().as_secs_f64();
        kiln_core::synchronize()?;
        Ok(dt / iters.max(1) as f64)
    });
    r
}
