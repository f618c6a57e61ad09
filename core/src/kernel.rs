//! Custom WGSL kernels: validated by naga (errors carry line:column), reflected so that every
//! dispatch is checked against the kernel's bindings (count, element type, size) before wgpu
//! sees it. User kernels always keep naga's runtime bounds checks.

use crate::device::{Binding, Device, MAX_PARAMS_BYTES};
use crate::dtype::DType;
use crate::pipeline::{compile_with, Checks, Pipeline};
use crate::tensor::Tensor;
use crate::{runtime, Error, Result};
use naga::{AddressSpace, ScalarKind, StorageAccess, TypeInner};
use std::sync::Arc;

/// One storage binding of a kernel, in binding order.
#[derive(Clone, Debug, PartialEq)]
pub struct StorageBinding {
    pub binding: u32,
    pub name: String,
    /// The tensor dtype the binding's elements are, when it is an array of scalars or vectors.
    pub dtype: Option<DType>,
    /// Smallest number of bytes a bound tensor must have.
    pub min_bytes: u64,
    pub writable: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct UniformBinding {
    pub binding: u32,
    pub min_bytes: u64,
}

pub struct Kernel {
    device: Arc<Device>,
    pipeline: Arc<Pipeline>,
    entry: String,
    storage: Vec<StorageBinding>,
    uniform: Option<UniformBinding>,
    workgroup_size: [u32; 3],
}

fn scalar_dtype(s: naga::Scalar) -> Option<DType> {
    match (s.kind, s.width) {
        (ScalarKind::Float, 4) => Some(DType::F32),
        (ScalarKind::Float, 2) => Some(DType::F16),
        (ScalarKind::Sint, 4) => Some(DType::I32),
        (ScalarKind::Uint, 4) => Some(DType::U32),
        _ => None,
    }
}

fn element_dtype(inner: &TypeInner) -> Option<DType> {
    match *inner {
        TypeInner::Scalar(s) | TypeInner::Atomic(s) | TypeInner::Vector { scalar: s, .. } => scalar_dtype(s),
        _ => None,
    }
}

fn shader_error(kind: &str, text: String, loc: Option<naga::SourceLocation>) -> Error {
    match loc {
        Some(l) => Error::Shader(format!("{}:{}: {kind}: {text}", l.line_number, l.line_position)),
        None => Error::Shader(format!("{kind}: {text}")),
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("entry", &self.entry)
            .field("storage", &self.storage)
            .field("uniform", &self.uniform)
            .field("workgroup_size", &self.workgroup_size)
            .finish()
    }
}

impl Kernel {
    pub fn new(source: &str, entry: &str) -> Result<Kernel> {
        Self::new_on(&runtime::device()?, source, entry)
    }

    pub fn new_on(device: &Arc<Device>, source: &str, entry: &str) -> Result<Kernel> {
        device.check_alive()?;
        let module = naga::front::wgsl::parse_str(source).map_err(|e| {
            let text = e.message().to_string();
            shader_error("parse error", text, e.location(source))
        })?;
        let mut caps = naga::valid::Capabilities::empty();
        if device.has_f16() {
            caps |= naga::valid::Capabilities::SHADER_FLOAT16;
        }
        let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
            .validate(&module)
            .map_err(|e| {
                let text = e.as_inner().to_string();
                let mut full = text.clone();
                let mut src = e.as_inner() as &dyn std::error::Error;
                while let Some(next) = src.source() {
                    full += &format!(": {next}");
                    src = next;
                }
                shader_error("validation error", full, e.location(source))
            })?;
        let (ep_index, ep) = module
            .entry_points
            .iter()
            .enumerate()
            .find(|(_, ep)| ep.name == entry)
            .ok_or_else(|| {
                let names: Vec<_> = module.entry_points.iter().map(|e| e.name.as_str()).collect();
                Error::Shader(format!("no entry point named {entry:?} (the module has {names:?})"))
            })?;
        if ep.stage != naga::ShaderStage::Compute {
            return Err(Error::Shader(format!("entry point {entry:?} is not a @compute function")));
        }
        let mut layouter = naga::proc::Layouter::default();
        layouter
            .update(module.to_ctx())
            .map_err(|e| Error::Shader(format!("cannot lay out the module's types: {e}")))?;
        let uses = info.get_entry_point(ep_index);
        let mut storage = Vec::new();
        let mut uniform = None;
        for (handle, var) in module.global_variables.iter() {
            let Some(rb) = &var.binding else { continue };
            if uses[handle].is_empty() {
                continue;
            }
            if rb.group != 0 {
                return Err(Error::Shader(format!(
                    "binding {:?} is in group {}: Kiln kernels use @group(0) only",
                    var.name, rb.group
                )));
            }
            let ty = &module.types[var.ty];
            let name = var.name.clone().unwrap_or_default();
            match var.space {
                AddressSpace::Storage { access } => {
                    let (dtype, min_bytes) = match ty.inner {
                        TypeInner::Array { base, size, stride } => {
                            let n = match size {
                                naga::ArraySize::Constant(n) => n.get() as u64,
                                _ => 1,
                            };
                            (element_dtype(&module.types[base].inner), n * stride as u64)
                        }
                        _ => (element_dtype(&ty.inner), layouter[var.ty].size as u64),
                    };
                    storage.push(StorageBinding {
                        binding: rb.binding,
                        name,
                        dtype,
                        min_bytes,
                        writable: access.contains(StorageAccess::STORE),
                    });
                }
                AddressSpace::Uniform => {
                    if uniform.is_some() {
                        return Err(Error::Shader("Kiln kernels take at most one uniform binding".into()));
                    }
                    uniform = Some(UniformBinding { binding: rb.binding, min_bytes: layouter[var.ty].size as u64 });
                }
                _ => {
                    return Err(Error::Shader(format!(
                        "binding {name:?} is a {:?}: Kiln kernels bind storage buffers and one uniform",
                        var.space
                    )))
                }
            }
        }
        storage.sort_by_key(|b| b.binding);
        let key = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            source.hash(&mut h);
            format!("user:{:016x}:{entry}", h.finish())
        };
        let has_bindings = !storage.is_empty() || uniform.is_some();
        let pipeline = match device.pipelines.get_cached(&key) {
            Some(p) => p,
            None => {
                let p = Arc::new(compile_with(&device.device, &key, source, entry, Checks::Bounded, has_bindings)?);
                device.pipelines.insert(&key, p)
            }
        };
        Ok(Kernel {
            device: device.clone(),
            pipeline,
            entry: entry.to_string(),
            storage,
            uniform,
            workgroup_size: ep.workgroup_size,
        })
    }

