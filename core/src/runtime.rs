//! The one process-wide runtime: one wgpu Instance, the adapter list and one
//! lazily created device per adapter, shared by every caller and every language binding.

pub use crate::adapter::AdapterInfo;
use crate::device::Device;
use crate::{Error, Result};
use once_cell::sync::OnceCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub struct Runtime {
    /// Own the adapters below; kept for the life of the process.
    _instances: Vec<wgpu::Instance>,
    /// Why no Vulkan instance could be made, if so (told in the no-adapter error).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    vulkan_error: Option<String>,
    adapters: Vec<wgpu::Adapter>,
    chosen: Mutex<Option<usize>>,
    devices: Mutex<HashMap<usize, Arc<Device>>>,
}

static RUNTIME: OnceCell<Runtime> = OnceCell::new();

/// The process-wide runtime, created on first use.
pub fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(Runtime::new)
}

/// Finds the adapters and opens the default device without blocking. In the browser this must
/// come first (`await`ed); natively it is `device()`.
pub async fn init_async() -> Result<Arc<Device>> {
    #[cfg(target_arch = "wasm32")]
    if RUNTIME.get().is_none() {
        let rt = Runtime::new_async().await;
        // A call made before this one already settled the runtime (with no adapter).
        let _ = RUNTIME.set(rt);
    }
    runtime().device_async().await
}

fn parse_backends(spec: &str) -> Result<wgpu::Backends> {
    let mut b = wgpu::Backends::empty();
    for part in spec.split(',').map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()) {
        b |= match part.as_str() {
            "vulkan" | "vk" => wgpu::Backends::VULKAN,
            "gl" | "gles" | "opengl" => wgpu::Backends::GL,
            "metal" => wgpu::Backends::METAL,
            "dx12" | "d3d12" => wgpu::Backends::DX12,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "KILN_BACKENDS: unknown backend {other:?} (known: vulkan, gl, metal, dx12)"
                )))
            }
        };
    }
    Ok(b)
}

fn type_rank(t: wgpu::DeviceType) -> u32 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    }
}

fn backend_rank(b: wgpu::Backend) -> u32 {
    match b {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        _ => 1,
    }
}

impl Runtime {
    #[cfg(not(target_arch = "wasm32"))]
    fn new() -> Runtime {
        crate::platform::block_on(Self::new_async())
    }

    /// In the browser nothing is found until `init_async` has awaited the adapter: every call
    /// before it answers NoAdapter.
    #[cfg(target_arch = "wasm32")]
    fn new() -> Runtime {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        Runtime {
            _instances: vec![instance],
            vulkan_error: None,
            adapters: Vec::new(),
            chosen: Mutex::new(None),
            devices: Mutex::new(HashMap::new()),
        }
    }

    async fn new_async() -> Runtime {
        // A bad KILN_BACKENDS is reported when a device is asked for (see `device`), so the
        // runtime itself always starts; here it falls back to the primary backends.
        let explicit = crate::platform::env_var("KILN_BACKENDS").and_then(|s| parse_backends(&s).ok());
        // Compute-only instances: no window-system probe (`instance`).
        let made = crate::startup::time("Vulkan instance", || {
            crate::instance::compute_instances(explicit.unwrap_or(wgpu::Backends::PRIMARY))
        });
        let enumeration = crate::startup::span("adapter enumeration");
        let mut instances = made.instances;
        let mut adapters = Vec::new();
        for instance in &instances {
            adapters.extend(instance.enumerate_adapters(wgpu::Backends::all()).await);
        }
        // GL is a fallback only: llvmpipe's GL and lavapipe would otherwise both be listed.
        if adapters.is_empty() && explicit.is_none() && !cfg!(target_arch = "wasm32") {
            let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
            desc.backends = wgpu::Backends::GL;
            let gl = wgpu::Instance::new(desc);
            adapters = gl.enumerate_adapters(wgpu::Backends::all()).await;
            instances.push(gl);
        }
        adapters.sort_by_key(|a| {
            let i = a.get_info();
            (type_rank(i.device_type), backend_rank(i.backend))
        });
        drop(enumeration);
        Runtime {
            _instances: instances,
            vulkan_error: made.vulkan_error,
            adapters,
            chosen: Mutex::new(None),
            devices: Mutex::new(HashMap::new()),
        }
    }

