//! Tensors: a dtype, a shape and a GPU buffer on one device. Cloning and reshaping share the
//! buffer; the buffer goes back to the device's pool when the last handle is dropped.

use crate::device::{Device, GpuBuffer};
use crate::dtype::{bytes_to_f64, DType, Element};
use crate::shape::{check_rank, checked_numel, numel};
use crate::{runtime, Error, Result};
use std::sync::Arc;
#[cfg(not(target_arch = "wasm32"))]
use {
    std::future::Future,
    std::pin::Pin,
    std::sync::Mutex,
    std::task::{Context, Poll, Waker},
};

#[derive(Clone)]
pub struct Tensor {
    pub(crate) buf: Arc<GpuBuffer>,
    pub(crate) device: Arc<Device>,
    shape: Vec<usize>,
    dtype: DType,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor(shape={:?}, dtype={})", self.shape, self.dtype)
    }
}

/// Bytes of `shape` elements, `size` bytes each (the host's or the GPU's).
fn nbytes_of(shape: &[usize], size: usize) -> Result<u64> {
    let n = checked_numel(shape)?;
    (n as u64)
        .checked_mul(size as u64)
        .ok_or_else(|| Error::InvalidArgument(format!("shape {shape:?} has more elements than fit in memory")))
}

impl Tensor {
    /// An uninitialised tensor on `device` (ops write every element before it is read).
    pub fn empty_on(device: &Arc<Device>, shape: &[usize], dtype: DType) -> Result<Tensor> {
        Self::alloc_on(device, shape, dtype, true)
    }

    fn alloc_on(device: &Arc<Device>, shape: &[usize], dtype: DType, gpu_written: bool) -> Result<Tensor> {
        check_rank(shape)?;
        let bytes = nbytes_of(shape, dtype.storage_size())?;
        let buf = Arc::new(device.alloc(bytes, gpu_written)?);
        // A plan's capture keeps what its pass allocates (`plan.rs`).
        crate::device::capture::keep(device, &buf);
        Ok(Tensor { buf, device: device.clone(), shape: shape.to_vec(), dtype })
    }

    /// An uninitialised tensor whose every byte the host will write (`TensorFill`): as an
    /// upload's, its buffer is one no GPU command of the open batch may still use.
    pub(crate) fn for_host_writes_on(device: &Arc<Device>, shape: &[usize], dtype: DType) -> Result<Tensor> {
        Self::alloc_on(device, shape, dtype, false)
    }

    pub fn empty(shape: &[usize], dtype: DType) -> Result<Tensor> {
        Self::empty_on(&runtime::device()?, shape, dtype)
    }

    /// Uploads little-endian bytes; `bytes.len()` must equal the shape's size in bytes (a bool
    /// is one byte, any nonzero value true).
    pub fn from_bytes_on(device: &Arc<Device>, bytes: &[u8], shape: &[usize], dtype: DType) -> Result<Tensor> {
        check_rank(shape)?;
        let want = nbytes_of(shape, dtype.size())?;
        if bytes.len() as u64 != want {
            return Err(Error::InvalidArgument(format!(
                "{} bytes given for shape {shape:?} of {dtype}, which needs {want}",
                bytes.len()
            )));
        }
        let t = Self::alloc_on(device, shape, dtype, false)?;
        if dtype == DType::Bool {
            device.upload_bools(&t.buf, bytes)?;
        } else {
            device.upload(&t.buf, bytes)?;
        }
        Ok(t)
    }

    /// Uploads a bool tensor.
    pub fn from_bools(data: &[bool], shape: &[usize]) -> Result<Tensor> {
        let bytes: Vec<u8> = data.iter().map(|&b| b as u8).collect();
        Self::from_bytes(&bytes, shape, DType::Bool)
    }

    pub fn from_bytes(bytes: &[u8], shape: &[usize], dtype: DType) -> Result<Tensor> {
        Self::from_bytes_on(&runtime::device()?, bytes, shape, dtype)
    }

    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Tensor> {
        Self::from_bytes(bytemuck::cast_slice(data), shape, T::DTYPE)
    }

    pub fn from_slice_on<T: Element>(device: &Arc<Device>, data: &[T], shape: &[usize]) -> Result<Tensor> {
        Self::from_bytes_on(device, bytemuck::cast_slice(data), shape, T::DTYPE)
    }

