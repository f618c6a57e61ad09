//! The Python classes' data (`kiln.Tensor`, `kiln.Device`): a leaf module, so that the modules
//! that convert arguments (convert.rs), define the methods (tensor.rs, runtime.rs) and the
//! module functions (ops.rs) depend on it without depending on each other in a circle. The
//! methods are in tensor.rs and runtime.rs.

use kiln_core::{AdapterInfo, Tensor};
use pyo3::prelude::*;

/// A tensor on a Kiln device: a dtype, a shape and a GPU buffer (contiguous, row-major).
///
/// Create one with ``kiln.asarray``, ``kiln.zeros`` and friends; read it back with
/// ``.numpy()`` or ``numpy.asarray(t)``. Operators follow numpy broadcasting; Python scalars
/// take the tensor's dtype. Comparisons give uint32 0/1 tensors.
#[pyclass(frozen, module = "kiln", name = "Tensor")]
pub struct PyTensor {
    pub t: Tensor,
}

impl PyTensor {
    pub fn new(t: Tensor) -> PyTensor {
        PyTensor { t }
    }
}

/// One adapter Kiln can run on (what ``kiln.devices()`` lists and ``Tensor.device`` returns).
#[pyclass(frozen, module = "kiln", name = "Device")]
#[derive(Clone)]
pub struct PyDevice {
    pub(crate) info: AdapterInfo,
}

impl PyDevice {
    pub fn from_info(info: AdapterInfo) -> PyDevice {
        PyDevice { info }
    }

    /// The adapter's position in ``kiln.devices()`` (what two devices compare by).
    pub fn adapter_index(&self) -> usize {
        self.info.index
    }

    /// The process's device on this adapter (opened on first use).
    pub fn open(&self) -> kiln_core::Result<std::sync::Arc<kiln_core::device::Device>> {
        kiln_core::runtime().device_at(self.info.index)
    }
}
