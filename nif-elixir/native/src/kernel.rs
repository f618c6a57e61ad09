//! Custom WGSL kernels and the runtime: compile, dispatch, devices, synchronize, memory stats.

use crate::{bad_arg, guard, Bytes, Groups, List, Reply, TRef, Text};
use kiln_core::{Error, Kernel};
use rustler::Env;
use rustler::{Decoder, NifMap, NifResult, ResourceArc, Term};

pub struct KernelRes(Kernel);

// The kernel is immutable after compilation; a panic cannot leave it half-updated.
impl std::panic::RefUnwindSafe for KernelRes {}

#[rustler::resource_impl]
impl rustler::Resource for KernelRes {}

/// A kernel argument: the resource inside a `%Kiln.Kernel{}`.
pub struct KRef(ResourceArc<KernelRes>);

impl<'a> Decoder<'a> for KRef {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        term.decode::<ResourceArc<KernelRes>>().map(KRef).map_err(|_| bad_arg(term, "expected a compiled Kiln.Kernel"))
    }
}

#[derive(NifMap)]
pub struct Binding {
    binding: u32,
    name: String,
    dtype: Option<String>,
    min_bytes: u64,
    writable: bool,
}

#[derive(NifMap)]
pub struct KernelInfo {
    entry: String,
    workgroup_size: (u32, u32, u32),
    bindings: Vec<Binding>,
    uniform_bytes: Option<u64>,
}

/// naga parse + validation + pipeline compile: CPU work, so a dirty CPU scheduler. kiln-core
/// compiles on a thread of its own with a stack sized for the largest accepted source, so the
/// scheduler's small stack is never at risk. `source` and `entry` must be UTF-8.
#[rustler::nif(schedule = "DirtyCpu")]
fn kernel_compile(env: Env<'_>, source: Text, entry: Text) -> Reply<(ResourceArc<KernelRes>, KernelInfo)> {
    let (source, entry) = (source.0, entry.0);
    guard(env, move || {
        let k = Kernel::new(&source, &entry)?;
        let [x, y, z] = k.workgroup_size();
        let info = KernelInfo {
            entry: k.entry().to_string(),
            workgroup_size: (x, y, z),
            bindings: k
                .storage_bindings()
                .iter()
                .map(|b| Binding {
                    binding: b.binding,
                    name: b.name.clone(),
                    dtype: b.dtype.map(|d| d.name().to_string()),
                    min_bytes: b.min_bytes,
                    writable: b.writable,
                })
                .collect(),
            uniform_bytes: k.uniform_binding().map(|u| u.min_bytes),
        };
        Ok((ResourceArc::new(KernelRes(k)), info))
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn kernel_dispatch(env: Env<'_>, k: KRef, tensors: List<TRef>, workgroups: Groups, uniforms: Bytes) -> Reply<()> {
    guard(env, || {
        let ts = tensors.0.iter().map(|t| t.get()).collect::<kiln_core::Result<Vec<_>>>()?;
        let refs: Vec<&kiln_core::Tensor> = ts.iter().collect();
        let u = if uniforms.0.is_empty() { None } else { Some(uniforms.0.as_slice()) };
        k.0 .0.dispatch(&refs, u, workgroups.0)
    })
}

#[derive(NifMap)]
pub struct DeviceInfo {
    index: usize,
    name: String,
    vendor: u32,
    device_id: u32,
    device_type: String,
    backend: String,
    driver: String,
    driver_info: String,
    max_buffer_size: u64,
    max_storage_buffer_binding_size: u64,
    max_compute_workgroups_per_dimension: u32,
    max_compute_invocations_per_workgroup: u32,
    max_compute_workgroup_storage_size: u32,
    shader_f16: bool,
    timestamp_query: bool,
    subgroups: bool,
    chosen: bool,
}

#[rustler::nif(schedule = "DirtyIo")]
fn devices(env: Env<'_>) -> Reply<Vec<DeviceInfo>> {
    guard(env, || {
        let list = kiln_core::adapters();
        if list.is_empty() {
            // Asking for the device gives core's NO_ADAPTER error with its install hint.
            kiln_core::device()?;
            return Err(Error::NoAdapter("no GPU adapter found".into()));
        }
        Ok(list
            .into_iter()
            .map(|a| DeviceInfo {
                index: a.index,
                name: a.name,
                vendor: a.vendor,
                device_id: a.device_id,
                device_type: a.device_type,
                backend: a.backend,
                driver: a.driver,
                driver_info: a.driver_info,
                max_buffer_size: a.max_buffer_size,
                max_storage_buffer_binding_size: a.max_storage_buffer_binding_size,
                max_compute_workgroups_per_dimension: a.max_compute_workgroups_per_dimension,
                max_compute_invocations_per_workgroup: a.max_compute_invocations_per_workgroup,
                max_compute_workgroup_storage_size: a.max_compute_workgroup_storage_size,
                shader_f16: a.shader_f16,
                timestamp_query: a.timestamp_query,
                subgroups: a.subgroups,
                chosen: a.chosen,
            })
            .collect())
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn synchronize(env: Env<'_>) -> Reply<()> {
    guard(env, kiln_core::synchronize)
}

/// Destroys the process's devices; tensors and kernels made before answer DEVICE_LOST, and the
/// next call creates a fresh device.
#[rustler::nif(schedule = "DirtyIo")]
fn reset_devices(env: Env<'_>) -> Reply<()> {
    guard(env, || {
        kiln_core::reset_devices();
        Ok(())
    })
}

#[derive(NifMap)]
pub struct MemStats {
    allocated_bytes: u64,
    in_use_bytes: u64,
    peak_bytes: u64,
    live_buffers: u64,
    pooled_bytes: u64,
}

#[rustler::nif(schedule = "DirtyIo")]
fn memory_stats(env: Env<'_>) -> Reply<MemStats> {
    guard(env, || {
        let s = kiln_core::device()?.memory_stats();
        Ok(MemStats {
            allocated_bytes: s.allocated_bytes,
            in_use_bytes: s.in_use_bytes,
            peak_bytes: s.peak_bytes,
            live_buffers: s.live_buffers,
            pooled_bytes: s.pooled_bytes,
        })
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn empty_cache(env: Env<'_>) -> Reply<()> {
    guard(env, || {
        kiln_core::device()?.empty_cache();
        Ok(())
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn has_f16(env: Env<'_>) -> Reply<bool> {
    guard(env, || Ok(kiln_core::device()?.has_f16()))
}
