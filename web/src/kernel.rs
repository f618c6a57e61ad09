//! Custom WGSL kernels: the core's validation (naga, binding reflection, limits) and errors.

use crate::error::{js_err, JsResult};
use crate::tensor::TensorList;
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
pub struct Kernel {
    inner: kiln_core::Kernel,
}

impl From<kiln_core::Kernel> for Kernel {
    fn from(inner: kiln_core::Kernel) -> Kernel {
        Kernel { inner }
    }
}

#[wasm_bindgen]
impl Kernel {
    /// Compiles `source`; `entry` is the @compute function (default "main"). A bad kernel
    /// throws a KilnError SHADER with line:column.
    #[wasm_bindgen(constructor)]
    pub fn new(source: &str, entry: Option<String>) -> JsResult<Kernel> {
        let entry = entry.unwrap_or_else(|| "main".into());
        kiln_core::Kernel::new(source, &entry).map(|inner| Kernel { inner }).map_err(js_err)
    }

    /// Compiles `source` and resolves once the browser's own compiler has accepted it (its
    /// errors reject the promise as a KilnError SHADER, instead of arriving at a later call).
    pub async fn compile(source: String, entry: Option<String>) -> JsResult<Kernel> {
        let entry = entry.unwrap_or_else(|| "main".into());
        kiln_core::Kernel::new_async(&source, &entry).await.map(|inner| Kernel { inner }).map_err(js_err)
    }

    /// js/kiln.js's `dispatch(tensors, workgroups, uniforms)` builds the list.
    #[wasm_bindgen(js_name = dispatchList)]
    pub fn dispatch_list(
        &self,
        tensors: &TensorList,
        x: u32,
        y: u32,
        z: u32,
        uniforms: Option<Vec<u8>>,
    ) -> JsResult<()> {
        let refs: Vec<&kiln_core::Tensor> = tensors.items.iter().collect();
        self.inner.dispatch(&refs, uniforms.as_deref(), [x, y, z]).map_err(js_err)
    }

    #[wasm_bindgen(getter)]
    pub fn entry(&self) -> String {
        self.inner.entry().to_string()
    }

    #[wasm_bindgen(getter, js_name = workgroupSize)]
    pub fn workgroup_size(&self) -> Vec<u32> {
        self.inner.workgroup_size().to_vec()
    }

    #[wasm_bindgen(getter, js_name = storageBindings)]
    pub fn storage_bindings(&self) -> u32 {
        self.inner.storage_bindings().len() as u32
    }
}