    pub fn entry(&self) -> &str {
        &self.entry
    }
    pub fn storage_bindings(&self) -> &[StorageBinding] {
        &self.storage
    }
    pub fn uniform_binding(&self) -> Option<&UniformBinding> {
        self.uniform.as_ref()
    }
    pub fn workgroup_size(&self) -> [u32; 3] {
        self.workgroup_size
    }

    /// Binds `tensors` to the storage bindings in binding order, `uniforms` to the uniform
    /// binding, and queues `workgroups` workgroups.
    pub fn dispatch(&self, tensors: &[&Tensor], uniforms: Option<&[u8]>, workgroups: [u32; 3]) -> Result<()> {
        if tensors.len() != self.storage.len() {
            return Err(Error::InvalidArgument(format!(
                "kernel {:?} has {} storage bindings but {} tensors were given",
                self.entry,
                self.storage.len(),
                tensors.len()
            )));
        }
        for (i, (t, b)) in tensors.iter().zip(&self.storage).enumerate() {
            if !Arc::ptr_eq(t.device(), &self.device) {
                return Err(Error::InvalidArgument(format!("tensor {i} lives on another device than the kernel")));
            }
            if let Some(dt) = b.dtype {
                if dt != t.dtype() {
                    return Err(Error::DTypeMismatch(format!(
                        "binding {} ({}) holds {dt} but tensor {i} is {}",
                        b.binding,
                        b.name,
                        t.dtype()
                    )));
                }
            }
            if (t.nbytes() as u64) < b.min_bytes {
                return Err(Error::InvalidArgument(format!(
                    "binding {} ({}) needs at least {} bytes but tensor {i} has {}",
                    b.binding,
                    b.name,
                    b.min_bytes,
                    t.nbytes()
                )));
            }
            for (j, (u, c)) in tensors.iter().zip(&self.storage).enumerate().skip(i + 1) {
                if t.shares_buffer(u) && (b.writable || c.writable) {
                    return Err(Error::InvalidArgument(format!(
                        "tensors {i} and {j} share one buffer and one of their bindings is writable"
                    )));
                }
            }
        }
        let params = match (&self.uniform, uniforms) {
            (Some(u), Some(bytes)) => {
                if (bytes.len() as u64) < u.min_bytes {
                    return Err(Error::InvalidArgument(format!(
                        "the uniform binding needs {} bytes, {} given",
                        u.min_bytes,
                        bytes.len()
                    )));
                }
                if bytes.len() > MAX_PARAMS_BYTES {
                    return Err(Error::InvalidArgument(format!("uniforms are limited to {MAX_PARAMS_BYTES} bytes")));
                }
                Some((u.binding, bytes))
            }
            (Some(u), None) => {
                return Err(Error::InvalidArgument(format!(
                    "the kernel has a uniform binding ({} bytes) but no uniforms were given",
                    u.min_bytes
                )))
            }
            (None, Some(b)) if !b.is_empty() => {
                return Err(Error::InvalidArgument("uniforms were given but the kernel has no uniform binding".into()))
            }
            (None, _) => None,
        };
        let bindings: Vec<Binding<'_>> = tensors
            .iter()
            .zip(&self.storage)
            .map(|(t, b)| Binding {
                slot: b.binding,
                buffer: t.raw(),
                size: Some((t.nbytes() as u64).next_multiple_of(4).max(4)),
            })
            .collect();
        self.device.dispatch(&self.pipeline, &bindings, params, workgroups)
    }
}
