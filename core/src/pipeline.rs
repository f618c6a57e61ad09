//! Compiled compute pipelines, cached by kernel name and specialization.

use crate::{Error, Result};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub struct Pipeline {
    pub(crate) pipeline: wgpu::ComputePipeline,
    /// None for a kernel without bindings (wgpu has no group 0 to hand out then).
    pub(crate) layout: Option<wgpu::BindGroupLayout>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PipelineStats {
    pub pipelines: u64,
    pub hits: u64,
    pub misses: u64,
    pub compile_seconds: f64,
}

#[derive(Default)]
pub(crate) struct PipelineCache {
    map: Mutex<HashMap<String, Arc<Pipeline>>>,
    hits: AtomicU64,
    misses: AtomicU64,
    compile_nanos: AtomicU64,
}

/// Whether a kernel may drop naga's runtime bounds checks. Only built-in kernels whose indexing
/// the test-suite covers (every index is guarded by an explicit `if (i >= n)`) ask for this.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checks {
    Bounded,
    Unchecked,
}

impl PipelineCache {
    pub(crate) fn get_or_compile(
        &self,
        device: &wgpu::Device,
        key: &str,
        entry: &str,
        checks: Checks,
        source: impl FnOnce() -> String,
    ) -> Result<Arc<Pipeline>> {
        if let Some(p) = self.map.lock().unwrap().get(key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(p.clone());
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        let src = source();
        let p = Arc::new(compile(device, key, &src, entry, checks).map_err(|e| match e {
            Error::Shader(m) => Error::Internal(format!("built-in kernel {key} failed to compile: {m}")),
            e => e,
        })?);
        self.compile_nanos.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        // Two threads may compile the same key at once; the first one stored wins.
        Ok(self.map.lock().unwrap().entry(key.to_string()).or_insert(p).clone())
    }

    pub(crate) fn get_cached(&self, key: &str) -> Option<Arc<Pipeline>> {
        let p = self.map.lock().unwrap().get(key).cloned();
        if p.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        } else {
            self.misses.fetch_add(1, Ordering::Relaxed);
        }
        p
    }

    pub(crate) fn insert(&self, key: &str, p: Arc<Pipeline>) -> Arc<Pipeline> {
        self.map.lock().unwrap().entry(key.to_string()).or_insert(p).clone()
    }

    pub(crate) fn stats(&self) -> PipelineStats {
        PipelineStats {
            pipelines: self.map.lock().unwrap().len() as u64,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            compile_seconds: self.compile_nanos.load(Ordering::Relaxed) as f64 * 1e-9,
        }
    }
}

/// Compiles one compute pipeline, turning wgpu validation errors into `Error::Shader`.
pub(crate) fn compile(device: &wgpu::Device, label: &str, src: &str, entry: &str, checks: Checks) -> Result<Pipeline> {
    compile_with(device, label, src, entry, checks, true)
}

pub(crate) fn compile_with(
    device: &wgpu::Device,
    label: &str,
    src: &str,
    entry: &str,
    checks: Checks,
    has_bindings: bool,
) -> Result<Pipeline> {
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let desc = wgpu::ShaderModuleDescriptor { label: Some(label), source: wgpu::ShaderSource::Wgsl(src.into()) };
    let module = match checks {
        Checks::Bounded => device.create_shader_module(desc),
        // SAFETY: only built-in kernels ask for Unchecked, and each guards every index with an
        // explicit range check that the test-suite exercises (see `Checks`).
        Checks::Unchecked => unsafe { device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) },
    };
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(label),
        layout: None,
        module: &module,
        entry_point: Some(entry),
        compilation_options: Default::default(),
        cache: None,
    });
    if let Some(err) = pollster::block_on(scope.pop()) {
        return Err(Error::Shader(err.to_string()));
    }
    let layout = has_bindings.then(|| pipeline.get_bind_group_layout(0));
    Ok(Pipeline { pipeline, layout })
}

/// Fills `{{NAME}}` placeholders of a WGSL template.
pub(crate) fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut s = template.to_string();
    for (k, v) in vars {
        s = s.replace(&format!("{{{{{k}}}}}"), v);
    }
    debug_assert!(!s.contains("{{"), "unfilled placeholder in kernel: {s}");
    s
}
