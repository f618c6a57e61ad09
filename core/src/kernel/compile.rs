//! A custom kernel's compile job, run on its own thread (`kernel_limits::run_compile`): the
//! front end's checks (`session::kernel_front`), the bindings reflected from the naga module
//! (count, element type, size, `arrayLength` reads), the loop bounding of a session's kernel, and
//! the pipeline.

use crate::dtype::DType;
use crate::pipeline::{compile_with, Checks, Pipeline};
use crate::session::{kernel_cost, kernel_front, loop_guard, ShaderPolicy};
use crate::{Error, Result};
use naga::{AddressSpace, ScalarKind, StorageAccess, TypeInner};

/// One storage binding of a kernel, in binding order.
#[derive(Clone, Debug, PartialEq)]
pub struct StorageBinding {
    pub binding: u32,
    pub name: String,
    /// The tensor dtype the binding's elements are made of: the one scalar type of its scalars,
    /// vectors, matrices, atomics, or structs whose members all share one scalar type; `U32`
    /// when a struct mixes scalar types (see `raw_words`).
    pub dtype: Option<DType>,
    /// Smallest number of bytes a bound tensor must have.
    pub min_bytes: u64,
    pub writable: bool,
    /// The elements mix scalar types (`struct { a: f32, n: u32 }`): no tensor dtype matches them,
    /// so the binding takes raw 32-bit words, a u32 tensor, rather than any dtype at all.
    pub raw_words: bool,
    /// The kernel reads the binding's runtime-sized array with `arrayLength`: a tensor bound there
    /// must be whole 4-byte words, since bindings are rounded up to 4 bytes and `arrayLength`
    /// would count the padding (a 3-element f16 tensor would report 4).
    pub reads_array_length: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct UniformBinding {
    pub binding: u32,
    pub min_bytes: u64,
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

/// Everything a kernel compile needs, owned, so that it can run on a compile thread that may
/// outlive its caller (see `kernel_limits::run_compile`).
pub(super) struct CompileJob {
    pub(super) device: wgpu::Device,
    pub(super) has_f16: bool,
    pub(super) workgroup_limit: u32,
    pub(super) source: String,
    pub(super) entry: String,
    pub(super) label: String,
    pub(super) build_pipeline: bool,
    /// The session's shader policy when the kernel is compiled in a session: then the policy is
    /// checked and the loops are bounded (`session::loop_guard`).
    pub(super) sandbox: Option<ShaderPolicy>,
}

pub(super) struct Compiled {
    pub(super) storage: Vec<StorageBinding>,
    pub(super) uniform: Option<UniformBinding>,
    pub(super) workgroup_size: [u32; 3],
    pub(super) pipeline: Option<Pipeline>,
    /// Where the loop-budget buffer binds, for a sandboxed kernel with loops.
    pub(super) guard_binding: Option<u32>,
    pub(super) ops_per_pass: u64,
}

impl CompileJob {
    pub(super) fn run(self) -> Result<Compiled> {
        let (source, entry) = (self.source.as_str(), self.entry.as_str());
        let kernel_front::Front { module, info, ep_index, layouter, resolved_overrides } =
            kernel_front::check(source, entry, self.has_f16, self.sandbox.as_ref(), self.workgroup_limit)?;
        let ep = &module.entry_points[ep_index];
        let uses = info.get_entry_point(ep_index);
        let (length_read, length_untraced) = array_length_globals(&module);
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
                    let (min_bytes, runtime_sized) = match ty.inner {
                        TypeInner::Array { size: naga::ArraySize::Constant(n), stride, .. } => {
                            (n.get() as u64 * stride as u64, false)
                        }
                        TypeInner::Array { stride, .. } => (stride as u64, true),
                        _ => (layouter[var.ty].size as u64, ends_in_runtime_array(&module, var.ty)),
                    };
                    let (dtype, raw_words) = match leaf_scalar(&module, var.ty) {
                        Leaf::One(s) => (scalar_dtype(s), false),
                        Leaf::Mixed => (Some(DType::U32), true),
                        Leaf::None => (None, false),
                    };
                    storage.push(StorageBinding {
                        binding: rb.binding,
                        name,
                        dtype,
                        min_bytes,
                        writable: access.contains(StorageAccess::STORE),
                        raw_words,
                        reads_array_length: runtime_sized && (length_untraced || length_read.contains(&handle)),
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
        let bounded = match &self.sandbox {
            Some(_) => loop_guard::bound_loops(&module, entry)?,
            None => None,
        };
        let guard_binding = bounded.as_ref().map(|b| b.guard_binding);
        let ops_per_pass = kernel_cost::ops_per_pass(&module, ep_index)?;
        let has_bindings = !storage.is_empty() || uniform.is_some() || guard_binding.is_some();
        let invocations = Some(ep.workgroup_size.iter().product::<u32>().max(1));
        let pipeline = match (self.build_pipeline, bounded) {
            (false, _) => None,
            (true, None) => {
                // With overrides, the resolved module (what was checked) is compiled, not the source.
                let text = match resolved_overrides {
                    true => naga::back::wgsl::write_string(&module, &info, naga::back::wgsl::WriterFlags::empty())
                        .map_err(|e| Error::Internal(format!("writing the override-resolved kernel failed: {e}")))?,
                    false => source.to_string(),
                };
                Some(compile_with(
                    &self.device,
                    &self.label,
                    &text,
                    entry,
                    Checks::Bounded,
                    has_bindings,
                    invocations,
                    None,
                    // User kernels stay out of the persistent cache (`persistent_cache`).
                    None,
                )?)
            }
            (true, Some(b)) => {
                let info = kernel_front::validator(self.has_f16).validate(&b.module).map_err(|e| {
                    Error::Shader(format!(
                        "this kernel's loops cannot be given a budget: the bounded module does not \
                             validate ({})",
                        e.as_inner()
                    ))
                })?;
                let text = naga::back::wgsl::write_string(&b.module, &info, naga::back::wgsl::WriterFlags::empty())
                    .map_err(|e| Error::Internal(format!("writing the loop-bounded kernel failed: {e}")))?;
                Some(compile_with(
                    &self.device,
                    &self.label,
                    &text,
                    entry,
                    Checks::Bounded,
                    has_bindings,
                    invocations,
                    None,
                    // User kernels stay out of the persistent cache (`persistent_cache`).
                    None,
                )?)
            }
        };
        Ok(Compiled { storage, uniform, workgroup_size: ep.workgroup_size, pipeline, guard_binding, ops_per_pass })
    }
}

/// The scalar type(s) a type is made of.
enum Leaf {
    None,
    One(naga::Scalar),
    Mixed,
}

fn leaf_scalar(module: &naga::Module, ty: naga::Handle<naga::Type>) -> Leaf {
    match module.types[ty].inner {
        TypeInner::Scalar(s)
        | TypeInner::Atomic(s)
        | TypeInner::Vector { scalar: s, .. }
        | TypeInner::Matrix { scalar: s, .. } => Leaf::One(s),
        TypeInner::Array { base, .. } => leaf_scalar(module, base),
        TypeInner::Struct { ref members, .. } => {
            let mut acc = Leaf::None;
            for m in members {
                acc = match (acc, leaf_scalar(module, m.ty)) {
                    (Leaf::Mixed, _) | (_, Leaf::Mixed) => Leaf::Mixed,
                    (Leaf::None, x) | (x, Leaf::None) => x,
                    (Leaf::One(a), Leaf::One(b)) if a == b => Leaf::One(a),
                    (Leaf::One(_), Leaf::One(_)) => Leaf::Mixed,
                };
            }
            acc
        }
        _ => Leaf::None,
    }
}

/// Whether a struct's last member is (or ends in) a runtime-sized array.
fn ends_in_runtime_array(module: &naga::Module, ty: naga::Handle<naga::Type>) -> bool {
    match module.types[ty].inner {
        TypeInner::Array { size: naga::ArraySize::Dynamic, .. } => true,
        TypeInner::Struct { ref members, .. } => members.last().is_some_and(|m| ends_in_runtime_array(module, m.ty)),
        _ => false,
    }
}

/// The globals whose length `arrayLength` reads, and whether some `arrayLength` reads a pointer
/// that cannot be traced to one (then every runtime-sized binding counts as read).
fn array_length_globals(
    module: &naga::Module,
) -> (std::collections::HashSet<naga::Handle<naga::GlobalVariable>>, bool) {
    let mut read = std::collections::HashSet::new();
    let mut untraced = false;
    let functions = module.functions.iter().map(|(_, f)| f).chain(module.entry_points.iter().map(|e| &e.function));
    for f in functions {
        for (_, expr) in f.expressions.iter() {
            let naga::Expression::ArrayLength(mut e) = *expr else { continue };
            loop {
                match f.expressions[e] {
                    naga::Expression::GlobalVariable(g) => {
                        read.insert(g);
                        break;
                    }
                    naga::Expression::AccessIndex { base, .. } | naga::Expression::Access { base, .. } => e = base,
                    _ => {
                        untraced = true;
                        break;
                    }
                }
            }
        }
    }
    (read, untraced)
}