    /// A rank-0 tensor holding `value` converted to `dtype`.
    pub fn scalar(value: f64, dtype: DType) -> Result<Tensor> {
        Self::from_bytes(&crate::dtype::scalar_bytes(dtype, value), &[], dtype)
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }
    /// Bytes on the host (what `to_bytes` gives and `from_bytes` takes).
    pub fn nbytes(&self) -> usize {
        self.numel() * self.dtype.size()
    }
    /// Bytes in GPU storage (a bool is a 4-byte word there).
    pub fn storage_nbytes(&self) -> usize {
        self.numel() * self.dtype.storage_size()
    }
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    pub(crate) fn raw(&self) -> &wgpu::Buffer {
        self.buf.raw()
    }

    /// Whether two tensors share one GPU buffer.
    pub fn shares_buffer(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.buf, &other.buf)
    }

    /// Same data, new shape (no copy). One dimension may be -1 and is inferred.
    pub fn reshape(&self, shape: &[isize]) -> Result<Tensor> {
        let n = self.numel();
        let holes = shape.iter().filter(|&&d| d == -1).count();
        if holes > 1 || shape.iter().any(|&d| d < -1) {
            return Err(Error::InvalidArgument(format!(
                "bad shape {shape:?}: at most one -1 and no other negative size"
            )));
        }
        let given: Vec<usize> = shape.iter().filter(|&&d| d >= 0).map(|&d| d as usize).collect();
        let known = checked_numel(&given)?;
        let new: Vec<usize> =
            shape.iter().map(|&d| if d == -1 { n.checked_div(known).unwrap_or(0) } else { d as usize }).collect();
        if checked_numel(&new)? != n {
            return Err(Error::ShapeMismatch(format!("cannot reshape {:?} ({n} elements) to {shape:?}", self.shape)));
        }
        check_rank(&new)?;
        Ok(Tensor { shape: new, ..self.clone() })
    }

    pub(crate) fn with_shape(&self, shape: Vec<usize>) -> Tensor {
        assert_eq!(numel(&shape), self.numel(), "with_shape: {shape:?} for {:?}", self.shape);
        Tensor { shape, ..self.clone() }
    }

    /// Whether the tensor is still valid: INVALID_ARGUMENT once its session closed, COMPUTE_LIMIT
    /// when the session kernel that last wrote it ran out of its loop budget (this may wait for
    /// that kernel to finish). Reading the tensor checks the same.
    pub fn check(&self) -> Result<()> {
        self.buf.check_readable()
    }

    /// Reads the tensor back into `out` (exactly `nbytes()` long). Submits queued work.
    pub fn read_into(&self, out: &mut [u8]) -> Result<()> {
        if out.len() != self.nbytes() {
            return Err(Error::InvalidArgument(format!(
                "a buffer of {} bytes given for a tensor of {} bytes",
                out.len(),
                self.nbytes()
            )));
        }
        self.buf.check_readable()?;
        if self.dtype == DType::Bool {
            return self.device.read_bools(self.raw(), out);
        }
        self.device.read(self.raw(), self.nbytes() as u64, out)
    }

    /// Starts reading the tensor back and returns at once: the copy is submitted with the work
    /// queued so far, and the caller collects the bytes later ([`crate::device::PendingRead`]),
    /// recording more work meanwhile (in the page: awaiting it, `wait_bytes_async`).
    pub fn start_read(&self) -> Result<crate::device::PendingRead> {
        self.buf.check_readable()?;
        let bytes = if self.dtype == DType::Bool { 4 * self.numel() } else { self.nbytes() };
        self.device.start_read(self.raw(), bytes as u64, self.dtype)
    }

    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.nbytes()];
        self.read_into(&mut out)?;
        Ok(out)
    }

    /// Reads back on a thread of its own, so that awaiting it does not block the caller's
    /// executor (any executor: the future needs no runtime).
    #[cfg(not(target_arch = "wasm32"))]
    pub async fn to_bytes_async(&self) -> Result<Vec<u8>> {
        let t = self.clone();
        let handover = Arc::new(Handover::default());
        let filler = Filler(handover.clone());
        std::thread::Builder::new()
            .name("kiln-readback".into())
            .spawn(move || filler.fill(t.to_bytes()))
            .map_err(|e| Error::Internal(format!("cannot start a readback thread: {e}")))?;
        Readback(handover).await
    }

    /// Reads back without blocking the page: resolves once the GPU has delivered the bytes.
    #[cfg(target_arch = "wasm32")]
    pub async fn to_bytes_async(&self) -> Result<Vec<u8>> {
        self.buf.settle_verdict_async().await?;
        self.buf.check_readable()?;
        if self.dtype == DType::Bool {
            // A word per element on the device, a byte on the host (see `read_bools`).
            let mut words = vec![0u8; 4 * self.numel()];
            self.device.read_async(self.raw(), words.len() as u64, &mut words).await?;
            let mut out = vec![0u8; self.numel()];
            crate::dtype::words_to_bools(&bytemuck::pod_collect_to_vec::<u8, u32>(&words), &mut out);
            return Ok(out);
        }
        let mut out = vec![0u8; self.nbytes()];
        self.device.read_async(self.raw(), self.nbytes() as u64, &mut out).await?;
        Ok(out)
    }

    /// `to_vec`, awaited (the browser's only readback).
    pub async fn to_vec_async<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype {
            return Err(Error::DTypeMismatch(format!("to_vec_async::<{}> on a {} tensor", T::DTYPE, self.dtype)));
        }
        Ok(bytemuck::pod_collect_to_vec(&self.to_bytes_async().await?))
    }

    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype {
            return Err(Error::DTypeMismatch(format!("to_vec::<{}> on a {} tensor", T::DTYPE, self.dtype)));
        }
        // One copy: straight from the staging buffer into the result.
        let mut out = vec![T::zeroed(); self.numel()];
        self.read_into(bytemuck::cast_slice_mut::<T, u8>(&mut out))?;
        Ok(out)
    }

    /// The values of a bool tensor.
    pub fn to_bools(&self) -> Result<Vec<bool>> {
        if self.dtype != DType::Bool {
            return Err(Error::DTypeMismatch(format!("to_bools on a {} tensor", self.dtype)));
        }
        Ok(self.to_bytes()?.into_iter().map(|b| b != 0).collect())
    }

    /// The values as f64, whatever the dtype (for checks and printing).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        Ok(bytes_to_f64(self.dtype, &self.to_bytes()?))
    }

    /// The tensor on `device`: itself where it already lives there, else a copy through host
    /// memory (two wgpu devices share no buffers; a direct GPU-to-GPU copy would need external
    /// memory interop that WebGPU does not have). Blocks for the readback.
    pub fn to_device(&self, device: &Arc<Device>) -> Result<Tensor> {
        if Arc::ptr_eq(&self.device, device) {
            return Ok(self.clone());
        }
        Tensor::from_bytes_on(device, &self.to_bytes()?, &self.shape, self.dtype)
    }

    pub(crate) fn same_device(&self, other: &Tensor) -> Result<()> {
        if !Arc::ptr_eq(&self.device, &other.device) {
            return Err(Error::InvalidArgument("tensors live on different devices".into()));
        }
        Ok(())
    }
}

