//! The one path every built-in op takes to the GPU: render a kernel from its template, fetch
//! it from the pipeline cache, bind tensors and a parameter block, dispatch.

use crate::device::{Binding, Device};
use crate::pipeline::{Checks, Pipeline, PipelineKey};
use crate::tensor::Tensor;
use crate::{DType, Error, Result};
use std::sync::Arc;

/// Threads per workgroup of the 1-D kernels; shaders use the same number.
pub(crate) const WG: u32 = 256;

/// A uniform parameter block, laid out as WGSL lays out a struct of u32/f32 fields and
/// `array<vec4<u32>, 2>` dimension lists.
#[derive(Default)]
pub(crate) struct Params(Vec<u32>);

impl Params {
    pub(crate) fn new() -> Params {
        Params(Vec::new())
    }
    pub(crate) fn u32(mut self, v: impl TryInto<u32>) -> Params {
        self.0.push(v.try_into().unwrap_or(u32::MAX));
        self
    }
    pub(crate) fn f32(mut self, v: f32) -> Params {
        self.0.push(v.to_bits());
        self
    }
    /// Eight u32s, 16-byte aligned (WGSL `array<vec4<u32>, 2>`); missing entries are `fill`.
    pub(crate) fn dims8(mut self, dims: &[usize], fill: u32) -> Params {
        while !self.0.len().is_multiple_of(4) {
            self.0.push(0);
        }
        for i in 0..8 {
            self.0.push(dims.get(i).map_or(fill, |&d| d as u32));
        }
        self
    }
    /// Words so far: the index the next field will have (a plan's `follow` patches it).
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
    pub(crate) fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
}

/// WGSL header lines for kernels touching f16 data.
pub(crate) fn enables(dtypes: &[DType]) -> &'static str {
    if dtypes.contains(&DType::F16) {
        "enable f16;\n"
    } else {
        ""
    }
}

/// InvalidArgument when `n` elements are more than a kernel's u32 index can reach.
pub(crate) fn check_indexable(n: usize) -> Result<()> {
    if n > u32::MAX as usize {
        return Err(Error::InvalidArgument(format!("{n} elements are more than one kernel can index")));
    }
    Ok(())
}

/// Rejects f16 on adapters without SHADER_F16.
pub(crate) fn check_f16(device: &Device, dtypes: &[DType]) -> Result<()> {
    if dtypes.contains(&DType::F16) && !device.has_f16() {
        return Err(Error::Unsupported(format!("the adapter {} has no f16 shader support", device.info().name)));
    }
    Ok(())
}

pub(crate) fn check_same_device(ts: &[&Tensor]) -> Result<Arc<Device>> {
    let first = ts.first().ok_or_else(|| Error::Internal("op with no tensors".into()))?;
    for t in &ts[1..] {
        first.same_device(t)?;
    }
    Ok(first.device.clone())
}

/// Workgroups for `threads` threads of `WG`, spread over x and y past the per-dimension limit.
pub(crate) fn groups_1d(device: &Device, threads: usize) -> Result<[u32; 3]> {
    grid((threads as u64).div_ceil(WG as u64), device.limits().max_compute_workgroups_per_dimension)
}

/// Charges the current session (if any) `work` operations for one built-in op whose work
/// outgrows the data its dispatches bind (`what`: multiply-adds of a matmul, a convolution or a
/// pooling window, an attention), before anything of the op is recorded: over the session's
/// per-dispatch or total budget it is refused with COMPUTE_LIMIT and nothing runs. Every op
/// family computes its `work` from its shapes in one place (`ops::matmul::Problem::macs`,
/// `ops::conv::Geometry::macs`, ...); the rest are memory-bound and charged per dispatch (see
/// `Device::dispatch`).
pub(crate) fn charge_work(what: &str, work: u64) -> Result<()> {
    match crate::session::current_inner() {
        Some(s) => s.charge_work(what, work),
        None => Ok(()),
    }
}

/// The product of `dims`, saturating at u64::MAX (an op's work, from its shapes).
pub(crate) fn work_of(dims: &[usize]) -> u64 {
    dims.iter().fold(1u64, |acc, &d| acc.saturating_mul(d as u64))
}

/// A launch's pipeline cache key: a `format!`ed string (most ops) or a typed [`PipelineKey`]
/// (the ops a decode token runs, looked up without formatting or allocating).
pub(crate) trait LaunchKey {
    fn fetch(&self, device: &Device, checks: Checks, source: impl FnOnce() -> String) -> Result<Arc<Pipeline>>;
}

impl LaunchKey for String {
    fn fetch(&self, device: &Device, checks: Checks, source: impl FnOnce() -> String) -> Result<Arc<Pipeline>> {
        device.pipeline(self, checks, source)
    }
}

impl LaunchKey for PipelineKey {
    fn fetch(&self, device: &Device, checks: Checks, source: impl FnOnce() -> String) -> Result<Arc<Pipeline>> {
        device.pipeline_typed(*self, checks, source)
    }
}

/// One built-in kernel launch.
pub(crate) struct Launch<'a, K: LaunchKey = String> {
    /// Cache key: kernel name plus everything that changes the rendered source.
    pub key: K,
    pub source: Box<dyn FnOnce() -> String + 'a>,
    pub tensors: &'a [&'a Tensor],
    pub params: Option<Params>,
    pub groups: [u32; 3],
}

impl<K: LaunchKey> Launch<'_, K> {
    /// Compiles (or fetches) the kernel with naga's bounds checks and dispatches it: tensors
    /// bound at slots 0.., the parameter block after them.
    pub(crate) fn run(self, device: &Device) -> Result<()> {
        self.run_with(device, Checks::Bounded)
    }

    /// `run` with the given checks. `Checks::Unchecked` drops naga's per-access bounds clamping:
    /// only for kernels whose every index is guarded against the problem's sizes or in range by
    /// construction, and whose tests run ragged shapes through every variant (matmul's).
    pub(crate) fn run_with(self, device: &Device, checks: Checks) -> Result<()> {
        // A buffer of another device bound here would be a wgpu validation panic: the ops check
        // their operands (core/tests/two_devices.rs attacks them with two real adapters), and
        // every built-in launch checks again here, for an op that forgets.
        if let Some(i) = self.tensors.iter().position(|t| !std::ptr::eq(Arc::as_ptr(t.device()), device)) {
            return Err(Error::InvalidArgument(format!(
                "operand {i} lives on another device ({}) than the op's ({})",
                self.tensors[i].device().info().name,
                device.info().name
            )));
        }
        if self.groups.contains(&0) {
            return Ok(());
        }
        let pipe = self.key.fetch(device, checks, self.source)?;
        let bindings: Vec<Binding<'_>> = self
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| Binding { slot: i as u32, buffer: t.raw(), size: None })
            .collect();
        let slot = self.tensors.len() as u32;
        device.dispatch(&pipe, &bindings, self.params.as_ref().map(|p| (slot, p.bytes())), self.groups, None)
    }
}

/// Splits `groups` workgroups over x and y so that neither exceeds the per-dimension limit.
/// Kernels rebuild the linear index as `gid.x + gid.y * num_workgroups.x * WG`.
pub(crate) fn grid(groups: u64, max_per_dim: u32) -> Result<[u32; 3]> {
    let max = max_per_dim as u64;
    if groups <= max {
        return Ok([groups as u32, 1, 1]);
    }
    let y = groups.div_ceil(max);
    if y > max {
        return Err(Error::InvalidArgument(format!("{groups} workgroups are more than this device can dispatch")));
    }
    let x = groups.div_ceil(y);
    Ok([x as u32, y as u32, 1])
}
