//! kiln-web: kiln-core in the browser. Thin wasm-bindgen wrappers: every op is the core op,
//! every wait an `await` (the page's one thread must not block), every error a `KilnError`
//! carrying the core's stable code. js/kiln.js is the module pages import; it adds the
//! elementwise ops by name (generated from the core's op table) and the error classes.

mod error;
mod kernel;
mod models;
mod ops;
mod session;
mod tensor;

pub use error::set_error_factory;
pub use kernel::Kernel;
pub use models::{CausalLMCore, GenerationCore, SentenceEmbedderCore};
pub use session::Session;
pub use tensor::{Tensor, TensorList};

use error::{js_err, JsResult};
use wasm_bindgen::prelude::*;

/// Finds the WebGPU adapter and opens the device; resolves to what Kiln knows about the adapter.
/// Rejects with a KilnError (NO_ADAPTER) where the browser has no WebGPU.
#[wasm_bindgen]
pub async fn init() -> JsResult<JsValue> {
    let device = kiln_core::init_async().await.map_err(js_err)?;
    Ok(adapter_object(device.info()))
}

fn adapter_object(i: &kiln_core::AdapterInfo) -> JsValue {
    let o = js_sys::Object::new();
    let set = |k: &str, v: JsValue| {
        let _ = js_sys::Reflect::set(&o, &k.into(), &v);
    };
    set("name", i.name.as_str().into());
    set("backend", i.backend.as_str().into());
    set("deviceType", i.device_type.as_str().into());
    set("driver", i.driver.as_str().into());
    set("vendor", i.vendor.into());
    set("maxBufferSize", (i.max_buffer_size as f64).into());
    set("maxStorageBufferBindingSize", (i.max_storage_buffer_binding_size as f64).into());
    set("maxComputeWorkgroupsPerDimension", i.max_compute_workgroups_per_dimension.into());
    set("shaderF16", i.shader_f16.into());
    set("timestampQuery", i.timestamp_query.into());
    set("subgroups", i.subgroups.into());
    o.into()
}

/// The adapter of the open device (after `init`).
#[wasm_bindgen(js_name = adapterInfo)]
pub fn adapter_info() -> JsResult<JsValue> {
    Ok(adapter_object(kiln_core::device().map_err(js_err)?.info()))
}

/// Resolves once the GPU has finished everything queued so far.
#[wasm_bindgen]
pub async fn synchronize() -> JsResult<()> {
    kiln_core::synchronize_async().await.map_err(js_err)
}

/// Whether the open device computes in f16 (SwiftShader does not).
#[wasm_bindgen(js_name = hasF16)]
pub fn has_f16() -> JsResult<bool> {
    Ok(kiln_core::device().map_err(js_err)?.has_f16())
}

/// The core's op names, in the order of its op table (the conformance suite checks against it).
#[wasm_bindgen(js_name = opNames)]
pub fn op_names() -> Vec<String> {
    kiln_core::ops::op_names().into_iter().map(String::from).collect()
}

/// `{allocatedBytes, inUseBytes, peakBytes, liveBuffers, pooledBytes}` of the open device.
#[wasm_bindgen(js_name = memoryStats)]
pub fn memory_stats() -> JsResult<JsValue> {
    let m = kiln_core::device().map_err(js_err)?.memory_stats();
    let o = js_sys::Object::new();
    for (k, v) in [
        ("allocatedBytes", m.allocated_bytes),
        ("inUseBytes", m.in_use_bytes),
        ("peakBytes", m.peak_bytes),
        ("liveBuffers", m.live_buffers),
        ("pooledBytes", m.pooled_bytes),
    ] {
        let _ = js_sys::Reflect::set(&o, &k.into(), &(v as f64).into());
    }
    // The wasm heap's size: linear memory only grows, so this is its peak so far (what a
    // model load cost the page's memory besides the GPU).
    let heap = wasm_bindgen::memory().unchecked_into::<js_sys::WebAssembly::Memory>().buffer();
    let heap_bytes = heap.unchecked_into::<js_sys::ArrayBuffer>().byte_length();
    let _ = js_sys::Reflect::set(&o, &"wasmHeapBytes".into(), &(heap_bytes as f64).into());
    Ok(o.into())
}