/// The one-shot hand-over between a readback thread and the future awaiting its result.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Default)]
struct Handover(Mutex<HandoverState>);

/// (the result until taken, the waker to call, whether the result was given).
#[cfg(not(target_arch = "wasm32"))]
type HandoverState = (Option<Result<Vec<u8>>>, Option<Waker>, bool);

/// The readback thread's end: stores the result; on drop (also when the read panicked) makes
/// sure there is one and wakes the future.
#[cfg(not(target_arch = "wasm32"))]
struct Filler(Arc<Handover>);

#[cfg(not(target_arch = "wasm32"))]
impl Filler {
    fn fill(self, r: Result<Vec<u8>>) {
        let mut s = self.0 .0.lock().unwrap_or_else(|e| e.into_inner());
        s.0 = Some(r);
        s.2 = true;
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Drop for Filler {
    fn drop(&mut self) {
        let mut s = self.0 .0.lock().unwrap_or_else(|e| e.into_inner());
        if !s.2 {
            s.0 = Some(Err(Error::Internal("the readback thread panicked".into())));
            s.2 = true;
        }
        if let Some(w) = s.1.take() {
            w.wake();
        }
    }
}

/// The awaiting end.
#[cfg(not(target_arch = "wasm32"))]
struct Readback(Arc<Handover>);

#[cfg(not(target_arch = "wasm32"))]
impl Future for Readback {
    type Output = Result<Vec<u8>>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.0 .0.lock().unwrap_or_else(|e| e.into_inner());
        match s.0.take() {
            Some(r) => Poll::Ready(r),
            None => {
                s.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
