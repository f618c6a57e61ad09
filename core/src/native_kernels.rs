//! The native tier's (`crate::native`) fixed table of SPIR-V modules (shaders/native/spv/, compiled from
//! shaders/native/*.comp by `make native-shaders`, one per line of shaders/native/kernels.txt),
//! and their pipelines: created through wgpu's passthrough shaders with an explicit layout
//! (passthrough modules carry no reflection for wgpu to derive one from).

use crate::device::Device;
use crate::pipeline::Pipeline;
use crate::{Error, Result};
use std::sync::Arc;

/// One module: its name (kernels.txt's first column) and its SPIR-V bytes.
pub(crate) struct Module {
    pub(crate) name: &'static str,
    pub(crate) spirv: &'static [u8],
    /// Invocations per workgroup (the module's `local_size_x`; y and z are 1).
    pub(crate) threads: u32,
    /// Read-only storage buffers, bound at 0 .. inputs; the output is bound at `inputs` and the
    /// uniform parameter block at `inputs + 1`.
    pub(crate) inputs: u32,
}

#[cfg_attr(target_arch = "wasm32", allow(unused_macros))]
macro_rules! module {
    ($name:literal, $threads:expr) => {
        module!($name, $threads, 2)
    };
    ($name:literal, $threads:expr, $inputs:expr) => {
        Module {
            name: $name,
            spirv: include_bytes!(concat!("../../shaders/native/spv/", $name, ".spv")),
            threads: $threads,
            inputs: $inputs,
        }
    };
}

/// Every module, as kernels.txt lists them (the tests check the two agree). Threads: WM*WN*32
/// (matmul_f16.comp), WG (matmul_f16_cm2.comp, attention_f16_cm2.comp); inputs: 2 (a, b) unless
/// given (q, k, v: 3; with a mask 4).
/// None in the browser, which has no passthrough shaders (and so no native tier).
#[cfg(target_arch = "wasm32")]
pub(crate) const MODULES: &[Module] = &[];
#[cfg(not(target_arch = "wasm32"))]
pub(crate) const MODULES: &[Module] = &[
    module!("plumbing_add", 64),
    module!("matmul_f16_l_aligned", 128),
    module!("matmul_f16_l", 128),
    module!("matmul_f16_l1_aligned", 128),
    module!("matmul_f16_l1", 128),
    module!("matmul_f16_l1o_aligned", 128),
    module!("matmul_f16_l1o", 128),
    module!("matmul_f16_s_aligned", 128),
    module!("matmul_f16_s", 128),
    module!("matmul_f16_l1u_aligned", 128),
    module!("matmul_f16_l1u", 128),
    module!("matmul_f16_cm2_l", 256),
    module!("matmul_f16_cm2_lt", 256),
    module!("matmul_f16_cm2_l32", 256),
    module!("matmul_f16_cm2_m", 256),
    module!("matmul_f16_cm2_lc", 256),
    module!("matmul_f16_cm2_qm", 256),
    module!("matmul_f16_cm2_qm_f32", 256),
    module!("attention_f16_cm2_d64", 128, 3),
    module!("attention_f16_cm2_d64s", 128, 3),
    module!("attention_f16_cm2_d64y", 256, 3),
    module!("attention_f16_cm2_d128", 128, 3),
    module!("attention_f16_cm2_d64s_m", 128, 4),
    module!("attention_f16_cm2_d128_m", 128, 4),
];

/// Whether the driver refused module `name`'s pipeline on `device` (its ops then choose
/// another kernel by themselves; a forced choice still reports the error).
pub(crate) fn refused(device: &Device, name: &str) -> bool {
    device.native_refused.lock().unwrap_or_else(|p| p.into_inner()).contains(&name)
}

/// The names of every module (tests compare them with kernels.txt).
#[doc(hidden)]
pub fn module_names() -> Vec<&'static str> {
    MODULES.iter().map(|m| m.name).collect()
}

/// The SPIR-V words of `bytes`: whole little-endian words starting with SPIR-V's magic number.
pub(crate) fn words(bytes: &[u8]) -> Result<Vec<u32>> {
    if bytes.len() < 20 || !bytes.len().is_multiple_of(4) {
        return Err(Error::Internal(format!("native module of {} bytes is no SPIR-V", bytes.len())));
    }
    let w: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    if w[0] != 0x0723_0203 {
        return Err(Error::Internal(format!("native module starts with {:#x}, not SPIR-V's magic", w[0])));
    }
    Ok(w)
}

