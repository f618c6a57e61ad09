//! Tensors from and to typed arrays. Float32Array is f32, Int32Array i32, Uint32Array u32;
//! f16 travels as its bits in a Uint16Array. Readback is a promise.

use crate::error::{invalid, js_err, JsResult};
use kiln_core::DType;
use wasm_bindgen::prelude::*;

/// A tensor on the GPU. `free()` (or `dispose()`) gives its memory back at once; a tensor
/// that is only dropped by JavaScript is freed when the garbage collector finalizes it.
#[wasm_bindgen]
#[derive(Clone)]
pub struct Tensor {
    pub(crate) inner: kiln_core::Tensor,
}

impl From<kiln_core::Tensor> for Tensor {
    fn from(inner: kiln_core::Tensor) -> Tensor {
        Tensor { inner }
    }
}

pub(crate) fn dtype(name: &str) -> JsResult<DType> {
    DType::parse(name).map_err(js_err)
}

pub(crate) fn usizes(v: &[u32]) -> Vec<usize> {
    v.iter().map(|&d| d as usize).collect()
}

/// The dtype a typed array holds (Uint16Array: f16 bits; Uint8Array: bool), and its bytes.
fn typed_array(data: &JsValue) -> JsResult<(DType, Vec<u8>)> {
    let bytes = |buf: js_sys::Uint8Array| buf.to_vec();
    let view = |o: &js_sys::Object, len_bytes: u32, offset: u32| {
        let buffer = js_sys::Reflect::get(o, &"buffer".into()).unwrap_or(JsValue::UNDEFINED);
        js_sys::Uint8Array::new_with_byte_offset_and_length(&buffer, offset, len_bytes)
    };
    macro_rules! arm {
        ($ty:ty, $dt:expr) => {
            if let Some(a) = data.dyn_ref::<$ty>() {
                return Ok(($dt, bytes(view(a.as_ref(), a.byte_length(), a.byte_offset()))));
            }
        };
    }
    arm!(js_sys::Float32Array, DType::F32);
    arm!(js_sys::Int32Array, DType::I32);
    arm!(js_sys::Uint32Array, DType::U32);
    arm!(js_sys::Uint16Array, DType::F16);
    // Bool arrays travel as one byte per element, as numpy's and Nx's do (non-zero is true).
    arm!(js_sys::Uint8Array, DType::Bool);
    Err(invalid(
        "tensor data must be a Float32Array, Int32Array, Uint32Array, Uint16Array (f16 bits) or Uint8Array (bool)",
    ))
}

#[wasm_bindgen]
impl Tensor {
    /// A tensor holding a typed array's elements. `shape` defaults to `[data.length]`; `dtype`
    /// defaults to the array's (a Uint16Array is f16 and must say so or not at all).
    #[wasm_bindgen(js_name = fromArray)]
    pub fn from_array(data: JsValue, shape: Option<Vec<u32>>, dtype_name: Option<String>) -> JsResult<Tensor> {
        let (dt, bytes) = typed_array(&data)?;
        if let Some(name) = dtype_name {
            let want = dtype(&name)?;
            if want != dt {
                return Err(js_err(kiln_core::Error::DTypeMismatch(format!(
                    "a typed array of {dt} elements given for a {want} tensor"
                ))));
            }
        }
        let shape = shape.map(|s| usizes(&s)).unwrap_or_else(|| vec![bytes.len() / dt.size()]);
        kiln_core::Tensor::from_bytes(&bytes, &shape, dt).map(Tensor::from).map_err(js_err)
    }

    /// A tensor from little-endian bytes (`bytes.length` must be the shape's size in bytes).
    #[wasm_bindgen(js_name = fromBytes)]
    pub fn from_bytes(bytes: &[u8], shape: Vec<u32>, dtype_name: &str) -> JsResult<Tensor> {
        kiln_core::Tensor::from_bytes(bytes, &usizes(&shape), dtype(dtype_name)?).map(Tensor::from).map_err(js_err)
    }

    #[wasm_bindgen(getter)]
    pub fn shape(&self) -> Vec<u32> {
        self.inner.shape().iter().map(|&d| d as u32).collect()
    }

    #[wasm_bindgen(getter)]
    pub fn dtype(&self) -> String {
        self.inner.dtype().name().to_string()
    }

    #[wasm_bindgen(getter)]
    pub fn ndim(&self) -> u32 {
        self.inner.ndim() as u32
    }

    #[wasm_bindgen(getter)]
    pub fn numel(&self) -> f64 {
        self.inner.numel() as f64
    }

    #[wasm_bindgen(getter)]
    pub fn nbytes(&self) -> f64 {
        self.inner.nbytes() as f64
    }

    /// Resolves to the elements as little-endian bytes.
    #[wasm_bindgen(js_name = toBytes)]
    pub async fn to_bytes(&self) -> JsResult<js_sys::Uint8Array> {
        let bytes = self.inner.to_bytes_async().await.map_err(js_err)?;
        Ok(js_sys::Uint8Array::from(&bytes[..]))
    }

    /// Resolves to the elements as a typed array of the tensor's dtype (f16: Uint16Array bits).
    #[wasm_bindgen(js_name = toArray)]
    pub async fn to_array(&self) -> JsResult<JsValue> {
        let bytes = self.inner.to_bytes_async().await.map_err(js_err)?;
        // Bool reads back as bytes, 0 or 1 (and any dtype added to the core later as raw bytes
        // until it has its own array).
        Ok(match self.inner.dtype() {
            DType::F32 => js_sys::Float32Array::from(&bytemuck::pod_collect_to_vec::<u8, f32>(&bytes)[..]).into(),
            DType::I32 => js_sys::Int32Array::from(&bytemuck::pod_collect_to_vec::<u8, i32>(&bytes)[..]).into(),
            DType::U32 => js_sys::Uint32Array::from(&bytemuck::pod_collect_to_vec::<u8, u32>(&bytes)[..]).into(),
            DType::F16 => js_sys::Uint16Array::from(&bytemuck::pod_collect_to_vec::<u8, u16>(&bytes)[..]).into(),
            _ => js_sys::Uint8Array::from(&bytes[..]).into(),
        })
    }

    /// The same data with another shape (one -1 inferred); shares the buffer.
    pub fn reshape(&self, shape: Vec<i32>) -> JsResult<Tensor> {
        let s: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
        self.inner.reshape(&s).map(Tensor::from).map_err(js_err)
    }

    /// Another handle on the same buffer (for the calls that take an optional tensor, which
    /// consume the handle they are given: js/kiln.js passes them a clone).
    #[wasm_bindgen(js_name = clone)]
    pub fn clone_handle(&self) -> Tensor {
        self.clone()
    }

    /// Frees the GPU memory now (the same as `free()`).
    pub fn dispose(self) {}
}

/// A list of tensors for the calls that take several (concat, Kernel.dispatch); js/kiln.js
/// builds it from an array, so that the tensors stay usable from JavaScript afterwards.
#[wasm_bindgen]
#[derive(Default)]
pub struct TensorList {
    pub(crate) items: Vec<kiln_core::Tensor>,
}

#[wasm_bindgen]
impl TensorList {
    #[wasm_bindgen(constructor)]
    pub fn new() -> TensorList {
        TensorList::default()
    }

    pub fn push(&mut self, t: &Tensor) {
        self.items.push(t.inner.clone());
    }
}
