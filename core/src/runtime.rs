//! The one process-wide runtime: one wgpu Instance, the adapter list and one
//! lazily created device per adapter, shared by every caller and every language binding.

pub use crate::adapter::AdapterInfo;
use crate::device::Device;
use crate::{Error, Result};
use once_cell::sync::OnceCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub struct Runtime {
    /// Owns the adapters below; kept for the life of the process.
    _instance: wgpu::Instance,
    adapters: Vec<wgpu::Adapter>,
    chosen: Mutex<Option<usize>>,
    devices: Mutex<HashMap<usize, Arc<Device>>>,
}

static RUNTIME: OnceCell<Runtime> = OnceCell::new();

/// The process-wide runtime, created on first use.
pub fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(Runtime::new)
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
    fn new() -> Runtime {
        // A bad KILN_BACKENDS is reported when a device is asked for (see `device`), so the
        // runtime itself always starts; here it falls back to the primary backends.
        let explicit = std::env::var("KILN_BACKENDS").ok().and_then(|s| parse_backends(&s).ok());
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = explicit.unwrap_or(wgpu::Backends::PRIMARY);
        let instance = wgpu::Instance::new(desc);
        let mut adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
        // GL is a fallback only: llvmpipe's GL and lavapipe would otherwise both be listed.
        if adapters.is_empty() && explicit.is_none() {
            let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
            desc.backends = wgpu::Backends::GL;
            let gl = wgpu::Instance::new(desc);
            adapters = pollster::block_on(gl.enumerate_adapters(wgpu::Backends::all()));
        }
        adapters.sort_by_key(|a| {
            let i = a.get_info();
            (type_rank(i.device_type), backend_rank(i.backend))
        });
        Runtime { _instance: instance, adapters, chosen: Mutex::new(None), devices: Mutex::new(HashMap::new()) }
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

    fn no_adapter() -> Error {
        Error::NoAdapter(
            "no GPU adapter found. Without a GPU, install a software Vulkan driver: \
             `apt-get install -y mesa-vulkan-drivers libvulkan1` (Debian/Ubuntu); \
             check KILN_BACKENDS / KILN_ADAPTER if they are set"
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
        if let Ok(s) = std::env::var("KILN_BACKENDS") {
            parse_backends(&s)?;
        }
        let mut chosen = self.chosen.lock().unwrap();
        if let Some(i) = *chosen {
            return Ok(i);
        }
        if self.adapters.is_empty() {
            return Err(Self::no_adapter());
        }
        let i = match std::env::var("KILN_ADAPTER") {
            Ok(spec) if !spec.trim().is_empty() => self.find_adapter(&spec)?,
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

    /// The default device, created on first use, re-created after a loss.
    pub fn device(&self) -> Result<Arc<Device>> {
        let i = self.chosen_index()?;
        self.device_at(i)
    }

    pub fn device_at(&self, index: usize) -> Result<Arc<Device>> {
        if index >= self.adapters.len() {
            return Err(Self::no_adapter());
        }
        let mut devices = self.devices.lock().unwrap();
        if let Some(d) = devices.get(&index) {
            if !d.is_lost() {
                return Ok(d.clone());
            }
        }
        let chosen = self.chosen.lock().unwrap().unwrap_or(0);
        let d = Device::create(&self.adapters[index], self.info(index, Some(chosen)))?;
        devices.insert(index, d.clone());
        Ok(d)
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

/// The default device of the process-wide runtime.
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