    fn info(&self, index: usize, chosen: Option<usize>) -> AdapterInfo {
        let a = &self.adapters[index];
        let i = a.get_info();
        let l = a.limits();
        let f = a.features();
        AdapterInfo {
            index,
            name: i.name,
            vendor: i.vendor,
            device_id: i.device,
            device_type: format!("{:?}", i.device_type),
            backend: format!("{:?}", i.backend).to_lowercase(),
            driver: i.driver,
            driver_info: i.driver_info,
            max_buffer_size: l.max_buffer_size,
            max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
            max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
            max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
            max_compute_workgroup_storage_size: l.max_compute_workgroup_storage_size,
            shader_f16: f.contains(wgpu::Features::SHADER_F16),
            timestamp_query: f.contains(wgpu::Features::TIMESTAMP_QUERY),
            subgroups: f.contains(wgpu::Features::SUBGROUP),
            chosen: chosen == Some(index),
        }
    }

    /// Every adapter, best first, with the default choice marked.
    pub fn adapters(&self) -> Vec<AdapterInfo> {
        let chosen = self.chosen_index().ok();
        (0..self.adapters.len()).map(|i| self.info(i, chosen)).collect()
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn no_adapter(&self) -> Error {
        let vulkan = self.vulkan_error.as_ref().map(|e| format!(" (Vulkan: {e})")).unwrap_or_default();
        Error::NoAdapter(format!(
            "no GPU adapter found{vulkan}. Without a GPU, install a software Vulkan driver: \
             `apt-get install -y mesa-vulkan-drivers libvulkan1` (Debian/Ubuntu); \
             check KILN_BACKENDS / KILN_ADAPTER if they are set"
        ))
    }

    #[cfg(target_arch = "wasm32")]
    fn no_adapter(&self) -> Error {
        Error::NoAdapter(
            "no WebGPU adapter: await Kiln's init first, in a browser with WebGPU enabled \
             (navigator.gpu present, a secure context; Chromium on Linux needs --enable-unsafe-webgpu)"
                .into(),
        )
    }

    /// Resolves an adapter spec: an index, or a case-insensitive substring of the name.
    pub fn find_adapter(&self, spec: &str) -> Result<usize> {
        if let Ok(i) = spec.trim().parse::<usize>() {
            if i < self.adapters.len() {
                return Ok(i);
            }
            return Err(Error::NoAdapter(format!(
                "adapter index {i} is out of range ({} adapters)",
                self.adapters.len()
            )));
        }
        let needle = spec.to_lowercase();
        self.adapters
            .iter()
            .position(|a| a.get_info().name.to_lowercase().contains(&needle))
            .ok_or_else(|| Error::NoAdapter(format!("no adapter name contains {spec:?}")))
    }

    fn chosen_index(&self) -> Result<usize> {
        if let Some(s) = crate::platform::env_var("KILN_BACKENDS") {
            parse_backends(&s)?;
        }
        let mut chosen = self.chosen.lock().unwrap();
        if let Some(i) = *chosen {
            return Ok(i);
        }
        if self.adapters.is_empty() {
            return Err(self.no_adapter());
        }
        let i = match crate::platform::env_var("KILN_ADAPTER") {
            Some(spec) if !spec.trim().is_empty() => self.find_adapter(&spec)?,
            _ => 0,
        };
        *chosen = Some(i);
        Ok(i)
    }

    /// Makes the adapter matching `spec` the default for every later call in this process.
    pub fn select_adapter(&self, spec: &str) -> Result<AdapterInfo> {
        let i = self.find_adapter(spec)?;
        *self.chosen.lock().unwrap() = Some(i);
        Ok(self.info(i, Some(i)))
    }

    /// The default device, created on first use, re-created after a loss; on a thread inside
    /// [`with_device`], that call's device.
    pub fn device(&self) -> Result<Arc<Device>> {
        if let Some(d) = scoped_device() {
            return Ok(d);
        }
        let i = self.chosen_index()?;
        self.device_at(i)
    }

    pub fn device_at(&self, index: usize) -> Result<Arc<Device>> {
        if index >= self.adapters.len() {
            return Err(self.no_adapter());
        }
        #[cfg_attr(target_arch = "wasm32", allow(unused_mut))]
        let mut devices = self.devices.lock().unwrap();
        if let Some(d) = devices.get(&index) {
            if !d.is_lost() {
                return Ok(d.clone());
            }
        }
        #[cfg(target_arch = "wasm32")]
        return Err(Error::DeviceLost("no live device in this page: await Kiln's init (again) first".into()));
        #[cfg(not(target_arch = "wasm32"))]
        {
            let chosen = self.chosen.lock().unwrap().unwrap_or(0);
            let d = Device::create(&self.adapters[index], self.info(index, Some(chosen)))?;
            devices.insert(index, d.clone());
            Ok(d)
        }
    }

    /// The default device, opened (or re-opened after a loss) without blocking: the browser's
    /// way; natively the same as `device`.
    pub async fn device_async(&self) -> Result<Arc<Device>> {
        let index = self.chosen_index()?;
        if let Ok(d) = self.device_at(index) {
            return Ok(d);
        }
        let chosen = self.chosen.lock().unwrap().unwrap_or(0);
        let d = Device::create_async(&self.adapters[index], self.info(index, Some(chosen))).await?;
        // Another caller may have opened one meanwhile: the first stored wins.
        let mut devices = self.devices.lock().unwrap();
        match devices.get(&index) {
            Some(other) if !other.is_lost() => Ok(other.clone()),
            _ => {
                devices.insert(index, d.clone());
                Ok(d)
            }
        }
    }
}

impl Runtime {
    /// Destroys every device created so far (their tensors and kernels answer DeviceLost from
    /// then on); the next call that needs a device creates a fresh one. The public way out of a
    /// timeout or any other stuck state, exposed in every binding.
    pub fn reset_devices(&self) {
        let devices: Vec<Arc<Device>> = self.devices.lock().unwrap().drain().map(|(_, d)| d).collect();
        for d in devices {
            d.destroy();
        }
    }
}

/// Destroys the process's devices; the next call creates a fresh one (see `Runtime::reset_devices`).
pub fn reset_devices() {
    if let Some(rt) = RUNTIME.get() {
        rt.reset_devices();
    }
}

thread_local! {
    /// `with_device`'s device for this thread (None: the process's default).
    static SCOPED: std::cell::RefCell<Option<Arc<Device>>> = const { std::cell::RefCell::new(None) };
}

/// Puts the thread's previous scoped device back, also when `f` panics.
struct Restore(Option<Arc<Device>>);

impl Drop for Restore {
    fn drop(&mut self) {
        let before = self.0.take();
        SCOPED.with(|s| *s.borrow_mut() = before);
    }
}

/// Runs `f` with `device` as this thread's default device: every tensor, kernel and model that
/// `f` creates without naming a device (`Tensor::from_slice`, `ops::full`, a model's load) is
/// made on `device`. Other threads keep theirs. How one model is loaded and run on each of
/// several GPUs (kiln-models' `Replicas`): the model code names no device, so a thread scoped
/// to GPU k loads and runs GPU k's copy. Nests; the previous choice returns when `f` ends.
pub fn with_device<R>(device: &Arc<Device>, f: impl FnOnce() -> R) -> R {
    let before = SCOPED.with(|s| s.borrow_mut().replace(device.clone()));
    let _restore = Restore(before);
    f()
}

/// The device [`with_device`] set for this thread, if any.
pub fn scoped_device() -> Option<Arc<Device>> {
    SCOPED.with(|s| s.borrow().clone())
}

/// The default device of the process-wide runtime (this thread's [`with_device`] choice first).
pub fn device() -> Result<Arc<Device>> {
    runtime().device()
}

pub fn adapters() -> Vec<AdapterInfo> {
    runtime().adapters()
}

pub fn select_adapter(spec: &str) -> Result<AdapterInfo> {
    runtime().select_adapter(spec)
}

/// Submits all queued work on the default device and waits until the GPU has finished it.
pub fn synchronize() -> Result<()> {
    device()?.synchronize()
}

/// `synchronize`, awaited (the browser's way).
pub async fn synchronize_async() -> Result<()> {
    device()?.synchronize_async().await
}
