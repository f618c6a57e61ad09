//! Compiling one compute pipeline: wgpu's validation errors as `Error::Shader`, the explicit
//! layout that gives the parameter block a dynamic offset, and what a dispatch needs to know
//! of the pipeline (`Pipeline`).

use super::op_label;
use crate::{Error, Result};
use std::sync::Arc;

pub struct Pipeline {
    pub(crate) pipeline: wgpu::ComputePipeline,
    /// None for a kernel without bindings (wgpu has no group 0 to hand out then).
    pub(crate) layout: Option<wgpu::BindGroupLayout>,
    /// Whether the parameter block (the one uniform binding) has a dynamic offset in `layout`:
    /// given at `set_bind_group`, so the bind group can be cached (`device::bind_cache`).
    pub(crate) dynamic_params: bool,
    /// Invocations per workgroup (x × y × z of `@workgroup_size`), what a session's operation
    /// count multiplies the workgroups by; 1 where it could not be read (a pipeline-overridable
    /// size).
    pub(crate) group_invocations: u32,
    /// The metrics of the op this pipeline belongs to (from its cache key, see
    /// `op_label`): found once here, so a dispatch never looks it up.
    pub(crate) op: Arc<crate::stats::counters::OpStats>,
}

/// Invocations per workgroup of `entry` in `module` (1 when it cannot be read).
fn group_invocations_of(module: Option<&naga::Module>, entry: &str) -> u32 {
    let Some(ep) = module.and_then(|m| m.entry_points.iter().find(|e| e.name == entry)) else { return 1 };
    ep.workgroup_size.iter().product::<u32>().max(1)
}

/// Group 0's layout as wgpu derives it for `entry` (the buffers the entry point uses, storage
/// read-only where declared so), except that its one uniform buffer, the parameter block, has a
/// dynamic offset: a dispatch then names the block's place at `set_bind_group`, and its bind
/// group does not depend on where in the batch's blocks it went (`device::bind_cache`). None
/// where the kernel is not of that form (no or several uniforms, another group, a texture, a
/// module naga rejects): it keeps wgpu's derived layout.
fn params_layout(module: &naga::Module, entry: &str) -> Option<Vec<wgpu::BindGroupLayoutEntry>> {
    use naga::valid::{Capabilities, ValidationFlags, Validator};
    let ep = module.entry_points.iter().position(|e| e.name == entry)?;
    let info = Validator::new(ValidationFlags::all(), Capabilities::all()).validate(module).ok()?;
    let uses = info.get_entry_point(ep);
    let (mut entries, mut uniforms) = (Vec::new(), 0);
    for (h, var) in module.global_variables.iter() {
        let Some(rb) = &var.binding else { continue };
        if uses[h].is_empty() {
            continue;
        }
        if rb.group != 0 {
            return None;
        }
        let ty = match var.space {
            naga::AddressSpace::Uniform => {
                uniforms += 1;
                wgpu::BufferBindingType::Uniform
            }
            naga::AddressSpace::Storage { access } => {
                wgpu::BufferBindingType::Storage { read_only: !access.contains(naga::StorageAccess::STORE) }
            }
            _ => return None,
        };
        entries.push(wgpu::BindGroupLayoutEntry {
            binding: rb.binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty,
                has_dynamic_offset: ty == wgpu::BufferBindingType::Uniform,
                // Checked when dispatched against what the shader needs (wgpu's late check).
                min_binding_size: None,
            },
            count: None,
        });
    }
    (uniforms == 1).then_some(entries)
}

/// Whether a kernel may drop naga's runtime bounds checks. Only built-in kernels whose indexing
/// the test-suite covers (every index is guarded by an explicit `if (i >= n)`) ask for this.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Checks {
    Bounded,
    Unchecked,
}

/// Compiles one compute pipeline, turning wgpu validation errors into `Error::Shader`, on the
/// calling thread. For user kernels that is a `kernel_limits::run_compile`
/// thread: wgpu parses the WGSL again with naga, whose recursion needs its big stack. `op` is
/// the pipeline's metrics label where the caller knows it (else `op_label(label)`). `cache`: the
/// driver-level cache to compile with (built-in kernels only, see `persistent_cache`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn compile_with(
    device: &wgpu::Device,
    label: &str,
    src: &str,
    entry: &str,
    checks: Checks,
    has_bindings: bool,
    group_invocations: Option<u32>,
    op: Option<&str>,
    cache: Option<&wgpu::PipelineCache>,
) -> Result<Pipeline> {
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let desc = wgpu::ShaderModuleDescriptor { label: Some(label), source: wgpu::ShaderSource::Wgsl(src.into()) };
    let wgpu_module = crate::startup::span("shader module (wgpu: WGSL parse, validate, SPIR-V)");
    let module = match checks {
        Checks::Bounded => device.create_shader_module(desc),
        // SAFETY: only built-in kernels ask for Unchecked, and each guards every index with an
        // explicit range check that the test-suite exercises (see `Checks`).
        Checks::Unchecked => unsafe {
            device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked())
        },
    };
    drop(wgpu_module);
    let reflection = crate::startup::span("layout reflection (naga: WGSL parse, validate again)");
    let parsed = naga::front::wgsl::parse_str(src).ok();
    let explicit = parsed.as_ref().filter(|_| has_bindings).and_then(|m| params_layout(m, entry)).map(|entries| {
        let bgl =
            device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(label), entries: &entries });
        let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(label),
            bind_group_layouts: &[Some(&bgl)],
            immediate_size: 0,
        });
        (bgl, pl)
    });
    drop(reflection);
    let driver = crate::startup::span("compute pipeline (driver: compile or cache hit)");
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(label),
        layout: explicit.as_ref().map(|(_, pl)| pl),
        module: &module,
        entry_point: Some(entry),
        compilation_options: Default::default(),
        cache,
    });
    let dynamic_params = explicit.is_some();
    // Inside the scope: on an invalid pipeline it fails too, and must not escape uncaptured.
    let layout = match explicit {
        Some((bgl, _)) => Some(bgl),
        None => has_bindings.then(|| pipeline.get_bind_group_layout(0)),
    };
    drop(driver);
    crate::platform::check_scope(scope, |err| Error::Shader(err.to_string()))
        .map_err(crate::stats::counters::count_error)?;
    let group_invocations = group_invocations.unwrap_or_else(|| group_invocations_of(parsed.as_ref(), entry));
    let op = crate::stats::counters::op_stats(&op.map_or_else(|| op_label(label), str::to_string));
    Ok(Pipeline { pipeline, layout, dynamic_params, group_invocations, op })
}