/// The pipeline of module `name`, compiled once per device and cached under `key` (whose
/// leading segment is the op label its metrics count under). Bindings: the module's inputs
/// read-only storage from 0, then the output read-write, then the uniform parameter block (for
/// two inputs 0, 1 / 2 / 3, as `Device::dispatch` binds a 3-tensor launch).
pub(crate) fn pipeline(device: &Device, key: &str, name: &str) -> Result<Arc<Pipeline>> {
    device.check_alive()?;
    if let Some(p) = device.pipelines.get_cached(key) {
        return Ok(p);
    }
    if !device.native.passthrough {
        return Err(Error::Internal(format!("native kernel {name} on a device without passthrough shaders")));
    }
    let module = MODULES
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| Error::Internal(format!("no native module named {name}")))?;
    let start = crate::platform::Instant::now();
    let spirv = words(module.spirv)?;
    let dev = &device.device;
    let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
    let storage = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    };
    let n = module.inputs;
    let mut entries: Vec<wgpu::BindGroupLayoutEntry> = (0..n).map(|b| storage(b, true)).collect();
    entries.push(storage(n, false));
    entries.push(wgpu::BindGroupLayoutEntry {
        binding: n + 1,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    });
    let layout =
        dev.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(name), entries: &entries });
    let pipeline_layout = dev.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(name),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    // SAFETY: the module is one of this repository's own kernels (MODULES, compiled from
    // shaders/native/ and checked by spirv-val in `make lint`), never caller-supplied code; every
    // global index in it is guarded against the problem's sizes and every workgroup-memory
    // index is in range by construction (reasoned in the sources, tested on ragged shapes).
    let shader = unsafe {
        dev.create_shader_module_passthrough(wgpu::ShaderModuleDescriptorPassthrough {
            label: Some(name),
            entry_points: std::borrow::Cow::Owned(vec![wgpu::PassthroughShaderEntryPoint {
                name: "main".into(),
                workgroup_size: (module.threads, 1, 1),
            }]),
            spirv: Some(std::borrow::Cow::Owned(spirv)),
            ..Default::default()
        })
    };
    let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(key),
        layout: Some(&pipeline_layout),
        module: &shader,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: device.pipelines.driver_cache(),
    });
    let mname = module.name;
    crate::platform::check_scope(scope, move |err| {
        Error::Internal(format!("native kernel {mname} failed to compile: {err}"))
    })
    .inspect_err(|_| device.native_refused.lock().unwrap_or_else(|p| p.into_inner()).push(mname))?;
    device.pipelines.record_compile(start.elapsed());
    device.pipelines.note_builtin_compile();
    let op = crate::stats::counters::op_stats(&crate::pipeline::op_label(key));
    let p = Arc::new(Pipeline {
        pipeline,
        layout: Some(layout),
        dynamic_params: false,
        group_invocations: module.threads,
        op,
    });
    Ok(device.pipelines.insert(key, p))
}

/// Runs the plumbing module (shaders/native/plumbing_add.comp: `c = a + b` on u32) on any
/// device with passthrough shaders: the tests' check of the SPIR-V path, layout and parameter
/// block where the matmul's cooperative matrices are missing (lavapipe).
#[doc(hidden)]
pub fn plumbing_add(a: &crate::Tensor, b: &crate::Tensor) -> Result<crate::Tensor> {
    let device = crate::exec::check_same_device(&[a, b])?;
    if a.dtype() != crate::DType::U32 || b.dtype() != crate::DType::U32 || a.shape() != b.shape() {
        return Err(Error::InvalidArgument("plumbing_add: two u32 tensors of one shape".into()));
    }
    if !device.native.passthrough {
        return Err(Error::Unsupported("this device has no passthrough shaders".into()));
    }
    let out = crate::Tensor::empty_on(&device, a.shape(), crate::DType::U32)?;
    let n = a.numel();
    if n == 0 {
        return Ok(out);
    }
    let pipe = pipeline(&device, "native_plumbing:u32", "plumbing_add")?;
    let groups = crate::exec::grid(n.div_ceil(64) as u64, device.limits().max_compute_workgroups_per_dimension)?;
    if groups[1] > 1 {
        return Err(Error::InvalidArgument("plumbing_add: one row of workgroups only".into()));
    }
    let params = crate::exec::Params::new().u32(n);
    let bindings = [
        crate::device::Binding { slot: 0, buffer: a.raw(), size: None },
        crate::device::Binding { slot: 1, buffer: b.raw(), size: None },
        crate::device::Binding { slot: 2, buffer: out.raw(), size: None },
    ];
    device.dispatch(&pipe, &bindings, Some((3, params.bytes())), groups, None)?;
    Ok(out)
}
